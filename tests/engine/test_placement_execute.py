"""Real execution of placements on this machine's cores (engine/placement/execute.py): worker
processes pinned one per core, tensors through shared memory, outputs verified."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from engine import expr as E
from engine import zoo
from engine.ir import Pipeline
from engine.placement.calibrate import measured_link
from engine.placement.device_worker import one_stage
from engine.placement.devices import local_cores, local_profile
from engine.placement.execute import ExecEvent, ExecutionError, LocalDevices, VerificationError, measured_costs, run_placement
from engine.placement.graph import from_pipeline
from engine.schedule import S, Schedule, ScheduleError, Wrapper, validate

pytestmark = pytest.mark.skipif(len(local_cores()) < 2, reason="needs two CPU cores to place across")

# unsharp (small): gray feeds blur_y and gray_c, both placed on device 1, so one tensor has two
# readers on the other device; blur_y -> blur_x, gray_c -> sharpen, sharpen -> ratio and
# input_c -> output cross too, the other edges stay on one device.
PLACEMENT = [0, 0, 1, 1, 0, 0, 1, 1]


@pytest.fixture(scope="module")
def unsharp():
    p = zoo.get("unsharp", "small")
    assert [n.name for n in from_pipeline(p).nodes] == ["gray", "input_c", "blur_y", "gray_c", "blur_x", "sharpen", "ratio", "output"]
    return p


@pytest.fixture(scope="module")
def devices():
    with LocalDevices() as d:
        yield d


@pytest.fixture(scope="module")
def placed(unsharp, devices):
    return devices.run(unsharp, PLACEMENT, rounds=3, warmup=1)


def test_a_placement_across_two_cores_gives_verified_outputs(placed, devices):
    assert placed.verified
    assert placed.max_abs_err is not None and placed.max_abs_err < 1e-3
    assert placed.rounds == 3 and len(placed.round_makespans_s) == 3
    assert placed.makespan_min_s <= placed.makespan_s <= placed.makespan_max_s
    assert all(b > 0 for b in placed.busy_s)  # both devices computed
    assert {e.device for e in placed.events if e.kind == "compute"} == {0, 1}
    cores = local_cores()
    assert [os.sched_getaffinity(pid) for pid in devices.pids] == [{cores[0]}, {cores[1]}]  # each worker pinned to its core


def test_events_are_in_a_consistent_order(placed, unsharp):
    g = from_pipeline(unsharp)
    ev = placed.events
    compute = {e.node: e for e in ev if e.kind == "compute"}
    assert sorted(compute) == list(range(len(g.nodes)))
    assert all(compute[k].device == d for k, d in enumerate(PLACEMENT))
    send = {(e.node, e.peer): e for e in ev if e.kind == "send"}
    recv = {(e.node, e.device): e for e in ev if e.kind == "recv"}
    for a, b in g.edges:
        if PLACEMENT[a] == PLACEMENT[b]:
            assert compute[b].start_s >= compute[a].end_s
        else:
            s, r = send[(a, PLACEMENT[b])], recv[(a, PLACEMENT[b])]
            assert compute[a].end_s <= s.start_s <= s.end_s <= r.end_s <= compute[b].start_s
    for d in (0, 1):  # a device does one thing at a time: its computes and sends never overlap
        busy = sorted((e.start_s, e.end_s) for e in ev if e.device == d and e.kind != "recv")
        assert all(x[1] <= y[0] for x, y in zip(busy, busy[1:], strict=False))
    assert max(e.end_s for e in ev) == pytest.approx(placed.round_makespans_s[placed.round_makespans_s.index(placed.makespan_s)])


def test_a_cross_device_tensor_is_sent_once_per_receiving_device(placed, unsharp):
    g = from_pipeline(unsharp)
    sends = [(e.node, e.device, e.peer) for e in placed.events if e.kind == "send"]
    expected = {(a, PLACEMENT[a], PLACEMENT[b]) for a, b in g.edges if PLACEMENT[a] != PLACEMENT[b]}
    assert sorted(sends) == sorted(expected)  # gray: two readers on device 1, one send
    assert placed.transfers == len(expected) == 5
    assert placed.transfer_bytes == sum(g.nodes[a].output_bytes for a, _, _ in expected)


def test_measured_costs_are_positive_and_labelled_measured(unsharp, devices):
    g = from_pipeline(unsharp)
    prof = local_profile()
    costs = measured_costs(unsharp, g, prof, rounds=3, devices=devices)
    assert costs.source == ("measured",) * len(prof.devices)
    assert len(costs.seconds) == len(g.nodes)
    assert all(s > 0 for row in costs.seconds for s in row)
    assert measured_costs(unsharp, g, prof) is costs  # cached per pipeline


def test_bad_placements_are_refused_with_the_reason(unsharp, devices):
    with pytest.raises(ExecutionError, match="7 devices given for 8 stages"):
        devices.run(unsharp, PLACEMENT[:-1])
    with pytest.raises(ExecutionError, match=r"stage 2 \(blur_y\) on device 5"):
        run_placement(unsharp, [0, 0, 5, 1, 0, 0, 1, 1])
    inline = Schedule({})
    S(inline, "gray").compute_inline()
    with pytest.raises(ExecutionError, match="stage 'gray' is compute_inline"):
        run_placement(unsharp, PLACEMENT, schedule=inline)


def test_the_timeline_is_the_simulators_events(placed):
    tl = placed.timeline()
    names = placed.devices
    compute = [e for e in tl if e.kind == "compute"]
    assert sorted(e.node for e in compute) == list(range(len(PLACEMENT)))
    assert all(e.resource == names[PLACEMENT[e.node]] for e in compute)
    transfers = [e for e in tl if e.kind == "transfer"]
    assert len(transfers) == placed.transfers
    assert all(e.resource == f"{names[PLACEMENT[e.node]]}->{names[1 - PLACEMENT[e.node]]}" and e.end_s >= e.start_s for e in transfers)


def test_the_link_is_fitted_from_the_sends(placed):
    # Sends of 1, 2 and 4 MB taking 10 us + bytes / 5 GB/s, each read 3 us later by a waiting receiver.
    events = []
    for k, size in enumerate((1e6, 2e6, 4e6)):
        t = k * 0.01
        end = t + 10e-6 + size / 5e9
        events.append(ExecEvent("send", 0, k, 1, t, end, int(size)))
        events.append(ExecEvent("recv", 1, k, 0, t, end + 3e-6))
    latency, bandwidth = measured_link([replace(placed, events=tuple(events))])
    assert latency == pytest.approx(13e-6, rel=1e-3)
    assert bandwidth == pytest.approx(5e9, rel=1e-3)


def test_wrong_outputs_raise_instead_of_giving_a_time(devices):
    # blur whose last stage computes twice what its operator record (the reference) says.
    p = zoo.get("blur", "small")
    s = p.stage("blur_y")
    wrong = replace(s, value=E.BinOp("*", s.value, E.Const(2.0)))
    bad = Pipeline(p.name, p.inputs, [p.stage("blur_x"), wrong], p.outputs, ops=p.ops)
    with pytest.raises(VerificationError, match="outputs do not match the reference"):
        devices.run(bad, [0, 1], rounds=1, warmup=1)
    assert devices.run(p, [0, 1], rounds=1, warmup=1).verified  # the devices are still usable


def test_a_stages_wrappers_go_with_it_to_its_device(devices):
    # matmul: prod (reads A, B) then C; prod reads B through a copy made per row block.
    p = zoo.get("matmul", "small")
    s = Schedule(name="wrapped")
    S(s, "prod").update().split("i", "io", "ii", 16)
    S(s, "prod").wrap("B").compute_at("prod", "io")
    sub, sub_sched = one_stage(p, s, "prod")
    assert [i.name for i in sub.inputs] == ["A", "B"] and sub_sched.wrappers == s.wrappers  # measured as given
    validate(sub, sub_sched)
    assert one_stage(p, s, "C")[1].wrappers == {}  # C reads no copy
    stray = Schedule(dict(s.stages), s.name, {"A_in_C": Wrapper("A", "C")})
    with pytest.raises(ScheduleError, match=r"'C' does not read 'A'"):
        one_stage(p, stray, "C")
    run = devices.run(p, [0, 1], rounds=1, warmup=1, schedule=s)
    assert run.verified
