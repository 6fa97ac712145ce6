"""The Lessons dock (issue 18 item 4) and the editor's Why? link (item 6), in a real window:
the browser lists the shipped lessons, Start opens the lesson's pipeline and starting
schedule, Check runs off the GUI thread and records a pass per user, a broken lesson file is
listed with its path and field, presentation mode steps through a lesson, and a refused edit
links to its explanation."""

import json
import shutil

from PySide6.QtCore import QSettings

from app.main_window import SETTINGS_APP, SETTINGS_ORG
from app.teaching.explain_view import ExplainView
from app.teaching.lessons_view import BROKEN, PASS, PASSED_KEY, LessonsView
from engine.teaching.lessons import load_lessons

SHIPPED, _ = load_lessons()


def _place(w, stage, kind, consumer, loop):
    """Add compute_at / store_at to `stage` through the editor's form, as a user does."""
    w.select_stage(stage)
    w.editor.begin_add()
    form = w.editor.form
    form.set_kind(kind)
    form.combo("consumer").setCurrentIndex(form.combo("consumer").findData(consumer))
    form.combo("consumer_loop").setCurrentIndex(form.combo("consumer_loop").findData(loop))
    form.apply_button.click()


def _forget_progress():
    QSettings(SETTINGS_ORG, SETTINGS_APP).remove("lessons")


def test_the_browser_lists_the_lessons_and_start_opens_the_pipeline_and_starting_schedule(open_window):
    _forget_progress()
    w = open_window("matmul")
    view = w.lessons.view
    assert [view.list.item(k).text().strip() for k in range(view.list.count())] == [x.title for x in SHIPPED]
    assert w.lessons.dock.objectName() == "lessons_dock"
    assert w.lessons.open_lesson("07_sliding_window")
    lesson = view.current()
    assert lesson is not None and lesson.id == "07_sliding_window"
    assert w.doc.pipeline is not None and w.doc.pipeline.name == "blur" and w.pipeline_size == "small"
    assert w.doc.schedule_hash == lesson.start_schedule(w.doc.pipeline).content_hash()
    assert w.current_stage() == "blur_y"
    assert "Fusion without redundancy" in view.browser.toPlainText() and lesson.goal in view.browser.toPlainText()
    w.undo_stack.undo()  # the start is one undoable step, like applying a schedule file
    assert w.doc.schedule.of("blur_x").compute().kind == "compute_root"


def test_check_runs_off_the_gui_thread_and_records_a_pass(open_window, qtbot):
    _forget_progress()
    w = open_window("blur")
    view = w.lessons.view
    assert w.lessons.open_lesson("01_inline_root_at")
    with qtbot.waitSignal(view.checked, timeout=30_000) as first:
        assert view.run_check() is not None
    assert not first.args[0].passed and not view.passed("01_inline_root_at")
    assert "Not yet: 0 of 1" in view.status.text() and "computed at root" in view.browser.toPlainText()
    # the student's edit, through the editor as a user makes it
    _place(w, "blur_x", "compute_at", "blur_y", "y")
    assert w.editor.error.isHidden() and w.doc.schedule.of("blur_x").compute().kind == "compute_at"
    with qtbot.waitSignal(view.checked, timeout=30_000) as second:
        view.run_check()
    assert second.args[0].passed
    assert view.passed("01_inline_root_at") and view.list.currentItem().text().startswith(PASS)
    assert f"{PASS} Passed" in view.status.text()
    # recorded per user: a new browser (another session) shows it passed
    again = LessonsView(w, (SETTINGS_ORG, SETTINGS_APP))
    qtbot.addWidget(again)
    assert again.list.item(0).text().startswith(PASS) and not again.list.item(1).text().startswith(PASS)
    assert QSettings(SETTINGS_ORG, SETTINGS_APP).value(PASSED_KEY + "01_inline_root_at", False, type=bool)
    again.shutdown()
    # a check on another pipeline says to start the lesson instead
    view.select("03_loop_order")
    assert view.run_check() is None and "Start lesson opens it" in view.status.text()


def test_a_broken_lesson_is_listed_with_its_path_and_field_and_the_others_stay(open_window, tmp_path):
    w = open_window("blur")
    view = w.lessons.view
    good = SHIPPED[3]
    assert good.path is not None
    body = json.loads(good.path.read_text())
    body["id"] = "teacher_lesson"
    (tmp_path / "mine.json").write_text(json.dumps(body))
    body["id"] = "broken_one"
    body["check"] = [{"kind": "vectorized", "stage": "nosuch", "width": 8}]
    (tmp_path / "broken.json").write_text(json.dumps(body))
    shutil.copy(good.path, tmp_path / "dup.json")  # a shipped id again: refused, named
    view.set_folder(tmp_path, remember=False)
    texts = [view.list.item(k).text() for k in range(view.list.count())]
    assert len(texts) == len(SHIPPED) + 1 + 2
    assert texts[len(SHIPPED)].strip() == good.title  # the teacher's lesson, after the shipped ones
    broken = [t for t in texts if t.startswith(BROKEN)]
    assert broken == [f"{BROKEN} broken: broken.json (field 'check[0].stage')", f"{BROKEN} broken: dup.json (field 'id')"]
    view.list.setCurrentRow(texts.index(broken[0]))
    shown = view.browser.toPlainText()
    assert str(tmp_path / "broken.json") in shown and "check[0].stage" in shown and "nosuch" in shown
    assert not view.start_button.isEnabled() and not view.check_button.isEnabled()


