"""Batch calls into build/tests/sb_longbench_oracle (tests/support/longbench_oracle_main.cpp):
the C++ LongBench pieces, one JSON request per line, so that tests compare thousands of
cases with the upstream Python packages in one process start."""

import json
import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("SB_BUILD_DIR", REPO / "build"))
ORACLE = BUILD / "tests" / "sb_longbench_oracle"
BINARY = Path(os.environ.get("SB_BINARY", BUILD / "sparsebalance"))


def cpp(requests):
    """Answers of the C++ side, in order; an answer with "error" is returned as is."""
    assert ORACLE.is_file(), f"{ORACLE} not found: build the sb_longbench_oracle target"
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in requests)
    proc = subprocess.run([str(ORACLE)], input=text.encode("utf-8"), capture_output=True, timeout=900)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    # Split on "\n" only: str.splitlines() would also split at U+2028 inside strings.
    lines = proc.stdout.decode("utf-8").split("\n")[:-1]
    assert len(lines) == len(requests)
    return [json.loads(line) for line in lines]


def cpp_values(requests, key):
    answers = cpp(requests)
    for request, answer in zip(requests, answers):
        assert "error" not in answer, f"{request!r}: {answer['error']}"
    return [a[key] for a in answers]
