"""Teaching mode in the app (issue 18 items 1, 2, 3, 5): the animation stepped cell by cell
against the loop nest (tile, vectorize, parallel, compute_at; engine.teaching.trace's steps
and first cells derived by hand), the recompute count of a known overlap, the footprint
view, single-key edits in the loop-nest view giving the same schedules as the editor's
commands (and undo), and presentation mode's font scale and 1280x720 fit. Real Qt, real
engine; blur at its small size, traced on boxes of at most 16x16."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QSettings, Qt
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.main_window import SETTINGS_APP, SETTINGS_ORG, MainWindow
from app.model.commands import AddDirective, EditDirective
from app.teaching.animation import AnimationView
from app.teaching.footprint_view import fit_text
from app.teaching.presentation import SCALE_STEP, SETTINGS_KEY
from engine.schedule import Directive, Kind, S, Schedule
from engine.teaching.footprint import footprint
from engine.teaching.trace import trace


def with_stages(base: Schedule, **stages) -> Schedule:
    s = base.copy()
    for name, fn in stages.items():
        fn(S(s, name))
    return s


def animate(qtbot: QtBot, w: MainWindow, sched: Schedule, stage: str, extent: str) -> AnimationView:
    """Show `sched`, open the Teaching dock on `stage` over `extent`, wait for the trace (off the GUI thread)."""
    w.doc.replace_schedule(sched)
    anim = w.teaching.panel.animation
    anim.extent.setText(extent)
    w.teaching.show_stage(stage)
    want = tuple(int(v) for v in extent.split("x"))
    qtbot.waitUntil(lambda: not anim.busy and anim.trace is not None and anim.trace.extent == want, timeout=20000)
    return anim


def play_all(anim: AnimationView) -> list[list[tuple[int, ...]]]:
    """Step one tick at a time to the end; the cells newly lit by each step."""
    out = []
    anim.set_position(0)
    while anim.position < anim.ticks:
        before = len(anim.lit_cells())
        anim.step()
        out.append(anim.lit_cells()[before:])
    return out


@pytest.fixture
def window(open_window) -> MainWindow:
    return open_window("blur")


def test_tile_lights_one_tile_after_another_and_follows_the_loop_lines(qtbot: QtBot, window: MainWindow) -> None:
    sched = with_stages(window.doc.schedule, blur_y=lambda s: s.tile("x", "y", "xo", "yo", "xi", "yi", 4, 4))
    anim = animate(qtbot, window, sched, "blur_y", "8x8")
    engine = trace(window.doc.pipeline, sched, "blur_y", (8, 8))
    assert anim.trace is not None and anim.trace.steps == engine.steps
    lit = play_all(anim)
    assert [c for step in lit for c in step] == [c for st in engine.steps for c in st.cells]
    # By hand: the first tile is rows 0-3, columns 0-3 row by row, then the tile to its right.
    flat = [c for step in lit for c in step]
    assert flat[:16] == [(y, x) for y in range(4) for x in range(4)]
    assert flat[16:20] == [(0, 4), (0, 5), (0, 6), (0, 7)]
    # The running loop's line (the innermost, xi) is the one highlighted, in the view's own text.
    anim.set_position(3)
    line = anim.highlighted_line()
    assert line == engine.steps[2].loop_line and "for xi in" in anim.code.toPlainText().splitlines()[line]
    assert anim.code.toPlainText() == window.loop_view.toPlainText()
    # One loop level: from the first step to the next iteration of xo (the second tile).
    anim.set_position(1)
    anim.step_level([lp.name for lp in anim.trace.loops].index("xo"))
    assert len(anim.lit_cells()) == 17 and anim.lit_cells()[-1] == (0, 4)


def test_vector_lanes_light_together(qtbot: QtBot, window: MainWindow) -> None:
    sched = with_stages(window.doc.schedule, blur_y=lambda s: s.vectorize("x", 4))
    anim = animate(qtbot, window, sched, "blur_y", "2x8")
    lit = play_all(anim)
    assert lit == [[(y, 4 * xo + v) for v in range(4)] for y in range(2) for xo in range(2)]
    anim.set_position(1)
    assert anim.current_steps()[0].vectorized and "4 vector lanes" in anim.status.text()


def test_parallel_threads_advance_side_by_side_in_their_colours(qtbot: QtBot, window: MainWindow) -> None:
    sched = with_stages(window.doc.schedule, blur_y=lambda s: s.parallel("y"))
    anim = animate(qtbot, window, sched, "blur_y", "6x3")
    assert anim.trace is not None and anim.trace.threads == 4 and anim.ticks == 6
    anim.step()
    # Rows 0-3 start at once, one per thread; x = 0 first.
    assert sorted(anim.lit_cells()) == [(0, 0), (1, 0), (2, 0), (3, 0)]
    assert sorted(st.thread for st in anim.current_steps()) == [0, 1, 2, 3]
    assert "4 threads side by side" in anim.status.text()
    lit = play_all(anim)
    assert sorted(c for step in lit for c in step) == [(y, x) for y in range(6) for x in range(3)]


def test_compute_at_shows_the_producer_region_and_the_recompute_count(qtbot: QtBot, window: MainWindow) -> None:
    sched = with_stages(window.doc.schedule, blur_x=lambda s: s.compute_at("blur_y", "x"))
    anim = animate(qtbot, window, sched, "blur_y", "16x16")
    assert [g.name for g in anim.canvas.grids] == ["blur_x", "blur_y"]
    assert "buffer 3×1" in anim.canvas.grids[0].title
    anim.step()
    # blur_y(0, 0) needs blur_x rows 0..2 of column 0: three points, none computed before.
    assert anim.current_steps()[0].producer_cells[0].cells == ((0, 0), (1, 0), (2, 0))
    assert "blur_x: 3 computed now, 0 recomputed" in anim.counts.text()
    anim.set_position(17)  # the first point of row 1 recomputes rows 1 and 2 of column 0
    assert "blur_x: 3 computed now, 2 recomputed" in anim.counts.text()
    anim.set_position(anim.ticks)
    # 16x16 points x 3 = 768 computed, of 18 x 16 = 288 distinct: 480 recomputed.
    assert anim.recomputed_so_far() == {"blur_x": 480}
    assert "recomputed so far 480 · in all 480 of 768 computed" in anim.counts.text()


def test_store_root_shows_the_folded_sliding_buffer_and_no_recompute(qtbot: QtBot, window: MainWindow) -> None:
    sched = with_stages(window.doc.schedule, blur_x=lambda s: s.compute_at("blur_y", "y").store_root())
    anim = animate(qtbot, window, sched, "blur_y", "16x16")
    # Stored at root, computed per row of blur_y: a sliding window over 4 rows (3 rounded up to a power of two).
    assert anim.canvas.grids[0].title == "blur_x · store root, compute blur_y.y · buffer 4×16 folded · sliding window"
    anim.set_position(anim.ticks)
    assert "in all 0 of 288 computed" in anim.counts.text()  # 18 x 16 points, each once


def test_unrolled_steps_are_marked(qtbot: QtBot, window: MainWindow) -> None:
    anim = animate(qtbot, window, with_stages(window.doc.schedule, blur_y=lambda s: s.unroll("x", 2)), "blur_y", "2x4")
    assert [c for step in play_all(anim) for c in step] == [(y, x) for y in range(2) for x in range(4)]
    assert anim.current_steps()[0].unrolled and "unrolled" in anim.status.text()


def test_animation_follows_edits_and_exports_a_gif(qtbot: QtBot, window: MainWindow, tmp_path) -> None:
    anim = animate(qtbot, window, window.doc.schedule, "blur_y", "4x4")
    window.undo_stack.push(AddDirective(window.doc, "blur_y", False, Directive(Kind.REORDER, loops=("y", "x"))))
    qtbot.waitUntil(lambda: not anim.busy and anim.trace is not None and [lp.name for lp in anim.trace.loops] == ["x", "y"], timeout=20000)
    assert [c for step in play_all(anim) for c in step][:4] == [(0, 0), (1, 0), (2, 0), (3, 0)]  # y innermost now
    n = anim.export_gif(tmp_path / "a.gif")
    assert n >= 1 and (tmp_path / "a.gif").read_bytes()[:6] == b"GIF89a"
    frames = anim.export_frames(tmp_path / "frames")
    assert frames == n and sorted(p.name for p in (tmp_path / "frames").iterdir())[0] == "frame_0000.png"
    window.select_stage("blur_x")
    window.undo_stack.push(EditDirective(window.doc, "blur_x", False, 0, Directive(Kind.COMPUTE_INLINE)))
    qtbot.waitUntil(lambda: not anim.busy and anim.trace is None, timeout=20000)
    assert "inline" in anim.heading.text()  # the engine's reason, not a blank view


def test_footprint_view_per_loop_level(qtbot: QtBot, window: MainWindow) -> None:
    sched = with_stages(window.doc.schedule, blur_x=lambda s: s.compute_at("blur_y", "x"))
    window.doc.replace_schedule(sched)
    window.teaching.show_stage("blur_y", "footprint")
    view = window.teaching.panel.footprint
    assert view.set_level("x")
    rows = view.row_texts()
    engine = footprint(window.doc.pipeline, sched, "blur_y", "x", view.caches)
    assert [r[1] for r in rows] == [f"{r.source} ({r.kind})" for r in engine.reads] + ["blur_x at blur_y.x"]
    # By hand: one x iteration stores blur_x's 3x1 column: 3 floats, 12 bytes.
    assert rows[-1][2:5] == ["3×1", "3", "12 B"]
    data = [c for c in view.caches if c.type != "Instruction"]
    assert view.summary.text().endswith(fit_text(engine.read_bytes + engine.stored_bytes, data))
    assert view.set_level(None)  # one whole realization of the 64x64 output reads a 66x66 input (3 taps each way)
    assert "one realization of blur_y" in view.heading.text()
    assert next(r for r in view.row_texts() if r[1] == "input (input)")[2:4] == ["66×66", "4356"]


# --- keyboard editing in the loop-nest view ------------------------------------------------
def _key_vs_editor(qtbot: QtBot, w: MainWindow, key: Qt.Key, command, mods=Qt.KeyboardModifier.NoModifier) -> None:
    """Press `key` in the loop-nest view, undo with z, run the editor's `command()`: the same schedule."""
    lv, doc = w.loop_view, w.doc
    start, depth = doc.schedule_hash, w.undo_stack.index()
    here = lv.current
    qtbot.keyClick(lv, key, mods)
    assert lv.message.isHidden(), lv.message.text()
    by_key = doc.schedule.to_json()
    assert doc.schedule_hash != start and w.undo_stack.index() == depth + 1
    assert doc.prediction is not None  # the prediction follows, as after any edit
    qtbot.keyClick(lv, Qt.Key.Key_Z)
    assert doc.schedule_hash == start
    w.undo_stack.push(command())
    assert doc.schedule.to_json() == by_key
    w.undo_stack.undo()
    assert doc.schedule_hash == start
    if here is not None:
        lv.set_current_loop(here.stage, here.loop, here.update)


