#!/usr/bin/env python3
"""Tokenises SFT conversations with a model folder's own chat template, into a cache
folder that the C++ trainer memory-maps (data.source = "tokenized";
harness/data/tokenized_sft_dataset.h).

    python scripts/data/tokenize_sft.py --data F.jsonl --tokenizer-dir DIR --out CACHE_DIR
        [--force] [--skip-bad] [--limit N] [--workers N]

Input
-----
F.jsonl: one conversation per line, {"messages": [{"role": "system"|"user"|"assistant",
"content": str}, ...]}; other keys (of the line and of a message) are ignored, blank
lines are skipped, contents may be empty, and each conversation needs an assistant
message that is not its first message. DIR: a model or tokenizer folder with
tokenizer.json (a fast tokenizer: offsets are needed), loaded with
transformers.AutoTokenizer.from_pretrained(DIR). Its chat template comes from
chat_template.jinja (newer transformers saves it there) or tokenizer_config.json's
"chat_template"; a folder with neither gets Qwen2.5-Instruct's ChatML template (the
plain-conversation branch, no tools, with its default system prompt "You are Qwen,
created by Alibaba Cloud. You are a helpful assistant." when a conversation has no
system message), and meta.json says so (template.source = "qwen2.5-default").

The rendering rule ("assistant-spans-1")
----------------------------------------
This is the project's rule for what a conversation's tokens and loss mask are.
- ids = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=False),
  exactly (transformers 5 returns a BatchEncoding: its input_ids). Only each message's
  role and content are passed.
- Loss mask: exactly the assistant spans. For the i-th message with role assistant,
      P = apply_chat_template(messages[:i],   tokenize=False, add_generation_prompt=True)
      F = apply_chat_template(messages[:i+1], tokenize=False, add_generation_prompt=False)
  F must start with P and be a prefix of the whole conversation's text T (rendered with
  add_generation_prompt=False); otherwise the template does not render a conversation
  turn by turn and this rule cannot be applied: an error naming the line. The span is
  the character range [len(P), len(F) - len(trailing whitespace of F)) of T.
- T is tokenised with the fast tokenizer (add_special_tokens=False, offsets), which must
  give exactly the ids above (apply_chat_template renders and then tokenises the same
  way; a difference stops the build). A token is trained (targets = 1: it is predicted
  with loss) when its first character lies inside an assistant span.
  For Qwen's ChatML the trained tokens are "{content}<|im_end|>" of each assistant turn:
  not "<|im_start|>assistant\\n" before it and not the "\\n" after it.
  A token that straddles a span's start is classified by its first character: with a
  template whose generation prompt ends in a space ("assistant: "), the byte-level
  pre-tokenizer joins that space to the first word (" rivers"), which then starts
  outside the span and is not trained. ChatML and Llama-3 style prompts end in "\\n"
  (or a special token), where this does not happen for contents that start with a
  letter, digit, space or punctuation; a content that starts with "\\n" may join the
  prompt's "\\n" the same way.
- Special-token text inside a content (say "<|im_start|>") is tokenised as that special
  token, as apply_chat_template does by default.
- Conversations longer than the trainer's limit are kept: the trainer applies its
  too_long rule to the lengths in offsets.i64.

Cache folder (all little-endian)
--------------------------------
  tokens.u32   uint32: every conversation's ids, concatenated
  targets.u8   one byte per token: 1 = trained, 0 = not
  offsets.i64  int64, N + 1 entries: conversation i is tokens [offsets[i], offsets[i+1])
  lines.i64    int64, N entries: conversation i's 1-based line number in F.jsonl
  meta.json    {"format": "sparsebalance-sft-cache-1", "conversations": N, "tokens": total,
                "vocab_size": len(tokenizer),
                "data": {"path", "sha256", "bytes", "mtime_ns"},
                "tokenizer": {"dir", "files": {name: {"sha256", "bytes", "mtime_ns"}}}
                   for each of tokenizer.json, tokenizer_config.json, chat_template.jinja,
                   special_tokens_map.json, added_tokens.json that exists,
                "template": {"source": "chat_template.jinja" | "tokenizer_config.json" |
                   "qwen2.5-default" (| "additional_chat_templates/" when only that folder
                   holds one), "sha256": of the template text used},
                "rule": "assistant-spans-1", "options": {"limit": N | null, "skip_bad": bool},
                "key": see below, "skipped": {reason: count} (only with --skip-bad),
                "command": the command line that rebuilds it,
                "created_by": "scripts/data/tokenize_sft.py",
                "versions": {"transformers", "tokenizers", "python"}}
Paths are absolute. key = sha256 (hex) of the UTF-8 bytes of
    json.dumps({"format", "rule", "data": data sha256, "tokenizer": {name: sha256},
                "template": template sha256, "options": {"limit", "skip_bad"}},
               sort_keys=True, separators=(",", ":"))
(the options are in the key because --limit and --skip-bad change what is cached).

Rebuilding
----------
OUT is built in a sibling folder OUT.partial.<pid> (every file fsynced, meta.json
written last) and then swapped in with one atomic rename (renameat2 RENAME_EXCHANGE on
Linux; elsewhere OUT is moved aside first), so an existing OUT is replaced only by a
complete cache and a failed build leaves the old one and no partial folder.
Partial folders of dead processes are removed. OUT must be a cache folder, an empty
folder or absent.
If OUT/meta.json has the key of the current inputs (and the parts have the sizes it
records), nothing is rebuilt: "up to date". When only the recorded paths or mtimes
differ (a file touched, copied or moved with the same content), meta.json alone is
rewritten, atomically, with the current ones, because the trainer checks sizes and
mtimes to tell a stale cache; its parts are untouched. --force rebuilds anyway.

Errors: a bad line stops the build with "FILE:LINE: JSON-PATH: problem; fix: ..." and
exit status 2 (--skip-bad skips such lines instead, counted by reason in meta.json);
a template that cannot be rendered turn by turn, or missing inputs, also exit 2.
Progress (at most every 2 s), the "up to date" line and a one-line summary go to stderr.
--workers N (default: one process per CPU, at most 8, and one for inputs under 200
conversations per worker) spreads the encoding over processes; the cache is the same
byte for byte for any N.
"""

