#!/usr/bin/env python3
"""Compare two DSA_TRACE logs (say --device cpu vs --device cuda) line by line.

Prints, per traced tensor, the relative difference of its sum and abs-sum and whether the
leading values agree; integer tensors (top-k indices) are compared exactly. Usage:
  trace_diff.py A.log B.log [--limit N]
"""
import argparse
import re

LINE = re.compile(r"trace (\S+) \[([^\]]*)\] sum=(\S+) abssum=(\S+) max\|x\|=(\S+) first=\[([^\]]*)\]")


def parse(path):
    out = []
    for line in open(path, errors="replace"):
        m = LINE.search(line)
        if m:
            name, shape, s, a, mx, first = m.groups()
            out.append((name, shape, float(s), float(a), [float(v) for v in first.split()]))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--limit", type=int, default=400)
    args = ap.parse_args()
    A, B = parse(args.a), parse(args.b)
    print(f"{len(A)} vs {len(B)} traced tensors")
    for i, (x, y) in enumerate(zip(A, B)):
        if i >= args.limit:
            break
        if x[0] != y[0] or x[1] != y[1]:
            print(f"{i}: name/shape mismatch {x[0]}{x[1]} vs {y[0]}{y[1]}")
            break
        rel = abs(x[3] - y[3]) / max(abs(x[3]), 1e-30)
        same_first = x[4] == y[4]
        flag = "" if same_first else "  first-values differ"
        if x[0].endswith("local"):
            flag = "" if same_first else f"  TOPK DIFFERS: {x[4]} vs {y[4]}"
        print(f"{i:4d} {x[0]:40s} [{x[1]}] abssum rel diff {rel:.2e}{flag}")


if __name__ == "__main__":
    main()
