"""Budgets DST chose per micro-batch against the micro-batch's length (tokens), for every
run whose records carry budgets (measured iterations); the effective budget (mean over
layers, after the coverage floor) when layer_budgets are recorded, else the requested one
(0, the backend's default, drawn as the method's top_k). The default budget k0 as a line."""

import sb_plotting as sbp

NAME = "budgets"


def plot(results_dir, out_base, **_):
    runs = [r for r in sbp.runs_of(results_dir) if any("budgets" in x for x in r.measured)]
    if not runs:
        return []
    fig, ax = sbp.figure()
    for run in runs:
        k0 = run.method.get("attention", {}).get("top_k", 0)
        tokens, budgets = [], []
        for record in run.measured:
            if "budgets" not in record:
                continue
            tokens += record["microbatch_tokens"]
            if "layer_budgets" in record:
                budgets += [sum(layers) / len(layers) for layers in record["layer_budgets"]]
            else:
                budgets += [b if b > 0 else k0 for b in record["budgets"]]
        ax.scatter(tokens, budgets, s=5, alpha=0.6, label=run.name)
    k0 = runs[0].method.get("attention", {}).get("top_k")
    if k0:
        ax.axhline(k0, color="black", linewidth=0.7, linestyle=":", label=f"k0 = {k0}")
    ax.set_xlabel("micro-batch tokens")
    ax.set_ylabel("budget (blocks)")
    ax.legend(frameon=False, fontsize=5)
    return sbp.save(fig, out_base)
