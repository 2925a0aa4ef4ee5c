#!/usr/bin/env python3
"""The tables of docs/results.md "What conduit-tune recommends": one conduit-tune search per
job, GPU count and global batch (the tensor size held at 1), each row the recommendation with
its predicted step, throughput, peak memory and how far behind the best of every other
schedule is, and the search's wall time.

  tests/bench/tune_table.py --tuner build/bin/conduit-tune [--only llama2-7b:8]
"""

import argparse
import json
import os
import subprocess
import tempfile

# (job, GPUs, global batches)
SEARCHES = [
    ("gpt-52b-bfs", 64, [64, 128, 256, 512, 1024, 2048]),
    ("gpt-52b-bfs", 512, [512, 1024, 4096]),
    ("llama2-7b", 8, [8, 32, 128, 512]),
    ("llama2-7b", 64, [64, 256, 1024, 4096]),
]
SCHEDULES = ["gpipe", "1f1b", "depth-first", "breadth-first", "zb-h1", "interleaved-zb", "zbv",
             "dualpipev"]
GIB = 1024 ** 3


def describe(config):
    """A configuration as the tables write it: "P=8 D=8 V=8, M=8×1, depth-first N=8 split,
    ckpt none, full (window 2), data-inner"."""
    par = {k.split(".", 1)[1]: v for k, v in config.items()}
    p, d = par["pipeline"], par["data"]
    words = [f"P={p} D={d} V={par['stages_per_device']}",
             f"M={par['microbatches']}×{par['microbatch_size']}"]
    schedule = par["schedule"]
    if schedule == "depth-first" and "group_size" in par:
        schedule += f" N={par['group_size']}"
    if par.get("split_backward"):
        schedule += " split"
    words.append(schedule)
    ckpt = par["activation_checkpointing"]
    if ckpt == "selective" and par.get("recompute_modules"):
        ckpt += " (" + "+".join(par["recompute_modules"]) + ")"
    words.append("ckpt " + ckpt)
    sharding = par["sharding"]
    if "fsdp_window" in par:
        sharding += f" (window {par['fsdp_window']})"
    words.append(sharding)
    if par.get("gradient_reduction") == "run":
        words.append("reduced each run")
    if p > 1 and d > 1 and "rank_order" in par:
        words.append(par["rank_order"])
    return ", ".join(words)


def others(result):
    """Every other schedule's best against the recommendation: "equal" within 0.05% of its
    throughput, "does not fit" where no configuration of it compiled."""
    best = result["best"]["step_time_s"]
    found = {b["schedule"]: b["step_time_s"] for b in result["best_per_schedule"]}
    words = []
    for schedule, step in sorted(found.items(), key=lambda item: item[1]):
        if schedule == result["best"]["schedule"]:
            continue
        behind = (best / step - 1) * 100
        words.append(f"{schedule} equal" if behind > -0.05 else f"{schedule} {behind:.1f}%")
    words += [f"{s} does not fit" for s in SCHEDULES if s not in found]
    return "; ".join(words)


def tokens(value):
    return f"{value / 1e6:.2f} M" if value >= 1e6 else f"{value / 1e3:.1f} k"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tuner", required=True)
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--jobs", default=os.path.join(here, "../../testdata/jobs"))
    parser.add_argument("--only", help="one search, JOB:GPUS")
    args = parser.parse_args()

    for job, gpus, batches in SEARCHES:
        if args.only and args.only != f"{job}:{gpus}":
            continue
        print(f"\n{job} on {gpus} GPUs\n")
        print("| batch per GPU (B) | recommended | step | tokens/s | TFLOP/s/GPU | peak memory "
              "| best other schedules | search |")
        print("|---|---|---|---|---|---|---|---|")
        with tempfile.TemporaryDirectory() as scratch:
            out = os.path.join(scratch, "tune.json")
            subprocess.run([args.tuner, os.path.join(args.jobs, job + ".json"), "--gpus",
                            str(gpus), "--global-batch", ",".join(map(str, batches)), "--fix",
                            "parallelism.tensor=1", "--emit=json", "-o", out],
                           check=True, stderr=subprocess.DEVNULL)
            with open(out) as f:
                results = json.load(f)["results"]
        for result in results:
            best = result["best"]
            b = result["global_batch"]
            print(f"| {b // gpus} ({b}) | {describe(best['config'])} "
                  f"| {best['step_time_s']:.2f} s | {tokens(best['tokens_per_s'])} "
                  f"| {best['tflops_per_gpu']:.0f} | {best['peak_memory_bytes'] / GIB:.1f} GiB "
                  f"| {others(result)} | {result['search']['seconds']:.1f} s |")


if __name__ == "__main__":
    main()
