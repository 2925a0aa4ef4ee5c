#!/usr/bin/env python3
"""conduit-run when things go wrong: bad plans and command lines are refused before any
communication, a dead or stalled peer ends the job with an error naming it (within 60 s), and
a run killed between checkpoints and resumed gives bitwise the losses and parameters of an
uninterrupted run, while damaged or mismatched checkpoints are refused.

Usage: failures.py --bin BUILD/bin --work DIR
"""

import os
import shutil
import struct
import subprocess
import sys
import time

from common import ENV, Tools, arguments, losses, small_gpt

FAILED = []


def check(name, condition, detail=""):
    print(("ok: " if condition else "FAILED: ") + name, flush=True)
    if not condition:
        FAILED.append(f"{name}\n{detail}")


def patch_format_version(data, version):
    """Sets the plan's format_version (field 0 of the FlatBuffers root table)."""
    table = struct.unpack_from("<I", data, 0)[0]
    vtable = table - struct.unpack_from("<i", data, table)[0]
    offset = struct.unpack_from("<H", data, vtable + 4)[0]
    patched = bytearray(data)
    struct.pack_into("<I", patched, table + offset, version)
    return bytes(patched)


def bad_inputs(tools, plan):
    with open(plan, "rb") as f:
        good = f.read()
    variants = {
        "truncated": (good[: len(good) // 2], "corrupt plan file"),
        "text file instead of a": (b"this is not a plan file at all", "not a Conduit plan file"),
        "damaged": (good[:24] + bytes(b ^ 0x5A for b in good[24:64]) + good[64:],
                    "corrupt plan file"),
        "future version": (patch_format_version(good, 99),
                           "plan file format version 99; this runtime reads version 1"),
    }
    for name, (data, message) in variants.items():
        path = os.path.join(tools.work, name.replace(" ", "-") + ".plan")
        with open(path, "wb") as f:
            f.write(data)
        result = tools.run(path, 4, "--steps=1", timeout=60)
        check(f"a {name} plan is refused", result.returncode == 1 and message in result.stderr
              and "step 1" not in result.stdout, result.stderr)

    result = tools.run(plan, 2, "--steps=1", timeout=60)
    check("a world size that does not match the plan is refused",
          result.returncode == 1 and "the plan runs on 4 processes" in result.stderr
          and "mpirun -np 4" in result.stderr, result.stderr)
    result = subprocess.run([tools.runner, plan, "--backend=cuda"], capture_output=True,
                            text=True, timeout=60, env=ENV)
    check("a backend that cannot run here is refused",
          result.returncode == 1 and "cuda" in result.stderr.lower(), result.stderr)
    result = subprocess.run([tools.runner, plan, "--steps=zero"], capture_output=True, text=True,
                            timeout=60, env=ENV)
    check("a bad command line exits 2 with the usage",
          result.returncode == 2 and "--steps expects an integer" in result.stderr
          and "usage: conduit-run" in result.stderr, result.stderr)
    for args, message in [(["--fail-at=1:2"], "expected RANK:STEP:INSTRUCTION"),
                          (["--checkpoint-every=2"], "--checkpoint-every needs --checkpoint"),
                          (["--reference", "--ranks-per-process=4"], "--reference takes"),
                          (["--reference", "--trace=t.json"], "--reference takes"),
                          (["--frobnicate"], "unknown option --frobnicate")]:
        result = subprocess.run([tools.runner, plan] + args, capture_output=True, text=True,
                                timeout=60, env=ENV)
        check(f"{' '.join(args)} exits 2", result.returncode == 2 and message in result.stderr,
              result.stderr)


def loopback(tools, plan):
    """The run loop of several ranks in one process (--ranks-per-process) goes through the same
    session as MPI runs; tests/e2e/loopback.py runs it on the CPU. With --backend=cuda on a
    machine without a GPU its ranks stop at the device, but the command line with checkpoints
    and fault injection is accepted and every rank thread ends cleanly; the GPU checks
    (tests/gpu/checks.py) run it to the end."""
    directory = os.path.join(tools.work, "loopback-checkpoints")
    result = tools.run_threads(plan, 4, "--backend=cuda", "--steps=2", f"--checkpoint={directory}",
                               "--fail-at=1:2:5", timeout=60)
    check("cuda loopback takes --checkpoint and --fail-at; without a GPU it is refused as input",
          result.returncode == 1 and "cuda" in result.stderr.lower()
          and "usage" not in result.stderr, result.stderr)
    result = tools.run_threads(plan, 2, "--steps=1", timeout=60)
    check("loopback needs every rank of the plan",
          result.returncode == 1 and "--ranks-per-process=4" in result.stderr, result.stderr)


def dead_peer(tools, plan):
    start = time.time()
    result = tools.run(plan, 4, "--steps=3", "--fail-at=1:2:5", timeout=90)
    elapsed = time.time() - start
    check(f"a dead peer ends the job ({elapsed:.1f} s)",
          result.returncode != 0 and elapsed < 60 and "rank 1: injected failure" in result.stderr
          and ",1]" in result.stderr,  # mpirun names the process that died: [[job,1],1]
          result.stdout + result.stderr)

    start = time.time()
    result = tools.run(plan, 4, "--steps=3", "--stall-at=1:2:5", "--peer-timeout=3", timeout=90)
    elapsed = time.time() - start
    check(f"a stalled peer is named by the ranks waiting for it ({elapsed:.1f} s)",
          result.returncode == 3 and elapsed < 60 and "made no progress for 3 s" in result.stderr
          and "for rank 1 " in result.stderr, result.stdout + result.stderr)


def checkpoints(tools, plan, other_plan):
    whole = os.path.join(tools.work, "whole-params")
    result = tools.run(plan, 4, "--steps=6", f"--save-params={whole}")
    check("an uninterrupted run", result.returncode == 0, result.stderr)
    expected = losses(result.stdout)

    directory = os.path.join(tools.work, "checkpoints")
    shutil.rmtree(directory, ignore_errors=True)
    result = tools.run(plan, 4, "--steps=6", f"--checkpoint={directory}", "--checkpoint-every=2",
                       "--fail-at=0:5:0")
    check("a run killed after its step-4 checkpoint",
          result.returncode != 0 and sorted(losses(result.stdout)) == [1, 2, 3, 4],
          result.stdout + result.stderr)

    resumed_params = os.path.join(tools.work, "resumed-params")
    result = tools.run(plan, 4, "--steps=2", f"--resume={directory}",
                       f"--save-params={resumed_params}")
    got = losses(result.stdout)
    lines = [l for l in result.stdout.splitlines() if l.startswith("step ")]
    check("resuming gives bitwise the losses of the uninterrupted run",
          result.returncode == 0 and got == {5: expected[5], 6: expected[6]} and
          lines == [f"step 5 loss {expected_line(expected, 5)}",
                    f"step 6 loss {expected_line(expected, 6)}"],
          f"{result.stdout}{result.stderr}\nexpected {expected}")
    same = all(open(os.path.join(whole, n), "rb").read() ==
               open(os.path.join(resumed_params, n), "rb").read() for n in os.listdir(whole))
    check("and bitwise its parameters", same)

    # A damaged rank file.
    damaged = os.path.join(tools.work, "damaged")
    shutil.rmtree(damaged, ignore_errors=True)
    shutil.copytree(directory, damaged)
    step_dir = [d for d in os.listdir(damaged) if d.startswith("step-")][0]
    victim = os.path.join(damaged, step_dir, "rank-1.ckpt")
    data = bytearray(open(victim, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(victim, "wb").write(bytes(data))
    result = tools.run(plan, 4, "--steps=1", f"--resume={damaged}")
    check("a damaged checkpoint is refused",
          result.returncode == 1 and "rank-1.ckpt is damaged" in result.stderr, result.stderr)

    # A damaged manifest.
    with open(os.path.join(damaged, "manifest"), "w") as f:
        f.write("conduit-checkpoint 1\nstep four\n")
    result = tools.run(plan, 4, "--steps=1", f"--resume={damaged}")
    check("a damaged manifest is refused",
          result.returncode == 1 and "damaged checkpoint manifest" in result.stderr, result.stderr)

    # A plan whose state lives elsewhere.
    result = tools.run(other_plan, 4, "--steps=1", f"--resume={directory}")
    check("a checkpoint of another state layout is refused",
          result.returncode == 1 and "another state layout" in result.stderr, result.stderr)


def expected_line(expected, step):
    return format_float(expected[step])


def format_float(value):
    # conduit-run prints %.9g of a float; Python's float parse of that round-trips it.
    return f"{value:.9g}"


def main():
    parser = arguments()
    args = parser.parse_args()
    tools = Tools(args.bin, args.work)
    parallelism = {"pipeline": 2, "data": 2, "stages_per_device": 2, "schedule": "breadth-first",
                   "microbatches": 4, "sharding": "full"}
    plan = tools.compile(small_gpt(parallelism), "failures")
    other = dict(parallelism, sharding="none")
    other_plan = tools.compile(small_gpt(other), "failures-unsharded")
    bad_inputs(tools, plan)
    loopback(tools, plan)
    dead_peer(tools, plan)
    checkpoints(tools, plan, other_plan)
    if FAILED:
        print("\n\n".join(FAILED))
        sys.exit(1)
    print("all failure behaviours hold")


if __name__ == "__main__":
    main()
