#!/usr/bin/env python3
"""Converts NVIDIA's ChatQA2 long-context SFT data (Hugging Face dataset
nvidia/ChatQA2-Long-SFT-data) to this project's SFT JSONL (see sft_jsonl.py).

What the published data looks like, and how sure that is
--------------------------------------------------------
The data could not be downloaded here (no network to the Hugging Face hub). What was
found, by source:

Confirmed from the dataset's own card (huggingface.co/datasets/nvidia/ChatQA2-Long-SFT-data,
README.md front matter, revisions 54c75e1 to 7acef85, Sep 2024): two configs,
  long_sft:            train = long_sft/long_sft_QA_train.json, test = long_sft/long_sft_QA_dev.json
  NarrativeQA_131072:  train = NarrativeQA_131072/NarrativeQA_131072_QA_train.json (8.67 GB),
                       test  = NarrativeQA_131072/NarrativeQA_131072_QA_dev.json (1.67 GB)
"Formats: json"; long_sft is built from LongAlpaca-12k, GPT-4 samples of OpenOrca and
Long-Data-Collections. The hub's parquet conversion (refs/convert/parquet) exists but
is partial for this dataset, so the .json files are the complete source.

Confirmed from NVIDIA's own reader of this file family (github.com/NVIDIA/Megatron-LM,
tools/retro/sft/dataset_conv.py, `preprocess`, present until the retro removal in
commit fc6969f, Jan 2026): a file is one JSON array (json.load) of records with
"question", an answer in "answers" (list) or "answer" (string or list; the first
entry is used; SQuAD-style {"text": ...} entries allowed), and the context in
"sub-paragraphs" (a string, or [title, text] for doc2dial). NVIDIA's companion
converters write records {"paragraph_id", "question", "answer", "sub-paragraphs",
"word count", "Date"}. ChatQA's prompt puts the context before the dialogue:
"System: ...\\n\\n" + context + "\\n\\n" + "User: {question}\\n\\nAssistant:".

Reported by several independent third-party readers of these exact files (public
GitHub code found with the search tools, not verified on real rows here):
  - the files are a top-level JSON array (all stream it with ijson.items(f, "item"));
  - columns paragraph_id, question, sub-paragraphs, answer (and "word count");
  - long_sft: "sub-paragraphs" is empty and "question" holds the whole prompt
    (instruction, the article, the question) wrapped as "User: ...\\n\\nAssistant:";
    "answer" is a string;
  - NarrativeQA_131072: "sub-paragraphs" holds the document, "question" is a bare
    question, "answer" is a list;
  - the text contains Llama-3 "<|begin_of_text|>" markers (ChatQA2 is Llama-3 based).

Assumed (from the ChatQA 1.x training data, nvidia/ChatQA-Training-Data, and the
ChatQA-1.5 model card's `messages` + `document` example; not seen in ChatQA2's files):
records {"messages": [{"role", "content"}, ...], "document": str, "answers": [...],
optional "system": str}. Both layouts are accepted, chosen per record: "messages"
present -> this one, else "question" -> the one above.

Conversion rules
----------------
- Question layout: the "User:" prefix and the trailing "Assistant:" of "question"
  are removed (they are ChatQA's role markers, not text; left in, the model would see
  a fake assistant turn before Qwen's own). The rest is one user turn; with
  split_turns, a "User: ...\\n\\nAssistant: ...\\n\\nUser: ..." transcript is cut
  into turns (off by default: a document quoting such lines would be cut too). The
  first answer is the final assistant turn.
- Messages layout: the messages as given; when they do not end with an assistant
  turn, the first of "answers" becomes the final assistant turn.
- The document ("sub-paragraphs" or "document"; a list is joined with blank lines),
  trimmed, goes where ChatQA puts its context, before the dialogue: by default in
  front of the first user turn, followed by a blank line ("first-user"); or, with
  document_rule "system", into the system message after the system text, separated
  by a blank line (ChatQA's literal "System: ...\\n\\n<context>" order).
- System prompt: none unless the record has one (a leading system message, or a
  "system" field); system="TEXT" replaces it in every conversation, system="" drops it.
- "<|begin_of_text|>" is removed wherever it appears (a Llama-3 token; to Qwen's
  tokenizer it would be plain text); counted in the summary.
- source keeps {"dataset", "at": "file:line", "id": paragraph_id or id}.
"""

from __future__ import annotations

import argparse
import re
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sft_jsonl import (  # noqa: E402
    COMMON_HELP, BadRecord, Conversation, Summary, add_common_arguments, check_system_first,
    check_text, convert_dataset, field_path, read_messages, run_cli, scalar_fields, type_name)

