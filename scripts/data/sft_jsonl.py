"""Shared plumbing of the dataset converters in scripts/data/ (convert_chatqa2.py,
convert_longalign.py): read a published dataset's rows, check the conversations a
converter makes of them, and write this project's SFT JSONL atomically.

Input: one file or a folder of shards (every *.jsonl, *.json and *.parquet file directly
in it, by name). A .jsonl file is JSON Lines; a .json file is either one top-level
JSON array of objects (streamed element by element: ChatQA2 ships gigabytes in one
array) or JSON Lines (what Hugging Face's `Dataset.to_json` writes); a .parquet file
is read with pyarrow, which requirements.txt does not pin, so it is imported only when
a parquet file is given and its absence is a clear error.

Output (read by harness/data/jsonl_sft_dataset.cpp): one conversation per line,
    {"messages": [{"role": "system"|"user"|"assistant", "content": "..."}, ...],
     "source": {"dataset": "...", "at": "file:line", ...}}
A system message may come only first, every content is a non-blank string, and each
conversation has an assistant message. "source" is provenance only (the trainer
ignores it). The file is written to a temporary name beside OUT and renamed over OUT
only when every record was handled, so an error never leaves a partial OUT; an
existing OUT is replaced only when asked (force).

A record that cannot be converted (invalid JSON line, missing or empty field, unknown
role, ...) stops the conversion with "file:line: field: problem", or is skipped and
counted under its reason with skip_bad. Invalid JSON inside a JSON array always stops
it: the reader cannot find where the next element starts.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from collections import Counter
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, TextIO

ROLES = ("system", "user", "assistant")
INPUT_SUFFIXES = (".jsonl", ".json", ".parquet")
JSON_ARRAY_CHUNK_CHARS = 1 << 20  # read size of the streaming array reader
PARQUET_BATCH_ROWS = 256  # small: a ChatQA2 row can hold a 500 KB document
JSON_WHITESPACE = re.compile(r"[ \t\n\r]*")

COMMON_HELP = """\
input files: IN is one file or a folder (every .jsonl, .json and .parquet file directly
  in it, by name: point IN at one file to take one split). .json may be one JSON array
  or JSON Lines. Parquet needs pyarrow, which requirements.txt does not pin
  (python -m pip install pyarrow).
bad records: the first one stops the conversion with "FILE:LINE: FIELD: problem"
  (parquet: "FILE:row N"); --skip-bad skips them instead, counted by reason. Invalid
  JSON inside a JSON array always stops it.
