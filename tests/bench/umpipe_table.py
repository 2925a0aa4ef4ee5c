#!/usr/bin/env python3
"""The micro-batch searches on the committed UMPIPE-shaped jobs: for each job, schedule and
pipeline size, the predicted step with equal micro-batches and, per method, the gain of the
searched partitions and the search time. Prints the table of docs/results.md.

  tests/bench/umpipe_table.py --compiler build/bin/conduit-compile
"""

import argparse
import os
import re
import subprocess

JOBS = ["umpipe-gpt1-14", "umpipe-vgg16"]
METHODS = ["greedy", "dp", "genetic", "descent"]
LINE = re.compile(r"searched \((\w+), (\d+) candidates in ([^)]+)\): predicted step ([^,]+), "
                  r"equal micro-batches ([^(]+) \(([-0-9.]+)% faster\)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--compiler", required=True)
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--jobs", default=os.path.join(here, "../../testdata/jobs"))
    args = parser.parse_args()

    print("| job | schedule | P | equal | " + " | ".join(METHODS) + " |")
    print("|---|---|---|---|" + "---|" * len(METHODS))
    for job in JOBS:
        for schedule in ["gpipe", "1f1b"]:
            for pipeline in [4, 8]:
                cells, equal = [], ""
                for method in METHODS:
                    out = subprocess.run(
                        [args.compiler, os.path.join(args.jobs, job + ".json"),
                         "--set", f"parallelism.schedule={schedule}",
                         "--set", f"parallelism.pipeline={pipeline}",
                         f"--microbatch-search={method}"],
                        check=True, capture_output=True, text=True).stdout
                    m = LINE.search(out)
                    _, candidates, seconds, step, equal, gain = m.groups()
                    cells.append(f"+{float(gain):.1f}% ({seconds.strip()}, {int(candidates):,})")
                print(f"| {job} | {schedule} | {pipeline} | {equal.strip()} | " +
                      " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
