"""Long-document loss against position: the held-out NLL by position bucket of every run
whose evaluation wrote it (eval/heldout.json "by_position": `eval.heldout.bucket_tokens`,
docs/evaluation.md), one line per run at each bucket's first position."""

import sb_plotting as sbp

NAME = "heldout_position"


def plot(results_dir, out_base, **_):
    found = [(name, h) for name, h in sbp.eval_results(results_dir, "heldout.json") if h.get("by_position")]
    if not found:
        return []
    fig, ax = sbp.figure()
    for name, heldout in found:
        buckets = heldout["by_position"]
        ax.plot([b["from"] for b in buckets], [b["nll"] for b in buckets], marker="o", markersize=2,
                linewidth=1, label=name)
    window, stride = found[0][1]["window"], found[0][1].get("stride", 0)
    ax.set_xlabel(f"position in window (tokens; window {window}" + (f", stride {stride})" if stride else ")"))
    ax.set_ylabel("held-out NLL (nats / token)")
    if len(found) <= 6:
        ax.legend(frameon=False)
    return sbp.save(fig, out_base)
