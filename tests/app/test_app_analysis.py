"""What a performance engineer expects (issue 20 item 9): every chart exports PNG / SVG and its
plotted data as CSV; the measurement history exports as CSV; two variants compared side by
side (per-stage diff, times and their ratio, loop nests); a search candidate previewed before
Apply without touching the document; after Apply its measured per-stage bars; all stages of a
big pipeline in a scrolling chart."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app import chart_export
from app.compare_view import CompareDialog
from app.history_export import HISTORY_COLUMNS, history_table
from app.main_window import MainWindow
from app.model.document import Document
from app.perf_charts import StageBars
from app.synthetic import synthetic_model
from engine import api
from engine.database import Database
from engine.loopnest import build as build_loopnest
from engine.measure import Measurement, Runner
from engine.schedule import S, Schedule, default_schedule
from engine.search import Trial

MEASURE_TIMEOUT_MS = 90_000


def _measured(w: MainWindow, sched: Schedule, ms: float, stages: dict[str, float]) -> Measurement:
    p = w.doc.pipeline
    return Measurement(
        p.name, p.content_hash(), sched.content_hash(), True, verified=True, median_ms=ms, min_ms=ms * 0.9, iqr_ms=0.1,
        stages=stages, threads=2, host="test host", target="x86-64-linux", runs=9,
    )  # fmt: skip


def _parallel_y(w: MainWindow) -> Schedule:
    sched = w.doc.schedule.copy()
    S(sched, "blur_y").compute_root().parallel("y")
    return sched


def _read_csv(path: Path) -> list[list[str]]:
    with path.open(newline="") as fh:
        return list(csv.reader(fh))


def test_every_chart_exports_png_svg_and_its_plotted_data_as_csv(open_window, tmp_path: Path) -> None:
    w: MainWindow = open_window("blur")
    h = w.history
    h.attach(_measured(w, w.doc.schedule, 3.0, {"blur_x": 2.0, "blur_y": 1.0}))
    bars, plot, search = w.performance.stage_bars, w.performance.history_plot, w.search_panel.plot
    # The per-stage chart: one row per plotted stage, the ms labels and the bar widths (%).
    path = tmp_path / "bars.csv"
    chart_export.export(path, bars.item, bars.data_table(), bars.legend_html())
    rows = _read_csv(path)
    assert rows[0] == [
        "stage",
        "predicted (analytic estimate) ms",
        "predicted (analytic estimate) % of run time",
        "measured ms",
        "measured % of run time",
    ]
    assert [r[0] for r in rows[1:]] == bars.plotted == ["blur_x", "blur_y"]
    assert [float(r[3]) for r in rows[1:]] == [bars.shown["measured"]["blur_x"], bars.shown["measured"]["blur_y"]] == [2.0, 1.0]
    assert [round(float(r[4]), 6) for r in rows[1:]] == [66.666667, 33.333333]
    assert [float(r[1]) for r in rows[1:]] == [bars.shown["predicted (analytic estimate)"][s] for s in ("blur_x", "blur_y")]
    # The history chart: its plotted points, variant by variant.
    chart_export.export(path, plot.item, plot.data_table())
    rows = _read_csv(path)
    assert rows[0] == ["variant", "label", "predicted_ms", "measured_ms"]
    assert [(int(r[0]), float(r[3])) for r in rows[1:] if r[0]] == plot.points["measured"] == [(1, 3.0)]
    assert rows[-1] == ["", "default (baseline)", "", "3.0"]  # the dashed line: this is the default schedule
    # The search chart, with one trial and a baseline line.
    search.add_trial(Trial(0, _parallel_y(w), 0.5, 0.75, True), 0.75, 0.5)
    search.set_baseline("current schedule", 3.0)
    chart_export.export(path, search.item, search.data_table())
    assert _read_csv(path)[1:] == [["1", "0.75", "0.5", "0.75", "", ""], ["", "", "", "", "current schedule", "3.0"]]
    # Pictures: real PNG and SVG files, with something in them.
    for chart in (bars, plot):
        for fmt, magic in (("png", b"\x89PNG"), ("svg", b"<svg")):
            out = tmp_path / f"{chart.export_name}.{fmt}"
            chart_export.export(out, chart.item, chart.data_table(), chart.legend_html())
            data = out.read_bytes()
            assert len(data) > 2000 and magic in data[:400], (chart.export_name, fmt)
    # Offered on right-click, on every chart; a bad suffix is refused by name.
    for chart in (bars, plot, search):
        assert chart.plot.contextMenuPolicy() == Qt.ContextMenuPolicy.CustomContextMenu  # right-click opens it
        names = [a.objectName() for a in chart.export.menu().actions()]
        assert {"export_png", "export_svg", "export_csv"} <= set(names), names
    assert "export_history" in [a.objectName() for a in plot.export.menu().actions()]
    with pytest.raises(ValueError, match=r"bars\.txt: unknown export format '\.txt'"):
        chart_export.export(tmp_path / "bars.txt", bars.item, bars.data_table())


def test_history_csv_has_one_row_per_variant_and_baseline(open_window, tmp_path: Path) -> None:
    w: MainWindow = open_window("blur")
    first = w.doc.schedule
    w.select_stage("blur_y")
    w.editor.quick_action("parallel")
    w.history.attach(_measured(w, first, 4.0, {}))
    adams = Measurement(w.doc.pipeline.name, w.history.pipeline_hash, "auto:Adams2019", True, verified=True, median_ms=1.5)
    w.history.attach(adams)
    path = tmp_path / "history.csv"
    chart_export.write_csv(path, history_table(w.history))
    rows = [dict(zip(HISTORY_COLUMNS, r)) for r in _read_csv(path)[1:]]
    assert _read_csv(path)[0] == HISTORY_COLUMNS
    for needed in ("measured_at_utc", "schedule_hash", "median_ms", "iqr_ms", "verified", "host", "target", "threads"):
        assert needed in HISTORY_COLUMNS
    assert [r["variant"] for r in rows] == ["1", "2", ""]
    assert rows[0]["schedule_hash"] == first.content_hash() and rows[0]["median_ms"] == "4.0" and rows[0]["iqr_ms"] == "0.1"
    assert rows[0]["verified"] == "True" and rows[0]["host"] == "test host" and rows[0]["threads"] == "2"
    assert rows[1]["label"] == "blur_y: parallel" and rows[1]["median_ms"] == "" and float(rows[1]["predicted_ms"]) > 0
    assert rows[2]["label"] == "Halide Adams2019" and rows[2]["median_ms"] == "1.5"
    assert w.analysis.history_action in w.chrome.file_menu.actions()


def test_compare_view_gives_the_per_stage_ratio_of_two_measurements(qtbot: QtBot, open_window) -> None:
    w: MainWindow = open_window("blur")
    first = w.doc.schedule
    w.select_stage("blur_y")
    w.editor.quick_action("parallel")
    w.history.attach(_measured(w, first, 3.0, {"blur_x": 1.0, "blur_y": 2.0}))
    w.history.attach(_measured(w, w.doc.schedule, 1.5, {"blur_x": 1.0, "blur_y": 0.5}))
    before = w.doc.schedule_hash
    w.analysis.compare_action.trigger()  # View → Compare Variants…: the previous variant against the current one
    d = w.analysis.dialog
    assert isinstance(d, CompareDialog) and d.isVisible()
    assert w.analysis.compare_action in w.chrome.view_menu.actions()
    assert (d.a_combo.currentText(), d.b_combo.currentText()) == ("#1: default", CompareDialog.CURRENT)
    c = d.comparison
    assert c.stage_source == "measured" and c.total_source == "measured"
    assert [(r.stage, r.differs, r.speedup) for r in c.rows] == [("blur_x", False, 1.0), ("blur_y", True, 4.0)]
    assert c.speedup == 2.0 and "2.00× faster" in d.summary.text()
    assert d.table.item(1, 5).text() == "4.00× faster" and "parallel(loop=y)" in d.table.item(1, 2).text()
    assert d.nest_a.toPlainText() == build_loopnest(w.doc.pipeline, first).render()
    assert "parallel for y" in d.nest_b.toPlainText() and len(d.nest_b.extraSelections()) == 1  # blur_y's lines tinted
    assert d.chart.data_table().rows == [["blur_x", 1.0, 1.0, 1.0], ["blur_y", 2.0, 0.5, 4.0]]  # the chart's bars (and CSV)
    table = d.data_table()  # its CSV export: the rows shown, then the totals
    assert [row[0] for row in table.rows] == ["blur_x", "blur_y", "(total) A = #1: default; B = Current schedule (#2: blur_y: parallel)"]
    assert [row[6] for row in table.rows] == [1.0, 4.0, 2.0] and table.rows[1][4:6] == [2.0, 0.5]
    d.swap()
    assert [r.speedup for r in d.comparison.rows] == [1.0, 0.25] and "4.00× slower" == d.table.item(1, 5).text()
    d.only_diff.setChecked(True)
    assert d.table.rowCount() == 1
    assert w.doc.schedule_hash == before  # comparing changes nothing
    # A measured side is never divided by a predicted one: without B's profile, both are predictions.
    w.history.attach(_measured(w, w.doc.schedule, 1.5, {}))
    d.refresh()
    assert d.comparison.stage_source.startswith("predicted") and d.comparison.total_source == "measured"


def test_candidate_preview_shows_its_loop_nest_and_leaves_the_document_alone(open_window) -> None:
    w: MainWindow = open_window("blur")
    panel, p = w.search_panel, w.doc.pipeline
    cand = _parallel_y(w)
    panel.pipeline_hash, panel.strategy = p.content_hash(), "random"  # as a search of this pipeline leaves them
    panel.table.add_trial(Trial(0, cand, 0.4, 0.5, True))
    before, text = w.doc.schedule_hash, w.doc.loopnest_text
    panel.table.selectRow(0)
    pv = panel.preview
    assert pv.trial is not None and pv.nest.toPlainText() == build_loopnest(p, cand).render()
    assert pv.differing == ["blur_y"] and "parallel(loop=y)" in pv.diff.toPlainText()
    assert "1 of 2 stages differ" in pv.header.text() and "not applied" in pv.header.text()
    assert w.doc.schedule_hash == before and w.doc.loopnest_text == text and not w.undo_stack.canUndo()
    assert panel.compare_button.isEnabled()
    assert panel.compare_selected()  # Compare…: the candidate beside the current schedule
    d = w.analysis.dialog
    assert d.b_combo.currentText() == "search trial #1 (random)" and d.comparison.differing == ["blur_y"]


def test_applied_candidate_shows_its_measured_per_stage_bars(qtbot: QtBot, open_window) -> None:
    w: MainWindow = open_window("blur")
    panel, p = w.search_panel, w.doc.pipeline
    cand = _parallel_y(w)
    runner = Runner()
    try:  # measured as the search measures candidates: stored, without a per-stage profile
        with Database() as db:
            stored = api.measure(p, cand, runner, db, profile=False, min_time_s=0.05, min_runs=3)
    finally:
        runner.close()
    assert stored.ok and stored.verified and not stored.stages
    panel.pipeline_hash, panel.strategy = p.content_hash(), "random"
    panel.table.add_trial(Trial(0, cand, 0.4, stored.median_ms, True))
    panel.table.selectRow(0)
    assert panel.apply_selected()
    h = cand.content_hash()
    assert w.doc.schedule_hash == h
    assert w.history.measurement(h).median_ms == stored.median_ms  # what the search measured, at once
    qtbot.waitUntil(lambda: bool(getattr(w.history.measurement(h), "stages", None)), timeout=MEASURE_TIMEOUT_MS)
    m = w.history.measurement(h)
    assert m.ok and m.verified and set(m.stages) == {"blur_x", "blur_y"}
    assert w.performance.stage_bars.shown["measured"] == m.stages


def test_all_stages_mode_lists_every_stage_of_a_big_pipeline(qtbot: QtBot) -> None:
    p = synthetic_model()
    assert len(p.stages) >= 60
    doc = Document()
    doc.load(p, "synthetic", "small", "default", default_schedule(p))
    bars = StageBars()
    qtbot.addWidget(bars)
    bars.resize(500, 260)
    bars.show()
    names = [s.name for s in p.stages]
    bars.show_stages(names, doc.prediction.stages, None)
    assert 0 < len(bars.plotted) < len(names) and bars.all_check.isVisible()  # the hottest that fit
    bars.all_check.setChecked(True)
    assert bars.plotted == names  # every stage, in pipeline order
    assert [r[0] for r in bars.data_table().rows] == names
    assert bars.plot.minimumHeight() > bars.scroll_area.viewport().height()  # taller than the dock: it scrolls
    assert "all" in bars.item.getAxis("bottom").labelText
    bars.set_all_stages(False)
    assert len(bars.plotted) < len(names) and bars.plot.minimumHeight() == 0
