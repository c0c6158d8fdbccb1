"""`sparsebalance eval ruler --prepare-only` and `sparsebalance eval ruler-score` against
tests/python/ruler_reference.py, a Python rebuild of RULER's own generator and evaluation
scripts (NVIDIA/RULER c3f5e3b) written from RULER's code, not from the C++.

Why it is an independent oracle: the reference draws its random numbers from CPython's own
`random` module and numpy's legacy RandomState (the generators RULER's scripts use), counts
tokens with the `tokenizers` library on the same tokenizer.json, reads the wonderwords 2.2.0
word lists RULER reads, and writes JSON with Python's json module; the C++ re-implements the
Mersenne Twister streams, the sampling algorithms (randint, choice, choices, sample,
shuffle, getrandbits, numpy's bounded randint), the BPE tokenizer and the JSON writer. Equal
files, byte for byte, at two lengths and for all 13 tasks, mean the whole chain matches.

Inputs are made here: a tiny byte-level BPE tokenizer made like longbench_tiny_model.py's
(see make_ruler_tokenizer for why it is trained on more text), the tiny random model, an essay
of plain sentences made of longbench_tiny_model's English words (odd whitespace on purpose),
and small SQuAD v2 / HotpotQA files in their published layouts (non-ASCII text to exercise
ensure_ascii and surrogate pairs, an unanswerable question, duplicate answers, a paragraph
shared by two articles, an article with more paragraphs than a prompt holds).
"""

import json
import subprocess
from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers")
from tokenizers import Tokenizer  # noqa: E402

from longbench_oracle_client import BINARY  # noqa: E402
from longbench_tiny_model import ENGLISH, make_model, make_tokenizer, sentence  # noqa: E402

import ruler_reference as ref  # noqa: E402

# Every task fits at both lengths with this tokenizer (essay niah needs RULER's 500-word step
# plus the template and 128 generated tokens, vt its one-shot example, cwe its few-shot example
# and 10 x 6 list items); 1024 takes RULER's short-context settings (niah/vt step 5, cwe's
# 20-word few-shot example with 6/1 repeats), 4096 the others (niah step 25, vt step 10, cwe's
# 40-word example with 30/3 repeats). At 4096 the essay and hotpotqa documents repeat.
LENGTHS = (1024, 4096)
SAMPLES = 3
WORDS = [w for w in ENGLISH if w != "."]


def make_ruler_tokenizer(folder, words):
    """longbench_tiny_model.make_tokenizer's recipe (Qwen2 pre-tokenizer, byte-level BPE, ChatML
    tokens) with RULER's fixed texts and the wonderwords lists added to the training corpus and
    2000 tokens. With the 600-token tokenizer trained on the English list alone, RULER's noise
    sentence costs 76 tokens and the vt template 229, so vt's one-shot example, which RULER
    always builds at max_seq_length 500, cannot be made at all (RULER would retry forever), and
    cwe needs more than 5000 tokens at the smallest size."""
    fixed = [ref.full_template(f) for f in ref.FAMILIES] + [ref.NOISE, ref.NEEDLE, ref.DOCUMENT_PROMPT]
    lists = [" ".join(words.nouns[i::50] + words.adjs[i::50] + words.verbs[i::50]) for i in range(50)]
    return make_tokenizer(folder, extra_corpus=fixed * 20 + lists, vocab_size=2000)


def wonderwords_assets():
    ww = pytest.importorskip("wonderwords", reason="wonderwords (pinned: 2.2.0) is not installed: its word "
                                                   "lists are the RULER vocabulary")
    assets = Path(ww.__file__).resolve().parent / "assets"
    if not (assets / "nounlist.txt").is_file():
        pytest.skip(f"wonderwords has no {assets / 'nounlist.txt'}")
    return assets


def make_essay():
    """A few hundred lower-case words in sentences ending with . ! ?, with runs of spaces,
    tabs and newlines between some of them, a decimal number (no split inside '2.5') and a
    trailing newline (so the word list ends with an empty word)."""
    state = [11]
    parts = []
    for i in range(48):
        words = sentence(state, 5 + (state[0] >> 7) % 9, WORDS)
        if i == 7:
            words[2:2] = ["version", "2.5", "of"]
        parts.append(" ".join(words) + ".!?"[state[0] % 3])
        parts.append(["  ", "\n\n", " ", "\t", " "][i % 5])
    return "".join(parts).rstrip() + "\n"


