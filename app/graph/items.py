"""The graph view's items: a stage or input node, a collapsed group of stages, the frame
of an expanded group, and an edge. Nodes paint by level of detail (no text when zoomed far
out) and cache their pixels (view.py builds the scene from them)."""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import (
    QBrush,
    QColor,
    QFont,
    QFontMetricsF,
    QPainter,
    QPainterPath,
    QPalette,
    QPen,
    QPolygonF,
)
from PySide6.QtWidgets import QGraphicsItem, QGraphicsPathItem, QStyleOptionGraphicsItem, QWidget

from engine.ir import Pipeline

NODE_W, STAGE_H, INPUT_H = 164.0, 74.0, 40.0
PAD = 8.0
# Share of run time, cold to hot (light sand to brick red), normalised to the hottest stage.
HEAT_STOPS = ((0.0, QColor("#f6f1e7")), (0.35, QColor("#fdd49e")), (0.7, QColor("#fc8d59")), (1.0, QColor("#d7301f")))
INPUT_FILL, INPUT_BORDER = QColor("#e3ecf7"), QColor("#5b7db1")
INLINE_FILL = QColor("#eeeeee")
BORDER, OUTPUT_BORDER = QColor("#7a7f87"), QColor("#2b2f36")
EDGE, EDGE_HOT = QColor("#9aa0a8"), QColor("#2f6fd6")


def heat_color(t: float) -> QColor:
    """Colour for a relative share t in [0, 1] (piecewise linear through HEAT_STOPS)."""
    t = min(1.0, max(0.0, t))
    for (t0, c0), (t1, c1) in zip(HEAT_STOPS, HEAT_STOPS[1:]):
        if t <= t1:
            f = (t - t0) / (t1 - t0)
            return QColor.fromRgbF(
                c0.redF() + f * (c1.redF() - c0.redF()),
                c0.greenF() + f * (c1.greenF() - c0.greenF()),
                c0.blueF() + f * (c1.blueF() - c0.blueF()),
            )
    return QColor(HEAT_STOPS[-1][1])


def output_border(widget: QWidget | None) -> QColor:
    """The output's heavy border: near-black, but the text colour on a dark background (dark theme)."""
    if widget is not None and widget.palette().color(QPalette.ColorRole.Base).lightness() < 128:
        return widget.palette().color(QPalette.ColorRole.Text)
    return OUTPUT_BORDER


def text_color_on(fill: QColor) -> QColor:
    """Black or white, whichever reads better on `fill` (relative luminance)."""
    lum = 0.2126 * fill.redF() ** 2.2 + 0.7152 * fill.greenF() ** 2.2 + 0.0722 * fill.blueF() ** 2.2
    return QColor("#111111") if lum > 0.18 else QColor("#ffffff")


