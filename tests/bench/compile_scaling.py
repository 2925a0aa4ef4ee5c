#!/usr/bin/env python3
"""Whole-process compile time and peak memory of conduit-compile against P·V·M.

Each point compiles testdata/jobs/bench-p64-v4-m256.json (breadth-first, full sharding,
256 layers) with pipeline, stages_per_device and microbatches overridden (and device memory
raised so that the few-rank points fit), from the job file to
a verified plan file, and reports the best of --repeat runs, from 10^3 to 10^6 (stage,
micro-batch) pairs. The last columns divide by P·V·M: if compile time and memory grow
linearly, microseconds and kilobytes per pair stay flat; the exponents of the power laws
through the points from 10^4 pairs say the same in one number each.

  tests/bench/compile_scaling.py --compiler build/bin/conduit-compile
"""

import argparse
import math
import os
import re
import subprocess
import sys
import tempfile
import time

# (P, V, M): P·V stages never exceed the job's 256 layers.
POINTS = [(8, 4, 32), (8, 8, 64), (16, 4, 64), (16, 8, 128), (32, 4, 128), (32, 8, 256),
          (64, 4, 256), (64, 4, 512), (64, 4, 1024), (64, 4, 2048), (64, 4, 4096)]
QUICK = [(4, 4, 16), (8, 4, 32)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--compiler", required=True)
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--job", default=os.path.join(here, "../../testdata/jobs/bench-p64-v4-m256.json"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="two small points (a smoke test)")
    args = parser.parse_args()

    print("| P | V | M | P·V·M | instructions | seconds | peak RSS (MB) | µs per P·V·M "
          "| KB per P·V·M |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        plan = os.path.join(tmp, "bench.plan")
        for p, v, m in QUICK if args.quick else POINTS:
            best = None
            for _ in range(args.repeat):
                result = measure(args.compiler, args.job, p, v, m, plan)
                best = result if best is None or result[0] < best[0] else best
            seconds, rss, instructions = best
            units = p * v * m
            rows.append((units, seconds, rss))
            print(f"| {p} | {v} | {m} | {units:,} | {instructions:,} | {seconds:.3f} | "
                  f"{rss / 2**20:.0f} | {seconds / units * 1e6:.2f} | {rss / units / 1e3:.2f} |",
                  flush=True)

    print_fit([(x, y) for x, y, _ in rows])
    large = [row for row in rows if row[0] >= 10**4]
    if len(large) >= 2:
        print(f"exponents from 10^4 pairs: time ~ (P·V·M)^{exponent(large, 1):.2f}, "
              f"peak RSS ~ (P·V·M)^{exponent(large, 2):.2f}")


def exponent(rows, column):
    """The slope of log(rows[column]) against log(P·V·M), least squares: 1 is linear."""
    xs = [math.log(row[0]) for row in rows]
    ys = [math.log(row[column]) for row in rows]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def print_fit(rows):
    """The line through (P·V·M, seconds) with the smallest relative errors: a fixed start-up
    cost plus a cost per unit. Linear growth shows as small residuals at every size."""
    w = [1 / y**2 for _, y in rows]
    sw = sum(w)
    sx = sum(wi * x for wi, (x, _) in zip(w, rows))
    sy = sum(wi * y for wi, (_, y) in zip(w, rows))
    sxx = sum(wi * x * x for wi, (x, _) in zip(w, rows))
    sxy = sum(wi * x * y for wi, (x, y) in zip(w, rows))
    slope = (sw * sxy - sx * sy) / (sw * sxx - sx * sx)
    fixed = (sy - slope * sx) / sw
    worst = max(abs(y - (fixed + slope * x)) / y for x, y in rows)
    print(f"\nfit: {fixed * 1e3:.1f} ms + {slope * 1e6:.2f} µs x P·V·M; "
          f"largest residual {worst:.0%} of a point's time")


def measure(compiler, job, p, v, m, plan):
    """Returns (seconds, peak RSS in bytes, instruction count) of one whole compile: the job
    file to the verified plan file (`-o`), timed; the count comes from the summary of a second,
    untimed compile."""
    sets = ["--set", f"parallelism.pipeline={p}",
            "--set", f"parallelism.stages_per_device={v}",
            "--set", f"parallelism.microbatches={m}",
            # Few ranks cannot hold this model; the benchmark measures compile time only.
            "--set", f"cluster.memory_bytes={2**50}"]
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen([compiler, job, "-o", plan] + sets, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            sys.exit(f"compile of P={p} V={v} M={m} failed:\n{err.read().decode()}")
    summary = subprocess.run([compiler, job] + sets, capture_output=True, text=True)
    found = re.search(r"([\d,]+) instructions on", summary.stdout)
    if not found:
        sys.exit(f"no instruction count in the summary of P={p} V={v} M={m}")
    return seconds, usage.ru_maxrss * 1024, int(found.group(1).replace(",", ""))

if __name__ == "__main__":
    main()
