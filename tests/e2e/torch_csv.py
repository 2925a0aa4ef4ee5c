#!/usr/bin/env python3
"""PyTorch's own DualPipeV order, imported: testdata/pytorch/dualpipev_4rank_10mb.csv (4 ranks,
8 stages, 10 micro-batches; whole backwards and split input and weight gradients mixed on one
stage, forwards paired with backwards in OVERLAP_F_B cells), compiled with --import-torch-csv
for a GPT of 8 layers, trained by conduit-run under mpirun and compared with the
single-process reference and with Conduit's own dualpipev plan of the same job. The schedules
differ but compute the same step: the losses and the parameters after the last step must be
the reference's, bit for bit, and each rank's measured peak memory within 10% of the plan's.
The same for a Llama-style mixture of experts over expert groups of 2, whose imported plan must
also hide some of its all-to-alls in PyTorch's OVERLAP_F_B cells; there, the all-to-alls
overlapping, Conduit's own dualpipev is DualPipe's order, and its CSV must be PyTorch's file.

Usage: torch_csv.py --bin BUILD/bin --work DIR
"""

import json
import os
import sys

from common import Tools, arguments, losses, small_gpt, small_llama
from equivalence import MEMORY_TOLERANCE, memory_error

STEPS = 3
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CSV = os.path.join(ROOT, "testdata", "pytorch", "dualpipev_4rank_10mb.csv")


def main():
    args = arguments().parse_args()
    tools = Tools(args.bin, args.work, args.compiler_bin)
    failures = []
    for sharding, data, experts in [("none", 1, False), ("full", 2, False), ("full", 2, True)]:
        name = f"dualpipev-{sharding}-p4-d{data}-v2" + ("-moe-e2" if experts else "")
        parallelism = {"pipeline": 4, "data": data, "stages_per_device": 2,
                       "schedule": "dualpipev", "microbatches": 10, "sharding": sharding}
        if experts:
            job = small_llama(dict(parallelism, expert=2), layers=8)
            job["model"]["moe"] = {"num_experts": 4, "top_k": 2, "expert_ffn_hidden_size": 24,
                                   "aux_loss_coefficient": 0.01, "dense_layers": 1}
        else:
            job = small_gpt(parallelism, layers=8)
        native = tools.compile(job, name)
        imported = tools.compile(job, "torch-" + name, f"--import-torch-csv={CSV}")
        job_path = os.path.join(args.work, name + ".json")
        # Without experts Conduit's dualpipev is a list schedule of its own; where all-to-alls
        # overlap it is DualPipe's own order, which PyTorch's file writes too.
        if (tools.emit(job_path, "torch-csv-compute") == open(CSV).read()) != experts:
            sys.exit(f"{name}: the native dualpipev order is {'not ' if experts else ''}"
                     "PyTorch's")
        if experts:
            report = json.loads(tools.emit(job_path, "report", f"--import-torch-csv={CSV}"))
            hidden = report["all_to_all_s"] - report["all_to_all_exposed_s"]
            print(f"{'ok' if hidden > 0 else 'MISMATCH'}: imported {name}: "
                  f"{hidden:.3g} s of {report['all_to_all_s']:.3g} s of all-to-alls hidden in "
                  "PyTorch's paired cells", flush=True)
            if hidden <= 0:
                failures.append(f"imported {name}: no all-to-all hidden")

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
