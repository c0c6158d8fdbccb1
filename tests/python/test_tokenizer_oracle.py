"""The C++ tokenizer (`sparsebalance tokenize`) checked against the reference `tokenizers` package.

A byte-level BPE is trained here with Qwen2's configuration (NFC; Split(Qwen2's regex,
"isolated") + ByteLevel(add_prefix_space=False, use_regex=False); ByteLevel decoder;
special tokens <|endoftext|>, <|im_start|>, <|im_end|>) on a corpus generated in the test:
accents (some written decomposed, so that NFC has work), Hangul, CJK, emoji sequences,
digits, code, whitespace runs, newlines and special tokens. tokenizers saves the merges in
one form ("a b" strings or ["a", "b"] pairs); a copy with the other form is written too.
Then, on held-out texts, the CLI's ids must equal tok.encode(text).ids for both files;
decoding them must give back the text, NFC-normalized as tokenizers does (and what
tok.decode gives); decoding arbitrary id lists must equal
tok.decode(ids, skip_special_tokens=...).
Two more configurations get the same comparison: added tokens with lstrip/rstrip,
single_word and normalized=True on top of the Qwen2 one, and GPT-2's (a lone
ByteLevel(add_prefix_space=True, use_regex=True), no normalizer).
"""

import json
import os
import random
import subprocess
import unicodedata
from pathlib import Path

import pytest
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

REPO = Path(__file__).resolve().parents[2]
BUILD_DIR = Path(os.environ.get("SB_BUILD_DIR", REPO / "build"))
BINARY = Path(os.environ.get("SB_BINARY", BUILD_DIR / "sparsebalance"))

QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

WORDS = ["the", "model", "attention", "sparse", "balance", "pipeline", "token", "gradient", "batch",
         "It's", "we'll", "they're", "I'd", "you've", "DON'T", "She'S", "I'M", "O'Neil", "rock'n'roll",
         "café", "naïve", "résumé", "Zürich", "São", "Ångström", "façade", "jalapeño", "Dvořák",
         "Привет", "мир", "Ελλάδα", "שלום", "مرحبا", "नमस्ते", "ภาษาไทย",
         "我们", "学习", "机器学习", "模型", "注意力", "こんにちは", "世界", "カタカナ", "안녕하세요", "한국어"]
PUNCT = [".", ",", "!", "?", ";", ":", "...", "—", "–", "(", ")", "[", "]", "{", "}", "\"", "'", "«", "»",
         "。", "，", "！", "？", "、", "「", "」", "$", "%", "#", "@", "&", "*", "+", "=", "->", "=>", "::"]
EMOJI = ["👋", "👋🏽", "🎉", "👨‍👩‍👧", "🇫🇷", "❤️", "🤖", "✅", "🔥🔥"]
SPACES = [" ", "  ", "   ", "\t", "\n", "\n\n", "\n\n\n", "\r\n", " \n", "\n  ", "\u00a0", "\u3000",
          "\u2028", "\u0085", " \u180e", "\u2003"]
CODE = [
    "def f(x):\n    return x * 2\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n",
    "if __name__ == \"__main__\":\n    main()\n",
    "SELECT id, name FROM users WHERE age >= 21;\n",
    "    # indented comment\n        deeper()\n",
    "x=[1,2,3]; y={'k': 3.14159}\n",
]


def decomposed_sometimes(rng, text):
    """Half of the time in NFD, so that the NFC normalizer composes it back."""
    return unicodedata.normalize("NFD", text) if rng.random() < 0.5 else text


def random_line(rng):
    parts = []
    for _ in range(rng.randint(3, 25)):
        kind = rng.random()
        if kind < 0.45:
            parts.append(decomposed_sometimes(rng, rng.choice(WORDS)))
        elif kind < 0.6:
            parts.append(rng.choice(PUNCT))
        elif kind < 0.7:
            parts.append(str(rng.randint(0, 10 ** rng.randint(1, 7))))
        elif kind < 0.77:
            parts.append(rng.choice(EMOJI))
        elif kind < 0.82:
            parts.append(rng.choice(CODE))
        elif kind < 0.86:
            parts.append(rng.choice(SPECIAL_TOKENS))
        else:
            parts.append(rng.choice(SPACES))
        parts.append(rng.choice([" ", " ", " ", "", "\n"]))
    return "".join(parts)


