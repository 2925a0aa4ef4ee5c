#!/usr/bin/env python3
"""Every rank of a plan as a thread of one process (conduit-run --ranks-per-process) on the
CPU: the losses and final parameters are bitwise those of the same plan under mpirun and of
the single-process reference; a run killed by --fail-at after a checkpoint exits 4 and resumes
to bitwise the uninterrupted run's remaining losses; a stalled rank is named by the others
within the peer timeout; and a --ranks-per-process that is not the plan's world size is
refused. A mixture of experts over expert groups of 2 exchanges its tokens through the hub
with bitwise mpirun's results.

Usage: loopback.py --bin BUILD/bin --work DIR
"""

import os
import shutil
import time

from common import Tools, arguments, check, finish, losses, small_gpt, small_llama

STEPS = 3



def step_lines(output):
    return [l for l in output.splitlines() if l.startswith("step ")]


def same_files(a, b):
    names = sorted(os.listdir(a))
    return names == sorted(os.listdir(b)) and names and all(
        open(os.path.join(a, n), "rb").read() == open(os.path.join(b, n), "rb").read()
        for n in names)


def equivalence(tools):
    """The loopback run prints the MPI run's and the reference's lines, bit for bit."""
    for name, parallelism in [
            ("breadth-first-full-p2-d2-v2",
             {"pipeline": 2, "data": 2, "stages_per_device": 2, "schedule": "breadth-first",
              "microbatches": 4, "sharding": "full"}),
            ("1f1b-none-p4-d1",
             {"pipeline": 4, "data": 1, "schedule": "1f1b", "microbatches": 8,
              "sharding": "none"}),
            ("depth-first-none-p2-d2-v2",
             {"pipeline": 2, "data": 2, "stages_per_device": 2, "schedule": "depth-first",
              "microbatches": 4, "sharding": "none"})]:
        plan = tools.compile(small_gpt(parallelism), f"loopback-{name}")
        ranks = parallelism["pipeline"] * parallelism["data"]
        params = {kind: os.path.join(tools.work, f"{name}-{kind}-params")
                  for kind in ("threads", "mpi", "reference")}
        for directory in params.values():
            shutil.rmtree(directory, ignore_errors=True)
        threads = tools.run_threads(plan, ranks, f"--steps={STEPS}",
                                    f"--save-params={params['threads']}")
        mpi = tools.run(plan, ranks, f"--steps={STEPS}", f"--save-params={params['mpi']}")
        reference = tools.reference(plan, f"--steps={STEPS}",
                                    f"--save-params={params['reference']}")
        ran = threads.returncode == 0 and mpi.returncode == 0 and reference.returncode == 0
        check(f"{name}: loopback, mpirun and the reference run", ran,
              threads.stderr + mpi.stderr + reference.stderr)
        if not ran:
            continue
        lines = step_lines(threads.stdout)
        check(f"{name}: loopback losses are bitwise mpirun's and the reference's",
              len(lines) == STEPS and lines == step_lines(mpi.stdout)
              and lines == step_lines(reference.stdout),
              f"loopback:\n{threads.stdout}\nmpirun:\n{mpi.stdout}\nreference:\n"
              f"{reference.stdout}")
        check(f"{name}: and so are its final parameters",
              same_files(params["threads"], params["mpi"])
              and same_files(params["threads"], params["reference"]))
        check(f"{name}: the summary names the ranks",
              f"steps on {ranks} ranks" in threads.stdout, threads.stdout)


def expert_parallel(tools):
    """A mixture of experts over expert groups of 2 (the loopback hub's all-to-all): the
    loopback run gives bitwise the mpirun run's losses and parameters, and the reference's
    losses."""
    parallelism = {"pipeline": 2, "data": 2, "schedule": "1f1b", "microbatches": 4,
                   "sharding": "full", "expert": 2}
    job = small_llama(parallelism)
    job["model"]["moe"] = {"num_experts": 4, "top_k": 2, "expert_ffn_hidden_size": 24,
                           "aux_loss_coefficient": 0.01, "dense_layers": 1}
    plan = tools.compile(job, "loopback-moe-ep2")
    params = {kind: os.path.join(tools.work, f"moe-ep2-{kind}-params") for kind in ("threads", "mpi")}
    for directory in params.values():
        shutil.rmtree(directory, ignore_errors=True)
    threads = tools.run_threads(plan, 4, f"--steps={STEPS}", f"--save-params={params['threads']}")
    mpi = tools.run(plan, 4, f"--steps={STEPS}", f"--save-params={params['mpi']}")
    reference = tools.reference(plan, f"--steps={STEPS}")
    lines = step_lines(threads.stdout)
    check("moe-ep2: loopback losses (and aux_loss) are bitwise mpirun's and the reference's",
          threads.returncode == 0 and mpi.returncode == 0 and len(lines) == STEPS
          and lines == step_lines(mpi.stdout) and lines == step_lines(reference.stdout),
          f"loopback:\n{threads.stdout}{threads.stderr}\nmpirun:\n{mpi.stdout}{mpi.stderr}"
          f"\nreference:\n{reference.stdout}")
    check("moe-ep2: and its final parameters are bitwise mpirun's",
          threads.returncode == 0 and mpi.returncode == 0
          and same_files(params["threads"], params["mpi"]))


