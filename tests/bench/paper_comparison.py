#!/usr/bin/env python3
"""The breadth-first paper's Megatron-LM comparison with tensor parallelism: the 52B GPT on 64
A100-80GB, best predicted throughput of each family per batch per GPU, the table and figure of
docs/results.md ("Against the paper's claim").

For every batch per GPU β (2048-token samples per GPU per step, micro-batches of one sample,
so M = 64·β / D micro-batches per replica), compiles with `conduit-compile --emit=report`:

- Megatron-LM: tensor T ∈ {4, 8} inside a node, P·D·T = 64, interleaved 1F1B (depth-first
  with Megatron's group of P micro-batches, V ∈ {2, 4, 8}) or plain 1F1B (V = 1), a sharded
  optimizer, sequence parallelism on and off;
- breadth-first: T ∈ {1, 2, 4, 8}, P ∈ {1, 2, 4, 8}, V ∈ {1, 2, 4, 8}, full sharding,
  sequence parallelism on where T > 1;

both rank orders where they differ (T < 8, P > 1 and D > 1). Activation checkpointing is the
least recomputation that fits: none, else selective, else full (the time only grows along that
list, so the first that fits is the best of the three). Peak memory never falls as M grows, so
a layout and checkpointing that do not fit at one β are not compiled again at a larger one.
Compiles run one at a time. Prints the table (best of each family per β, with its
configuration), the gain of breadth-first over the best Megatron-LM configuration, and with
--svg writes the figure (TFLOP/s per GPU against β, one line per family).

  tests/bench/paper_comparison.py --compiler build/bin/conduit-compile [--svg docs/FILE.svg]
      [--set cluster.efficiency=0.4 ...] [--batches 1,2,4,8,16] [--checkpointing full]
      [--no-sequence-parallel] [--megatron-only] [--cache FILE]

--set is passed to every compile (a changed cluster figure, to see what moves the gain);
--checkpointing restricts the modes tried (full: recomputation as older Megatron-LM needed);
--no-sequence-parallel turns it off for both families (the tensor collectives then exposed);
--megatron-only applies those two to Megatron-LM alone;
--cache records every compile's result in FILE and reuses it on the next run (delete it when
the compiler or the job changes); --peak-tflops is the bound every reported TFLOP/s per GPU
must stay under (the job's peak), else the script stops naming the configuration.
"""

import argparse
import json
import math
import os
import subprocess
import sys

GPUS = 64

# (name, colour, predicate on a result): the table's rows and the figure's lines.
FAMILIES = [
    ("breadth-first, full sharding", "#4c78a8", lambda c: c["family"] == "breadth-first"),
    ("breadth-first, full sharding, T = 1", "#9ecae9",
     lambda c: c["family"] == "breadth-first" and c["tensor"] == 1),
    ("Megatron-LM, best (T = 4 or 8)", "#f58518",
     lambda c: c["family"] == "megatron"),
    ("Megatron-LM, sequence parallelism off", "#ffbf79",
     lambda c: c["family"] == "megatron" and not c["sequence_parallel"]),
    ("Megatron-LM, plain 1F1B (V = 1)", "#e45756",
     lambda c: c["family"] == "megatron" and c["stages_per_device"] == 1),
]
BREADTH_FIRST, MEGATRON = FAMILIES[0][0], FAMILIES[2][0]


def layouts(beta, args):
    """Every configuration but the checkpointing, for a batch per GPU: dicts of job keys."""
    for family, tensors, pipelines, stages in [
        ("megatron", [8, 4], [1, 2, 4, 8, 16], [1, 2, 4, 8]),
        ("breadth-first", [8, 4, 2, 1], [1, 2, 4, 8], [1, 2, 4, 8]),
    ]:
        for t in tensors:
            for p in pipelines:
                if p * t > GPUS:
                    continue
                d = GPUS // (p * t)
                orders = ["pipeline-inner", "data-inner"] if t < 8 and p > 1 and d > 1 else [
                    "pipeline-inner"]
                parallel = [False, True] if family == "megatron" and t > 1 else [t > 1]
                if args.no_sequence_parallel and restricted(args, family):
                    parallel = [False]
                for v in stages:
                    if p * v > 66 or (p == 1 and v > 1 and family == "megatron"):
                        continue  # more stages than layers; interleaving needs a pipeline
                    for order in orders:
                        for sp in parallel:
                            yield {
                                "family": family, "tensor": t, "pipeline": p, "data": d,
                                "stages_per_device": v, "rank_order": order,
                                "sequence_parallel": sp, "microbatches": GPUS * beta // d,
                            }


def restricted(args, family):
    """Whether --checkpointing and --no-sequence-parallel apply to the family."""
    return not args.megatron_only or family == "megatron"


