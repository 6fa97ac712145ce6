"""The cost model on this machine (issue 13 item 3): how wrong it has been here, and
fine-tuning it on the user's own measurements.

- A line under the performance summary, "model error on your N measurements: median xE,
  tau T" (engine.costmodel.finetune.model_error over every verified measurement of this
  host in the database, predicted by the model the app predicts with), recomputed off the
  GUI thread whenever a fresh verified measurement arrives; it also says when the model
  was trained on another machine.
- Measure → Fine-tune on My Measurements…: `finetune_on_db` on a background thread, with a
  progress dialog whose Cancel stops it (nothing is saved then); the fine-tuned model is
  saved atomically in the user data directory, and the current schedule is predicted again.
- Measure → Reset to Shipped Cost Model: removes the fine-tuned model.

The views only show what the engine computes; nothing here computes an error itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QBoxLayout, QLabel, QMenu, QMessageBox, QProgressDialog

from engine.costmodel import default_choice
from engine.costmodel import finetune as FT
from engine.database import default_path
from engine.measure import Measurement, default_threads

from .background import Background, Job, Outcome

if TYPE_CHECKING:
    from .main_window import MainWindow
    from .workers import MeasureRequest


@dataclass(frozen=True)
class LineState:
    """What the error line shows: the engine's error line and its note about the host."""

    line: FT.ErrorLine
    note: str

    @property
    def text(self) -> str:
        return self.line.text + (f" · {self.note}: Fine-tune adapts it" if self.note else "")


def compute_line(db_path: str, threads: int, cache: dict[tuple[str, str], float] | None = None) -> LineState:
    """The error line of the model in use on this host's stored measurements (any thread);
    `cache`: the predictions of earlier calls with the same model (FT.model_error)."""
    env = FT.current_environment(threads)
    choice = default_choice()
    return LineState(FT.model_error(choice.model, db_path, env, cache=cache), FT.host_note(choice, env))