from __future__ import annotations

import argparse
import bisect
import ctypes
import errno
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import sys
import time
from array import array
from collections import Counter
from contextlib import nullcontext, suppress
from itertools import islice
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sft_jsonl import ROLES, BadRecord, counts_text, iter_jsonl_rows, positive_int, require_object, type_name  # noqa: E402

FORMAT = "sparsebalance-sft-cache-1"
RULE = "assistant-spans-1"
CREATED_BY = "scripts/data/tokenize_sft.py"
PROG = "tokenize_sft"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json",
                   "added_tokens.json")
PARTS = ("tokens.u32", "targets.u8", "offsets.i64", "lines.i64")
META = "meta.json"
PROGRESS_SECONDS = 2.0
BATCH_PER_WORKER = 64  # conversations read ahead per worker
MAX_AUTO_WORKERS = 8
MIN_CONVERSATIONS_PER_WORKER = 200
DEFAULT_TEMPLATE_SOURCE = "qwen2.5-default"
assert array("I").itemsize == 4 and array("q").itemsize == 8, "uint32 / int64 array types"

# The branch of Qwen2.5-Instruct's chat template that plain conversations (no tools) take.
QWEN25_DEFAULT_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' or (message.role == 'system' and not loop.first) or message.role == 'assistant' %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")

FIXES = {
    "invalid JSON": "fix or remove the line",
    "not an object": 'write the line as {"messages": [{"role": ..., "content": ...}, ...]}',
    "missing field": 'give the line {"messages": [{"role": ..., "content": "..."}, ...]}',
    "wrong type": 'give the line {"messages": [{"role": ..., "content": "..."}, ...]} with string contents',
    "no messages": "add the conversation's messages or remove the line",
    "unknown role": "use the role system, user or assistant",
    "invalid unicode": "replace the unpaired surrogate (\\ud800-\\udfff escape) in the text",
    "no assistant message": "add the assistant's answer or remove the line",
    "assistant first": "put the prompt (a user message) before the first assistant message, or remove the line",
    "template error": "write the conversation in the form the model's chat template accepts, or remove the line",
    "nothing trained": "give the assistant turns some text, or remove the line",
}


