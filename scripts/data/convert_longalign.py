#!/usr/bin/env python3
"""Converts THUDM's LongAlign-10k (Hugging Face dataset THUDM/LongAlign-10k, now also
published as zai-org/LongAlign-10k) to this project's SFT JSONL (see sft_jsonl.py).

What the published data looks like, and how sure that is
--------------------------------------------------------
The data could not be downloaded here (no network to the Hugging Face hub). What was
found, by source:

Confirmed from the dataset repository's file list (huggingface.co/datasets/THUDM/LongAlign-10k,
tree at 12f17c4, Feb 2024): one file, long.jsonl (655 MB, "Formats: json", English and
Chinese); the hub also keeps an automatic parquet conversion (refs/convert/parquet).

Confirmed from the authors' code (github.com/THUDM/LongAlign, README.md and
pre_tokenize.py at 450ecc8, Dec 2024): the README saves the set with
`load_dataset('THUDM/LongAlign-10k')` + `to_json("data/raw/long.jsonl")` (JSON Lines)
and asks for other data "formatted as"
    {"messages": [{"role": "user", "content": "..."}, {"role": "assistant", "content": "..."}, ...]}
pre_tokenize.py reads `json.loads(line)['messages']` from that file and pairs the
messages as (user, assistant) rounds.

Reported by a third-party reader that dumped real rows (public GitHub code found with the
search tools, not verified here): the columns are "dataset" (the source subset), "id",
"messages" and "length" (a ChatGLM3 token count, meaningless for Qwen).

Conversion rules
----------------
- The messages are copied as they are (role and content only; text is never edited).
  Roles must be user, assistant or system (system only first), contents non-blank
  strings, and there must be an assistant turn; anything else is a bad record.
  (LongAlign's own pre_tokenize.py also drops a trailing unanswered message and strips
  zero-width characters from answers; this converter leaves that to the data.)
- source keeps {"dataset", "at": "file:line", "id", "subset": the "dataset" column}.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sft_jsonl import (  # noqa: E402
    COMMON_HELP, Conversation, Summary, add_common_arguments, convert_dataset, read_messages, run_cli,
    scalar_fields)

DATASET = "THUDM/LongAlign-10k"

HELP = f"""\
input layout: long.jsonl (JSON Lines; also a JSON array or the hub's parquet shards), one
record per line:
  {{"messages": [{{"role": "user", "content": "<long document + instruction>"}},
                {{"role": "assistant", "content": "<answer>"}}, ...],
   "dataset": "<subset>", "id": "<id>", "length": <ChatGLM3 tokens, ignored>}}
  The messages are copied unchanged.

{COMMON_HELP}"""


def convert_record(record: dict) -> Conversation:
    return Conversation(read_messages(record.get("messages")),
                        source=scalar_fields(record, id="id", subset="dataset"))


def convert(input_path: str | Path, out: str | Path, *, force: bool = False, skip_bad: bool = False,
            limit: int | None = None) -> Summary:
    return convert_dataset(input_path, out, convert_record, dataset=DATASET, name="convert_longalign",
                           force=force, skip_bad=skip_bad, limit=limit)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="convert_longalign.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Convert THUDM/LongAlign-10k (long.jsonl) to SFT JSONL.", epilog=HELP)
    add_common_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return run_cli(parser.prog, lambda: convert(args.input, args.output, force=args.force,
                                                skip_bad=args.skip_bad, limit=args.limit))


if __name__ == "__main__":
    sys.exit(main())
