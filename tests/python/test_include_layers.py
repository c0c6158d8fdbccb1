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


def test_kernel_sub_layers_point_down(tmp_path):
    # The block-sparse core may not include the ring, nor the ring a pattern.
    write(tmp_path, "kernels/attention/core/layout.h", '#include "kernels/attention/ring/ring.h"\n')
    write(tmp_path, "kernels/attention/ring/ring.cpp", '#include "kernels/attention/patterns/moba/moba.h"\n')
    write(tmp_path, "kernels/attention/patterns/moba/moba.h", '#include "kernels/attention/ring/ring.h"\n')
    result = run_check(tmp_path)
    assert result.returncode == 1
    assert "kernels/attention/core/layout.h:1: kernels/attention/core -> kernels/attention/ring" in result.stdout
    assert "kernels/attention/ring/ring.cpp:1: kernels/attention/ring -> kernels/attention/patterns" in result.stdout
    assert "kernels/attention/patterns/moba/moba.h:1" not in result.stdout


def test_a_pattern_includes_no_other_and_generic_code_none(tmp_path):
    write(tmp_path, "kernels/attention/patterns/moba/moba.cpp",
          '#include "kernels/attention/patterns/vertical_slash/index.h"\n')
    write(tmp_path, "harness/patterns/moba/plugin.cpp", '#include "kernels/attention/patterns/moba/moba.h"\n')
    write(tmp_path, "harness/train/trainer.cpp", '#include "kernels/attention/patterns/moba/moba.h"\n')
    write(tmp_path, "harness/patterns/attention_patterns.cpp", '#include "harness/patterns/moba/plugin.h"\n')
    result = run_check(tmp_path)
    assert result.returncode == 1
    assert "kernels/attention/patterns/moba/moba.cpp:1: pattern moba includes pattern vertical_slash" in result.stdout
    assert "harness/train/trainer.cpp:1: includes pattern moba's folder" in result.stdout
    # A pattern's harness side includes its own kernel side; the registry lists them all.
    assert "harness/patterns/moba/plugin.cpp" not in result.stdout
    assert "attention_patterns.cpp" not in result.stdout


def test_a_switch_on_the_pattern_outside_its_folders_fails(tmp_path):
    write(tmp_path, "harness/sim/run.cpp", 'if (attention.name() == "moba") {}\n// == "moba" in a comment\n')
    write(tmp_path, "harness/config/spec.cpp", 'auto* m = dynamic_cast<const MobaPattern*>(&p);\n')
    write(tmp_path, "harness/patterns/moba/fit.cpp", 'if (name == "moba") {}\n')
    result = run_check(tmp_path)
    assert result.returncode == 1
    assert "harness/sim/run.cpp:1: switches on the attention pattern" in result.stdout
    assert "harness/sim/run.cpp:2" not in result.stdout
    assert "harness/config/spec.cpp:1: switches on the attention pattern" in result.stdout
    assert "harness/patterns/moba/fit.cpp" not in result.stdout
