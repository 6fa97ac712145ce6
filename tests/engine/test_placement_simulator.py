"""The placement simulator on small DAGs whose timing and memory are worked out by hand.

Units are chosen so the arithmetic is exact: every link has latency 1 s and bandwidth
1 byte/s, so sending a tensor of b bytes takes 1 + b seconds.
"""

import pytest

from engine.placement.costs import CostTable, roofline_costs
from engine.placement.devices import Device, DeviceProfile, Link, parse_profile
from engine.placement.graph import OpGraph, OpNode, from_pipeline, random_graph
from engine.placement.simulator import simulate


def profile(n_dev: int = 3, memory: int = 10**9):
    names = [f"d{k}" for k in range(n_dev)]
    body = {
        "name": "hand",
        "simulated": True,
        "description": "hand-made test figures",
        "devices": [{"name": x, "kind": "cpu", "peak_flops": 1.0, "mem_bandwidth": 1.0, "memory_bytes": memory} for x in names],
        "links": [{"a": names, "b": names, "latency_s": 1.0, "bandwidth": 1.0}],
    }
    return parse_profile(body, "hand.json")


def graph(sizes, edges, weights=None):
    weights = weights or [0] * len(sizes)
    nodes = tuple(OpNode(f"n{i}", "generic", 0.0, 0.0, s, w) for i, (s, w) in enumerate(zip(sizes, weights)))
    return OpGraph("g", nodes, tuple(edges))


def costs(seconds, n_dev: int = 3):
    """Each node takes the same time on every device."""
    return CostTable(tuple((float(s),) * n_dev for s in seconds), ("roofline",) * n_dev)


def test_a_chain_on_one_device_runs_back_to_back_without_transfers():
    g = graph([2, 2, 2], [(0, 1), (1, 2)])
    sim = simulate(g, profile(), costs([1, 2, 3]), [0, 0, 0])
    assert sim.makespan_s == 6.0
    assert sim.busy_s == (6.0, 0.0, 0.0)
    assert sim.transfers == 0 and sim.transfer_bytes == 0
    assert sim.start_s == (0.0, 1.0, 3.0)
    assert sim.valid and sim.reason == ""


def test_a_cross_device_edge_waits_for_its_transfer():
    g = graph([2, 2], [(0, 1)])
    sim = simulate(g, profile(), costs([1, 2]), [0, 1])
    # n0 ends at 1, the 2-byte send takes 1 + 2 = 3 s, n1 runs 4..6.
    assert sim.makespan_s == 6.0
    assert sim.transfers == 1 and sim.transfer_bytes == 2 and sim.transfer_s == 3.0
    sends = [e for e in sim.timeline if e.kind == "transfer"]
    assert [(e.resource, e.node, e.start_s, e.end_s, e.bytes) for e in sends] == [("d0->d1", 0, 1.0, 4.0, 2)]
    assert [(e.resource, e.start_s, e.end_s) for e in sim.timeline if e.kind == "compute"] == [("d0", 0.0, 1.0), ("d1", 4.0, 6.0)]


def test_a_tensor_is_sent_once_per_receiving_device_and_cached_there():
    # n0 feeds n1 and n2 on d1 (one send, read twice there) and n3 on d2 (a second send).
    g = graph([3, 1, 1, 1], [(0, 1), (0, 2), (0, 3)])
    sim = simulate(g, profile(), costs([1, 1, 1, 1]), [0, 1, 1, 2])
    assert sim.transfers == 2
    assert sim.transfer_bytes == 6
    assert sorted(e.resource for e in sim.timeline if e.kind == "transfer") == ["d0->d1", "d0->d2"]


def test_one_send_channel_per_device_serializes_the_sends():
    # n0 (on d0) sends 2 bytes to d1 and to d2: 3 s each, one after the other on d0's send channel.
    g = graph([2, 1, 1], [(0, 1), (0, 2)])
    sim = simulate(g, profile(), costs([1, 1, 1]), [0, 1, 2])
    sends = sorted((e.start_s, e.end_s, e.resource) for e in sim.timeline if e.kind == "transfer")
    assert sends == [(1.0, 4.0, "d0->d1"), (4.0, 7.0, "d0->d2")]
    assert sim.finish_s == (1.0, 5.0, 8.0)
    assert sim.makespan_s == 8.0


