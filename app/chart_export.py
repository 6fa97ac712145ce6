"""Export for every chart, offered on right-click: the picture as PNG (pyqtgraph's
ImageExporter) or SVG (Qt's SVG generator), with the chart's legend as the picture's title, and the plotted
data as CSV (each chart says what it plotted as a `Table`). One helper, installed on every
PlotWidget by app/perf_charts.Chart, so no chart has an export of its own."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyqtgraph as pg
import pyqtgraph.exporters as pg_exporters
from PySide6.QtCore import QBuffer, QIODevice, QPoint, QRectF, QStandardPaths, Qt
from PySide6.QtGui import QPainter, QTextDocumentFragment
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QFileDialog, QMenu, QMessageBox, QWidget

from .folders import remember_folder, start_folder

FORMATS = {"png": "PNG image (*.png)", "svg": "SVG vector image (*.svg)", "csv": "CSV data (*.csv)"}
PNG_SCALE = 2  # the PNG at twice the on-screen size: sharp on a slide or in a report


@dataclass(frozen=True)
class Table:
    """What a chart plotted, one row per plotted value group (what its CSV holds)."""

    header: list[str]
    rows: list[list[object]] = field(default_factory=list)


def csv_text(table: Table) -> str:
    """The table as CSV text (floats at full precision: the numbers the chart was drawn from)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(table.header)
    writer.writerows(["" if v is None else v for v in row] for row in table.rows)
    return out.getvalue()


def image_bytes(item: pg.PlotItem, fmt: str, title: str = "") -> bytes:
    """The plot drawn as PNG or SVG, `title` (the legend as rich text: it lives outside the
    plot) shown above it while it is drawn."""
    if fmt not in ("png", "svg"):
        raise ValueError(f"unknown image format {fmt!r}: expected png or svg")
    if title:
        item.setTitle(title, size="9pt")
        item.layout.activate()  # the title's row gets its height before the picture is drawn
    try:
        if fmt == "svg":
            return _svg_bytes(item, title)
        exporter = pg_exporters.ImageExporter(item)
        exporter.parameters()["width"] = max(1, int(item.sceneBoundingRect().width() * PNG_SCALE))
        image = exporter.export(toBytes=True)
        buf = QBuffer()
        buf.open(QIODevice.OpenModeFlag.WriteOnly)
        if not image.save(buf, "PNG"):
            raise OSError("the image could not be encoded as PNG")
        return bytes(buf.data().data())
    finally:
        if title:
            item.setTitle(None)
            item.layout.activate()


def _svg_bytes(item: pg.PlotItem, title: str) -> bytes:
    """The plot's part of its scene drawn by Qt's SVG generator. (pyqtgraph 0.14.0's
    SVGExporter fails on every plot under Qt 6.11: it cannot parse the closed paths, ending
    in 'Z', that Qt now writes; pyqtgraph issue #3495.)"""
    source = item.sceneBoundingRect()
    scene = item.scene()
    if scene is None or source.isEmpty():
        raise ValueError("the chart is not shown, so it has no size to export")
    buf = QBuffer()
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    gen = QSvgGenerator()
    gen.setOutputDevice(buf)
    gen.setSize(source.size().toSize())
    gen.setViewBox(QRectF(0, 0, source.width(), source.height()))
    gen.setTitle(QTextDocumentFragment.fromHtml(title).toPlainText() if title else "chart")
    gen.setDescription("Schedule Explorer chart")
    views = scene.views()
    if views:  # the screen's resolution: pictures pyqtgraph recorded for the screen (axes) keep their size and place
        gen.setResolution(views[0].logicalDpiX())
    painter = QPainter(gen)
    try:
        background = views[0].backgroundBrush() if views else None
        if background is not None:
            painter.fillRect(QRectF(0, 0, source.width(), source.height()), background)
        scene.render(painter, QRectF(0, 0, source.width(), source.height()), source)
    finally:
        painter.end()
    return bytes(buf.data().data())


