"""Checks the two timeline outputs of conduit-compile.

  check_timeline.py trace TRACE.json RANKS   Chrome trace-event JSON: metadata names every
      rank (process) and stream (thread); complete events have names, categories and
      non-negative durations; every flow start has one finish with the same id.
  check_timeline.py svg CHART.svg RANKS     the SVG parses as XML, labels every rank, has the
      legend and a time axis, and draws boxes inside its canvas.

Prints "ok: ..." or the first problem, and exits non-zero on a problem.
"""
import json
import re
import sys
import xml.etree.ElementTree as ET


def fail(message):
    print("problem: " + message)
    sys.exit(1)


def check_trace(path, ranks):
    data = json.load(open(path))
    events = data.get("traceEvents")
    if not isinstance(events, list):
        fail("no traceEvents list")
    processes, threads, slices, flows = {}, set(), 0, {}
    for e in events:
        ph = e.get("ph")
        if ph == "M":
            if e["name"] == "process_name":
                processes[e["pid"]] = e["args"]["name"]
            elif e["name"] == "thread_name":
                threads.add((e["pid"], e["tid"], e["args"]["name"]))
        elif ph == "X":
            for key in ("name", "cat", "ts", "dur", "pid", "tid"):
                if key not in e:
                    fail(f"complete event without {key}: {e}")
            if e["dur"] < 0 or e["ts"] < 0:
                fail(f"negative time: {e}")
            if e["cat"] in ("forward", "backward") and not re.fullmatch(r"[FB] s\d+ mb\d+",
                                                                        e["name"]):
                fail(f"unreadable compute name {e['name']!r}")
            slices += 1
        elif ph in ("s", "f"):
            flows.setdefault(e["id"], []).append(ph)
        elif ph != "i":
            fail(f"unexpected phase {ph!r}")
    if sorted(processes) != list(range(ranks)):
        fail(f"processes {sorted(processes)} for {ranks} ranks")
    for r in range(ranks):
        if processes[r] != f"rank {r}":
            fail(f"process {r} is named {processes[r]!r}")
        names = {name for pid, tid, name in threads if pid == r}
        if names != {"compute", "point-to-point", "collectives"}:
            fail(f"rank {r} has threads {sorted(names)}")
    for flow, phases in flows.items():
        if sorted(phases) != ["f", "s"]:
            fail(f"flow {flow} has phases {phases}")
    print(f"ok: {ranks} ranks, {slices} slices, {len(flows)} flows")


def check_svg(path, ranks):
    root = ET.parse(path).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    if root.tag != ns + "svg":
        fail(f"root element is {root.tag}")
    width, height = float(root.get("width")), float(root.get("height"))
    texts = [t.text or "" for t in root.iter(ns + "text")]
    for r in range(ranks):
        if f"rank {r}" not in texts:
            fail(f"no label for rank {r}")
    for label in ("forward", "time"):
        if label not in texts:
            fail(f"no legend entry {label!r}")
    # The legend (the swatches on the legend's line) shows exactly the colours the chart draws.
    rects = list(root.iter(ns + "rect"))
    swatches = {r.get("fill") for r in rects if r.get("y") == "32"}
    drawn = {r.get("fill") for r in rects if r.get("y") not in (None, "32")}
    if swatches != drawn:
        fail(f"legend colours {sorted(swatches)} but boxes drawn in {sorted(drawn)}")
    if not any(re.fullmatch(r"[\d.]+ (s|ms|us|ns)", t) for t in texts):
        fail("no time axis labels")
    boxes = 0
    for rect in root.iter(ns + "rect"):
        x, y = float(rect.get("x", 0)), float(rect.get("y", 0))
        w, h = float(rect.get("width")), float(rect.get("height"))
        if x < 0 or y < 0 or x + w > width + 0.5 or y + h > height + 0.5 or w <= 0 or h <= 0:
            fail(f"box outside the canvas: {rect.attrib}")
        boxes += 1
    print(f"ok: {ranks} ranks, {boxes} boxes, {width:.0f}x{height:.0f}")


def main():
    kind, path, ranks = sys.argv[1], sys.argv[2], int(sys.argv[3])
    {"trace": check_trace, "svg": check_svg}[kind](path, ranks)


main()
