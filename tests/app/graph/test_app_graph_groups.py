"""Grouping a large graph by layer: which stages group, collapse and expand (double-click,
context menu, the Group button), selecting or finding a stage inside a collapsed group
expands it, and times add up per group. A 93-stage synthetic ResNet-shaped chain with
module paths stands in for an imported model (fast); resnet18_stage.onnx checks the
importer's paths."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.graph.groups import AUTO_GROUP_STAGES, find_groups, label_of, visible_graph
from app.graph.panel import GraphPanel
from app.graph.view import GroupFrame, GroupItem
from app.main_window import MainWindow
from app.model.document import Document
from app.model.history import StageTimes
from app.synthetic import synthetic_model
from engine import zoo
from engine.schedule import default_schedule

BLOCK = "layer2/layer2.1"
INSIDE = "layer2_layer2_1_conv"


@pytest.fixture
def panel(qtbot: QtBot) -> Iterator[GraphPanel]:
    p = synthetic_model()
    doc = Document()
    doc.load(p, "synthetic", "small", "default", default_schedule(p))
    w = GraphPanel()
    qtbot.addWidget(w)
    w.resize(900, 600)
    w.show()
    w.show_document(doc, None)
    yield w


def test_groups_follow_module_paths() -> None:
    p = synthetic_model()
    g = find_groups(p)
    assert len(g.groups) == 18 and all(len(m) == 5 for m in g.groups.values())  # one group per block
    assert g.labels[BLOCK] == "layer2.1" and g.of[INSIDE] == BLOCK
    assert "stem_conv" not in g.of and "fc" not in g.of  # top-level modules stay single stages
    q = visible_graph(p.graph, g, set())
    assert q.number_of_nodes() == 18 + 4 and q.number_of_edges() == 21  # input, stem x2, head; a chain
    assert visible_graph(p.graph, g, {BLOCK}).number_of_nodes() == 18 + 4 - 1 + 5
    assert label_of(("layer1", "0")) == "layer1.0" and label_of(("encoder",)) == "encoder"
    assert not find_groups(zoo.get("resnet_block", "small"))  # no module paths: nothing to group


def test_importer_records_module_paths(tmp_path) -> None:
    from engine.frontends import import_onnx

    p = import_onnx("resources/models/resnet18_stage.onnx", tmp_path).pipeline
    assert p.source["scopes"]["layer1_layer1_0_conv1_Conv"] == "layer1/layer1.0/conv1"
    g = find_groups(p)  # 14 stages: one group per basic block, not one for all of layer1
    assert list(g.labels.values()) == ["layer1.0", "layer1.1"]
    assert all(len(v) == 4 for v in g.inputs.values())  # each block's folded weights and biases are inside it
    assert g.short_name("layer1_layer1_0_conv1_Conv") == "conv1_Conv"


def test_large_model_opens_grouped_and_expands_by_double_click(qtbot: QtBot, panel: GraphPanel) -> None:
    view = panel.view
    assert view.grouped and len(synthetic_model().stages) >= AUTO_GROUP_STAGES
    assert len(view.groups) == 18 and set(view.nodes) == {"input", "stem_conv", "stem_relu", "fc"}
    assert panel.group_button.isEnabled() and panel.group_button.isChecked()
    item = view.groups[BLOCK]
    view.set_zoom(1.0)
    view.centerOn(item)
    qtbot.mouseDClick(view.viewport(), Qt.MouseButton.LeftButton, pos=view.mapFromScene(item.scenePos()))
    assert view.expanded == {BLOCK} and BLOCK not in view.groups and BLOCK in view.frames
    assert all(s in view.nodes for s in find_groups(view.pipeline).groups[BLOCK])
    assert view.nodes[INSIDE].label == "conv"  # the group's prefix is dropped inside its outline
    # Double-click on the outline (above its stages) collapses it again.
    frame = view.frames[BLOCK]
    top = view.mapFromScene(frame.rect.center().x(), frame.rect.top() + 6)
    assert isinstance(view._target(top), GroupFrame)
    qtbot.mouseDClick(view.viewport(), Qt.MouseButton.LeftButton, pos=top)
    assert view.expanded == set() and isinstance(view.groups[BLOCK], GroupItem)


def test_context_menu_and_group_button(qtbot: QtBot, panel: GraphPanel) -> None:
    view = panel.view
    view.set_zoom(1.0)
    view.centerOn(view.groups[BLOCK])
    menu = view.context_menu(view.mapFromScene(view.groups[BLOCK].scenePos()))
    texts = [a.text() for a in menu.actions()]
    assert texts[0] == "Expand “layer2.1”" and "Collapse all groups" in texts and "Group stages by layer" in texts
    menu.actions()[0].trigger()
    assert view.expanded == {BLOCK}
    menu = view.context_menu(view.mapFromScene(view.nodes[INSIDE].scenePos()))
    texts = [a.text() for a in menu.actions()]  # a stage: its schedule actions first, then its group's
    assert texts[0] == f"Schedule {INSIDE}" and "Collapse “layer2.1”" in texts
    next(a for a in menu.actions() if a.text() == "Expand all groups").trigger()
    assert not view.groups and len(view.frames) == 18
    qtbot.mouseClick(panel.group_button, Qt.MouseButton.LeftButton)  # grouping off: every stage a node
    assert not view.grouped and not view.frames and len(view.nodes) == len(view.pipeline.stages) + 1
    assert view.nodes[INSIDE].label == INSIDE
    qtbot.mouseClick(panel.group_button, Qt.MouseButton.LeftButton)
    assert view.grouped and len(view.groups) == 18 and not view.expanded


def test_selecting_or_finding_a_stage_inside_a_group_expands_it(qtbot: QtBot, panel: GraphPanel) -> None:
    view = panel.view
    with qtbot.assertNotEmitted(view.stage_selected):
        view.select_stage(INSIDE)  # as when the stage list selects it
    assert view.expanded == {BLOCK} and view.selected_stage() == INSIDE
    hot = {e for e, item in view.edges.items() if item.hot}
    assert hot and all(INSIDE in e for e in hot)
    view.select_stage(None)
    with qtbot.waitSignal(view.stage_selected) as sig:
        assert panel.find_stage("LAYER3_LAYER3_6_B") == "layer3_layer3_6_bn"  # part of a name, any case
    assert sig.args == ["layer3_layer3_6_bn"] and "layer3/layer3.6" in view.expanded
    assert view.viewport().rect().contains(view.mapFromScene(view.nodes["layer3_layer3_6_bn"].scenePos()))
    assert panel.find_stage("no_such_stage") is None and panel.find_status.text() == "no such stage"


def test_collapsed_group_shows_its_stages_time(panel: GraphPanel) -> None:
    view = panel.view
    members = find_groups(view.pipeline).groups[BLOCK]
    ms = {s.name: 0.1 for s in view.pipeline.stages} | dict.fromkeys(members, 1.0)
    view.update_state({s: "root" for s in ms}, StageTimes(ms, "measured"))
    item = view.groups[BLOCK]
    assert item.time_text.startswith(f"{5.0 / sum(ms.values()):.1%}") and item.placement == "5 root"
    assert "measured" in item.toolTip() and "Double-click" in item.toolTip()
    assert panel.legend.top_share == pytest.approx(5.0 / sum(ms.values()))  # the hottest thing drawn: this group


def test_small_pipelines_are_not_grouped(qtbot: QtBot, open_window) -> None:
    w = open_window("resnet_block")
    assert not w.graph.view.grouped and not w.graph.group_button.isEnabled()


def test_window_selection_expands_a_group(qtbot: QtBot, open_window, tmp_path) -> None:
    path = tmp_path / "model.json"
    path.write_text(json.dumps(synthetic_model().to_json()))
    w: MainWindow = open_window(str(path))
    w.tabs.setCurrentWidget(w.graph)
    view = w.graph.view
    assert view.grouped and not view.expanded
    tree = w.stages.tree
    item = w.stages.item_for(INSIDE)
    tree.scrollToItem(item)
    qtbot.mouseClick(tree.viewport(), Qt.MouseButton.LeftButton, pos=tree.visualItemRect(item).center())
    assert view.expanded == {BLOCK} and view.selected_stage() == INSIDE
    # Clicking a stage inside the expanded group selects it everywhere, as for any stage.
    view.set_zoom(1.0)
    other = "layer2_layer2_1_bn"
    view.centerOn(view.nodes[other])
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=view.mapFromScene(view.nodes[other].scenePos()))
    assert w.stages.current_stage() == other and w.editor.stage == other