def test_one_receive_channel_per_device_serializes_the_receives():
    # n0 on d0 and n1 on d1 both finish at 1 and send 2 bytes to n2 on d2: its receive channel
    # takes them one after the other (1..4, 4..7), so n2 starts at 7.
    g = graph([2, 2, 1], [(0, 2), (1, 2)])
    sim = simulate(g, profile(), costs([1, 1, 1]), [0, 1, 2])
    sends = sorted((e.start_s, e.end_s) for e in sim.timeline if e.kind == "transfer")
    assert sends == [(1.0, 4.0), (4.0, 7.0)]
    assert sim.start_s[2] == 7.0 and sim.makespan_s == 8.0


def test_a_device_runs_one_node_at_a_time_in_priority_order():
    # Two independent nodes on one device: they run one after the other; the priority decides which first.
    g = graph([1, 1], [])
    c = costs([2, 3])
    assert simulate(g, profile(), c, [0, 0]).start_s == (0.0, 2.0)
    assert simulate(g, profile(), c, [0, 0], priority=[1, 0]).start_s == (3.0, 0.0)
    assert simulate(g, profile(), c, [0, 1]).makespan_s == 3.0  # on two devices they overlap


def test_memory_counts_weights_and_frees_a_tensor_after_its_last_consumer():
    # Diamond n0 -> (n1, n2) -> n3 on one device, 1 s each, outputs 10, 20, 30, 5 bytes, n1 has 7 bytes of weights.
    # While n2 runs (2..3): n0 (its last consumer n2 still running), n1 and n2 live = 60, + 7 weights.
    # Were n0 freed after its first consumer, the peak would be 50 + 7.
    g = graph([10, 20, 30, 5], [(0, 1), (0, 2), (1, 3), (2, 3)], weights=[0, 7, 0, 0])
    sim = simulate(g, profile(), costs([1, 1, 1, 1]), [0, 0, 0, 0])
    assert sim.peak_memory_bytes == (67, 0, 0)


def test_a_chain_frees_each_input_once_its_consumer_finished():
    # n0 -> n1 -> n2, outputs 10, 20, 30: live at most n1 + n2 = 50 (n0 gone when n1 finished), n2 kept as the output.
    g = graph([10, 20, 30], [(0, 1), (1, 2)])
    sim = simulate(g, profile(), costs([1, 1, 1]), [0, 0, 0])
    assert sim.peak_memory_bytes == (50, 0, 0)


def test_a_received_copy_counts_on_the_receiver_and_the_sender_keeps_its_own_until_sent():
    g = graph([10, 20], [(0, 1)])
    sim = simulate(g, profile(), costs([1, 1]), [0, 1])
    # d0: n0's output (10) until its send ends; d1: the received copy (10) and n1's output (20).
    assert sim.peak_memory_bytes == (10, 30, 0)


def test_over_capacity_is_invalid_with_the_device_named_and_the_timing_still_reported():
    g = graph([10, 20, 30, 5], [(0, 1), (0, 2), (1, 3), (2, 3)], weights=[0, 7, 0, 0])
    prof = profile(memory=66)
    sim = simulate(g, prof, costs([1, 1, 1, 1]), [0, 0, 0, 0])
    assert not sim.valid
    assert "d0" in sim.reason and "peak" in sim.reason
    assert sim.makespan_s == 4.0
    # Split so that no device holds 67 bytes at once: valid.
    assert simulate(g, prof, costs([1, 1, 1, 1]), [0, 1, 0, 0]).valid


def test_a_placement_that_is_not_device_indices_is_refused_with_the_node_named():
    g = graph([1, 1], [(0, 1)])
    with pytest.raises(ValueError, match=r"node 1 \(n1\) on 3"):
        simulate(g, profile(), costs([1, 1]), [0, 3])
    with pytest.raises(ValueError, match="1 entries for 2 nodes"):
        simulate(g, profile(), costs([1, 1]), [0])