class InputError(Exception):
    """Bad input (exit status 2): the message names the file (and line) and the fix."""


class BuildError(Exception):
    """Something that should not happen with good input (exit status 1)."""


class _LineBad(BadRecord):
    """A BadRecord raised while encoding (the message path is already set)."""


def bad_line_message(where: str, bad: BadRecord, skippable: bool = True) -> str:
    text = f"{where}: {bad}; fix: {FIXES.get(bad.reason, 'fix or remove the line')}"
    return text + (" (or pass --skip-bad to skip such lines)" if skippable else "")


# ----------------------------------------------------------------------------- inputs


def file_record(path: Path) -> dict:
    """{"sha256", "bytes", "mtime_ns"} of a file; read again if it changes while hashed."""
    for _ in range(3):
        before = os.stat(path)
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
        after = os.stat(path)
        if (before.st_size, before.st_mtime_ns) == (after.st_size, after.st_mtime_ns):
            return {"sha256": digest.hexdigest(), "bytes": after.st_size, "mtime_ns": after.st_mtime_ns}
    raise InputError(f"{path}: keeps changing while it is read; stop what writes it and run again")


def count_lines(path: Path) -> int:
    """Non-blank lines: the conversations to expect, for progress."""
    with open(path, "rb") as f:
        return sum(1 for raw in f if raw.strip())


def read_messages(record: object) -> list[dict]:
    """The {"role", "content"} messages of one line (other keys dropped), or BadRecord."""
    record = require_object(record)
    if "messages" not in record or record["messages"] is None:
        raise BadRecord("$.messages", "is missing", "missing field")
    value = record["messages"]
    if not isinstance(value, list):
        raise BadRecord("$.messages", f"must be a list of {{role, content}} objects, got {type_name(value)}",
                        "wrong type")
    if not value:
        raise BadRecord("$.messages", "is an empty list", "no messages")
    messages = []
    for i, item in enumerate(value):
        at = f"$.messages[{i}]"
        if not isinstance(item, dict):
            raise BadRecord(at, f"must be a {{role, content}} object, got {type_name(item)}", "wrong type")
        role = item.get("role")
        if not isinstance(role, str) or role not in ROLES:
            shown = json.dumps(role, ensure_ascii=False, default=str)
            raise BadRecord(f"{at}.role", f"must be one of {', '.join(ROLES)}, got {shown}", "unknown role")
        content = item.get("content")
        if content is None:
            raise BadRecord(f"{at}.content", "is missing", "missing field")
        if not isinstance(content, str):
            raise BadRecord(f"{at}.content", f"must be a string, got {type_name(content)}", "wrong type")
        try:
            content.encode("utf-8")
        except UnicodeEncodeError:
            raise BadRecord(f"{at}.content", "holds an unpaired UTF-16 surrogate, which UTF-8 cannot encode",
                            "invalid unicode") from None
        messages.append({"role": role, "content": content})
    if not any(message["role"] == "assistant" for message in messages):
        raise BadRecord("$.messages", "has no assistant message, so nothing would be trained", "no assistant message")
    if messages[0]["role"] == "assistant":
        raise BadRecord("$.messages[0].role", "is assistant: there is no prompt before it to render "
                        "(apply_chat_template cannot render an empty conversation)", "assistant first")
    return messages