output (one conversation per line, read by the trainer's data.jsonl source):
  {"messages": [{"role": "system"|"user"|"assistant", "content": "..."}, ...],
   "source": {"dataset": "...", "at": "FILE:LINE", "id": ...}}
  a system message only first; contents non-blank strings; at least one assistant
  message. OUT is written to a temporary file and renamed into place at the end, so
  an error leaves no partial OUT; an existing OUT is replaced only with --force.
  A one-line summary (written, skipped by reason) goes to stderr."""


class ConversionError(Exception):
    """Stops a conversion; nothing is written. The message names where and why."""


class BadRecord(Exception):
    """One record cannot be converted. `field` is a JSON path into the record ("$.answer"),
    `reason` the short category counted when bad records are skipped."""

    def __init__(self, at: str, problem: str, reason: str):
        super().__init__(f"{at}: {problem}")
        self.field = at
        self.problem = problem
        self.reason = reason


@dataclass(frozen=True)
class Row:
    """One input record and where it came from: `position` is a line number for text
    files and "row N" for parquet. `error` is set instead of `record` when the line
    is not JSON."""

    file: Path
    position: str
    record: object = None
    error: BadRecord | None = None

    @property
    def where(self) -> str:
        return f"{self.file}:{self.position}"


@dataclass
class Conversation:
    """What a converter makes of one record. `source` adds provenance keys (the
    dataset's own id); `notes` name silent fixes, counted in the summary."""

    messages: list[dict]
    source: dict = field(default_factory=dict)
    notes: tuple[str, ...] = ()


@dataclass
class Summary:
    name: str
    out: Path
    files: int = 0
    read: int = 0
    written: int = 0
    skipped: Counter = field(default_factory=Counter)
    notes: Counter = field(default_factory=Counter)

    def line(self) -> str:
        text = (f"{self.name}: wrote {self.written} conversations to {self.out} "
                f"from {self.read} records in {self.files} file(s)")
        if self.skipped:
            text += f"; skipped {sum(self.skipped.values())} ({counts_text(self.skipped)})"
        if self.notes:
            text += f"; {counts_text(self.notes)}"
        return text


def counts_text(counts: Counter) -> str:
    return ", ".join(f"{key}: {n}" for key, n in sorted(counts.items()))


# ----------------------------------------------------------------------------- fields


def type_name(value: object) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
             int: "a number", float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def field_path(key: str, parent: str = "$") -> str:
    # "$.answer", but '$["sub-paragraphs"]' for keys that are not plain names.
    return f"{parent}.{key}" if key.isidentifier() else f'{parent}["{key}"]'


def require_object(record: object) -> dict:
    if not isinstance(record, dict):
        raise BadRecord("$", f"expected a JSON object, got {type_name(record)}", "not an object")
    return record


def check_text(value: object, where: str) -> str:
    """A message content: a non-blank string that UTF-8 can encode."""
    if value is None:
        raise BadRecord(where, "is missing", "missing field")
    if not isinstance(value, str):
        raise BadRecord(where, f"must be a string, got {type_name(value)}", "wrong type")
    if not value.strip():
        raise BadRecord(where, "is empty", "empty content")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        # json.loads accepts "\ud800"; the output file could not hold it.
        raise BadRecord(where, "holds an unpaired UTF-16 surrogate, which UTF-8 cannot encode",
                        "invalid unicode") from None
    return value


def read_messages(value: object, where: str = "$.messages") -> list[dict]:
    """A published [{"role", "content"}, ...] list, checked message by message; other
    keys of a message are dropped."""
    if value is None:
        raise BadRecord(where, "is missing", "missing field")
    if not isinstance(value, list):
        raise BadRecord(where, f"must be a list of {{role, content}} objects, got {type_name(value)}",
                        "wrong type")
    if not value:
        raise BadRecord(where, "is an empty list", "no messages")
    messages = []
    for i, item in enumerate(value):
        at = f"{where}[{i}]"
        if not isinstance(item, dict):
            raise BadRecord(at, f"must be a {{role, content}} object, got {type_name(item)}",
                            "wrong type")
        role = item.get("role")
        if not isinstance(role, str) or role not in ROLES:
            shown = json.dumps(role, ensure_ascii=False, default=str)
            raise BadRecord(f"{at}.role", f"must be one of {', '.join(ROLES)}, got {shown}", "unknown role")
        messages.append({"role": role, "content": check_text(item.get("content"), f"{at}.content")})
    return messages


def check_system_first(messages: list[dict], where: str = "$.messages") -> None:
    for i, message in enumerate(messages):
        if message["role"] == "system" and i > 0:
            raise BadRecord(f"{where}[{i}].role", "a system message may only come first",
                            "misplaced system message")


def check_conversation(messages: list[dict], where: str = "$.messages") -> None:
    """The rules of the output format, checked once more on what a converter built."""
    for i, message in enumerate(messages):
        check_text(message["content"], f"{where}[{i}].content")
    check_system_first(messages, where)
    if not any(message["role"] == "assistant" for message in messages):
        raise BadRecord(where, "has no assistant message, so nothing would be trained", "no assistant message")


def scalar_fields(record: dict, **keys: str) -> dict:
    """Provenance: {name: record[key]} for each key whose value is a non-empty string
    or a number (ids, subset names); anything else is left out."""
    picked = {}
    for name, key in keys.items():
        value = record.get(key)
        if (isinstance(value, (int, float)) and not isinstance(value, bool)) or (isinstance(value, str) and value):
            picked[name] = value
    return picked


# ----------------------------------------------------------------------------- reading


def list_input_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in INPUT_SUFFIXES)
        if not files:
            raise ConversionError(f"{path}: the folder holds no .jsonl, .json or .parquet file")
        return files
    if not path.exists():
        raise ConversionError(f"{path}: no such file or folder")
    if path.suffix not in INPUT_SUFFIXES:
        raise ConversionError(f"{path}: unknown input kind; expected a .jsonl, .json or .parquet file, or a folder of them")
    return [path]


def iter_rows(file: Path) -> Iterator[Row]:
    if file.suffix == ".parquet":
        return iter_parquet_rows(file)
    if file.suffix == ".json" and starts_with_array(file):
        return iter_json_array_rows(file)
    return iter_jsonl_rows(file)


def iter_jsonl_rows(file: Path) -> Iterator[Row]:
    with file.open("rb") as f:
        for number, raw in enumerate(f, 1):
            if not raw.strip():
                continue  # blank lines are allowed, as the trainer's reader allows them
            try:
                # utf-8-sig on the first line: a byte-order mark is not part of the JSON.
                text = raw.rstrip(b"\r\n").decode("utf-8-sig" if number == 1 else "utf-8")
                record = json.loads(text)
            except UnicodeDecodeError as e:
                yield Row(file, str(number), error=BadRecord("$", f"is not UTF-8 (byte {e.start} of the line)", "invalid JSON"))
            except json.JSONDecodeError as e:
                yield Row(file, str(number), error=BadRecord("$", f"invalid JSON: {e.msg} at column {e.colno}", "invalid JSON"))
            else:
                yield Row(file, str(number), record)


def starts_with_array(file: Path) -> bool:
    with file.open("r", encoding="utf-8-sig", errors="replace") as f:
        while chunk := f.read(4096):
            text = chunk.lstrip()
            if text:
                return text[0] == "["
    return False


class _ArrayStream:
    """A growing window on a text file for the JSON array reader: `text[pos:]` is what
    is still to parse and `line` is the line number at `pos`."""

    def __init__(self, f: TextIO):
        self.f = f
        self.text = ""
        self.pos = 0
        self.line = 1
        self.ended = False

    def read_more(self) -> bool:
        """Appends at least one chunk (more when the window is large, so that one huge
        element is read in a few passes rather than one per megabyte)."""
        if self.ended:
            return False
        chunk = self.f.read(max(JSON_ARRAY_CHUNK_CHARS, len(self.text) - self.pos))
        if not chunk:
            self.ended = True
            return False
        self.text = self.text[self.pos:] + chunk
        self.pos = 0
        return True

    def advance(self, new_pos: int) -> None:
        self.line += self.text.count("\n", self.pos, new_pos)
        self.pos = new_pos

    def peek(self) -> str:
        """The next non-whitespace character ("" at the end of the file), skipping to it."""
        while True:
            self.advance(JSON_WHITESPACE.match(self.text, self.pos).end())
            if self.pos < len(self.text):
                return self.text[self.pos]
            if not self.read_more():
                return ""

    def line_of(self, offset: int) -> int:
        return self.line + self.text.count("\n", self.pos, offset)


def iter_json_array_rows(file: Path) -> Iterator[Row]:
    """The elements of one top-level JSON array, each with the line it starts on,
    without holding the whole file in memory."""
    decoder = json.JSONDecoder()
    with file.open("r", encoding="utf-8-sig") as f:
        stream = _ArrayStream(f)
        if stream.peek() != "[":
            raise ConversionError(f"{file}:{stream.line}: expected a JSON array (\"[\") or JSON Lines")
        stream.advance(stream.pos + 1)
        if stream.peek() == "]":
            return
        while True:
            stream.peek()
            start_line = stream.line
            value, end = decode_array_element(decoder, stream, file)
            yield Row(file, str(start_line), value)
            stream.advance(end)
            separator = stream.peek()
            if separator not in (",", "]"):
                raise ConversionError(f"{file}:{stream.line}: invalid JSON array: expected \",\" or \"]\" after the element "
                                      f"that starts on line {start_line}")
            stream.advance(stream.pos + 1)
            if separator == "]":
                break
        if stream.peek():
            raise ConversionError(f"{file}:{stream.line}: unexpected text after the JSON array")


def decode_array_element(decoder: json.JSONDecoder, stream: _ArrayStream, file: Path) -> tuple[object, int]:
    while True:
        try:
            value, end = decoder.raw_decode(stream.text, stream.pos)
        except json.JSONDecodeError as e:
            if could_be_cut_off(e, stream.text) and stream.read_more():
                continue  # the element runs past the window
            raise ConversionError(f"{file}:{stream.line_of(e.pos)}: invalid JSON in the array: {e.msg} "
                                  "(a JSON array cannot be resynchronised, so this stops the conversion even "
                                  "with --skip-bad; fix the file)") from None
        # A number at the very end of the window may continue in the next chunk.
        if end == len(stream.text) and stream.read_more():
            continue
        return value, end


def could_be_cut_off(error: json.JSONDecodeError, text: str) -> bool:
    """Whether a decoding error may only mean that the window ends inside the element.
    Errors elsewhere are real: reading on would pull the rest of a huge file into
    memory before reporting them."""
    return error.msg.startswith("Unterminated string") or error.pos >= len(text) - 16


def import_parquet():
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise ConversionError(
            "reading .parquet files needs the pyarrow package, which is not installed (requirements.txt "
            "does not pin it): install it with `python -m pip install pyarrow`, or convert the dataset's "
            "JSON/JSONL files instead") from None
    return pyarrow, pyarrow.parquet


def iter_parquet_rows(file: Path) -> Iterator[Row]:
    pyarrow, parquet = import_parquet()
    number = 0
    try:
        for batch in parquet.ParquetFile(file).iter_batches(batch_size=PARQUET_BATCH_ROWS):
            for record in batch.to_pylist():
                number += 1
                yield Row(file, f"row {number}", record)
    except (pyarrow.ArrowException, OSError) as e:
        raise ConversionError(f"{file}:row {number + 1}: cannot read the parquet file: {e}") from None


# ----------------------------------------------------------------------------- writing


def default_file_mode() -> int:
    # mkstemp makes 0600 files; give OUT the mode an ordinary open() would.
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


@contextmanager
def atomic_output(out: Path, force: bool) -> Iterator[TextIO]:
    """A text file that becomes `out` only if the block ends without an exception."""
    if out.is_dir():
        raise ConversionError(f"{out}: is a folder; give the output file's path")
    if out.exists() and not force:
        raise ConversionError(f"{out}: already exists; pass --force to replace it")
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temporary, default_file_mode())
        os.replace(temporary, out)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def output_line(conversation: Conversation, row: Row, dataset: str) -> str:
    source = {"dataset": dataset, "at": f"{row.file.name}:{row.position}", **conversation.source}
    return json.dumps({"messages": conversation.messages, "source": source}, ensure_ascii=False) + "\n"


