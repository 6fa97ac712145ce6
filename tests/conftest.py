"""Test set-up: Qt offscreen and a throwaway measurement database, before anything imports them."""

import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
_tmp = tempfile.mkdtemp(prefix="schedule-explorer-tests-")
os.environ["SCHEDULE_EXPLORER_DB"] = str(Path(_tmp) / "test.sqlite")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
