#!/usr/bin/env python3
"""The cost model's mixture-of-experts layer against published measurements of whole MoE
layers: for each layer of testdata/measured/sonicmoe-h100-moe-layers.json (router, grouped
GEMMs, activation, gather and aggregation of one GPU holding every expert, as SonicMoE's
Figure 14 measured several kernel stacks on an H100), the rate the model gives the layer's
forward and backward (build/bin/kernel_model's `moe` kernel), each stack's measured rate, and
the error of the model's time against each.

    tests/bench/moe_layer_check.py --model build/bin/kernel_model \\
        --measured testdata/measured/sonicmoe-h100-moe-layers.json [--markdown]

The measurements only test the model; nothing in it is set from them. With --summary-only it
prints the summary and fails where the model's layer leaves the stacks it is written to price
(docs/cost-model.md, Mixture of experts): its median time error against DeepGEMM's grouped
GEMMs with optimized gather and aggregation beyond --tolerance, in either pass.
"""

import argparse
import json
import statistics
import subprocess
import sys

# The stack whose kernels the model's grouped GEMMs and permutation stand for.
CALIBRATED = "deepgemm++"
PASSES = (("forward", 0, 6), ("backward", 1, 12))


def predictions(model, preset, layers):
    """The model's seconds for each layer's forward and backward, in PASSES' order."""
    lines = [f"moe {x['tokens']} {x['hidden']} {x['ffn']} {x['experts']} {x['top_k']} {backward}"
             for x in layers for _, backward, _ in PASSES]
    try:
        result = subprocess.run([model, preset], input="\n".join(lines) + "\n",
                                capture_output=True, text=True)
    except OSError as error:
        sys.exit(f"moe_layer_check: {model}: {error}")
    if result.returncode != 0:
        sys.exit(f"moe_layer_check: kernel_model failed: {result.stderr.strip()}")
    seconds = [float(x) for x in result.stdout.split()]
    return [seconds[i:i + len(PASSES)] for i in range(0, len(seconds), len(PASSES))]


def flops(layer, per_token_expert):
    return per_token_expert * layer["tokens"] * layer["top_k"] * layer["hidden"] * layer["ffn"]


def compare(measured, model, preset):
    """Rows (layer, pass, model T/s, {stack: (measured T/s, error of the model's time)})."""
    layers = measured["layers"]
    rows = []
    for layer, seconds in zip(layers, predictions(model, preset, layers)):
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
                        help="largest median |error| against the calibrated stack")
    args = parser.parse_args()
    with open(args.measured) as f:
        measured = json.load(f)
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

    result = summary(rows, stacks)
    print(f"moe layers: {len(measured['layers'])} layers on {args.preset}, the model's time "
          "against each stack's, median (lowest, highest):")
    for stack in stacks:
        parts = [f"{name} {m:+.0%} ({lo:+.0%}, {hi:+.0%})"
                 for name, _, _ in PASSES
                 for m, lo, hi in [result[(stack, name)]]]
        print(f"  {stack}: " + ", ".join(parts))

    if args.summary_only:
        failed = [f"{CALIBRATED} {name}: median {result[(CALIBRATED, name)][0]:+.1%}"
                  for name, _, _ in PASSES
                  if abs(result[(CALIBRATED, name)][0]) > args.tolerance]
        if failed:
            sys.exit("moe_layer_check: the model's MoE layer is off the stack it prices, "
                     f"beyond {args.tolerance:.0%}: " + "; ".join(failed))


if __name__ == "__main__":
    main()
