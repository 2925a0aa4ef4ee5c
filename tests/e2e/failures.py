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
import time

from common import ENV, Tools, arguments, check, finish, losses, small_gpt, small_llama




def patch_format_version(data, version):
    """Sets the plan's format_version (field 0 of the FlatBuffers root table)."""
    table = struct.unpack_from("<I", data, 0)[0]
    vtable = table - struct.unpack_from("<i", data, table)[0]
    offset = struct.unpack_from("<H", data, vtable + 4)[0]
    patched = bytearray(data)
    struct.pack_into("<I", patched, table + offset, version)
    return bytes(patched)


def field_at(data, table, index):
    """Where field `index` of the FlatBuffers table at `table` is stored (None if absent)."""
    vtable = table - struct.unpack_from("<i", data, table)[0]
    if 4 + 2 * index >= struct.unpack_from("<H", data, vtable)[0]:
        return None
    offset = struct.unpack_from("<H", data, vtable + 4 + 2 * index)[0]
    return table + offset if offset else None


def patch_plan_field(data, section, field, fmt, value):
    """Sets field number `field` of the plan's `section` table (plan.fbs order)."""
    root = struct.unpack_from("<I", data, 0)[0]
    at = field_at(data, root, {"config": 4, "transformer": 5}[section])
    table = at + struct.unpack_from("<I", data, at)[0]
    patched = bytearray(data)
    struct.pack_into(fmt, patched, field_at(data, table, field), value)
    return bytes(patched)


def hostile_plans(tools, plan):
    """Plans whose numbers were rewritten to be absurd: refused with exit code 1 and a message
    naming the field, before any work; never an abort (134) or a run without end."""
    with open(plan, "rb") as f:
        good = f.read()
    variants = {
        "num-layers-2-62": (("transformer", 0, "<q", 1 << 62), "transformer.num_layers"),
        "num-layers-minus-1": (("transformer", 0, "<q", -1), "transformer.num_layers"),
        "vocab-2-36": (("transformer", 6, "<q", 1 << 36), "transformer.vocab_size"),
        "hidden-not-multiple": (("transformer", 1, "<q", 30),
                                "is not a multiple of transformer.num_heads"),
    }
    for name, ((section, field, fmt, value), message) in variants.items():
        path = os.path.join(tools.work, name + ".plan")
        with open(path, "wb") as f:
            f.write(patch_plan_field(good, section, field, fmt, value))
        result = tools.run(path, 4, "--steps=1", timeout=60)
        check(f"a plan with {name} is refused naming the field",
              result.returncode == 1 and message in result.stderr and path in result.stderr,
              result.stderr)

    # Data parallelism rewritten to 65536: the plan is valid, but --reference would train
    # every replica's samples in one process for hours.
    path = os.path.join(tools.work, "data-65536.plan")
    with open(path, "wb") as f:
        f.write(patch_plan_field(good, "config", 1, "<i", 65536))
    start = time.time()
    result = subprocess.run([tools.runner, "--reference", path], capture_output=True, text=True,
                            timeout=60, env=ENV)
    check(f"--reference refuses 65536 replicas at once ({time.time() - start:.1f} s)",
          result.returncode == 1 and "262144 samples per step" in result.stderr
          and "step 1" not in result.stdout, result.stderr)
    # 16384 replicas are accepted, with a word on what it is about to do first.
    with open(path, "wb") as f:
        f.write(patch_plan_field(good, "config", 1, "<i", 16384))
    try:
        result = subprocess.run([tools.runner, "--reference", path], capture_output=True,
                                text=True, timeout=5, env=ENV)
        stderr = result.stderr
    except subprocess.TimeoutExpired as stopped:
        stderr = stopped.stderr or ""
        stderr = stderr.decode() if isinstance(stderr, bytes) else stderr
    check("--reference says what a large run is about to do before it starts",
          "--reference trains 65536 samples per step" in stderr, stderr)


def fnv1a64(data):
    value = 0xCBF29CE484222325
    for byte in data:
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return value


