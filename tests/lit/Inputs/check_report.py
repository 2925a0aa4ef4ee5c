"""Checks `conduit-compile --emit=report` output against its documented schema and its
arithmetic: every figure present with the right type, each rank's idle attribution adding up
to its idle time, busy + idle = the step, counts matching the plan file's instructions.

Usage: check_report.py REPORT.json [PLAN.json]

Prints "ok: R ranks, step S s" or the first problem, and exits non-zero on a problem.
"""
import json
import math
import sys

TOP = {"step_time_s": float, "global_batch_samples": int, "tokens_per_s": float,
       "tflops_per_gpu": float, "bubble_fraction": float, "exposed_comm_s": float,
       "all_to_all_s": float, "all_to_all_exposed_s": float, "ranks": list, "stages": list}
RANK = {"rank": int, "busy_s": float, "weight_gradient_s": float, "idle_s": float, "idle": dict,
        "exposed_comm_s": float,
        "peak_memory_bytes": int, "all_gathers": int, "reduce_scatters": int,
        "all_reduces": int, "sends": int, "recvs": int, "tie_grads": int,
        "tensor_all_reduces": int, "tensor_all_gathers": int, "tensor_reduce_scatters": int,
        "all_to_alls": int, "all_to_all_s": float, "all_to_all_exposed_s": float}
IDLE = {"fill_drain_s": float, "p2p_s": float, "p2p_by_peer_s": dict, "all_gather_s": float,
        "reduction_tail_s": float, "tied_gradients_s": float, "tensor_s": float,
        "all_to_all_s": float, "other_s": float}


def fail(message):
    print("problem: " + message)
    sys.exit(1)


def check_keys(obj, schema, where):
    for key, kind in schema.items():
        if key not in obj:
            fail(f"{where}: missing {key}")
        value = obj[key]
        ok = isinstance(value, kind) or (kind is float and isinstance(value, int))
        if not ok or isinstance(value, bool):
            fail(f"{where}: {key} is {type(value).__name__}, expected {kind.__name__}")
    extra = set(obj) - set(schema)
    if extra:
        fail(f"{where}: unexpected keys {sorted(extra)}")


def close(a, b, step):
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9 * max(step, 1e-30))


def main():
    report = json.load(open(sys.argv[1]))
    check_keys(report, TOP, "report")
    step = report["step_time_s"]
    if not step > 0:
        fail("step_time_s is not positive")
    if not 0 <= report["bubble_fraction"] < 1:
        fail("bubble_fraction outside [0, 1)")
    idle_total = 0
    for r, rank in enumerate(report["ranks"]):
        where = f"rank {r}"
        check_keys(rank, RANK, where)
        check_keys(rank["idle"], IDLE, where + " idle")
        if rank["rank"] != r:
            fail(f"{where}: listed as rank {rank['rank']}")
        idle = rank["idle"]
        parts = (idle["fill_drain_s"] + idle["p2p_s"] + idle["all_gather_s"] +
                 idle["reduction_tail_s"] + idle["tied_gradients_s"] + idle["tensor_s"] +
                 idle["all_to_all_s"] + idle["other_s"])
        if not close(parts, rank["idle_s"], step):
            fail(f"{where}: idle parts add up to {parts}, idle_s is {rank['idle_s']}")
        if not close(sum(idle["p2p_by_peer_s"].values()), idle["p2p_s"], step):
            fail(f"{where}: p2p_by_peer_s does not add up to p2p_s")
        exposed = (idle["p2p_s"] + idle["all_gather_s"] + idle["reduction_tail_s"] +
                   idle["tied_gradients_s"] + idle["tensor_s"] + idle["all_to_all_s"])
        if not close(exposed, rank["exposed_comm_s"], step):
            fail(f"{where}: exposed_comm_s is not p2p + all-gather + reduction tail + tied "
                 "gradients + tensor + all-to-all")
        if not close(idle["all_to_all_s"], rank["all_to_all_exposed_s"], step):
            fail(f"{where}: all_to_all_exposed_s differs from idle.all_to_all_s")
        if rank["all_to_all_exposed_s"] > rank["all_to_all_s"] * (1 + 1e-9) + 1e-15:
            fail(f"{where}: more all-to-all exposed than there is")
        if not close(rank["busy_s"] + rank["idle_s"], step, step):
            fail(f"{where}: busy + idle != step")
        if any(v < 0 for v in idle.values() if isinstance(v, (int, float))):
            fail(f"{where}: negative idle time")
        idle_total += rank["idle_s"]
    if not close(idle_total / (len(report["ranks"]) * step), report["bubble_fraction"], 1):
        fail("bubble_fraction is not the mean idle fraction")
    if len(sys.argv) > 2:
        plan = json.load(open(sys.argv[2]))
        ops = {"all_gathers": "all_gather", "reduce_scatters": "reduce_scatter",
               "all_reduces": "all_reduce", "sends": "send", "recvs": "recv",
               "tie_grads": "tie_grads", "tensor_all_reduces": "tensor_all_reduce",
               "tensor_all_gathers": "tensor_all_gather",
               "tensor_reduce_scatters": "tensor_reduce_scatter",
               "all_to_alls": ("expert_dispatch", "expert_combine")}
        for rank, program in zip(report["ranks"], plan["ranks"]):
            for key, op in ops.items():
                count = sum(1 for i in program["instructions"]
                            if i["op"] == op or (isinstance(op, tuple) and i["op"] in op))
                if rank[key] != count:
                    fail(f"rank {rank['rank']}: {key} is {rank[key]}, the plan has {count}")
            if rank["peak_memory_bytes"] != program["peak_memory"]:
                fail(f"rank {rank['rank']}: peak memory differs from the plan's")
    print(f"ok: {len(report['ranks'])} ranks, step {step:.6g} s")


main()
