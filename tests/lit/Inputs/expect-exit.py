"""Runs a command and succeeds only if it exits with the given code.

Usage: expect-exit.py CODE COMMAND [ARG...]

The command's standard output and error pass through, so that a lit RUN line can pipe them
into FileCheck. A crash (a signal) never counts as the expected code.
"""
import subprocess
import sys

expected = int(sys.argv[1])
result = subprocess.run(sys.argv[2:])
if result.returncode != expected:
    sys.stderr.write(f"expect-exit: expected exit code {expected}, got {result.returncode}\n")
    sys.exit(1)
