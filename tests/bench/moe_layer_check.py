#!/usr/bin/env python3
"""The cost model's mixture-of-experts layer against published measurements of whole MoE
layers: for each layer of testdata/measured/sonicmoe-h100-moe-layers.json (router, grouped
GEMMs, activation, gather and aggregation of one GPU holding every expert, as SonicMoE's
Figure 14 measured several kernel stacks on an H100), the rate the model gives the layer's
forward and backward (build/bin/kernel_model's `moe` kernel), each stack's measured rate, and
the error of the model's time against each.

    tests/bench/moe_layer_check.py --model build/bin/kernel_model \\
        --measured testdata/measured/sonicmoe-h100-moe-layers.json [--markdown]

The model prices a layer two ways (the job's `model.moe.kernels`): `grouped`, the grouped
GEMM kernels, which nothing measured here sets, and `megatron`, Megatron-LM's layer, whose two
constants are the fit that `--fit megatron` prints to that stack's measurements
(analysis/Roofline.cpp). With --summary-only it prints the summary and fails where either
leaves the stack it prices (docs/cost-model.md, Mixture of experts): a median time error
beyond --tolerance in either pass, `grouped` against DeepGEMM's grouped GEMMs with optimized
gather and aggregation, `megatron` against Megatron-LM.
"""

import argparse
import json
import statistics
import sys

import kernel_model_check

# The measured stack each of the model's kernels (model.moe.kernels) stands for.
PRICES = {"grouped": "deepgemm++", "megatron": "megatron"}
PASSES = (("forward", 0, 6), ("backward", 1, 12))


def run_model(model, preset, lines):
    return kernel_model_check.predictions(model, preset, lines, tool="moe_layer_check")


def predictions(model, preset, layers, kernels):
    """The model's seconds for each layer's forward and backward, in PASSES' order."""
    lines = [f"moe {x['tokens']} {x['hidden']} {x['ffn']} {x['experts']} {x['top_k']} {backward} "
             f"{kernels}" for x in layers for _, backward, _ in PASSES]
    seconds = run_model(model, preset, lines)
    return [seconds[i:i + len(PASSES)] for i in range(0, len(seconds), len(PASSES))]


def solve(a, b):
    """x with a·x = b (Gaussian elimination; a square and regular)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for i in range(n):
        pivot = max(range(i, n), key=lambda r: abs(m[r][i]))
        m[i], m[pivot] = m[pivot], m[i]
        for r in range(n):
            if r != i:
                f = m[r][i] / m[i][i]
                m[r] = [x - f * y for x, y in zip(m[r], m[i])]
    return [m[i][n] / m[i][i] for i in range(n)]


def fit(measured, model, preset, stack):
    """The least-squares fit, in relative time, of a stack's measured layers as the model's
    layer with its products `slowdown` times slower and `passes` more reads and writes of each
    routed token's hidden + ffn elements (forward, backward): (slowdown, forward passes,
    backward passes) and each layer's (forward, backward) relative residual."""
    layers = measured["layers"]
    lines = []
    for x in layers:
        shape = f"{x['tokens']} {x['hidden']} {x['ffn']} {x['experts']} {x['top_k']}"
        routed_bytes = 2 * x["tokens"] * x["top_k"] * (x["hidden"] + x["ffn"])
        lines += [f"moe {shape} 0", f"moe-gemms {shape} 0", f"moe {shape} 1",
                  f"moe-gemms {shape} 1", f"bytes {routed_bytes}"]
    seconds = run_model(model, preset, lines)
    rows, targets = [], []
    for i, x in enumerate(layers):
        total_f, gemm_f, total_b, gemm_b, routed = seconds[5 * i:5 * i + 5]
        for (name, _, per_token_expert), total, gemm in zip(PASSES, (total_f, total_b),
                                                            (gemm_f, gemm_b)):
            time = flops(x, per_token_expert) / (x[f"{name}_tflops"][stack] * 1e12)
            row = [gemm / time, routed / time if name == "forward" else 0,
                   routed / time if name == "backward" else 0]
            rows.append(row)
            targets.append((time - (total - gemm)) / time)
    normal = [[sum(r[i] * r[j] for r in rows) for j in range(3)] for i in range(3)]
    rhs = [sum(r[i] * t for r, t in zip(rows, targets)) for i in range(3)]
    coefficients = solve(normal, rhs)
    residuals = [sum(c * v for c, v in zip(coefficients, r)) - t for r, t in zip(rows, targets)]
    return coefficients, residuals


def flops(layer, per_token_expert):
    return per_token_expert * layer["tokens"] * layer["top_k"] * layer["hidden"] * layer["ffn"]


