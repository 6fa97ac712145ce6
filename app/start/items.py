"""What the start page lists and how it draws it: pipeline cards with a small picture of
the graph (in a gallery whose cards fill its rows), two-line rows for recent projects and
sample models, and the sample models' descriptions (read from the script that makes them,
without importing torch)."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from PySide6.QtCore import QModelIndex, QObject, QPersistentModelIndex, QPointF, QRect, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPainterPath, QPalette, QPixmap, QPolygonF, QResizeEvent, QTextLayout
from PySide6.QtWidgets import (
    QApplication,
    QFrame,
    QListView,
    QListWidget,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QWidget,
)

from engine import zoo
from engine.resources import MODELS_DIR

from ..graph.layout import layered_layout
from ..theme import is_dark

WARN_COLOR = "#c62828"

# Roles shared by both delegates.
KEY_ROLE = Qt.ItemDataRole.UserRole  # what to open: a zoo name or a file path
TITLE_ROLE = Qt.ItemDataRole.UserRole + 1
NOTE_ROLE = Qt.ItemDataRole.UserRole + 2  # small text: stage count and FLOPs, or a file's size
BODY_ROLE = Qt.ItemDataRole.UserRole + 3  # description, or a path
OPEN_ROLE = Qt.ItemDataRole.UserRole + 4  # a card: this pipeline is the one open in the workspace
WARN_ROLE = Qt.ItemDataRole.UserRole + 5  # a row: the file is missing
ELIDE_ROLE = Qt.ItemDataRole.UserRole + 6  # a row: how its body is shortened (paths lose their middle)
LINES_ROLE = Qt.ItemDataRole.UserRole + 7  # a row: lines of body text (default 1)

_Index = QModelIndex | QPersistentModelIndex


def mix(a: QColor, b: QColor, t: float) -> QColor:
    """`t` of the way from a to b (theme-neutral tints: the palette decides both ends)."""
    # redF() & co., not getRgbF(): PySide6 types that as returning `object`.
    return QColor.fromRgbF(*(x + (y - x) * t for x, y in ((a.redF(), b.redF()), (a.greenF(), b.greenF()), (a.blueF(), b.blueF()))))


@dataclass(frozen=True)
class SampleModel:
    path: Path
    description: str
    input_shape: tuple[int, ...] | None


def sample_models(folder: Path = MODELS_DIR) -> list[SampleModel]:
    """The .onnx files in `folder`, described by the docstrings of the classes that
    make_models.py exports them from (parsed, not imported: importing it loads torch)."""
    info: dict[str, tuple[str, tuple[int, ...] | None]] = {}
    try:
        tree = ast.parse((folder / "make_models.py").read_text(encoding="utf-8"))
        docs = {n.name: " ".join((ast.get_docstring(n) or "").split()) for n in tree.body if isinstance(n, ast.ClassDef)}
        table = next(
            n.value for n in tree.body if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "MODELS" for t in n.targets)
        )
        assert isinstance(table, ast.Dict)
        for key, value in zip(table.keys, table.values):  # "name": (Class, input_shape)
            assert isinstance(key, ast.Constant) and isinstance(value, ast.Tuple) and isinstance(value.elts[0], ast.Name)
            info[str(key.value)] = (docs.get(value.elts[0].id, ""), tuple(ast.literal_eval(value.elts[1])))
    except (OSError, SyntaxError, ValueError, StopIteration, AssertionError, IndexError):
        info = {}  # descriptions are a nicety: the files are listed without them
    return [
        SampleModel(p, info.get(p.stem, ("", None))[0] or "ONNX model", info.get(p.stem, ("", None))[1])
        for p in sorted(folder.glob("*.onnx"))
    ]


def file_size_text(path: Path) -> str:
    n = path.stat().st_size
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{max(1, round(n / 1e3))} KB"


# --- the graph picture on a card -------------------------------------------------------
NODE, INPUT, GAP_X, GAP_Y = (26.0, 12.0), (18.0, 8.0), 14.0, 6.0


@lru_cache(maxsize=32)
def _graph_shape(name: str) -> tuple[dict, dict, list, set, float, float]:
    """Node boxes, edge routes and output names of a zoo pipeline's graph (the same at both sizes)."""
    p = zoo.get(name, "small")
    g = p.graph
    lay = layered_layout(g, lambda n: INPUT if g.nodes[n]["kind"] == "input" else NODE, column_gap=GAP_X, row_gap=GAP_Y)
    kinds = {n: g.nodes[n]["kind"] for n in g.nodes}
    return lay.centers, kinds, list(lay.routes.values()), set(p.outputs), lay.width, lay.height


