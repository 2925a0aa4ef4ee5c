"""Prints the compute actions (F, B, I, W and overlapped pairs) of each row of a PyTorch pipelining CSV, idle cells
dropped: what a compute-only schedule and its lowering must agree on."""
import re
import sys

for line in open(sys.argv[1]).read().splitlines():
    cells = [c.strip() for c in line.split(",")]
    print(",".join(c for c in cells if re.fullmatch(r"\d+[FBIW]\d+|\([^()]*\)OVERLAP_F_B", c)))
