"""The pipeline as a graph: inputs and stages as nodes left to right, producer -> consumer
edges, each stage tinted by its share of the run time.

The scene is built once per pipeline (the layout comes from graph_layout) and only
repainted afterwards: a schedule edit changes node texts and colours, never geometry.
Nodes paint by level of detail (no text when zoomed far out) and cache their pixels, so a
500-stage graph pans and zooms smoothly."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QPointF, QRectF, Qt, Signal, Slot
from PySide6.QtGui import (
    QBrush,
    QColor,
    QFont,
    QFontMetricsF,
    QKeyEvent,
    QMouseEvent,
    QPainter,
    QPainterPath,
    QPalette,
    QPen,
    QPolygonF,
    QWheelEvent,
)
from PySide6.QtWidgets import (
    QGraphicsItem,
    QGraphicsPathItem,
    QGraphicsScene,
    QGraphicsView,
    QStyleOptionGraphicsItem,
    QWidget,
)

from engine.ir import Pipeline

from .graph_layout import Layout, layered_layout
from .history import StageTimes

NODE_W, STAGE_H, INPUT_H = 164.0, 74.0, 40.0
PAD = 8.0
MAX_ZOOM, MIN_ZOOM = 3.0, 0.02
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

    def __init__(self, name: str, kind: str, subtitle: str, font: QFont) -> None:
        super().__init__()
        self.name, self.kind = name, kind
        h = INPUT_H if kind == "input" else STAGE_H
        self.rect = QRectF(-NODE_W / 2, -h / 2, NODE_W, h)
        self.font, self.bold = QFont(font), QFont(font)
        self.bold.setBold(True)
        self.small = QFont(font)
        self.small.setPointSizeF(font.pointSizeF() * 0.9)
        self._fm_bold, self._fm_small = QFontMetricsF(self.bold), QFontMetricsF(self.small)
        self.title = self._elide(name, self._fm_bold, NODE_W - 2 * PAD - (46 if kind == "output" else 0))
        self.subtitle = self._elide(subtitle, self._fm_small, NODE_W - 2 * PAD)
        self.placement = ""
        self.time_text = ""
        self.inline = False
        self.fill = INPUT_FILL if kind == "input" else heat_color(0.0)
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemIsSelectable, kind != "input")
        self.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        self.setZValue(1)
        self.setCursor(Qt.CursorShape.PointingHandCursor if kind != "input" else Qt.CursorShape.ArrowCursor)

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

    def _paint_name_only(self, painter: QPainter, lod: float, ink: QColor) -> None:
        """Name (and where the stage is computed), enlarged to stay legible, fitted to the box."""
        r = self.rect.adjusted(PAD, 3, -PAD, -3)
        lines = [self.name] + ([self.placement] if self.kind != "input" and self.placement else [])
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

    def __init__(self, points: list[tuple[float, float]]) -> None:
        super().__init__()
        pts = [QPointF(x, y) for x, y in points]
        tip = pts[-1]
        pts[-1] = QPointF(tip.x() - self.ARROW + 1, tip.y())  # the line stops where the arrow head starts
        path = QPainterPath(pts[0])
        for a, b in zip(pts, pts[1:]):
            dx = (b.x() - a.x()) / 2
            path.cubicTo(QPointF(a.x() + dx, a.y()), QPointF(b.x() - dx, b.y()), b)
        self.setPath(path)
        self.arrow = QPolygonF([tip, QPointF(tip.x() - self.ARROW, tip.y() - 4), QPointF(tip.x() - self.ARROW, tip.y() + 4)])
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


class GraphView(QGraphicsView):
    """The pipeline graph; emits `stage_selected(name or None)` when the user picks a node."""

    stage_selected = Signal(object)
    legend_changed = Signal(str, float)  # source of the times, largest share

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("graph_view")
        scene = QGraphicsScene(self)
        # The default BSP index suits a static scene: it is built once, after the layout.
        scene.setItemIndexMethod(QGraphicsScene.ItemIndexMethod.BspTreeIndex)
        self.setScene(scene)
        self.setRenderHints(QPainter.RenderHint.Antialiasing | QPainter.RenderHint.TextAntialiasing)
        self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)
        self.setResizeAnchor(QGraphicsView.ViewportAnchor.AnchorViewCenter)
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.SmartViewportUpdate)
        self.setCacheMode(QGraphicsView.CacheModeFlag.CacheBackground)
        self.setOptimizationFlag(QGraphicsView.OptimizationFlag.DontSavePainterState)
        self.setBackgroundBrush(self.palette().color(QPalette.ColorRole.Base))
        self.setToolTip("")
        self.nodes: dict[str, NodeItem] = {}
        self.edges: dict[tuple[str, str], EdgeItem] = {}
        self.layout_result: Layout | None = None
        self._pipeline_hash = ""
        self._syncing = False
        scene.selectionChanged.connect(self._on_selection)

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802  # Qt override
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:  # the theme changed: the cached background follows
            self.setBackgroundBrush(self.palette().color(QPalette.ColorRole.Base))
            self.resetCachedContent()
            for node in self.nodes.values():
                node.update()  # their device caches hold borders drawn for the old palette

    # --- building ---------------------------------------------------------------------
    def set_pipeline(self, p: Pipeline) -> bool:
        """(Re)build the scene for `p`; False (nothing done) if it is the one shown."""
        h = p.content_hash()
        if h == self._pipeline_hash:
            return False
        self._pipeline_hash = h
        scene = self.scene()
        self._syncing = True
        scene.clear()
        self._syncing = False
        self.nodes.clear()
        self.edges.clear()
        g = p.graph
        self.layout_result = lay = layered_layout(g, lambda n: (NODE_W, INPUT_H if g.nodes[n]["kind"] == "input" else STAGE_H))
        font = self.font()
        for name in g.nodes:
            item = NodeItem(name, g.nodes[name]["kind"], node_subtitle(p, name), font)
            item.setPos(*lay.centers[name])
            scene.addItem(item)
            self.nodes[name] = item
        for (u, v), pts in lay.routes.items():
            edge = EdgeItem(pts)
            scene.addItem(edge)
            self.edges[(u, v)] = edge
        m = 40.0
        scene.setSceneRect(QRectF(-m, -m, lay.width + 2 * m, lay.height + 2 * m))
        return True

    def update_state(self, placements: dict[str, str], times: StageTimes | None) -> None:
        """Per-stage compute location and tint; cheap, so it runs after every edit."""
        total = times.total if times else 0.0
        ms = times.ms if times else {}
        top = max(ms.values(), default=0.0)
        for name, item in self.nodes.items():
            if item.kind == "input":
                item.setToolTip(f"<b>{name}</b><br>{item.subtitle}")
                continue
            t = ms.get(name)
            fill = heat_color(t / top if t is not None and top > 0 else 0.0)
            where = placements.get(name, "")
            item.set_state(where, fill, time_text(t, total) if times and where != "inline" else "")
            tip = f"<b>{name}</b> ({item.kind})<br>{item.subtitle}<br>computed {where}"
            if times and t is not None:
                tip += f"<br>{time_text(t, total)} of the run ({times.source})"
            item.setToolTip(tip)
        share = top / total if total > 0 else 0.0
        self.legend_changed.emit(times.source if times else "", share)

    # --- selection --------------------------------------------------------------------
    def selected_stage(self) -> str | None:
        items = [i for i in self.scene().selectedItems() if isinstance(i, NodeItem)]
        return items[0].name if items else None

    def select_stage(self, name: str | None, center: bool = True) -> None:
        """Show `name` selected (without emitting) and scroll it into view."""
        if name == self.selected_stage():
            return
        self._syncing = True
        try:
            self.scene().clearSelection()
            item = self.nodes.get(name or "")
            if item is not None and item.kind != "input":
                item.setSelected(True)
                if center:
                    self.ensureVisible(item, 60, 60)
        finally:
            self._syncing = False
        self._highlight_edges(name)

    @Slot()
    def _on_selection(self) -> None:
        name = self.selected_stage()
        self._highlight_edges(name)
        if not self._syncing:
            self.stage_selected.emit(name)

    def _highlight_edges(self, name: str | None) -> None:
        for (u, v), edge in self.edges.items():
            edge.set_hot(name is not None and name in (u, v))

    def find(self, text: str) -> str | None:
        """Select and centre the stage called `text` (else the first whose name contains it,
        ignoring case); returns its name, or None if none matches."""
        q = text.strip().lower()
        if not q:
            return None
        stages = [n for n, i in self.nodes.items() if i.kind != "input"]
        match = next((n for n in stages if n.lower() == q), None) or next((n for n in stages if q in n.lower()), None)
        if match is None:
            return None
        self.select_stage(match, center=False)
        if self.transform().m11() < 0.8:  # zoom in far enough to read the node
            self.set_zoom(1.0)
        self.centerOn(self.nodes[match])
        self.stage_selected.emit(match)
        return match

    # --- zoom and pan -----------------------------------------------------------------
    def zoom(self) -> float:
        return self.transform().m11()

    def set_zoom(self, z: float) -> None:
        z = min(MAX_ZOOM, max(MIN_ZOOM, z))
        self.resetTransform()
        self.scale(z, z)

    def zoom_by(self, factor: float) -> None:
        z = self.zoom()
        factor = min(MAX_ZOOM / z, max(MIN_ZOOM / z, factor))
        self.scale(factor, factor)

    @Slot()
    def fit(self) -> None:
        """Whole graph in view, but never magnified past 1:1 (a three-node graph stays small)."""
        rect = self.scene().sceneRect()
        if rect.isEmpty():
            return
        self.fitInView(rect, Qt.AspectRatioMode.KeepAspectRatio)
        if self.zoom() > 1.0:
            self.set_zoom(1.0)
            self.centerOn(rect.center())

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802  # Qt override
        # Only a press on a stage reaches the scene: elsewhere (background, inputs, edges)
        # it just pans, and the selection the other panels follow survives the drag.
        item = self.itemAt(event.position().toPoint())
        self.setInteractive(isinstance(item, NodeItem) and item.kind != "input")
        super().mousePressEvent(event)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:  # noqa: N802  # Qt override
        super().mouseReleaseEvent(event)
        self.setInteractive(True)

    def wheelEvent(self, event: QWheelEvent) -> None:  # noqa: N802  # Qt override
        steps = event.angleDelta().y() / 120.0
        if steps:
            self.zoom_by(1.15**steps)
        event.accept()

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802  # Qt override
        key = event.key()
        if key == Qt.Key.Key_F and not event.modifiers():
            self.fit()
        elif key in (Qt.Key.Key_Plus, Qt.Key.Key_Equal):
            self.zoom_by(1.25)
        elif key == Qt.Key.Key_Minus:
            self.zoom_by(0.8)
        elif key == Qt.Key.Key_Escape and self.selected_stage() is not None:
            self.scene().clearSelection()
        else:
            super().keyPressEvent(event)
