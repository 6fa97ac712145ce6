"""Starting the desktop app: `python main.py [PIPELINE] [--size ...] [--schedule ...] [--screenshot PNG]`.

With nothing named, the app opens on the start page with the blur example already open
behind it (one click, Enter or Esc away); a pipeline, model or --schedule/--measure opens
the workspace directly."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QEventLoop, QTimer
from PySide6.QtWidgets import QApplication

import engine
from engine import api, zoo

from . import xcb_check
from .main_window import MainWindow
from .model.document import load_schedule

DEFAULT_PIPELINE = "blur"  # open behind the start page when nothing is named
MEASURE_WAIT_MS = 300_000  # --measure with --screenshot: the longest wait for the result


def window_size(text: str) -> tuple[int, int]:
    """'1024x700' -> (1024, 700): an argparse type (its error is argparse's one line)."""
    w, sep, h = text.lower().partition("x")
    if not sep or not w.strip().isdigit() or not h.strip().isdigit() or not (200 <= int(w) <= 16384 and 200 <= int(h) <= 16384):
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT in pixels (200 to 16384 each), like 1024x700; got {text!r}")
    return int(w), int(h)


def font_scale(text: str) -> float:
    """'1.3' -> 1.3, within presentation mode's range: an argparse type."""
    from .teaching.presentation import MAX_SCALE, MIN_SCALE  # noqa: PLC0415  # only this option needs it

    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not MIN_SCALE <= value <= MAX_SCALE:
        raise argparse.ArgumentTypeError(f"expected a text scale from {MIN_SCALE} to {MAX_SCALE}, like 1.3; got {text!r}")
    return value


def steps_count(text: str) -> int:
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"expected a number of iterations (0 or more); got {text!r}")
    return int(text)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="schedule-explorer",
        description="Explore Halide schedules of pipelines (desktop app). Headless commands: `python main.py COMMAND --help`.",
    )
    ap.add_argument(
        "pipeline",
        nargs="?",
        default=None,
        help=f"a built-in pipeline name, a pipeline .json file or an .onnx model "
        f"(default: the start page, with {DEFAULT_PIPELINE} open behind it)",
    )
    ap.add_argument("--size", choices=zoo.SIZES, default="full", help="built-in pipelines: test size or realistic size (default: full)")
    ap.add_argument(
        "--schedule",
        default=None,
        help="default, hand, heuristic, or a schedule .json file (default: hand where one exists, heuristic for models, else default)",
    )
    ap.add_argument(
        "--measure", action="store_true", help="measure the schedule right after opening (with --screenshot: before the capture)"
    )
    ap.add_argument(
        "--theme", choices=("system", "light", "dark"), default=None, help="the look for this run (default: the one set in View → Theme)"
    )
    ap.add_argument(
        "--place",
        metavar="POLICY",
        default=None,
        help="show the Placement tab with this policy's placement (etf, sct, topo, tfgreedy, kl, rl, hrl, gnn, ...)",
    )
    ap.add_argument(
        "--devices",
        metavar="PROFILE",
        default=None,
        help="with --place: the device profile (cpu_gpu, cpu_4gpu_pcie, 2hosts_2gpu, memory_tight, local or a .json file)",
    )
    ap.add_argument(
        "--window-size",
        metavar="WxH",
        type=window_size,
        default=None,
        help="the window's size, e.g. 1024x700 (default: 1360x900, or the screen if smaller); with --screenshot, the picture's",
    )
    ap.add_argument("--teach", metavar="STAGE", default=None, help="open the Teaching dock on this stage (issue 18)")
    ap.add_argument(
        "--teach-view", choices=("animation", "footprint"), default="animation", help="with --teach: the tab shown (default: animation)"
    )
    ap.add_argument("--teach-step", metavar="N", type=steps_count, default=0, help="with --teach: run the animation N iterations first")
    ap.add_argument("--presentation", action="store_true", help="start in presentation mode (large text, simple layout, 1280x720)")
    ap.add_argument("--font-scale", metavar="X", type=font_scale, default=None, help="text size for this run, e.g. 1.3 (default: as set)")
    ap.add_argument("--lesson", metavar="ID", default=None, help="start this lesson in the Lessons dock (issue 18; ids: docs/LESSONS.md)")
    ap.add_argument("--lesson-hints", metavar="N", type=int, default=0, help="with --lesson: reveal its first N hints")
    ap.add_argument("--lesson-check", action="store_true", help="with --lesson: run its check (with --screenshot: before the capture)")
    ap.add_argument("--lessons", metavar="DIR", default=None, help="also list the lessons in this folder (this run only)")
    ap.add_argument("--screenshot", metavar="PNG", help="save a picture of the window to this file and exit (works without a display)")
    return ap


def placement_options_error(policy: str | None, devices: str | None) -> str:
    """What is wrong with --place / --devices ("" when nothing is)."""
    if devices is not None and policy is None:
        return "--devices goes with --place POLICY"
    if policy is None:
        return ""
    from engine.placement.devices import ProfileError, load_profile  # noqa: PLC0415  # only --place needs them
    from engine.placement.policies import LEARNED_NAMES, PLACERS  # noqa: PLC0415

    if policy not in set(PLACERS) | set(LEARNED_NAMES):
        return f"--place: unknown policy {policy!r} (policies: {', '.join(sorted(set(PLACERS) | set(LEARNED_NAMES)))})"
    try:
        load_profile(devices or "cpu_gpu")
    except ProfileError as exc:
        return f"--devices: {exc}"
    return ""


