"""Read-only monospace text views: the loop nest (with per-stage line highlighting), the
schedule as JSON or Halide source, the lowered Stmt; and the pane that adds Copy/Export."""

from __future__ import annotations

import contextlib
import glob
import os
import secrets
import stat
import time
from pathlib import Path

from PySide6.QtCore import QEvent, Slot
from PySide6.QtGui import QFontDatabase, QGuiApplication, QPalette, QTextCursor
from PySide6.QtWidgets import QApplication, QFileDialog, QHBoxLayout, QLabel, QMessageBox, QPlainTextEdit, QToolButton, QVBoxLayout, QWidget


class CodeView(QPlainTextEdit):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setReadOnly(True)
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self._restyling = False
        self._keep_selection_visible()

    def _keep_selection_visible(self) -> None:
        """Keep a selection as visible when focus moves to another panel (the stage list),
        in the colours of the current theme."""
        # Only these two roles are set (QPalette() resolves nothing else), so every other
        # colour keeps following the application palette, and its changes reach this view.
        theme, pal = QApplication.palette(self), QPalette()
        for role in (QPalette.ColorRole.Highlight, QPalette.ColorRole.HighlightedText):
            pal.setColor(QPalette.ColorGroup.Inactive, role, theme.color(QPalette.ColorGroup.Active, role))
        self._restyling = True  # setPalette sends PaletteChange again
        try:
            self.setPalette(pal)
        finally:
            self._restyling = False

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802  # Qt override
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and not self._restyling:
            self._keep_selection_visible()  # the theme changed: take its highlight colours

    def set_text(self, text: str) -> None:
        if text != self.toPlainText():
            self.setPlainText(text)


class LoopNestView(CodeView):
    """The loop nest as pseudo-code; `highlight_stage` selects one stage's lines."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._spans: dict[str, tuple[int, int]] = {}

    def set_loopnest(self, text: str, spans: dict[str, tuple[int, int]]) -> None:
        self._spans = dict(spans)
        self.set_text(text)

    def selected_lines(self) -> tuple[int, int] | None:
        """First and last selected line (0-based), or None without a selection."""
        c = self.textCursor()
        if not c.hasSelection():
            return None
        doc = self.document()
        return doc.findBlock(c.selectionStart()).blockNumber(), doc.findBlock(c.selectionEnd()).blockNumber()

    def highlight_stage(self, stage: str | None) -> bool:
        """Select the stage's lines and scroll to them; False (and no selection) if unknown."""
        span = self._spans.get(stage or "")
        if span is None:
            c = self.textCursor()
            c.clearSelection()
            self.setTextCursor(c)
            return False
        doc = self.document()
        first, last = doc.findBlockByNumber(span[0]), doc.findBlockByNumber(span[1])
        # Anchor at the end, cursor at the start: the view scrolls to the stage's first line.
        c = QTextCursor(doc)
        c.setPosition(last.position() + last.length() - 1)
        c.setPosition(first.position(), QTextCursor.MoveMode.KeepAnchor)
        self.setTextCursor(c)
        self.ensureCursorVisible()
        return True


class SourcePane(QWidget):
    """A CodeView under a slim bar with Copy and Export… buttons (and a note on the left)."""

    def __init__(self, view: CodeView, suffix: str, what: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.view, self.suffix, self.what = view, suffix, what
        self.note = QLabel()
        self.note.setStyleSheet("color: palette(placeholder-text)")
        self.copy_button = QToolButton()
        self.copy_button.setText("Copy")
        self.copy_button.setToolTip(f"Copy the {what} to the clipboard")
        self.copy_button.clicked.connect(self.copy)
        self.export_button = QToolButton()
        self.export_button.setText("Export…")
        self.export_button.setToolTip(f"Save the {what} to a {suffix} file")
        self.export_button.clicked.connect(self.export_dialog)
        bar = QHBoxLayout()
        bar.setContentsMargins(6, 2, 6, 2)
        bar.addWidget(self.note, 1)
        bar.addWidget(self.copy_button)
        bar.addWidget(self.export_button)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addLayout(bar)
        lay.addWidget(view, 1)
        self.default_name = "schedule"

    @Slot()
    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.view.toPlainText())

    def export(self, path: str) -> None:
        """Write the text to `path` (atomically: a crash never leaves half a file)."""
        atomic_write(Path(path), self.view.toPlainText())

    @Slot()
    def export_dialog(self) -> None:
        start = str(Path.cwd() / f"{self.default_name}{self.suffix}")
        path, _ = QFileDialog.getSaveFileName(self, f"Export {self.what}", start, f"*{self.suffix};;All files (*)")
        if not path:
            return
        try:
            self.export(path)
        except OSError as exc:
            QMessageBox.warning(self, f"Cannot export {self.what}", f"{path}: {exc.strerror or exc}")


STALE_TEMP_S = 600  # a temporary file this old beside its target is left over from a killed save


def atomic_write(path: Path, text: str) -> None:
    """Write to a temporary file beside `path`, then rename it over `path`. The temporary
    file is removed on any failure; the result keeps the mode of the file it replaces (a
    new file gets the umask's, as open() gives; mkstemp's would be 600); temporary files a
    killed earlier save left behind are removed after a successful one."""
    try:
        mode: int | None = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = None
    while True:
        tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # 0o666 less the umask
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            if mode is not None:
                os.chmod(tmp, mode)
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    cutoff = time.time() - STALE_TEMP_S
    for old in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        with contextlib.suppress(OSError):  # gone already, or not ours to remove
            if old.stat().st_mtime < cutoff:
                old.unlink()