def make_squad():
    """SQuAD v2.0 dev layout: data[article]{title, paragraphs[{context, qas[{question, id,
    answers[{text, answer_start}], is_impossible}]}]}."""
    state = [23]
    articles = []
    shared = None
    for a, size in enumerate([1, 40, 3, 4, 5, 6, 3, 4]):  # questions 0, 1 from article 0, 2 from article 1
        paragraphs = []
        for p in range(size):
            words = sentence(state, 14 + (state[0] >> 5) % 12, WORDS)
            if (a, p) == (1, 0):
                words.insert(3, "Z\u00fcrich")
            if (a, p) == (2, 1):
                words.insert(5, "caf\u00e9 \U0001F600 \u5317\u4eac")
            context = " ".join(words) + "."
            if (a, p) == (2, 1):
                shared = context
            if (a, p) == (3, 2):
                context = shared  # the same paragraph in two articles: one document
            qas = []
            answer = " ".join(words[4:6])
            qas.append({"question": f"what {' '.join(sentence(state, 4, WORDS))}?", "id": f"q{a}{p}0",
                        "answers": [{"text": answer, "answer_start": context.find(answer)}],
                        "is_impossible": False})
            if (a, p) == (0, 0):
                qas.append({"question": "who lived in the nineteenth century city?", "id": "q00i",
                            "answers": [], "plausible_answers": [{"text": words[0], "answer_start": 0}],
                            "is_impossible": True})
                qas.append({"question": "Which \u00e9tude reads \"a long document\"?", "id": "q001",
                            "answers": [{"text": words[1], "answer_start": 0}, {"text": words[1], "answer_start": 0},
                                        {"text": " ".join(words[1:3]), "answer_start": 0}],
                            "is_impossible": False})
            paragraphs.append({"qas": qas, "context": context})
        articles.append({"title": f"Article_{a}", "paragraphs": paragraphs})
    return {"version": "v2.0", "data": articles}


def make_hotpotqa():
    """hotpot_dev_distractor_v1 layout: [{_id, answer, question, supporting_facts, context:
    [[title, [sentences]] x 10], type, level}]; later sentences start with a space, as there."""
    state = [31]
    pool = []
    for t in range(31):
        sentences = [" ".join(sentence(state, 6 + (state[0] >> 6) % 6, WORDS)).capitalize() + "."]
        for _ in range(1 + t % 3):
            sentences.append(" " + " ".join(sentence(state, 5 + (state[0] >> 6) % 5, WORDS)) + ".")
        pool.append([f"Title {t} {WORDS[t % len(WORDS)]}", sentences])
    pool[5][1][0] = "Gr\u00fc\u00dfe from M\u00fcnchen."
    items = []
    for i in range(4):
        context = [pool[(i * 7 + j * 3) % len(pool)] for j in range(10)]  # 10 distinct
        answer = context[1][1][0].split()[1]
        items.append({"_id": f"h{i}", "answer": answer if i != 2 else "yes",
                      "question": f"Which {' '.join(sentence(state, 5, WORDS))}?",
                      "supporting_facts": [[context[1][0], 0], [context[4][0], 0]],
                      "context": context, "type": "bridge" if i % 2 else "comparison", "level": "hard"})
    return items


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    assets = wonderwords_assets()
    root = tmp_path_factory.mktemp("ruler")
    model = root / "model"
    words = ref.Words.from_dir(assets)
    tok = make_ruler_tokenizer(model, words)
    make_model(model, tok, max_position_embeddings=4096)
    fast = Tokenizer.from_file(str(model / "tokenizer.json"))

    def count(text):
        return len(fast.encode(text, add_special_tokens=False).ids)
    haystack = root / "essay.txt"
    haystack.write_text(make_essay(), encoding="utf-8")
    squad = root / "squad.json"
    squad.write_text(json.dumps(make_squad(), ensure_ascii=False), encoding="utf-8")
    hotpot = root / "hotpotqa.json"
    hotpot.write_text(json.dumps(make_hotpotqa(), ensure_ascii=False), encoding="utf-8")
    return {"root": root, "model": model, "count": count, "assets": assets, "haystack": haystack,
            "squad": squad, "hotpotqa": hotpot, "words": words}


