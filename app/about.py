"""The Help menu's texts: About (the versions of what the app runs on), the keyboard
shortcuts and a short guide, and the dialog that shows them."""

from __future__ import annotations

import html
import importlib.metadata

import PySide6
from PySide6.QtCore import qVersion
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QTextBrowser, QVBoxLayout, QWidget

import engine


def package_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def versions() -> dict[str, str]:
    """Versions shown in Help > About (torch is looked up, never imported: it is slow to load)."""
    return {
        "Schedule Explorer": engine.__version__,
        "Halide": package_version("halide"),
        "PyTorch": package_version("torch"),
        "Qt": qVersion(),
        "PySide6": PySide6.__version__,
    }


def format_flop(n: float) -> str:
    for scale, unit in ((1e12, "TFLOP"), (1e9, "GFLOP"), (1e6, "MFLOP"), (1e3, "kFLOP")):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.3g} FLOP"


def about_html() -> str:
    rows = "".join(f"<tr><td>{k}</td><td>&nbsp;&nbsp;{v}</td></tr>" for k, v in versions().items())
    return (
        "<h3>Schedule Explorer</h3>"
        "<p>Explore Halide schedules of deep-learning and image-processing pipelines: "
        "see the pipeline graph and the loop nest a schedule produces, edit the schedule, "
        "compare the cost model's prediction with measurements.</p>"
        f"<table>{rows}</table>"
    )


# Keys that belong to one view rather than to an action of the window (those are listed
# from the actions themselves, so the list cannot fall out of date with the menus).
VIEW_KEYS: list[tuple[str, str, str]] = [
    ("Graph", "F", "fit the whole graph in view"),
    ("Graph", "+ / − or the mouse wheel", "zoom in / out"),
    ("Graph", "Esc", "clear the selection"),
    ("Graph", "Double-click a layer", "expand it (double-click its outline to collapse it)"),
    ("Graph", "Right-click a stage", "its schedule actions (Tile, Vectorize, Parallel, Inline, Root, Add directive)"),
    ("Schedule Editor", "Delete / Backspace", "remove the selected directive"),
    ("Schedule Editor", "Double-click a directive", "change it"),
    ("Schedule Editor", "Enter / Esc in the form", "apply the directive / close the form"),
    ("Start page", "Enter / Esc", "open the selected card / go back to the workspace"),
]


def shortcuts_html(actions: list[tuple[str, str]]) -> str:
    """The shortcuts table: the window's actions (`(name, keys)`) and then VIEW_KEYS."""
    rows = "".join(f"<tr><td>{html.escape(name)}</td><td><b>{html.escape(keys)}</b></td></tr>" for name, keys in actions)
    view_rows = "".join(
        f"<tr><td>{html.escape(where)}: {html.escape(what)}</td><td><b>{html.escape(keys)}</b></td></tr>" for where, keys, what in VIEW_KEYS
    )
    return (
        f"<h3>Keyboard shortcuts</h3><table cellspacing='2'>{rows}<tr><td colspan='2'><br><b>In the views</b></td></tr>{view_rows}</table>"
    )


GUIDE_HTML = """
<h3>A short guide</h3>
<ol>
<li><b>Open a pipeline.</b> Pick one on the start page (Ctrl+Shift+H), in the Pipelines panel, or open a
pipeline <code>.json</code>, an ONNX model (imported: see the Import Report) or a saved project (Ctrl+O).
The Size box chooses the small test size or the realistic full size of the built-in pipelines.</li>
<li><b>Look at it.</b> The Graph shows stages tinted by their share of the run time (→ / ↓ lay it out left to
right or top to bottom; a large model opens grouped by layer). The Loop nest tab shows the loops the schedule
produces; Schedule, Halide C++ and Halide Python show the same schedule as code.</li>
<li><b>Change the schedule.</b> Select a stage (graph or Stages list). In the Schedule Editor use a quick action
(Tile 2-D, Vectorize, Parallel, Inline, Root) or Add… a directive; the form offers only legal choices. A change
the engine refuses is shown in red above the directive list and in the status bar, and changes nothing.
Every change can be undone (Ctrl+Z). The Schedule box switches between the default, hand-written and other
schedules.</li>
<li><b>Measure.</b> Measure (Ctrl+M) compiles, times and verifies the schedule in a worker process; with Auto on,
each edit is measured shortly after it. The Performance panel puts the cost model's prediction (labelled as one)
beside the measured median; Compare with Adams2019 measures Halide's autoscheduler on the same pipeline.</li>
<li><b>Search.</b> The Search panel runs an automated schedule search; Apply takes a candidate as one undoable edit.</li>
<li><b>Keep it.</b> Save Project (Ctrl+S) keeps the pipeline, the schedule, the session's variants, measurements
and notes in a <code>.sxproj</code> file.</li>
</ol>
<p>Everything the app does is also on the command line: <code>python main.py --help</code>.</p>
"""


def show_text(parent: QWidget, title: str, text_html: str) -> QDialog:
    """A scrollable, non-modal dialog with `text_html` (small enough for a small screen)."""
    dialog = QDialog(parent)
    dialog.setObjectName("help_" + title.lower().replace(" ", "_"))
    dialog.setWindowTitle(title)
    browser = QTextBrowser()
    browser.setHtml(text_html)
    browser.setOpenExternalLinks(True)
    buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
    buttons.rejected.connect(dialog.close)
    lay = QVBoxLayout(dialog)
    lay.addWidget(browser)
    lay.addWidget(buttons)
    screen = parent.screen().availableGeometry() if parent.screen() is not None else None
    dialog.resize(min(620, screen.width() - 40) if screen else 620, min(560, screen.height() - 60) if screen else 560)
    dialog.show()
    return dialog