def compare(measured, model, preset, kernels="grouped"):
    """Rows (layer, pass, model T/s, {stack: (measured T/s, error of the model's time)}) of the
    model with `kernels`."""
    layers = measured["layers"]
    rows = []
    for layer, seconds in zip(layers, predictions(model, preset, layers, kernels)):
        for (name, _, per_token_expert), predicted in zip(PASSES, seconds):
            work = flops(layer, per_token_expert)
            stacks = {stack: (rate, predicted / (work / (rate * 1e12)) - 1)
                      for stack, rate in layer[f"{name}_tflops"].items()}
            rows.append((layer, name, work / predicted / 1e12, stacks))
    return rows


def shape(layer):
    return (f"{layer['model']}: T {layer['tokens']}, d {layer['hidden']}, n {layer['ffn']}, "
            f"E {layer['experts']}, K {layer['top_k']}")


def summary(rows, stacks):
    """{(stack, pass): (median, lowest, highest) error of the model's time}."""
    out = {}
    for stack in stacks:
        for name, _, _ in PASSES:
            errors = [r[3][stack][1] for r in rows if r[1] == name]
            out[(stack, name)] = (statistics.median(errors), min(errors), max(errors))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="build/bin/kernel_model")
    parser.add_argument("--measured", required=True)
    parser.add_argument("--preset", default="h100-80gb")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--summary-only", action="store_true")
    parser.add_argument("--tolerance", type=float, default=0.20,
                        help="largest median |error| against the stack each kernels prices")
    parser.add_argument("--fit", metavar="STACK",
                        help="print the slowdown of the products and the passes over the "
                             "routed tokens that fit STACK's layers best, and exit")
    args = parser.parse_args()
    with open(args.measured) as f:
        measured = json.load(f)
    if args.fit:
        if args.fit not in measured["stacks"]:
            sys.exit(f"moe_layer_check: --fit: no stack '{args.fit}' in {args.measured}")
        (slowdown, forward, backward), residuals = fit(measured, args.model, args.preset,
                                                       args.fit)
        print(f"{args.fit}: products {slowdown:.3f} times slower, {forward:.2f} forward and "
              f"{backward:.2f} backward passes more over each routed token's hidden + ffn "
              "elements")
        print("residuals (forward, backward), by layer: " + ", ".join(
            f"{a:+.0%}/{b:+.0%}" for a, b in zip(residuals[0::2], residuals[1::2])))
        return
    stacks = list(measured["stacks"])
    rows = compare(measured, args.model, args.preset)

    if not args.summary_only:
        if args.markdown:
            print("| layer | pass | model TFLOP/s | "
                  + " | ".join(f"{s} TFLOP/s (model's time)" for s in stacks) + " |")
            print("|---|---|---|" + "---|" * len(stacks))
            for layer, name, rate, by_stack in rows:
                cells = " | ".join(f"{by_stack[s][0]:.0f} ({by_stack[s][1]:+.0%})" for s in stacks)
                print(f"| {shape(layer)} | {name} | {rate:.0f} | {cells} |")
        else:
            for layer, name, rate, by_stack in rows:
                cells = "  ".join(f"{s} {by_stack[s][0]:.0f} ({by_stack[s][1]:+.0%})"
                                  for s in stacks)
                print(f"{shape(layer):48} {name:8} model {rate:4.0f}  {cells}")
        print()

    def line(label, result, stack):
        parts = [f"{name} {m:+.0%} ({lo:+.0%}, {hi:+.0%})"
                 for name, _, _ in PASSES
                 for m, lo, hi in [result[(stack, name)]]]
        print(f"  {label}: " + ", ".join(parts))

    result = summary(rows, stacks)
    print(f"moe layers: {len(measured['layers'])} layers on {args.preset}, the model's time "
          "against each stack's, median (lowest, highest):")
    for stack in stacks:
        line(stack, result, stack)
    priced = {"grouped": result}
    for kernels, stack in PRICES.items():
        if kernels != "grouped":
            priced[kernels] = summary(compare(measured, args.model, args.preset, kernels),
                                      [stack])
            line(f"{stack}, priced with kernels {kernels}", priced[kernels], stack)

    if args.summary_only:
        failed = [f"kernels {kernels} against {stack} {name}: median "
                  f"{priced[kernels][(stack, name)][0]:+.1%}"
                  for kernels, stack in PRICES.items() for name, _, _ in PASSES
                  if abs(priced[kernels][(stack, name)][0]) > args.tolerance]
        if failed:
            sys.exit("moe_layer_check: the model's MoE layer is off the stack it prices, "
                     f"beyond {args.tolerance:.0%}: " + "; ".join(failed))


if __name__ == "__main__":
    main()
