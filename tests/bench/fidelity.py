#!/usr/bin/env python3
"""How close the cost model comes to published measured training runs.

Each run of fidelity_runs.json (beside this script) is a published measurement with its
source: the model (a transformer's keys, or `path` to a Hugging Face config committed in the
repository, relative to this folder), the parallel configuration, the device (`device` names
one written as a preset with overrides), the data type, the attention kernel, how the
element-wise operations ran (printed when eager), for a mixture
of experts whether the run hid its expert all-to-alls behind compute (`overlap_all_to_alls`:
false compiles with --overlap-all-to-alls=false), and the published throughput (tokens/s per GPU, or the iteration time from which it
follows) and peak memory where the source gives one. This script writes each as a job,
compiles it with conduit-compile --emit=report (nothing is trained) and compares the
predicted tokens/s per GPU and the worst rank's peak memory with the published figures.
Comparing tokens/s keeps the sources' FLOP conventions (model or hardware FLOPs, causal or
full attention, recomputation counted or not) out of the comparison. A run whose
configuration the memory plan refuses is a miss, and counts as a 100% error.

Usage: fidelity.py --compiler BUILD/bin/conduit-compile [--markdown] [--only ID,...]
       [--summary-only]
Prints a table (Markdown with --markdown) and a summary line, then the same for the dense runs
and for the mixtures of experts when both are selected; exit code 0 whatever the
figures (the targets are stated in docs/fidelity.md, which holds the table), 1 if a run
cannot be compiled for another reason than memory.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
RUNS = os.path.join(HERE, "fidelity_runs.json")
GIB = 2.0 ** 30


def published_tokens(run):
    """Published tokens/s per GPU: printed, or the global batch's tokens over the iteration
    time and the GPUs."""
    pub = run["published"]
    if "tokens_per_s_per_gpu" in pub:
        return pub["tokens_per_s_per_gpu"]
    job = run["job"]
    par = job["parallelism"]
    samples = par["data"] * par["microbatches"] * par["microbatch_size"]
    tokens = samples * job["model"]["seq_length"]
    return tokens / pub["iteration_time_s"] / run["gpus"]


def predict(compiler, run, work):
    """(tokens/s per GPU, peak memory in GiB) predicted, or (None, reason) for a miss."""
    job = dict(run["job"])
    model = dict(job["model"])
    if "path" in model:
        # A Hugging Face config committed in the repository, named relative to this folder.
        model["kind"] = "hf"
        model["path"] = os.path.normpath(os.path.join(HERE, model["path"]))
    else:
        model["kind"] = "transformer"
    job["model"] = model
    path = os.path.join(work, run["id"] + ".json")
    with open(path, "w") as f:
        json.dump(job, f)
    command = [compiler, path, "--emit=report"]
    if run.get("overlap_all_to_alls") is False:
        command.append("--overlap-all-to-alls=false")
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        message = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else ""
        if "but the device has" in message:
            needs = message.split(" needs ", 1)[1].split(" at its peak")[0]
            has = message.split("but the device has ", 1)[1].split(":")[0]
            return None, f"needs {needs} of {has}"
        raise RuntimeError(f"{run['id']}: conduit-compile failed:\n{result.stderr}")
    report = json.loads(result.stdout)
    par = job["parallelism"]
    world = par["pipeline"] * par["data"] * par.get("tensor", 1)
    peak = max(rank["peak_memory_bytes"] for rank in report["ranks"])
    return report["tokens_per_s"] / world, peak / GIB


def configuration(run):
    job = run["job"]
    par = job["parallelism"]
    model = job["model"]
    parts = [f"{run['gpus']} x {run.get('device', job['cluster']['preset'])}",
             f"T{par.get('tensor', 1)} P{par['pipeline']} D{par['data']}"
             + (f" E{par['expert']}" if par.get("expert", 1) > 1 else "")]
    if par.get("stages_per_device", 1) > 1:
        parts.append(f"V{par['stages_per_device']}")
    parts.append(f"mb {par['microbatch_size']} x {par['microbatches']}")
    if par.get("schedule") in ("dualpipev", "zbv"):
        parts.append(par["schedule"])
    if "overlap_all_to_alls" in run:
        parts.append("a2a overlap" if run["overlap_all_to_alls"] else "no a2a overlap")
    moe = model.get("moe", {})
    if moe.get("dispatch") == "per_node":
        parts.append("fp8 per-node dispatch" if moe.get("fp8_dispatch") else "per-node dispatch")
    if moe.get("kernels") == "megatron":
        parts.append("Megatron experts")
    parts.append(f"s {model['seq_length']}")
    if par.get("sharding", "none") != "none":
        parts.append(f"shard {par['sharding']}"
                     + (", reduced each run" if par.get("gradient_reduction") == "run" else "")
                     + (", fp32 shards as master"
                        if job["training"].get("master_weights") == "parameters" else "")
                     + (", bf16 Adam moments"
                        if job["training"].get("adam_moments") == "bf16" else ""))
    kernels = job["training"].get("optimizer_kernels", "fused")
    if kernels != "fused":
        parts.append("Adam " + ("foreach" if kernels == "foreach" else "per tensor"))
    if par.get("activation_checkpointing", "none") != "none":
        modules = par.get("recompute_modules")
        parts.append(f"ckpt {par['activation_checkpointing']}" +
                     (f" ({', '.join(modules)})" if modules else ""))
    if par.get("sequence_parallel"):
        parts.append("SP" if par.get("tensor_comm_overlap", True) else "SP, TP comm exposed")
    dtype = job["training"].get("dtype", "bf16")
    notes = []
    if job["training"].get("fp8_scaling") == "current":
        notes.append("current scaling")
    if job["training"].get("fp8_saved_inputs"):
        notes.append(f"{job['training']['fp8_saved_inputs']} saved inputs")
    parts.append(dtype + (f" ({', '.join(notes)})" if notes else ""))
    parts.append(model.get("attention", "flash"))
    elementwise = model.get("elementwise", "fused")
    if elementwise != "fused":
        parts.append("eager ops" if elementwise == "eager" else "eager ops, fused norm")
    return ", ".join(parts)


def is_moe(run):
    """Whether the run's model is a mixture of experts: a `moe` section, or a Hugging Face
    config with routed experts."""
    model = run["job"]["model"]
    if "moe" in model:
        return True
    if "path" not in model:
        return False
    with open(os.path.join(HERE, model["path"])) as f:
        config = json.load(f)
    return any(config.get(key) for key in ("num_experts", "n_routed_experts", "num_local_experts"))


def summary(label, runs, errors, misses, memory_errors):
    """One line: the median and worst throughput error (a miss counts 100%), how many within
    10%, how many refused, and the memory errors where published."""
    sources = len({run["source"] for run in runs})
    line = (f"{label}: {len(runs)} runs from {sources} sources: throughput median |error| "
            f"{100 * statistics.median(errors):.1f}%, worst {100 * max(errors):.1f}%, "
            f"{sum(e <= 0.10 for e in errors)} within 10%, {misses} refused by the memory plan")
    if memory_errors:
        line += (f"; memory ({len(memory_errors)} published) median |error| "
                 f"{100 * statistics.median(memory_errors):.1f}%, worst "
                 f"{100 * max(memory_errors):.1f}%")
    return line


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compiler", required=True)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--summary-only", action="store_true")
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    with open(RUNS) as f:
        runs = json.load(f)
    if args.only:
        wanted = set(args.only.split(","))
        unknown = sorted(wanted - {run["id"] for run in runs})
        if unknown:
            parser.error(f"--only names no run with the id {', '.join(unknown)} "
                         f"(ids are in {os.path.basename(RUNS)})")
        runs = [run for run in runs if run["id"] in wanted]

    rows, errors, memory_errors, misses = [], [], [], 0
    with tempfile.TemporaryDirectory() as work:
        for run in runs:
            published = published_tokens(run)
            predicted, peak = predict(args.compiler, run, work)
            if predicted is None:
                misses += 1
                errors.append(1.0)
                rows.append((run, published, None, None, peak))
                continue
            error = predicted / published - 1
            errors.append(abs(error))
            memory = run["published"].get("memory_gib")
            memory_error = None
            if memory:
                memory_error = peak / memory - 1
                memory_errors.append(abs(memory_error))
            rows.append((run, published, predicted, error, (peak, memory, memory_error)))

    if not args.summary_only:
        print_table(rows, args.markdown)
    print(summary("fidelity", runs, errors, misses, memory_errors))
    # The same over the dense runs and over the mixtures of experts, when both are there.
    kinds = [is_moe(run) for run in runs]
    if len(set(kinds)) == 2:
        for label, moe in (("  dense", False), ("  mixtures of experts", True)):
            part = [i for i, k in enumerate(kinds) if k == moe]
            part_memory = [abs(rows[i][4][2]) for i in part
                           if rows[i][2] is not None and rows[i][4][2] is not None]
            print(summary(label, [runs[i] for i in part], [errors[i] for i in part],
                          sum(rows[i][2] is None for i in part), part_memory))
    return 0


def print_table(rows, markdown):
    header = ["run", "source", "configuration", "published tok/s/GPU", "predicted",
              "error", "memory published / predicted GiB"]
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
    for run, published, predicted, error, extra in rows:
        source = f"[{run['source'].split(' (')[0]}]({run['url'].split(' ')[0]})"
        if predicted is None:
            cells = [run["id"], source, configuration(run), f"{published:,.0f}",
                     f"refused ({extra})", "miss", "—"]
        else:
            peak, memory, memory_error = extra
            mem = (f"{memory:.1f} / {peak:.1f} ({100 * memory_error:+.0f}%)" if memory
                   else f"— / {peak:.1f}")
            cells = [run["id"], source, configuration(run), f"{published:,.0f}",
                     f"{predicted:,.0f}", f"{100 * error:+.1f}%", mem]
        if markdown:
            print("| " + " | ".join(str(c) for c in cells) + " |")
        else:
            print("  ".join(str(c) for c in cells if not str(c).startswith("[")))


if __name__ == "__main__":
    sys.exit(main())
