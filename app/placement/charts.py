"""The Placement tab's pictures (pyqtgraph, each a perf_charts.Chart, so each exports as
PNG / SVG / CSV on right-click): the stage graph coloured by device, the Gantt chart of
a timeline (one row per device and per link), memory per device against its capacity, and
a learned policy's training curve."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import networkx as nx
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor

from engine.placement.devices import DeviceProfile
from engine.placement.graph import OpGraph
from engine.placement.simulator import Event

from ..chart_export import Table
from ..graph.layout import layered_layout
from ..perf_charts import NEUTRAL_COLOR, Chart, swatch

# One colour per device (cycled past eight): distinct in both themes and for the common
# forms of colour blindness (Okabe & Ito's palette).
DEVICE_COLORS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
OVER_COLOR = QColor("#c0392b")
LABELLED_NODES = 60  # above this many stages the graph shows names on hover only


def device_color(d: int) -> QColor:
    return QColor(DEVICE_COLORS[d % len(DEVICE_COLORS)])


def device_legend(profile: DeviceProfile) -> list[str]:
    return [swatch(device_color(d), f"{dev.name} ({dev.kind})") for d, dev in enumerate(profile.devices)]


class DeviceGraph(Chart):
    """The stage DAG, laid out left to right, each stage a dot in its device's colour.
    Clicking a stage selects it; the right-click menu then offers its device (`move_requested`)."""

    export_name = "placement-graph"
    stage_clicked = Signal(int)
    move_requested = Signal(int, int)  # node, device

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.item.setMouseEnabled(x=True, y=True)  # big graphs: pan and zoom
        self.item.hideAxis("left")
        self.item.hideAxis("bottom")
        self.item.invertY(True)
        self.graph: OpGraph | None = None
        self.profile: DeviceProfile | None = None
        self.placement: tuple[int, ...] = ()
        self.selected: int | None = None
        self.centers: list[tuple[float, float]] = []
        self.edges = pg.PlotDataItem(pen=pg.mkPen(NEUTRAL_COLOR, width=1), connect="pairs")
        self.dots = pg.ScatterPlotItem(size=14, hoverable=True, tip=self._tip)
        self.dots.sigClicked.connect(self._on_clicked)
        self.labels: list[pg.TextItem] = []
        self.item.addItem(self.edges)
        self.item.addItem(self.dots)
        self.show_message("Open a pipeline to place its stages.")

    def set_graph(self, g: OpGraph | None, profile: DeviceProfile | None) -> None:
        self.graph, self.profile, self.selected = g, profile, None
        for t in self.labels:
            self.item.removeItem(t)
        self.labels = []
        if g is None or profile is None:
            self.show_message("Open a pipeline to place its stages.")
            return
        dag = nx.DiGraph()  # the layout names nodes by strings (it adds its own for long edges)
        dag.add_nodes_from(str(i) for i in range(len(g.nodes)))
        dag.add_edges_from((str(a), str(b)) for a, b in g.edges)
        labelled = len(g.nodes) <= LABELLED_NODES
        # Node boxes as wide as their labels (in units of a dot), so the names do not overlap.
        width = [0.32 * len(n.name) + 1.0 if labelled else 1.0 for n in g.nodes]
        lay = layered_layout(dag, lambda i: (width[int(i)], 1.0), column_gap=1.2, row_gap=1.2)
        self.centers = [lay.centers[str(i)] for i in range(len(g.nodes))]
        xs: list[float] = []
        ys: list[float] = []
        for a, b in g.edges:
            xs += [self.centers[a][0], self.centers[b][0]]
            ys += [self.centers[a][1], self.centers[b][1]]
        self.edges.setData(xs, ys)
        if labelled:
            for i, node in enumerate(g.nodes):
                t = pg.TextItem(node.name, color=NEUTRAL_COLOR, anchor=(0.5, -0.4))
                t.setPos(*self.centers[i])
                self.item.addItem(t)
                self.labels.append(t)
        xs_all = [x for x, _ in self.centers]
        ys_all = [y for _, y in self.centers]
        self.item.setXRange(min(xs_all) - 1.5, max(xs_all) + 1.5, padding=0.02)
        self.item.setYRange(min(ys_all) - 1.5, max(ys_all) + 1.5, padding=0.02)

    def set_placement(self, placement: Sequence[int], selected: int | None = None) -> None:
        self.placement, self.selected = tuple(placement), selected
        self.redraw()

    def redraw(self) -> None:
        if self.graph is None or self.profile is None or len(self.placement) != len(self.graph.nodes):
            return
        spots = []
        for i, d in enumerate(self.placement):
            pen = pg.mkPen("#ffffff" if i != self.selected else "#d62728", width=1 if i != self.selected else 3)
            spots.append({"pos": self.centers[i], "brush": pg.mkBrush(device_color(d)), "pen": pen, "data": i})
        self.dots.setData(spots)
        self.show_plot(device_legend(self.profile) + ["click a stage to select it, right-click to move it"])

    def _tip(self, x: float, y: float, data: int) -> str:
        if self.graph is None or self.profile is None:
            return ""
        n = self.graph.nodes[data]
        dev = self.profile.devices[self.placement[data]].name if data < len(self.placement) else "?"
        return f"{n.name} ({n.kind}) on {dev}\n{n.flops / 1e6:.2f} MFLOP, output {n.output_bytes / 1e6:.2f} MB"

    def _on_clicked(self, _item: object, points: Any, _event: Any) -> None:
        if len(points):
            self.stage_clicked.emit(int(points[0].data()))

    def extend_menu(self, menu: Any) -> None:
        """Right-click: the selected stage's device (after the chart's exports)."""
        if self.profile is None or self.graph is None or self.selected is None or self.selected >= len(self.placement):
            return
        node = self.selected
        for d, dev in enumerate(self.profile.devices):
            act = menu.addAction(f"Place {self.graph.nodes[node].name} on {dev.name} ({dev.kind})")
            act.setCheckable(True)
            act.setChecked(d == self.placement[node])
            act.triggered.connect(lambda _=False, d=d: self.move_requested.emit(node, d))

    def data_table(self) -> Table:
        if self.graph is None or self.profile is None:
            return Table(["stage", "device"])
        rows: list[list[object]] = [
            [n.name, self.profile.devices[d].name, n.flops, n.output_bytes] for n, d in zip(self.graph.nodes, self.placement, strict=False)
        ]
        return Table(["stage", "device", "flops", "output_bytes"], rows)


class Gantt(Chart):
    """A timeline as horizontal bars: one row per device (stages, in their device's colour)
    and one per link that carried a tensor (transfers, grey); time in milliseconds."""

    export_name = "placement-gantt"

    def __init__(self, title: str, parent: Any = None) -> None:
        super().__init__(parent)
        self.title = title
        self.item.setMouseEnabled(x=True, y=False)  # zoom into a long timeline
        self.item.getAxis("bottom").setLabel("ms")
        self.events: tuple[Event, ...] = ()
        self.rows: list[str] = []
        self.profile: DeviceProfile | None = None
        self.graph: OpGraph | None = None
        self.placement: tuple[int, ...] = ()
        self.show_message(f"{title}: nothing yet.")

    def set_timeline(self, events: Sequence[Event], profile: DeviceProfile, graph: OpGraph, placement: Sequence[int], note: str) -> None:
        self.events, self.profile, self.graph, self.placement = tuple(events), profile, graph, tuple(placement)
        self.note = note
        self.redraw()

    def clear(self, why: str) -> None:
        self.events = ()
        self.show_message(why)

    def redraw(self) -> None:
        if not self.events or self.profile is None or self.graph is None:
            return
        self.item.clear()
        links = sorted({e.resource for e in self.events if e.kind == "transfer"})
        self.rows = [d.name for d in self.profile.devices] + links
        row_of = {name: i for i, name in enumerate(self.rows)}
        by_color: dict[str, tuple[list[float], list[float], list[float]]] = {}
        for e in self.events:
            color = device_color(self.placement[e.node]).name() if e.kind == "compute" else NEUTRAL_COLOR
            x0, y, w = by_color.setdefault(color, ([], [], []))
            x0.append(e.start_s * 1e3)
            y.append(row_of[e.resource])
            w.append(max((e.end_s - e.start_s) * 1e3, 1e-6))
        for color, (x0, y, w) in by_color.items():
            self.item.addItem(pg.BarGraphItem(x0=x0, y=y, width=w, height=0.7, brush=color, pen=pg.mkPen(None)))
        self.item.getAxis("left").setTicks([[(i, name) for i, name in enumerate(self.rows)]])
        self.item.invertY(True)
        end = max(e.end_s for e in self.events) * 1e3
        self.item.setYRange(-0.5, len(self.rows) - 0.5, padding=0.02)  # every device, idle ones too
        self.item.setXRange(0, end, padding=0.02)
        self.show_plot([f"<b>{self.title}</b>: {end:.3f} ms", self.note])

    def data_table(self) -> Table:
        names = self.graph.nodes if self.graph is not None else ()
        rows: list[list[object]] = [
            [e.kind, e.resource, names[e.node].name if e.node < len(names) else e.node, e.start_s * 1e3, e.end_s * 1e3, e.bytes]
            for e in self.events
        ]
        return Table(["kind", "resource", "stage", "start_ms", "end_ms", "bytes"], rows)


class MemoryBars(Chart):
    """Peak memory per device (weights and live tensors, simulated) against its capacity."""

    export_name = "placement-memory"

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.item.getAxis("bottom").setLabel("% of capacity")
        self.peaks: tuple[int, ...] = ()
        self.profile: DeviceProfile | None = None
        self.show_message("Memory per device: nothing placed yet.")

    def set_memory(self, peaks: Sequence[int], profile: DeviceProfile) -> None:
        self.peaks, self.profile = tuple(peaks), profile
        self.redraw()

    def redraw(self) -> None:
        if self.profile is None or not self.peaks:
            return
        self.item.clear()
        devs = self.profile.devices
        shares = [100.0 * p / d.memory_bytes for p, d in zip(self.peaks, devs, strict=True)]
        brushes = [OVER_COLOR if s > 100 else device_color(i) for i, s in enumerate(shares)]
        self.item.addItem(pg.BarGraphItem(x0=[0] * len(shares), y=list(range(len(shares))), width=shares, height=0.6, brushes=brushes))
        self.item.addItem(pg.InfiniteLine(pos=100, angle=90, pen=pg.mkPen(OVER_COLOR, style=Qt.PenStyle.DashLine)))
        self.item.getAxis("left").setTicks(
            [
                [
                    (i, f"{d.name}: {p / 1e6:.1f} / {d.memory_bytes / 1e6:.0f} MB")
                    for i, (d, p) in enumerate(zip(devs, self.peaks, strict=True))
                ]
            ]
        )
        self.item.invertY(True)
        self.item.setXRange(0, max(110.0, max(shares) * 1.05))
        over = [d.name for d, s in zip(devs, shares, strict=True) if s > 100]
        self.show_plot(
            [
                "<b>Peak memory</b> (simulated)",
                f"<span style='color:{OVER_COLOR.name()}'>over capacity: {', '.join(over)}</span>" if over else "fits",
            ]
        )

    def data_table(self) -> Table:
        if self.profile is None:
            return Table(["device", "peak_bytes", "capacity_bytes"])
        return Table(
            ["device", "peak_bytes", "capacity_bytes"],
            [[d.name, p, d.memory_bytes] for d, p in zip(self.profile.devices, self.peaks, strict=True)],
        )


class TrainingCurve(Chart):
    """A learned policy's training curve: per step, the mean simulated makespan of its samples
    (an out-of-memory one counted at its penalty), and the lowest step so far. The answer is the
    best valid placement seen, shown in the summary, not a point of this curve."""

    export_name = "placement-training"
    updated = Signal(int)  # the curve's length, after each update (live while a policy trains)

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.item.getAxis("bottom").setLabel("step")
        self.item.getAxis("left").setLabel("ms")
        self.curve: list[float] = []
        self.show_message("Training curve: run a learned policy (rl, hrl, gnn).")

    def set_curve(self, curve: Sequence[float], policy: str = "") -> None:
        self.curve, self.policy = [float(c) for c in curve], policy
        self.updated.emit(len(self.curve))
        if not self.curve:
            self.show_message("Training curve: run a learned policy (rl, hrl, gnn).")
            return
        self.redraw()

    def redraw(self) -> None:
        if not self.curve:
            return
        self.item.clear()
        ms = [c * 1e3 for c in self.curve]
        best = [min(ms[: i + 1]) for i in range(len(ms))]
        self.item.plot(list(range(len(ms))), ms, pen=pg.mkPen("#9bb7e0", width=1))
        self.item.plot(list(range(len(best))), best, pen=pg.mkPen("#2b62b8", width=2))
        self.show_plot(
            [
                f"<b>{self.policy}</b> training (simulated)",
                swatch(QColor("#9bb7e0"), "mean of each step's samples (an invalid one at its penalty)"),
                swatch(QColor("#2b62b8"), f"lowest step so far {best[-1]:.3f} ms"),
            ]
        )

    def data_table(self) -> Table:
        return Table(["step", "makespan_s"], [[i, c] for i, c in enumerate(self.curve)])
