#!/usr/bin/env python3
"""The profile round trip: `conduit-run --profile` measures a plan's layers and optimizer steps
in the format the cost model reads, and a plan compiled with `cluster.profile` predicts each
rank's busy time from exactly those measurements.

The check of the prediction is independent of the compiler: from the plan (its stages, their
layers, micro-batches and parameters) and the profile alone, each rank's compute adds up to
its forwards and backwards (each the sum of its layers' measured times and its kind's measured
time beyond them) plus its optimizer steps (parameters updated times the measured time per
parameter). The profile also holds the transport's latency and bandwidth between two ranks,
and, for an expert-parallel plan, the routing imbalance the run measured, which a compile of
the job with the profile plans with.

Usage: profile.py --bin BUILD/bin --work DIR
"""

import json
import math
import os
import re
import subprocess
import sys

from common import Tools, arguments, small_gpt

STEPS = 3


def interpolate(entry, key, samples):
    """The cost model's reading of a layer's measurements: piecewise linear through them,
    extended linearly, proportional when only one size was measured."""
    xs, ys = entry["samples"], entry[key]
    if len(xs) == 1:
        return ys[0] * samples / xs[0]
    k = 1
    while k < len(xs) - 1 and samples > xs[k]:
        k += 1
    x0, x1, y0, y1 = xs[k - 1], xs[k], ys[k - 1], ys[k]
    return y0 + (y1 - y0) * (samples - x0) / (x1 - x0)


def expected_busy(plan, profile):
    layers = profile["layers"]
    data = plan["config"]["data"]
    sharded = data > 1 and plan["config"]["sharding"] != "none"
    overhead = profile.get("instruction_overhead_s", {})
    busy = []
    for rank in plan["ranks"]:
        total = 0.0
        for x in rank["instructions"]:
            if x["op"] in ("forward", "backward"):
                stage = plan["stages"][x["stage"]]
                cuts = stage["samples"]
                n = cuts[x["mb"] + 1] - cuts[x["mb"]]
                key = "forward_s" if x["op"] == "forward" else "backward_s"
                first, end = stage["layers"]
                total += sum(interpolate(layers[l], key, n) for l in range(first, end))
                total += overhead.get(x["op"], 0.0)
            elif x["op"] == "optimizer_step":
                params = plan["stages"][x["stage"]]["params"]
                owned = -(-params // data) if sharded else params
                total += owned * profile["optimizer_s_per_param"]
        busy.append(total)
    return busy


def check_profile(profile, plan):
    failures = []
    names = [layer["name"] for layer in plan["layers"]]
    if [entry["name"] for entry in profile["layers"]] != names:
        failures.append(f"the profile's layers are not the plan's: {names}")
    ran = [set() for _ in names]  # per layer, the micro-batch sizes its stage ran
    for stage in plan["stages"]:
        first, end = stage["layers"]
        for l in range(first, end):
            ran[l] |= {b - a for a, b in zip(stage["samples"], stage["samples"][1:])}
    for entry, sizes in zip(profile["layers"], ran):
        if entry["samples"] != sorted(sizes):
            failures.append(f"{entry['name']}: measured sizes {entry['samples']}, ran {sorted(sizes)}")
        for key in ("forward_s", "backward_s"):
            if not all(t > 0 for t in entry[key]):
                failures.append(f"{entry['name']}: {key} {entry[key]} is not all positive")
    # Adam takes nanoseconds per parameter on a CPU; a microsecond would be a time per step.
    if profile.get("optimizer") != "adam" or not 0 < profile.get("optimizer_s_per_param", 0) < 1e-6:
        failures.append(f"the optimizer was not measured per parameter: "
                        f"{profile.get('optimizer')}, {profile.get('optimizer_s_per_param')}")
    overhead = profile.get("instruction_overhead_s", {})
    if sorted(overhead) != ["backward", "forward"] or not all(t >= 0 for t in overhead.values()):
        failures.append(f"instruction_overhead_s is not a time per forward and backward: {overhead}")
    transport = profile.get("transport", {})
    if not (0 <= transport.get("latency_s", -1) < 1 and transport.get("bandwidth_bytes_per_s", 0) > 0):
        failures.append(f"the transport was not measured: {transport}")
    return failures


def check_routed_load(tools, work):
    """An expert-parallel run (moe-tiny: E = 2 over D = 2) measures its routing imbalance, the
    figure it prints; a compile of the job with the profile plans with it."""
    failures = []
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "..", "testdata", "jobs", "moe-tiny.json")) as f:
        job = json.load(f)
    plan_path = tools.compile(job, "moe")
    profile_path = f"{work}/moe-profile.json"
    run = tools.run(plan_path, 4, f"--steps={STEPS}", f"--profile={profile_path}")
    if run.returncode:
        return [f"conduit-run --profile of an expert-parallel plan failed:\n{run.stderr}"]
    load = json.load(open(profile_path)).get("routed_load", {})
    printed = re.search(r"busiest expert rank took ([0-9.]+)x .*\(over ([0-9]+) pieces\)", run.stdout)
    if not printed or load.get("expert") != 2 or load.get("pieces") != int(printed.group(2)) \
            or abs(load.get("peak", 0) - float(printed.group(1))) > 0.005:
        failures.append(f"routed_load {load} is not the load the run printed: {run.stdout}")
    job["cluster"]["profile"] = profile_path
    job_path = f"{work}/moe-measured.json"
    with open(job_path, "w") as f:
        json.dump(job, f)
    planned = json.loads(tools.emit(job_path, "plan-json"))["transformer"]["moe"]["imbalance"]
    if planned != load.get("peak"):
        failures.append(f"the plan bounds the routed tokens at {planned}, the profile measured "
                        f"{load.get('peak')}")
    else:
        print(f"routed load: measured {planned}x the balanced share, and planned with it")
    return failures


