#!/usr/bin/env python3
"""The planner's scaling table and log-log figure (docs/planner_scaling.md).

Runs build/harness/bench/sb_bench_planner's PlanScaling grid (3 repetitions, medians),
prints a Markdown table (ranks x sequences -> planner ms) and writes the figure.

    python scripts/planner_scaling.py --build build --figure docs/images/planner_scaling.png
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path


def run_grid(binary: Path) -> list[dict]:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run(
            [str(binary), "--benchmark_filter=PlanScaling", "--benchmark_repetitions=3",
             "--benchmark_report_aggregates_only=true", f"--benchmark_out={out.name}",
             "--benchmark_out_format=json"],
            check=True, stdout=subprocess.DEVNULL)
        report = json.load(open(out.name))
    rows = [b for b in report["benchmarks"] if b.get("aggregate_name") == "median"]
    if not rows:
        sys.exit(f"{binary}: the benchmark reported no medians")
    return [{"ranks": int(b["ranks"]), "sequences": int(b["sequences"]), "ms": b["real_time"]} for b in rows]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", type=Path, default=Path("build"), help="the build folder (default: build)")
    parser.add_argument("--figure", type=Path, help="write the log-log figure here (PNG)")
    args = parser.parse_args()
    binary = args.build / "harness" / "bench" / "sb_bench_planner"
    if not binary.exists():
        sys.exit(f"{binary} is missing: build the benchmarks first (cmake --build {args.build} --target sb_bench_planner)")
    rows = run_grid(binary)
    ranks = sorted({r["ranks"] for r in rows})
    sequences = sorted({r["sequences"] for r in rows})
    ms = {(r["ranks"], r["sequences"]): r["ms"] for r in rows}
    print("| ranks \\ sequences | " + " | ".join(f"{s:,}" for s in sequences) + " |")
    print("|---:|" + "---:|" * len(sequences))
    for n in ranks:
        cells = [f"{ms[(n, s)]:.3f}" if (n, s) in ms else "" for s in sequences]
        print(f"| {n:,} | " + " | ".join(cells) + " |")
    if args.figure:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 4))
        for n in ranks:
            points = sorted((s, ms[(n, s)]) for s in sequences if (n, s) in ms)
            ax.loglog([p[0] for p in points], [p[1] for p in points], marker="o", label=f"{n:,} ranks")
        ax.set_xlabel("sequences per global batch")
        ax.set_ylabel("planner ms per iteration (median)")
        ax.set_title("SAB + DST planner, Qwen2.5-3B shapes, pp 4 x tp 2")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        fig.tight_layout()
        args.figure.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(args.figure, dpi=120)
        print(f"wrote {args.figure}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