def export(path: Path, item: pg.PlotItem, table: Table, title: str = "") -> None:
    """Write the chart to `path`; its suffix (.png, .svg, .csv) says what (raises ValueError
    for another suffix, OSError when the file cannot be written)."""
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise ValueError(f"{path.name}: unknown export format {path.suffix!r}; expected .png, .svg or .csv")
    if fmt == "csv":
        write_csv(path, table)
    else:
        path.write_bytes(image_bytes(item, fmt, title))


_settings: list[tuple[str, str]] = []  # the window's QSettings (organization, application), once it says


def use_settings(settings: tuple[str, str]) -> None:
    """Where the window keeps its settings: export dialogs then share its last folder (app/folders.py)."""
    _settings[:] = [settings]


def ask_path(parent: QWidget, name: str, fmt: str) -> Path | None:
    """A save dialog for one format, starting in the last folder used (else Documents)."""
    if _settings:
        start = str(start_folder(_settings[0]))
    else:
        start = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DocumentsLocation)
    chosen, _ = QFileDialog.getSaveFileName(parent, f"Export {name}", str(Path(start) / f"{name}.{fmt}"), FORMATS[fmt])
    if not chosen:
        return None
    path = Path(chosen)
    if path.suffix.lower() != f".{fmt}":
        path = path.with_name(path.name + f".{fmt}")
    if _settings:
        remember_folder(_settings[0], path.parent)
    return path


def save_with_dialog(parent: QWidget, name: str, fmt: str, write: Callable[[Path], None]) -> Path | None:
    """Ask where, write, and say clearly why when it could not be written (nothing else changes)."""
    path = ask_path(parent, name, fmt)
    if path is None:
        return None
    try:
        write(path)
    except (OSError, ValueError) as exc:
        QMessageBox.warning(parent, "Export failed", f"Could not write {path}:\n{getattr(exc, 'strerror', None) or exc}")
        return None
    return path


def write_csv(path: Path, table: Table) -> None:
    path.write_text(csv_text(table), encoding="utf-8")


def save_csv(parent: QWidget, name: str, table: Callable[[], Table]) -> Path | None:
    """Ask where and write `table()` there as CSV (the measurement history's export)."""
    return save_with_dialog(parent, name, "csv", lambda path: write_csv(path, table()))


@dataclass
class ChartExport:
    """The export menu of one plot: what to call its files, how to get its data and title,
    and extra actions the chart adds (e.g. 'Show all stages')."""

    plot: pg.PlotWidget
    item: pg.PlotItem
    name: Callable[[], str]
    table: Callable[[], Table]
    title: Callable[[], str]
    extend: Callable[[QMenu], None] | None = None

    def menu(self) -> QMenu:
        menu = QMenu(self.plot)
        has_data = bool(self.table().rows)
        for fmt, text in (("png", "Export as PNG…"), ("svg", "Export as SVG…"), ("csv", "Export data as CSV…")):
            action = menu.addAction(text)
            action.setObjectName(f"export_{fmt}")
            action.setEnabled(has_data)
            action.triggered.connect(lambda _checked=False, f=fmt: self.save(f))
        if self.extend is not None:
            menu.addSeparator()
            self.extend(menu)
        return menu

    def save(self, fmt: str) -> Path | None:
        return save_with_dialog(self.plot, self.name(), fmt, lambda path: export(path, self.item, self.table(), self.title()))

    def _show_menu(self, pos: QPoint) -> None:
        self.menu().exec(self.plot.mapToGlobal(pos))


def install(
    plot: pg.PlotWidget,
    item: pg.PlotItem,
    name: Callable[[], str],
    table: Callable[[], Table],
    title: Callable[[], str],
    extend: Callable[[QMenu], None] | None = None,
) -> ChartExport:
    """Give `plot` the right-click export menu (pyqtgraph's own menu stays off)."""
    ex = ChartExport(plot, item, name, table, title, extend)
    plot.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
    plot.customContextMenuRequested.connect(ex._show_menu)
    return ex


def file_stem(*parts: str) -> str:
    """A file name from words: letters, digits, '-', '_' and '.' kept, the rest '_'."""
    text = "_".join(p for p in parts if p)
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text).strip("_") or "chart"