def sgd_checkpoints(tools):
    """SGD keeps no optimizer state: its checkpoints resume. A rank file rewritten (with a
    matching checksum) to claim 2^63 - 1 optimizer steps is refused, naming the file."""
    plan = tools.compile(small_gpt({"pipeline": 2, "data": 2, "microbatches": 2, "schedule": "1f1b"},
                                   optimizer="sgd"), "failures-sgd")
    directory = os.path.join(tools.work, "sgd-checkpoints")
    shutil.rmtree(directory, ignore_errors=True)
    result = tools.run(plan, 4, "--steps=2", f"--checkpoint={directory}")
    check("an SGD run writes a checkpoint", result.returncode == 0, result.stderr)
    result = tools.run(plan, 4, "--steps=1", f"--resume={directory}")
    check("and resumes from it", result.returncode == 0 and "step 3 loss" in result.stdout,
          result.stderr)

    step_dir = [d for d in os.listdir(directory) if d.startswith("step-")][0]
    victim = os.path.join(directory, step_dir, "rank-2.ckpt")
    data = bytearray(open(victim, "rb").read())
    struct.pack_into("<q", data, 40, (1 << 63) - 1)  # the first stage's optimizer steps
    open(victim, "wb").write(bytes(data))
    manifest = os.path.join(directory, "manifest")
    lines = open(manifest).read().splitlines()
    lines = [f"rank 2 bytes {len(data)} fnv1a64 {fnv1a64(data):016x}"
             if line.startswith("rank 2 ") else line for line in lines]
    open(manifest, "w").write("\n".join(lines) + "\n")
    result = tools.run(plan, 4, "--steps=1", f"--resume={directory}")
    check("a checkpoint claiming 2^63 - 1 optimizer steps is refused",
          result.returncode == 1 and "rank-2.ckpt" in result.stderr
          and "9223372036854775807 optimizer steps" in result.stderr, result.stderr)


