"""Loss curves: the training loss of every run against the iteration (warm-up iterations,
excluded from the report's medians, drawn dashed)."""

import sb_plotting as sbp

NAME = "loss"


def plot(results_dir, out_base, **_):
    runs = [r for r in sbp.runs_of(results_dir) if r.records]
    if not runs:
        return []
    fig, ax = sbp.figure()
    for run in runs:
        line, = ax.plot([r["iteration"] for r in run.records], [r["loss"] for r in run.records],
                        label=run.name, linewidth=1)
        warm = [r for r in run.records if r.get("warmup")]
        if warm:
            ax.plot([r["iteration"] for r in warm], [r["loss"] for r in warm], linestyle="--",
                    color=line.get_color(), linewidth=1.5)
    ax.set_xlabel("iteration")
    ax.set_ylabel("loss (token mean)")
    ax.legend(frameon=False, ncol=2 if len(runs) > 4 else 1)
    return sbp.save(fig, out_base)
