"""Pipeline IR: JSON round-trip, content hashing, validation and derived quantities."""

import json

import pytest

from engine import expr as E
from engine import zoo
from engine.ir import Dim, Input, Pipeline, PipelineError, Stage


@pytest.mark.parametrize("name", zoo.names())
def test_json_round_trip_and_hash(name):
    p = zoo.get(name, "small")
    text = json.dumps(p.to_json(), sort_keys=True)
    q = Pipeline.from_json(json.loads(text))
    assert json.dumps(q.to_json(), sort_keys=True) == text
    assert q.content_hash() == p.content_hash()
    assert zoo.get(name, "small").content_hash() == p.content_hash()  # stable across builds
    assert zoo.get(name, "full").content_hash() != p.content_hash()  # sizes differ


def test_hash_ignores_name_but_not_computation():
    p = zoo.get("blur", "small")
    d = p.to_json()
    d["name"], d["description"] = "renamed", "other words"
    assert Pipeline.from_json(d).content_hash() == p.content_hash()
    d["stages"][0]["value"]["args"][1] = 0.5  # change one weight
    assert Pipeline.from_json(d).content_hash() != p.content_hash()


def test_matmul_flops_and_bytes():
    p = zoo.get("matmul", "small")
    n = 128
    assert p.stage("prod").flops() == 2 * n**3
    assert p.bytes() == 4 * 3 * n * n  # two inputs read, one output written


def test_footprint_of_stencil_and_strided_conv():
    p = zoo.get("blur", "small")
    assert p.footprint("blur_y", "blur_x") == ((0, 65), (0, 63))
    assert p.footprint("blur_x", "input") == ((0, 65), (0, 65))
    pool = zoo.get("maxpool", "small")
    assert pool.footprint("pool", "pool_pad") == ((0, 0), (0, 7), (0, 16), (0, 16))


def test_expression_json_round_trip_and_affinity():
    x, y = E.Var("x"), E.Var("y")
    e = E.select(E.cmp("<", x, 3), E.Access("a", (x * 2 + 1, E.clamp(y - 1, 0, 9))), E.call("exp", E.Const(1.5)))
    assert E.from_json(json.loads(json.dumps(E.to_json(e)))) == e
    assert E.is_affine(x * 2 + y - 3)
    assert not E.is_affine(x * y)
    assert E.bounds(x * 2 + 1, {"x": (0, 9)}) == (1, 19)


def _stage(value, name="s", dims=(("x", 4),)):
    return Stage(name, tuple(Dim(n, e) for n, e in dims), value)


@pytest.mark.parametrize(
    "stages,fragment",
    [
        ([_stage(E.Access("missing", (E.Var("x"),)))], "reads 'missing'"),
        ([_stage(E.Access("a", (E.Var("x"), E.Var("x"))))], "with 2 indices"),
        ([_stage(E.Access("a", (E.Var("q"),)))], "unknown variables"),
        ([_stage(E.Const(0.0), dims=(("x", 0),))], "positive extent"),
        ([Stage("s", (Dim("x", 4),), E.Const(0.0), (Dim("r", 2),), E.Var("r"), "mean")], "unknown reducer"),
    ],
)
def test_malformed_pipelines_are_rejected(stages, fragment):
    with pytest.raises(PipelineError, match=fragment):
        Pipeline("bad", [Input("a", (4,))], stages, ["s"])


def test_malformed_json_says_where():
    with pytest.raises(PipelineError, match="stage 'b'"):
        Pipeline.from_json({"inputs": [], "stages": [{"name": "b", "dims": "oops", "value": 0}], "outputs": ["b"]})
    with pytest.raises(PipelineError, match="format"):
        Pipeline.from_json({"format": 99, "inputs": [], "stages": [], "outputs": []})