def bad_inputs(tools, plan):
    with open(plan, "rb") as f:
        good = f.read()
    variants = {
        "truncated": (good[: len(good) // 2], "corrupt plan file"),
        "text file instead of a": (b"this is not a plan file at all", "not a Conduit plan file"),
        "damaged": (good[:24] + bytes(b ^ 0x5A for b in good[24:64]) + good[64:],
                    "corrupt plan file"),
        "future version": (patch_format_version(good, 99),
                           "plan file format version 99; this runtime reads version 5"),
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


def fp8_plan(tools):
    """A plan priced for FP8 linear layers compiles, and conduit-run refuses it by its key."""
    job = small_gpt({"pipeline": 2, "data": 2, "microbatches": 2, "schedule": "1f1b"},
                    dtype="fp8")
    job["cluster"] = {"preset": "h100-80gb"}
    plan = tools.compile(job, "fp8")
    result = tools.run(plan, 4, "--steps=1", timeout=60)
    check("an fp8 plan is refused, naming training.dtype",
          result.returncode == 1 and "training.dtype" in result.stderr
          and "step 1" not in result.stdout, result.stderr)


def untrained_recompute_modules(tools):
    """Plans whose selective checkpointing drops what conduit-run does not recompute compile,
    and conduit-run refuses them by the key: torchtitan's op policy."""
    for name, extra in [("op", {"recompute_modules": ["op"]})]:
        job = small_gpt(dict({"pipeline": 2, "data": 1, "microbatches": 2, "schedule": "1f1b",
                              "activation_checkpointing": "selective"}, **extra))
        plan = tools.compile(job, "recompute-" + name)
        ranks = 2 * extra.get("tensor", 1)
        result = tools.run(plan, ranks, "--steps=1", timeout=60)
        check(f"a plan recomputing {extra['recompute_modules']} "
              f"{'with sequence parallelism ' if 'tensor' in extra else ''}is refused, naming "
              "parallelism.recompute_modules",
              result.returncode == 1 and "parallelism.recompute_modules" in result.stderr
              and "step 1" not in result.stdout, result.stderr)


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


def stall_in_a_paired_step(tools):
    """A DualPipeV plan with experts (E = 2) runs its paired steps' halves together, one parked
    at its all-to-all while the other computes. A member of the expert group that stalls at
    the partner of a paired forward leaves that forward parked: the watchdog names it and the
    expert group it waits for."""
    parallelism = {"pipeline": 2, "data": 2, "stages_per_device": 2, "schedule": "dualpipev",
                   "microbatches": 4, "sharding": "full", "expert": 2}
    job = small_llama(parallelism, layers=6)
    job["model"]["moe"] = {"num_experts": 4, "top_k": 2, "expert_ffn_hidden_size": 24,
                           "dense_layers": 1}
    plan = tools.compile(job, "failures-paired")
    program = tools.dump(plan)["ranks"][0]["instructions"]
    forward = next(k for k, i in enumerate(program) if i.get("paired"))
    partner = next(k for k in range(forward + 1, len(program))
                   if program[k]["op"] in ("backward", "backward_input"))
    # Global rank 1 is pipeline rank 0's other replica, rank 0's expert group. Under mpirun
    # every rank reports: rank 0 runs the pair's halves together when the partner's input has
    # arrived by the time the forward starts, and then its watchdog names the parked forward;
    # else the forward, alone, waits inside its all-to-all, which names the group. As rank
    # threads the first rank to fail ends the others, so any of them may report; the run must
    # end with the watchdog's exit code, the parked half cancelled.
    start = time.time()
    result = tools.run(plan, 4, "--steps=3", f"--stall-at=1:2:{partner}", "--peer-timeout=3",
                       timeout=90)
    elapsed = time.time() - start
    named = (f"waits at instruction {forward} (F " in result.stderr
             and "at an expert all-to-all, for ranks 1;" in result.stderr) or (
                 "rank 0: error: an expert all-to-all waited 3 s for ranks 1 of its expert group"
                 in result.stderr)
    check(f"a peer stalled in a paired step is named by its expert group ({elapsed:.1f} s)",
          result.returncode == 3 and elapsed < 60 and named, result.stdout + result.stderr)
    start = time.time()
    result = tools.run_threads(plan, 4, "--steps=3", f"--stall-at=1:2:{partner}",
                               "--peer-timeout=3", timeout=90)
    elapsed = time.time() - start
    check(f"and as rank threads the run ends with the watchdog ({elapsed:.1f} s)",
          result.returncode == 3 and elapsed < 60 and "injected stall" in result.stderr
          and ("made no progress for 3 s" in result.stderr or "waited 3 s" in result.stderr),
          result.stdout + result.stderr)


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


def expert_checkpoints(tools, expert, sharding):
    """With expert parallelism a rank's state holds its own experts, sharded over the ranks
    holding the same ones (ZeRO-1, whose restore gathers both segments; with E = D the experts
    are one rank's, updated in place, and under full sharding kept apart from the gathered
    parameters): a resumed run continues with bitwise the uninterrupted losses and
    parameters."""
    parallelism = {"pipeline": 1, "data": 4, "schedule": "1f1b", "microbatches": 2,
                   "sharding": sharding, "expert": expert}
    job = small_llama(parallelism, layers=3)
    job["model"]["moe"] = {"num_experts": 4, "top_k": 2, "expert_ffn_hidden_size": 24,
                           "dense_layers": 1}
    name = f"{expert}-{sharding}"
    plan = tools.compile(job, f"failures-experts-{name}")
    whole = os.path.join(tools.work, f"experts-{name}-whole")
    result = tools.run(plan, 4, "--steps=4", f"--save-params={whole}")
    check(f"an expert-parallel run (E = {expert}, sharding {sharding})", result.returncode == 0,
          result.stderr)
    expected = losses(result.stdout)
    directory = os.path.join(tools.work, f"experts-{name}-checkpoints")
    shutil.rmtree(directory, ignore_errors=True)
    result = tools.run(plan, 4, "--steps=2", f"--checkpoint={directory}")
    check("writes a checkpoint", result.returncode == 0, result.stderr)
    resumed = os.path.join(tools.work, f"experts-{name}-resumed")
    result = tools.run(plan, 4, "--steps=2", f"--resume={directory}", f"--save-params={resumed}")
    check("and resuming from it gives bitwise the uninterrupted losses",
          result.returncode == 0 and losses(result.stdout) == {3: expected[3], 4: expected[4]},
          f"{result.stdout}{result.stderr}\nexpected {expected}")
    check("and parameters", result.returncode == 0 and all(
        open(os.path.join(whole, n), "rb").read() == open(os.path.join(resumed, n), "rb").read()
        for n in os.listdir(whole)))


def expected_line(expected, step):
    return format_float(expected[step])


def format_float(value):
    # conduit-run prints %.9g of a float; Python's float parse of that round-trips it.
    return f"{value:.9g}"


def main():
    parser = arguments()
    args = parser.parse_args()
    tools = Tools(args.bin, args.work, args.compiler_bin)
    parallelism = {"pipeline": 2, "data": 2, "stages_per_device": 2, "schedule": "breadth-first",
                   "microbatches": 4, "sharding": "full"}
    plan = tools.compile(small_gpt(parallelism), "failures")
    other = dict(parallelism, sharding="none")
    other_plan = tools.compile(small_gpt(other), "failures-unsharded")
    bad_inputs(tools, plan)
    hostile_plans(tools, plan)
    fp8_plan(tools)
    untrained_recompute_modules(tools)
    sgd_checkpoints(tools)
    loopback(tools, plan)
    dead_peer(tools, plan)
    stall_in_a_paired_step(tools)
    checkpoints(tools, plan, other_plan)
    for expert, sharding in ((2, "optimizer"), (4, "optimizer"), (4, "full")):
        expert_checkpoints(tools, expert, sharding)
    finish("all failure behaviours hold")


if __name__ == "__main__":
    main()
