"""`bench costmodel` on one small pipeline with tiny counts: the result's structure, rates
that are positive and consistent, and one clear error per bad parameter. (The rates
themselves are benchmark output, not asserted.)"""

import json

import pytest

from engine import api, zoo
from engine.bench.costmodel import MODELS, bench_costmodel, workload
from engine.costmodel import SHIPPED
from engine.measure import host_fingerprint


@pytest.fixture(scope="module")
def result(monkeypatch_module):
    return bench_costmodel(MODELS, ["blur"], n=3, batch=2, rounds=2, latency=["blur"], log=lambda _m: None)


@pytest.fixture(scope="module")
def monkeypatch_module():
    # The shipped learned models (conftest makes the app's default the analytic one).
    mp = pytest.MonkeyPatch()
    mp.setenv("SCHEDULE_EXPLORER_COSTMODEL", str(SHIPPED))
    from engine.costmodel import default_choice

    default_choice.cache_clear()
    yield mp
    mp.undo()
    default_choice.cache_clear()


def _spread_ok(s: dict, cpu: bool = True) -> None:
    assert set(s) == {"median", "min", "max", "rounds"} | ({"cpu_per_s"} if cpu else set()) and len(s["rounds"]) == 2
    assert 0 < s["min"] <= s["median"] <= s["max"]
    if cpu:  # the same rounds by CPU time
        _spread_ok(s["cpu_per_s"], cpu=False)


def test_structure_and_rates(result):
    json.dumps(result)  # one JSON object
    assert result["models"].keys() == set(MODELS) and result["n"] == 3 and result["batch"] == 2 and result["rounds"] == 2
    assert result["default_model"] in result["models"].values()  # the one resources/costmodel/default.json names
    m = result["machine"]
    assert m["host"] == host_fingerprint() and m["target"] and m["cores"] >= 1
    res = result["pipelines"]["blur"]
    assert list(result["pipelines"]) == ["blur"] and res["stages"] == len(zoo.get("blur", "full").stages) and res["n"] == 3
    for kind in ("fresh", "mutation"):
        _spread_ok(res["features"][kind]["per_s"])
        for key in MODELS:
            for way in ("predict_per_s", "predict_many_per_s"):
                _spread_ok(res["models"][key][kind][way])
    lat = result["edit_latency"]["blur"]
    assert lat["edits"] == 3 and lat["model"] == result["default_model"]
    assert 0 < lat["median_ms"] <= lat["p95_ms"] <= lat["max_ms"]
    assert set(lat["phase_median_ms"]) == {"edit_validate", "loopnest", "text", "predict"}
    assert all(v > 0 for v in lat["phase_median_ms"].values())
    rows = [line for line in result["table"].splitlines() if line.startswith("| blur |")]
    assert len(rows) == 1 + len(MODELS) + 1  # features, each model, the edit latency


def test_workload_is_one_stage_mutations():
    p = zoo.get("harris", "small")
    w = workload(p, 4, seed=1)
    assert len(w.fresh) == 4 and len(w.chain) == 5 and w.chain[0] is w.fresh[0]
    for a, b in zip(w.chain, w.chain[1:]):
        changed = [st for st in {*a.stages, *b.stages} if a.of(st).to_json() != b.of(st).to_json()]
        assert changed, "each step of the chain changes the schedule"
    again = workload(p, 4, seed=1)
    assert [s.content_hash() for s in again.chain] == [s.content_hash() for s in w.chain]


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"pipelines": ["nope"]}, r"unknown pipeline 'nope' \(choose from .*resnet50\)"),
        ({"latency": ["blurr"]}, r"unknown pipeline 'blurr'"),
        ({"models": ["xgboost"]}, r"unknown cost model 'xgboost' \(choose from analytic, tvm, gnn, halide\)"),
        ({"n": 0}, r"n must be at least 1, got 0"),
        ({"batch": -2}, r"batch must be at least 1, got -2"),
        ({"n_large": 0}, r"n_large must be at least 1, got 0"),
        ({"rounds": 0}, r"rounds must be at least 1, got 0"),
    ],
)
def test_bad_parameters(kw, message):
    with pytest.raises(api.InputError, match=message):
        bench_costmodel(**{"models": ["analytic"], "pipelines": ["blur"], "latency": [], **kw})


def test_cli(tmp_path, capsys):
    from engine.cli import main

    out = tmp_path / "bench.json"
    argv = ["bench", "costmodel", "--json", "--models", "analytic", "--pipelines", "blur", "--latency", "none", "--n", "2", "--rounds", "1"]
    assert main([*argv, "--out", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(out.read_text())
    assert list(printed["pipelines"]) == ["blur"] and list(printed["models"]) == ["analytic"] and printed["edit_latency"] == {}
    assert printed["pipelines"]["blur"]["models"]["analytic"]["mutation"]["predict_many_per_s"]["median"] > 0
    with pytest.raises(SystemExit) as exc:
        main(["bench", "costmodel", "--models", "analytic,xgboost"])
    assert exc.value.code == 2 and "unknown cost model 'xgboost'" in capsys.readouterr().err
