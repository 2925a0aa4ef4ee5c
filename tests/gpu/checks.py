#!/usr/bin/env python3
"""The GPU checks of the CUDA backend, run by tests/gpu/run.sh on one H100/H200:

1. the Ops conformance suite (every op, and the layers of a GPT-style, a Llama-style and a
   Qwen3-style model: RMSNorm, SwiGLU, rotary positions, grouped-query attention, tied head,
   heads of their own width, q/k norms) and the
   split-backward plans (input and weight gradients run apart, on two loopback ranks), whose
   CUDA instantiations must run (not skip) and pass;
2. end-to-end equivalence on one GPU (--ranks-per-process): a P=4, D=2 breadth-first plan
   with full sharding at bf16 against the CPU reference within bf16 tolerance, one plan of
   each schedule and sharding mode at fp32 within float32 tolerance, and tensor-parallel
   plans (T=2, with and without sequence parallelism), and mixtures of experts (expert
   groups of 2 and 4, DualPipeV's paired steps);
3. GEMM throughput of the model's layer shapes against the GPU's dense bf16 peak;
4. executor overhead per instruction: the executor alone (executor_bench) and a whole CUDA
   step of a model too small for its kernels to matter;
5. measured against predicted step time of a single-GPU plan: compile, run with --profile,
   recompile with the profile, compare; and its measured peak memory against the plan's,
   planned as the runtime computes (float32 tensors, unfused attention) and as written;
6. checkpoints and fault injection of loopback runs (--ranks-per-process): a run killed by
   --fail-at after its step-4 checkpoint exits 4, and resuming gives the losses of an
   uninterrupted run; a stalled rank is named by the others' watchdog (exit 3);
7. where PyTorch is installed, kernels by shape (tests/gpu/kernels.py: GEMMs, fused attention,
   the experts' batched products, element-wise passes), written beside the summary as
   kernels.json and held against the cost model (tests/bench/kernel_model_check.py).

Writes a Markdown summary and exits non-zero if a check failed.

Usage: checks.py --bin BUILD/bin --work DIR --summary FILE [--peak-tflops 989]
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from common import ENV, Tools, losses, small_gpt  # noqa: E402

DONE = re.compile(r"^done: (\d+) steps on \d+ ranks in ([0-9.]+) s", re.M)
MEMORY = re.compile(r"^memory: rank (\d+) .*peak (\S+ \S+) measured.*, (\S+ \S+) predicted "
                    r"\(([+-][0-9.]+)%\)", re.M)


class Summary:
    """The Markdown summary, written again after every line so that a run stopped part way
    (a time limit, a hang) still leaves what it found."""

    def __init__(self, path):
        self.path, self.lines, self.failed = path, [], []

    def write(self):
        with open(self.path, "w") as f:
            f.write("\n".join(self.lines) + "\n")

    def section(self, title):
        self.lines += ["", f"## {title}", ""]

    def add(self, text):
        self.lines.append(text)
        self.write()

    def check(self, name, ok, detail=""):
        self.add(f"- {'PASS' if ok else 'FAIL'}: {name}{': ' + detail if detail else ''}")
        if not ok:
            self.failed.append(name)


def run(command, timeout=600):
    print("$", " ".join(command), flush=True)
    return subprocess.run(command, capture_output=True, text=True, env=ENV, timeout=timeout)


def conformance(args, summary):
    summary.section("Ops conformance, GPT- and Llama-style layers (CUDA at fp32 and bf16 "
                    "against the CPU in double) and split backward (I and W) on CUDA")
    result = run([os.path.join(args.bin, "runtime_cuda_tests"), "--gtest_brief=1"])
    skipped = re.search(r"\[  SKIPPED \] (\d+) test", result.stdout)
    skipped = int(skipped.group(1)) if skipped else 0
    passed = re.search(r"\[  PASSED  \] (\d+) test", result.stdout)
    summary.check("conformance suite and split backward", result.returncode == 0 and not skipped,
                  f"{passed.group(1) if passed else 0} passed, {skipped} skipped")
    if result.returncode != 0 or skipped:
        summary.add("```\n" + result.stdout[-4000:] + "\n```")


def equivalence(args, summary):
    summary.section("End-to-end equivalence on one GPU against the CPU reference")
    script = os.path.join(HERE, "..", "e2e", "equivalence.py")
    runs = [
        ("P=4 D=2 V=2 breadth-first, full sharding, bf16", "bf16", 1e-2, 2e-2,
         r"^breadth-first-full-p4-d2-v2$"),
        ("every schedule and sharding mode (gradients reduced per step and per run), fp32",
         "fp32", 1e-4, 1e-3,
         r"^(gpipe-full-p2-d2-v1|1f1b-none-p4-d2-v1|depth-first-full-p2-d2-v2|"
         r"breadth-first-full-p4-d2-v2|breadth-first-(optimizer|gradients)-p2-d2-v2|"
         r"umpipe-1f1b-p4-d2|searched-1f1b-p4-d2|1f1b-(full|blocks)-checkpointing-p2-d2|"
         r"(depth-first|interleaved-zb)-full-p2-d2-v2-reduce-each-run)$"),
        ("Llama-style (tied embeddings, GQA, rotary, SwiGLU, RMSNorm), split backward, text, "
         "Qwen3's attention (heads of their own width, q/k norms), DeepSeek-V3's latent "
         "attention (its heads recomputed too), fp32", "fp32", 1e-4, 1e-3,
         r"^(llama-breadth-first-full-p2-d2-v2|llama-1f1b-none-p4-d1-v1|llama-zbv-full-p2-d2-v2|"
         r"zb-h1-full-p2-d2-v1|dualpipev-none-p2-d1-v2|hf-qwen2-0.5b-1f1b-full-p2-d2|"
         r"data-text-breadth-first-full-p2-d2-v2|qwen3-1f1b-full-p2-d2|mla-1f1b-full-p2-d2|"
         r"mla-breadth-first-selective-checkpointing-p2-d2-v2)$"),
        ("tensor parallelism T=2 (loopback tensor groups on one GPU), with and "
         "without sequence parallelism, GPT- and Llama-style, DeepSeek-V3's latent attention "
         "split by heads (with its yarn positions and routed scaling too), fp32", "fp32", 1e-4,
         1e-3,
         r"^(tp2-1f1b-none-p2-d1-v1|tp2-breadth-first-full-sp-p2-d2-v2|"
         r"llama-tp2-1f1b-full-p1-d2-v1|llama-tp2-zb-h1-none-sp-p2-d1-v1|"
         r"tp2-1f1b-full-checkpointing-sp-p2-d1|mla-tp2-zb-h1-none-sp-p2-d1|"
         r"mla-yarn-tp2-ep2-1f1b-full-sp-p2-d2)$"),
        ("mixtures of experts (Mixtral-like, with the router z-loss; a capacity in the "
         "moe-shared- cases, dropping by weight in the -probs- ones): every expert on every "
         "rank, and expert "
         "groups of E=2 and 4 exchanging tokens through the loopback all-to-all, DualPipeV's "
         "paired steps with and without the overlap, ZeRO-1 with each rank's experts its own, "
         "tensor parallelism beside the experts, the router's bias moved by the load, "
         "Qwen2-MoE's gated shared expert, multi-token prediction modules (their loss's "
         "statistics read back from the device, the head's matrix shared), fp32",
         "fp32", 1e-4, 1e-3,
         r"^(moe-1f1b-full-p2-d2-v1|moe-dualpipev-none-p2-d2-v2|moe-ep2-1f1b-full-p2-d2-v1|"
         r"moe-ep4-1f1b-none-p1-d4-v1|moe-ep2-dualpipev-full-p2-d2-v2|"
         r"moe-ep2-dualpipev-full-p2-d2-v2-no-overlap|moe-ep2-dualpipev-optimizer-p2-d2-v2|"
         r"qwen3-moe-ep2-dualpipev-full-p2-d2-v2|moe-tp2-ep2-1f1b-optimizer-sp-p1-d2|"
         r"moe-shared-tp2-ep2-depth-first-full-sp-p2-d2-v2|moe-tp2-ep1-1f1b-full-p2-d2|"
         r"moe-shared-balanced-tp2-ep2-depth-first-full-sp-p2-d2-v2|"
         r"moe-gated-ep2-dualpipev-full-p2-d2-v2|moe-gated-tp2-ep2-1f1b-full-sp-p2-d1|"
         r"moe-shared-probs-tp2-ep2-1f1b-full-sp-p2-d1|"
         r"moe-shared-probs-ep2-dualpipev-full-p2-d2-v2|mtp-untied-1f1b-full-p2-d2|"
         r"mtp-moe-ep2-dualpipev-full-p2-d2-v2)$"),
    ]
    for name, dtype, loss_tol, param_tol, only in runs:
        result = run([sys.executable, script, "--bin", args.bin,
                      "--work", os.path.join(args.work, "equivalence-" + dtype),
                      "--backend=cuda", f"--dtype={dtype}", f"--loss-tolerance={loss_tol}",
                      f"--param-tolerance={param_tol}", "--only", only], timeout=900)
        summary.check(f"{name} (losses within {loss_tol:g}, parameters within {param_tol:g})",
                      result.returncode == 0)
        summary.add("```\n" + result.stdout.strip() + "\n```")


def gemm_throughput(args, summary):
    summary.section("GEMM throughput of the model's layer shapes (4096 tokens)")
    out = os.path.join(args.work, "gemm.json")
    result = run([os.path.join(args.bin, "cuda_gemm_bench"), f"--peak-tflops={args.peak_tflops}",
                  "--benchmark_min_time=0.05", "--benchmark_format=json",
                  f"--benchmark_out={out}"])
    if result.returncode != 0 or not os.path.exists(out):
        summary.check("cuda_gemm_bench", False, result.stderr[-2000:])
        return
    rows = {}
    for b in json.load(open(out))["benchmarks"]:
        _, mode, hidden, shape = b["name"].split("/")[:4]
        rows.setdefault((hidden, shape), {})[mode] = (b["TFLOPS"], b["peak_fraction"])
    summary.add(f"Dense bf16 peak taken as {args.peak_tflops:g} TFLOPS. `runtime` is what CudaOps "
                "runs (float32 storage, bf16 tensor cores); `bf16` stores bf16; `fp32` is "
                "float32 throughout.")
    summary.add("")
    summary.add("| hidden | GEMM | runtime TFLOPS (of peak) | bf16 TFLOPS (of peak) | fp32 TFLOPS |")
    summary.add("|---|---|---|---|---|")
    for (hidden, shape), modes in sorted(rows.items()):
        cell = lambda m: (f"{modes[m][0]:.0f} ({modes[m][1]:.0%})" if m in modes else "-")
        summary.add(f"| {hidden[1:]} | {shape} | {cell('runtime')} | {cell('bf16')} | "
                    f"{modes.get('fp32', (0, 0))[0]:.0f} |")
    summary.check("GEMM benchmark ran", bool(rows))


def step_seconds(tools, plan, ranks, steps, *extra):
    """Seconds per step in the steady state: the difference of a long and a short run."""
    times = []
    for n in (2, 2 + steps):
        if ranks > 1:
            result = tools.run_threads(plan, ranks, "--backend=cuda", f"--steps={n}", *extra)
        else:
            result = run([tools.runner, plan, "--backend=cuda", f"--steps={n}"] + list(extra))
        match = DONE.search(result.stdout)
        if result.returncode != 0 or not match:
            raise RuntimeError(f"conduit-run failed:\n{result.stdout}{result.stderr}")
        times.append(float(match.group(2)))
    return (times[1] - times[0]) / steps


def instructions(tools, plan):
    result = run([tools.runner, "--dump", plan])
    return max(len(r["instructions"]) for r in json.loads(result.stdout)["ranks"])


def executor_overhead(args, summary, tools):
    summary.section("Executor overhead per instruction")
    result = run([os.path.join(args.bin, "executor_bench"), "--benchmark_format=json",
                  "--benchmark_min_time=0.2"])
    if result.returncode == 0:
        for b in json.loads(result.stdout)["benchmarks"]:
            summary.add(f"- executor alone (no-op backend), {b['name']}: "
                        f"{b['ns_per_instruction'] * 1e9:.0f} ns per instruction")
    # A model so small that a step is launch overhead: executor + backend + kernel launches.
    job = {"model": {"kind": "transformer", "num_layers": 4, "hidden_size": 64, "num_heads": 4,
                     "seq_length": 16, "vocab_size": 64},
           "parallelism": {"pipeline": 1, "data": 1, "microbatches": 32, "microbatch_size": 1,
                           "schedule": "1f1b"},
           "cluster": {"preset": "h200-141gb"},
           "training": {"dtype": "bf16", "optimizer": "adam", "seed": 1}}
    plan = tools.compile(job, "overhead")
    try:
        per_step = step_seconds(tools, plan, 1, 50)
        count = instructions(tools, plan)
        summary.check("tiny-model CUDA step", True,
                      f"{per_step * 1e3:.2f} ms per step, {count} instructions: "
                      f"{per_step / count * 1e6:.1f} us per instruction (each a forward or "
                      f"backward of one layer chain: tens of kernel launches)")
    except RuntimeError as error:
        summary.check("tiny-model CUDA step", False, str(error)[-2000:])


def predicted_vs_measured(args, summary, tools):
    summary.section("Measured against predicted step time (one GPU, P=1, D=1)")
    job = {"model": {"kind": "transformer", "num_layers": 8, "hidden_size": 1024,
                     "num_heads": 16, "seq_length": 1024, "vocab_size": 32000,
                     "tie_embeddings": False},
           "parallelism": {"pipeline": 1, "data": 1, "microbatches": 4, "microbatch_size": 4,
                           "schedule": "1f1b"},
           "cluster": {"preset": "h200-141gb"},
           "training": {"dtype": "bf16", "optimizer": "adam", "seed": 1}}
    try:
        plan = tools.compile(job, "single-gpu")
        analytic = predicted(tools, job, "single-gpu", [])
        profile = os.path.join(args.work, "single-gpu-profile.json")
        # Enough steps that the first (cuBLAS set-up, first allocations) does not dominate
        # the profile's means.
        result = run([tools.runner, plan, "--backend=cuda", "--steps=20", f"--profile={profile}"])
        if result.returncode != 0:
            raise RuntimeError(result.stdout + result.stderr)
        profiled = predicted(tools, job, "single-gpu", [f"cluster.profile={profile}"])
        measured = step_seconds(tools, plan, 1, 10)
    except RuntimeError as error:
        summary.check("measured vs predicted", False, str(error)[-2000:])
        return
    summary.add("| prediction | step time | measured / predicted |")
    summary.add("|---|---|---|")
    summary.add(f"| analytic cost model (h200 preset) | {analytic * 1e3:.1f} ms | "
                f"{measured / analytic:.2f} |")
    summary.add(f"| measured profile | {profiled * 1e3:.1f} ms | {measured / profiled:.2f} |")
    summary.add(f"| measured | {measured * 1e3:.1f} ms | |")
    summary.check("profiled prediction within 25% of the measured step",
                  abs(measured / profiled - 1) <= 0.25)
    memory_against_plan(summary, tools, job)


def memory_against_plan(summary, tools, job):
    """Every rank's measured peak against the plan's, for what the runtime keeps (float32
    tensors, unfused attention: a plan with training.dtype fp32 and model.attention eager)
    and, for the record, for the job as written (bf16, fused attention by default)."""
    cases = [("as the runtime computes it", {"attention": "eager"}, {"dtype": "fp32"}, True),
             ("as written", {}, {}, False)]
    for label, model, training, held in cases:
        name = "single-gpu-memory-" + ("like" if held else "written")
        plan = tools.compile(dict(job, model=dict(job["model"], **model),
                                  training=dict(job["training"], **training)), name)
        result = run([tools.runner, plan, "--backend=cuda", "--steps=3"])
        lines = MEMORY.findall(result.stdout)
        if result.returncode != 0 or not lines:
            summary.check(f"memory against the plan ({label})", False,
                          (result.stdout + result.stderr)[-2000:])
            continue
        detail = "; ".join(f"rank {r}: {got} measured, {want} predicted ({gap}%)"
                           for r, got, want, gap in lines)
        if held:
            summary.check("measured memory at most 10% above the plan's, planned as the runtime "
                          "computes (float32, unfused attention)",
                          all(float(gap) <= 10 for _, _, _, gap in lines), detail)
        else:
            summary.add(f"- the job as written (bf16, fused attention: the plan counts neither "
                        f"the float32 tensors nor the scores the runtime keeps): {detail}")


def loopback_recovery(args, summary, tools):
    summary.section("Checkpoints and fault injection on one GPU (--ranks-per-process)")
    parallelism = {"pipeline": 2, "data": 2, "stages_per_device": 2, "schedule": "breadth-first",
                   "microbatches": 4, "sharding": "full"}
    plan = tools.compile(small_gpt(parallelism), "loopback-recovery")
    ranks = 4
    whole = tools.run_threads(plan, ranks, "--backend=cuda", "--steps=6")
    expected = losses(whole.stdout)
    summary.check("an uninterrupted loopback run", whole.returncode == 0 and len(expected) == 6,
                  whole.stderr[-2000:])
    directory = os.path.join(args.work, "loopback-checkpoints")
    shutil.rmtree(directory, ignore_errors=True)
    killed = tools.run_threads(plan, ranks, "--backend=cuda", "--steps=6",
                               f"--checkpoint={directory}", "--checkpoint-every=2",
                               "--fail-at=0:5:0")
    summary.check("--fail-at ends a loopback run with exit code 4 after its step-4 checkpoint",
                  killed.returncode == 4 and sorted(losses(killed.stdout)) == [1, 2, 3, 4]
                  and "rank 0: injected failure" in killed.stderr,
                  f"exit {killed.returncode}: {killed.stderr[-2000:]}")
    resumed = tools.run_threads(plan, ranks, "--backend=cuda", "--steps=2",
                                f"--resume={directory}")
    got = losses(resumed.stdout)
    # Within float32 tolerance: device reductions need not repeat bit for bit.
    close = resumed.returncode == 0 and sorted(got) == [5, 6] and all(
        abs(got[s] - expected.get(s, float("inf"))) <= 1e-5 * abs(expected.get(s, 1))
        for s in got)
    summary.check("resuming the loopback checkpoint continues with the uninterrupted losses",
                  close, f"{resumed.stdout[-1000:]}{resumed.stderr[-1000:]}; expected {expected}")
    start = time.time()
    stalled = tools.run_threads(plan, ranks, "--backend=cuda", "--steps=3", "--stall-at=1:2:5",
                                "--peer-timeout=3", timeout=120)
    summary.check(f"a stalled loopback rank is named by the others ({time.time() - start:.0f} s)",
                  stalled.returncode == 3 and "made no progress for 3 s" in stalled.stderr,
                  stalled.stderr[-2000:])


def kernels_by_shape(args, summary):
    summary.section("Kernels by shape against the cost model (PyTorch)")
    out = os.path.join(os.path.dirname(os.path.abspath(args.summary)), "kernels.json")
    result = run([sys.executable, os.path.join(HERE, "kernels.py"), "--out", out], timeout=300)
    if result.returncode != 0:
        summary.add(f"- not measured: {(result.stdout + result.stderr).strip()[-500:]}")
        return
    summary.add(f"- measured: {out}")
    model = os.path.join(args.bin, "kernel_model")
    if os.path.exists(model):
        check = run([sys.executable, os.path.join(HERE, "..", "bench", "kernel_model_check.py"),
                     "--model", model, "--measured", out])
        summary.add("```\n" + check.stdout.strip() + "\n```")


def predicted(tools, job, name, sets):
    path = os.path.join(tools.work, name + ".json")
    with open(path, "w") as f:
        json.dump(job, f)
    command = [tools.compiler, path, "--emit=report"]
    for s in sets:
        command += ["--set", s]
    result = run(command)
    if result.returncode != 0:
        raise RuntimeError(result.stderr)
    return json.loads(result.stdout)["step_time_s"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--summary", required=True)
    parser.add_argument("--peak-tflops", type=float, default=989)
    args = parser.parse_args()
    tools = Tools(args.bin, args.work)
    summary = Summary(args.summary)
    start = time.time()
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True).stdout
    except FileNotFoundError:
        gpu = ""
    summary.add("# GPU checks of the CUDA backend")
    summary.add("")
    summary.add(f"GPU: {gpu.strip() or 'unknown'}; command: `tests/gpu/run.sh`")
    for check in (conformance, equivalence, gemm_throughput):
        check(args, summary)
    executor_overhead(args, summary, tools)
    predicted_vs_measured(args, summary, tools)
    loopback_recovery(args, summary, tools)
    kernels_by_shape(args, summary)
    summary.section("Result")
    summary.add(f"{len(summary.failed)} check(s) failed"
                f"{': ' + ', '.join(summary.failed) if summary.failed else ''}; "
                f"{time.time() - start:.0f} s")
    print("\n".join(summary.lines))
    sys.exit(1 if summary.failed else 0)


if __name__ == "__main__":
    main()