def test_prepared_data_equals_rulers_generators(inputs, tmp_path):
    """Every <out>/<L>/data/<task>/validation.jsonl equals, line by line, the records of
    ruler_reference.generate_task (RULER's generators with the documented deviations): the
    parsed dicts are equal, and each raw line is exactly json.dumps(record) (key order,
    ', '/': ' separators, ensure_ascii escapes incl. surrogate pairs)."""
    out = tmp_path / "ruler"
    cmd = [str(BINARY), "eval", "ruler", "--model", str(inputs["model"]), "--out", str(out),
           "--lengths", ",".join(map(str, LENGTHS)), "--samples", str(SAMPLES), "--haystack", str(inputs["haystack"]),
           "--squad", str(inputs["squad"]), "--hotpotqa", str(inputs["hotpotqa"]), "--words-dir",
           str(inputs["assets"]), "--prepare-only"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    essay = inputs["haystack"].read_text(encoding="utf-8")
    for length in LENGTHS:
        for task in ref.TASK_ORDER:
            expected = ref.generate_task(task, length, SAMPLES, inputs["count"], inputs["words"], essay,
                                         str(inputs["squad"]), str(inputs["hotpotqa"]), seed=42)
            assert len(expected) == SAMPLES and all(r["length"] <= length for r in expected)
            path = out / str(length) / "data" / task / "validation.jsonl"
            text = path.read_text(encoding="utf-8")
            assert text.endswith("\n"), path
            lines = text.split("\n")[:-1]
            assert len(lines) == SAMPLES, path
            for i, (line, record) in enumerate(zip(lines, expected)):
                assert json.loads(line) == record, f"{task} L={length} sample {i}"
                assert line == json.dumps(record, ensure_ascii=True), f"{task} L={length} sample {i}: bytes"


def pred_line(index, pred, outputs):
    return {"index": index, "pred": pred, "input": f"prompt {index}", "outputs": outputs, "others": {},
            "truncation": -1, "length": 100 + index}


# Hand-written predictions: control characters inside and around, mixed case (ASCII and
# non-ASCII), empty, whitespace-only and Unicode-whitespace-only predictions (nulls: Python's
# str.strip also strips U+00A0, U+3000, U+0085, U+2028), partial multi-answer matches.
# niah_multivalue sums to 2.25 over 8 samples: 28.125, which round(x, 2) makes 28.12 (the
# binary value is exact, ties go to even); qa_1 is 4/7 -> 57.14.
PREDS = {
    "niah_multivalue": [
        pred_line(0, " 1234567, 7654321\n\n and 1111111", ["1234567", "7654321", "1111111", "2222222"]),
        pred_line(1, "\x00\x07", ["5555555"]),
        pred_line(2, "The numbers: 3333333\t4444444\x1f", ["3333333", "4444444", "9999999", "8888888"]),
        pred_line(3, "", ["1"]),
        pred_line(4, "   ", ["2"]),
        pred_line(5, "ALPHA-beta \x0b GAMMA", ["alpha-Beta", "gamma", "delta", "epsilon"]),
        pred_line(6, "Z\u00dcRICH\u00a0and 1000000", ["z\u00fcrich", "1000000", "x", "y"]),
        pred_line(7, "\u00a0\u3000\x85 ", ["z"]),
    ],
    "qa_1": [
        pred_line(0, " Paris\n", ["paris", "the city of Paris"]),
        pred_line(1, "LONDON bridge\x0cfalls", ["london BRIDGE falls", "London"]),
        pred_line(2, "\n", ["Rome"]),
        pred_line(3, "z\u00fcrich", ["Z\u00fcrich"]),
        pred_line(4, "no", ["yes", "maybe"]),
        pred_line(5, "a\x1b[0mb", ["a\nb", "zzz"]),
        pred_line(6, "\u2028x\u2029", ["X"]),
    ],
}


def write_preds(folder, tasks):
    folder.mkdir()
    for task in tasks:
        (folder / f"{task}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in PREDS[task]),
                                              encoding="utf-8")


@pytest.mark.parametrize("tasks", [["qa_1", "niah_multivalue"], ["qa_1"]])
def test_score_summary_equals_rulers_evaluate(tmp_path, tasks):
    """`eval ruler-score PRED_DIR` writes the summary RULER's evaluate.py writes for the
    folder (ruler_reference.evaluate_pred_dir: postprocess_pred, string_match_all for niah,
    string_match_part for qa, round(x, 2), pandas' to_csv with its integer header row, tasks in
    synthetic.yaml order): summary.csv for two tasks, summary-<task>.csv for one. The expected
    text comes from Python's re, str.lower, round and pandas, not from the C++."""
    pred = tmp_path / "pred"
    write_preds(pred, tasks)
    name, expected = ref.evaluate_pred_dir(str(pred))
    assert name == ("summary.csv" if len(tasks) > 1 else f"summary-{tasks[0]}.csv")
    assert expected == ref.summary_csv_text_plain(
        {t: ref.score_lines(t, PREDS[t]) for t in ref.TASK_ORDER if t in tasks})
    proc = subprocess.run([str(BINARY), "eval", "ruler-score", str(pred)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert (pred / name).read_text(encoding="utf-8") == expected


def test_reference_scores_by_hand():
    """The reference's scorer on the predictions above, worked out by hand (guards the oracle)."""
    assert ref.score_lines("niah_multivalue", PREDS["niah_multivalue"]) == (28.12, "4/8")
    assert ref.score_lines("qa_1", PREDS["qa_1"]) == (57.14, "1/7")
    assert ref.postprocess_pred(" a\x00b\tc \n") == "a\nb\nc"
    results = {"niah_single_1": (100.0, "0/500"), "qa_1": (66.67, "3/500"), "cwe": (0.0, "500/500")}
    assert ref.summary_csv_text(results) == ref.summary_csv_text_plain(results) == \
        "0,1,2,3\nTasks,niah_single_1,qa_1,cwe\nScore,100.0,66.67,0.0\nNulls,0/500,3/500,500/500\n"
