"""The heuristic packs imported matmuls' B through wrappers where it pays (recipes.packed_rhs):
matmul_panels at a pointwise consumer, matmul_panels_root without one; the old recipes where
packing can't apply. Whole-model tuning's tasks and the segments carry the wrappers."""

import numpy as np

from engine import expr as E
from engine import halide_backend as HB
from engine import segments
from engine.heuristic import heuristic_schedule, plan
from engine.ir import Dim, Pipeline, Stage
from engine.ops import Builder
from engine.recipes import VectorTarget, packed_rhs
from engine.schedule import Kind, Schedule, wrapper_dims
from engine.tuning import apply_tasks, extract_tasks

AVX512 = VectorTarget("x86-64-linux-avx-avx2-avx512-fma", 16, 32)


def layers(m: int, k: int, n: int, count: int = 1, b_transposed: bool = False, tail: bool = True):
    """`count` dense layers of one shape (bias, GELU-free ReLU tail unless `tail` is False on the last)."""
    b = Builder("layers", "test")
    x = b.input("x", (m, k))
    for c in range(count):
        w = b.input(f"w{c}", (n, k) if b_transposed else (k, n), -0.1, 0.1)
        bias = b.input(f"b{c}", (n,))
        x = b.matmul(f"fc{c}", x, w, bias, b_transposed=b_transposed)
        if tail or c < count - 1:
            x = b.activation(f"relu{c}", x, "relu")
    return b.build([x])


def run(p, s: Schedule, arrays: dict, segmented: bool = False) -> np.ndarray:
    low = segments.lower(p, s, segmented=segmented)
    low.compile()
    keep = low.bind(arrays)
    outs = HB.output_arrays(p)
    if isinstance(low, segments.Segmented):
        low.runner(outs)()
    else:
        HB.make_runner(low, outs)()
    del keep
    return outs[p.outputs[0]]


def reference(p, arrays: dict, count: int, relu_last: bool) -> np.ndarray:
    x = arrays["x"].astype(np.float64)
    for c in range(count):
        x = x @ arrays[f"w{c}"].astype(np.float64) + arrays[f"b{c}"]
        if relu_last or c < count - 1:
            x = np.maximum(x, 0)
    return x


def inputs(p) -> dict:
    rng = np.random.default_rng(0)
    return {i.name: rng.uniform(i.low, i.high, i.shape).astype(np.float32) for i in p.inputs}


def test_heuristic_packs_a_bert_sized_layer_and_it_verifies():
    # 128 tokens, 256 -> 768 (a BERT layer's shape, k cut for test time): at a ReLU (matmul_panels),
    # and as the graph's output with no consumer (matmul_panels_root: the copy at the update's panel loop)
    # and 37 rows (prime: the root update's last row block guarded, not a 1-row block)
    for m, tail, recipe in ((128, True, "(matmul_panels)"), (128, False, "(matmul_panels_root)"), (37, False, "(matmul_panels_root)")):
        p = layers(m, 256, 768, tail=tail)
        pl = plan(p, AVX512)
        rule = pl.rules["fc0"]
        assert recipe in rule, rule
        (w,) = pl.schedule.wrappers.values()
        assert (w.source, w.consumer) == ("w0", "fc0")
        rows = [d for d in pl.schedule.of("fc0").update if d.kind == "split" and d.loop == "i"]
        assert not rows or rows[0].factor >= 4  # a register block of several rows (6 on AVX-512)
        s = heuristic_schedule(p)  # the host's target, to run here
        assert s.wrappers
        arrays = inputs(p)
        np.testing.assert_allclose(run(p, s, arrays), reference(p, arrays, 1, tail), rtol=1e-4, atol=1e-4)


def test_no_packing_where_it_cannot_pay_or_apply():
    # B within L1 (32 x 64 floats), too few rows for 4 row blocks, and a transposed B (its copy keeps the layout)
    for p in (layers(128, 32, 64), layers(8, 256, 256), layers(128, 256, 256, b_transposed=True)):
        assert packed_rhs(p, "fc0", AVX512) is None
        pl = plan(p, AVX512)
        assert "matmul_block" in pl.rules["fc0"] and not pl.schedule.wrappers, pl.rules["fc0"]
    # a root matmul whose columns are no whole number of vectors: no exact block, dense_output
    p = layers(128, 256, 100, tail=False)
    assert packed_rhs(p, "fc0", VectorTarget("x86-64-linux-avx-avx2-fma", 8, 16)) is not None
    pl = plan(p, VectorTarget("x86-64-linux-avx-avx2-fma", 8, 16))
    assert "dense_output" in pl.rules["fc0"] and not pl.schedule.wrappers


