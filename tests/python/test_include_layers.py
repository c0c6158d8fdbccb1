"""scripts/check_include_layers.py on small trees: it passes a tree whose includes point
down, and fails (naming file, line and layers) on an upward include or an unplaced folder."""

import pathlib
import subprocess
import sys

CHECK = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "check_include_layers.py"


def write(root, relative, text):
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def run_check(root):
    return subprocess.run([sys.executable, str(CHECK), "--root", str(root)], capture_output=True, text=True)


def test_downward_includes_pass(tmp_path):
    write(tmp_path, "common/errors.h", "#pragma once\n")
    write(tmp_path, "harness/train/trainer.cpp", '#include "harness/balance/plan.h"\n#include "common/errors.h"\n')
    write(tmp_path, "harness/balance/plan.h", '#include "harness/latency/predictor.h"\n')
    write(tmp_path, "harness/parallel/pipeline/engine.cpp", '#include "harness/parallel/group.h"\n')
    result = run_check(tmp_path)
    assert result.returncode == 0, result.stdout


def test_upward_include_fails_naming_the_line(tmp_path):
    write(tmp_path, "harness/balance/plan.h", '#pragma once\n#include "harness/train/trainer.h"\n')
    write(tmp_path, "harness/parallel/pipeline/engine.cpp", '#include "harness/runner/folder.h"\n')
    result = run_check(tmp_path)
    assert result.returncode == 1
    assert "harness/balance/plan.h:2: harness/balance -> harness/train" in result.stdout
    assert "harness/parallel/pipeline/engine.cpp:1: harness/parallel -> harness/runner" in result.stdout


def test_folder_in_no_layer_fails(tmp_path):
    write(tmp_path, "harness/newthing/x.cpp", '#include "common/errors.h"\n')
    result = run_check(tmp_path)
    assert result.returncode == 2
    assert "harness/newthing: in no layer" in result.stdout