def main():
    parser = arguments()
    args = parser.parse_args()
    tools = Tools(args.bin, args.work, args.compiler_bin)

    # Unequal micro-batches, so that the profile holds two sizes per layer; full sharding, so
    # that optimizer steps update a shard.
    job = small_gpt({"pipeline": 2, "data": 2, "stages_per_device": 2,
                     "schedule": "breadth-first", "microbatches": 2, "sharding": "full",
                     "microbatch_partitions": [[1, 3], [2, 2], [3, 1], [2, 2]]},
                    microbatch_size=2)
    plan_path = tools.compile(job, "measured")
    profile_path = f"{args.work}/profile.json"
    run = tools.run(plan_path, 4, f"--steps={STEPS}", f"--profile={profile_path}")
    if run.returncode:
        sys.exit(f"conduit-run --profile failed:\n{run.stderr}")
    profile = json.load(open(profile_path))
    plan = json.loads(tools.emit(f"{args.work}/measured.json", "plan-json"))
    failures = check_profile(profile, plan)

    # Compile again with the measurements and compare the prediction with the sums above.
    job["cluster"]["profile"] = profile_path
    job_path = f"{args.work}/predicted.json"
    with open(job_path, "w") as f:
        json.dump(job, f)
    report = json.loads(tools.emit(job_path, "report"))
    predicted_plan = json.loads(tools.emit(job_path, "plan-json"))
    expected = expected_busy(predicted_plan, profile)
    got = [rank["busy_s"] for rank in report["ranks"]]
    if len(got) != len(expected):
        failures.append(f"the report has {len(got)} ranks, the plan {len(expected)}")
    for r, (g, e) in enumerate(zip(got, expected)):
        print(f"rank {r}: predicted busy {g * 1e3:.3f} ms, from the profile {e * 1e3:.3f} ms")
        if not math.isclose(g, e, rel_tol=1e-9):
            failures.append(f"rank {r}: busy_s {g} is not the profile's {e}")
    if report["step_time_s"] < max(expected):
        failures.append(f"the step ({report['step_time_s']} s) is shorter than a rank's compute")

    # A profile of another model is refused, naming the file.
    other = dict(job, model=dict(job["model"], num_layers=job["model"]["num_layers"] + 1))
    with open(f"{args.work}/other.json", "w") as f:
        json.dump(other, f)
    refused = subprocess.run([tools.compiler, f"{args.work}/other.json"], capture_output=True,
                             text=True)
    if refused.returncode != 1 or "layers but the model has" not in refused.stderr:
        failures.append(f"a profile of another model was not refused:\n{refused.stderr}")

    failures += check_routed_load(tools, args.work)

    if failures:
        sys.exit("\n".join(failures))
    print("the profile round trip holds")


if __name__ == "__main__":
    main()