def graph_thumbnail(name: str, size: QSize, pal: QPalette, dpr: float = 1.0) -> QPixmap:
    """The pipeline's graph drawn to fit `size`: inputs hollow, stages tinted, outputs solid."""
    centers, kinds, routes, outputs, width, height = _graph_shape(name)
    pix = QPixmap(size * dpr)
    pix.setDevicePixelRatio(dpr)
    pix.fill(Qt.GlobalColor.transparent)
    margin = 12.0
    scale = min((size.width() - 2 * margin) / max(width, 1.0), (size.height() - 2 * margin) / max(height, 1.0), 1.6)
    ox = (size.width() - width * scale) / 2
    oy = (size.height() - height * scale) / 2
    accent, base, text = pal.color(QPalette.ColorRole.Highlight), pal.color(QPalette.ColorRole.Base), pal.color(QPalette.ColorRole.Text)
    painter = QPainter(pix)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setPen(mix(text, base, 0.55))
    for pts in routes:
        painter.drawPolyline(QPolygonF([QPointF(ox + x * scale, oy + y * scale) for x, y in pts]))
    for n, (cx, cy) in centers.items():
        w, h = INPUT if kinds[n] == "input" else NODE
        r = QRectF(ox + (cx - w / 2) * scale, oy + (cy - h / 2) * scale, w * scale, h * scale)
        if kinds[n] == "input":
            painter.setBrush(base)
            painter.setPen(mix(text, base, 0.45))
        else:
            painter.setBrush(accent if n in outputs else mix(accent, base, 0.6))
            painter.setPen(accent.darker(120))
        radius = min(r.height() / 2, 3.0)
        painter.drawRoundedRect(r, radius, radius)
    painter.end()
    return pix


def wrapped(text: str, font: QFont, width: int, max_lines: int) -> list[str]:
    """`text` wrapped at words to `width`, at most `max_lines` lines, the last one elided."""
    layout = QTextLayout(text, font)
    layout.beginLayout()
    lines: list[str] = []
    while len(lines) < max_lines:
        line = layout.createLine()
        if not line.isValid():
            break
        line.setLineWidth(width)
        lines.append(text[line.textStart() : line.textStart() + line.textLength()].rstrip())
        last_end = line.textStart() + line.textLength()
    layout.endLayout()
    if lines and last_end < len(text):
        lines[-1] = QFontMetrics(font).elidedText(lines[-1] + " " + text[last_end:], Qt.TextElideMode.ElideRight, width)
    return lines


def _fonts(base: QFont) -> tuple[QFont, QFont]:
    bold, small = QFont(base), QFont(base)
    bold.setBold(True)
    small.setPointSizeF(base.pointSizeF() * 0.92)
    return bold, small


