"""The schedule editor: edits go through one undoable command each, invalid edits are shown
with the engine's message and change nothing, quick actions give valid schedules, and the
prediction follows every edit. Auto-measure is off unless a test is about it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QWidget
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.model import edits
from engine import zoo
from engine.schedule import Kind, S, Schedule, ScheduleError, default_schedule, definition_loops, final_loops, validate


@pytest.fixture
def window(open_window) -> Iterator[MainWindow]:
    w = open_window("blur")
    yield w


def _add_split(w: MainWindow, loop: str = "x", outer: str = "xo", inner: str = "xi", factor: int = 8) -> None:
    w.editor.begin_add()
    form = w.editor.form
    form.set_kind("split")
    form.combo("loop").setCurrentIndex(form.combo("loop").findData(loop))
    form.edit("outer").setText(outer)
    form.edit("inner").setText(inner)
    form.spin("factor").setValue(factor)
    form.apply_button.click()


def test_edit_applies_and_undo_redo_restore_exact_schedules(qtbot: QtBot, window: MainWindow) -> None:
    doc = window.doc
    window.select_stage("blur_y")
    before_hash, before_json = doc.schedule_hash, doc.schedule.to_json()
    _add_split(window)
    assert window.editor.error.isHidden(), window.editor.error.text()
    after_hash = doc.schedule_hash
    assert after_hash != before_hash
    assert doc.schedule.of("blur_y").pure[-1].to_json() == {"kind": "split", "loop": "x", "outer": "xo", "inner": "xi", "factor": 8}
    assert "for xo in [0, 8):" in window.loop_view.toPlainText() and "for xi in [0, 8):" in window.loop_view.toPlainText()
    assert window.editor.list.count() == 2
    assert window.undo_stack.count() == 1 and "split" in window.undo_stack.undoText()
    assert "(edited)" in window.windowTitle()
    # Ctrl+Z / Ctrl+Shift+Z: back to the exact previous schedule, then forward again.
    window.activateWindow()
    qtbot.keyClick(window, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert doc.schedule_hash == before_hash and doc.schedule.to_json() == before_json
    assert "for xo" not in window.loop_view.toPlainText()
    assert "(edited)" not in window.windowTitle()
    qtbot.keyClick(window, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert doc.schedule_hash == after_hash
    assert window.undo_view.model().rowCount() == 2  # "<opened>" and the edit


def test_invalid_edit_shows_the_engine_message_and_changes_nothing(window: MainWindow) -> None:
    doc = window.doc
    window.select_stage("blur_y")
    before = doc.schedule_hash
    _add_split(window, outer="y")  # a loop called y exists already
    msg = window.editor.error.text()
    assert not window.editor.error.isHidden()
    assert "invalid schedule: stage 'blur_y'" in msg and "'y' is already used" in msg
    assert doc.schedule_hash == before
    assert window.undo_stack.count() == 0
    assert window.editor.form_box.isVisible()  # the form stays open to fix the values
    # An output cannot be computed inside another stage.
    window.editor.form.set_kind("compute_root")
    window.editor.form.apply_button.click()  # valid: clears the message
    assert window.editor.error.isHidden()
    window.select_stage("blur_x")
    window.editor.begin_add()
    window.editor.form.set_kind("unroll")
    window.editor.form.combo("loop").setCurrentIndex(window.editor.form.combo("loop").findData("y"))
    window.editor.form.spin("mfactor").setValue(0)
    before = doc.schedule_hash
    window.editor.form.apply_button.click()  # a root stage's dims have run-time extents: Halide cannot unroll them whole
    assert "constant extent" in window.editor.error.text()
    assert doc.schedule_hash == before
    window.editor.form.spin("mfactor").setValue(4)
    window.editor.form.apply_button.click()
    assert window.editor.error.isHidden()
    before = doc.schedule_hash
    window.editor.begin_add()
    window.editor.form.set_kind("vectorize")
    window.editor.form.combo("loop").setCurrentIndex(window.editor.form.combo("loop").findData("y_u"))  # already unrolled
    window.editor.form.apply_button.click()
    assert "already unrolled" in window.editor.error.text()
    assert doc.schedule_hash == before


def test_form_offers_the_legal_choices(window: MainWindow) -> None:
    doc = window.doc
    window.select_stage("blur_x")
    window.editor.begin_add()
    form = window.editor.form
    loops = [lp.name for lp in definition_loops(doc.pipeline, doc.schedule, "blur_x", False)]
    assert [form.combo("loop").itemData(k) for k in range(form.combo("loop").count())] == loops
    form.set_kind("compute_at")
    assert form.combo("consumer").itemData(0) == "blur_y"
    consumer_loops = [lp.name for lp in final_loops(doc.pipeline, doc.schedule, "blur_y")]
    assert [form.combo("consumer_loop").itemData(k) for k in range(form.combo("consumer_loop").count())] == consumer_loops
    assert form.rows["consumer"].isVisible() and not form.rows["factor"].isVisible()
    form.combo("consumer_loop").setCurrentIndex(form.combo("consumer_loop").findData("x"))
    form.apply_button.click()
    assert doc.placement_text("blur_x") == "at blur_y.x"
    assert window.graph.view.nodes["blur_x"].placement == "at blur_y.x"
    # Editing loads the directive's values; the changed one replaces it in place.
    window.editor.list.setCurrentRow(1)
    window.editor.begin_edit()
    assert form.kind.currentData() == "compute_at" and form.combo("consumer_loop").currentData() == "x"
    form.combo("consumer_loop").setCurrentIndex(form.combo("consumer_loop").findData("y"))
    form.apply_button.click()
    assert doc.schedule.of("blur_x").pure[1].to_json() == {"kind": "compute_at", "consumer": "blur_y", "loop": "y"}
    assert window.undo_stack.count() == 2


def test_remove_and_move_are_single_undoable_steps(window: MainWindow) -> None:
    doc = window.doc
    window.select_stage("blur_y")
    _add_split(window)
    window.editor.quick_action("vectorize")  # vectorize xi
    assert [d.kind for d in doc.schedule.of("blur_y").pure] == ["compute_root", "split", "vectorize"]
    window.editor.list.setCurrentRow(0)
    window.editor.buttons["down"].click()
    assert [d.kind for d in doc.schedule.of("blur_y").pure] == ["split", "compute_root", "vectorize"]
    assert window.editor.list.currentRow() == 1
    window.editor.buttons["remove"].click()
    assert [d.kind for d in doc.schedule.of("blur_y").pure] == ["split", "vectorize"]
    # Removing the split would leave vectorize(xi) pointing at nothing: rejected.
    window.editor.list.setCurrentRow(0)
    n = window.undo_stack.count()
    window.editor.buttons["remove"].click()
    assert "no loop 'xi'" in window.editor.error.text()
    assert window.undo_stack.count() == n
    window.undo_stack.undo()
    window.undo_stack.undo()
    assert [d.kind for d in doc.schedule.of("blur_y").pure] == ["compute_root", "split", "vectorize"]


def test_quick_actions_produce_valid_schedules() -> None:
    """Every quick action on every stage of every built-in pipeline either gives a schedule
    the engine accepts or is refused with a ScheduleError (never an invalid schedule)."""
    applied = 0
    for name in zoo.names():
        p = zoo.get(name, "small")
        s = default_schedule(p)
        for st in p.stages:
            for update in (False, True) if st.is_reduction else (False,):
                for key, (_label, _tip, fn) in edits.QUICK_ACTIONS.items():
                    try:
                        out = fn(p, s, st.name, update)
                    except ScheduleError:
                        continue
                    validate(p, out)
                    applied += 1
                    assert out.content_hash() != s.content_hash(), (name, st.name, key)
    assert applied > 100


def test_quick_actions_in_the_editor(window: MainWindow) -> None:
    doc = window.doc
    window.select_stage("blur_y")
    for key in ("tile", "vectorize", "parallel"):
        assert window.editor.quick[key].isEnabled()
        window.editor.quick[key].click()
        assert window.editor.error.isHidden(), window.editor.error.text()
    loops = final_loops(doc.pipeline, doc.schedule, "blur_y")
    assert loops[-1].kind == "vectorized" and loops[0].kind == "parallel"
    assert window.undo_stack.count() == 3
    assert not window.editor.quick["inline"].isEnabled()  # the output
    window.select_stage("blur_x")
    window.editor.quick["inline"].click()
    assert doc.placement_text("blur_x") == "inline"
    window.editor.quick["root"].click()
    assert doc.placement_text("blur_x") == "root"


def test_reductions_edit_their_update_definition(window: MainWindow) -> None:
    assert window.open_pipeline("matmul", "default")
    doc = window.doc
    stage = next(s.name for s in doc.pipeline.stages if s.is_reduction)
    window.select_stage(stage)
    assert window.editor.definition.isTabVisible(1) and window.editor.is_update
    window.editor.quick_action("parallel")
    assert [d.to_json() for d in doc.schedule.of(stage).update] == [{"kind": "parallel", "loop": "i"}]
    window.editor.definition.setCurrentIndex(0)
    assert window.editor.list.count() == len(doc.schedule.of(stage).pure)


def test_prediction_follows_every_edit(window: MainWindow) -> None:
    doc = window.doc
    label = window.performance.values["Predicted"]
    assert "analytic estimate" in label.text()
    first = doc.prediction.total_ms
    window.select_stage("blur_y")
    window.editor.quick_action("parallel")
    assert doc.prediction.total_ms < first
    assert label.text().startswith(f"{doc.prediction.total_ms:.4g} ms")
    assert window.graph.legend.source == "predicted (analytic estimate)"
    assert [v.predicted_ms for v in window.history.variants] == [first, doc.prediction.total_ms]
    window.undo_stack.undo()
    assert label.text().startswith(f"{first:.4g} ms")
    assert len(window.history.variants) == 2  # undo returns to a known variant


def test_switching_schedule_and_restoring_a_variant_are_undoable(window: MainWindow) -> None:
    doc = window.doc
    window.select_stage("blur_y")
    window.editor.quick_action("parallel")
    edited = doc.schedule_hash
    assert window.restore_variant(1)
    assert doc.schedule_hash == window.history.variants[0].hash
    window.undo_stack.undo()
    assert doc.schedule_hash == edited
    combo = window.chrome.schedule_combo
    if not combo.model().item(combo.findData("hand")).isEnabled():
        pytest.skip("blur has no hand-written schedule")
    combo.setCurrentIndex(combo.findData("hand"))
    combo.activated.emit(combo.currentIndex())
    assert doc.schedule_spec == "hand" and not doc.edited
    window.undo_stack.undo()
    assert doc.schedule_hash == edited and doc.schedule_spec == "default"


def _type_into(qtbot: QtBot, box: QWidget, text: str) -> None:
    """Type as a user does: focus the field, select what is there, type over it."""
    box.setFocus()
    qtbot.waitUntil(box.hasFocus)
    box.selectAll()
    QTest.keyClick(box.lineEdit(), Qt.Key.Key_Delete)
    QTest.keyClicks(box.lineEdit(), text)


@pytest.mark.parametrize(
    ("kind", "key", "typed", "message"),
    [
        ("split", "factor", "0", "factor must be positive, got 0"),  # the engine's own message
        ("split", "factor", "-4", "factor must be positive, got -4"),
        ("split", "factor", "abc", "factor must be a whole number, got 'abc'"),
        ("split", "factor", "", "factor must be a whole number, got ''"),
        ("split", "factor", "99999999", f"factor must be at most {1 << 20}, got 99999999"),
        ("tile", "yf", "0", "yf must be positive, got 0"),
        ("unroll", "mfactor", "-2", "factor must be positive, got -2"),
        ("parallel", "mfactor", "x", "factor must be a whole number, got 'x'"),
    ],
)
def test_a_typed_number_the_form_cannot_take_is_refused_not_replaced(
    qtbot: QtBot, window: MainWindow, kind: str, key: str, typed: str, message: str
) -> None:
    """A plain QSpinBox puts its last value (8) back when focus leaves it, so Apply applied
    factor 8 for a typed 0; the typed text stays and Apply is refused with a message."""
    doc = window.doc
    window.select_stage("blur_y")
    window.editor.begin_add()
    form = window.editor.form
    form.set_kind(kind)
    box = form.spin(key)
    _type_into(qtbot, box, typed)
    before = doc.schedule_hash
    qtbot.mouseClick(form.apply_button, Qt.MouseButton.LeftButton)  # takes the focus, as a click does
    assert not window.editor.error.isHidden()
    assert message in window.editor.error.text() and "stage 'blur_y'" in window.editor.error.text()
    assert doc.schedule_hash == before and window.undo_stack.count() == 0
    assert box.text() == typed  # what the user typed is still there, not the old value
    assert window.editor.form_box.isVisible()
    # Choosing a legal value with the arrows applies it.
    box.setValue(4)
    qtbot.mouseClick(form.apply_button, Qt.MouseButton.LeftButton)
    assert window.editor.error.isHidden(), window.editor.error.text()
    assert window.undo_stack.count() == 1


def test_typed_legal_numbers_apply_and_zero_marks_the_whole_loop(qtbot: QtBot, window: MainWindow) -> None:
    window.select_stage("blur_y")
    window.editor.begin_add()
    form = window.editor.form
    form.set_kind("split")
    _type_into(qtbot, form.spin("factor"), "16")
    qtbot.mouseClick(form.apply_button, Qt.MouseButton.LeftButton)
    assert window.editor.error.isHidden(), window.editor.error.text()
    assert window.doc.schedule.of("blur_y").pure[-1].factor == 16
    window.editor.begin_add()
    form.set_kind("vectorize")
    form.combo("loop").setCurrentIndex(form.combo("loop").findData("xi"))
    _type_into(qtbot, form.spin("mfactor"), "0")
    form.apply_button.setFocus()  # focus leaves the box: it shows what 0 means
    assert form.spin("mfactor").text() == "none (whole loop)"
    assert "factor" not in form.directive()


def test_the_wheel_changes_editor_fields_only_when_focused(qtbot: QtBot, window: MainWindow) -> None:
    """Scrolling the editor panel over a combo box or spin box must not change it."""
    window.select_stage("blur_y")
    window.editor.begin_add()
    form = window.editor.form
    form.set_kind("split")
    loop, factor = form.combo("loop"), form.spin("factor")
    window.editor.list.setFocus()
    qtbot.waitUntil(window.editor.list.hasFocus)

    def wheel(w: QWidget) -> None:
        pos = QPointF(w.rect().center())
        event = QWheelEvent(
            pos, QPointF(w.mapToGlobal(pos.toPoint())), QPoint(), QPoint(0, -120),
            Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase, False,
        )  # fmt: skip
        QApplication.sendEvent(w, event)

    before = (loop.currentIndex(), factor.value(), form.kind.currentIndex())
    for w in (loop, factor, form.kind):
        wheel(w)
    assert (loop.currentIndex(), factor.value(), form.kind.currentIndex()) == before
    assert not loop.hasFocus()
    for w in (loop, factor, form.kind):
        assert w.focusPolicy() == Qt.FocusPolicy.StrongFocus  # a wheel turn does not focus it either
    # Focused, the wheel works as usual (so the events above did reach the widgets).
    loop.setCurrentIndex(0)
    loop.setFocus()
    qtbot.waitUntil(loop.hasFocus)
    wheel(loop)
    assert loop.currentIndex() == 1
    factor.setFocus()
    qtbot.waitUntil(factor.hasFocus)
    wheel(factor)
    assert factor.value() == 7


def test_heading_shows_the_packed_copy_a_stage_reads(open_window) -> None:
    w = open_window("matmul", "hand")  # the hand matmul reads B through B.in(prod)
    w.select_stage("prod")
    assert "reads B through B.in(prod): compute_at(consumer=C, loop=jo); vectorize(loop=j" in w.editor.heading.text()
    w.select_stage("C")
    assert "reads" not in w.editor.heading.text()


def test_an_edit_that_breaks_a_packed_copy_drops_it_and_undo_restores_it(open_window) -> None:
    w = open_window("matmul", "hand")  # B.in(prod) is computed at C.jo, inside which prod is computed
    doc = w.doc
    before = doc.schedule.to_json()
    w.select_stage("prod")
    assert w.editor.quick_action("root"), w.editor.error.text()  # prod at root: no longer inside C.jo
    assert "B_in_prod" not in doc.schedule.wrappers and doc.schedule.of("prod").compute().kind == Kind.COMPUTE_ROOT
    validate(doc.pipeline, doc.schedule)
    assert w.undo_stack.undoText() == "prod: root; B.in(prod) dropped"
    note = w.editor.note.text()  # said in the editor too, with the engine's reason
    assert w.editor.note.isVisibleTo(w.editor)
    assert note.startswith("Dropped B.in(prod), the packed copy of B that prod read: this change left it invalid (")
    assert "'prod' reads the wrapper but is not computed inside C.jo" in note and w.editor.error.isHidden()
    assert not w.editor.packed.isVisibleTo(w.editor) and "reads B" not in w.editor.heading.text()
    w.undo_stack.undo()
    assert doc.schedule.to_json() == before and w.editor.packed.isVisibleTo(w.editor) and not w.editor.note.isVisibleTo(w.editor)
    # Through C's loops: removing the reorder that put jo outermost breaks the copy too.
    w.select_stage("C")
    w.editor.list.setCurrentRow(2)
    w.editor.remove_selected()
    assert "B_in_prod" not in doc.schedule.wrappers and w.undo_stack.undoText().endswith("; B.in(prod) dropped")
    w.undo_stack.undo()
    assert doc.schedule.to_json() == before
    # An edit invalid for its own reasons is still refused with its message, and nothing changes.
    w.editor.list.setCurrentRow(0)  # the split that makes the reorder's ji
    w.editor.remove_selected()
    assert "stage 'C' directive #1 reorder" in w.editor.error.text() and "no loop 'ji'" in w.editor.error.text()
    assert doc.schedule.to_json() == before and w.undo_stack.index() == 0


def test_unrelated_edits_keep_the_packed_copy(open_window) -> None:
    w = open_window("matmul", "hand")
    w.select_stage("C")
    w.editor.list.setCurrentRow(7)  # parallel(jo)
    w.editor.remove_selected()
    assert "B_in_prod" in w.doc.schedule.wrappers and w.undo_stack.undoText() == "C: remove parallel(loop=jo)"


def test_remove_packed_copy_from_the_heading_menu_is_undoable(open_window) -> None:
    w = open_window("matmul", "hand")
    doc = w.doc
    before = doc.schedule.to_json()
    w.select_stage("prod")
    assert w.editor.packed.isVisibleTo(w.editor) and w.editor.packed.text() == "Packed copy ▾"
    w.editor.packed_menu.aboutToShow.emit()  # what opening the menu does
    (act,) = w.editor.packed_menu.actions()
    assert act.text() == "Remove packed copy B.in(prod)"
    act.trigger()
    assert doc.schedule.wrappers == {} and doc.schedule.stages == Schedule.from_json(before).stages
    assert w.undo_stack.undoText() == "prod: remove packed copy B.in(prod)"
    assert "reads B" not in w.editor.heading.text() and not w.editor.packed.isVisibleTo(w.editor)
    w.undo_stack.undo()
    assert doc.schedule.to_json() == before and "reads B through B.in(prod)" in w.editor.heading.text()
    w.undo_stack.redo()
    assert doc.schedule.wrappers == {}
    # A stage that reads no packed copy offers none.
    w.select_stage("C")
    assert not w.editor.packed.isVisibleTo(w.editor)


def test_the_prediction_of_a_packed_schedule_says_its_copies_are_not_modelled(open_window) -> None:
    w = open_window("matmul", "hand")
    label = w.performance.values["Predicted"]
    assert "copies not modelled" in label.text() and "B.in(prod)" in label.toolTip()
    w.select_stage("prod")
    w.editor.packed_menu.aboutToShow.emit()  # what opening the menu does
    w.editor.packed_menu.actions()[0].trigger()  # remove B.in(prod)
    assert not w.doc.schedule.wrappers and "copies not modelled" not in label.text()


def test_a_storage_directive_is_listed_and_not_opened_in_the_form(window: MainWindow) -> None:
    # The form has no fields for a layout (reorder_storage, store_in, pack_input): opening one
    # says so in the editor's message bar and changes nothing.
    doc = window.doc
    st = doc.pipeline.stage("blur_x")
    sched = doc.schedule.copy()
    S(sched, "blur_x").compute_root().reorder_storage(*(d.name for d in reversed(st.dims)))
    doc.replace_schedule(sched)
    window.select_stage("blur_x")
    before = doc.schedule_hash
    rows = [window.editor.list.item(k).text() for k in range(window.editor.list.count())]
    assert any("reorder_storage" in r for r in rows)
    window.editor.list.setCurrentRow(next(k for k, r in enumerate(rows) if "reorder_storage" in r))
    window.editor.begin_edit()
    assert "the form does not edit it" in window.editor.error.text()
    assert not window.editor.form_box.isVisible() and window.editor.editing is None
    assert doc.schedule_hash == before
