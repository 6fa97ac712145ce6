"""The lesson browser (issue 18 item 4): the Lessons dock.

A list of the lessons (the shipped ones from resources/lessons/, then those of a teacher's
folder: the "lessons/folder" setting, Folder…, or `--lessons DIR`) with a check mark on each
one passed, and a broken file listed with its path and the field at fault. The selected
lesson's text, goal and the conditions its check evaluates; hints revealed one at a time;
Start lesson opens its pipeline with its starting schedule (an undoable step, as a schedule
file does); Check evaluates engine.teaching.lessons.check on the document's schedule off the
GUI thread (a measured condition measures through engine.api.measure with verification, on
this dock's own worker thread and Runner) and shows each condition's result. Passing is
recorded per user in QSettings ("lessons/passed/ID").

Presentation mode steps through a lesson with `next_step` / `previous_step` (PageDown /
PageUp): the text, then each hint, then the check, then the next lesson.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QEventLoop, QSettings, Qt, QTimer, Signal, Slot
from PySide6.QtWidgets import (
    QDockWidget,
    QFileDialog,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSplitter,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from engine import api
from engine.ir import Pipeline
from engine.measure import Measurement, Runner
from engine.schedule import Schedule
from engine.teaching.lessons import CheckResult, Lesson, LessonError, check, load_lessons

from ..background import Background, Job, Outcome
from ..flow_row import FlowRow
from ..model.commands import ScheduleCommand

if TYPE_CHECKING:
    from ..main_window import MainWindow

PASSED_KEY = "lessons/passed/"  # + lesson id -> True once its check passed
FOLDER_KEY = "lessons/folder"  # a teacher's folder of lessons, listed after the shipped ones
PASS, FAIL = "\u2713", "\u2717"  # ✓ ✗
BROKEN = "\u26a0"  # ⚠
CHECK_WAIT_MS = 300_000  # open_lesson(wait=True): the longest wait for a check (a measured one measures twice)


class _Checker:
    """What Check runs on the dock's worker thread: the lesson's check, with a Runner made
    there on first use (measurements stay on the thread that made it) and the verified
    measurements of this session remembered, so the start is measured once per lesson."""

    def __init__(self) -> None:
        self.runner: Runner | None = None
        self.measured: dict[tuple[str, str], Measurement] = {}

    def run(self, lesson: Lesson, p: Pipeline, sched: Schedule, job: Job) -> CheckResult:
        def measure(pipe: Pipeline, s: Schedule) -> Measurement:
            key = (pipe.content_hash(), s.content_hash())
            if key in self.measured:
                return self.measured[key]
            if self.runner is None:
                self.runner = Runner()
            job.report(f"measuring {s.name or 'the schedule'}…")
            m = api.measure(pipe, s, self.runner, should_cancel=job.cancel.is_set)
            if m.ok and m.verified:
                self.measured[key] = m
            return m

        return check(lesson, p, sched, measure=measure)

    def close(self) -> None:
        if self.runner is not None:
            self.runner.close()
            self.runner = None


class LessonsView(QWidget):
    """The lesson browser. `next_step` / `previous_step` step through a lesson."""

    lesson_started = Signal(str)  # lesson id
    checked = Signal(object)  # CheckResult of the current lesson

    def __init__(self, window: MainWindow, settings: tuple[str, str], folder: Path | None = None) -> None:
        super().__init__()
        self.setObjectName("lessons_view")
        self.main, self.settings = window, settings
        self.folder = folder if folder is not None else self._saved_folder()
        self.lessons: list[Lesson] = []
        self.problems: list[LessonError] = []
        self.hints_shown = 0
        self.step = 0  # 0: the text; 1..n: hints revealed; n + 1: checked
        self.result: CheckResult | None = None
        self.status_text = ""
        self._checker = _Checker()
        self.background = Background("lessons", parent=self)

        self.list = QListWidget()
        self.list.setObjectName("lessons_list")
        self.browser = QTextBrowser()
        self.browser.setObjectName("lesson_text")
        self.browser.setOpenExternalLinks(False)
        self.start_button = QPushButton("Start lesson")
        self.hint_button = QPushButton("Hint")
        self.check_button = QPushButton("Check")
        self.folder_button = QPushButton("Folder…")
        self.folder_button.setToolTip("Also list the lessons of a folder of your own (docs/LESSONS.md)")
        self.status = QLabel()
        self.status.setObjectName("lesson_status")
        self.status.setWordWrap(True)
        # Wraps in a narrow dock (the Pipelines list's width): the dock never widens the window's left column.
        buttons = FlowRow([self.start_button, self.hint_button, self.check_button, self.folder_button])
        pane = QWidget()
        pl = QVBoxLayout(pane)
        pl.setContentsMargins(0, 0, 0, 0)
        pl.addWidget(self.browser, 1)
        pl.addWidget(buttons)
        pl.addWidget(self.status)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.list)
        split.addWidget(pane)
        split.setStretchFactor(1, 3)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addWidget(split)

        self.list.currentRowChanged.connect(self._on_row)
        self.start_button.clicked.connect(self.start_lesson)
        self.hint_button.clicked.connect(self.show_hint)
        self.check_button.clicked.connect(self.run_check)
        self.folder_button.clicked.connect(self._choose_folder)
        self.reload()

    # --- the list ---------------------------------------------------------------------
    def _saved_folder(self) -> Path | None:
        v = QSettings(*self.settings).value(FOLDER_KEY, "")
        return Path(str(v)) if v else None

    def set_folder(self, folder: Path | None, remember: bool = True) -> None:
        """List the lessons of `folder` after the shipped ones (None: the shipped ones only)."""
        self.folder = folder
        if remember:
            QSettings(*self.settings).setValue(FOLDER_KEY, str(folder) if folder else "")
        self.reload()

    @Slot()
    def _choose_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Folder of lessons", str(self.folder or Path.home()))
        if path:
            self.set_folder(Path(path))

    def reload(self) -> None:
        """Read the lessons again (the shipped ones, then the folder's) and refill the list."""
        current = self.current()
        lessons, problems = load_lessons()
        if self.folder is not None:
            more, more_problems = load_lessons(self.folder)
            known = {x.id for x in lessons}
            lessons += [x for x in more if x.id not in known]
            problems += more_problems
            problems += [LessonError(x.path or self.folder, "id", f"{x.id!r} is a shipped lesson's id") for x in more if x.id in known]
        self.lessons, self.problems = lessons, problems
        self.list.blockSignals(True)
        self.list.clear()
        for lesson in lessons:
            item = QListWidgetItem(self._label(lesson))
            item.setData(Qt.ItemDataRole.UserRole, lesson.id)
            item.setToolTip(str(lesson.path or ""))
            self.list.addItem(item)
        for err in problems:
            item = QListWidgetItem(f"{BROKEN} broken: {err.path.name} (field {err.field!r})")
            item.setData(Qt.ItemDataRole.UserRole, None)
            item.setToolTip(str(err))
            item.setForeground(Qt.GlobalColor.darkRed)
            self.list.addItem(item)
        self.list.blockSignals(False)
        if not self.select(current.id if current else "") and self.list.count():
            self.list.setCurrentRow(0)
        self._on_row(self.list.currentRow())

    def _label(self, lesson: Lesson) -> str:
        return f"{PASS if self.passed(lesson.id) else '  '} {lesson.title}"

    def passed(self, lesson_id: str) -> bool:
        """Whether this user has passed the lesson's check (remembered across sessions)."""
        return bool(QSettings(*self.settings).value(PASSED_KEY + lesson_id, False, type=bool))

    def current(self) -> Lesson | None:
        item = self.list.currentItem()
        lesson_id = item.data(Qt.ItemDataRole.UserRole) if item is not None else None
        return next((x for x in self.lessons if x.id == lesson_id), None)

    def current_problem(self) -> LessonError | None:
        row = self.list.currentRow() - len(self.lessons)
        return self.problems[row] if 0 <= row < len(self.problems) else None

    def select(self, lesson_id: str) -> bool:
        """Show the lesson `lesson_id` (not started). False if there is none."""
        for row in range(len(self.lessons)):
            if self.lessons[row].id == lesson_id:
                self.list.setCurrentRow(row)
                return True
        return False

    @Slot(int)
    def _on_row(self, _row: int) -> None:
        self.hints_shown, self.step, self.result = 0, 0, None
        self._set_status("")
        self._render()

    # --- the lesson -------------------------------------------------------------------
    def _render(self) -> None:
        lesson, problem = self.current(), self.current_problem()
        self.start_button.setEnabled(lesson is not None)
        self.check_button.setEnabled(lesson is not None and not self.background.busy)
        self.hint_button.setEnabled(lesson is not None and self.hints_shown < len(lesson.hints))
        if lesson is not None:
            self.hint_button.setText(f"Hint ({self.hints_shown}/{len(lesson.hints)})")
        if problem is not None:
            self.browser.setHtml(
                f"<h3>{BROKEN} A broken lesson file</h3><p><b>{html.escape(str(problem.path))}</b></p>"
                f"<p>field <code>{html.escape(problem.field)}</code>: {html.escape(problem.reason)}</p>"
                "<p>Fix the file (docs/LESSONS.md describes the format); the other lessons are listed as usual.</p>"
            )
            return
        if lesson is None:
            self.browser.setHtml("<p>No lessons.</p>")
            return
        paras = "".join(f"<p>{html.escape(t)}</p>" for t in lesson.text.split("\n\n"))
        rows = []
        results = {id(r.condition): r for r in self.result.details} if self.result else {}
        for c in lesson.check:
            r = results.get(id(c))
            mark = "\u2022" if r is None else (PASS if r.passed else FAIL)
            colour = "" if r is None else ("color:#1b7f3b" if r.passed else "color:#c62828")
            detail = f"<br><small>{html.escape(r.detail)}</small>" if r is not None else ""
            rows.append(f'<li style="{colour}">{mark} {html.escape(c.describe())}{detail}</li>')
        hints = "".join(f"<li>{html.escape(h)}</li>" for h in lesson.hints[: self.hints_shown])
        done = f" <span style='color:#1b7f3b'>{PASS} passed</span>" if self.passed(lesson.id) else ""
        where = f"{lesson.pipeline} ({lesson.size})" + (f", stage {lesson.stage}" if lesson.stage else "")
        self.browser.setHtml(
            f"<h3>{html.escape(lesson.title)}{done}</h3><p><i>Pipeline: {html.escape(where)}</i></p>{paras}"
            f"<p><b>Goal:</b> {html.escape(lesson.goal)}</p><p><a name='check'></a><b>The check:</b></p><ul>{''.join(rows)}</ul>"
            + (f"<p><a name='hints'></a><b>Hints:</b></p><ol>{hints}</ol>" if hints else "")
        )

    def _set_status(self, text: str) -> None:
        self.status_text = text
        self.status.setText(text)

    def _on_pipeline(self, lesson: Lesson) -> bool:
        doc = self.main.doc
        return doc.pipeline is not None and doc.pipeline.content_hash() == lesson.load_pipeline().content_hash()

    @Slot()
    def start_lesson(self) -> bool:
        """Open the lesson's pipeline with its starting schedule, as File → Open does."""
        lesson = self.current()
        w = self.main
        if lesson is None or not w.projects.maybe_save():
            return False
        if w.pipeline_size != lesson.size:
            w.use_size(lesson.size)
        if not w.open_pipeline(lesson.pipeline, "default"):
            return False
        assert w.doc.pipeline is not None
        start = lesson.start_schedule(w.doc.pipeline)
        if start.content_hash() != w.doc.schedule_hash:  # undoable, like applying a schedule file
            w.undo_stack.push(ScheduleCommand(w.doc, start, f"start lesson: {lesson.title}"))
        w.show_workspace()
        if lesson.stage:
            w.select_stage(lesson.stage)
        self._set_status(f"Started: {lesson.title}. Edit the schedule, then Check.")
        self.lesson_started.emit(lesson.id)
        return True

    @Slot()
    def show_hint(self) -> bool:
        """Reveal the next hint; False when all are shown."""
        lesson = self.current()
        if lesson is None or self.hints_shown >= len(lesson.hints):
            return False
        self.hints_shown += 1
        self.step = max(self.step, self.hints_shown)
        self._render()
        self.browser.scrollToAnchor("hints")  # what was just revealed, in view
        return True

    @Slot()
    def run_check(self) -> Job | None:
        """Evaluate the lesson's check on the document's schedule, off the GUI thread."""
        lesson, doc = self.current(), self.main.doc
        if lesson is None or doc.pipeline is None or self.background.busy:
            return None
        if not self._on_pipeline(lesson):
            self._set_status(f"This lesson is about {lesson.pipeline} ({lesson.size}): Start lesson opens it.")
            return None
        p, sched = doc.pipeline, doc.schedule.copy()
        self._set_status("Checking…" + (" (measuring: a few seconds)" if lesson.measured else ""))
        self.check_button.setEnabled(False)
        return self.background.submit(
            lambda job: self._checker.run(lesson, p, sched, job), lambda out: self._on_checked(lesson, out), self._set_status
        )

    def _on_checked(self, lesson: Lesson, out: Outcome) -> None:
        if out.error is not None:
            self._set_status(f"The check could not run: {out.error_text}")
            self._render()
            return
        result: CheckResult = out.value
        if self.current() is lesson:
            self.result = result
        if result.passed:
            QSettings(*self.settings).setValue(PASSED_KEY + lesson.id, True)
            row = self.lessons.index(lesson)
            item = self.list.item(row)
            if item is not None:
                item.setText(self._label(lesson))
        n = sum(r.passed for r in result.details)
        self._set_status(
            f"{PASS} Passed: {lesson.title}" if result.passed else f"{FAIL} Not yet: {n} of {len(result.details)} conditions hold"
        )
        self._render()
        self.browser.scrollToAnchor("check")  # each condition's result, in view
        self.checked.emit(result)

    # --- stepping (presentation mode: PageDown / PageUp) ---------------------------------
    def next_step(self) -> None:
        """The next step of the lesson: a hint, then the check; after that the next lesson."""
        lesson = self.current()
        if lesson is None:
            return
        if self.show_hint():
            return
        if self.step <= len(lesson.hints):
            self.step = len(lesson.hints) + 1
            self.run_check()
            return
        row = self.lessons.index(lesson)
        if row + 1 < len(self.lessons):
            self.list.setCurrentRow(row + 1)

    def previous_step(self) -> None:
        """Back one step: hide the last hint shown; at the text, the previous lesson."""
        lesson = self.current()
        if lesson is None:
            return
        if self.hints_shown > 0:
            self.hints_shown -= 1
            self.step = self.hints_shown
            self.result = None
            self._render()
            return
        row = self.lessons.index(lesson)
        if row > 0:
            self.list.setCurrentRow(row - 1)

    def shutdown(self) -> None:
        self.background.shutdown(finally_=self._checker.close)


class Lessons:
    """What `install` adds to the window: the Lessons dock and its view."""

    def __init__(self, window: MainWindow, settings: tuple[str, str], folder: Path | None = None) -> None:
        self.window = window
        self.view = LessonsView(window, settings, folder)
        self.dock = QDockWidget("Lessons", window)
        self.dock.setObjectName("lessons_dock")
        self.dock.setWidget(self.view)
        window.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, self.dock)
        window.tabifyDockWidget(window.pipelines_dock, self.dock)
        window.pipelines_dock.raise_()
        # View → Lessons, beside View → Teaching (before Presentation Mode)
        window.chrome.view_menu.insertAction(window.teaching.presentation.action, self.dock.toggleViewAction())

    def open_lesson(self, lesson_id: str, hints: int = 0, run_check: bool = False, wait: bool = False) -> bool:
        """Show the dock on `lesson_id`, start it, reveal `hints` hints and optionally run its
        check (`wait`: until the result is shown, for screenshots). False if there is no such lesson."""
        if not self.view.select(lesson_id):
            return False
        self.dock.show()
        self.dock.raise_()
        # Wide enough to read a lesson beside the graph (the dock opens at the Pipelines list's width).
        self.window.resizeDocks([self.dock], [max(self.dock.width(), self.window.width() * 3 // 10)], Qt.Orientation.Horizontal)
        if not self.view.start_lesson():
            return False
        for _ in range(hints):
            self.view.show_hint()
        if run_check and self.view.run_check() is not None and wait:
            loop = QEventLoop()
            self.view.checked.connect(loop.quit)
            QTimer.singleShot(CHECK_WAIT_MS, loop.quit)
            loop.exec()
        return True

    def shutdown(self) -> None:
        self.view.shutdown()


def install(window: MainWindow, settings: tuple[str, str], folder: Path | None = None) -> Lessons:
    return Lessons(window, settings, folder)


__all__ = ["Lessons", "LessonsView", "install"]