def full_help() -> str:
    """`python main.py --help`: the app's own options, then the headless subcommands."""
    from engine.cli import parser as cli_parser  # noqa: PLC0415  # the CLI's parser is only needed here

    cli, app_parser = cli_parser(), parser()
    cli.prog = app_parser.prog = "python main.py"
    return (
        app_parser.format_help()
        + "\nHeadless use: python main.py COMMAND [options] (each command's options: python main.py COMMAND --help)\n\n"
        + cli.format_help()
    )


def run_app(argv: list[str]) -> int:
    """Start the app; returns the process exit status (2 for a pipeline or schedule that cannot be used)."""
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error argparse has already printed
        return 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 2

    start_page = args.pipeline is None and args.schedule is None and not args.measure and args.teach is None and not args.presentation
    start_page = start_page and args.lesson is None
    spec = args.pipeline or DEFAULT_PIPELINE
    # Check what was named before any window exists, so mistakes read like the CLI's.
    try:
        p = api.load_pipeline(spec, args.size)
        if args.schedule not in (None, "default", "hand"):
            load_schedule(p, args.schedule)
    except api.InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.teach is not None and args.teach not in p.stage_map:
        print(f"error: --teach: no stage {args.teach!r} in {p.name} (stages: {', '.join(p.stage_map)})", file=sys.stderr)
        return 2
    placement_error = placement_options_error(args.place, args.devices)
    if placement_error:
        print(f"error: {placement_error}", file=sys.stderr)
        return 2

    if args.screenshot and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # must precede the QApplication

    # Before Qt loads its platform plugin: missing X libraries would abort with a message that does not name them.
    problem = xcb_check.check() if QApplication.instance() is None else None
    if problem is not None:
        print(problem, file=sys.stderr)
        return 1

    app = QApplication.instance() or QApplication([sys.argv[0] if sys.argv else "schedule-explorer"])
    app.setApplicationName("Schedule Explorer")
    app.setOrganizationName("schedule-explorer")
    app.setApplicationVersion(engine.__version__)

    # A screenshot is a fixed picture: it neither reads nor writes the remembered layout.
    window = MainWindow(size=args.size, persist_layout=not args.screenshot, ask_to_save=not args.screenshot)
    if args.window_size:
        window.size_to(*args.window_size)
    if args.theme:
        window.theme.set_mode(args.theme, remember=False)  # this run only: View → Theme stays the user's choice
    if not window.open_pipeline(spec, args.schedule):
        window.close()
        return 2
    if start_page:
        window.show_start_page()
    window.show()
    if args.font_scale is not None:
        window.teaching.presentation.set_scale(args.font_scale, remember=False)
    if args.presentation:
        window.teaching.presentation.set_active(True)
    if args.teach is not None:
        window.teaching.show_stage(args.teach, args.teach_view, wait=True)
        window.teaching.panel.animation.set_position(args.teach_step)
    if args.lessons is not None:
        window.lessons.view.set_folder(Path(args.lessons), remember=False)
    lessons = window.lessons
    if args.lesson is not None and not lessons.open_lesson(args.lesson, args.lesson_hints, args.lesson_check, wait=bool(args.screenshot)):
        print(f"error: --lesson: no lesson {args.lesson!r} (lessons: {', '.join(x.id for x in lessons.view.lessons)})", file=sys.stderr)
        window.close()
        return 2
    if args.place:
        window.show_placement(args.place, args.devices, wait=bool(args.screenshot))
    if args.measure:
        window.start_measurement()
    if not args.screenshot:
        _close_on_sigint(window)
        return app.exec()
    return _screenshot(app, window, args.screenshot, args.measure)


def _screenshot(app: QCoreApplication, window: MainWindow, path: str, wait_for_measurement: bool) -> int:
    if wait_for_measurement and window.measure_service.busy:
        loop = QEventLoop()

        def quit_when_idle(busy: bool) -> None:
            if not busy:
                loop.quit()

        window.measure_service.busy_changed.connect(quit_when_idle)
        QTimer.singleShot(MEASURE_WAIT_MS, loop.quit)
        loop.exec()
    # Let layouts, docks and the chart settle before grabbing.
    for _ in range(3):
        app.processEvents()
    ok = window.grab().save(path)
    window.close()
    window.deleteLater()
    app.processEvents()
    if not ok:
        print(f"error: could not write {path}", file=sys.stderr)
        return 1
    return 0


def _close_on_sigint(window: MainWindow) -> None:
    """Ctrl+C in the terminal closes the window (and so stops the measurement worker).
    Python runs signal handlers only between bytecodes, so a timer wakes it regularly."""
    signal.signal(signal.SIGINT, lambda *_: window.close())
    timer = QTimer(window)
    timer.timeout.connect(lambda: None)
    timer.start(250)
