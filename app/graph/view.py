"""The pipeline as a graph: inputs and stages as nodes left to right, producer -> consumer
edges, each stage tinted by its share of the run time.

The scene is built once per pipeline (the layout comes from layout.py) and only
repainted afterwards: a schedule edit changes node texts and colours, never geometry.
Nodes paint by level of detail and cache their pixels (items.py), so a 500-stage
graph pans and zooms smoothly. A large imported model opens grouped (groups.py):
each layer is one node until it is expanded (double-click, context menu, or selecting a
stage inside it); only expanding or collapsing lays the graph out again."""

from __future__ import annotations

from collections import Counter

from PySide6.QtCore import QEvent, QPoint, QPointF, QRectF, Qt, Signal, Slot
from PySide6.QtGui import QContextMenuEvent, QKeyEvent, QMouseEvent, QPainter, QPalette, QWheelEvent
from PySide6.QtWidgets import QGraphicsItem, QGraphicsScene, QGraphicsView, QMenu, QWidget

from engine.ir import Pipeline

from ..model.edits import QUICK_ACTIONS
from ..model.history import StageTimes
from .groups import AUTO_GROUP_STAGES, Grouping, find_groups, visible_graph
from .items import (  # noqa: F401  # re-exported: the graph's look is imported from here
    EDGE_HOT,
    HEAT_STOPS,
    INLINE_FILL,
    INPUT_BORDER,
    INPUT_FILL,
    INPUT_H,
    NODE_W,
    STAGE_H,
    EdgeItem,
    GroupFrame,
    GroupItem,
    NodeItem,
    heat_color,
    node_subtitle,
    output_border,
    text_color_on,
    time_text,
)
from .layout import DIRECTIONS, Layout, layered_layout

MAX_ZOOM, MIN_ZOOM = 3.0, 0.02
READABLE_ZOOM = 0.4  # names drawn enlarged from LOD 0.22, every line from 0.7 (items.py)


