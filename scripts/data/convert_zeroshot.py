#!/usr/bin/env python3
"""Writes one zero-shot task's rows as the JSON lines `sparsebalance eval zeroshot` reads
(<out>/<task>.jsonl), from the file its Hugging Face dataset publishes: a parquet file
(the hub's usual layout, e.g. ARC-Easy/test-00000-of-00001.parquet of allenai/ai2_arc)
or JSON lines. Rows keep the dataset's own columns and values (nested columns such as
ARC's choices stay objects); nothing is edited. docs/zeroshot.md lists, per task, the
dataset and the split lm-evaluation-harness scores.

    scripts/data/convert_zeroshot.py arc_easy test-00000-of-00001.parquet data/zeroshot

An existing <task>.jsonl is replaced only with --force (written atomically).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# task -> (dataset, config, split) that lm-eval 0.4.13 scores.
TASKS = {
    "arc_easy": ("allenai/ai2_arc", "ARC-Easy", "test"),
    "arc_challenge": ("allenai/ai2_arc", "ARC-Challenge", "test"),
    "boolq": ("aps/super_glue", "boolq", "validation"),
    "hellaswag": ("Rowan/hellaswag", None, "validation"),
    "piqa": ("baber/piqa", None, "validation"),
    "winogrande": ("allenai/winogrande", "winogrande_xl", "validation"),
    "openbookqa": ("allenai/openbookqa", "main", "test"),
}


def read_rows(path: Path) -> list[dict]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq
        return pq.read_table(path).to_pylist()
    rows = []
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise SystemExit(f"error: {path}:{number}: not JSON ({e}); give a parquet or JSON-lines file")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("task", choices=sorted(TASKS))
    parser.add_argument("input", type=Path, help="the published split: .parquet or .jsonl")
    parser.add_argument("out_dir", type=Path, help="folder for <task>.jsonl (--data of eval zeroshot)")
    parser.add_argument("--force", action="store_true", help="replace an existing <task>.jsonl")
    args = parser.parse_args(argv)
    if not args.input.is_file():
        parser.error(f"input {args.input} does not exist")
    rows = read_rows(args.input)
    if not rows:
        parser.error(f"input {args.input} has no rows")
    out = args.out_dir / f"{args.task}.jsonl"
    if out.exists() and not args.force:
        parser.error(f"{out} exists; pass --force to replace it")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".jsonl.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    tmp.replace(out)
    dataset, config, split = TASKS[args.task]
    print(f"{out}: {len(rows)} rows (lm-eval scores the {split} split of {dataset}"
          f"{' ' + config if config else ''})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