def test_tasks_and_segments_carry_the_wrappers():
    p = layers(64, 128, 128, count=2)  # two identical layers: one task, two occurrences
    s = heuristic_schedule(p)
    assert set(s.wrappers) == {"w0_in_fc0", "w1_in_fc1"}
    tasks = extract_tasks(p, s)
    (task,) = [t for t in tasks if t.weight == 2]
    (tw,) = task.start.wrappers.values()
    assert tw.consumer in task.start.stages and tw.source in {i.name for i in task.pipeline.inputs}
    bare = Schedule(dict(s.stages), s.name)  # the base without wrappers: applying the tasks puts them back
    back = apply_tasks(p, bare, tasks, {t.key: t.start for t in tasks}, name=s.name)
    assert back.wrappers == s.wrappers and back.stages == s.stages
    assert Schedule.loads(back.dumps()).wrappers == s.wrappers  # the database's JSON round trip
    arrays = inputs(p)
    low = segments.lower(p, s, segmented=True)
    assert isinstance(low, segments.Segmented)
    held = [(pt, {"fc0", "fc1"} & set(pt.names.values())) for pt in low.parts]
    held = [(pt, fcs) for pt, fcs in held if fcs]
    assert sum(len(fcs) for _, fcs in held) == 2  # both layers are in parts (not vacuous)
    assert all(len(pt.schedule.wrappers) == len(fcs) for pt, fcs in held)  # each part keeps its layers' wrappers
    np.testing.assert_allclose(run(p, s, arrays, segmented=True), reference(p, arrays, 2, True), rtol=1e-4, atol=1e-4)


def test_a_packed_slice_of_a_stage_keeps_its_loops_when_the_stage_becomes_a_segment_input():
    # attention's P @ V: V a column slice of a stage (an access that is not plain variables),
    # and the stage an input of the matmul's segment: the wrapper's loops are d0, d1 either way
    b = Builder("attn", "test")
    x, w = b.input("x", (128, 64)), b.input("w", (64, 384), -0.1, 0.1)
    v = b.matmul("qkv", x, w)
    probs = b.input("probs", (128, 128))
    i, j, k = E.Var("i"), E.Var("j"), E.Var("k")
    upd = E.BinOp("*", E.Access(probs, (i, k)), E.Access(v, (k, E.BinOp("+", j, E.Const(256)))))
    pv = Stage("pv", (Dim("i", 128), Dim("j", 128)), E.Const(0.0), (Dim("k", 128),), upd, "sum", "matmul")
    p0 = b.build([v])
    p = Pipeline("attn", p0.inputs, [*p0.stages, pv], ["pv"])
    s = heuristic_schedule(p)
    assert "qkv_in_pv" in s.wrappers and "matmul_panels_root" in plan(p).rules["pv"]
    assert [d.name for d in wrapper_dims(p, s.wrappers["qkv_in_pv"])] == ["d0", "d1"]
    arrays = inputs(p)
    ref = arrays["probs"].astype(np.float64) @ (arrays["x"].astype(np.float64) @ arrays["w"])[:, 256:]
    np.testing.assert_allclose(run(p, s, arrays, segmented=True), ref, rtol=1e-4, atol=1e-4)


def test_a_rule_whose_copy_does_not_validate_falls_back(monkeypatch):
    """The heuristic checks the copies a rule adds with the rule, so a bad one (here at a loop
    its consumer is not inside) undoes that rule and another recipe schedules the product."""
    import engine.heuristic as H
    from engine.schedule import S

    real = H.matmul_panels

    def bad_panels(s, p, r, a, target=None):
        out = real(s, p, r, a, target=target)
        (w,) = s.wrappers.values()
        s.wrappers.clear()
        S(s, w.consumer).wrap(w.source).compute_at(a, p.stage(a).dims[0].name)  # outside where the consumer is computed
        return out

    monkeypatch.setattr(H, "matmul_panels", bad_panels)
    p = layers(128, 256, 768)
    pl = plan(p, AVX512)
    assert "(matmul_panels)" not in pl.rules["fc0"] and not pl.schedule.wrappers


def test_a_root_matmul_s_column_block_is_any_divisor_of_its_vectors():
    # 1000 columns on 16 lanes: vectors of 8 (the power of two that divides), 125 of them,
    # blocked by 5 (not by 1, the largest power of two dividing 125): 5 accumulators
    p = layers(4, 64, 1000, tail=False)
    pl = plan(p, AVX512)
    assert "dense_output" in pl.rules["fc0"], pl.rules["fc0"]
    factors = {d.inner: d.factor for d in pl.schedule.of("fc0").update if d.kind == Kind.SPLIT}
    assert factors["j_v"] == 8 and factors["j_u"] == 5
    arrays = inputs(p)
    np.testing.assert_allclose(run(p, pl.schedule, arrays), reference(p, arrays, 1, False), rtol=1e-4, atol=1e-4)
