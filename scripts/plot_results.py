#!/usr/bin/env python3
"""Draws the figures of a results folder (results/<manifest>/) as PNG and PDF at paper
sizes (single column 3.5 in, double column 7 in) into <folder>/plots/: every figure
whose data the runs have, printing the path of each file written.

  speedup             speedup bars per method, whiskers over seeds (report.json)
  timeline            pipeline Gantt of one iteration per (DP rank, stage) (--run,
                      --iteration; default: the first non-baseline run, its measured
                      iteration with the median iter_ms)
  ablation            DST anchor x p heatmaps of speedup and accuracy (report.json)
  loss                loss curves
  latency_prediction  predicted vs measured micro-batch latency
  budgets             budgets chosen per micro-batch against its tokens
  coverage            MoBA's coverage curve C(k) before and after training
                      (eval/coverage.json of runs with eval.coverage)
  heldout_position    held-out NLL by position in the window (eval/heldout.json of
                      runs with eval.heldout.bucket_tokens)

`sparsebalance report --plots DIR` runs this script (with $SB_PLOT_PYTHON) after
writing report.json. Exit status: 0 drawn (or nothing applies), 2 bad arguments,
3 matplotlib missing.
"""

import argparse
import importlib
import sys
from pathlib import Path

FIGURE_MODULES = ["speedup", "timeline", "ablation", "loss", "latency_prediction", "budgets", "coverage", "heldout_position"]


def load_figures():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print(f"plot_results.py: matplotlib is not installed for {sys.executable}. Use the project's "
              "environment (scripts/sparsebalance sets SB_PLOT_PYTHON to it; scripts/lib.sh's "
              "sb_setup_venv creates it from requirements.txt), or: "
              f"{sys.executable} -m pip install matplotlib", file=sys.stderr)
        sys.exit(3)
    sys.path.insert(0, str(Path(__file__).resolve().parent / "plots"))
    return [importlib.import_module(name) for name in FIGURE_MODULES]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results_dir", type=Path)
    parser.add_argument("--only", help="comma-separated figure names")
    parser.add_argument("--run", help="timeline: the run to draw")
    parser.add_argument("--iteration", type=int, help="timeline: the iteration to draw")
    parser.add_argument("--out", type=Path, help="output folder (default: <results_dir>/plots)")
    args = parser.parse_args(argv)
    if not args.results_dir.is_dir():
        parser.error(f"{args.results_dir} is not a folder (expected results/<manifest>)")
    only = args.only.split(",") if args.only else FIGURE_MODULES
    unknown = [n for n in only if n not in FIGURE_MODULES]
    if unknown:
        parser.error(f"--only: unknown figure(s) {', '.join(unknown)}; known: {', '.join(FIGURE_MODULES)}")
    figures = load_figures()
    out = args.out or args.results_dir / "plots"
    drawn = []
    for figure in figures:
        if figure.NAME not in only:
            continue
        paths = figure.plot(args.results_dir, out / figure.NAME, run=args.run, iteration=args.iteration)
        for path in paths:
            print(f"drew {figure.NAME}: {path}")
        if paths:
            drawn.append(figure.NAME)
    skipped = [n for n in only if n not in drawn]
    if drawn:
        print(f"{len(drawn)} figure(s) drawn into {out}" + (f"; no data for: {', '.join(skipped)}" if skipped else ""))
    else:
        print(f"{args.results_dir}: no figure applies (no records, timelines or report.json yet)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