def load_tokenizer(folder: Path):
    """(tokenizer, template source, template text); the default template is installed
    on the tokenizer when the folder has none."""
    if not folder.is_dir():
        raise InputError(f"{folder}: no such folder; give --tokenizer-dir the model (or tokenizer) folder")
    if not (folder / "tokenizer.json").is_file():
        raise InputError(f"{folder}: has no tokenizer.json; give --tokenizer-dir the model's folder "
                         "(the trainer and this script need the fast tokenizer's tokenizer.json)")
    import transformers
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    except Exception as e:  # noqa: BLE001 - transformers raises many kinds
        raise InputError(f"{folder}: transformers cannot load the tokenizer: {type(e).__name__}: {e}") from None
    if not getattr(tokenizer, "is_fast", False):
        raise InputError(f"{folder}: transformers loaded a slow tokenizer ({type(tokenizer).__name__}); "
                         "this script needs a fast one (tokenizer.json) for character offsets")
    if (folder / "chat_template.jinja").is_file():
        source = "chat_template.jinja"
    elif "chat_template" in read_json_object(folder / "tokenizer_config.json"):
        source = "tokenizer_config.json"
    elif tokenizer.chat_template is not None:
        source = "additional_chat_templates/"
    else:
        source = DEFAULT_TEMPLATE_SOURCE
        tokenizer.chat_template = QWEN25_DEFAULT_TEMPLATE
    if tokenizer.chat_template is None:
        raise InputError(f"{folder}/{source}: transformers loaded no chat template from it")
    try:
        template = tokenizer.get_chat_template()
    except ValueError as e:
        raise InputError(f"{folder}: {e}") from None
    try:
        from transformers.utils.chat_template_utils import _compile_jinja_template
        _compile_jinja_template(template)
    except ImportError:
        pass
    except Exception as e:  # noqa: BLE001 - jinja2's TemplateSyntaxError and friends
        raise InputError(f"{folder}/{source}: the chat template does not compile: {e}; fix the template") from None
    return tokenizer, source, template


