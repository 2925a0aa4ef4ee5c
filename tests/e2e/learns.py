#!/usr/bin/env python3
"""A job learns: 50 steps on its CPU ranks at least halve the loss, and every step's loss
equals the single-process reference's (the demo job, and the DeepSeek-V3-shaped tiny job:
latent attention, group-limited sigmoid routing with its bias moved by the load, a shared
expert, DualPipeV over expert groups of 2).

Usage: learns.py --bin BUILD/bin --work DIR --job testdata/jobs/demo.json
"""

import os
import sys

from common import Tools, arguments, losses

STEPS = 50
TOLERANCE = 1e-5


def main():
    parser = arguments()
    parser.add_argument("--job", required=True)
    args = parser.parse_args()
    tools = Tools(args.bin, args.work, args.compiler_bin)
    import json
    job = json.load(open(args.job))
    plan = tools.compile(job, os.path.splitext(os.path.basename(args.job))[0])
    par = job["parallelism"]
    processes = par["pipeline"] * par.get("data", 1) * par.get("tensor", 1)
    run = tools.run(plan, processes, f"--steps={STEPS}")
    reference = tools.reference(plan, f"--steps={STEPS}")
    if run.returncode or reference.returncode:
        sys.exit(f"a run failed:\n{run.stderr}{reference.stderr}")
    got, expected = losses(run.stdout), losses(reference.stdout)
    first, last = got[1], got[STEPS]
    print(f"loss {first:.4f} -> {last:.4f} in {STEPS} steps on {processes} processes")
    relative = {s: abs(got[s] - expected[s]) / abs(expected[s]) for s in expected}
    worst = max(relative.values())
    print(f"largest relative difference from the reference: {worst:.1e}")
    parted = [s for s in sorted(relative) if relative[s] > TOLERANCE]
    if parted:
        print(f"first step past {TOLERANCE:.0e}: {parted[0]} ({len(parted)} of {STEPS} steps)")
    if not last <= first / 2:
        sys.exit("the loss did not fall by half")
    if worst > TOLERANCE:
        sys.exit(f"the losses differ from the reference by more than {TOLERANCE:.0e}")


if __name__ == "__main__":
    main()