class ModelOnThisMachine(QObject):
    """The error line, the fine-tune and reset actions, and their background threads."""

    def __init__(self, w: MainWindow) -> None:
        super().__init__(w)
        self.w = w
        self.lines = Background("model error", latest_only=True, parent=self)
        self.tuner = Background("fine-tune", parent=self)
        self.state: LineState | None = None
        self.closed = False  # after shutdown: a refresh still queued (the first line's timer) does nothing
        self.result: dict[str, Any] | None = None  # the last fine-tune's report
        self.error = ""  # the last fine-tune's failure, one line
        self.dialog: QProgressDialog | None = None
        # Predictions of measured schedules by the model in use, kept between lines (only the new
        # measurement is predicted after each one); written on the line thread only, replaced when the model changes.
        self._predicted: dict[tuple[str, str], float] = {}
        self.label = QLabel("model error on your measurements: computing…")
        self.label.setObjectName("model_error_line")
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.label.setToolTip(
            "How far the cost model's predictions have been from your verified measurements on this machine: the median "
            "factor between predicted and measured time, and Kendall τ of their order within each pipeline (1: same order)"
        )
        self.finetune_action = QAction("&Fine-tune on My Measurements…", w)
        self.finetune_action.setObjectName("finetune_model")
        self.finetune_action.setStatusTip("Refit the cost model on this machine's verified measurements (held-out error before/after)")
        self.finetune_action.triggered.connect(self.start_finetune)
        self.reset_action = QAction("&Reset to Shipped Cost Model", w)
        self.reset_action.setObjectName("reset_model")
        self.reset_action.setStatusTip("Remove the fine-tuned cost model: predictions come from the shipped one again")
        self.reset_action.triggered.connect(self.reset)

    @property
    def db_path(self) -> str:
        return str(default_path())

    def refresh(self) -> None:
        """Recompute the error line off the GUI thread (a newer request supersedes an older)."""
        if self.closed:
            return
        db, threads, cache = self.db_path, default_threads(), self._predicted
        self.lines.submit(lambda _job: compute_line(db, threads, cache), on_done=self._show_line)

    def _show_line(self, out: Outcome) -> None:
        if out.error is not None:
            self.label.setText(f"model error on your measurements: unavailable ({out.error_text})")
            return
        self.state = out.value
        self.label.setText(self.state.text)

    def on_measured(self, _req: MeasureRequest, m: Measurement, cancelled: bool) -> None:
        if not cancelled and m.ok and m.verified and not m.cached:
            self.refresh()

    # --- fine-tuning -----------------------------------------------------------------------
    def start_finetune(self) -> Job | None:
        """Fine-tune on a background thread behind a progress dialog with Cancel."""
        if self.tuner.busy:
            return None
        db, threads = self.db_path, default_threads()
        self.result, self.error = None, ""

        def run(job: Job) -> dict[str, Any]:
            env = FT.current_environment(threads)
            return FT.finetune_on_db(
                db, env, progress=lambda phase, done, total: job.report((phase, done, total)), should_cancel=job.cancel.is_set
            )

        dialog = self.dialog = QProgressDialog("Fine-tuning the cost model on your measurements…", "Cancel", 0, 100, self.w)
        dialog.setWindowTitle("Fine-tune on My Measurements")
        dialog.setWindowModality(Qt.WindowModality.WindowModal)
        dialog.setMinimumDuration(0)
        dialog.setAutoClose(False)
        dialog.setAutoReset(False)
        job = self.tuner.submit(run, on_done=self._tuned, on_progress=self._progress)
        dialog.canceled.connect(job.cancel.set)
        dialog.show()
        return job

    def _progress(self, record: Any) -> None:
        phase, done, total = record
        if self.dialog is not None:
            self.dialog.setLabelText(f"Fine-tuning the cost model on your measurements: {phase} {done}/{total}")
            self.dialog.setValue(int(100 * done / max(1, total)))

    def _tuned(self, out: Outcome) -> None:
        if self.dialog is not None:
            self.dialog.close()
            self.dialog = None
        if out.cancelled or isinstance(out.error, FT.Cancelled):
            self.error = "fine-tuning cancelled: the current model is kept"
        elif out.error is not None:
            self.error = f"fine-tuning not done: {out.error}"
        else:
            self.result = rep = out.value
            saved = "saved; predictions now use it" if rep.get("saved") else rep.get("not_saved", "not saved")
            msg = (
                f"Fine-tuned on {rep['n_train']} measurements; on {rep['n_test']} held out: "
                f"median ×{rep['before']['median_factor']:.2f} → ×{rep['after']['median_factor']:.2f}, "
                f"τ {_tau(rep['before'])} → {_tau(rep['after'])}; {saved}"
            )
            self.w.statusBar().showMessage(msg, 15000)
            self._model_changed()
            if self.w.ask_to_save:  # interactive: the before/after in a box as well
                QMessageBox.information(self.w, "Fine-tune on My Measurements", msg)
            return
        self.w.statusBar().showMessage(self.error, 15000)
        if self.w.ask_to_save and not out.cancelled:
            QMessageBox.warning(self.w, "Fine-tune on My Measurements", self.error)

    def reset(self) -> bool:
        had = FT.reset()
        self.w.statusBar().showMessage(
            "Fine-tuned cost model removed: predictions come from the shipped model" if had else "No fine-tuned cost model to remove", 8000
        )
        self._model_changed()
        return had

    def _model_changed(self) -> None:
        self._predicted = {}  # another model: every prediction anew (a running line keeps the old dict)
        default_choice.cache_clear()
        self.w.doc.repredict()
        self.refresh()

    def shutdown(self) -> None:
        self.closed = True
        self.tuner.shutdown()
        self.lines.shutdown()


def _tau(err: dict[str, Any]) -> str:
    return "–" if err.get("kendall_tau") is None else f"{err['kendall_tau']:.2f}"


def install(w: MainWindow) -> ModelOnThisMachine:
    """The actions at the end of the Measure menu, the line under the performance summary's
    noise warning; the first line is computed once the window is up."""
    ctl = ModelOnThisMachine(w)
    for a in w.menuBar().actions():
        menu = a.menu()
        if isinstance(menu, QMenu) and w.chrome.actions.measure in menu.actions():
            menu.addSeparator()
            menu.addAction(ctl.finetune_action)
            menu.addAction(ctl.reset_action)
            break
    noise = w.performance.noise
    holder = noise.parentWidget()
    box = holder.layout() if holder is not None else None
    if isinstance(box, QBoxLayout):  # the summary column: the line right under the noise warning
        box.insertWidget(box.indexOf(noise) + 1, ctl.label)
    w.measure_service.finished.connect(ctl.on_measured)
    QTimer.singleShot(0, ctl.refresh)
    return ctl
