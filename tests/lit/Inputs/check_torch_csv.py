"""Checks a torch.distributed.pipelining compute+comms CSV against the rules PyTorch's own
validation enforces (the invariants listed in the peers reference, section 11).

Usage: check_torch_csv.py FILE MICROBATCHES [--window W]

Prints "ok: N actions on R ranks" or the first violated rule, and exits non-zero on a
violation. Written independently of Conduit's verifier.
"""
import re
import sys

ACTION = re.compile(r"^(\d+)(F|B|I|W|SEND_F|RECV_F|SEND_B|RECV_B|UNSHARD|RESHARD|REDUCE_GRAD)(\d*)$")
PAIR = re.compile(r"^\(([^;()]+);([^;()]+)\)OVERLAP_F_B$")


def fail(message):
    print("violation: " + message)
    sys.exit(1)


def parse(path):
    """Per rank, the actions in order, a pair's two one after the other. Also checks that a
    pair's sends follow it directly, the forward's first (REDUCE_GRAD may come between), as
    PyTorch lowers an OVERLAP_F_B step."""
    ranks = []
    for r, line in enumerate(open(path).read().splitlines()):
        actions = []
        sends = [c.strip() for c in line.split(",") if "SEND_" in c]
        pending = []  # the sends the last pair still owes
        for c, cell in enumerate(line.split(",")):
            cell = cell.strip()
            if not cell:
                continue
            pair = PAIR.match(cell)
            if pending and cell != pending[0] and not cell.endswith("REDUCE_GRAD"):
                fail(f"row {r} column {c}: {cell} comes before {pending[0]}, a send of the pair "
                     f"before it")
            if pending and cell == pending[0]:
                pending.pop(0)
            parts = [pair.group(1), pair.group(2)] if pair else [cell]
            for part in parts:
                m = ACTION.match(part)
                if not m:
                    fail(f"row {r} column {c}: unknown action {cell!r}")
                stage, kind, mb = int(m.group(1)), m.group(2), m.group(3)
                actions.append((stage, kind, int(mb) if mb else None))
            if pair and (actions[-2][1] != "F" or actions[-1][1] not in ("B", "I")):
                fail(f"row {r} column {c}: OVERLAP_F_B pairs a forward with a backward")
            if pair:
                forward, backward = actions[-2], actions[-1]
                pending = [x for x in (f"{forward[0]}SEND_F{forward[2]}",
                                       f"{backward[0]}SEND_B{backward[2]}") if x in sends]
        ranks.append(actions)
    return ranks


