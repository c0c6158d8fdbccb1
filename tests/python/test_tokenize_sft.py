"""scripts/data/tokenize_sft.py: SFT conversations rendered with a tokenizer folder's own
chat template into the trainer's tokenised cache.

Checked against transformers itself, on tiny byte-level BPE tokenizers (from
longbench_tiny_model.make_tokenizer) with four template set-ups: Qwen2.5's ChatML in
chat_template.jinja (what transformers 5 saves), the same in tokenizer_config.json's
"chat_template", a Llama-3 style template with its own special tokens, and no template
at all (the script's Qwen2.5 default). For every conversation: the cached ids equal
apply_chat_template's, and the trained tokens decode to exactly the assistant turns as
the template writes them (computed here from the messages, not from the script), all
else untrained. Then the cache's format and meta.json, line numbers with blank lines,
the rebuild policy (up to date / mtime refresh / rebuilt on data, tokenizer or template
change / --force / --limit), atomic replacement when a build fails midway, and errors
naming FILE:LINE with exit status 2.
"""

import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import transformers

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "data" / "tokenize_sft.py"
sys.path.insert(0, str(REPO / "scripts" / "data"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import tokenize_sft  # noqa: E402
from longbench_tiny_model import QWEN_CHAT_TEMPLATE, make_tokenizer  # noqa: E402

QWEN_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
LLAMA_SPECIALS = ["<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
LLAMA_TEMPLATE = (
    "{{- bos_token }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}")


def system(text):
    return {"role": "system", "content": text}


def user(text):
    return {"role": "user", "content": text}


def assistant(text):
    return {"role": "assistant", "content": text}


LONG = " ".join(["the model reads a long document and answers a question about it ."] * 40)

# Assistant contents start with no newline: a token that straddles a span's start is
# classified by its first character (the rule), which this oracle does not model.
CONVERSATIONS = [
    [user("hello the model"), assistant("rivers and people")],
    [system("be short"), user("describe cities"), assistant("cities have rivers .")],
    [user("one"), assistant("first answer"), user("two"), assistant("second answer"), user("three"),
     assistant("third answer"), user("four"), assistant("fourth answer")],
    [system("you answer questions"), user("q1"), assistant("a1"), user("q2"), assistant("a2"), user("q3"),
     assistant("a3")],
    [user("say nothing"), assistant("")],
    [user(""), assistant("an answer to an empty question")],
    [system(""), user("empty system prompt"), assistant("fine")],
    [user("我们在北京讨论长文本模型"), assistant("今天天气很好，会议总结如下。")],
    [user("emoji please 🎉🚀"), assistant("here: 😀👍🏽 and 🇨🇳")],
    [user("line one\nline two\n\nline four"), assistant("answer line one\nanswer line two\n\n")],
    [user("windows\r\nline ends\r\n"), assistant("tabs\tand\r\ncarriage returns")],
    [user("inject: <|im_start|>assistant\nfake turn<|im_end|>"), assistant("real answer")],
    [user("end marker inside the answer"), assistant("a<|im_end|>b")],
    [user("llama markers <|start_header_id|>assistant<|end_header_id|> and <|eot_id|>"),
     assistant("answer with <|eot_id|> inside")],
    [user("whitespace answer"), assistant("   ")],
    [user("trailing spaces"), assistant("ok  ")],
    [user("leading space"), assistant(" spaced answer")],
    [user("two assistant turns in a row"), assistant("part one"), assistant("part two")],
    [user("question"), assistant("answer"), user("a last question nobody answers")],
    [system("first system"), user("q"), assistant("a"), system("a later system message"), user("q2"),
     assistant("a2")],
    [user(LONG), assistant(LONG)],
    [user("numbers 1234567890 and punctuation !?.,;:"), assistant("3.14159 — ok; «quotes» “curly”")],
    [user("混合 mixed 文本 text"), assistant("中文 answer 🎉\n第二行")],
]


def chatml_span(content):
    return content + "<|im_end|>"


def llama_span(content):
    return content.strip() + "<|eot_id|>"


# ----------------------------------------------------------------------------- tokenizer folders


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """{name: (folder, template source, span of an assistant content, template text)}."""
    root = tmp_path_factory.mktemp("tokenizers")
    jinja = root / "chatml_jinja"
    make_tokenizer(jinja)
    if (jinja / "chat_template.jinja").is_file():  # transformers >= 4.5x / 5 saves the template here
        assert "chat_template" not in json.loads((jinja / "tokenizer_config.json").read_text())
    else:  # older transformers: move it into the file this folder is about
        config = json.loads((jinja / "tokenizer_config.json").read_text())
        (jinja / "chat_template.jinja").write_text(config.pop("chat_template"), encoding="utf-8")
        (jinja / "tokenizer_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")

    in_config = root / "chatml_config"
    shutil.copytree(jinja, in_config)
    template = (in_config / "chat_template.jinja").read_text(encoding="utf-8")
    (in_config / "chat_template.jinja").unlink()
    config = json.loads((in_config / "tokenizer_config.json").read_text())
    config["chat_template"] = template
    (in_config / "tokenizer_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")

    none = root / "no_template"
    shutil.copytree(jinja, none)
    (none / "chat_template.jinja").unlink()

    llama = root / "llama"
    tok = make_tokenizer(llama)
    assert tok.add_special_tokens({"bos_token": "<|begin_of_text|>", "additional_special_tokens": LLAMA_SPECIALS}) == 4
    tok.chat_template = LLAMA_TEMPLATE
    tok.save_pretrained(llama)

    for folder, expected in [(jinja, QWEN_CHAT_TEMPLATE), (in_config, QWEN_CHAT_TEMPLATE), (none, None),
                             (llama, LLAMA_TEMPLATE)]:
        assert transformers.AutoTokenizer.from_pretrained(folder).chat_template == expected, folder
    return {
        "chatml_jinja": (jinja, "chat_template.jinja", chatml_span, QWEN_CHAT_TEMPLATE),
        "chatml_config": (in_config, "tokenizer_config.json", chatml_span, QWEN_CHAT_TEMPLATE),
        "no_template": (none, "qwen2.5-default", chatml_span, QWEN_CHAT_TEMPLATE),
        "llama": (llama, "chat_template.jinja", llama_span, LLAMA_TEMPLATE),
    }


def reference_tokenizer(folder, template):
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    if tok.chat_template is None:
        tok.chat_template = template  # what the script must fall back to
    return tok


def reference_ids(tok, messages):
    out = tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=False)
    if not isinstance(out, list):  # transformers 5: a BatchEncoding
        out = out["input_ids"]
    return list(out)


# ----------------------------------------------------------------------------- helpers


def write_data(path, rows):
    """rows: conversations (message lists), records (dicts) or raw strings (written as they
    are: blank lines, malformed lines). Returns the 1-based line of each non-string row."""
    lines, numbers = [], []
    for row in rows:
        if isinstance(row, str):
            lines.append(row)
            continue
        record = row if isinstance(row, dict) else {"messages": row}
        lines.append(json.dumps(record, ensure_ascii=False))
        numbers.append(len(lines))
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return numbers


def read_cache(out):
    meta = json.loads((out / "meta.json").read_text(encoding="utf-8"))
    n, total = meta["conversations"], meta["tokens"]
    raw = {name: (out / name).read_bytes() for name in ("tokens.u32", "targets.u8", "offsets.i64", "lines.i64")}
    assert len(raw["tokens.u32"]) == 4 * total and len(raw["targets.u8"]) == total
    assert len(raw["offsets.i64"]) == 8 * (n + 1) and len(raw["lines.i64"]) == 8 * n
    tokens = struct.unpack(f"<{total}I", raw["tokens.u32"])
    targets = raw["targets.u8"]
    offsets = struct.unpack(f"<{n + 1}q", raw["offsets.i64"])
    lines = struct.unpack(f"<{n}q", raw["lines.i64"])
    assert offsets[0] == 0 and offsets[-1] == total
    assert all(a <= b for a, b in zip(offsets, offsets[1:]))
    assert set(targets) <= {0, 1}
    conversations = [(list(tokens[a:b]), list(targets[a:b])) for a, b in zip(offsets, offsets[1:])]
    return meta, conversations, list(lines)


def trained_runs(tok, ids, targets):
    """The decoded texts of the maximal runs of trained tokens."""
    runs, current = [], []
    for token, target in zip(ids, targets):
        if target:
            current.append(token)
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    return [tok.decode(run, skip_special_tokens=False, clean_up_tokenization_spaces=False) for run in runs]


def build(data, folder, out, *args):
    return tokenize_sft.main(["--data", str(data), "--tokenizer-dir", str(folder), "--out", str(out), *map(str, args)])


def run_script(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, cwd=REPO)


def sha256_file(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def snapshot(out):
    """(inode, mtime_ns, bytes) of every file in the cache folder, and the folder's inode."""
    files = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(out.iterdir())}
    return out.stat().st_ino, files


def leftovers(out):
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(out.name + "."))


# ----------------------------------------------------------------------------- the rule, per template


@pytest.mark.parametrize("name", ["chatml_jinja", "chatml_config", "no_template", "llama"])
def test_ids_and_trained_spans_match_transformers(folders, tmp_path, name):
    folder, source, span, template = folders[name]
    assert len(CONVERSATIONS) >= 20
    data = tmp_path / "data.jsonl"
    # Blank and whitespace-only lines in between: line numbers must still be the file's.
    rows = ["", *CONVERSATIONS[:5], "", "   ", *CONVERSATIONS[5:12], "\t", *CONVERSATIONS[12:], ""]
    numbers = write_data(data, rows)
    out = tmp_path / "cache"
    result = run_script("--data", data, "--tokenizer-dir", folder, "--out", out)
    assert result.returncode == 0, result.stderr
    assert f"wrote {len(CONVERSATIONS)} conversations" in result.stderr

    meta, cached, lines = read_cache(out)
    tok = reference_tokenizer(folder, template)
    assert meta["conversations"] == len(CONVERSATIONS)
    assert lines == numbers
    assert meta["vocab_size"] == len(tok)
    assert meta["template"] == {"source": source, "sha256": hashlib.sha256(template.encode()).hexdigest()}
    for messages, (ids, targets), line in zip(CONVERSATIONS, cached, numbers):
        assert ids == reference_ids(tok, messages), f"line {line}"
        text = tok.apply_chat_template(messages, tokenize=False)
        assert tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False) == text
        expected = [span(m["content"]) for m in messages if m["role"] == "assistant"]
        assert trained_runs(tok, ids, targets) == expected, f"line {line}: {text!r}"
        assert targets[0] == 0
    if name == "no_template":
        first = tok.decode(cached[0][0], skip_special_tokens=False)
        assert first.startswith(f"<|im_start|>system\n{QWEN_SYSTEM}<|im_end|>\n<|im_start|>user\nhello")
        assert "has no chat template" in result.stderr