def checkpoints(tools, plan, ranks):
    """A loopback run killed after its step-4 checkpoint resumes bit for bit."""
    whole = tools.run_threads(plan, ranks, "--steps=6")
    expected = step_lines(whole.stdout)
    check("an uninterrupted loopback run", whole.returncode == 0 and len(expected) == 6,
          whole.stderr)
    directory = os.path.join(tools.work, "loopback-checkpoints")
    shutil.rmtree(directory, ignore_errors=True)
    killed = tools.run_threads(plan, ranks, "--steps=6", f"--checkpoint={directory}",
                               "--checkpoint-every=2", "--fail-at=0:5:0")
    check("--fail-at ends a loopback run with exit code 4 after its step-4 checkpoint",
          killed.returncode == 4 and sorted(losses(killed.stdout)) == [1, 2, 3, 4]
          and "rank 0: injected failure" in killed.stderr
          and step_lines(killed.stdout) == expected[:4],
          f"exit {killed.returncode}\n{killed.stdout}{killed.stderr}")
    resumed = tools.run_threads(plan, ranks, "--steps=2", f"--resume={directory}")
    check("resuming the loopback checkpoint gives bitwise the uninterrupted losses",
          resumed.returncode == 0 and "resumed from" in resumed.stdout
          and step_lines(resumed.stdout) == expected[4:],
          f"{resumed.stdout}{resumed.stderr}\nexpected {expected}")


def stall(tools, plan, ranks):
    """A stalled rank thread is named by the rank waiting for it, within the peer timeout."""
    start = time.time()
    result = tools.run_threads(plan, ranks, "--steps=3", "--stall-at=0:2:3", "--peer-timeout=2",
                               timeout=90)
    elapsed = time.time() - start
    check(f"a stalled loopback rank is named by the rank waiting for it ({elapsed:.1f} s)",
          result.returncode == 3 and elapsed < 30 and "made no progress for 2 s" in result.stderr
          and "for rank 0 " in result.stderr and "injected stall" in result.stderr,
          f"exit {result.returncode}\n{result.stdout}{result.stderr}")


def wrong_ranks(tools, plan):
    result = tools.run_threads(plan, 2, "--steps=1", timeout=60)
    check("a --ranks-per-process that is not P*D is refused",
          result.returncode == 1 and "the plan has 4 ranks" in result.stderr
          and "--ranks-per-process=4" in result.stderr and "step 1" not in result.stdout,
          f"exit {result.returncode}\n{result.stderr}")
    result = tools.run(plan, 2, "--ranks-per-process=4", "--steps=1", timeout=60)
    check("loopback refuses to run under mpirun",
          result.returncode == 1 and "start one process" in result.stderr,
          f"exit {result.returncode}\n{result.stderr}")


def main():
    args = arguments().parse_args()
    tools = Tools(args.bin, args.work, args.compiler_bin)
    equivalence(tools)
    expert_parallel(tools)
    parallelism = {"pipeline": 2, "data": 2, "stages_per_device": 2, "schedule": "breadth-first",
                   "microbatches": 4, "sharding": "full"}
    plan = tools.compile(small_gpt(parallelism), "loopback-recovery")
    checkpoints(tools, plan, 4)
    # Two ranks: the rank after the stalled one waits for it alone.
    pipeline = {"pipeline": 2, "data": 1, "schedule": "1f1b", "microbatches": 4}
    stall(tools, tools.compile(small_gpt(pipeline), "loopback-stall"), 2)
    wrong_ranks(tools, plan)
    finish("every loopback behaviour holds")


if __name__ == "__main__":
    main()
