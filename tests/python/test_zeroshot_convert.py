"""scripts/data/convert_zeroshot.py: a parquet file in the hub's layout (ARC's nested
choices column) and a JSON-lines file become <task>.jsonl with the same rows, column
order and values; an existing output is kept unless --force; a bad line is named."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "data" / "convert_zeroshot.py"
ROWS = [{"id": "Mercury_1", "question": "Which is hot?", "choices": {"text": ["sun", "ice"], "label": ["A", "B"]},
         "answerKey": "A"},
        {"id": "Mercury_2", "question": "Ünïcode?", "choices": {"text": ["a", "b", "c"], "label": ["1", "2", "3"]},
         "answerKey": "3"}]


def convert(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=120)


def read(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_parquet_rows_are_written_unchanged(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq
    source = tmp_path / "test-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist(ROWS), source)
    proc = convert("arc_easy", source, tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "out" / "arc_easy.jsonl"
    assert read(out) == ROWS
    assert [list(r) for r in read(out)] == [list(r) for r in ROWS]  # column order kept
    assert "2 rows" in proc.stderr and "test split of allenai/ai2_arc ARC-Easy" in proc.stderr

    kept = convert("arc_easy", source, tmp_path / "out")
    assert kept.returncode == 2 and "--force" in kept.stderr
    assert convert("arc_easy", source, tmp_path / "out", "--force").returncode == 0
    assert not list((tmp_path / "out").glob("*.tmp"))


def test_jsonl_input_and_bad_lines(tmp_path):
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ROWS) + "\n", encoding="utf-8")
    assert convert("openbookqa", source, tmp_path / "out").returncode == 0
    assert read(tmp_path / "out" / "openbookqa.jsonl") == ROWS
    source.write_text('{"id": 1}\n{oops\n', encoding="utf-8")
    bad = convert("piqa", source, tmp_path / "bad")
    assert bad.returncode != 0 and "rows.jsonl:2" in bad.stderr
    assert not (tmp_path / "bad" / "piqa.jsonl").exists()