class CardDelegate(QStyledItemDelegate):
    """A pipeline card: the graph's picture, the name, stages and FLOPs, the description."""

    MIN_WIDTH, HEIGHT = 184, 176  # the gallery widens cards to fill its rows
    PICTURE_H = 58
    PAD = 10

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.card = QSize(self.MIN_WIDTH, self.HEIGHT)
        self._pictures: dict[tuple, QPixmap] = {}

    def clear_pictures(self) -> None:
        """Drop the cached pictures (their colours belong to the old theme)."""
        self._pictures.clear()

    def sizeHint(self, option: QStyleOptionViewItem, index: _Index) -> QSize:  # noqa: N802  # Qt override
        return self.card

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: _Index) -> None:
        pal, state = option.palette, option.state
        r = QRectF(option.rect).adjusted(4.5, 4.5, -4.5, -4.5)
        base, text = pal.color(QPalette.ColorRole.Base), pal.color(QPalette.ColorRole.Text)
        accent = pal.color(QPalette.ColorRole.Highlight)
        muted = pal.color(QPalette.ColorRole.PlaceholderText)
        hot = bool(state & QStyle.StateFlag.State_MouseOver)
        current = bool(state & QStyle.StateFlag.State_Selected)
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        card = QPainterPath()
        card.addRoundedRect(r, 8, 8)
        painter.fillPath(card, base)
        picture = QRectF(r.x(), r.y(), r.width(), self.PICTURE_H)
        painter.save()
        painter.setClipPath(card)
        painter.fillRect(picture, mix(base, accent, 0.07))
        painter.restore()
        name = index.data(KEY_ROLE)
        dpr = painter.device().devicePixelRatioF() if painter.device() is not None else 1.0
        key = (name, picture.size().toSize().width(), pal.color(QPalette.ColorRole.Base).rgb(), accent.rgb(), dpr)
        if key not in self._pictures:
            self._pictures[key] = graph_thumbnail(name, picture.size().toSize(), pal, dpr)
        painter.drawPixmap(picture.topLeft(), self._pictures[key])
        pen_color = accent if (hot or current) else mix(base, text, 0.2)
        painter.setPen(pen_color)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawPath(card)
        if current:  # keyboard focus: a second ring inside the first
            painter.drawRoundedRect(r.adjusted(1, 1, -1, -1), 7, 7)
        bold, small = _fonts(option.font)
        x, y, w = int(r.x()) + self.PAD, int(r.y()) + self.PICTURE_H + 7, int(r.width()) - 2 * self.PAD
        line = QFontMetrics(bold).height()
        name_w = w
        if index.data(OPEN_ROLE):  # a pill on the name's line: this one is open in the workspace
            fm, label = QFontMetrics(small), "open"
            bw, bh = fm.horizontalAdvance(label) + 12, fm.height() + 2
            badge = QRectF(x + w - bw, y + (line - bh) / 2, bw, bh)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(accent)
            painter.drawRoundedRect(badge, badge.height() / 2, badge.height() / 2)
            painter.setFont(small)
            painter.setPen(pal.color(QPalette.ColorRole.HighlightedText))
            painter.drawText(badge, Qt.AlignmentFlag.AlignCenter, label)
            name_w = int(badge.left()) - x - 6
        painter.setFont(bold)
        painter.setPen(text)
        title = QFontMetrics(bold).elidedText(index.data(TITLE_ROLE), Qt.TextElideMode.ElideRight, name_w)
        painter.drawText(QRect(x, y, name_w, line), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, title)
        y += line
        painter.setFont(small)
        painter.setPen(muted)
        small_line = QFontMetrics(small).height()
        painter.drawText(QRect(x, y, w, small_line), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, index.data(NOTE_ROLE))
        y += small_line + 4
        painter.setPen(mix(text, base, 0.2))
        room = max(1, (int(r.bottom()) - self.PAD + 2 - y) // small_line)
        for k, t in enumerate(wrapped(index.data(BODY_ROLE) or "", small, w, room)):
            painter.drawText(QRect(x, y + k * small_line, w, small_line), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, t)
        painter.restore()


class RowDelegate(QStyledItemDelegate):
    """A two-line row: icon, bold title and a small note on the right, then one muted line
    (a path loses its middle, a description its end). A missing file reads as such."""

    PAD = 6

    def sizeHint(self, option: QStyleOptionViewItem, index: _Index) -> QSize:  # noqa: N802  # Qt override
        bold, small = _fonts(option.font)
        lines = index.data(LINES_ROLE) or 1
        return QSize(200, 2 * self.PAD + QFontMetrics(bold).height() + 2 + lines * QFontMetrics(small).height())

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: _Index) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        opt.text = ""
        opt.icon = type(opt.icon)()  # the icon is drawn below, centred on both lines
        style = opt.widget.style() if opt.widget is not None else QApplication.style()
        style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, opt.widget)
        selected = bool(opt.state & QStyle.StateFlag.State_Selected)
        pal = opt.palette
        fg = pal.color(QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text)
        muted = fg if selected else pal.color(QPalette.ColorRole.PlaceholderText)
        missing = bool(index.data(WARN_ROLE))
        bold, small = _fonts(opt.font)
        r = opt.rect.adjusted(self.PAD + 2, self.PAD, -self.PAD - 2, -self.PAD)
        icon = index.data(Qt.ItemDataRole.DecorationRole)
        if icon is not None:
            icon.paint(painter, QRect(r.x(), r.center().y() - 10, 20, 20))
            r.setLeft(r.x() + 28)
        line = QFontMetrics(bold).height()
        painter.save()
        note = index.data(NOTE_ROLE) or ""
        painter.setFont(small)
        warn = QColor(WARN_COLOR).lighter(150) if is_dark(pal) else QColor(WARN_COLOR)  # legible on a dark base
        painter.setPen(warn if missing and not selected else muted)
        note_w = QFontMetrics(small).horizontalAdvance(note) + 8
        painter.drawText(QRect(r.x(), r.y(), r.width(), line), Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, note)
        painter.setFont(bold)
        painter.setPen(muted if missing else fg)
        title = QFontMetrics(bold).elidedText(index.data(TITLE_ROLE) or "", Qt.TextElideMode.ElideRight, r.width() - note_w)
        painter.drawText(QRect(r.x(), r.y(), r.width() - note_w, line), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, title)
        painter.setFont(small)
        painter.setPen(muted)
        text, lines, small_line = index.data(BODY_ROLE) or "", index.data(LINES_ROLE) or 1, QFontMetrics(small).height()
        if lines > 1:
            body = wrapped(text, small, r.width(), lines)
        else:
            body = [QFontMetrics(small).elidedText(text, index.data(ELIDE_ROLE) or Qt.TextElideMode.ElideRight, r.width())]
        for k, t in enumerate(body):
            body_rect = QRect(r.x(), r.y() + line + 2 + k * small_line, r.width(), small_line)
            painter.drawText(body_rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, t)
        painter.restore()