class GraphView(QGraphicsView):
    """The pipeline graph; emits `stage_selected(name or None)` when the user picks a node."""

    stage_selected = Signal(object)
    legend_changed = Signal(str, float)  # source of the times, largest share
    grouping_changed = Signal()  # grouping turned on or off, or a group expanded or collapsed
    # A node's context menu asked for a schedule action on a stage: (stage, key), key one of
    # edits.QUICK_ACTIONS or "add" (open the editor's form for a new directive).
    schedule_action = Signal(str, str)
    direction_changed = Signal(str)  # "LR" or "TB", chosen in the context menu

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
        self.nodes: dict[str, NodeItem] = {}  # the inputs and stages drawn (not those inside collapsed groups)
        self.groups: dict[str, GroupItem] = {}  # collapsed groups
        self.frames: dict[str, GroupFrame] = {}  # outlines of expanded groups
        self.edges: dict[tuple[str, str], EdgeItem] = {}
        self.layout_result: Layout | None = None
        self.pipeline: Pipeline | None = None
        self.grouping = Grouping()
        self.grouped = False
        self.expanded: set[str] = set()
        self.direction = "LR"  # layers left to right, or "TB": top to bottom
        # True while the view shows what the last fit chose: a resized panel fits again. The
        # user's zoom, pan or find turns it off (their view is kept).
        self.auto_fit = True
        self._state: tuple[dict[str, str], StageTimes | None] = ({}, None)
        self._pipeline_hash = ""
        self._syncing = False
        scene.selectionChanged.connect(self._on_selection)

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802  # Qt override
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:  # the theme changed: the cached background follows
            self.setBackgroundBrush(self.palette().color(QPalette.ColorRole.Base))
            self.resetCachedContent()
            for node in [*self.nodes.values(), *self.groups.values()]:
                node.update()  # their device caches hold borders drawn for the old palette

    # --- building ---------------------------------------------------------------------
    def set_pipeline(self, p: Pipeline) -> bool:
        """(Re)build the scene for `p`; False (nothing done) if it is the one shown. A model
        with AUTO_GROUP_STAGES stages or more opens grouped by layer."""
        h = p.content_hash()
        if h == self._pipeline_hash:
            return False
        self._pipeline_hash, self.pipeline = h, p
        self.grouping = find_groups(p)
        self.grouped = bool(self.grouping) and len(p.stages) >= AUTO_GROUP_STAGES
        self.expanded = set()
        self._state = ({}, None)
        self._rebuild()
        return True

    def _rebuild(self) -> None:
        """Lay out what is visible (groups contracted unless expanded) and create its items."""
        p = self.pipeline
        assert p is not None
        keep = self.selected_stage()
        scene = self.scene()
        self._syncing = True
        scene.clear()
        self._syncing = False
        self.nodes.clear()
        self.groups.clear()
        self.frames.clear()
        self.edges.clear()
        g = visible_graph(p.graph, self.grouping, self.expanded) if self.grouped else p.graph
        self.layout_result = lay = layered_layout(
            g, lambda n: (NODE_W, INPUT_H if g.nodes[n]["kind"] == "input" else STAGE_H), direction=self.direction
        )
        font = self.font()
        for name in g.nodes:
            kind = g.nodes[name]["kind"]
            if kind == "group":
                group = self.groups[name] = GroupItem(name, self.grouping.labels[name], self._group_subtitle(name), font)
                item: NodeItem = group
            else:  # inside an expanded group, names go without the group's prefix (the outline shows it)
                label = self.grouping.short_name(name) if self.grouped else name
                item = self.nodes[name] = NodeItem(name, kind, node_subtitle(p, name), font, label=label)
            item.setPos(*lay.centers[name])
            scene.addItem(item)
        for gid in self.expanded if self.grouped else ():
            # Around the stages only: weights sit a column left of their reader, beside the previous layer.
            members = [self.nodes[n].sceneBoundingRect() for n in self.grouping.groups[gid]]
            box = members[0]
            for r in members[1:]:
                box = box.united(r)
            self.frames[gid] = GroupFrame(gid, self.grouping.labels[gid], box, font)
            scene.addItem(self.frames[gid])
        for (u, v), pts in lay.routes.items():
            edge = EdgeItem(pts, vertical=self.direction == "TB")
            scene.addItem(edge)
            self.edges[(u, v)] = edge
        m = 40.0
        rect = QRectF(-m, -m, lay.width + 2 * m, lay.height + 2 * m)
        for f in self.frames.values():
            rect = rect.united(f.boundingRect().adjusted(-m, -m, m, m))
        scene.setSceneRect(rect)
        self.update_state(*self._state)
        if keep in self.nodes:
            self.select_stage(keep, center=False)
        self.grouping_changed.emit()

    def _group_subtitle(self, gid: str) -> str:
        assert self.pipeline is not None
        ops = Counter(self.pipeline.stage(s).op for s in self.grouping.groups[gid])
        top = ", ".join(f"{n} {op}" for op, n in ops.most_common(2))
        return f"{len(self.grouping.groups[gid])} stages · {top}"

    def update_state(self, placements: dict[str, str], times: StageTimes | None) -> None:
        """Per-stage compute location and tint; cheap, so it runs after every edit. A
        collapsed group shows the sum of its stages' times."""
        self._state = (placements, times)
        total = times.total if times else 0.0
        ms = dict(times.ms) if times else {}
        for gid in self.groups:
            got = [ms[s] for s in self.grouping.groups[gid] if s in ms]
            if got:
                ms[gid] = sum(got)
        top = max((ms[n] for n in [*self.nodes, *self.groups] if n in ms), default=0.0)
        for name, item in [*self.nodes.items(), *self.groups.items()]:
            if item.kind == "input":
                item.setToolTip(f"<b>{name}</b><br>{item.subtitle}")
                continue
            t = ms.get(name)
            fill = heat_color(t / top if t is not None and top > 0 else 0.0)
            if item.kind == "group":
                where = self._group_placements(name, placements)
                tip = f"<b>{item.label}</b> (group of {len(self.grouping.groups[name])} stages: {name})<br>{where}"
                tip += "<br>Double-click to expand"
            else:
                where = placements.get(name, "")
                tip = f"<b>{name}</b> ({item.kind})<br>{item.subtitle}<br>computed {where}"
            item.set_state(self._short_where(name, where), fill, time_text(t, total) if times and where != "inline" else "")
            if times and t is not None:
                tip += f"<br>{time_text(t, total)} of the run ({times.source})"
            item.setToolTip(tip)
        share = top / total if total > 0 else 0.0
        self.legend_changed.emit(times.source if times else "", share)

    def _short_where(self, name: str, where: str) -> str:
        """'at layer1_layer1_1_relu_Relu.xo' -> 'at relu_Relu.xo' when both are in one group."""
        consumer, _, loop = where[3:].rpartition(".") if where.startswith("at ") else ("", "", "")
        if not consumer or self.group_of(consumer) is None or self.group_of(consumer) != self.group_of(name):
            return where
        return f"at {self.grouping.short_name(consumer)}.{loop}"

    def _group_placements(self, gid: str, placements: dict[str, str]) -> str:
        kinds = Counter("at" if placements.get(s, "").startswith("at ") else placements.get(s, "") for s in self.grouping.groups[gid])
        return " · ".join(f"{n} {k}" for k, n in kinds.most_common() if k)

    def set_direction(self, direction: str) -> None:
        """Lay the graph out left to right ("LR") or top to bottom ("TB")."""
        if direction not in DIRECTIONS:
            raise ValueError(f"layout direction must be one of {', '.join(DIRECTIONS)}, got {direction!r}")
        if direction != self.direction:
            self.direction = direction
            if self.pipeline is not None:
                self._rebuild()

    # --- groups -----------------------------------------------------------------------
    def group_of(self, stage: str) -> str | None:
        """The group `stage` is drawn in while grouping is on, else None."""
        return self.grouping.of.get(stage) if self.grouped else None

    def set_grouped(self, on: bool) -> None:
        """Turn grouping on (every group collapsed) or off (every stage its own node)."""
        on = on and bool(self.grouping)
        if on != self.grouped and self.pipeline is not None:
            self.grouped, self.expanded = on, set()
            self._rebuild()

    def expand_group(self, gid: str, center: bool = True) -> None:
        if self.grouped and gid in self.grouping.groups and gid not in self.expanded:
            self.expanded.add(gid)
            self._rebuild()
            if center:
                self.centerOn(self.frames[gid])

    def collapse_group(self, gid: str) -> None:
        if gid in self.expanded:
            self.expanded.discard(gid)
            self._rebuild()
            self.centerOn(self.groups[gid])

    def set_all_expanded(self, expanded: bool) -> None:
        if self.grouped:
            self.expanded = set(self.grouping.groups) if expanded else set()
            self._rebuild()

    # --- selection --------------------------------------------------------------------
    def selected_stage(self) -> str | None:
        items = [i for i in self.scene().selectedItems() if isinstance(i, NodeItem)]
        return items[0].name if items else None

    def select_stage(self, name: str | None, center: bool = True) -> None:
        """Show `name` selected (without emitting) and scroll it into view; a stage inside a
        collapsed group expands the group first."""
        if name == self.selected_stage():
            return
        gid = self.group_of(name or "")
        if gid is not None and gid not in self.expanded:
            self.expand_group(gid, center=False)
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

    def find_stage(self, text: str) -> str | None:
        """Select and centre the stage called `text` (else the first whose name contains it,
        ignoring case); returns its name, or None if none matches."""
        q = text.strip().lower()
        if not q:
            return None
        stages = [st.name for st in self.pipeline.stages] if self.pipeline else []  # also those in collapsed groups
        match = next((n for n in stages if n.lower() == q), None) or next((n for n in stages if q in n.lower()), None)
        if match is None:
            return None
        self.select_stage(match, center=False)
        self.auto_fit = False
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
        self.auto_fit = False
        z = self.zoom()
        factor = min(MAX_ZOOM / z, max(MIN_ZOOM / z, factor))
        self.scale(factor, factor)

    @Slot()
    def fit(self, readable: bool = False) -> None:
        """Whole graph in view, but never magnified past 1:1 (a three-node graph stays small).
        `readable`: never shrunk below READABLE_ZOOM either (node names stay legible), showing
        the graph's start (a freshly opened long model: its inputs, not a row of specks)."""
        rect = self.scene().sceneRect()
        if rect.isEmpty():
            return
        self.auto_fit = True
        self.fitInView(rect, Qt.AspectRatioMode.KeepAspectRatio)
        if self.zoom() > 1.0:
            self.set_zoom(1.0)
            self.centerOn(rect.center())
        elif readable and self.zoom() < READABLE_ZOOM:
            self.set_zoom(READABLE_ZOOM)
            self.centerOn(self._start_point(rect))

    def _start_point(self, rect: QRectF) -> QPointF:
        """Where a view too small for the whole graph is centred: on its first layers, across
        from where their nodes are (not the middle of the whole graph: a long model drifts,
        and its middle row at the start can be empty)."""
        seen = self.mapToScene(self.viewport().rect()).boundingRect()
        lay = self.layout_result
        vertical = self.direction == "TB"
        along = rect.top() + seen.height() / 2 if vertical else rect.left() + seen.width() / 2
        if lay is None or not lay.centers:
            return QPointF(rect.center().x(), along) if vertical else QPointF(along, rect.center().y())
        reach = seen.height() if vertical else seen.width()
        start = rect.top() if vertical else rect.left()
        # The nodes in the part of the graph the view shows first, and the middle of them across.
        across = [x if vertical else y for x, y in lay.centers.values() if (y if vertical else x) - start <= reach]
        mid = (min(across) + max(across)) / 2 if across else (rect.center().x() if vertical else rect.center().y())
        return QPointF(mid, along) if vertical else QPointF(along, mid)

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802  # Qt override
        # Only a press on a stage reaches the scene: elsewhere (background, inputs, edges)
        # it just pans, and the selection the other panels follow survives the drag.
        item = self.itemAt(event.position().toPoint())
        self.setInteractive(isinstance(item, NodeItem) and item.kind not in ("input", "group"))
        self.auto_fit = False  # a drag pans: the user's view from now on
        super().mousePressEvent(event)

    def _target(self, pos: QPoint) -> QGraphicsItem | None:
        """The node, group or group outline at a viewport position (edges are looked through)."""
        return next((i for i in self.items(pos) if isinstance(i, (NodeItem, GroupFrame))), None)

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:  # noqa: N802  # Qt override
        item = self._target(event.position().toPoint())
        if isinstance(item, GroupItem):
            self.expand_group(item.name)
        elif isinstance(item, GroupFrame):
            self.collapse_group(item.name)
        else:
            super().mouseDoubleClickEvent(event)
            return
        event.accept()

    def context_menu(self, pos: QPoint) -> QMenu:
        """The menu at a viewport position: expand or collapse the group there, every group,
        and grouping itself on or off."""
        menu = QMenu(self)
        item = self._target(pos)
        gid = None
        if isinstance(item, (GroupItem, GroupFrame)):
            gid = item.name
        elif isinstance(item, NodeItem):
            gid = self.group_of(item.name)
        if isinstance(item, NodeItem) and not isinstance(item, GroupItem) and item.kind != "input":
            self._add_schedule_actions(menu, item.name)
        if isinstance(item, GroupItem):
            menu.addAction(f"Expand “{item.label}”", lambda: self.expand_group(item.name))
        elif gid is not None and gid in self.expanded:
            menu.addAction(f"Collapse “{self.grouping.labels[gid]}”", lambda: self.collapse_group(gid))
        if self.grouped:
            menu.addAction("Expand all groups", lambda: self.set_all_expanded(True))
            menu.addAction("Collapse all groups", lambda: self.set_all_expanded(False))
        menu.addSeparator()
        act = menu.addAction("Group stages by layer")
        act.setCheckable(True)
        act.setChecked(self.grouped)
        act.setEnabled(bool(self.grouping))
        act.setToolTip("One node per layer of an imported model (from its module paths)")
        act.toggled.connect(self.set_grouped)
        layout_menu = menu.addMenu("Layout")
        for direction, text in (("LR", "Left to right"), ("TB", "Top to bottom")):
            act = layout_menu.addAction(text)
            act.setCheckable(True)
            act.setChecked(self.direction == direction)
            act.triggered.connect(lambda _=False, d=direction: self.direction_changed.emit(d))
        menu.addAction("Fit (F)", self.fit)
        return menu

    def _add_schedule_actions(self, menu: QMenu, stage: str) -> None:
        """The editor's quick actions and Add directive for the stage under the mouse."""
        assert self.pipeline is not None
        s = self.pipeline.stage(stage)
        menu.addSection(f"Schedule {stage}")
        for key, (label, tip, _fn) in QUICK_ACTIONS.items():
            act = menu.addAction(label)
            act.triggered.connect(lambda _=False, k=key: self.schedule_action.emit(stage, k))
            act.setToolTip(tip)
            if key == "inline" and (stage in self.pipeline.outputs or s.is_reduction):
                act.setEnabled(False)  # as in the editor: an output or a reduction is never inlined
        menu.addAction("Add directive…", lambda: self.schedule_action.emit(stage, "add"))
        menu.addSeparator()

    def contextMenuEvent(self, event: QContextMenuEvent) -> None:  # noqa: N802  # Qt override
        self.context_menu(event.pos()).exec(event.globalPos())

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
