"""DST anchor x p heatmaps (report.json "ablation", present when the sweep varies both):
speedup, and each accuracy column the report has (coverage, held-out loss, LongBench...)."""

import sb_plotting as sbp

NAME = "ablation"


def plot(results_dir, out_base, **_):
    report_path = results_dir / "report.json"
    if not report_path.exists():
        return []
    ablation = sbp.read_json(report_path).get("ablation")
    if not ablation:
        return []
    anchors, ps = ablation["anchors"], ablation["ps"]
    metrics = [m for m in ablation["metrics"] if any(v is not None for row in ablation["values"][m] for v in row)]
    fig, axes = sbp.figure(width=min(sbp.DOUBLE_COLUMN, 2.4 * len(metrics)), height=2.0, ncols=len(metrics),
                           squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        values = ablation["values"][metric]
        grid = [[float("nan") if v is None else v for v in row] for row in values]
        image = ax.imshow(grid, cmap="viridis", aspect="auto")
        for i, row in enumerate(values):
            for j, v in enumerate(row):
                if v is not None:
                    ax.text(j, i, f"{v:.3g}", ha="center", va="center", fontsize=6, color="white")
        ax.set_xticks(range(len(ps)))
        ax.set_xticklabels([str(p) for p in ps])
        ax.set_yticks(range(len(anchors)))
        ax.set_yticklabels([a.upper() for a in anchors])
        ax.set_xlabel("p")
        ax.set_title(metric)
        fig.colorbar(image, ax=ax, shrink=0.8)
    return sbp.save(fig, out_base)