def test_the_graph_of_a_pipeline_has_its_stages_weights_and_edges():
    from engine import zoo

    p = zoo.get("conv_relu", "small")
    g = from_pipeline(p)
    assert [n.name for n in g.nodes] == p.stage_order
    conv = g.nodes[[n.name for n in g.nodes].index("conv")]
    weight_bytes = 4 * (p.input_map["weight"].size + p.input_map["bias"].size)
    assert conv.weight_bytes == weight_bytes
    assert conv.flops == p.stage("conv").flops()
    assert set(g.edges) == {(0, 1), (1, 2)}
    sim = simulate(g, _shipped("cpu_gpu"), roofline_costs(g, _shipped("cpu_gpu")), [1, 1, 1])
    assert sim.valid and sim.makespan_s > 0


def test_random_graphs_are_deterministic_per_seed_and_topological():
    a, b, c = random_graph(60, 5), random_graph(60, 5), random_graph(60, 6)
    assert a == b and a != c
    assert all(p < q for p, q in a.edges)
    assert all(a.preds(i) for i in range(len(a)) if i >= 6)  # past the first layer every node reads something


def _shipped(name):
    from engine.placement.devices import load_profile

    return load_profile(name)


def test_without_the_timeline_the_figures_are_the_same():
    from engine.placement.devices import load_profile

    prof = load_profile("cpu_4gpu_pcie")
    g = random_graph(120, 2)
    c = roofline_costs(g, prof)
    placement = [(i * 7) % len(prof.devices) for i in range(len(g))]
    full, fast = simulate(g, prof, c, placement), simulate(g, prof, c, placement, timeline=False)
    assert fast.timeline == () and len(full.timeline) == len(g) + full.transfers
    assert (fast.makespan_s, fast.peak_memory_bytes, fast.transfer_bytes, fast.busy_s) == (
        full.makespan_s,
        full.peak_memory_bytes,
        full.transfer_bytes,
        full.busy_s,
    )
    # Every node starts after its inputs are on its device, and no device runs two nodes at once.
    for a, b in g.edges:
        assert full.start_s[b] >= full.finish_s[a]
    for d in range(len(prof.devices)):
        spans = sorted((full.start_s[i], full.finish_s[i]) for i in range(len(g)) if placement[i] == d)
        assert all(x[1] <= y[0] + 1e-15 for x, y in zip(spans, spans[1:]))


def test_a_copy_on_core_device_computes_nothing_while_it_sends() -> None:
    """A CPU core copies what it sends: with copy_on_core its next stage waits for the send;
    a device with a copy engine overlaps them."""
    g = OpGraph(
        "fork",
        (OpNode("a", "x", 1.0, 0.0, 1000, 0), OpNode("b", "x", 1.0, 0.0, 0, 0), OpNode("c", "x", 1.0, 0.0, 0, 0)),
        ((0, 1), (0, 2)),
    )
    costs = CostTable(((1.0, 1.0), (1.0, 1.0), (1.0, 1.0)), ("roofline", "roofline"))

    def profile(copy: bool) -> DeviceProfile:
        devs = tuple(Device(f"d{k}", "cpu", 1e9, 1e9, 10**9, copy_on_core=copy) for k in range(2))
        return DeviceProfile("p", True, "", devs, (Link("d0", "d1", 0.0, 500.0),))  # 1000 bytes: 2 s

    # a on d0, then b on d0 and c on d1 (a's output sent to d1: 2 s).
    overlapped = simulate(g, profile(False), costs, [0, 0, 1])
    assert overlapped.start_s[1] == pytest.approx(1.0)  # b starts while a's output is being sent
    on_core = simulate(g, profile(True), costs, [0, 0, 1])
    assert on_core.start_s[1] == pytest.approx(3.0)  # b waits for the copy
    assert on_core.start_s[2] == pytest.approx(3.0)
    assert on_core.busy_s[0] == pytest.approx(4.0)  # two stages and the 2 s copy
    assert on_core.makespan_s == pytest.approx(4.0)
