"""scripts/plot_results.py on a small results folder (report_fixture.py): every figure
is written as a non-empty PNG and PDF, the timeline's bars are the recorded events,
the default timeline iteration is the median one of the first non-baseline run, a
missing matplotlib is a clear message, and `sparsebalance report --plots` draws them."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "plot_results.py"
BINARY = Path(os.environ.get("SB_BINARY", str(REPO / "build" / "sparsebalance")))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import report_fixture  # noqa: E402

FIGURES = ["speedup", "timeline", "ablation_sab_dst", "loss", "latency_prediction", "budgets", "coverage", "heldout_position"]


@pytest.fixture()
def results(tmp_path):
    return report_fixture.write_results(tmp_path)


@pytest.fixture()
def plot_modules():
    pytest.importorskip("matplotlib", reason="matplotlib is not installed (scripts/lib.sh sb_setup_venv)")
    sys.path.insert(0, str(REPO / "scripts" / "plots"))
    import timeline
    import sb_plotting
    return sb_plotting, timeline


def test_every_figure_is_written_as_png_and_pdf(results, plot_modules):
    proc = subprocess.run([sys.executable, str(SCRIPT), str(results)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in FIGURES:
        for suffix in (".png", ".pdf"):
            path = results / "plots" / (name + suffix)
            assert path.exists() and path.stat().st_size > 1000, path
            assert f"drew {name.split('_sab_dst')[0]}: {path}" in proc.stdout
    assert "8 figure(s) drawn" in proc.stdout


def test_timeline_bars_are_the_events(results, plot_modules):
    sbp, timeline = plot_modules
    entry = report_fixture._timeline(3, 0.5)
    fig, ax = sbp.figure(width=sbp.DOUBLE_COLUMN)
    drawn = timeline.draw(ax, entry)
    expected = []
    ranks = sorted(entry["ranks"], key=lambda r: (r["dp_rank"], r["stage"]))
    for row, rank in enumerate(ranks):
        for kind, mb, start, end in rank["events"]:
            expected.append((row, start - 1000.0, end - start, kind, mb))
    assert drawn == expected
    # The rectangles matplotlib holds are the same bars: row centre, left edge, width.
    rects = [(round(p.get_y() + p.get_height() / 2), p.get_x(), p.get_width()) for p in ax.patches]
    assert rects == [(row, left, width) for row, left, width, _, _ in expected]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["dp0 stage0", "dp0 stage1", "dp1 stage0", "dp1 stage1"]
    sbp.plt.close(fig)


def test_default_timeline_is_the_median_iteration_of_the_first_non_baseline_run(results, plot_modules):
    _, timeline = plot_modules
    run = timeline.pick_run(results, None)
    assert run.name == "sab_dst__anchor=max__p=0.1__seed=1"
    # measured iter_ms 410, 400, 430, 395 (x a scale): the lower median is 400, iteration 2
    assert timeline.pick_iteration(run, None)["iteration"] == 2
    assert timeline.pick_iteration(run, 4)["iteration"] == 4
    with pytest.raises(SystemExit, match="no iteration 9"):
        timeline.pick_iteration(run, 9)


def test_missing_matplotlib_is_a_clear_message(results):
    code = ("import runpy, sys; sys.modules['matplotlib'] = None; "
            f"sys.argv = ['plot_results.py', {str(results)!r}]; "
            f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "matplotlib is not installed" in proc.stderr
    assert "SB_PLOT_PYTHON" in proc.stderr


def test_report_plots_from_the_cli(results, plot_modules):
    if not BINARY.exists():
        pytest.skip(f"{BINARY} is not built (scripts/sparsebalance builds it)")
    (results / "report.json").unlink()
    env = dict(os.environ, SB_PLOT_PYTHON=sys.executable)
    proc = subprocess.run([str(BINARY), "report", str(results), "--plots", "--iteration", "3"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((results / "report.json").read_text())
    assert [t["method"] for t in report["ablation"]] == ["sab_dst"]
    assert report["ablation"][0]["values"]["speedup"][0][0] == pytest.approx(1.3)
    for name in FIGURES:
        assert (results / "plots" / (name + ".png")).stat().st_size > 1000, name
    assert "drew timeline:" in proc.stdout
