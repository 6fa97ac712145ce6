"""The graph tab: one node per input and stage, producer -> consumer edges, selection kept
in step with the stage list and the loop nest, find, fit, colouring by time share, and a
500-stage synthetic pipeline (structure only: timings are reported, not asserted)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QGraphicsScene
from pytestqt.qtbot import QtBot

from app.graph.layout import assign_layers, layered_layout
from app.graph.panel import GraphPanel
from app.graph.view import NodeItem, heat_color, text_color_on
from app.main_window import MainWindow
from app.model.document import Document
from app.model.history import PREDICTED_LABEL, SessionHistory
from app.synthetic import synthetic_pipeline
from engine import zoo
from engine.measure import Measurement


@pytest.fixture
def window(open_window) -> Iterator[MainWindow]:
    w = open_window("resnet_block", auto_measure=True)
    yield w


def test_one_node_per_input_and_stage_and_one_edge_per_use(window: MainWindow) -> None:
    p = window.doc.pipeline
    view = window.graph.view
    assert set(view.nodes) == {i.name for i in p.inputs} | {s.name for s in p.stages}
    assert set(view.edges) == set(p.graph.edges)
    assert {n for n, item in view.nodes.items() if item.kind == "input"} == {i.name for i in p.inputs}
    assert [n for n, item in view.nodes.items() if item.kind == "output"] == p.outputs
    assert view.nodes["conv1"].placement == "root"
    assert view.nodes["conv1"].subtitle.startswith("conv2d · 1×8×16×16")
    # Edges run left to right: every producer ends before its consumer begins.
    for (u, v), edge in view.edges.items():
        assert view.nodes[u].sceneBoundingRect().right() <= view.nodes[v].sceneBoundingRect().left(), (u, v)
        assert edge.path().elementCount() > 0


def test_opening_another_pipeline_rebuilds_the_graph(window: MainWindow) -> None:
    assert window.open_pipeline("blur")
    assert set(window.graph.view.nodes) == {"input", "blur_x", "blur_y"}
    assert set(window.graph.view.edges) == {("input", "blur_x"), ("blur_x", "blur_y")}


def _click_node(qtbot: QtBot, window: MainWindow, name: str) -> None:
    view = window.graph.view
    view.set_zoom(1.0)
    view.centerOn(view.nodes[name])
    pos = view.mapFromScene(view.nodes[name].scenePos())
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=pos)


def test_clicking_a_node_selects_the_stage_everywhere(qtbot: QtBot, window: MainWindow) -> None:
    window.tabs.setCurrentWidget(window.graph)
    _click_node(qtbot, window, "conv2")
    assert window.graph.view.selected_stage() == "conv2"
    assert window.stages.current_stage() == "conv2"
    assert window.loop_view.selected_lines() == window.doc.spans["conv2"]
    # Edges of the selected stage are drawn highlighted.
    assert window.graph.view.edges[("conv2_pad", "conv2")].hot
    assert not window.graph.view.edges[("input", "conv1_pad")].hot
    # And the other way round: the stage list selects the node.
    tree = window.stages.tree
    item = window.stages.item_for("relu1")
    qtbot.mouseClick(tree.viewport(), Qt.MouseButton.LeftButton, pos=tree.visualItemRect(item).center())
    assert window.graph.view.selected_stage() == "relu1"
    # Inputs are shown but are not stages: clicking one selects nothing.
    _click_node(qtbot, window, "w1")
    assert window.graph.view.selected_stage() == "relu1"


def test_find_selects_and_centres_a_stage(qtbot: QtBot, window: MainWindow) -> None:
    window.chrome.actions.find.trigger()
    assert window.tabs.currentWidget() is window.graph
    assert window.graph.find_edit.hasFocus()
    qtbot.keyClicks(window.graph.find_edit, "CONV2_P")  # part of a name, any case
    qtbot.keyClick(window.graph.find_edit, Qt.Key.Key_Return)
    assert window.stages.current_stage() == "conv2_pad"
    view = window.graph.view
    assert view.viewport().rect().contains(view.mapFromScene(view.nodes["conv2_pad"].scenePos()))
    assert window.graph.find_stage("bn1") == "bn1"  # an exact name wins over names containing it
    assert window.graph.find_stage("no_such_stage") is None
    assert window.graph.find_status.text() == "no such stage"
    assert window.stages.current_stage() == "bn1"


def test_fit_zoom_and_keys(qtbot: QtBot, window: MainWindow) -> None:
    window.tabs.setCurrentWidget(window.graph)
    view = window.graph.view
    view.set_zoom(2.0)
    view.setFocus()
    qtbot.keyClick(view.viewport(), Qt.Key.Key_F)
    scene_rect = view.mapToScene(view.viewport().rect()).boundingRect()
    assert scene_rect.adjusted(-2, -2, 2, 2).contains(view.scene().sceneRect())
    assert view.zoom() <= 1.0
    z = view.zoom()
    view.zoom_by(1.25)
    assert view.zoom() == pytest.approx(z * 1.25)
    view.zoom_by(1000)
    assert view.zoom() <= 3.0  # clamped


def test_nodes_are_tinted_by_predicted_then_measured_share(window: MainWindow) -> None:
    doc, view = window.doc, window.graph.view
    legend = window.graph.legend
    assert legend.source == PREDICTED_LABEL
    predicted = doc.prediction.stages
    hottest = max(predicted, key=predicted.get)
    assert view.nodes[hottest].fill.rgb() == heat_color(1.0).rgb()
    assert "ms" in view.nodes[hottest].time_text
    # A measurement of the current schedule replaces the prediction (stage times made up here).
    times = {s.name: 0.01 for s in doc.pipeline.stages} | {"bn1": 1.0}
    m = Measurement(doc.pipeline.name, doc.pipeline.content_hash(), doc.schedule_hash, True, verified=True, median_ms=1.2, stages=times)
    window.history.attach(m)
    assert legend.source == "measured"
    assert view.nodes["bn1"].fill.rgb() == heat_color(1.0).rgb()
    assert view.nodes["bn1"].time_text.startswith(f"{1.0 / sum(times.values()):.1%}")
    assert "measured" in view.nodes["bn1"].toolTip()


def test_text_colour_stays_readable() -> None:
    for t in (0.0, 0.5, 1.0):
        fill = heat_color(t)
        ink = text_color_on(fill)
        lum = lambda c: 0.2126 * c.redF() ** 2.2 + 0.7152 * c.greenF() ** 2.2 + 0.0722 * c.blueF() ** 2.2
        hi, lo = max(lum(fill), lum(ink)), min(lum(fill), lum(ink))
        assert (hi + 0.05) / (lo + 0.05) >= 4.0, t  # near WCAG AA contrast


def test_layout_puts_inputs_next_to_their_first_consumer() -> None:
    p = zoo.get("resnet_block", "small")
    layer = assign_layers(p.graph)
    assert layer["w2"] == layer["conv2"] - 1
    assert layer["input"] == 0
    for u, v in p.graph.edges:
        assert layer[u] < layer[v]


def test_500_stage_graph_structure(qtbot: QtBot, tmp_path) -> None:
    p = synthetic_pipeline(500)
    assert 480 <= len(p.stages) <= 520
    path = tmp_path / "syn.json"
    import json

    path.write_text(json.dumps(p.to_json()))
    doc = Document()
    doc.open(str(path), "small", "default")
    history = SessionHistory()
    history.reset(doc.pipeline)
    panel = GraphPanel()
    qtbot.addWidget(panel)
    panel.resize(900, 600)
    panel.show()
    panel.show_document(doc, history.stage_times(doc.schedule_hash, doc.prediction))
    view = panel.view
    assert len(view.nodes) == len(p.stages) + len(p.inputs)
    assert len(view.edges) == p.graph.number_of_edges()
    # Static scene: a BSP index, cached node pixels, no per-move layout.
    assert view.scene().itemIndexMethod() == QGraphicsScene.ItemIndexMethod.BspTreeIndex
    assert all(item.cacheMode() == NodeItem.CacheMode.DeviceCoordinateCache for item in view.nodes.values())
    # No two nodes overlap.
    lay = view.layout_result
    by_layer: dict[int, list[float]] = {}
    for n, (_x, y) in lay.centers.items():
        by_layer.setdefault(lay.layers[n], []).append(y)
    for ys in by_layer.values():
        ys.sort()
        assert all(b - a >= 40 - 1e-6 for a, b in zip(ys, ys[1:]))
    # Fitting the whole graph zooms far out: nodes paint without text at that level of detail.
    view.fit()
    assert view.zoom() < 0.2
    qtbot.wait(10)
    # A schedule change repaints state only; the items (and so the layout) stay.
    before = dict(view.nodes)
    panel.show_document(doc, None)
    assert view.nodes == before


def test_layout_of_a_small_dag_is_crossing_free() -> None:
    import networkx as nx

    g = nx.DiGraph([("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"), ("a", "d")])
    lay = layered_layout(g, lambda n: (100.0, 40.0))
    assert lay.layers == {"a": 0, "b": 1, "c": 1, "d": 2}
    assert len(lay.routes[("a", "d")]) == 4  # through the middle column, between b and c or beside them
    xs = sorted({x for x, _ in lay.centers.values()})
    assert len(xs) == 3


def test_panning_keeps_the_selection_and_escape_clears_it(qtbot: QtBot, window: MainWindow) -> None:
    window.tabs.setCurrentWidget(window.graph)
    _click_node(qtbot, window, "conv1")
    view = window.graph.view
    empty = QPoint(view.mapFromScene(view.nodes["conv1"].scenePos()).x(), 5)  # above the node: background
    assert view.itemAt(empty) is None
    h = view.horizontalScrollBar().value()
    qtbot.mousePress(view.viewport(), Qt.MouseButton.LeftButton, pos=empty)
    qtbot.mouseMove(view.viewport(), pos=empty - QPoint(120, 0))
    qtbot.mouseRelease(view.viewport(), Qt.MouseButton.LeftButton, pos=empty - QPoint(120, 0))
    assert view.horizontalScrollBar().value() != h or view.horizontalScrollBar().maximum() == 0
    assert window.stages.current_stage() == "conv1"  # a drag on the background pans; it does not deselect
    view.setFocus()
    qtbot.keyClick(view.viewport(), Qt.Key.Key_Escape)
    assert view.selected_stage() is None and window.stages.current_stage() is None
    assert window.editor.stage is None
