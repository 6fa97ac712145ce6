"""Task extraction (identical units -> one task, occurrences counted), applying a task's
schedule to all its occurrences (verified by running the model), and local moves that stay
legal and keep the recipe."""

import random

import pytest
from tuning_fixtures import repeated_net

from engine import api
from engine.heuristic import heuristic_schedule
from engine.schedule import Kind, validate
from engine.tuning import apply_tasks, extract_tasks
from engine.tuning.moves import MOVES, neighbours, propose, same_recipe
from engine.tuning.tasks import transfer


@pytest.fixture(scope="module")
def net():
    p = repeated_net()
    return p, heuristic_schedule(p)


def test_identical_layers_are_one_task_and_every_unit_is_one_occurrence(net):
    p, h = net
    tasks = extract_tasks(p, h)
    conv_tasks = [t for t in tasks if any(real.startswith("conv0") for occ in t.occurrences for real in occ.stages)]
    assert len(conv_tasks) == 1
    t = conv_tasks[0]
    assert t.weight == 3  # conv0, conv1, conv2 (the first reads the input, the others a layer: same canonical form)
    assert {occ.stages[-1] for occ in t.occurrences} == {"relu0", "relu1", "relu2"}
    assert any(real == "conv_out" for other in tasks if other is not t for occ in other.occurrences for real in occ.stages)
    # every stage that is not inlined belongs to exactly one occurrence of one task
    inline = Kind.COMPUTE_INLINE
    placed = [real for task in tasks for occ in task.occurrences for c, real in occ.names if task.start.of(c).compute().kind != inline]
    not_inline = [s.name for s in p.stages if h.of(s.name).compute().kind != Kind.COMPUTE_INLINE]
    assert sorted(placed) == sorted(not_inline)
    assert len({task.key for task in tasks}) == len(tasks)


def test_a_task_schedule_applies_to_every_occurrence_and_the_model_verifies(net):
    p, h = net
    tasks = extract_tasks(p, h)
    t = max(tasks, key=lambda x: x.weight)
    moved = neighbours(t.pipeline, t.start, random.Random(3), 1)[0]
    assert moved.content_hash() != t.start.content_hash()
    tuned = apply_tasks(p, h, tasks, {t.key: moved})
    for occ in t.occurrences:
        ren = dict(occ.names)
        for canon, real in occ.names:
            got = tuned.of(real)
            want = moved.of(canon)
            assert [d.kind for d in got.pure + got.update] == [d.kind for d in want.pure + want.update]
            assert all(d.consumer is None or d.consumer == ren[w.consumer] for d, w in zip(got.pure, want.pure, strict=True))
    changed = [s for s in tuned.stages if tuned.of(s) != h.of(s)]
    assert changed and all(any(s in occ.stages for occ in t.occurrences) for s in changed)
    _, v = api.run_once(p, tuned)
    assert v.ok, v.message


def test_local_moves_stay_legal_and_keep_the_recipe(net):
    p, h = net
    rng = random.Random(0)
    for t in extract_tasks(p, h):
        got = neighbours(t.pipeline, t.start, rng, 25, steps=2)
        assert len(got) >= 10 and len({s.content_hash() for s in got}) == len(got)
        for s in got:
            validate(t.pipeline, s)
            assert same_recipe(t.start, s)
    kinds = {k for _ in range(200) if (m := propose(t.pipeline, t.start, rng)) for k in [m[0]]}
    assert {"factor", "vector_width"} <= kinds <= set(MOVES)


def test_moved_task_schedules_compute_the_same_outputs(net):
    p, h = net
    t = max(extract_tasks(p, h), key=lambda x: x.weight)
    for s in neighbours(t.pipeline, t.start, random.Random(7), 3, steps=2):
        _, v = api.run_once(t.pipeline, s)
        assert v.ok, v.message


def test_a_schedule_transfers_to_a_similar_task_of_another_shape():
    from engine.ops import Builder

    b = Builder("two_widths")
    x = b.input("input", (1, 8, 16, 16))
    x = b.activation("relu_a", b.conv2d("conv_a", x, b.input("wa", (8, 8, 3, 3)), b.input("ba", (8,)), pad=1), "relu")
    x = b.activation("relu_b", b.conv2d("conv_b", x, b.input("wb", (16, 8, 3, 3)), b.input("bb", (16,)), pad=1), "relu")
    p = b.build([x])
    tasks = extract_tasks(p, heuristic_schedule(p))
    a, c = (next(t for t in tasks if any(s.startswith(f"conv_{k}") for s in t.occurrences[0].stages)) for k in "ab")
    assert a.key != c.key and a.signature == c.signature  # same operators, other shapes
    got = transfer(a.start, c)
    assert got is not None
    validate(c.pipeline, got)
    _, v = api.run_once(c.pipeline, got)
    assert v.ok, v.message
    net_p = repeated_net()
    other = next(t for t in extract_tasks(net_p, heuristic_schedule(net_p)) if t.signature != a.signature)
    assert transfer(other.start, a) is None  # other operators: no stage names in common


def test_every_task_of_an_imported_model_runs_on_its_own():
    # an imported model's weights are flagged (a part may pack them); a task's segment has no
    # weights file of its own, so its runs get random data for them instead of failing
    from engine.frontends.onnx_import import import_onnx
    from engine.resources import MODELS_DIR

    p = import_onnx(str(MODELS_DIR / "small_cnn.onnx")).pipeline
    tasks = extract_tasks(p, heuristic_schedule(p))
    assert any(i.weight for t in tasks for i in t.pipeline.inputs)
    for t in tasks:
        _, v = api.run_once(t.pipeline, t.start)
        assert v.ok, f"{t.key}: {v.message}"
