#!/usr/bin/env python3
"""Draws the figures of a results folder (results/<manifest>/) as PNG and PDF at paper
sizes into <folder>/plots/: every figure whose data the runs have.

  speedup             speedup bars per method (report.json)
  timeline            pipeline Gantt of one iteration (--run, --iteration; default: the
                      first run with a timeline, its middle measured iteration)
  ablation            DST anchor x p heatmaps of speedup and accuracy
  loss                loss curves
  latency_prediction  predicted vs measured micro-batch latency
  budgets             budgets chosen per micro-batch against its length

`sparsebalance report --plots DIR` runs this script.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "plots"))
import ablation  # noqa: E402
import budgets  # noqa: E402
import latency_prediction  # noqa: E402
import loss  # noqa: E402
import speedup  # noqa: E402
import timeline  # noqa: E402

FIGURES = [speedup, timeline, ablation, loss, latency_prediction, budgets]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results_dir", type=Path)
    parser.add_argument("--only", help="comma-separated figure names")
    parser.add_argument("--run", help="timeline: the run to draw")
    parser.add_argument("--iteration", type=int, help="timeline: the iteration to draw")
    parser.add_argument("--out", type=Path, help="output folder (default: <results_dir>/plots)")
    args = parser.parse_args()
    if not args.results_dir.is_dir():
        parser.error(f"{args.results_dir} is not a folder (expected results/<manifest>)")
    names = [f.NAME for f in FIGURES]
    only = args.only.split(",") if args.only else names
    unknown = [n for n in only if n not in names]
    if unknown:
        parser.error(f"--only: unknown figure(s) {', '.join(unknown)}; known: {', '.join(names)}")
    out = args.out or args.results_dir / "plots"
    drawn = 0
    for figure in FIGURES:
        if figure.NAME not in only:
            continue
        paths = figure.plot(args.results_dir, out / figure.NAME, run=args.run, iteration=args.iteration)
        for path in paths:
            print(path)
        drawn += len(paths)
    if drawn == 0:
        print(f"{args.results_dir}: no figure applies (no records, timelines or report yet)", file=sys.stderr)


if __name__ == "__main__":
    main()
