#!/usr/bin/env python3
"""Heatmap of a needle-in-a-haystack grid written by `sparsebalance eval niah` (niah.json):
context length (tokens) across, needle depth (percent) down, the cell's score (mean over
its samples, 0..1) as colour and number. Writes PREFIX.png and PREFIX.pdf.

    scripts/plot_niah.py results/x/niah/niah.json [--out PREFIX] [--title TEXT]

PREFIX defaults to niah_heatmap next to the JSON file.
"""

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import LinearSegmentedColormap  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent / "plots"))
import sb_plotting  # noqa: E402


def load_grid(path):
    grid = json.loads(Path(path).read_text(encoding="utf-8"))
    for key in ("lengths", "depths", "scores"):
        if key not in grid:
            sys.exit(f"error: {path}: no \"{key}\" (expected the niah.json of `sparsebalance eval niah`)")
    scores = grid["scores"]
    if len(scores) != len(grid["depths"]) or any(len(row) != len(grid["lengths"]) for row in scores):
        sys.exit(f"error: {path}: \"scores\" must be [depth][length], {len(grid['depths'])} x {len(grid['lengths'])}")
    return grid


def length_label(tokens):
    return f"{tokens // 1024}K" if tokens >= 1024 and tokens % 1024 == 0 else str(tokens)


def plot(grid, title):
    lengths, depths, scores = grid["lengths"], grid["depths"], grid["scores"]
    cmap = LinearSegmentedColormap.from_list("niah", ["#d7301f", "#fdd49e", "#1a9850"])
    fig, ax = plt.subplots(figsize=(max(4.0, 0.9 * len(lengths) + 2.5), max(3.0, 0.45 * len(depths) + 1.8)))
    image = ax.imshow(scores, cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(lengths)), [length_label(l) for l in lengths])
    ax.set_yticks(range(len(depths)), [f"{d:g}" for d in depths])
    ax.set_xlabel("context length (tokens)")
    ax.set_ylabel("needle depth (%)")
    for i, row in enumerate(scores):
        for j, value in enumerate(row):
            ax.text(j, i, f"{value:.2f}".rstrip("0").rstrip(".") if value not in (0, 1) else f"{value:g}",
                    ha="center", va="center", fontsize=8, color="black")
    mean = grid.get("mean")
    ax.set_title(title or (f"needle in a haystack (mean {mean:.3f})" if mean is not None else "needle in a haystack"))
    fig.colorbar(image, ax=ax, label="score")
    fig.tight_layout()
    return fig


def main():
    sb_plotting.json_file_main(__doc__, "niah_heatmap", load_grid, plot)


if __name__ == "__main__":
    main()