def read_json_object(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: is not readable JSON: {e}") from None
    return value if isinstance(value, dict) else {}


def cache_key(data_sha: str, tokenizer_files: dict, template_sha: str, options: dict) -> str:
    text = json.dumps({"format": FORMAT, "rule": RULE, "data": data_sha,
                       "tokenizer": {name: record["sha256"] for name, record in tokenizer_files.items()},
                       "template": template_sha, "options": options},
                      sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ----------------------------------------------------------------------------- encoding


class Encoder:
    """One conversation's ids and targets under the rule in the module docstring."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        import jinja2
        self._template_errors = (jinja2.TemplateError,)

    def render(self, messages: list[dict], generation_prompt: bool) -> str:
        try:
            text = self.tokenizer.apply_chat_template(messages, tokenize=False,
                                                      add_generation_prompt=generation_prompt)
        except self._template_errors as e:
            raise _LineBad("$.messages", f"the chat template refused the conversation: {e}", "template error") from None
        if not isinstance(text, str):
            raise BuildError(f"apply_chat_template(tokenize=False) returned {type(text).__name__}, not text")
        return text

    def chat_ids(self, messages: list[dict]) -> list[int]:
        try:
            out = self.tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=False)
        except self._template_errors as e:
            raise _LineBad("$.messages", f"the chat template refused the conversation: {e}", "template error") from None
        return plain_ids(out)

    def encode(self, messages: list[dict], where: str) -> tuple[list[int], bytearray]:
        text = self.render(messages, False)
        ids = self.chat_ids(messages)
        starts, ends = [], []
        for i, message in enumerate(messages):
            if message["role"] != "assistant":
                continue
            prompt = self.render(messages[:i], True)
            upto = self.render(messages[:i + 1], False)
            if not upto.startswith(prompt):
                raise InputError(
                    f"{where}: $.messages[{i}]: the chat template's rendering of the conversation up to this "
                    f"assistant message does not start with its rendering of the messages before it plus the "
                    f"generation prompt ({excerpt_difference(prompt, upto)}), so the assistant span cannot be "
                    f"located: the template does not render conversations turn by turn (rule {RULE}); use a "
                    "template that does (e.g. one that does not rewrite earlier turns)")
            if not text.startswith(upto):
                raise InputError(
                    f"{where}: $.messages[{i}]: the chat template renders the conversation up to this assistant "
                    f"message differently from the same turns within the whole conversation "
                    f"({excerpt_difference(upto, text)}), so the assistant span cannot be located (rule {RULE}); "
                    "use a template that renders earlier turns the same way whatever follows them")
            start, end = len(prompt), len(upto.rstrip())
            if end > start:
                starts.append(start)
                ends.append(end)
        encoding = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        if list(encoding["input_ids"]) != ids:
            raise BuildError(f"{where}: tokenising the rendered conversation gives other ids than "
                             "apply_chat_template (the rule assumes they are equal); report this with the line")
        targets = bytearray(len(ids))
        for t, (char_start, _) in enumerate(encoding["offset_mapping"]):
            k = bisect.bisect_right(starts, char_start) - 1
            if k >= 0 and char_start < ends[k]:
                targets[t] = 1
        if not any(targets):
            raise _LineBad("$.messages", "has no assistant text to train: every assistant span renders as nothing",
                           "nothing trained")
        return ids, targets


def plain_ids(out) -> list[int]:
    """The list of ids from what apply_chat_template(tokenize=True) returns: a list
    (transformers 4) or a BatchEncoding / dict (transformers 5)."""
    if hasattr(out, "keys") and "input_ids" in out.keys():
        out = out["input_ids"]
    if hasattr(out, "tolist"):
        out = out.tolist()
    if not isinstance(out, list) or (out and isinstance(out[0], list)):
        raise BuildError(f"apply_chat_template(tokenize=True) returned an unexpected {type(out).__name__}")
    return [int(i) for i in out]


def excerpt_difference(prefix: str, text: str) -> str:
    at = next((k for k, (a, b) in enumerate(zip(prefix, text)) if a != b), min(len(prefix), len(text)))
    return (f"they differ at character {at}: {prefix[max(0, at - 20):at + 20]!r} "
            f"vs {text[max(0, at - 20):at + 20]!r}")


# ----------------------------------------------------------------------------- workers

_WORKER_ENCODER: Encoder | None = None


def encode_item(item: tuple[str, object], encoder: Encoder | None = None) -> tuple:
    """Encodes one line's record, item = (where, record). Returns plain values that cross
    process boundaries: ("ok", ids as little-endian uint32 bytes, targets bytes),
    ("bad", json path, problem, reason), or ("input" | "build", message)."""
    where, record = item
    encoder = encoder or _WORKER_ENCODER
    try:
        ids, targets = encoder.encode(read_messages(record), where)
    except BadRecord as bad:
        return ("bad", bad.field, bad.problem, bad.reason)
    except InputError as e:
        return ("input", str(e))
    except BuildError as e:
        return ("build", str(e))
    except Exception as e:  # noqa: BLE001 - say which line, then stop
        return ("build", f"{where}: {type(e).__name__}: {e}")
    return ("ok", little_endian(array("I", ids)), bytes(targets))


def _init_worker(tokenizer_dir: str, default_template: bool) -> None:
    global _WORKER_ENCODER
    import transformers
    tokenizer = transformers.AutoTokenizer.from_pretrained(tokenizer_dir)
    if default_template:
        tokenizer.chat_template = QWEN25_DEFAULT_TEMPLATE
    _WORKER_ENCODER = Encoder(tokenizer)


def worker_count(requested: int, conversations: int) -> int:
    """--workers; 0 = one per CPU (at most 8), and none for small inputs."""
    if requested > 0:
        return requested
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_AUTO_WORKERS, conversations // MIN_CONVERSATIONS_PER_WORKER))


def worker_pool(workers: int, tokenizer_dir: Path, default_template: bool):
    """A process pool whose workers each load the tokenizer, or nullcontext(None) for
    workers = 1 (everything in this process). Results come back in input order."""
    if workers <= 1:
        return nullcontext(None)
    import multiprocessing
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    return context.Pool(workers, initializer=_init_worker, initargs=(str(tokenizer_dir), default_template))


# ----------------------------------------------------------------------------- writing


def fsync_dir(path: Path) -> None:
    with suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_json_file(path: Path, value: dict) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2, ensure_ascii=False)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())


def exchange(a: Path, b: Path) -> bool:
    """Swaps two paths atomically (Linux renameat2 RENAME_EXCHANGE); False when this
    system cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    error = ctypes.get_errno()
    if error in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(error, f"cannot swap {a} and {b}: {os.strerror(error)}")


def install(partial: Path, out: Path) -> None:
    """Puts the complete cache `partial` at `out`, replacing an existing one only now."""
    if not out.exists():
        os.rename(partial, out)
    elif exchange(partial, out):
        shutil.rmtree(partial)  # now the previous cache
    else:
        old = out.parent / f"{out.name}.old.{os.getpid()}"
        os.rename(out, old)
        try:
            os.rename(partial, out)
        except BaseException:
            os.rename(old, out)
            raise
        shutil.rmtree(old)
    fsync_dir(out.parent)


def remove_dead_leftovers(out: Path) -> None:
    """OUT.partial.<pid> / OUT.old.<pid> folders of processes that no longer run."""
    pattern = re.compile(re.escape(out.name) + r"\.(?:partial|old)\.(\d+)")
    if not out.parent.is_dir():
        return
    for path in out.parent.iterdir():
        match = pattern.fullmatch(path.name)
        if not match or not path.is_dir():
            continue
        pid = int(match.group(1))
        if pid != os.getpid() and process_alive(pid):
            continue
        shutil.rmtree(path, ignore_errors=True)


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class CacheWriter:
    """Appends conversations to the part files of a partial cache folder."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.files = {name: open(folder / name, "wb") for name in PARTS}
        self.total = 0
        self.count = 0
        self.trained = 0
        self.longest = 0
        self.files["offsets.i64"].write(little_endian(array("q", [0])))

    def add(self, ids: bytes, targets: bytes, line: int) -> None:
        """ids: the conversation's uint32 ids as little-endian bytes; targets: one byte each."""
        if len(ids) != 4 * len(targets):
            raise BuildError(f"line {line}: {len(ids) // 4} ids but {len(targets)} targets")
        self.files["tokens.u32"].write(ids)
        self.files["targets.u8"].write(targets)
        self.total += len(targets)
        self.count += 1
        self.trained += targets.count(1)
        self.longest = max(self.longest, len(targets))
        self.files["offsets.i64"].write(little_endian(array("q", [self.total])))
        self.files["lines.i64"].write(little_endian(array("q", [line])))

    def finish(self) -> None:
        for f in self.files.values():
            f.flush()
            os.fsync(f.fileno())
        self.close()

    def close(self) -> None:
        for f in self.files.values():
            f.close()


def little_endian(values: array) -> bytes:
    if sys.byteorder != "little":
        values = array(values.typecode, values)
        values.byteswap()
    return values.tobytes()


# ----------------------------------------------------------------------------- driver


class Progress:
    def __init__(self, total: int):
        self.total = total
        self.start = self.last = time.monotonic()

    def update(self, done: int) -> None:
        now = time.monotonic()
        if now - self.last < PROGRESS_SECONDS:
            return
        self.last = now
        rate = done / max(now - self.start, 1e-9)
        eta = (self.total - done) / rate if rate > 0 else 0.0
        print(f"{PROG}: {done}/{self.total} conversations ({rate:.0f}/s, ETA {format_seconds(eta)})",
              file=sys.stderr, flush=True)


def format_seconds(seconds: float) -> str:
    seconds = int(round(max(seconds, 0.0)))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{seconds:02d}s" if hours else f"{minutes}m{seconds:02d}s"


def existing_meta(out: Path) -> dict | None:
    """meta.json of the cache at `out`; None when there is nothing at `out` (or an empty
    folder); {} for a damaged cache; InputError when `out` is something else, which is
    never replaced."""
    if not out.exists():
        return None
    if not out.is_dir():
        raise InputError(f"{out}: is a file, not a cache folder; give --out a folder path (it is created)")
    meta_path = out / META
    if meta_path.is_file():
        with suppress(OSError, ValueError):
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            if isinstance(meta, dict) and meta.get("format") == FORMAT:
                return meta
    names = [path.name for path in out.iterdir()]
    if not names:
        return None
    if all(name in PARTS or name == META or name.startswith(f".{META}.") for name in names):
        return {}  # a damaged cache (meta.json unreadable or missing): rebuilt
    raise InputError(f"{out}: exists and is not a tokenised SFT cache (no meta.json of format {FORMAT}); "
                     "it is not replaced: remove it or give --out another folder")


def parts_match(out: Path, meta: dict) -> bool:
    """Whether the part files have the sizes meta.json's counts need."""
    try:
        count, total = int(meta["conversations"]), int(meta["tokens"])
        sizes = {"tokens.u32": 4 * total, "targets.u8": total, "offsets.i64": 8 * (count + 1),
                 "lines.i64": 8 * count}
        return all((out / name).stat().st_size == size for name, size in sizes.items())
    except (KeyError, TypeError, ValueError, OSError):
        return False


def rebuild_command(data: Path, tokenizer_dir: Path, out: Path, skip_bad: bool, limit: int | None) -> str:
    words = [sys.executable, str(Path(__file__).resolve()), "--data", str(data), "--tokenizer-dir",
             str(tokenizer_dir), "--out", str(out)]
    if skip_bad:
        words.append("--skip-bad")
    if limit is not None:
        words += ["--limit", str(limit)]
    return shlex.join(words)


def build(data: str | Path, tokenizer_dir: str | Path, out: str | Path, *, force: bool = False,
          skip_bad: bool = False, limit: int | None = None, workers: int = 0) -> str:
    """Builds (or confirms) the cache; returns the line to print. InputError / BuildError."""
    if limit is not None and limit < 1:
        raise InputError(f"--limit must be at least 1, got {limit}")
    if workers < 0:
        raise InputError(f"--workers must be 0 (automatic) or more, got {workers}")
    data = Path(os.path.abspath(data))
    tokenizer_dir = Path(os.path.abspath(tokenizer_dir))
    out = Path(os.path.abspath(out))
    if not data.is_file():
        raise InputError(f"{data}: no such file; give --data the SFT JSONL file")
    if out == data or out in data.parents or out == tokenizer_dir or out in tokenizer_dir.parents:
        raise InputError(f"{out}: --out would replace an input; give it a folder of its own")
    remove_dead_leftovers(out)
    previous = existing_meta(out)

    tokenizer_files = {name: file_record(tokenizer_dir / name) for name in TOKENIZER_FILES
                       if (tokenizer_dir / name).is_file()}
    tokenizer, template_source, template = load_tokenizer(tokenizer_dir)
    data_record = file_record(data)
    template_sha = hashlib.sha256(template.encode("utf-8")).hexdigest()
    options = {"limit": limit, "skip_bad": skip_bad}
    key = cache_key(data_record["sha256"], tokenizer_files, template_sha, options)
    command = rebuild_command(data, tokenizer_dir, out, skip_bad, limit)
    data_meta = {"path": str(data), **data_record}
    # The names looked for but not there: one that appears later (a chat_template.jinja
    # added to the folder) changes the rendering, so the reader refuses the cache then.
    absent = [name for name in TOKENIZER_FILES if name not in tokenizer_files]
    tokenizer_meta = {"dir": str(tokenizer_dir), "files": tokenizer_files, "absent": absent}

    if previous is not None and not force and previous.get("key") == key and parts_match(out, previous):
        refreshed = {**previous, "data": data_meta, "tokenizer": tokenizer_meta, "command": command}
        if refreshed == previous:
            return f"{PROG}: {out} is up to date ({previous['conversations']} conversations, key {key[:12]})"
        staging = out / f".{META}.{os.getpid()}.tmp"
        try:
            write_json_file(staging, refreshed)
            os.replace(staging, out / META)
        except BaseException:
            with suppress(FileNotFoundError):
                os.unlink(staging)
            raise
        fsync_dir(out)
        return (f"{PROG}: {out} is up to date ({previous['conversations']} conversations, key {key[:12]}); "
                "the inputs' contents are unchanged, so only meta.json's recorded paths/mtimes were refreshed")

    if template_source == DEFAULT_TEMPLATE_SOURCE:
        print(f"{PROG}: note: {tokenizer_dir} has no chat template; using Qwen2.5-Instruct's ChatML template "
              "(recorded in meta.json as template.source = \"qwen2.5-default\")", file=sys.stderr)
    expected = count_lines(data)
    if limit is not None:
        expected = min(expected, limit)
    started = time.monotonic()
    progress = Progress(expected)
    workers = worker_count(workers, expected)
    skipped: Counter = Counter()
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.parent / f"{out.name}.partial.{os.getpid()}"
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir()
    writer = None
    try:
        writer = CacheWriter(partial)
        done = 0
        rows = iter_jsonl_rows(data)
        with worker_pool(workers, tokenizer_dir, template_source == DEFAULT_TEMPLATE_SOURCE) as pool:
            encoder = None if pool is not None else Encoder(tokenizer)
            while limit is None or writer.count < limit:
                size = BATCH_PER_WORKER * workers
                batch = list(islice(rows, size if limit is None else min(size, limit - writer.count)))
                if not batch:
                    break
                items = [(row.where, row.record) for row in batch if row.error is None]
                if pool is not None:
                    results = iter(pool.map(encode_item, items, chunksize=max(1, len(items) // (4 * workers))))
                else:
                    results = (encode_item(item, encoder) for item in items)
                for row in batch:
                    done += 1
                    if row.error is not None:
                        result = ("bad", row.error.field, row.error.problem, row.error.reason)
                    else:
                        result = next(results)
                    if result[0] == "ok":
                        writer.add(result[1], result[2], int(row.position))
                    elif result[0] == "bad":
                        if not skip_bad:
                            raise InputError(bad_line_message(row.where, BadRecord(*result[1:])))
                        skipped[result[3]] += 1
                    elif result[0] == "input":
                        raise InputError(result[1])
                    else:
                        raise BuildError(result[1])
                progress.update(done)
        if writer.count == 0:
            raise InputError(f"{data}: no conversation was tokenised ({done} lines read"
                             + (f", skipped: {counts_text(skipped)}" if skipped else "") + ")")
        writer.finish()
        now = os.stat(data)
        if (now.st_size, now.st_mtime_ns) != (data_record["bytes"], data_record["mtime_ns"]):
            raise InputError(f"{data}: changed while it was tokenised; run again")
        meta = {
            "format": FORMAT, "conversations": writer.count, "tokens": writer.total, "vocab_size": len(tokenizer),
            "data": data_meta, "tokenizer": tokenizer_meta,
            "template": {"source": template_source, "sha256": template_sha},
            "rule": RULE, "options": options, "key": key,
        }
        if skip_bad:
            meta["skipped"] = dict(sorted(skipped.items()))
        meta.update({"command": command, "created_by": CREATED_BY, "versions": versions()})
        write_json_file(partial / META, meta)
        fsync_dir(partial)
        install(partial, out)
    except BaseException:
        if writer is not None:
            with suppress(Exception):
                writer.close()
        shutil.rmtree(partial, ignore_errors=True)
        raise
    elapsed = time.monotonic() - started
    line = (f"{PROG}: wrote {writer.count} conversations, {writer.total} tokens ({writer.trained} trained), "
            f"longest {writer.longest}, template from {template_source}, to {out} in {elapsed:.1f}s")
    if skipped:
        line += f"; skipped {sum(skipped.values())} ({counts_text(skipped)})"
    return line


def versions() -> dict:
    import tokenizers
    import transformers
    return {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
            "python": platform.python_version()}


# ----------------------------------------------------------------------------- command line


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tokenize_sft.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Render SFT conversations with a model folder's own chat template (as transformers' "
                    "apply_chat_template does), tokenise them and write the trainer's tokenised cache.",
        epilog="The rendering rule, the cache format and the rebuild policy are in the module docstring "
               "(scripts/data/tokenize_sft.py). Exit status: 0 built or up to date, 2 bad input, 1 other errors.")
    parser.add_argument("--data", required=True, metavar="F.jsonl", help="SFT JSONL, one {\"messages\": [...]} a line")
    parser.add_argument("--tokenizer-dir", required=True, metavar="DIR",
                        help="the model (or tokenizer) folder: tokenizer.json, tokenizer_config.json, "
                             "maybe chat_template.jinja")
    parser.add_argument("--out", required=True, metavar="CACHE_DIR", help="the cache folder to write")
    parser.add_argument("--force", action="store_true", help="rebuild even when the cache is up to date")
    parser.add_argument("--skip-bad", action="store_true",
                        help="skip lines that cannot be tokenised (counted by reason in meta.json) instead of stopping")
    parser.add_argument("--limit", type=positive_int, metavar="N", help="stop after N conversations")
    parser.add_argument("--workers", type=int, default=0, metavar="N",
                        help="processes that tokenise (default 0: one per CPU, at most 8, fewer for small inputs); "
                             "the cache is the same for any N")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        line = build(args.data, args.tokenizer_dir, args.out, force=args.force, skip_bad=args.skip_bad,
                     limit=args.limit, workers=args.workers)
    except InputError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    except BuildError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    print(line, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
