"""Checks a torch.distributed.pipelining compute-only CSV against the rules PyTorch applies
when it loads one (`_PipelineScheduleRuntime._load_csv(path)` with its default
`format="compute_only"`, then `_validate_schedule`): one row per pipeline rank, every cell a
compute action (F, B, or the split I / W, or an overlapped pair "(aFm;bBn)OVERLAP_F_B" of a
forward and a backward or I) or empty, every stage on one rank, per stage exactly one forward
and one backward (B, or I and W) of each micro-batch 0..M-1, a backward only after its forward
and a W only after its I. A stage may run some micro-batches' backwards whole and split others
(PyTorch counts B + (I + W) / 2 per stage, with as many W as I). Communication cells (SEND/RECV, UNSHARD, RESHARD, REDUCE_GRAD) are
refused, as PyTorch's compute-only loader refuses them.

Usage: check_torch_csv_compute.py FILE RANKS MICROBATCHES

Prints "ok: N compute actions on R ranks" or the first violated rule, and exits non-zero on a
violation. Written independently of Conduit's writer and reader.
"""
import re
import sys

ACTION = re.compile(r"^(\d+)(F|I|B|W)(\d+)$")
PAIR = re.compile(r"^\(([^;()]+);([^;()]+)\)OVERLAP_F_B$")


def fail(message):
    print("violation: " + message)
    sys.exit(1)


def main():
    path, ranks, microbatches = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rows = open(path).read().splitlines()
    if len(rows) != ranks:
        fail(f"{len(rows)} rows for {ranks} pipeline ranks")
    stage_rank = {}
    done = {}  # (stage, kind) -> micro-batches
    count = 0
    for r, line in enumerate(rows):
        for c, cell in enumerate(line.split(",")):
            cell = cell.strip()
            if not cell:
                continue
            pair = PAIR.match(cell)
            parts = [pair.group(1), pair.group(2)] if pair else [cell]
            kinds = []
            for part in parts:
                m = ACTION.match(part.strip())
                if not m:
                    fail(f"row {r} column {c}: {cell!r} is not a compute action")
                stage, kind, mb = int(m.group(1)), m.group(2), int(m.group(3))
                kinds.append(kind)
                if stage_rank.setdefault(stage, r) != r:
                    fail(f"stage {stage} is assigned to ranks {stage_rank[stage]} and {r}")
                if kind in ("B", "I") and mb not in done.get((stage, "F"), set()):
                    fail(f"row {r}: {cell} runs a backward before its forward")
                if kind == "W" and mb not in done.get((stage, "I"), set()):
                    fail(f"row {r}: {cell} runs a weight gradient before its input gradient")
                # B and I both carry the micro-batch's gradient: one of them, once.
                if kind in ("B", "I") and mb in done.get((stage, "B" if kind == "I" else "I"),
                                                         set()):
                    fail(f"row {r}: {cell} runs a second backward of the micro-batch")
                seen = done.setdefault((stage, kind), set())
                if mb in seen:
                    fail(f"row {r}: {cell} appears twice")
                seen.add(mb)
                count += 1
            if pair and (kinds[0] != "F" or kinds[1] not in ("B", "I")):
                fail(f"row {r}: {cell} pairs something other than a forward and a backward")
    stages = sorted(stage_rank)
    if stages != list(range(len(stages))):
        fail(f"stages are not numbered 0..S-1: {stages}")
    every = set(range(microbatches))
    for stage in stages:
        whole, split = done.get((stage, "B"), set()), done.get((stage, "I"), set())
        if done.get((stage, "F"), set()) != every or whole | split != every:
            fail(f"stage {stage} does not run F and B (or I) for every micro-batch "
                 f"0..{microbatches - 1}")
        if split != done.get((stage, "W"), set()):
            fail(f"stage {stage} does not run a W for each of its I")
    print(f"ok: {count} compute actions on {ranks} ranks")


if __name__ == "__main__":
    main()