def main():
    path, microbatches = sys.argv[1], int(sys.argv[2])
    window = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[3] == "--window" else None
    ranks = parse(path)

    # Every stage lives on exactly one rank.
    stage_rank = {}
    for r, actions in enumerate(ranks):
        for stage, kind, mb in actions:
            if stage_rank.setdefault(stage, r) != r:
                fail(f"stage {stage} appears on ranks {stage_rank[stage]} and {r}")
    stages = sorted(stage_rank)
    if stages != list(range(len(stages))):
        fail(f"stages are not numbered 0..S-1: {stages}")
    last_stage = len(stages) - 1

    for r, actions in enumerate(ranks):
        done = set()

        def grad_done(stage, mb):
            return (stage, "B", mb) in done or (stage, "I", mb) in done

        resident, gathered_ever = set(), set()
        backward_count = {}
        for position, (stage, kind, mb) in enumerate(actions):
            where = f"rank {r} action {position} ({stage}{kind}{'' if mb is None else mb})"
            if kind in ("F", "B", "I", "W"):
                # Per-stage completeness and order. I and W split B: I carries the gradient.
                if (stage, kind, mb) in done:
                    fail(where + ": computed twice")
                if kind in ("B", "I") and (stage, "F", mb) not in done:
                    fail(where + ": backward before forward")
                if kind in ("B", "I") and grad_done(stage, mb):
                    fail(where + ": a second backward of the micro-batch")
                if kind == "W" and (stage, "I", mb) not in done:
                    fail(where + ": weight gradient before its input gradient")
                # Inputs: a receive from another rank, or the same-rank neighbour.
                source = stage - 1 if kind == "F" else stage + 1
                if kind != "W" and 0 <= source <= last_stage:
                    flow = "F" if kind == "F" else "B"
                    if stage_rank[source] == r:
                        if not ((source, "F", mb) in done if kind == "F" else grad_done(source, mb)):
                            fail(where + f": runs before {source}{flow}{mb} on the same rank")
                    elif (stage, "RECV_" + flow, mb) not in done:
                        fail(where + ": runs before its receive")
                # FSDP: compute only while the stage is unsharded.
                if window is not None and stage not in resident:
                    fail(where + ": computes on a stage that is not unsharded")
                if kind in ("B", "W"):
                    backward_count[stage] = backward_count.get(stage, 0) + 1
                    if backward_count[stage] == microbatches:
                        following = actions[position + 1] if position + 1 < len(actions) else None
                        if following != (stage, "REDUCE_GRAD", None) and any(
                                a[1] == "REDUCE_GRAD" for a in actions):
                            fail(where + ": REDUCE_GRAD does not follow the last backward")
            elif kind.startswith("SEND"):
                if not ((stage, "F", mb) in done if kind == "SEND_F" else grad_done(stage, mb)):
                    fail(where + ": sends before its compute")
                peer = stage + 1 if kind == "SEND_F" else stage - 1
                if stage_rank.get(peer) == r:
                    fail(where + ": communication between stages on one rank")
                matches = [a for a in ranks[stage_rank[peer]]
                           if a == (peer, "RECV_F" if kind == "SEND_F" else "RECV_B", mb)]
                if len(matches) != 1:
                    fail(where + f": {len(matches)} matching receives on rank {stage_rank[peer]}")
            elif kind.startswith("RECV"):
                if (stage, kind, mb) in done:
                    fail(where + ": received twice")
            elif kind == "UNSHARD":
                if stage in resident:
                    fail(where + ": unsharded twice")
                resident.add(stage)
                gathered_ever.add(stage)
                if window is not None and len(resident) > window:
                    fail(where + f": more than {window} stages resident")
            elif kind == "RESHARD":
                if stage not in resident:
                    fail(where + ": resharded without an unshard")
                resident.discard(stage)
            elif kind == "REDUCE_GRAD":
                if backward_count.get(stage, 0) != microbatches:
                    fail(where + ": reduces before the last backward")
                if (stage, kind, None) in done:
                    fail(where + ": reduced twice")
            done.add((stage, kind, mb))
        if resident:
            fail(f"rank {r} ends with stages {sorted(resident)} still unsharded")
        for stage in stages:
            if stage_rank[stage] != r:
                continue
            for mb in range(microbatches):
                if (stage, "F", mb) not in done:
                    fail(f"rank {r}: {stage}F{mb} is missing")
                if (stage, "B", mb) not in done and not (
                        (stage, "I", mb) in done and (stage, "W", mb) in done):
                    fail(f"rank {r}: {stage}B{mb} (or {stage}I{mb} and {stage}W{mb}) is missing")

    # The unit-time simulation terminates: every rank's next action becomes ready.
    position = [0] * len(ranks)
    placed = set()
    progress = True
    while progress:
        progress = False
        for r, actions in enumerate(ranks):
            while position[r] < len(actions):
                stage, kind, mb = actions[position[r]]
                if kind == "RECV_F" and (stage - 1, "SEND_F", mb) not in placed:
                    break
                if kind == "RECV_B" and (stage + 1, "SEND_B", mb) not in placed:
                    break
                placed.add((stage, kind, mb))
                position[r] += 1
                progress = True
    for r, actions in enumerate(ranks):
        if position[r] < len(actions):
            fail(f"rank {r} never progresses past action {position[r]} {actions[position[r]]}")
    print(f"ok: {sum(len(a) for a in ranks)} actions on {len(ranks)} ranks")


main()
