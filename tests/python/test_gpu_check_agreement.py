"""scripts/gpu_check_agreement.py (gpu-check.sh's multi-rank verdict) on made-up records:
runs within the tolerances agree, a run past them or a missing one fails, and the
iteration-0 tolerance is bf16 rounding (1e-2) only where TP or CP sums bf16 partials."""

import json
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "gpu_check_agreement.py"


def write_records(root, layout, method, losses, grad_norms):
    folder = root / layout / "m" / method
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"loss": loss, "grad_norm": norm}) for loss, norm in zip(losses, grad_norms)]
    (folder / "records.jsonl").write_text("\n".join(lines) + "\n")


def verdict(root, layouts, methods="a"):
    return subprocess.run([sys.executable, str(SCRIPT), str(root), "m", "single", layouts, methods],
                          capture_output=True, text=True)


def test_runs_within_the_tolerances_agree(tmp_path):
    write_records(tmp_path, "single", "a", [5.0, 4.0, 3.0], [2.0, 2.0, 2.0])
    write_records(tmp_path, "dp2", "a", [5.0 * (1 + 5e-5), 4.0 * (1 + 9e-3), 3.0], [2.0, 2.0 * (1 - 9e-3), 2.0])
    write_records(tmp_path, "cp2", "a", [5.0 * (1 + 9e-3), 4.0, 3.0], [2.0 * (1 + 9e-3), 2.0, 2.0])
    result = verdict(tmp_path, "dp2,cp2")
    assert result.returncode == 0, result.stdout
    assert result.stdout.count("| agrees |") == 2
    assert "every layout agrees with the single run" in result.stdout


def test_iteration_zero_past_rounding_differs_without_tp_or_cp(tmp_path):
    write_records(tmp_path, "single", "a", [5.0, 4.0], [2.0, 2.0])
    write_records(tmp_path, "dp2", "a", [5.0 * (1 + 1e-3), 4.0], [2.0, 2.0])
    write_records(tmp_path, "tp2", "a", [5.0 * (1 + 1e-3), 4.0], [2.0, 2.0])
    result = verdict(tmp_path, "dp2,tp2")
    assert result.returncode == 1
    assert "| a | dp2 | 2 | 1.0e-03 |" in result.stdout and "DIFFERS" in result.stdout
    assert "| a | tp2 |" in result.stdout and result.stdout.count("| agrees |") == 1


def test_a_later_iteration_past_one_percent_differs(tmp_path):
    write_records(tmp_path, "single", "a", [5.0, 4.0, 3.0], [2.0, 2.0, 2.0])
    write_records(tmp_path, "cp2", "a", [5.0, 4.0, 3.0], [2.0, 2.0, 2.0 * 1.02])
    result = verdict(tmp_path, "cp2")
    assert result.returncode == 1
    assert "2.0e-02 | DIFFERS |" in result.stdout
    assert result.stdout.rstrip().endswith("m: FAILED")


def test_missing_or_short_records_fail(tmp_path):
    write_records(tmp_path, "single", "a", [5.0, 4.0], [2.0, 2.0])
    write_records(tmp_path, "single", "b", [5.0, 4.0], [2.0, 2.0])
    write_records(tmp_path, "cp2", "b", [5.0], [2.0])
    result = verdict(tmp_path, "cp2", "a,b")
    assert result.returncode == 1
    assert result.stdout.count("missing records") == 2
