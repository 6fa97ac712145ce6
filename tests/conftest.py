"""Test set-up: Qt offscreen and a throwaway measurement database, before anything imports them."""

import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
_tmp = tempfile.mkdtemp(prefix="schedule-explorer-tests-")
os.environ["SCHEDULE_EXPLORER_DB"] = str(Path(_tmp) / "test.sqlite")
# The app's and search's predictions come from the analytic model in tests (its values are
# what tests reason about); the shipped learned model is tested on its own (test_costmodel).
os.environ["SCHEDULE_EXPLORER_COSTMODEL"] = "analytic"
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


import pytest  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _isolated_qsettings(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Keep the user's remembered window layout out of the tests, and the tests' out of it."""
    from PySide6.QtCore import QSettings, QStandardPaths

    QStandardPaths.setTestModeEnabled(True)
    folder = str(tmp_path_factory.mktemp("qsettings"))
    for fmt in (QSettings.Format.NativeFormat, QSettings.Format.IniFormat):
        QSettings.setPath(fmt, QSettings.Scope.UserScope, folder)
    QSettings.setDefaultFormat(QSettings.Format.IniFormat)


@pytest.fixture
def open_window(qtbot):
    """Factory: a shown MainWindow at small size on `pipeline`, auto-measure off, closed after the test."""
    from app.main_window import MainWindow

    made = []

    def make(pipeline: str = "blur", schedule: str = "default", auto_measure: bool = False, **kw):
        w = MainWindow(size="small", persist_layout=kw.pop("persist_layout", False), ask_to_save=False, **kw)
        w.set_auto_measure(auto_measure)
        qtbot.addWidget(w)
        assert w.open_pipeline(pipeline, schedule)
        w.show()
        qtbot.waitExposed(w)
        made.append(w)
        return w

    yield make
    for w in made:
        w.close()