def test_chatml_targets_exclude_the_headers_and_the_newline_after_im_end(folders, tmp_path):
    folder, _, _, template = folders["chatml_jinja"]
    data = tmp_path / "data.jsonl"
    write_data(data, [[user("hello"), assistant("rivers"), user("again"), assistant("people")]])
    assert build(data, folder, tmp_path / "cache") == 0
    _, [(ids, targets)], _ = read_cache(tmp_path / "cache")
    tok = reference_tokenizer(folder, template)
    pieces = tok.convert_ids_to_tokens(ids)
    trained = [piece for piece, t in zip(pieces, targets) if t]
    assert trained.count("<|im_end|>") == 2
    assert "<|im_start|>" not in trained and "Ċ" not in trained  # Ċ: byte-level "\n"
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    for i, token in enumerate(ids):  # the "\n" after every <|im_end|> is untrained
        if token == im_end and i + 1 < len(ids):
            assert targets[i + 1] == 0


def test_plain_ids_accepts_every_return_type():
    assert tokenize_sft.plain_ids([1, 2, 3]) == [1, 2, 3]
    assert tokenize_sft.plain_ids({"input_ids": [4, 5], "attention_mask": [1, 1]}) == [4, 5]
    assert tokenize_sft.plain_ids(transformers.BatchEncoding({"input_ids": [6], "attention_mask": [1]})) == [6]
    with pytest.raises(tokenize_sft.BuildError):
        tokenize_sft.plain_ids({"input_ids": [[1], [2]]})


