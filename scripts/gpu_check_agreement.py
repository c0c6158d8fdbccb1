#!/usr/bin/env python3
"""Compares multi-rank runs with their one-process run, iteration by iteration (gpu-check.sh).

Usage: gpu_check_agreement.py ROOT MANIFEST_NAME REFERENCE LAYOUTS METHODS

ROOT/<layout>/<MANIFEST_NAME>/<method>/records.jsonl holds each run's records; REFERENCE
is the one-process layout, LAYOUTS and METHODS comma-separated lists. Prints a Markdown
table and a verdict line; exits 1 when a run is missing or differs.

Iteration 0 runs the same forward on the same micro-batches: without TP or CP its loss
and gradient norm must agree to rounding (relative 1e-4). TP sums bf16 partial products
of the row-parallel layers across ranks, and CP merges the ring steps' bf16 partial
outputs (dense attention runs the fused kernels instead of SDPA's), so there iteration 0
agrees to bf16 rounding (relative 1e-2). Later iterations follow updates whose gradients
were summed in another order (bf16 compute): relative 1e-2.
"""
import json
import pathlib
import sys


def records(root, layout, manifest, method):
    path = root / layout / manifest / method / "records.jsonl"
    if not path.exists():
        return None
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def main(argv):
    if len(argv) != 6:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    root, manifest, reference_layout = pathlib.Path(argv[1]), argv[2], argv[3]
    layouts, methods = argv[4].split(","), argv[5].split(",")
    print("| method | layout | iterations | iter 0 loss rel diff | iter 0 grad-norm rel diff |"
          " max later loss rel diff | max later grad-norm rel diff | verdict |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    failed = False
    for method in methods:
        reference = records(root, reference_layout, manifest, method)
        for layout in layouts:
            got = records(root, layout, manifest, method)
            if reference is None or got is None or not got or len(got) != len(reference):
                print(f"| {method} | {layout} | - | - | - | - | - | missing records |")
                failed = True
                continue

            def rel(key, i):
                return abs(got[i][key] - reference[i][key]) / max(abs(reference[i][key]), 1e-30)

            first = (rel("loss", 0), rel("grad_norm", 0))
            later = [max([rel(key, i) for i in range(1, len(got))], default=0.0) for key in ("loss", "grad_norm")]
            bf16_sums = "tp" in layout or "cp" in layout
            ok = max(first) <= (1e-2 if bf16_sums else 1e-4) and max(later) <= 1e-2
            failed |= not ok
            print(f"| {method} | {layout} | {len(got)} | {first[0]:.1e} | {first[1]:.1e} | {later[0]:.1e} |"
                  f" {later[1]:.1e} | {'agrees' if ok else 'DIFFERS'} |")
    print()
    print(f"{manifest}: " + ("FAILED" if failed else f"every layout agrees with the {reference_layout} run"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
