#!/usr/bin/env python3
"""The CPU round trip of docs/performance.md ("Measured against predicted (CPU)"): for each
job, profile a plan with `conduit-run --profile`, compile it again with that profile, run the
compiled plan several times and compare the predicted step with the measured one.

Measured is each run's median step (the `done:` line's `median`, rank 0's steps without the
first): a step that something else on the machine disturbed moves neither that nor the
profile, whose layer times are medians over the profiling run's steps too. A whole run that
the machine slowed does move it: the table gives the median run beside the spread, and
`--profiles N` profiles N times and compiles with their median (each measured figure the
median of the N profiles'), so that one profile taken in a slow minute does not set the
prediction; several minutes that ran slow still set it. Two processes, one per pipeline rank
(data = 1), with the transport settings of scripts/demo and a 32 KiB eager limit.

Usage: cpu_fidelity.py --bin BUILD/bin [--runs N] [--profiles N] [--steps N] [--work DIR]
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
JOBS = os.path.join(HERE, "..", "..", "testdata", "jobs")

# (name, job, --set overrides): the demo breadth-first, its 1F1B form, and a Llama-style job.
CASES = [
    ("demo, breadth-first P2 V2", "demo.json", []),
    ("demo, 1F1B P2 V1", "demo.json",
     ["parallelism.schedule=1f1b", "parallelism.stages_per_device=1"]),
    ("llama-tiny, breadth-first P2 V2", "llama-tiny.json", []),
]

ENVIRONMENT = {
    "OMPI_MCA_btl": "self,vader",
    "OMPI_MCA_rmaps_base_oversubscribe": "1",
    "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
    "OMPI_MCA_btl_vader_eager_limit": "32768",
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
}

DONE = re.compile(r"^done: .* \(([0-9.]+) s per step, median ([0-9.]+) s", re.M)
PREDICTED = re.compile(r"^  prediction   step ([0-9.]+) (ms|s|us)", re.M)
UNIT = {"s": 1.0, "ms": 1e-3, "us": 1e-6}


def run(command):
    result = subprocess.run(command, capture_output=True, text=True,
                            env={**os.environ, **ENVIRONMENT})
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr}")
    return result.stdout


# Keys whose values say what was measured, not how long it took: taken from the first profile.
KEPT = {"conduit_profile", "backend", "job", "optimizer", "name", "samples", "memory",
        "routed_load"}


def median_profile(profiles):
    """One profile from several of the same plan: every measured number the median of theirs
    (element by element in the layers' lists), the rest the first's."""
    first = profiles[0]
    if isinstance(first, dict):
        return {key: first[key] if key in KEPT else median_profile([p[key] for p in profiles])
                for key in first}
    if isinstance(first, list):
        return [median_profile(list(items)) for items in zip(*profiles)]
    if isinstance(first, (int, float)) and not isinstance(first, bool):
        return statistics.median(profiles)
    return first


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", required=True, help="the folder of conduit-compile and conduit-run")
    parser.add_argument("--runs", type=int, default=3, help="runs of each compiled plan")
    parser.add_argument("--profiles", type=int, default=1,
                        help="profiling runs, compiled with as their median")
    parser.add_argument("--steps", type=int, default=60, help="steps of each run")
    parser.add_argument("--work", help="where the plans and profiles go (default: a temporary folder)")
    args = parser.parse_args()
    compile_ = os.path.join(args.bin, "conduit-compile")
    conduit_run = os.path.join(args.bin, "conduit-run")
    work = args.work or tempfile.mkdtemp(prefix="cpu-fidelity-")
    os.makedirs(work, exist_ok=True)

    print("| job | predicted step | runs' median steps | the median run | its error | every run's error |")
    print("|---|---|---|---|---|---|")
    worst = worstRun = 0.0
    for index, (name, job, overrides) in enumerate(CASES):
        sets = [x for o in ["parallelism.data=1"] + overrides for x in ("--set", o)]
        path = os.path.join(JOBS, job)
        plan = os.path.join(work, f"{index}.plan")
        profile = os.path.join(work, f"{index}.profile.json")
        run([compile_, path, *sets, "-o", plan])
        measured_profiles = []
        for k in range(args.profiles):
            one = os.path.join(work, f"{index}.profile.{k}.json")
            run(["mpirun", "-np", "2", conduit_run, plan, "--steps", str(args.steps),
                 "--profile", one])
            with open(one) as f:
                measured_profiles.append(json.load(f))
        with open(profile, "w") as f:
            json.dump(median_profile(measured_profiles), f)
        sets += ["--set", f"cluster.profile={profile}"]
        summary = run([compile_, path, *sets, "--emit=summary"])
        value, unit = PREDICTED.search(summary).groups()
        predicted = float(value) * UNIT[unit]
        profiled = os.path.join(work, f"{index}.profiled.plan")
        run([compile_, path, *sets, "-o", profiled])
        measured = []
        for _ in range(args.runs):
            out = run(["mpirun", "-np", "2", conduit_run, profiled, "--steps", str(args.steps)])
            measured.append(float(DONE.search(out).group(2)))
        errors = [predicted / m - 1 for m in measured]
        typical = statistics.median(measured)
        error = predicted / typical - 1
        worst = max(worst, abs(error))
        worstRun = max(worstRun, max(abs(e) for e in errors))
        print(f"| {name} | {predicted * 1e3:.2f} ms | "
              f"{min(measured) * 1e3:.2f}–{max(measured) * 1e3:.2f} ms | {typical * 1e3:.2f} ms | "
              f"{error:+.1%} | {min(errors):+.1%} to {max(errors):+.1%} |", flush=True)
    print(f"cpu fidelity: {len(CASES)} jobs x {args.runs} runs: the median run's |error| at most "
          f"{worst:.1%}; every run's at most {worstRun:.1%}")


if __name__ == "__main__":
    main()
