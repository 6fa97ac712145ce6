"""Where file dialogs start: the folder the user last opened or saved in, else their
Documents folder, else home (never the directory the app happened to be started from)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSettings, QStandardPaths

LAST_FOLDER_KEY = "lastFolder"


def start_folder(settings: tuple[str, str]) -> Path:
    """The folder a file dialog opens in."""
    saved = QSettings(*settings).value(LAST_FOLDER_KEY, "")
    if isinstance(saved, str) and saved and Path(saved).is_dir():
        return Path(saved)
    docs = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DocumentsLocation)
    if docs and Path(docs).is_dir():
        return Path(docs)
    return Path.home()


def remember_folder(settings: tuple[str, str], path: Path) -> None:
    """A file was chosen in a dialog: the next dialog starts in its folder."""
    folder = path if path.is_dir() else path.parent
    QSettings(*settings).setValue(LAST_FOLDER_KEY, str(folder.resolve()))
