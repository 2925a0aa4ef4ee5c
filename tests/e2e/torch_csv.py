#!/usr/bin/env python3
"""PyTorch's own DualPipeV order, imported: testdata/pytorch/dualpipev_4rank_10mb.csv (4 ranks,
8 stages, 10 micro-batches; whole backwards and split input and weight gradients mixed on one
stage, forwards paired with backwards in OVERLAP_F_B cells), compiled with --import-torch-csv
for a GPT of 8 layers, trained by conduit-run under mpirun and compared with the
single-process reference and with Conduit's own dualpipev plan of the same job. The schedules
differ but compute the same step: the losses and the parameters after the last step must be
the reference's, bit for bit, and each rank's measured peak memory within 10% of the plan's.

Usage: torch_csv.py --bin BUILD/bin --work DIR
"""

import os
import sys

from common import Tools, arguments, losses, small_gpt
from equivalence import MEMORY_TOLERANCE, memory_error

STEPS = 3
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CSV = os.path.join(ROOT, "testdata", "pytorch", "dualpipev_4rank_10mb.csv")


def main():
    args = arguments().parse_args()
    tools = Tools(args.bin, args.work, args.compiler_bin)
    failures = []
    for sharding, data in [("none", 1), ("full", 2)]:
        name = f"dualpipev-{sharding}-p4-d{data}-v2"
        job = small_gpt({"pipeline": 4, "data": data, "stages_per_device": 2,
                         "schedule": "dualpipev", "microbatches": 10, "sharding": sharding},
                        layers=8)
        native = tools.compile(job, name)
        imported = tools.compile(job, "torch-" + name, f"--import-torch-csv={CSV}")
        job_path = os.path.join(args.work, name + ".json")
        if tools.emit(job_path, "torch-csv-compute") == open(CSV).read():
            sys.exit(f"{name}: the native dualpipev order is PyTorch's; the case tests nothing")

        ref_dir = os.path.join(args.work, f"reference-d{data}")
        result = tools.reference(native, f"--steps={STEPS}", f"--save-params={ref_dir}")
        if result.returncode != 0:
            sys.exit(f"the reference for {name} failed:\n{result.stderr}")
        expected_losses = losses(result.stdout)
        with open(os.path.join(ref_dir, "model.safetensors"), "rb") as f:
            expected_params = f.read()

        for label, plan in [("native", native), ("imported", imported)]:
            out_dir = os.path.join(args.work, f"{label}-{name}-params")
            result = tools.run(plan, 4 * data, f"--steps={STEPS}", f"--save-params={out_dir}")
            if result.returncode != 0:
                failures.append(f"{label} {name}: exit {result.returncode}\n{result.stdout}"
                                f"{result.stderr}")
                continue
            got = losses(result.stdout)
            with open(os.path.join(out_dir, "model.safetensors"), "rb") as f:
                same_params = f.read() == expected_params
            memory_worst, memory_where = memory_error(result.stdout, 4 * data)
            good = (got == expected_losses and len(got) == STEPS and same_params
                    and memory_worst <= MEMORY_TOLERANCE)
            print(f"{'ok' if good else 'MISMATCH'}: {label} {name}: losses "
                  f"{'equal' if got == expected_losses else f'{got} vs {expected_losses}'}, "
                  f"parameters {'equal' if same_params else 'differ'}, memory {memory_where}",
                  flush=True)
            if not good:
                failures.append(f"{label} {name}")
    if failures:
        print("\n".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