def chatml(rng):
    return (f"<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\n{random_line(rng)}<|im_end|>\n"
            f"<|im_start|>assistant\n{random_line(rng)}<|im_end|>\n<|endoftext|>")


def corpus(seed, n):
    rng = random.Random(seed)
    return [chatml(rng) if i % 5 == 0 else random_line(rng) for i in range(n)]


HAND_WRITTEN = [
    "",
    "Hello world",
    "I'm don't WE'LL 'sound 'ſ 'ﬆ",
    "abc 12345 $100 3.14159 2024-01-01",
    "我是Qwen。你好 世界",
    "hi 👋🏽!! 👨‍👩‍👧 🇫🇷",
    "a\n\nb\r\nc  \n  d",
    "trailing spaces   ",
    "   leading spaces",
    "tabs\t\tand\u00a0nbsp\u3000ideographic",
    "a \u180eb a \u0085b \u2028 \u2029 \u202f\u205f",
    "cafe\u0301 vs caf\u00e9, \u1100\u1161\u11a8 (Hangul jamo)",
    # HF's NFC knows Unicode 9.0: it does not reorder marks assigned later (U+1DF9, U+0D3C)
    # nor compose U+11935 U+11930 (Unicode 13.0); but it reorders and composes older ones.
    "\u0301\u1df9 q\u0301\u0d3c \U00011935\U00011930 a\u0301\u0323 \u0301\U0001e94a",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>",
    "<|endoftext|><|endoftext|>x<|im_end",
    "rare: 龘 ꙮ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 \u0000\u0007\u007f\u00ad",
    "x = f(y)\n    return [i ** 2 for i in range(10)]\n\n\n",
    " ".join(["verylongword" * 20] * 3),
    "\n" * 7 + " " * 9 + "end",
]


def held_out_texts():
    rng = random.Random(99)
    return HAND_WRITTEN + [random_line(rng) for _ in range(60)] + [chatml(rng) for _ in range(10)]


def train(tok, vocab_size, texts):
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    return tok


def qwen2_style_tokenizer():
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return train(tok, 1500, corpus(1, 3000))


def gpt2_style_tokenizer():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    return train(tok, 800, corpus(2, 1500))


def run_cli(*args):
    assert BINARY.is_file(), f"{BINARY} not found: build the sparsebalance target (or set SB_BINARY)"
    return subprocess.run([str(BINARY), "tokenize", *map(str, args)], capture_output=True, timeout=120)


def cli_jsonl(tokenizer_json, objects, tmp_path, *flags):
    lines = tmp_path / "input.jsonl"
    lines.write_text("".join(json.dumps(o) + "\n" for o in objects), encoding="utf-8")
    proc = run_cli("--tokenizer", tokenizer_json, "--jsonl", lines, *flags)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    # Split on "\n" alone: str.splitlines() would also split at U+0085 and U+2028, which
    # JSON leaves unescaped inside strings.
    out = [json.loads(line) for line in proc.stdout.decode("utf-8").split("\n")[:-1]]
    assert len(out) == len(objects)
    return out


def run_json(*args):
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return json.loads(proc.stdout.decode("utf-8"))


def assert_same_ids(tok, tokenizer_json, texts, tmp_path):
    cli = cli_jsonl(tokenizer_json, [{"text": t} for t in texts], tmp_path)
    for text, got in zip(texts, cli):
        assert got["ids"] == tok.encode(text).ids, f"text {text!r}"
    return [c["ids"] for c in cli]