class NodeItem(QGraphicsItem):
    """One input or stage: a rounded box with up to four lines of text."""

    def __init__(self, name: str, kind: str, subtitle: str, font: QFont, label: str | None = None) -> None:
        super().__init__()
        self.name, self.kind, self.label = name, kind, label or name
        h = INPUT_H if kind == "input" else STAGE_H
        self.rect = QRectF(-NODE_W / 2, -h / 2, NODE_W, h)
        self.font, self.bold = QFont(font), QFont(font)
        self.bold.setBold(True)
        self.small = QFont(font)
        self.small.setPointSizeF(font.pointSizeF() * 0.9)
        self._fm_bold, self._fm_small = QFontMetricsF(self.bold), QFontMetricsF(self.small)
        self.title = self._elide(self.label, self._fm_bold, NODE_W - 2 * PAD - (46 if kind == "output" else 0))
        self.subtitle = self._elide(subtitle, self._fm_small, NODE_W - 2 * PAD)
        self.placement = ""
        self.time_text = ""
        self.inline = False
        self.fill = INPUT_FILL if kind == "input" else heat_color(0.0)
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemIsSelectable, kind not in ("input", "group"))
        self.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        self.setZValue(1)
        self.setCursor(Qt.CursorShape.PointingHandCursor if kind not in ("input", "group") else Qt.CursorShape.ArrowCursor)

    @staticmethod
    def _elide(text: str, fm: QFontMetricsF, width: float) -> str:
        return fm.elidedText(text, Qt.TextElideMode.ElideRight, width)

    def set_state(self, placement: str, fill: QColor, time_text: str) -> None:
        inline = placement == "inline"
        if (placement, fill.rgb(), time_text) == (self.placement, self.fill.rgb(), self.time_text):
            return
        self.placement, self.time_text, self.inline = placement, time_text, inline
        self.fill = INLINE_FILL if inline else fill
        self.update()

    def boundingRect(self) -> QRectF:  # noqa: N802  # Qt override
        return self.rect.adjusted(-2, -2, 2, 2)

    def shape(self) -> QPainterPath:
        path = QPainterPath()
        path.addRoundedRect(self.rect, 8, 8)
        return path

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None) -> None:
        lod = option.levelOfDetailFromTransform(painter.worldTransform())
        selected = self.isSelected()
        if selected:
            pen = QPen(widget.palette().color(QPalette.ColorRole.Highlight) if widget else EDGE_HOT, 3.0)
        elif self.kind == "input":
            pen = QPen(INPUT_BORDER, 1.2)
        elif self.kind == "output":
            pen = QPen(output_border(widget), 2.4)
        else:
            pen = QPen(BORDER, 1.0, Qt.PenStyle.DashLine if self.inline else Qt.PenStyle.SolidLine)
        painter.setPen(pen)
        painter.setBrush(QBrush(self.fill))
        if lod < 0.2:  # a speck on screen: a plain rectangle is all that shows
            painter.drawRect(self.rect)
            return
        radius = self.rect.height() / 2 if self.kind == "input" else 8.0
        painter.drawRoundedRect(self.rect, min(radius, 22.0), min(radius, 22.0))
        if lod < 0.22:  # too small for any text
            return
        ink = text_color_on(self.fill)
        if lod < 0.7:  # zoomed out: the name alone, enlarged to stay readable, fitted to the box
            self._paint_name_only(painter, lod, ink)
            return
        r = self.rect.adjusted(PAD + (6 if self.kind == "input" else 0), PAD - 2, -PAD, -PAD + 2)
        line_h = self._fm_small.height()
        painter.setPen(ink)
        painter.setFont(self.bold)
        top = QRectF(r.left(), r.top(), r.width(), self._fm_bold.height())
        painter.drawText(top, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, self.title)
        if self.kind == "output":
            painter.setFont(self.small)
            painter.drawText(top, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, "OUTPUT")
        if lod < 0.7:
            return
        painter.setFont(self.small)
        y = top.bottom() + 1
        lines = [self.subtitle] if self.kind == "input" else [self.subtitle, self.placement, self.time_text]
        for k, text in enumerate(lines):
            if not text:
                continue
            row = QRectF(r.left(), y + k * line_h, r.width(), line_h)
            painter.drawText(row, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, text)

    def zoomed_out_line(self) -> str:
        """The second line when zoomed out: where the stage is computed (an input has none)."""
        return self.placement if self.kind != "input" else ""

    def _paint_name_only(self, painter: QPainter, lod: float, ink: QColor) -> None:
        """Name (and where the stage is computed), enlarged to stay legible, fitted to the box."""
        r = self.rect.adjusted(PAD, 3, -PAD, -3)
        second = self.zoomed_out_line()
        lines = [self.label] + ([second] if second else [])
        widest = max(self._fm_bold.horizontalAdvance(t) for t in lines) or 1.0
        grow = min(0.8 / lod, r.width() / widest, r.height() / len(lines) / self._fm_bold.height())
        font = QFont(self.bold)
        font.setPointSizeF(self.bold.pointSizeF() * max(1.0, grow))
        fm = QFontMetricsF(font)
        painter.setPen(ink)
        top = r.center().y() - len(lines) * fm.height() / 2
        for k, text in enumerate(lines):
            if k == 1:
                font.setBold(False)
            painter.setFont(font)
            row = QRectF(r.left(), top + k * fm.height(), r.width(), fm.height())
            painter.drawText(row, Qt.AlignmentFlag.AlignCenter, fm.elidedText(text, Qt.TextElideMode.ElideRight, r.width()))


class EdgeItem(QGraphicsPathItem):
    """A producer -> consumer edge: a smooth curve through its route with an arrow head."""

    ARROW = 8.0

    def __init__(self, points: list[tuple[float, float]], vertical: bool = False) -> None:
        """`vertical`: the route runs top to bottom (curves leave and enter nodes vertically)."""
        super().__init__()
        pts = [QPointF(x, y) for x, y in points]
        tip = pts[-1]
        a_ = self.ARROW
        # The line stops where the arrow head starts.
        pts[-1] = QPointF(tip.x(), tip.y() - a_ + 1) if vertical else QPointF(tip.x() - a_ + 1, tip.y())
        path = QPainterPath(pts[0])
        for a, b in zip(pts, pts[1:]):
            if vertical:
                dy = (b.y() - a.y()) / 2
                path.cubicTo(QPointF(a.x(), a.y() + dy), QPointF(b.x(), b.y() - dy), b)
            else:
                dx = (b.x() - a.x()) / 2
                path.cubicTo(QPointF(a.x() + dx, a.y()), QPointF(b.x() - dx, b.y()), b)
        self.setPath(path)
        if vertical:
            self.arrow = QPolygonF([tip, QPointF(tip.x() - 4, tip.y() - a_), QPointF(tip.x() + 4, tip.y() - a_)])
        else:
            self.arrow = QPolygonF([tip, QPointF(tip.x() - a_, tip.y() - 4), QPointF(tip.x() - a_, tip.y() + 4)])
        self.hot = False
        self._apply_pen()
        self.setZValue(0)
        self.setAcceptedMouseButtons(Qt.MouseButton.NoButton)

    def _apply_pen(self) -> None:
        pen = QPen(EDGE_HOT if self.hot else EDGE, 2.0 if self.hot else 1.3)
        pen.setCosmetic(True)  # the same thickness at every zoom
        self.setPen(pen)

    def set_hot(self, hot: bool) -> None:
        if hot != self.hot:
            self.hot = hot
            self._apply_pen()
            self.setZValue(0.5 if hot else 0)

    def boundingRect(self) -> QRectF:  # noqa: N802  # Qt override
        return super().boundingRect().united(self.arrow.boundingRect()).adjusted(-2, -2, 2, 2)

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None) -> None:
        painter.setPen(self.pen())
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawPath(self.path())
        if option.levelOfDetailFromTransform(painter.worldTransform()) >= 0.3:
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(self.pen().color())
            painter.drawPolygon(self.arrow)


