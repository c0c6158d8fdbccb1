"""Shared pieces of the plot scripts: reading a results folder, paper-sized figures,
saving PNG and PDF side by side.

A results folder is results/<manifest>/ as `sparsebalance run` writes it: report.json and
one folder per run with manifest.resolved.json, records.jsonl and, for runs on the
distributed runtime, timeline_events.jsonl (docs: docs/reports.md, docs/metrics.md).
"""

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

# Widths of a two-column paper (inches): one column, the full text width.
SINGLE_COLUMN = 3.5
DOUBLE_COLUMN = 7.0

STYLE = {
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "legend.fontsize": 7,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "figure.dpi": 100,
    "savefig.dpi": 300,
    "savefig.bbox": "tight",
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def figure(width=SINGLE_COLUMN, height=2.3, **kwargs):
    plt.rcParams.update(STYLE)
    return plt.subplots(figsize=(width, height), **kwargs)


def save(fig, out_base):
    """Writes out_base.png and out_base.pdf; returns both paths."""
    out_base = Path(out_base)
    out_base.parent.mkdir(parents=True, exist_ok=True)
    paths = [out_base.with_suffix(".png"), out_base.with_suffix(".pdf")]
    for path in paths:
        fig.savefig(path)
    plt.close(fig)
    return paths


def json_file_main(doc, default_name, load, plot):
    """The command line of a script that draws one JSON file written by an eval:
    FILE [--out PREFIX] [--title TEXT]; PREFIX defaults to default_name next to FILE.
    load(path) returns the data (exiting with a message naming the file when it is not
    the expected one); plot(data, title) returns the figure, written as PREFIX.png/.pdf."""
    import argparse
    import sys
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", type=Path)
    parser.add_argument("--out", type=Path, help=f"output prefix (default: {default_name} next to the file)")
    parser.add_argument("--title", default="", help="plot title")
    args = parser.parse_args()
    if not args.file.is_file():
        sys.exit(f"error: {args.file} does not exist")
    prefix = args.out or args.file.parent / default_name
    png, pdf = save(plot(load(args.file), args.title), prefix)
    print(f"wrote {png} and {pdf}")


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def read_json(path):
    with open(path) as f:
        return json.load(f)


class Run:
    """One run folder: its name, resolved manifest, context and records."""

    def __init__(self, folder):
        self.folder = Path(folder)
        self.name = self.folder.name
        self.manifest = read_json(self.folder / "manifest.resolved.json")
        context = self.folder / "context.json"
        self.context = read_json(context) if context.exists() else {}
        records = self.folder / "records.jsonl"
        self.records = read_jsonl(records) if records.exists() else []

    @property
    def method(self):
        return self.manifest["methods"][0]

    @property
    def is_baseline(self):
        return bool(self.context.get("experiment", {}).get("is_baseline", False))

    @property
    def measured(self):
        """Records of the iterations the report measures (warm-up excluded)."""
        return [r for r in self.records if not r.get("warmup", False)]

    def median_iteration(self):
        """The measured iteration whose iter_ms is the median (the lower one of an even
        count), or None without measured records."""
        measured = sorted(self.measured, key=lambda r: (r["iter_ms"], r["iteration"]))
        return measured[(len(measured) - 1) // 2]["iteration"] if measured else None

    def timeline(self):
        path = self.folder / "timeline_events.jsonl"
        return read_jsonl(path) if path.exists() else []


def runs_of(results_dir):
    """Run folders of a results folder, by name, as the report lists them: folders
    moved aside by a rerun (*.interrupted-*) and folders without records.jsonl or
    manifest.resolved.json are skipped."""
    results_dir = Path(results_dir)
    return [Run(p) for p in sorted(results_dir.iterdir())
            if p.is_dir() and ".interrupted-" not in p.name
            and (p / "manifest.resolved.json").exists() and (p / "records.jsonl").exists()]


def eval_results(results_dir, file_name):
    """(run name, parsed <run>/eval/<file_name>) for every run whose evaluation wrote it,
    by run name."""
    found = []
    for run in runs_of(results_dir):
        path = run.folder / "eval" / file_name
        if path.exists():
            found.append((run.name, read_json(path)))
    return found
