#!/usr/bin/env python3
"""Predicted throughput of the 52B GPT on 64 A100-80GB for each schedule family and batch
size, the table of docs/results.md.

For every number of micro-batches M (one 2048-token sample each, 8 replicas), compiles every
combination of schedule, stages per device and sharding with `conduit-compile --sweep` and
prints, per family, the best tokens/s among the configurations that fit in memory.

  tests/bench/paper_results.py --compiler build/bin/conduit-compile
"""

import argparse
import json
import os
import subprocess

FAMILIES = [
    ("breadth-first, full sharding", "breadth-first", {"full"}),
    ("depth-first, full sharding", "depth-first", {"full"}),
    ("depth-first, sharded optimizer (Megatron-LM)", "depth-first", {"optimizer"}),
    ("1F1B, full sharding", "1f1b", {"full"}),
    ("1F1B, sharded optimizer (Megatron-LM)", "1f1b", {"optimizer"}),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--compiler", required=True)
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--job", default=os.path.join(here, "../../testdata/jobs/gpt-52b-bfs.json"))
    parser.add_argument("--microbatches", default="8,16,32,64,128,256")
    args = parser.parse_args()

    counts = [int(m) for m in args.microbatches.split(",")]
    table = {}
    for m in counts:
        out = subprocess.run(
            [args.compiler, args.job, "--set", f"parallelism.microbatches={m}",
             "--sweep", "parallelism.schedule=breadth-first,depth-first,1f1b",
             "--sweep", "parallelism.stages_per_device=1,2,4,8",
             "--sweep", "parallelism.sharding=full,optimizer", "--emit=report"],
            check=True, capture_output=True, text=True).stdout
        for row in json.loads(out):
            if "report" not in row:
                continue
            c = row["config"]
            for name, schedule, shardings in FAMILIES:
                if c["parallelism.schedule"] == schedule and c["parallelism.sharding"] in shardings:
                    best = table.get((name, m))
                    if best is None or row["report"]["tokens_per_s"] > best[0]:
                        table[(name, m)] = (row["report"]["tokens_per_s"],
                                            c["parallelism.stages_per_device"],
                                            row["report"]["tflops_per_gpu"])

    print("| configuration | " + " | ".join(f"M = {m} (β = {m // 8})" for m in counts) + " |")
    print("|---|" + "---|" * len(counts))
    # The best of each column in bold (ties too: at M = P the looped schedules are one order).
    best = {m: max((table[(n, m)][0] for n, _, _ in FAMILIES if (n, m) in table), default=None)
            for m in counts}
    for name, _, _ in FAMILIES:
        cells = []
        for m in counts:
            entry = table.get((name, m))
            if entry is None:
                cells.append("does not fit")
                continue
            tokens = f"{entry[0] / 1000:.1f} k"
            if entry[0] >= best[m] * (1 - 1e-9):
                tokens = f"**{tokens}**"
            cells.append(f"{tokens} (V={entry[1]}, {entry[2]:.0f} TF)")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print()
    for m in counts:
        bfs = table.get(("breadth-first, full sharding", m))
        megatron = max((table[(n, m)][0] for n in
                        ("depth-first, sharded optimizer (Megatron-LM)",
                         "1F1B, sharded optimizer (Megatron-LM)") if (n, m) in table),
                       default=None)
        if bfs and megatron:
            print(f"M = {m}: breadth-first vs best Megatron-LM-style: "
                  f"{100 * (bfs[0] / megatron - 1):+.0f}%")


if __name__ == "__main__":
    main()