def test_keys_make_the_editors_schedules_and_z_undoes(qtbot: QtBot, window: MainWindow) -> None:
    from app.model.commands import QuickAction

    doc, lv = window.doc, window.loop_view
    assert not lv.legend.isHidden() and "s split" in lv.legend.text()
    window.select_stage("blur_y")
    assert lv.set_current_loop("blur_y", "x")
    key = Qt.Key

    def add(d: Directive) -> AddDirective:
        return AddDirective(doc, "blur_y", False, d)

    _key_vs_editor(qtbot, window, key.Key_S, lambda: add(Directive(Kind.SPLIT, loop="x", outer="xo", inner="xi", factor=8)))
    _key_vs_editor(qtbot, window, key.Key_V, lambda: QuickAction(doc, "blur_y", False, "vectorize"))  # x is the innermost loop
    _key_vs_editor(qtbot, window, key.Key_U, lambda: add(Directive(Kind.UNROLL, loop="x", factor=4)))
    # Move x out (Shift+Up): Halide's reorder lists loops innermost first.
    _key_vs_editor(qtbot, window, key.Key_Up, lambda: add(Directive(Kind.REORDER, loops=("y", "x"))), Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClick(lv, key.Key_Up)  # the loop cursor to y, the outermost loop
    assert lv.current is not None and lv.current.loop == "y"
    _key_vs_editor(qtbot, window, key.Key_P, lambda: QuickAction(doc, "blur_y", False, "parallel"))
    _key_vs_editor(qtbot, window, key.Key_F, lambda: add(Directive(Kind.FUSE, inner="x", outer="y", fused="yx")))
    # c: the selected stage (blur_x, a producer) computed at the loop under the cursor, as the
    # editor's Edit of its compute directive would.
    window.select_stage("blur_x")
    assert lv.set_current_loop("blur_y", "x")
    _key_vs_editor(
        qtbot, window, key.Key_C, lambda: EditDirective(doc, "blur_x", False, 0, Directive(Kind.COMPUTE_AT, consumer="blur_y", loop="x"))
    )
    # The cursor stays on the loop across the edit; the text shows where blur_x is computed now.
    qtbot.keyClick(lv, key.Key_C)
    assert "produce blur_x:  # at blur_y.x" in lv.toPlainText() and lv.current is not None and lv.current.loop == "x"
    qtbot.keyClick(lv, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert "# at blur_y.x" not in lv.toPlainText()


def test_a_refused_key_edit_shows_the_engines_message_and_changes_nothing(qtbot: QtBot, window: MainWindow) -> None:
    lv, doc = window.loop_view, window.doc
    window.select_stage("blur_y")
    assert lv.set_current_loop("blur_y", "x")
    start, depth = doc.schedule_hash, window.undo_stack.count()
    qtbot.keyClick(lv, Qt.Key.Key_F)  # x is innermost: nothing inside it to fuse with
    assert not lv.message.isHidden() and "innermost" in lv.message.text()
    assert "innermost" in window.statusBar().currentMessage()
    # compute_at blur_x inside blur_y, then a split of that loop: the engine refuses it (blur_x would lose its loop).
    window.select_stage("blur_x")
    qtbot.keyClick(lv, Qt.Key.Key_C)
    start, depth = doc.schedule_hash, window.undo_stack.count()
    qtbot.keyClick(lv, Qt.Key.Key_S)
    assert "has no loop 'x'" in lv.message.text()
    assert doc.schedule_hash == start and window.undo_stack.count() == depth


# --- presentation mode ---------------------------------------------------------------------
@pytest.fixture
def presenting(window: MainWindow):
    pres = window.teaching.presentation
    yield window
    pres.set_active(False)
    pres.reset_scale()


def test_font_scale_is_app_wide_and_remembered(presenting: MainWindow) -> None:
    pres = presenting.teaching.presentation
    base = QApplication.font().pointSizeF()
    code = presenting.loop_view.font().pointSizeF()  # a font of its own (fixed width): scaled too
    pres.larger.trigger()
    assert QApplication.font().pointSizeF() == pytest.approx(base * SCALE_STEP)
    assert presenting.loop_view.font().pointSizeF() == pytest.approx(code * SCALE_STEP)
    assert float(QSettings(SETTINGS_ORG, SETTINGS_APP).value(SETTINGS_KEY)) == pytest.approx(SCALE_STEP)
    pres.smaller.trigger()
    pres.smaller.trigger()
    assert QApplication.font().pointSizeF() == pytest.approx(base / SCALE_STEP)
    pres.normal.trigger()
    assert QApplication.font().pointSizeF() == pytest.approx(base)
    assert presenting.loop_view.font().pointSizeF() == pytest.approx(code)


def test_presentation_mode_fits_1280x720_and_steps_with_keys(qtbot: QtBot, presenting: MainWindow) -> None:
    w = presenting
    pres = w.teaching.presentation
    w.teaching.show_stage("blur_y", wait=True)
    pres.action.trigger()  # View → Presentation Mode (F5)
    assert pres.active and w.teaching.dock.isVisible()
    assert not w.editor_dock.isVisible() and not w.stages_dock.isVisible() and not w.measurement_dock.isVisible()
    visible_tabs = [w.tabs.tabText(i) for i in range(w.tabs.count()) if w.tabs.isTabVisible(i)]
    assert visible_tabs == ["Graph", "Loop nest"]
    pres.set_scale(1.3)  # larger text still fits a projector
    hint = w.minimumSizeHint()
    assert hint.width() <= 1280 and hint.height() <= 720, hint
    assert w.width() <= 1280 and w.height() <= 720
    anim = w.teaching.panel.animation
    w.activateWindow()
    anim.setFocus()
    qtbot.keyClick(anim, Qt.Key.Key_Right)
    qtbot.keyClick(anim, Qt.Key.Key_Right)
    assert anim.position == 2
    qtbot.keyClick(anim, Qt.Key.Key_Left)
    assert anim.position == 1
    qtbot.keyClick(anim, Qt.Key.Key_Space)
    assert anim.playing
    qtbot.keyClick(anim, Qt.Key.Key_Space)
    assert not anim.playing
    # PageDown / PageUp step the lesson of the Lessons dock (shown beside the graph).
    lessons = w.lessons.view
    assert w.lessons.dock.isVisible()
    lessons.list.setCurrentRow(0)
    assert lessons.current() is not None and lessons.current().hints and lessons.hints_shown == 0
    qtbot.keyClick(anim, Qt.Key.Key_PageDown)
    assert lessons.hints_shown == 1
    qtbot.keyClick(anim, Qt.Key.Key_PageUp)
    assert lessons.hints_shown == 0
    pres.action.trigger()
    assert not pres.active and w.editor_dock.isVisible() and w.stages_dock.isVisible()
    assert w.tabs.isTabVisible(w.tabs.indexOf(w.placement_scroll))
    qtbot.keyClick(anim, Qt.Key.Key_Right)  # the keys are the widgets' again outside the mode
    assert anim.position == 1
    pres.action.trigger()
    w.close()  # closing in presentation mode leaves it first: the layout saved is the user's
    assert not pres.active and not w.editor_dock.isHidden() and not w.chrome.toolbar.isHidden()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--teach", "nope"], "--teach: no stage 'nope' in blur (stages: blur_x, blur_y)"),
        (["--font-scale", "9"], "--font-scale: expected a text scale from 0.6 to 3.0"),
        (["--teach", "blur_y", "--teach-step", "-1"], "--teach-step: expected a number of iterations"),
    ],
)
def test_bad_teaching_options_are_one_clear_error(capsys, args: list[str], message: str) -> None:
    from app.main import run_app

    assert run_app(["blur", "--size", "small", *args, "--screenshot", "unused.png"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("error:") == 1


def test_a_key_edit_updates_the_prediction_and_starts_auto_measure(qtbot: QtBot, open_window) -> None:
    w = open_window("blur", auto_measure=True)
    w.measure_control.timer.stop()  # nothing pending from opening
    lv, doc = w.loop_view, w.doc
    before = doc.prediction
    w.select_stage("blur_x")
    assert lv.set_current_loop("blur_y", "x")
    qtbot.keyClick(lv, Qt.Key.Key_C)  # blur_x computed per point of blur_y: 3x the blur_x work
    assert before is not None and doc.prediction is not None and doc.prediction.total_ms != before.total_ms
    assert w.measure_control.timer.isActive()  # Auto measures this edit once its debounce ends
    w.measure_control.timer.stop()  # the measurement itself is the measurement tests' business


@pytest.mark.parametrize("name", ["matmul", "softmax", "harris"])
def test_the_key_cursors_loop_lines_are_the_traces(name: str) -> None:
    """The loop-nest view's loop lines (pure and update definitions) are the lines
    engine.teaching.trace gives each loop, on hand schedules with reductions and compute_at."""
    from app.code_view import loop_lines
    from engine import api, zoo
    from engine.loopnest import build
    from engine.teaching.trace import TraceError, default_extent

    p = zoo.get(name, "small")
    sched = api.load_schedule(p, "hand")
    lines = loop_lines(build(p, sched).roots)
    checked = 0
    for st in p.stages:
        try:
            t = trace(p, sched, st.name, default_extent(p, sched, st.name), max_steps=4)
        except TraceError:  # inlined: no loops of its own
            assert not [ln for ln in lines if ln.stage == st.name]
            continue
        want = {(lp.line, lp.update, lp.name) for lp in t.loops if lp.line is not None}
        assert {(ln.line, ln.update, ln.loop) for ln in lines if ln.stage == st.name} == want
        checked += 1
    assert checked >= 2
