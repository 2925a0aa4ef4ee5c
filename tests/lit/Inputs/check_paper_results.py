"""Checks the qualitative results of breadth-first pipeline parallelism (arXiv 2211.05953) on
a `conduit-compile --sweep ... --emit=report` array.

Usage: check_paper_results.py small|large SWEEP.json

  small  breadth-first with full sharding predicts more tokens/s than every depth-first
         configuration with the same sharding and every non-looped 1F1B configuration.
  large  the best non-looped 1F1B configuration is within 5% of the best configuration
         that fits in memory, or is the best.

Prints the figures it compared, then "ok" or "violation: ...", exiting non-zero on a
violation.
"""
import json
import sys


def label(config):
    return ", ".join(f"{k.split('.')[-1]}={v}" for k, v in sorted(config.items()))


def main():
    mode, path = sys.argv[1], sys.argv[2]
    rows = json.load(open(path))
    ok = [(r["config"], r["report"]["tokens_per_s"]) for r in rows if "report" in r]
    if not ok:
        print("violation: no configuration compiled")
        sys.exit(1)

    def best(predicate):
        chosen = [(c, t) for c, t in ok if predicate(c)]
        return max(chosen, key=lambda ct: ct[1]) if chosen else None

    def schedule(c, name):
        return c.get("parallelism.schedule") == name

    def sharding(c, name):
        return c.get("parallelism.sharding", "full") == name

    if mode == "small":
        bfs = best(lambda c: schedule(c, "breadth-first") and sharding(c, "full"))
        dfs = best(lambda c: schedule(c, "depth-first") and sharding(c, "full"))
        one = best(lambda c: schedule(c, "1f1b"))
        for name, entry in (("breadth-first", bfs), ("depth-first", dfs), ("1f1b", one)):
            if entry is None:
                print(f"violation: no {name} configuration compiled")
                sys.exit(1)
            print(f"{name}: {entry[1]:.0f} tokens/s ({label(entry[0])})")
        if not (bfs[1] > dfs[1] and bfs[1] > one[1]):
            print("violation: breadth-first is not the fastest at a small batch per GPU")
            sys.exit(1)
        print(f"breadth-first over depth-first: +{100 * (bfs[1] / dfs[1] - 1):.0f}%, "
              f"over 1f1b: +{100 * (bfs[1] / one[1] - 1):.0f}%")
    else:
        top = best(lambda c: True)
        one = best(lambda c: schedule(c, "1f1b"))
        print(f"best: {top[1]:.0f} tokens/s ({label(top[0])})")
        print(f"1f1b: {one[1]:.0f} tokens/s ({label(one[0])})")
        if one[1] < 0.95 * top[1]:
            print("violation: 1f1b is more than 5% behind the best at a large batch per GPU")
            sys.exit(1)
        print(f"1f1b is {100 * (1 - one[1] / top[1]):.1f}% behind the best")
    print("ok")


main()
