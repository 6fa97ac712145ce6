"""Issue 20 items 1, 2, 10 and 11 in a real (offscreen) window: the window fits 1024×700 with
nothing clipped, a refused edit is said where the user looks, Delete and the graph's context
menu edit the schedule, Help explains the keys, and the small things a new user trips on
(idle text, dock tabs, recent models, dialog folders, a no-op schedule choice, the Size box,
`main.py --help`, the X11 library check)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from PySide6.QtCore import QSettings, QStandardPaths, Qt
from PySide6.QtWidgets import QTabBar, QTextBrowser, QWidget
from pytestqt.qtbot import QtBot

import main as launcher
from app import xcb_check
from app.folders import LAST_FOLDER_KEY, remember_folder, start_folder
from app.main_window import IDLE_AUTO, IDLE_MANUAL, SETTINGS_APP, SETTINGS_ORG, MainWindow
from engine.schedule import default_schedule

SMALL = (1024, 700)
SETTINGS = (SETTINGS_ORG, SETTINGS_APP)


def _fully_visible(w: QWidget) -> bool:
    """Shown and not clipped by any parent (scroll areas and docks included)."""
    return w.isVisible() and w.visibleRegion().boundingRect() == w.rect() and not w.rect().isEmpty()


@pytest.fixture
def small(open_window) -> MainWindow:
    """The window as a 1024×700 screen opens it (offscreen there is no such screen to fit)."""
    w = open_window("conv_relu", "hand")
    w.size_to(*SMALL)
    w.compact_layout()  # what a screen under COMPACT_HEIGHT gets
    return w


def test_window_fits_1024x700_and_the_editor_buttons_are_not_clipped(qtbot: QtBot, small: MainWindow) -> None:
    w = small
    w.select_stage("conv")
    qtbot.waitUntil(lambda: w.editor.top.isVisible())
    hint = w.minimumSizeHint()
    assert hint.width() <= SMALL[0] and hint.height() <= SMALL[1], hint
    qtbot.waitUntil(lambda: w.size().width() == SMALL[0] and w.size().height() == SMALL[1])
    buttons = [*w.editor.quick.values(), *w.editor.buttons.values()]
    qtbot.waitUntil(lambda: all(_fully_visible(b) for b in buttons), timeout=3000)  # once the layout has settled
    for b in buttons:
        assert _fully_visible(b), b.objectName()
        assert b.width() >= b.sizeHint().width(), (b.objectName(), b.width(), b.sizeHint().width())  # its label is whole
    assert all(_fully_visible(tb) for tb in [w.chrome.toolbar])
    # The docks whose panels are larger than a small screen scroll instead of growing the window.
    assert w.measurement_dock.widget().objectName() == "performance_dock_scroll"


def test_a_refusal_is_visible_without_scrolling(qtbot: QtBot, small: MainWindow) -> None:
    w = small
    w.select_stage("conv")
    # Root is refused for conv's hand schedule: by the target's recipe it keeps an unroll a root
    # stage cannot take (AVX2, Zen 4) or leaves its padding inside relu (full-width AVX-512).
    assert not w.editor.quick_action("root")
    qtbot.waitUntil(lambda: _fully_visible(w.editor.error))
    msg = w.editor.error.text()
    assert msg.startswith("invalid schedule: stage 'conv") and len(msg) > 100  # the engine's whole message, which wraps
    # Every wrapped line of it is shown, and the status bar says it too.
    assert w.editor.error.height() >= w.editor.error.heightForWidth(w.editor.error.width())
    assert w.statusBar().currentMessage() == f"Not applied: {msg}"
    assert w.undo_stack.count() == 0


def test_the_forms_buttons_stay_in_view_and_enter_applies(qtbot: QtBot, small: MainWindow) -> None:
    w = small
    w.select_stage("relu")
    w.editor.begin_add()
    form = w.editor.form
    form.set_kind("tile")  # the tallest form: taller than the dock at 1024×700
    qtbot.waitUntil(lambda: _fully_visible(form.apply_button) and _fully_visible(form.cancel_button))
    n = w.editor.list.count()
    form.set_kind("split")
    box = form.spin("factor")
    box.setValue(1)  # relu's x is 1 wide after the hand schedule's splits
    box.setFocus()
    qtbot.waitUntil(box.hasFocus)
    qtbot.keyClick(box, Qt.Key.Key_Return)
    assert w.undo_stack.count() == 1 and w.editor.list.count() == n + 1 and not form.apply_button.isVisible()


def test_delete_removes_the_selected_directive(qtbot: QtBot, small: MainWindow) -> None:
    w = small
    w.select_stage("conv")
    lst = w.editor.list
    before = lst.count()
    lst.setCurrentRow(before - 1)
    lst.setFocus()
    qtbot.waitUntil(lst.hasFocus)
    qtbot.keyClick(lst, Qt.Key.Key_Delete)
    assert lst.count() == before - 1 and w.undo_stack.count() == 1
    assert w.undo_stack.text(0).startswith("conv.update: remove")


def test_a_node_context_menu_offers_the_schedule_actions(qtbot: QtBot, small: MainWindow) -> None:
    w = small
    view = w.graph.view
    node = view.nodes["relu"]
    view.centerOn(node)
    menu = view.context_menu(view.mapFromScene(node.sceneBoundingRect().center()))
    actions = {a.text(): a for a in menu.actions()}
    assert {"Tile 2-D", "Vectorize", "Parallel", "Inline", "Root", "Add directive…"} <= set(actions)
    assert not actions["Inline"].isEnabled()  # relu is the output
    actions["Add directive…"].trigger()
    assert w.editor.stage == "relu" and w.editor.form_box.isVisible()
    w.editor.close_form()
    n = w.editor.list.count()
    actions["Parallel"].trigger()
    assert w.undo_stack.count() == 1 and w.editor.list.count() == n + 1


def test_help_lists_shortcuts_and_a_guide(qtbot: QtBot, small: MainWindow) -> None:
    w = small
    rows = dict(w.shortcut_rows())
    assert rows["Measure"] == "Ctrl+M" and rows["Keyboard Shortcuts"] == "Ctrl+/" and "Save Project" in rows
    dialog = w.show_shortcuts()
    qtbot.addWidget(dialog)
    text = dialog.findChild(QTextBrowser).toPlainText()
    assert "Ctrl+M" in text and "remove the selected directive" in text
    guide = w.show_guide()
    qtbot.addWidget(guide)
    assert "Measure (Ctrl+M)" in guide.findChild(QTextBrowser).toPlainText()
    help_menu = next(a.menu() for a in w.menuBar().actions() if a.text() == "&Help")
    assert [a.text() for a in help_menu.actions() if a.text()] == ["&Guide", "&Keyboard Shortcuts", "&About Schedule Explorer"]
    assert guide.isVisible() and guide.width() <= SMALL[0]


def test_idle_text_follows_the_auto_setting(small: MainWindow) -> None:
    w = small
    w.set_auto_measure(True)
    assert w.performance.verdict.text() == IDLE_AUTO
    w.set_auto_measure(False)
    assert w.performance.verdict.text() == IDLE_MANUAL


def test_left_dock_tabs_show_their_whole_titles(qtbot: QtBot, small: MainWindow) -> None:
    w = small
    bars = [b for b in w.findChildren(QTabBar) if b.parent() is w and "Pipelines" in [b.tabText(i) for i in range(b.count())]]
    assert bars
    for bar in bars:
        assert bar.elideMode() == Qt.TextElideMode.ElideNone
        for i in range(bar.count()):
            assert bar.tabRect(i).width() > bar.fontMetrics().horizontalAdvance(bar.tabText(i))


def test_recent_files_include_models(qtbot: QtBot, open_window) -> None:
    w = open_window("blur")
    model = Path("resources/models/small_cnn.onnx").resolve()
    assert w.open_pipeline(str(model))
    assert w.projects.recent()[0] == str(model)
    w.show_start_page()
    assert w.start.page.recent.item(0).data(Qt.ItemDataRole.UserRole) == str(model)
    w.projects.forget_recent(str(model))


def test_dialogs_start_in_documents_or_the_last_folder(tmp_path: Path) -> None:
    QSettings(*SETTINGS).remove(LAST_FOLDER_KEY)
    docs = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DocumentsLocation)
    assert start_folder(SETTINGS) == (Path(docs) if Path(docs).is_dir() else Path.home())
    assert start_folder(SETTINGS) != Path.cwd()
    remember_folder(SETTINGS, tmp_path / "x.sxproj")
    assert start_folder(SETTINGS) == tmp_path.resolve()
    shutil.rmtree(tmp_path)  # a folder that is gone is not offered
    assert start_folder(SETTINGS) != tmp_path.resolve()
    QSettings(*SETTINGS).remove(LAST_FOLDER_KEY)


def test_choosing_a_schedule_that_changes_nothing_is_no_edit(qtbot: QtBot, open_window, tmp_path: Path) -> None:
    w = open_window("blur", "default")
    same = tmp_path / "same_as_default.json"
    same.write_text(default_schedule(w.doc.pipeline).dumps())
    w.extra_schedules.append(str(same))
    w._sync_schedule_combo()  # what opening with --schedule FILE does
    combo = w.chrome.schedule_combo
    combo.activated.emit(combo.findData(str(same)))
    assert w.doc.schedule_spec == str(same) and w.undo_stack.count() == 0 and not w.projects.dirty
    combo.activated.emit(combo.findData("hand"))  # a different schedule: one undoable edit
    assert w.doc.schedule_spec == "hand" and w.undo_stack.count() == 1 and w.projects.dirty


def test_the_size_box_follows_an_opened_project(qtbot: QtBot, open_window, tmp_path: Path) -> None:
    w = open_window("blur")
    w.use_size("full")
    assert w.open_pipeline("blur")
    path = tmp_path / "full.sxproj"
    assert w.projects.save_as(path)
    w.use_size("small")
    assert w.open_pipeline("unsharp") and w.chrome.size_combo.currentText() == "small"
    assert w.projects.open(path)
    assert w.doc.size == "full" and w.chrome.size_combo.currentText() == "full" and w.pipeline_size == "full"
    assert json.loads(path.read_text())["size"] == "full"


def test_main_help_shows_the_app_options_and_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert launcher.main(["--help"]) == 0
    out = capsys.readouterr().out
    for app_option in ("--screenshot", "--schedule", "--theme", "--measure"):
        assert app_option in out
    for command in ("measure", "search", "import", "costmodel"):
        assert f"    {command} " in out or f"    {command}\n" in out


def test_xcb_check_names_what_to_install(tmp_path: Path) -> None:
    assert xcb_check.debian_package("libxcb-cursor.so.0") == "libxcb-cursor0"
    assert xcb_check.debian_package("libxcb-icccm.so.4") == "libxcb-icccm4"
    assert xcb_check.debian_package("libxkbcommon-x11.so.0") == "libxkbcommon-x11-0"
    assert xcb_check.debian_package("libX11-xcb.so.1") == "libx11-xcb1"
    line = xcb_check.install_hint(["libxcb-cursor.so.0", "libxcb-icccm.so.4"])
    assert "\n" not in line and "sudo apt-get install libxcb-cursor0 libxcb-icccm4" in line
    assert xcb_check.wants_xcb({}, "linux") and xcb_check.wants_xcb({"QT_QPA_PLATFORM": "xcb"}, "linux")
    assert not xcb_check.wants_xcb({"QT_QPA_PLATFORM": "offscreen"}, "linux")
    assert not xcb_check.wants_xcb({"WAYLAND_DISPLAY": "wayland-0"}, "linux") and not xcb_check.wants_xcb({}, "darwin")
    # The real loader on the real plugin: moved away from PySide6's own Qt libraries, the
    # plugin's first dependency is not found, and the hint says what is wrong.
    plugin = xcb_check.xcb_plugin()
    assert plugin is not None
    moved = tmp_path / plugin.name
    shutil.copy(plugin, moved)
    missing = xcb_check.missing_libraries(moved)
    assert "libQt6XcbQpa.so.6" in missing
    assert "reinstall PySide6" in xcb_check.install_hint(missing)
