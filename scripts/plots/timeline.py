"""Pipeline timeline of one iteration: a Gantt chart with one row per (DP rank, stage),
forward and backward of each micro-batch as labelled bars, waits for pipeline messages,
the gradient all-reduce and the optimizer step; the white gaps are the bubbles.

Reads the run's timeline_events.jsonl (every rank's events on the job's common clock)."""

import sb_plotting as sbp

NAME = "timeline"

COLORS = {
    "forward": "#4C72B0",
    "backward": "#DD8452",
    "recv_wait": "#BBBBBB",
    "send_wait": "#DDDDDD",
    "allreduce": "#8172B3",
    "optimizer": "#55A868",
    "plan": "#C44E52",
    "data": "#937860",
}
LABELS = {"forward": "F", "backward": "B"}


def pick_run(results_dir, run_name):
    runs = [r for r in sbp.runs_of(results_dir) if r.timeline()]
    if run_name is not None:
        runs = [r for r in runs if r.name == run_name]
    return runs[0] if runs else None


def plot(results_dir, out_base, run=None, iteration=None, **_):
    chosen = pick_run(results_dir, run)
    if chosen is None:
        return []
    iterations = chosen.timeline()
    measured = [it for it in iterations if it["iteration"] >= _first_measured(chosen)] or iterations
    entry = measured[len(measured) // 2] if iteration is None else next(
        (it for it in iterations if it["iteration"] == iteration), None)
    if entry is None:
        raise SystemExit(f"{chosen.folder}: no timeline for iteration {iteration}")
    ranks = sorted(entry["ranks"], key=lambda r: (r["dp_rank"], r["stage"]))
    origin = min(r["start_ms"] for r in ranks)
    fig, ax = sbp.figure(width=sbp.DOUBLE_COLUMN, height=0.35 * len(ranks) + 0.9)
    seen = set()
    for row, rank in enumerate(ranks):
        for kind, microbatch, start, end in rank["events"]:
            label = kind if kind not in seen else None
            seen.add(kind)
            ax.barh(row, end - start, left=start - origin, height=0.7, color=COLORS.get(kind, "#999999"),
                    edgecolor="white", linewidth=0.3, label=label)
            if kind in LABELS and microbatch >= 0 and end - start > 0:
                ax.text(start - origin + (end - start) / 2, row, f"{LABELS[kind]}{microbatch}",
                        ha="center", va="center", fontsize=5, color="white")
    ax.set_yticks(range(len(ranks)))
    ax.set_yticklabels([f"dp{r['dp_rank']} stage{r['stage']}" for r in ranks])
    ax.invert_yaxis()
    ax.set_xlabel("ms since the iteration started")
    ax.set_title(f"{chosen.name}, iteration {entry['iteration']}")
    ax.legend(frameon=False, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.25))
    return sbp.save(fig, out_base)


def _first_measured(run):
    return run.manifest["train"].get("warmup_iterations", 0)