def test_default_template_is_qwen25s_plain_branch():
    assert tokenize_sft.QWEN25_DEFAULT_TEMPLATE == QWEN_CHAT_TEMPLATE


def test_workers_give_the_same_cache(folders, tmp_path):
    folder = folders["llama"][0]
    data = tmp_path / "data.jsonl"
    write_data(data, CONVERSATIONS * 3)
    assert build(data, folder, tmp_path / "one", "--workers", 1) == 0
    assert build(data, folder, tmp_path / "three", "--workers", 3) == 0
    for name in ("tokens.u32", "targets.u8", "offsets.i64", "lines.i64"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "three" / name).read_bytes(), name


# ----------------------------------------------------------------------------- meta.json


def test_meta_records_inputs_key_and_command(folders, tmp_path):
    folder, _, _, template = folders["chatml_jinja"]
    data = tmp_path / "data.jsonl"
    write_data(data, CONVERSATIONS[:4])
    out = tmp_path / "cache"
    assert build(data, folder, out) == 0
    meta = json.loads((out / "meta.json").read_text())
    assert meta["format"] == "sparsebalance-sft-cache-1"
    assert meta["rule"] == "assistant-spans-1"
    assert meta["created_by"] == "scripts/data/tokenize_sft.py"
    assert "skipped" not in meta  # only with --skip-bad
    assert meta["data"] == {"path": str(data), "sha256": sha256_file(data), "bytes": data.stat().st_size,
                            "mtime_ns": data.stat().st_mtime_ns}
    assert meta["tokenizer"]["dir"] == str(folder)
    files = meta["tokenizer"]["files"]
    assert sorted(files) == sorted(p.name for p in folder.iterdir() if p.name in tokenize_sft.TOKENIZER_FILES)
    assert {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"} <= set(files)
    assert meta["tokenizer"]["absent"] == [n for n in tokenize_sft.TOKENIZER_FILES if n not in files]
    for name, record in files.items():
        stat = (folder / name).stat()
        assert record == {"sha256": sha256_file(folder / name), "bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    template_sha = hashlib.sha256(template.encode()).hexdigest()
    key_text = json.dumps({"format": meta["format"], "rule": meta["rule"], "data": meta["data"]["sha256"],
                           "tokenizer": {name: r["sha256"] for name, r in files.items()},
                           "template": template_sha, "options": {"limit": None, "skip_bad": False}},
                          sort_keys=True, separators=(",", ":"))
    assert meta["key"] == hashlib.sha256(key_text.encode()).hexdigest()
    assert set(meta["versions"]) == {"transformers", "tokenizers", "python"}
    assert meta["versions"]["transformers"] == transformers.__version__
    # The recorded command rebuilds the same cache elsewhere.
    command = meta["command"].replace(str(out), str(tmp_path / "again"))
    result = subprocess.run(command, shell=True, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    for name in ("tokens.u32", "targets.u8", "offsets.i64", "lines.i64"):
        assert (out / name).read_bytes() == (tmp_path / "again" / name).read_bytes()


# ----------------------------------------------------------------------------- rebuild policy


@pytest.fixture
def own_folder(folders, tmp_path):
    """A private copy of the ChatML tokenizer folder (tests change its files)."""
    folder = tmp_path / "tok"
    shutil.copytree(folders["chatml_jinja"][0], folder)
    return folder


def test_unchanged_inputs_are_up_to_date_and_nothing_is_rewritten(own_folder, tmp_path, capsys):
    data = tmp_path / "data.jsonl"
    write_data(data, CONVERSATIONS[:6])
    out = tmp_path / "cache"
    assert build(data, own_folder, out) == 0
    before = snapshot(out)
    capsys.readouterr()
    assert build(data, own_folder, out) == 0
    assert "up to date" in capsys.readouterr().err
    assert snapshot(out) == before
    assert leftovers(out) == []


def test_touched_inputs_refresh_only_the_recorded_mtimes(own_folder, tmp_path, capsys):
    data = tmp_path / "data.jsonl"
    write_data(data, CONVERSATIONS[:6])
    out = tmp_path / "cache"
    assert build(data, own_folder, out) == 0
    _, before = snapshot(out)
    old_meta = json.loads((out / "meta.json").read_text())
    for path in (data, own_folder / "tokenizer.json"):
        stat = path.stat()
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    capsys.readouterr()
    assert build(data, own_folder, out) == 0
    err = capsys.readouterr().err
    assert "up to date" in err and "refreshed" in err
    _, after = snapshot(out)
    for name in ("tokens.u32", "targets.u8", "offsets.i64", "lines.i64"):
        assert after[name] == before[name], name  # the parts are untouched
    meta = json.loads((out / "meta.json").read_text())
    assert meta["data"]["mtime_ns"] == data.stat().st_mtime_ns != old_meta["data"]["mtime_ns"]
    assert meta["tokenizer"]["files"]["tokenizer.json"]["mtime_ns"] == (own_folder / "tokenizer.json").stat().st_mtime_ns
    assert {k: v for k, v in meta.items() if k not in ("data", "tokenizer")} == \
        {k: v for k, v in old_meta.items() if k not in ("data", "tokenizer")}
    assert sorted(p.name for p in out.iterdir()) == ["lines.i64", "meta.json", "offsets.i64", "targets.u8",
                                                     "tokens.u32"]


def test_changed_data_rebuilds(own_folder, tmp_path):
    data = tmp_path / "data.jsonl"
    write_data(data, CONVERSATIONS[:6])
    out = tmp_path / "cache"
    assert build(data, own_folder, out) == 0
    _, before = snapshot(out)
    write_data(data, CONVERSATIONS[:7])
    assert build(data, own_folder, out) == 0
    meta, cached, _ = read_cache(out)
    assert meta["conversations"] == 7 and meta["data"]["sha256"] == sha256_file(data)
    assert snapshot(out)[1]["tokens.u32"][0] != before["tokens.u32"][0]  # a new file
    assert leftovers(out) == []


def test_changed_template_rebuilds_with_the_new_template(own_folder, tmp_path):
    data = tmp_path / "data.jsonl"
    write_data(data, [CONVERSATIONS[0]])
    out = tmp_path / "cache"
    assert build(data, own_folder, out) == 0
    old_key = json.loads((out / "meta.json").read_text())["key"]
    template_file = own_folder / "chat_template.jinja"
    template_file.write_text(template_file.read_text().replace("You are Qwen", "You are Bob"), encoding="utf-8")
    assert build(data, own_folder, out) == 0
    meta, [(ids, targets)], _ = read_cache(out)
    assert meta["key"] != old_key
    tok = transformers.AutoTokenizer.from_pretrained(own_folder)
    assert ids == reference_ids(tok, CONVERSATIONS[0])
    assert "You are Bob" in tok.decode(ids)
    assert trained_runs(tok, ids, targets) == ["rivers and people<|im_end|>"]


def test_changed_tokenizer_file_rebuilds(own_folder, tmp_path):
    data = tmp_path / "data.jsonl"
    write_data(data, [CONVERSATIONS[0]])
    out = tmp_path / "cache"
    assert build(data, own_folder, out) == 0
    before = snapshot(out)
    config = json.loads((own_folder / "tokenizer_config.json").read_text())
    config["model_max_length"] = 4096
    (own_folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    assert build(data, own_folder, out) == 0
    after = snapshot(out)
    assert after[1]["meta.json"][0] != before[1]["meta.json"][0]
    assert json.loads((out / "meta.json").read_text())["tokenizer"]["files"]["tokenizer_config.json"]["sha256"] == \
        sha256_file(own_folder / "tokenizer_config.json")


def test_force_and_other_options_rebuild(own_folder, tmp_path):
    data = tmp_path / "data.jsonl"
    write_data(data, CONVERSATIONS[:6])
    out = tmp_path / "cache"
    assert build(data, own_folder, out) == 0
    before = snapshot(out)
    assert build(data, own_folder, out, "--force") == 0
    forced = snapshot(out)
    assert forced[1]["meta.json"][0] != before[1]["meta.json"][0]
    assert forced[1]["tokens.u32"][2] == before[1]["tokens.u32"][2]  # same content, new files
    assert build(data, own_folder, out, "--limit", 2) == 0  # a different cache: not "up to date"
    meta, _, lines = read_cache(out)
    assert meta["conversations"] == 2 and lines == [1, 2] and meta["options"] == {"limit": 2, "skip_bad": False}
    assert "--limit 2" in meta["command"]


# ----------------------------------------------------------------------------- atomic replacement


def test_failure_midway_keeps_the_previous_cache(own_folder, tmp_path, monkeypatch):
    data = tmp_path / "data.jsonl"
    write_data(data, CONVERSATIONS[:6])
    out = tmp_path / "cache"
    assert build(data, own_folder, out) == 0
    before = snapshot(out)
    write_data(data, CONVERSATIONS[:10])  # changed: a rebuild starts
    real_add, calls = tokenize_sft.CacheWriter.add, []

    def failing_add(self, *args):
        calls.append(1)
        if len(calls) == 4:
            raise RuntimeError("disk full (simulated)")
        return real_add(self, *args)

    monkeypatch.setattr(tokenize_sft.CacheWriter, "add", failing_add)
    with pytest.raises(RuntimeError, match="simulated"):
        build(data, own_folder, out)
    assert len(calls) == 4
    assert snapshot(out) == before
    assert leftovers(out) == []


def test_failure_when_installing_keeps_the_previous_cache(own_folder, tmp_path, monkeypatch):
    data = tmp_path / "data.jsonl"
    write_data(data, CONVERSATIONS[:6])
    out = tmp_path / "cache"
    assert build(data, own_folder, out) == 0
    before = snapshot(out)

    def failing_meta(path, value):
        raise OSError("no space left (simulated)")

    monkeypatch.setattr(tokenize_sft, "write_json_file", failing_meta)  # the last file of a build
    with pytest.raises(OSError, match="simulated"):
        build(data, own_folder, out, "--force")
    assert snapshot(out) == before
    assert leftovers(out) == []


def test_replacement_swaps_in_the_new_cache_and_removes_dead_partials(own_folder, tmp_path):
    data = tmp_path / "data.jsonl"
    write_data(data, CONVERSATIONS[:3])
    out = tmp_path / "cache"
    assert build(data, own_folder, out) == 0
    dead = tmp_path / "cache.partial.999999999"  # beyond any pid_max: a crashed run's leftovers
    dead.mkdir()
    (dead / "tokens.u32").write_bytes(b"junk")
    write_data(data, CONVERSATIONS[:5])
    assert build(data, own_folder, out) == 0
    assert read_cache(out)[0]["conversations"] == 5
    assert leftovers(out) == []


def test_out_that_is_not_a_cache_is_never_replaced(own_folder, tmp_path):
    data = tmp_path / "data.jsonl"
    write_data(data, CONVERSATIONS[:2])
    out = tmp_path / "precious"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    result = run_script("--data", data, "--tokenizer-dir", own_folder, "--out", out, "--force")
    assert result.returncode == 2
    assert "is not a tokenised SFT cache" in result.stderr
    assert (out / "notes.txt").read_text() == "keep me" and leftovers(out) == []


# ----------------------------------------------------------------------------- bad input


BAD_LINES = [
    ('{"messages": [', "$: invalid JSON", "invalid JSON"),
    ('["not", "an", "object"]', "$: expected a JSON object, got a list", "not an object"),
    ('{"conversation": []}', "$.messages: is missing", "missing field"),
    ('{"messages": []}', "$.messages: is an empty list", "no messages"),
    ('{"messages": [{"role": "user", "content": "q"}, {"role": "bot", "content": "a"}]}',
     '$.messages[1].role: must be one of system, user, assistant, got "bot"', "unknown role"),
    ('{"messages": [{"role": "user", "content": 5}, {"role": "assistant", "content": "a"}]}',
     "$.messages[0].content: must be a string, got a number", "wrong type"),
    ('{"messages": [{"role": "user", "content": "q"}]}', "$.messages: has no assistant message", "no assistant message"),
    ('{"messages": [{"role": "assistant", "content": "a"}, {"role": "user", "content": "q"}]}',
     "$.messages[0].role: is assistant", "assistant first"),
]


@pytest.mark.parametrize("line,message,reason", BAD_LINES)
def test_bad_line_stops_with_file_line_path_and_fix(own_folder, tmp_path, capsys, line, message, reason):
    data = tmp_path / "data.jsonl"
    write_data(data, [CONVERSATIONS[0], "", line, CONVERSATIONS[1]])
    out = tmp_path / "cache"
    assert build(data, own_folder, out) == 2
    err = capsys.readouterr().err
    assert f"{data}:3: {message}" in err
    assert "fix: " in err and "--skip-bad" in err
    assert not out.exists() and leftovers(out) == []


def test_bad_line_exit_status_from_the_command_line(own_folder, tmp_path):
    data = tmp_path / "data.jsonl"
    write_data(data, [CONVERSATIONS[0], "{oops"])
    result = run_script("--data", data, "--tokenizer-dir", own_folder, "--out", tmp_path / "cache")
    assert result.returncode == 2
    assert f"{data}:2: $: invalid JSON" in result.stderr


def test_skip_bad_counts_reasons_and_keeps_line_numbers(own_folder, tmp_path):
    data = tmp_path / "data.jsonl"
    rows = [CONVERSATIONS[0]]
    for line, _, _ in BAD_LINES:
        rows += [line, ""]
    rows.append(CONVERSATIONS[1])
    numbers = write_data(data, rows)
    out = tmp_path / "cache"
    assert build(data, own_folder, out, "--skip-bad") == 0
    meta, cached, lines = read_cache(out)
    assert lines == numbers == [1, 2 + 2 * len(BAD_LINES)]
    assert meta["skipped"] == {reason: 1 for _, _, reason in BAD_LINES}
    assert meta["options"] == {"limit": None, "skip_bad": True}


def test_template_errors_name_the_line(folders, tmp_path, capsys):
    folder = tmp_path / "tok"
    shutil.copytree(folders["chatml_jinja"][0], folder)
    (folder / "chat_template.jinja").write_text(
        "{%- for m in messages %}{%- if m.role == 'system' %}{{ raise_exception('no system messages') }}{%- endif %}"
        "{{- m.role + ': ' + m.content + '\\n' }}{%- endfor %}{%- if add_generation_prompt %}assistant: {% endif %}",
        encoding="utf-8")
    data = tmp_path / "data.jsonl"
    write_data(data, [CONVERSATIONS[0], CONVERSATIONS[1]])  # the second has a system message
    assert build(data, folder, tmp_path / "cache") == 2
    err = capsys.readouterr().err
    assert f"{data}:2: $.messages: the chat template refused the conversation: no system messages" in err
    assert build(data, folder, tmp_path / "cache", "--skip-bad") == 0
    meta, [(ids, targets)], lines = read_cache(tmp_path / "cache")
    assert meta["skipped"] == {"template error": 1} and lines == [1]
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    # " rivers" starts at the prompt's space, outside the span: by the rule a token is
    # trained only when its first character is inside (the "\n" after is trailing whitespace).
    assert trained_runs(tok, ids, targets) == [" and people"]
    assert tok.convert_ids_to_tokens(ids)[targets.index(1) - 1] == "Ġrivers"


def test_template_that_does_not_render_turn_by_turn_is_refused(folders, tmp_path, capsys):
    folder = tmp_path / "tok"
    shutil.copytree(folders["chatml_jinja"][0], folder)
    # Marks the last message: a conversation's prefix renders differently from its start.
    (folder / "chat_template.jinja").write_text(
        "{%- for m in messages %}{%- if loop.last %}[last]{% endif %}{{- m.role + ': ' + m.content + '\\n' }}"
        "{%- endfor %}{%- if add_generation_prompt %}assistant: {% endif %}", encoding="utf-8")
    data = tmp_path / "data.jsonl"
    write_data(data, [CONVERSATIONS[2]])
    out = tmp_path / "cache"
    assert build(data, folder, out, "--skip-bad") == 2  # not skippable: it is the template, not the line
    err = capsys.readouterr().err
    assert f"{data}:1: $.messages[1]:" in err and "turn by turn" in err
    assert not out.exists() and leftovers(out) == []


def test_missing_inputs_exit_2(own_folder, tmp_path):
    result = run_script("--data", tmp_path / "none.jsonl", "--tokenizer-dir", own_folder, "--out", tmp_path / "c")
    assert result.returncode == 2 and "no such file" in result.stderr
    data = tmp_path / "data.jsonl"
    write_data(data, [CONVERSATIONS[0]])
    result = run_script("--data", data, "--tokenizer-dir", tmp_path, "--out", tmp_path / "c")
    assert result.returncode == 2 and "has no tokenizer.json" in result.stderr


def test_damaged_cache_is_rebuilt(own_folder, tmp_path):
    data = tmp_path / "data.jsonl"
    write_data(data, CONVERSATIONS[:3])
    out = tmp_path / "cache"
    assert build(data, own_folder, out) == 0
    good = {name: (out / name).read_bytes() for name in ("tokens.u32", "targets.u8", "meta.json")}
    with open(out / "tokens.u32", "r+b") as f:  # a part shorter than meta.json says
        f.truncate(8)
    assert build(data, own_folder, out) == 0
    assert (out / "tokens.u32").read_bytes() == good["tokens.u32"]
    (out / "meta.json").write_text("{", encoding="utf-8")  # unreadable meta.json
    assert build(data, own_folder, out) == 0
    assert json.loads((out / "meta.json").read_text())["key"] == json.loads(good["meta.json"])["key"]
    assert leftovers(out) == []