def test_presentation_mode_steps_through_a_lesson(open_window, qtbot):
    _forget_progress()
    w = open_window("blur")
    view = w.lessons.view
    assert w.lessons.open_lesson("04_vectorize")
    lesson = view.current()
    assert lesson is not None
    assert w.teaching.presentation.lesson_step(1)  # PageDown: the first hint
    assert view.hints_shown == 1 and lesson.hints[0] in view.browser.toPlainText()
    assert lesson.hints[1] not in view.browser.toPlainText()
    w.teaching.presentation.lesson_step(-1)  # PageUp hides it again
    assert view.hints_shown == 0 and lesson.hints[0] not in view.browser.toPlainText()
    for _ in lesson.hints:
        view.next_step()
    with qtbot.waitSignal(view.checked, timeout=30_000):
        view.next_step()  # after the last hint: the check
    view.next_step()  # then the next lesson
    assert view.current() is not None and view.current().id == "05_parallel"


def test_a_refused_edit_links_to_its_explanation(open_window, qtbot):
    w = open_window("blur")
    before = w.doc.schedule_hash
    _place(w, "blur_x", "store_at", "blur_y", "y")
    assert w.doc.schedule_hash == before  # refused
    assert w.editor.explanation is not None and w.editor.explanation.kind == "store_outside_compute"
    assert not w.editor.error.isHidden() and "its storage must enclose" in w.editor.error.text()
    assert w.editor.why.isVisible() and "Why?" in w.editor.why.text()
    with qtbot.waitSignal(w.editor.why.linkActivated, timeout=1000):
        w.editor.why.linkActivated.emit("why")  # what a click on the link emits
    dialogs = [c for c in w.editor.findChildren(ExplainView)]
    assert dialogs and dialogs[-1].explanation.kind == "store_outside_compute"
    picture = dialogs[-1].picture.text()
    assert "allocate blur_x" in picture and "#c62828" in picture  # the refused place, marked red
    dialogs[-1].window().close()
    # a refusal with no explanation has no link
    w.editor.form.set_kind("split")
    w.editor.form.combo("loop").setCurrentIndex(w.editor.form.combo("loop").findData("x"))
    w.editor.form.edit("outer").setText("y")  # a name already used
    w.editor.form.edit("inner").setText("xi")
    w.editor.form.apply_button.click()
    assert "'y' is already used" in w.editor.error.text()
    assert w.editor.explanation is None and not w.editor.why.isVisible()


def test_the_start_page_hides_the_lessons_dock_and_view_menu_shows_it_again(open_window, qtbot):
    w = open_window("blur")
    w.lessons.dock.show()
    w.lessons.dock.raise_()
    assert w.lessons.dock.isVisible()
    w.show_start_page()
    assert not w.lessons.dock.isVisible() and not w.teaching.dock.isVisible()
    w.show_workspace()
    qtbot.waitUntil(w.lessons.dock.isVisible)
    toggle = w.lessons.dock.toggleViewAction()
    assert toggle in w.chrome.view_menu.actions() and toggle.text() == "Lessons"


def test_the_lesson_options_of_the_command_line(qapp, tmp_path, capsys):
    from app.main import run_app

    _forget_progress()
    out = tmp_path / "lesson.png"
    # a lesson started with a hint and its check run before the capture (which waits for it)
    assert run_app(["--size", "small", "--lesson", "04_vectorize", "--lesson-hints", "1", "--lesson-check", "--screenshot", str(out)]) == 0
    assert out.read_bytes().startswith(b"\x89PNG")
    assert run_app(["--lesson", "no_such_lesson", "--screenshot", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no lesson 'no_such_lesson'" in err and "04_vectorize" in err and err.count("error:") == 1
    # --lessons DIR lists a teacher's folder for this run
    body = json.loads(SHIPPED[0].path.read_text())
    body["id"] = "from_a_teacher"
    (tmp_path / "mine.json").write_text(json.dumps(body))
    assert run_app(["--size", "small", "--lessons", str(tmp_path), "--lesson", "from_a_teacher", "--screenshot", str(out)]) == 0
