"""Pipeline timeline of one iteration: a Gantt chart with one row per (DP rank, stage),
forward and backward of each micro-batch as labelled bars, waits for pipeline messages,
the gradient all-reduce and the optimizer step; the white gaps are the bubbles.

Reads the run's timeline_events.jsonl: one line per iteration,
  {"iteration": i, "origin_unix_ms": t0,
   "ranks": [{"rank", "dp_rank", "stage", "start_ms", "end_ms",
              "events": [[kind, micro-batch, start_ms, end_ms], ...]}, ...]}
(every rank's events on the job's common clock; harness/trace/timeline.h).

Default: the first non-baseline run with a timeline (else the first run with one), at
its measured iteration with the median iter_ms."""

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
    "plan_exchange": "#DA8BC3",
    "data": "#937860",
}
LABELS = {"forward": "F", "backward": "B"}


def pick_run(results_dir, run_name):
    runs = [r for r in sbp.runs_of(results_dir) if r.timeline()]
    if run_name is not None:
        chosen = [r for r in runs if r.name == run_name]
        if not chosen:
            raise SystemExit(f"{results_dir}: no run named {run_name} with a timeline_events.jsonl; "
                             f"runs with one: {', '.join(r.name for r in runs) or 'none'}")
        return chosen[0]
    non_baseline = [r for r in runs if not r.is_baseline]
    return (non_baseline or runs or [None])[0]


def pick_iteration(run, iteration):
    iterations = run.timeline()
    wanted = run.median_iteration() if iteration is None else iteration
    if wanted is None:  # no measured record: the middle timeline entry
        return iterations[len(iterations) // 2]
    entry = next((it for it in iterations if it["iteration"] == wanted), None)
    if entry is None:
        raise SystemExit(f"{run.folder}/timeline_events.jsonl: no iteration {wanted} "
                         f"(it has {iterations[0]['iteration']}..{iterations[-1]['iteration']})")
    return entry


def rows_of(entry):
    """The ranks of one timeline entry in drawing order: by DP rank, then stage."""
    return sorted(entry["ranks"], key=lambda r: (r["dp_rank"], r["stage"]))


def draw(ax, entry):
    """Draws one bar per event; returns [(row, left, width, kind, micro-batch)] in the
    order drawn, times in ms since the earliest rank started."""
    ranks = rows_of(entry)
    origin = min(r["start_ms"] for r in ranks)
    bars, seen = [], set()
    for row, rank in enumerate(ranks):
        for kind, microbatch, start, end in rank["events"]:
            if kind.startswith("ring_"):
                continue  # ring steps lie inside the forward and backward bars (records sum them)
            label = kind if kind not in seen else None
            seen.add(kind)
            ax.barh(row, end - start, left=start - origin, height=0.7, color=COLORS.get(kind, "#999999"),
                    edgecolor="white", linewidth=0.3, label=label)
            bars.append((row, start - origin, end - start, kind, microbatch))
            if kind in LABELS and microbatch >= 0 and end - start > 0:
                ax.text(start - origin + (end - start) / 2, row, f"{LABELS[kind]}{microbatch}",
                        ha="center", va="center", fontsize=5, color="white")
    ax.set_yticks(range(len(ranks)))
    # Context-parallel ranks share a (dp rank, stage): their world rank tells them apart.
    lanes = [(r["dp_rank"], r["stage"]) for r in ranks]
    shared = len(set(lanes)) < len(lanes)
    ax.set_yticklabels([f"dp{r['dp_rank']} stage{r['stage']}" + (f" rank{r['rank']}" if shared else "")
                        for r in ranks])
    ax.invert_yaxis()
    ax.set_xlabel("ms since the iteration started")
    return bars


def plot(results_dir, out_base, run=None, iteration=None, **_):
    chosen = pick_run(results_dir, run)
    if chosen is None:
        return []
    entry = pick_iteration(chosen, iteration)
    fig, ax = sbp.figure(width=sbp.DOUBLE_COLUMN, height=0.35 * len(entry["ranks"]) + 0.9)
    draw(ax, entry)
    ax.set_title(f"{chosen.name}, iteration {entry['iteration']}")
    ax.legend(frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=6)
    return sbp.save(fig, out_base)