def with_other_merges_form(path, out_path):
    """The same tokenizer.json with merges as "a b" strings if they were pairs, or vice versa."""
    data = json.loads(path.read_text(encoding="utf-8"))
    merges = data["model"]["merges"]
    if isinstance(merges[0], list):
        data["model"]["merges"] = [f"{a} {b}" for a, b in merges]
    else:
        data["model"]["merges"] = [m.split(" ") for m in merges]
    out_path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return isinstance(merges[0], list)


@pytest.fixture(scope="module")
def qwen2_files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tok")
    tok = qwen2_style_tokenizer()
    saved = tmp / "tokenizer.json"
    tok.save(str(saved))
    other = tmp / "tokenizer_other_merges.json"
    saved_as_pairs = with_other_merges_form(saved, other)
    return tok, saved, other, saved_as_pairs


def test_encode_matches_reference_for_both_merge_forms(qwen2_files, tmp_path):
    tok, saved, other, saved_as_pairs = qwen2_files
    print(f"tokenizers {tok.get_vocab_size()} tokens; merges saved as {'pairs' if saved_as_pairs else 'strings'}")
    texts = held_out_texts()
    ids = assert_same_ids(tok, saved, texts, tmp_path)
    assert assert_same_ids(tok, other, texts, tmp_path) == ids
    # The corpus exercised the special tokens and multi-byte merges.
    assert any(2 in i for i in ids)
    assert sum(len(i) for i in ids) < sum(len(t.encode("utf-8")) for t in texts) / 2


def test_decode_of_encode_gives_the_normalized_text(qwen2_files, tmp_path):
    """decode(encode(x)) == x for text the normalizer leaves alone, else its NFC (as HF
    computes it: Unicode 9.0 data, see models/tokenizer/normalizer.h)."""
    tok, saved, _, _ = qwen2_files
    texts = held_out_texts()
    encoded = cli_jsonl(saved, [{"text": t} for t in texts], tmp_path)
    decoded = cli_jsonl(saved, [{"ids": e["ids"]} for e in encoded], tmp_path, "--decode")
    unchanged = 0
    for text, e, got in zip(texts, encoded, decoded):
        normalized = tok.normalizer.normalize_str(text)
        assert got["text"] == normalized, f"text {text!r}"
        assert got["text"] == tok.decode(e["ids"], skip_special_tokens=False)
        unchanged += normalized == text
    assert unchanged >= len(texts) // 3


def test_decode_of_arbitrary_ids_matches_reference(qwen2_files, tmp_path):
    tok, saved, _, _ = qwen2_files
    rng = random.Random(7)
    n = tok.get_vocab_size()
    # Byte-level spellings of the bytes 0xFF, 0xC3, 0xE2, 0x80 and 0xF0: lead and continuation
    # bytes that alone or in the wrong order are not UTF-8.
    single_bytes = [tok.token_to_id(c) for c in ("ÿ", "Ã", "â", "Ģ", "ð")]
    lists = [[i] for i in single_bytes] + [[rng.randrange(n) for _ in range(rng.randint(1, 30))] for _ in range(80)]
    lists += [[rng.choice(single_bytes) for _ in range(rng.randint(1, 6))] for _ in range(20)]
    for skip in (False, True):
        flags = ("--decode", "--skip-special") if skip else ("--decode",)
        got = cli_jsonl(saved, [{"ids": i} for i in lists], tmp_path, *flags)
        for ids, g in zip(lists, got):
            assert g["text"] == tok.decode(ids, skip_special_tokens=skip), f"ids {ids} skip={skip}"
    # The byte 0xFF alone is not UTF-8: one U+FFFD, as bytes.decode(errors="replace").
    assert run_json("--tokenizer", saved, "--decode", "--ids", str(tok.token_to_id("ÿ")))["text"] == "\ufffd"


def test_single_input_flags(qwen2_files, tmp_path):
    tok, saved, _, _ = qwen2_files
    text = "Hello <|im_start|>wörld\n\n  12 🎉"
    expected = tok.encode(text).ids
    assert run_json("--tokenizer", saved, f"--text={text}")["ids"] == expected
    text_file = tmp_path / "text.txt"
    text_file.write_bytes(text.encode("utf-8"))
    assert run_json("--tokenizer", saved, "--text-file", text_file)["ids"] == expected
    assert run_json("--tokenizer", saved, "--decode", "--ids", ",".join(map(str, expected)))["text"] == text
    ids_file = tmp_path / "ids.json"
    ids_file.write_text(json.dumps({"ids": expected}))
    assert run_json("--tokenizer", saved, "--decode", "--ids-file", ids_file)["text"] == text