def job_sets(c, checkpointing):
    if c["family"] == "megatron":
        schedule = "1f1b" if c["stages_per_device"] == 1 else "depth-first"
        sharding = "optimizer"
    else:
        schedule, sharding = "breadth-first", "full"
    sets = {
        "parallelism.tensor": c["tensor"], "parallelism.pipeline": c["pipeline"],
        "parallelism.data": c["data"], "parallelism.stages_per_device": c["stages_per_device"],
        "parallelism.schedule": schedule, "parallelism.sharding": sharding,
        "parallelism.microbatches": c["microbatches"], "parallelism.microbatch_size": 1,
        "parallelism.rank_order": c["rank_order"],
        "parallelism.activation_checkpointing": checkpointing,
    }
    if c["tensor"] > 1:
        sets["parallelism.sequence_parallel"] = "true" if c["sequence_parallel"] else "false"
    return [f"{k}={v}" for k, v in sets.items()]


def compile_one(args, sets, cache):
    key = json.dumps([os.path.basename(args.job)] + args.set + sets)
    if key in cache:
        return cache[key]
    command = [args.compiler, args.job, "--emit=report"]
    for s in args.set + sets:
        command += ["--set", s]
    out = subprocess.run(command, capture_output=True, text=True)
    if out.returncode == 0:
        r = json.loads(out.stdout)
        result = {
            "tokens_per_s": r["tokens_per_s"], "tflops_per_gpu": r["tflops_per_gpu"],
            "step_time_s": r["step_time_s"], "bubble_fraction": r["bubble_fraction"],
            "peak_memory_bytes": max(x["peak_memory_bytes"] for x in r["ranks"]),
            "tensor_idle_s": max(x["idle"].get("tensor_s", 0) for x in r["ranks"]),
        }
    else:
        error = out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "no output"
        result = {"error": error, "memory": "at its peak" in error}
    cache[key] = result
    return result


def describe(c):
    parts = [f"T={c['tensor']} P={c['pipeline']} D={c['data']} V={c['stages_per_device']}"]
    if c["tensor"] > 1:
        parts.append("SP" if c["sequence_parallel"] else "no SP")
    parts.append(f"ckpt {c['checkpointing']}")
    if c["tensor"] < 8 and c["pipeline"] > 1 and c["data"] > 1:
        parts.append(c["rank_order"])
    return ", ".join(parts)


def search(args, batches, cache):
    """All fitting results per β: a list of (configuration, result)."""
    found = {}
    too_big = set()  # (layout without M, checkpointing) that did not fit at a smaller β
    refused = []
    for beta in batches:
        found[beta] = []
        for c in layouts(beta, args):
            layout = json.dumps({k: v for k, v in c.items() if k != "microbatches"})
            modes = args.checkpointing if restricted(args, c["family"]) else "none,selective,full"
            for checkpointing in modes.split(","):
                if (layout, checkpointing) in too_big:
                    continue
                r = compile_one(args, job_sets(c, checkpointing), cache)
                if "error" not in r:
                    if r["tflops_per_gpu"] > args.peak_tflops:
                        sys.exit(f"paper_comparison: {r['tflops_per_gpu']:.0f} TFLOP/s per GPU "
                                 f"reported above the {args.peak_tflops:.0f} peak for β = {beta}: "
                                 f"{' '.join(job_sets(c, checkpointing))}")
                    found[beta].append((dict(c, checkpointing=checkpointing), r))
                    break
                if r["memory"]:
                    too_big.add((layout, checkpointing))
                else:
                    refused.append((beta, c, checkpointing, r["error"]))
        if args.cache:
            with open(args.cache, "w") as f:
                json.dump(cache, f, indent=0, sort_keys=True)
    for beta, c, checkpointing, error in refused:
        print(f"refused (β = {beta}, {describe(dict(c, checkpointing=checkpointing))}): {error}",
              file=sys.stderr)
    return found


def best(found, predicate):
    fitting = [(c, r) for c, r in found if predicate(c)]
    # Highest tokens/s; ties go to the smaller peak memory, then the description.
    return max(fitting, key=lambda cr: (round(cr[1]["tokens_per_s"], 6),
                                        -cr[1]["peak_memory_bytes"], describe(cr[0])),
               default=None)


