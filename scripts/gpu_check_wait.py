#!/usr/bin/env python3
"""Checks that a deliberately slowed rank shows up as wait on the others, not as compute
(docs/metrics.md, "What each interval holds"; docs/cluster.md).

Usage: gpu_check_wait.py RUN_DIR --iteration I --ms N [--slow-rank R]
RUN_DIR is one run's folder (holding timeline_events.jsonl) of a job started with
SB_FAULT_INJECT=slow:rank=R:iteration=I:ms=N. For iteration I against the median of the
other measured iterations (iteration 0 and I left out), per rank other than R:
  extra wait     recv_wait + send_wait + allreduce + plan_exchange + ring_wait + tp_comm
  extra compute  forward + backward, less the ring and TP waits inside them
Passes (exit 0) when some rank waited at least 80 % of N more and no rank computed 50 %
of N more; prints one line per rank. Exit 1 when it fails, 2 for bad input.
"""

import argparse
import json
import statistics
import sys
from pathlib import Path

WAITS = {"recv_wait", "send_wait", "allreduce", "plan_exchange", "ring_wait", "tp_comm"}
INSIDE_COMPUTE = {"ring_wait", "tp_comm"}  # lie inside a forward or backward


def per_rank_sums(iteration):
    sums = {}
    for rank in iteration["ranks"]:
        wait = compute = 0.0
        for kind, _microbatch, start, end in rank["events"]:  # compact rows
            if kind in WAITS:
                wait += end - start
            if kind in ("forward", "backward"):
                compute += end - start
            if kind in INSIDE_COMPUTE:
                compute -= end - start
        sums[rank["rank"]] = (wait, compute)
    return sums


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--iteration", type=int, required=True)
    parser.add_argument("--ms", type=float, required=True)
    parser.add_argument("--slow-rank", type=int, default=0)
    args = parser.parse_args()
    events = args.run_dir / "timeline_events.jsonl"
    if not events.is_file():
        print(f"{events}: no such file (give one run's folder)", file=sys.stderr)
        return 2
    iterations = {}
    for number, line in enumerate(events.read_text().splitlines(), 1):
        if line.strip():
            try:
                item = json.loads(line)
            except json.JSONDecodeError as e:
                print(f"{events}:{number}: {e}", file=sys.stderr)
                return 2
            iterations[item["iteration"]] = per_rank_sums(item)
    others = [i for i in iterations if i not in (0, args.iteration)]
    if args.iteration not in iterations or not others:
        print(f"{events}: needs iteration {args.iteration} and another after iteration 0, has "
              f"{sorted(iterations)}", file=sys.stderr)
        return 2
    slowed = iterations[args.iteration]
    most_wait, worst_compute = 0.0, 0.0
    for rank in sorted(slowed):
        if rank == args.slow_rank:
            continue
        wait = slowed[rank][0] - statistics.median(iterations[i][rank][0] for i in others)
        compute = slowed[rank][1] - statistics.median(iterations[i][rank][1] for i in others)
        most_wait, worst_compute = max(most_wait, wait), max(worst_compute, compute)
        print(f"rank {rank}: {wait:+.1f} ms wait, {compute:+.1f} ms compute in iteration {args.iteration}")
    ok = most_wait >= 0.8 * args.ms and worst_compute < 0.5 * args.ms
    print(f"{'PASS' if ok else 'FAIL'}: rank {args.slow_rank} slowed by {args.ms:.0f} ms; the most any other rank "
          f"waited more is {most_wait:.1f} ms (needs >= {0.8 * args.ms:.0f}), the most it computed more "
          f"{worst_compute:.1f} ms (needs < {0.5 * args.ms:.0f})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