def test_added_token_options_match_reference(qwen2_files, tmp_path):
    tok, saved, _, _ = qwen2_files
    flagged = Tokenizer.from_file(str(saved))
    flagged.add_tokens([
        AddedToken("<tool>", lstrip=True, rstrip=True, normalized=False),
        AddedToken("nai\u0308ve", single_word=True, normalized=True),  # content itself not NFC
        AddedToken("==>", normalized=True),
    ])
    path = tmp_path / "flagged.json"
    flagged.save(str(path))
    texts = held_out_texts()[:30] + [
        "call  <tool>\t args <tool>x<tool>",
        "a naïve b nai\u0308ve naïvety anaïve naïve.",
        "x ==> y ===> z",
    ]
    assert_same_ids(flagged, path, texts, tmp_path)


def file_variants(data):
    """Edits of a saved tokenizer.json that tokenizers accepts and the C++ reader supports."""
    ignore = json.loads(json.dumps(data))
    ignore["model"]["ignore_merges"] = True
    # Whole-piece tokens no merge sequence builds: with ignore_merges they are taken as is.
    next_id = max(max(ignore["model"]["vocab"].values()), max(t["id"] for t in ignore["added_tokens"])) + 1
    for i, piece in enumerate(["Ġzzzq", "model", "Ġ12"]):
        if piece not in ignore["model"]["vocab"]:
            ignore["model"]["vocab"][piece] = next_id + i
    literal_split = json.loads(json.dumps(data))
    literal_split["pre_tokenizer"]["pretokenizers"].insert(
        0, {"type": "Split", "pattern": {"String": "e("}, "behavior": "Isolated", "invert": True})
    sequence_normalizer = json.loads(json.dumps(data))
    sequence_normalizer["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFC"}]}
    no_normalizer = json.loads(json.dumps(data))
    no_normalizer["normalizer"] = None
    return {"ignore_merges": ignore, "literal_split": literal_split,
            "sequence_normalizer": sequence_normalizer, "no_normalizer": no_normalizer}


def test_file_variants_match_reference(qwen2_files, tmp_path):
    _, saved, _, _ = qwen2_files
    texts = held_out_texts() + ["zzzq zzzq model 12 f(e(x)) e( e(("]
    for name, data in file_variants(json.loads(saved.read_text(encoding="utf-8"))).items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        ids = assert_same_ids(Tokenizer.from_file(str(path)), path, texts, tmp_path)
        if name == "ignore_merges":
            assert data["model"]["vocab"]["Ġzzzq"] in ids[-1]


def test_gpt2_configuration_matches_reference(tmp_path):
    tok = gpt2_style_tokenizer()
    path = tmp_path / "gpt2.json"
    tok.save(str(path))
    assert_same_ids(tok, path, held_out_texts(), tmp_path)


def test_unusable_files_exit_2_naming_file_and_json_path(qwen2_files, tmp_path):
    _, saved, _, _ = qwen2_files
    missing = run_cli("--tokenizer", tmp_path / "nope.json", "--text", "x")
    assert missing.returncode == 2
    assert b"nope.json" in missing.stderr
    data = json.loads(saved.read_text(encoding="utf-8"))
    data["model"]["type"] = "Unigram"
    bad = tmp_path / "unigram.json"
    bad.write_text(json.dumps(data))
    proc = run_cli("--tokenizer", bad, "--text", "x")
    assert proc.returncode == 2
    assert b"unigram.json: $.model.type" in proc.stderr, proc.stderr
    proc = run_cli("--tokenizer", saved, "--decode", "--ids", "1,x")
    assert proc.returncode == 2