def svg(table, batches, title):
    """A line chart of TFLOP/s per GPU against the batch per GPU (log scale), one line per
    family; the same input gives the same bytes."""
    left, top, width, height = 70, 50, 460, 300
    values = [e[1]["tflops_per_gpu"] for e in table.values() if e] or [1]
    step = next(s for s in [10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000]
                if max(values) / s <= 8 or s == 2000)
    ymax = step * math.ceil(max(values) / step)
    span = max(1, math.log2(batches[-1]) - math.log2(batches[0]))

    def x(beta):
        return left + width * (math.log2(beta) - math.log2(batches[0])) / span

    def y(value):
        return top + height * (1 - value / ymax)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 320}" '
           f'height="{top + height + 60}" font-family="sans-serif">',
           '<rect width="100%" height="100%" fill="#fff"/>',
           f'<text x="{left}" y="22" font-size="14" font-weight="bold">{title}</text>',
           f'<text x="{left}" y="38" font-size="11" fill="#555">best predicted configuration '
           'of each family that fits in 80 GiB (tests/bench/paper_comparison.py)</text>']
    for i in range(0, ymax + 1, step):
        out.append(f'<line x1="{left}" y1="{y(i):.1f}" x2="{left + width}" y2="{y(i):.1f}" '
                   'stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y(i) + 4:.1f}" font-size="11" '
                   f'text-anchor="end">{i}</text>')
    for beta in batches:
        out.append(f'<line x1="{x(beta):.1f}" y1="{top}" x2="{x(beta):.1f}" '
                   f'y2="{top + height}" stroke="#ddd"/>')
        out.append(f'<text x="{x(beta):.1f}" y="{top + height + 16}" font-size="11" '
                   f'text-anchor="middle">{beta}</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{width}" height="{height}" fill="none" '
               'stroke="#333"/>')
    out.append(f'<text x="{left + width / 2}" y="{top + height + 40}" font-size="12" '
               'text-anchor="middle">batch per GPU (samples of 2048 tokens per step, log '
               'scale)</text>')
    out.append(f'<text transform="translate(18 {top + height / 2}) rotate(-90)" '
               'font-size="12" text-anchor="middle">model TFLOP/s per GPU</text>')
    for n, (name, colour, _) in enumerate(FAMILIES):
        points = [(x(b), y(table[(name, b)][1]["tflops_per_gpu"])) for b in batches
                  if table.get((name, b))]
        if points:
            path = " ".join(f"{'M' if i == 0 else 'L'}{px:.1f},{py:.1f}"
                            for i, (px, py) in enumerate(points))
            out.append(f'<path d="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
            out += [f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{colour}"/>'
                    for px, py in points]
        ly = top + 10 + 20 * n
        out.append(f'<line x1="{left + width + 16}" y1="{ly}" x2="{left + width + 40}" '
                   f'y2="{ly}" stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{left + width + 46}" y="{ly + 4}" font-size="11">{name}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--compiler", required=True)
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--job", default=os.path.join(here, "../../testdata/jobs/gpt-52b-bfs.json"))
    parser.add_argument("--batches", default="1,2,4,8,16")
    parser.add_argument("--set", action="append", default=[])
    parser.add_argument("--checkpointing", default="none,selective,full")
    parser.add_argument("--no-sequence-parallel", action="store_true")
    parser.add_argument("--megatron-only", action="store_true")
    parser.add_argument("--cache")
    parser.add_argument("--svg")
    parser.add_argument("--peak-tflops", type=float, default=312)
    args = parser.parse_args()

    batches = [int(b) for b in args.batches.split(",")]
    cache = {}
    if args.cache and os.path.exists(args.cache):
        with open(args.cache) as f:
            cache = json.load(f)
    found = search(args, batches, cache)
    table = {(name, b): best(found[b], predicate) for name, _, predicate in FAMILIES
             for b in batches}

    print("| family | " + " | ".join(f"β = {b}" for b in batches) + " |")
    print("|---|" + "---|" * len(batches))
    for name, _, _ in FAMILIES:
        cells = []
        for b in batches:
            entry = table[(name, b)]
            cells.append("does not fit" if entry is None else
                         f"{entry[1]['tokens_per_s'] / 1000:.1f} k, "
                         f"{entry[1]['tflops_per_gpu']:.0f} TF ({describe(entry[0])})")
        print(f"| {name} | " + " | ".join(cells) + " |")
    gains = []
    for b in batches:
        bfs, megatron = table[(BREADTH_FIRST, b)], table[(MEGATRON, b)]
        gains.append("n/a" if not bfs or not megatron else
                     f"{100 * (bfs[1]['tokens_per_s'] / megatron[1]['tokens_per_s'] - 1):+.1f}%")
    print("| breadth-first over Megatron-LM | " + " | ".join(gains) + " |")
    if args.svg:
        title = "52B GPT on 64 A100-80GB: breadth-first against Megatron-LM"
        if args.set:
            title += " (" + ", ".join(args.set) + ")"
        with open(args.svg, "w") as f:
            f.write(svg(table, batches, title))


if __name__ == "__main__":
    main()
