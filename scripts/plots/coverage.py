"""MoBA's routing concentration: the coverage curve C(k) of every run whose evaluation
wrote eval/coverage.json (`eval.coverage`, docs/evaluation.md), after training solid
and, where measured, the starting weights dashed in the same colour. A curve that
rises steeply means a few blocks hold most of the gate's mass, so DST's coverage floor
lets budgets fall far below k0 (marked)."""

import sb_plotting as sbp

NAME = "coverage"


def plot(results_dir, out_base, **_):
    found = sbp.eval_results(results_dir, "coverage.json")
    if not found:
        return []
    fig, ax = sbp.figure()
    top_k = None
    for name, coverage in found:
        after = coverage["after"]
        top_k = after["top_k"]
        line, = ax.plot(after["k"], after["curve"], linewidth=1, label=name + " (after)" if "before" in coverage else name)
        if "before" in coverage:
            before = coverage["before"]
            ax.plot(before["k"], before["curve"], linewidth=1, linestyle="--", color=line.get_color(),
                    label=name + " (before)")
    if top_k is not None:
        ax.axvline(top_k, color="grey", linewidth=0.6, linestyle=":")
    ax.set_xlabel("budget k (blocks, diagonal included)")
    ax.set_ylabel("coverage C(k)")
    ax.set_ylim(0, 1.02)
    if len(found) <= 6:
        ax.legend(frameon=False)
    return sbp.save(fig, out_base)
