"""Speedup of every method over the manifest's baseline (report.json "methods"): bars at
the median over seeds, whiskers over the 95 % interval (runs and iterations resampled,
docs/metrics.md; reports without one: the smallest to the largest run), the number of runs
behind each bar in it."""

import sb_plotting as sbp

NAME = "speedup"


def plot(results_dir, out_base, **_):
    report_path = results_dir / "report.json"
    if not report_path.exists():
        return []
    groups = [g for g in sbp.read_json(report_path).get("methods", []) if g.get("speedup") is not None]
    if not groups:
        return []
    fig, ax = sbp.figure(width=sbp.SINGLE_COLUMN if len(groups) <= 6 else sbp.DOUBLE_COLUMN)
    xs = list(range(len(groups)))
    medians = [g["speedup"]["median"] for g in groups]
    bounds = [g.get("speedup_interval") or [g["speedup"]["min"], g["speedup"]["max"]] for g in groups]
    lows = [max(0.0, m - low) for m, (low, _) in zip(medians, bounds)]
    highs = [max(0.0, high - m) for m, (_, high) in zip(medians, bounds)]
    ax.bar(xs, medians, color="#4C72B0", yerr=[lows, highs], capsize=2, error_kw={"linewidth": 0.7})
    for x, g in zip(xs, groups):
        ax.text(x, 0.02, f"n={g['speedup']['count']}", ha="center", va="bottom", fontsize=5, color="white")
    ax.axhline(1.0, color="black", linewidth=0.7)
    ax.set_xticks(xs)
    ax.set_xticklabels([g["label"] for g in groups], rotation=30, ha="right")
    ax.set_ylabel("speedup over baseline")
    return sbp.save(fig, out_base)
