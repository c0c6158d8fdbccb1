"""Predicted against measured micro-batch latency (forward + backward summed over the
stages): every measured micro-batch of every run whose records carry predictions, with
the y = x line and each run's mean absolute percentage error (the report's
prediction_mape: mean of 100 |pred - meas| / meas over micro-batches with meas > 0)."""

import sb_plotting as sbp

NAME = "latency_prediction"


def plot(results_dir, out_base, **_):
    runs = [r for r in sbp.runs_of(results_dir) if any("microbatch_pred_ms" in x for x in r.measured)]
    if not runs:
        return []
    fig, ax = sbp.figure(width=sbp.SINGLE_COLUMN, height=sbp.SINGLE_COLUMN * 0.85)
    lo, hi = float("inf"), 0.0
    for run in runs:
        pred, meas = [], []
        for record in run.measured:
            if "microbatch_pred_ms" in record:
                pairs = list(zip(record["microbatch_pred_ms"], record["microbatch_ms"]))
                pred += [p for p, _ in pairs]
                meas += [m for _, m in pairs]
        errors = [100 * abs(p - m) / m for p, m in zip(pred, meas) if m > 0]
        label = f"{run.name} (MAPE {sum(errors) / len(errors):.1f}%)" if errors else run.name
        ax.scatter(meas, pred, s=4, alpha=0.6, label=label)
        lo, hi = min(lo, *meas, *pred), max(hi, *meas, *pred)
    ax.plot([lo, hi], [lo, hi], color="black", linewidth=0.7)
    ax.set_xlabel("measured micro-batch ms")
    ax.set_ylabel("predicted micro-batch ms")
    ax.legend(frameon=False, fontsize=5)
    return sbp.save(fig, out_base)
