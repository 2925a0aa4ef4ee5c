"""Whole-process compile time of two builds of conduit-compile, measured in the same minutes.

This machine's speed drifts from one minute to the next, so a change is judged against the
previous build run alternately with it, batch by batch, never against a figure from another
day. Each batch runs one build N times on a job (`conduit-compile JOB -o PLAN`, timed with
os.wait4) and keeps the median; the table shows the range of batch medians, the smallest
minimum, the largest p90 and the peak RSS.

  tests/bench/compare_compile.py --before OLD/bin/conduit-compile \\
      --after build/bin/conduit-compile [--job FILE --runs N --batches B ...]
"""
import argparse
import os
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_JOBS = [("testdata/jobs/gpt-52b-bfs-512gpu.json", 20, 3),
                ("testdata/jobs/bench-p64-v4-m256.json", 5, 2)]


def timed(command):
    """Seconds and peak RSS (MB) of one run of `command`, which must succeed."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(command)}")
    return seconds, usage.ru_maxrss / 1024


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", required=True)
    parser.add_argument("--after", required=True)
    parser.add_argument("--job", help="one job instead of the default two")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--batches", type=int, default=3)
    args = parser.parse_args()
    jobs = [(args.job, args.runs, args.batches)] if args.job else [
        (os.path.join(ROOT, job), runs, batches) for job, runs, batches in DEFAULT_JOBS]
    builds = {"before": args.before, "after": args.after}
    work = tempfile.mkdtemp()
    print("| job | build | batch medians | min | p90 | peak RSS |")
    print("|---|---|---|---|---|---|")
    for job, runs, batches in jobs:
        results = {name: [] for name in builds}
        rss = {}
        for _ in range(batches):
            for name, tool in builds.items():
                times = []
                for _ in range(runs):
                    seconds, rss[name] = timed([tool, job, "-o", os.path.join(work, "out.plan")])
                    times.append(seconds)
                times.sort()
                results[name].append((statistics.median(times), times[0],
                                      times[int(0.9 * (runs - 1))]))
        for name in builds:
            medians = [m for m, _, _ in results[name]]
            print(f"| {os.path.basename(job)} | {name} | {min(medians):.3f}–{max(medians):.3f} s "
                  f"| {min(x for _, x, _ in results[name]):.3f} s "
                  f"| {max(x for _, _, x in results[name]):.3f} s | {rss[name]:.0f} MB |")


if __name__ == "__main__":
    main()
