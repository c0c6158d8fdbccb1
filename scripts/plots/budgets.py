"""Budgets DST chose per micro-batch against the micro-batch's length (tokens), for every
run whose attention reports budgets; the default budget k0 as a line."""

import sb_plotting as sbp

NAME = "budgets"


def plot(results_dir, out_base, **_):
    runs = [r for r in sbp.runs_of(results_dir)
            if r.method.get("budget") == "dst" and any("budgets" in x for x in r.measured)]
    if not runs:
        return []
    fig, ax = sbp.figure()
    for run in runs:
        tokens, budgets = [], []
        for record in run.measured:
            if "budgets" in record:
                tokens += record["microbatch_tokens"]
                # The effective budget (after the per-layer coverage floor) when recorded.
                budgets += ([sum(layers) / len(layers) for layers in record["layer_budgets"]]
                            if "layer_budgets" in record else record["budgets"])
        ax.scatter(tokens, budgets, s=5, alpha=0.6, label=run.name)
    k0 = runs[0].method["attention"].get("top_k")
    if k0:
        ax.axhline(k0, color="black", linewidth=0.7, linestyle=":", label=f"k0 = {k0}")
    ax.set_xlabel("micro-batch tokens")
    ax.set_ylabel("budget (blocks, mean over layers)")
    ax.legend(frameon=False)
    return sbp.save(fig, out_base)