DATASET = "nvidia/ChatQA2-Long-SFT-data"
LLAMA3_BOS = "<|begin_of_text|>"
DOCUMENT_RULES = ("first-user", "system")
USER_MARK, ASSISTANT_MARK = "User:", "Assistant:"
TURN_MARK = re.compile(r"\n\n(User|Assistant):")  # ChatQA's turn separator inside one prompt string

HELP = f"""\
input layouts (chosen per record):
  ChatQA2 files (long_sft/long_sft_QA_{{train,dev}}.json, NarrativeQA_131072/...): one
  JSON array (also JSON Lines or parquet) of
    {{"paragraph_id": ..., "question": "User: <instruction, article, question>\\n\\nAssistant:",
     "answer": "<string>" | ["<first is used>", ...], "sub-paragraphs": "<document or empty>",
     "word count": ..., "Date": ...}}
  ("answers" is accepted for "answer"). The "User:" / trailing "Assistant:" markers
  are removed; the question is one user turn (--split-turns cuts a
  "User: ..\\n\\nAssistant: ..\\n\\nUser: .." transcript into turns); the answer is the
  assistant turn.
  ChatQA 1.x style: {{"messages": [{{"role": "user"|"assistant"|"system", "content": ...}}, ...],
    "document": "<context>", "answers": [...], "system": "..."}}; when the messages
  do not end with an assistant turn, answers[0] becomes it.
  The document goes before the dialogue, as in ChatQA's prompt: see --document.
  "<|begin_of_text|>" (a Llama-3 token) is removed everywhere.

{COMMON_HELP}"""


def remove_bos(value: object) -> tuple[object, bool]:
    """`value` with "<|begin_of_text|>" removed from every string in it, and whether
    there was one. Done before anything is trimmed or joined, so that a document that
    starts with the marker does not start with the blank after it."""
    if isinstance(value, str):
        return (value.replace(LLAMA3_BOS, ""), True) if LLAMA3_BOS in value else (value, False)
    if isinstance(value, list):
        items = [remove_bos(item) for item in value]
        return [item for item, _ in items], any(found for _, found in items)
    if isinstance(value, dict):
        items = {key: remove_bos(item) for key, item in value.items()}
        return {key: item for key, (item, _) in items.items()}, any(found for _, found in items.values())
    return value, False


def first_answer(record: dict, keys: tuple[str, str]) -> str:
    """The answer a record gives under the first of `keys` it has: a string, or a list
    whose first entry (a string, or {"text": ...}) is used."""
    key = next((key for key in keys if record.get(key) is not None), keys[0])
    where = field_path(key)
    value = record.get(key)
    if value is None:
        raise BadRecord(where, "is missing, so the conversation would have no assistant turn", "no answer")
    if isinstance(value, list):
        if not value:
            raise BadRecord(where, "is an empty list", "no answer")
        value, where = value[0], f"{where}[0]"
        if isinstance(value, dict):
            value, where = value.get("text"), f"{where}.text"
    elif not isinstance(value, str):
        raise BadRecord(where, f"must be a string or a list of strings, got {type_name(value)}", "wrong type")
    return check_text(value, where)


def read_document(record: dict, key: str) -> str:
    value = record.get(key)
    if value is None:
        return ""
    if isinstance(value, list) and all(isinstance(part, str) for part in value):
        value = "\n\n".join(value)  # doc2dial's [title, text]
    if not isinstance(value, str):
        raise BadRecord(field_path(key), f"must be a string, got {type_name(value)}", "wrong type")
    return value.strip()


def unwrap_prompt(question: str) -> str:
    """ "User: <text>\\n\\nAssistant:" -> "<text>"; text without the markers is kept."""
    text = question.strip()
    if text.startswith(USER_MARK):
        text = text[len(USER_MARK):].lstrip()
    if text.endswith(ASSISTANT_MARK):
        text = text[:-len(ASSISTANT_MARK)].rstrip()
    return text


def split_transcript(text: str) -> list[dict]:
    """Cuts "<q1>\\n\\nAssistant: <a1>\\n\\nUser: <q2>" into alternating turns."""
    pieces = TURN_MARK.split(text)  # [q1, "Assistant", a1, "User", q2, ...]
    turns = [{"role": "user", "content": pieces[0]}]
    turns += [{"role": role.lower(), "content": content} for role, content in zip(pieces[1::2], pieces[2::2])]
    for i, turn in enumerate(turns):
        turn["content"] = check_text(turn["content"].strip(), f"$.question (turn {i + 1})")
        if i > 0 and turn["role"] == turns[i - 1]["role"]:
            raise BadRecord("$.question", f"turn {i + 1} is a second {turn['role']} turn in a row", "dialogue out of order")
    return turns


