#!/usr/bin/env python3
"""Heatmap of a RULER run written by `sparsebalance eval ruler` (ruler.json): sequence
length across, task down (RULER's order), the task's score (percent) as colour and
number, and a last row with the mean over the tasks. Writes PREFIX.png and PREFIX.pdf.

    scripts/plot_ruler.py out/ruler/ruler.json [--out PREFIX] [--title TEXT]

PREFIX defaults to ruler_heatmap next to the JSON file.
"""

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent / "plots"))
import sb_plotting  # noqa: E402
from matplotlib.colors import LinearSegmentedColormap  # noqa: E402


def load(path):
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    for key in ("lengths", "tasks", "scores", "average"):
        if key not in data:
            sys.exit(f"error: {path}: no \"{key}\" (expected the ruler.json of `sparsebalance eval ruler`)")
    return data


def length_label(tokens):
    return f"{tokens // 1024}K" if tokens >= 1024 and tokens % 1024 == 0 else str(tokens)


def plot(data, title):
    lengths = [str(l) for l in data["lengths"]]
    tasks = [t for t in data["tasks"] if t in data["scores"]]
    rows = [[data["scores"][t].get(l, float("nan")) for l in lengths] for t in tasks]
    rows.append([data["average"].get(l, float("nan")) for l in lengths])
    labels = tasks + ["average"]
    cmap = LinearSegmentedColormap.from_list("ruler", ["#d7301f", "#fdd49e", "#1a9850"])
    fig, ax = plt.subplots(figsize=(max(4.0, 0.9 * len(lengths) + 3.0), max(3.0, 0.4 * len(labels) + 1.6)))
    image = ax.imshow(rows, cmap=cmap, vmin=0.0, vmax=100.0, aspect="auto")
    ax.set_xticks(range(len(lengths)), [length_label(int(l)) for l in lengths])
    ax.set_yticks(range(len(labels)), labels)
    ax.axhline(len(tasks) - 0.5, color="black", linewidth=1.0)
    ax.set_xlabel("sequence length (tokens)")
    for i, row in enumerate(rows):
        for j, value in enumerate(row):
            if value == value:  # not NaN
                ax.text(j, i, f"{value:.1f}", ha="center", va="center", fontsize=8)
    ax.set_title(title or f"RULER ({data.get('samples', '?')} samples per task and length)")
    fig.colorbar(image, ax=ax, label="score (%)")
    fig.tight_layout()
    return fig


def main():
    sb_plotting.json_file_main(__doc__, "ruler_heatmap", load, plot)


if __name__ == "__main__":
    main()
