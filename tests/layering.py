"""Checks that the folders' includes point one way (ARCHITECTURE.md §9):

    tune -> compiler -> passes -> {analysis, scheduling, dialects, job} -> runtime/plan

runtime/ includes no MLIR, no LLVM and nothing of the compiler; job/ (the job model and its
readers) includes no MLIR and no LLVM either, only the plan's headers and runtime/Status.h;
scheduling/ and analysis/ include no MLIR and no IR (analysis/ reads the job model). tune/
includes no MLIR and reaches the IR only through compileJob(): of compiler/ it includes
CompileJob.h and the console every tool shares (ToolConsole.h), nothing else; only compiler/,
tune/ (and tests) include compiler/. The build's target graph says the same for linking; this
says it for every header, including ones no target names. Prints each include that breaks the
rule and exits 1 if there is one."""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCES = (".h", ".cpp", ".cu", ".inc")

# For each folder: the project folders (or path prefixes) it may include, and whether it may
# include MLIR or LLVM headers. Everything else it includes must be outside the project
# (Abseil, FlatBuffers, CUDA, the C++ library).
RULES = {
    "runtime": ({"runtime/"}, set()),
    "job": ({"job/", "runtime/plan/", "runtime/Status.h"}, set()),
    "scheduling": ({"scheduling/", "runtime/plan/"}, {"llvm/"}),
    "analysis": ({"analysis/", "job/", "scheduling/", "runtime/plan/", "runtime/Status.h"},
                 {"llvm/"}),
    "dialects": ({"dialects/"}, {"mlir/", "llvm/"}),
    "passes": ({"passes/", "analysis/", "job/", "scheduling/", "dialects/", "runtime/plan/",
                "runtime/Status.h", "runtime/Heap.h"}, {"mlir/", "llvm/"}),
    "compiler": ({"compiler/", "passes/", "analysis/", "job/", "scheduling/", "dialects/",
                  "runtime/"}, {"mlir/", "llvm/"}),
    "tune": ({"tune/", "compiler/CompileJob.h", "compiler/ToolConsole.h", "job/", "analysis/",
              "scheduling/", "runtime/plan/", "runtime/Status.h", "runtime/ExitCodes.h",
              "runtime/Heap.h"},
             {"llvm/"}),
}
PROJECT = set(RULES) | {"tests"}


def violations():
    for folder, (project, external) in RULES.items():
        for directory, _, files in os.walk(os.path.join(ROOT, folder)):
            for name in sorted(files):
                if not name.endswith(SOURCES):
                    continue
                path = os.path.join(directory, name)
                with open(path, encoding="utf-8") as f:
                    for number, line in enumerate(f, 1):
                        match = INCLUDE.match(line)
                        if not match:
                            continue
                        target = match.group(1)
                        first = target.split("/")[0]
                        if first in PROJECT:
                            allowed = any(target.startswith(p) for p in project)
                        elif first in ("mlir", "llvm"):
                            allowed = first + "/" in external
                        else:
                            allowed = True
                        if not allowed:
                            yield f"{os.path.relpath(path, ROOT)}:{number}: {folder}/ may not include \"{target}\""


def main():
    found = list(violations())
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} includes break the layering of ARCHITECTURE.md §9")
        return 1
    print("layering: every include points down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
