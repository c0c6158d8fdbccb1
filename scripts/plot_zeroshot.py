#!/usr/bin/env python3
"""Bar chart of a zero-shot run written by `sparsebalance eval zeroshot` (results.json,
lm-evaluation-harness's layout): per task acc and acc_norm with their standard errors,
and the average (acc_norm where a task has it, else acc) as a line. Writes PREFIX.png
and PREFIX.pdf.

    scripts/plot_zeroshot.py out/zeroshot/results.json [--out PREFIX] [--title TEXT]

PREFIX defaults to zeroshot_bars next to the JSON file.
"""

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent / "plots"))
import sb_plotting  # noqa: E402


def load(path):
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if "results" not in data or not data["results"]:
        sys.exit(f"error: {path}: no \"results\" (expected the results.json of `sparsebalance eval zeroshot`)")
    return data


def stderr(value):
    return value if isinstance(value, (int, float)) else 0.0  # "N/A" for one document


def plot(data, title):
    tasks = list(data["results"])
    fig, ax = plt.subplots(figsize=(max(4.5, 1.1 * len(tasks) + 2.0), 3.6))
    width = 0.38
    for offset, metric, colour in ((-width / 2, "acc", "#4575b4"), (width / 2, "acc_norm", "#fdae61")):
        xs, ys, errs = [], [], []
        for i, task in enumerate(tasks):
            r = data["results"][task]
            if f"{metric},none" in r:
                xs.append(i + offset)
                ys.append(r[f"{metric},none"])
                errs.append(stderr(r.get(f"{metric}_stderr,none")))
        ax.bar(xs, ys, width, yerr=errs, capsize=2, label=metric, color=colour)
    average = data.get("sparsebalance", {}).get("average")
    if average is not None:
        ax.axhline(average, color="black", linestyle="--", linewidth=1.0, label=f"average {average:.4f}")
    ax.set_xticks(range(len(tasks)), tasks, rotation=20, ha="right")
    ax.set_ylim(0.0, 1.0)
    ax.set_ylabel("accuracy")
    ax.legend(fontsize=8)
    ax.set_title(title or "zero-shot multiple choice (lm-evaluation-harness rules)")
    fig.tight_layout()
    return fig


def main():
    sb_plotting.json_file_main(__doc__, "zeroshot_bars", load, plot)


if __name__ == "__main__":
    main()