def node_subtitle(p: Pipeline, name: str) -> str:
    shape = "×".join(map(str, p.shape_of(name)))
    if name in p.input_map:
        return f"input · {shape}"
    return f"{p.stage(name).op} · {shape}"


def time_text(ms: float | None, total: float) -> str:
    if ms is None:
        return ""
    share = ms / total if total > 0 else 0.0
    return f"{share:.1%} · {ms:.3g} ms"


class GroupItem(NodeItem):
    """A collapsed group of stages (one layer of a model): a stage-sized card on a stack of
    two more, with a '+' badge; double-click (or its context menu) expands it."""

    STACK = 5.0

    def __init__(self, gid: str, label: str, subtitle: str, font: QFont) -> None:
        super().__init__(gid, "group", subtitle, font, label=label)
        self.title = self._elide(label, self._fm_bold, NODE_W - 2 * PAD - 22)
        self.brief = subtitle.split(" · ")[0]  # '8 stages': the second line when zoomed out

    def zoomed_out_line(self) -> str:
        return self.brief

    def boundingRect(self) -> QRectF:  # noqa: N802  # Qt override
        return self.rect.adjusted(-2, -2, 2 + 2 * self.STACK, 2 + 2 * self.STACK)

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None) -> None:
        painter.setPen(QPen(BORDER, 1.0))
        painter.setBrush(QBrush(self.fill.darker(112)))
        for k in (2, 1):  # the cards behind: it holds several stages
            painter.drawRoundedRect(self.rect.translated(k * self.STACK, k * self.STACK), 8, 8)
        super().paint(painter, option, widget)
        if option.levelOfDetailFromTransform(painter.worldTransform()) >= 0.7:
            badge = QRectF(self.rect.right() - PAD - 14, self.rect.top() + PAD - 1, 14, 14)
            painter.setPen(QPen(text_color_on(self.fill), 1.2))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRoundedRect(badge, 3, 3)
            c = badge.center()
            painter.drawLine(QPointF(c.x() - 4, c.y()), QPointF(c.x() + 4, c.y()))
            painter.drawLine(QPointF(c.x(), c.y() - 4), QPointF(c.x(), c.y() + 4))


class GroupFrame(QGraphicsItem):
    """The outline of an expanded group behind its stages, with the group's name on top;
    double-click the outline (or use the context menu) to collapse it again."""

    HEADER = 30.0

    def __init__(self, gid: str, label: str, members: QRectF, font: QFont) -> None:
        super().__init__()
        self.name, self.label = gid, label
        self.rect = members.adjusted(-14, -14 - self.HEADER, 14, 14)
        self.font = QFont(font)
        self.font.setBold(True)
        self.font.setPointSizeF(font.pointSizeF() * 1.6)  # read from afar: the frame is seen zoomed out
        self.setZValue(-1)
        self.setToolTip(f"<b>{label}</b> ({gid})<br>Double-click the outline to collapse the group")

    def boundingRect(self) -> QRectF:  # noqa: N802  # Qt override
        return self.rect.adjusted(-2, -2, 2, 2)

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None) -> None:
        ink = widget.palette().color(QPalette.ColorRole.Text) if widget else BORDER
        tint = QColor(EDGE_HOT)
        tint.setAlphaF(0.06)
        pen = QPen(EDGE_HOT, 1.2, Qt.PenStyle.DashLine)
        pen.setCosmetic(True)
        painter.setPen(pen)
        painter.setBrush(QBrush(tint))
        painter.drawRoundedRect(self.rect, 12, 12)
        if option.levelOfDetailFromTransform(painter.worldTransform()) < 0.22:
            return
        painter.setPen(ink)
        painter.setFont(self.font)
        head = QRectF(self.rect.left() + 12, self.rect.top() + 4, self.rect.width() - 24, self.HEADER)
        painter.drawText(head, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, f"− {self.label}")
