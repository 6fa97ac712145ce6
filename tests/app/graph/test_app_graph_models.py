"""Issue 20 item 5: a big imported model opens fitted, grouped and readable. A 150-stage ONNX
model whose nodes have no names (built here with onnx.helper, as some exporters write them)
gets its stage names and layers from its output tensors; the layout direction (left to
right / top to bottom) is the user's choice, remembered; Find starts empty for a new model."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper
from PySide6.QtCore import QSettings
from pytestqt.qtbot import QtBot

from app.graph.layout import layered_layout
from app.graph.panel import DIRECTION_KEY, GraphPanel
from app.graph.view import READABLE_ZOOM
from app.main_window import SETTINGS_APP, SETTINGS_ORG
from app.model.document import Document
from engine import zoo
from engine.frontends import import_onnx
from engine.schedule import default_schedule

BLOCKS, PER_BLOCK = 15, 10  # 150 stages in 15 layers, and one output stage
UNARY = ("Relu", "Sigmoid", "Neg", "Abs", "Tanh")


def unnamed_model(path: Path, blocks: int = BLOCKS, per_block: int = PER_BLOCK) -> Path:
    """A chain of residual blocks of element-wise ops; no node has a name, the tensors are
    named like PyTorch's exporter names them ('/block3/relu0/Relu_output_0')."""
    nodes, prev = [], "x"
    for b in range(blocks):
        skip = prev
        for j in range(per_block):
            op = "Add" if j == per_block - 1 else UNARY[j % len(UNARY)]
            out = f"/block{b}/{op.lower()}{j}/{op}_output_0"
            nodes.append(helper.make_node(op, [prev, skip] if op == "Add" else [prev], [out]))
            prev = out
    nodes.append(helper.make_node("Relu", [prev], ["y"]))
    shape = [1, 4, 8, 8]
    graph = helper.make_graph(
        nodes,
        "unnamed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unnamed_model(tmp_path_factory.mktemp("models") / "unnamed.onnx")


def test_unnamed_nodes_are_named_from_their_output_tensors(model: Path, tmp_path: Path) -> None:
    p = import_onnx(model).pipeline
    assert len(p.stages) == BLOCKS * PER_BLOCK + 1
    assert "block0_relu0_Relu" in p.stage_map and "block14_add9_Add" in p.stage_map and p.outputs == ["y_"]
    assert p.source["scopes"]["block3_sigmoid1_Sigmoid"] == "block3/sigmoid1"
    assert all(s.name.isidentifier() for s in p.stages)
    # Names that sanitize alike stay unique; a bare number gets its operator in front.
    nodes = [
        helper.make_node("Relu", ["x"], ["/blk/a.b"]),
        helper.make_node("Neg", ["/blk/a.b"], ["/blk/a_b"]),
        helper.make_node("Abs", ["/blk/a_b"], ["17"]),
        helper.make_node("Relu", ["17"], ["y"]),
    ]
    info = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ("x", "y")]
    path = tmp_path / "clash.onnx"
    onnx.save(helper.make_model(helper.make_graph(nodes, "clash", info[:1], info[1:]), opset_imports=[helper.make_opsetid("", 17)]), path)
    names = [s.name for s in import_onnx(path).pipeline.stages]
    assert names == ["blk_a_b", "blk_a_b_2", "Abs_17", "y_"]  # "y" would shadow a loop variable


def test_a_big_unnamed_model_opens_fitted_and_grouped(qtbot: QtBot, open_window, model: Path) -> None:
    w = open_window("conv_relu")
    w.resize(1024, 700)
    w.graph.find_edit.setText("conv")
    assert w.open_pipeline(str(model))
    qtbot.waitUntil(lambda: w.doc.pipeline is not None and len(w.doc.pipeline.stages) == 151)
    view = w.graph.view
    assert view.grouped and len(view.groups) == BLOCKS and view.grouping.labels["block3"] == "block3"
    assert w.graph.find_edit.text() == ""  # the last model's search is gone
    # Fitted: readable (not shrunk to specks) and showing nodes, not an empty part of the canvas.
    assert view.zoom() >= READABLE_ZOOM - 1e-9
    seen = view.mapToScene(view.viewport().rect()).boundingRect()
    shown = [n for n in [*view.nodes.values(), *view.groups.values()] if seen.contains(n.sceneBoundingRect())]
    assert len(shown) >= 4, len(shown)
    # Finding a stage inside a layer expands the layer and selects it.
    assert w.graph.find_stage("block7_neg2") == "block7_neg2_Neg" and "block7" in view.expanded


def test_layout_direction_is_switchable_and_remembered(qtbot: QtBot) -> None:
    settings = (SETTINGS_ORG, SETTINGS_APP)
    QSettings(*settings).remove(DIRECTION_KEY)
    p = zoo.get("unsharp", "small")
    doc = Document()
    doc.load(p, "unsharp", "small", "default", default_schedule(p))
    panel = GraphPanel(settings=settings)
    qtbot.addWidget(panel)
    panel.resize(800, 500)
    panel.show()
    panel.show_document(doc, None)
    assert panel.view.direction == "LR"
    centers = panel.view.layout_result.centers
    producer, consumer = next(iter(p.graph.edges))
    assert centers[producer][0] < centers[consumer][0]  # left to right
    panel.direction_buttons["TB"].click()
    centers = panel.view.layout_result.centers
    assert panel.view.direction == "TB" and centers[producer][1] < centers[consumer][1]  # top to bottom
    assert QSettings(*settings).value(DIRECTION_KEY) == "TB"
    again = GraphPanel(settings=settings)  # the next window starts with the user's choice
    qtbot.addWidget(again)
    assert again.view.direction == "TB" and again.direction_buttons["TB"].isChecked()
    panel.view.context_menu(panel.view.viewport().rect().center())  # the menu offers both directions
    panel.set_direction("LR")
    assert QSettings(*settings).value(DIRECTION_KEY) == "LR"
    QSettings(*settings).setValue(DIRECTION_KEY, "diagonal")  # a hand-edited setting is ignored
    assert GraphPanel(settings=settings).view.direction == "LR"
    QSettings(*settings).remove(DIRECTION_KEY)


def test_top_to_bottom_is_the_left_to_right_layout_transposed() -> None:
    g = zoo.get("harris", "small").graph
    size = {n: (100.0 + 7 * k, 30.0 + k) for k, n in enumerate(g.nodes)}
    lr = layered_layout(g, lambda n: size[n])
    tb = layered_layout(g, lambda n: size[n], direction="TB")
    assert tb.direction == "TB" and tb.sizes == size
    assert {n: tb.layers[n] for n in g.nodes} == lr.layers
    for u, v in g.edges:  # every edge runs down the page, from the producer's bottom to the consumer's top
        (ux, uy), (vx, vy) = tb.centers[u], tb.centers[v]
        route = tb.routes[(u, v)]
        assert uy < vy and route[0] == (ux, uy + size[u][1] / 2) and route[-1] == (vx, vy - size[v][1] / 2)
    with pytest.raises(ValueError, match="layout direction must be one of LR, TB, got 'RL'"):
        layered_layout(g, lambda n: size[n], direction="RL")
