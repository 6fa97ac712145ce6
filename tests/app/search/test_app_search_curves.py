"""Strategy curves: a real `bench strategies` result (blur, small, the model objective) in the
Search dock's dialog for the open pipeline and as the README's PNG pictures."""

from __future__ import annotations

import json

import pytest
from PySide6.QtGui import QImage

from app.search.curves import CurvesError, curves_of, load_result, write_pngs
from engine.bench.strategies import bench_strategies


@pytest.fixture(scope="module")
def result_file(tmp_path_factory):
    res = bench_strategies(
        pipelines=["blur"], strategies=["random", "evolution"], size="small", seeds=2, evals=20, measurements=0, model="analytic",
        verify_model=False,
    )  # fmt: skip
    path = tmp_path_factory.mktemp("curves") / "strategies.json"
    path.write_text(json.dumps(res))
    return path


def test_the_search_dock_shows_the_open_pipelines_curves(open_window, result_file):
    w = open_window("blur")
    dialog = w.search_panel.open_curves(str(result_file))
    assert dialog is not None and dialog.isVisible()
    chart = dialog.chart
    assert set(chart.curves) == {"random", "evolution"}
    assert "random" in chart.legend.text() and "evolution" in chart.legend.text()
    assert dialog.objective.count() == 1 and dialog.axis.currentData() == "evaluations"  # model runs only
    table = chart.data_table()
    assert table.header[:3] == ["strategy", "x", "median_ms"]
    meds = [r[2] for r in table.rows if r[0] == "random"]
    assert meds and all(b <= a for a, b in zip(meds, meds[1:]))  # best so far never gets worse
    dialog.close()


def test_curves_render_to_png_and_bad_files_are_one_error(tmp_path, result_file):
    result = load_result(result_file)
    paths = write_pngs(result, tmp_path / "png")
    assert [p.name for p in paths] == ["strategies_model_evaluations.png"]
    img = QImage(str(paths[0]))
    assert img.width() > 400 and img.height() > 300
    bad = tmp_path / "other.json"
    bad.write_text(json.dumps({"rows": []}))
    with pytest.raises(CurvesError, match="other.json: not a `bench strategies` result"):
        load_result(bad)
    with pytest.raises(CurvesError, match="no hardware runs of 'blur'"):
        curves_of(result, "blur", "hardware", "measurements")
