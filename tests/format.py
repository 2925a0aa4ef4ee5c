"""Checks that every C++ and CUDA source of the project is formatted as .clang-format says
(clang-format 22, which scripts/setup installs). Prints the files that are not, with the
command that formats them, and exits 1 if there is one."""

import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDERS = ["analysis", "compiler", "dialects", "job", "passes", "runtime", "scheduling", "tests",
           "tune"]
SOURCES = (".h", ".cpp", ".cu")


def main():
    tool = shutil.which("clang-format-22")
    if not tool:
        print("format: clang-format-22 is not installed (scripts/setup installs it)")
        return 1
    files = []
    for folder in FOLDERS:
        for directory, _, names in os.walk(os.path.join(ROOT, folder)):
            files += [os.path.join(directory, n) for n in sorted(names) if n.endswith(SOURCES)]
    unformatted = []
    for path in files:
        result = subprocess.run([tool, "--dry-run", "-Werror", path], capture_output=True)
        if result.returncode != 0:
            unformatted.append(os.path.relpath(path, ROOT))
    for path in unformatted:
        print(f"not formatted: {path}")
    if unformatted:
        print(f"{len(unformatted)} of {len(files)} files differ; run: clang-format-22 -i FILE...")
        return 1
    print(f"format: {len(files)} files follow .clang-format")
    return 0


if __name__ == "__main__":
    sys.exit(main())
