#!/usr/bin/env python3
"""The cost model's kernels against a GPU's measured ones: every GEMM, fused attention and
element-wise pass that tests/gpu/kernels.py measured, with the time the model gives it on the preset of that device
(build/bin/kernel_model), the error, and a summary by kind. The measurements only test the
model; its constants come from where docs/cost-model.md says.

    tests/bench/kernel_model_check.py --model build/bin/kernel_model \\
        --measured testdata/measured/h200-kernels.json [--preset h200-141gb] [--markdown]

Kernels measured under LAUNCH_BOUND_S are left out of the summary (their time is the host's
launch rate, which the model prices apart, `launch_overhead_s`). With --summary-only it prints
the summary and fails if the median |error| of a kind the cost model is calibrated on exceeds
--tolerance: the large GEMMs, the FP8 GEMMs and each fused attention kernel's forward and
backward.
"""

import argparse
import json
import statistics
import subprocess
import sys

LAUNCH_BOUND_S = 40e-6


def predictions(model, preset, lines, tool="kernel_model_check"):
    """kernel_model's seconds for each of `lines`; `tool` names the caller in errors."""
    try:
        result = subprocess.run([model, preset], input="\n".join(lines) + "\n",
                                capture_output=True, text=True)
    except OSError as error:
        sys.exit(f"{tool}: {model}: {error}")
    if result.returncode != 0:
        sys.exit(f"{tool}: kernel_model failed: {result.stderr.strip()}")
    return [float(x) for x in result.stdout.split()]


def attention_flops(run, backward):
    forward = 4.0 * run["batch"] * run["heads"] * run["seq"] ** 2 * run["dim"] / 2
    return 2.5 * forward if backward else forward


def row(kind, group, shape, seconds, work, predicted):
    """A kernel's row: its measured seconds, the measured and predicted rates of its `work`
    (FLOPs, or bytes for an element-wise pass) in T per second, and the predicted time's
    error."""
    return (kind, group, shape, seconds, work / seconds / 1e12, work / predicted / 1e12,
            predicted / seconds - 1)


def rows_of(measured, model, preset):
    """(kind, group, shape, measured seconds, measured T/s, predicted T/s, error of the
    predicted time), a row per kernel."""
    gemms = measured["gemms"]
    lines = [f"gemm {g['m']} {g['n']} {g['k']} {g['batch']} {int(g['fp8'])}" for g in gemms]
    attention = measured.get("attention", [])
    for run in attention:
        for backward in (0, 1):
            lines.append(f"attention {run['heads']} {run['seq']} {run['dim']} {backward} "
                         f"{int(run['backend'] == 'flash2')} {run['batch']}")
    elementwise = measured.get("elementwise", [])
    lines += [f"bytes {run['bytes']}" for run in elementwise]
    predicted = predictions(model, preset, lines)
    rows = []
    for g, p in zip(gemms, predicted):
        flops = 2.0 * g["m"] * g["n"] * g["k"] * g["batch"]
        kind = "fp8 GEMM" if g["fp8"] else "GEMM"
        rows.append(row(kind, g["group"], f"{g['batch']}×{g['m']}×{g['n']}×{g['k']}",
                        g["seconds"], flops, p))
    at = len(gemms)
    for run in attention:
        for backward in (0, 1):
            seconds = run["backward_s" if backward else "forward_s"]
            p = predicted[at]
            at += 1
            rows.append(row(f"attention {'backward' if backward else 'forward'}",
                            run["backend"],
                            f"{run['batch']}×{run['heads']}×{run['seq']}×{run['dim']}", seconds,
                            attention_flops(run, backward), p))
    # Element-wise passes: their rate in TB/s of the bytes the model charges.
    for run, p in zip(elementwise, predicted[at:]):
        rows.append(row("element-wise", run["name"], f"{run['bytes'] / 2**20:.0f} MiB",
                        run["seconds"], run["bytes"], p))
    return rows


def groups(rows):
    """The summary's kinds: large GEMMs (the transformer blocks' and the squares of 4096 and
    up), the rest by what limits them, FP8, and each attention backend."""
    out = {}
    for kind, group, shape, seconds, _, _, error in rows:
        if seconds < LAUNCH_BOUND_S:
            continue
        if kind == "GEMM":
            if group.startswith("h") or group in ("square", "calibration"):
                key = "GEMM, large (transformer blocks, squares)"
            else:
                key = f"GEMM, {group}"
        elif kind == "fp8 GEMM":
            key = "FP8 GEMM"
        elif kind == "element-wise":
            key = "element-wise"
        else:
            key = f"{kind}, {group}"
        out.setdefault(key, []).append(error)
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True, help="the kernel_model binary")
    parser.add_argument("--measured", required=True, help="tests/gpu/kernels.py's output")
    parser.add_argument("--preset", default="h200-141gb")
    parser.add_argument("--markdown", action="store_true", help="every kernel as a table")
    parser.add_argument("--summary-only", action="store_true")
    parser.add_argument("--tolerance", type=float, default=0.10,
                        help="largest median |error| of a calibrated kind with --summary-only")
    args = parser.parse_args()
    try:
        with open(args.measured) as f:
            measured = json.load(f)
    except (OSError, ValueError) as error:
        sys.exit(f"kernel_model_check: {args.measured}: {error}")
    rows = rows_of(measured, args.model, args.preset)
    if args.markdown:
        print("| kernel | group | shape | measured TFLOP/s (TB/s) | predicted TFLOP/s (TB/s) | "
              "time error |")
        print("|---|---|---|---|---|---|")
        for kind, group, shape, seconds, got, want, error in rows:
            note = " (launch-bound)" if seconds < LAUNCH_BOUND_S else ""
            print(f"| {kind} | {group} | {shape} | {got:.0f}{note} | {want:.0f} | "
                  f"{error * 100:+.1f}% |")
        print()
    print(f"{measured['device']} ({measured.get('torch', '?')}, CUDA {measured.get('cuda', '?')}) "
          f"against the {args.preset} preset; time error = predicted / measured - 1")
    summary = groups(rows)
    for key, errors in summary.items():
        absolute = [abs(e) for e in errors]
        print(f"  {key}: {len(errors)} kernels, median error {statistics.median(errors) * 100:+.1f}%,"
              f" median |error| {statistics.median(absolute) * 100:.1f}%, worst "
              f"{max(absolute) * 100:.1f}%")
    if not args.summary_only:
        return
    calibrated = {key: statistics.median(abs(e) for e in errors)
                  for key, errors in summary.items() if key.startswith(
                      ("GEMM, large", "FP8 GEMM", "attention forward", "attention backward"))}
    above = [f"{key} {median:.1%}" for key, median in calibrated.items()
             if median > args.tolerance]
    if above:
        sys.exit(f"kernel_model_check: median |error| above {args.tolerance:.0%}: "
                 + "; ".join(above))


if __name__ == "__main__":
    main()