def fit_rows(lw: QListWidget) -> None:
    """As tall as its rows (the lists are short): no scroll bar, no empty box below."""
    rows = sum(lw.sizeHintForRow(k) for k in range(lw.count()))
    lw.setFixedHeight(rows + 2 * lw.frameWidth() + 2)


class Gallery(QListWidget):
    """Cards in rows that fill the width: as many columns as fit, each card widened to share it."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.cards = CardDelegate(self)
        self.setItemDelegate(self.cards)
        self.setViewMode(QListView.ViewMode.IconMode)
        self.setMovement(QListView.Movement.Static)
        self.setResizeMode(QListView.ResizeMode.Adjust)
        self.setUniformItemSizes(True)
        self.setSelectionRectVisible(False)
        self.setDragEnabled(False)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setMouseTracking(True)
        self.viewport().setAttribute(Qt.WidgetAttribute.WA_Hover)
        self.viewport().setCursor(Qt.CursorShape.PointingHandCursor)
        self.viewport().setAutoFillBackground(False)  # the cards sit on the page's colour
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSpacing(0)
        self._fit()

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802  # Qt override
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        # Room for the scroll bar whether it shows or not: its coming and going resizes only
        # the viewport, and a column count that depended on it could flip back and forth.
        bar = self.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent)
        width = max(self.width() - 2 * self.frameWidth() - bar - 2, CardDelegate.MIN_WIDTH)
        card = QSize(width // max(1, width // CardDelegate.MIN_WIDTH), CardDelegate.HEIGHT)
        if card != self.gridSize():
            self.cards.card = card
            self.setGridSize(card)
