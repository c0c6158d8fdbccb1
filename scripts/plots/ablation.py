"""DST anchor x p heatmaps, one figure per swept DST method (report.json "ablation": a
list of {method, anchors, ps, metrics, values[metric][anchor][p], speedup_intervals}, medians
over seeds): speedup (each cell with its 95 % interval below the median), imbalance and each
accuracy column the report has; cells without a value are left blank."""

import math

import sb_plotting as sbp

NAME = "ablation"


def plot(results_dir, out_base, **_):
    report_path = results_dir / "report.json"
    if not report_path.exists():
        return []
    paths = []
    for table in sbp.read_json(report_path).get("ablation") or []:
        anchors, ps = table["anchors"], table["ps"]
        metrics = [m for m in table["metrics"]
                   if any(v is not None for row in table["values"][m] for v in row)]
        if not metrics:
            continue
        columns = min(len(metrics), 3)
        rows = math.ceil(len(metrics) / columns)
        fig, axes = sbp.figure(width=sbp.DOUBLE_COLUMN if columns > 1 else sbp.SINGLE_COLUMN,
                               height=1.9 * rows, ncols=columns, nrows=rows, squeeze=False,
                               layout="constrained")  # titles clear of the row above
        for ax in axes.flat[len(metrics):]:
            ax.set_visible(False)
        for ax, metric in zip(axes.flat, metrics):
            values = table["values"][metric]
            grid = [[float("nan") if v is None else v for v in row] for row in values]
            image = ax.imshow(grid, cmap="viridis", aspect="auto")
            intervals = table.get("speedup_intervals") if metric == "speedup" else None
            for i, row in enumerate(values):
                for j, v in enumerate(row):
                    if v is None:
                        continue
                    interval = intervals[i][j] if intervals else None
                    text = f"{v:.3g}" if interval is None else f"{v:.3g}\n[{interval[0]:.3g}, {interval[1]:.3g}]"
                    ax.text(j, i, text, ha="center", va="center", fontsize=6 if interval is None else 5, color="white")
            ax.set_xticks(range(len(ps)))
            ax.set_xticklabels([f"{p:g}" for p in ps])
            ax.set_yticks(range(len(anchors)))
            ax.set_yticklabels([a.upper() for a in anchors])
            ax.set_xlabel("p")
            ax.set_title(metric)
            fig.colorbar(image, ax=ax, shrink=0.8)
        fig.suptitle(f"{table['method']}: DST anchor x p", fontsize=8)
        paths += sbp.save(fig, out_base.with_name(f"{out_base.name}_{table['method']}"))
    return paths