def turns_from_question(record: dict, split_turns: bool) -> tuple[list[dict], str]:
    """The ChatQA2 file layout: the turns (answer last) and the document."""
    body = unwrap_prompt(check_text(record.get("question"), "$.question"))
    if split_turns:
        turns = split_transcript(body)
    else:
        turns = [{"role": "user", "content": check_text(body, "$.question")}]
    if turns[-1]["role"] == "assistant":
        raise BadRecord("$.question", "the dialogue ends with an assistant turn, so the answer has no question",
                        "dialogue out of order")
    turns.append({"role": "assistant", "content": first_answer(record, ("answer", "answers"))})
    return turns, read_document(record, "sub-paragraphs")


def turns_from_messages(record: dict) -> tuple[list[dict], str, str | None]:
    """The ChatQA 1.x layout: the turns, the document and the record's own system prompt."""
    messages = read_messages(record.get("messages"))
    check_system_first(messages)
    own_system = None
    if messages[0]["role"] == "system":
        own_system = messages.pop(0)["content"]
    elif record.get("system") is not None:
        own_system = check_text(record.get("system"), "$.system")
    if not messages or messages[-1]["role"] != "assistant":
        # Without answers, a last unanswered question after earlier answers is kept:
        # the trainer learns those earlier answers and ignores the rest.
        has_answer = record.get("answers") is not None or record.get("answer") is not None
        if has_answer or not any(m["role"] == "assistant" for m in messages):
            messages.append({"role": "assistant", "content": first_answer(record, ("answers", "answer"))})
    return messages, read_document(record, "document"), own_system


def place_document(turns: list[dict], document: str, system: str | None, rule: str) -> list[dict]:
    if document and rule == "system":
        system = f"{system}\n\n{document}" if system else document
    elif document:
        first_user = next((turn for turn in turns if turn["role"] == "user"), None)
        if first_user is None:
            raise BadRecord("$.messages", "has no user turn to carry the document", "no user turn")
        first_user["content"] = f"{document}\n\n{first_user['content']}"
    return ([{"role": "system", "content": system}] if system else []) + turns


def convert_record(record: dict, *, system: str | None = None, document_rule: str = "first-user",
                   split_turns: bool = False) -> Conversation:
    record, had_bos = remove_bos(record)
    if "messages" in record:
        turns, document, own_system = turns_from_messages(record)
    elif "question" in record:
        turns, document = turns_from_question(record, split_turns)
        own_system = None
    else:
        raise BadRecord("$", 'has neither "question" (ChatQA2 files) nor "messages" (ChatQA 1.x layout)',
                        "unknown layout")
    messages = place_document(turns, document, own_system if system is None else system, document_rule)
    return Conversation(messages, source=scalar_fields(record, id="paragraph_id") or scalar_fields(record, id="id"),
                        notes=("removed <|begin_of_text|>",) if had_bos else ())


def convert(input_path: str | Path, out: str | Path, *, system: str | None = None, document_rule: str = "first-user",
            split_turns: bool = False, force: bool = False, skip_bad: bool = False,
            limit: int | None = None) -> Summary:
    if document_rule not in DOCUMENT_RULES:
        raise ValueError(f"document_rule must be one of {DOCUMENT_RULES}, got {document_rule!r}")
    record_converter = partial(convert_record, system=system, document_rule=document_rule, split_turns=split_turns)
    return convert_dataset(input_path, out, record_converter, dataset=DATASET, name="convert_chatqa2",
                           force=force, skip_bad=skip_bad, limit=limit)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="convert_chatqa2.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Convert nvidia/ChatQA2-Long-SFT-data (long_sft, NarrativeQA_131072) to SFT JSONL.",
        epilog=HELP)
    add_common_arguments(parser)
    parser.add_argument("--system", metavar="TEXT",
                        help="system prompt for every conversation, replacing the record's own "
                             "(default: only a record's own; \"\" drops them)")
    parser.add_argument("--document", choices=DOCUMENT_RULES, default="first-user",
                        help="where the document goes: before the first user turn, then a blank line "
                             "(first-user, default), or into the system message after --system's text (system)")
    parser.add_argument("--split-turns", action="store_true",
                        help='cut a "User: ..\\n\\nAssistant: ..\\n\\nUser: .." question into turns')
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return run_cli(parser.prog, lambda: convert(
        args.input, args.output, system=args.system, document_rule=args.document, split_turns=args.split_turns,
        force=args.force, skip_bad=args.skip_bad, limit=args.limit))


if __name__ == "__main__":
    sys.exit(main())