# ----------------------------------------------------------------------------- driver


def convert_dataset(input_path: str | Path, out: str | Path, convert_record: Callable[[dict], Conversation], *,
                    dataset: str, name: str, force: bool = False, skip_bad: bool = False,
                    limit: int | None = None) -> Summary:
    """Runs `convert_record` over every row of `input_path` and writes OUT; returns the
    counts. Raises ConversionError on the first bad record unless `skip_bad`."""
    if limit is not None and limit < 1:
        raise ConversionError(f"limit must be at least 1, got {limit}")
    files = list_input_files(Path(input_path))
    out = Path(out)
    if any(file.suffix == ".parquet" for file in files):
        import_parquet()  # fail before anything is read, not at the first parquet shard
    if out.exists() and any(out.resolve() == file.resolve() for file in files):
        raise ConversionError(f"{out}: is also an input file")
    summary = Summary(name, out, files=len(files))
    with atomic_output(out, force) as sink:
        for row in (row for file in files for row in iter_rows(file)):
            summary.read += 1
            try:
                conversation = convert_row(row, convert_record)
            except BadRecord as bad:
                if not skip_bad:
                    raise ConversionError(f"{row.where}: {bad} (skip such records with --skip-bad)") from None
                summary.skipped[bad.reason] += 1
                continue
            sink.write(output_line(conversation, row, dataset))
            summary.written += 1
            summary.notes.update(conversation.notes)
            if limit is not None and summary.written >= limit:
                break  # stop reading too: --limit is for a quick look at a huge file
        if summary.written == 0:
            raise ConversionError(f"{input_path}: no conversation was converted ({summary.read} records read"
                                  + (f", skipped: {counts_text(summary.skipped)}" if summary.skipped else "") + ")")
    return summary


def convert_row(row: Row, convert_record: Callable[[dict], Conversation]) -> Conversation:
    if row.error is not None:
        raise row.error
    conversation = convert_record(require_object(row.record))
    check_conversation(conversation.messages)
    return conversation


# ----------------------------------------------------------------------------- command line


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", metavar="IN", help="a .jsonl, .json or .parquet file, or a folder of such shards")
    parser.add_argument("output", metavar="OUT", help="the SFT JSONL file to write")
    parser.add_argument("--force", action="store_true", help="replace OUT if it exists")
    parser.add_argument("--skip-bad", action="store_true",
                        help="skip records that cannot be converted (counted by reason) instead of stopping")
    parser.add_argument("--limit", type=positive_int, metavar="N", help="stop after writing N conversations")


def run_cli(prog: str, convert: Callable[[], Summary]) -> int:
    """Runs a conversion; prints its summary line, or the error, to stderr."""
    try:
        summary = convert()
    except ConversionError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 1
    print(summary.line(), file=sys.stderr)
    return 0
