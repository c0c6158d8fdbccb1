"""`sparsebalance eval score` on fixture prediction folders (tests/data/longbench/predictions,
v1 and LongBench-E) against longbench_reference.py run as a script, as upstream's eval.py
is run: result.json must hold the same tasks with the same values (repr-equal floats, NaN
for an empty -E bin), and be the same text json.dump(indent=4) writes.
"""

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from longbench_oracle_client import BINARY, REPO

FIXTURES = REPO / "tests" / "data" / "longbench" / "predictions"
REFERENCE = Path(__file__).resolve().parent / "longbench_reference.py"


def run_cli(*args):
    return subprocess.run([str(BINARY), "eval", "score", *map(str, args)], capture_output=True, text=True,
                          timeout=600)


def reference_result(folder, tmp_path, longbench_e):
    out = tmp_path / "reference_result.json"
    args = [sys.executable, str(REFERENCE), str(folder), str(out)] + (["--e"] if longbench_e else [])
    proc = subprocess.run(args, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return json.loads(out.read_text(encoding="utf-8"))


def same_value(a, b):
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return type(a) is type(b) and repr(a) == repr(b)


@pytest.mark.parametrize("variant", ["v1", "e"])
def test_fixture_folder_scores_like_upstream(variant, tmp_path):
    folder = tmp_path / variant
    shutil.copytree(FIXTURES / variant, folder)
    longbench_e = variant == "e"
    proc = run_cli(folder, *(["--e"] if longbench_e else []))
    assert proc.returncode == 0, proc.stderr
    text = (folder / "result.json").read_text(encoding="utf-8")
    ours = json.loads(text)
    expected = reference_result(folder, tmp_path, longbench_e)
    assert sorted(ours) == sorted(expected)
    for task in expected:
        assert same_value(ours[task], expected[task]), f"{task}: ours {ours[task]!r}, upstream {expected[task]!r}"
    # Byte for byte what json.dump(scores, f, ensure_ascii=False, indent=4) writes.
    assert text == json.dumps({k: expected[k] for k in ours}, ensure_ascii=False, indent=4)
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    if longbench_e:
        assert math.isnan(ours["trec"]["8k+"])  # the fixture leaves that bin empty on purpose
        assert set(summary) == {"0-4k", "4-8k", "8k+"} and "chinese" not in summary["0-4k"]
    else:
        check_summary(ours, summary)


def check_summary(scores, summary):
    """Category means recomputed from result.json with the definitions of docs/longbench.md."""
    categories = {
        "single_doc_qa": (["narrativeqa", "qasper", "multifieldqa_en"], ["multifieldqa_zh"]),
        "multi_doc_qa": (["hotpotqa", "2wikimqa", "musique"], ["dureader"]),
        "summarization": (["gov_report", "qmsum", "multi_news"], ["vcsum"]),
        "few_shot": (["trec", "triviaqa", "samsum"], ["lsht"]),
        "synthetic": (["passage_count", "passage_retrieval_en"], ["passage_retrieval_zh"]),
        "code": (["lcc", "repobench-p"], ["lcc", "repobench-p"]),
    }

    def mean(values):
        return sum(values) / len(values)

    english = {c: mean([scores[t] for t in en]) for c, (en, _) in categories.items()}
    chinese = {c: mean([scores[t] for t in zh]) for c, (_, zh) in categories.items()}
    overall = {c: mean([scores[t] for t in dict.fromkeys(en + zh)]) for c, (en, zh) in categories.items()}
    for name, table in (("english", english), ("chinese", chinese), ("overall", overall)):
        assert summary[name] == pytest.approx({**table, "average": mean(list(table.values()))}, abs=1e-12)


def test_rouge_recursion_limit_is_where_upstream_fails(tmp_path):
    """The rouge package recurses once per LCS traceback step; under eval.py's call depth
    a reference "a" against "a b b ... b" of w words needs w + 1 calls: rouge fails from
    w = 991 on, rouge_zh (one frame deeper) from w = 990 on. Both sides must agree."""
    def pair(first, words):
        return {"pred": " ".join([first] + ["b"] * (words - 1)), "answers": [first], "all_classes": None,
                "length": 100}

    cases = {"a": [("gov_report", 989), ("qmsum", 990), ("multi_news", 991), ("samsum", 992),
                   ("dureader", 989), ("vcsum", 990)],
             "b": [("gov_report", 1500), ("dureader", 988), ("vcsum", 991)]}
    for name, tasks in cases.items():
        folder = tmp_path / name
        folder.mkdir()
        for task, words in tasks:
            first = "我" if task in ("dureader", "vcsum") else "a"
            (folder / f"{task}.jsonl").write_text(json.dumps(pair(first, words), ensure_ascii=False) + "\n",
                                                  encoding="utf-8")
        proc = run_cli(folder)
        assert proc.returncode == 0, proc.stderr
        ours = json.loads((folder / "result.json").read_text())
        expected = reference_result(folder, tmp_path, False)
        assert ours == expected
        for task, words in tasks:
            limit = 990 if task in ("dureader", "vcsum") else 991
            assert (ours[task] > 0) == (words + 1 <= limit), (task, words, ours[task])


def test_bad_folders_are_clear_errors(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = run_cli(empty)
    assert proc.returncode == 2 and "no <task>.jsonl" in proc.stderr

    unknown = tmp_path / "unknown"
    unknown.mkdir()
    (unknown / "not_a_task.jsonl").write_text('{"pred": "", "answers": [""], "all_classes": null}\n')
    proc = run_cli(unknown)
    assert proc.returncode == 2 and "not_a_task" in proc.stderr and "not a LongBench task" in proc.stderr

    truncated = tmp_path / "truncated"
    truncated.mkdir()
    (truncated / "hotpotqa.jsonl").write_text('{"pred": "x", "answers": ["x"], "all_classes": null}\n{"pred": "y", "ans')
    proc = run_cli(truncated)
    assert proc.returncode == 2 and "hotpotqa.jsonl:2" in proc.stderr

    no_length = tmp_path / "no_length"
    no_length.mkdir()
    (no_length / "hotpotqa.jsonl").write_text('{"pred": "x", "answers": ["x"], "all_classes": null}\n')
    proc = run_cli(no_length, "--e")
    assert proc.returncode == 2 and "$.length" in proc.stderr

    missing_jieba = tmp_path / "zh"
    missing_jieba.mkdir()
    (missing_jieba / "dureader.jsonl").write_text('{"pred": "北京", "answers": ["北京"], "all_classes": null}\n')
    proc = run_cli(missing_jieba, "--jieba-dir", tmp_path)
    assert proc.returncode == 2 and "--jieba-dir" in proc.stderr and "jieba" in proc.stderr


def test_integer_answers_score_as_python_str(tmp_path):
    """count_score compares str(ground_truth): an answer written as 12 counts as "12"."""
    folder = tmp_path / "ints"
    folder.mkdir()
    lines = [{"pred": p, "answers": [12], "all_classes": None, "length": 10} for p in ("12", "12 and 13", "none")]
    (folder / "passage_count.jsonl").write_text("".join(json.dumps(l) + "\n" for l in lines))
    proc = run_cli(folder)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((folder / "result.json").read_text()) == reference_result(folder, tmp_path, False) == {
        "passage_count": 50.0}


@pytest.mark.parametrize("sub", ["score", "score-v2", "longbench", "longbench-v2", "niah", "ppl", "suite", "nll"])
def test_every_eval_subcommand_has_help_and_rejects_missing_flags(sub):
    proc = subprocess.run([str(BINARY), "eval", sub, "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "Usage:" in proc.stdout
    assert subprocess.run([str(BINARY), "eval", sub], capture_output=True, text=True).returncode == 2
