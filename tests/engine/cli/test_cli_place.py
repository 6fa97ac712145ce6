"""`place` and `bench placement` from the command line (in process: no Halide compile, no worker)."""

import json

import pytest

from engine.cli import main


def run_json(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out), err


def test_place_json_has_the_fields_and_the_simulators_makespan(capsys):
    from engine import zoo
    from engine.placement.costs import roofline_costs
    from engine.placement.devices import load_profile
    from engine.placement.graph import from_pipeline
    from engine.placement.simulator import simulate

    obj, _ = run_json(capsys, "place", "resnet_block", "--devices", "cpu_4gpu_pcie", "--policy", "sct", "--json")
    for key in ("makespan_ms", "per_device", "transfers_mb", "peak_mem_mb", "valid", "policy", "placement", "simulated", "train_s"):
        assert key in obj
    assert obj["policy"] == "sct" and obj["simulated"] is True and obj["valid"] is True
    prof = load_profile("cpu_4gpu_pcie")
    g = from_pipeline(zoo.get("resnet_block", "full"))
    assert list(obj["placement"]) == [n.name for n in g.nodes]
    placement = [prof.index(obj["placement"][n.name]) for n in g.nodes]
    sim = simulate(g, prof, roofline_costs(g, prof), placement)
    assert obj["makespan_ms"] == pytest.approx(sim.makespan_s * 1e3)
    assert [d["device"] for d in obj["per_device"]] == [d.name for d in prof.devices]
    assert sum(d["stages"] for d in obj["per_device"]) == len(g)


def test_a_placement_that_does_not_fit_is_reported_invalid_with_the_reason(capsys):
    obj, err = run_json(capsys, "place", "harris", "--devices", "memory_tight", "--policy", "single", "--json")
    assert obj["valid"] is False and "gpu0" in obj["reason"]
    assert "does not fit" in err
    obj, _ = run_json(capsys, "place", "harris", "--devices", "memory_tight", "--policy", "etf", "--json")
    assert obj["valid"] is True and len(set(obj["placement"].values())) > 1  # memory-aware: split


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["place", "blur", "--devices", "nope"], "unknown device profile 'nope'"),
        (["place", "blur", "--policy", "etf", "--train-s", "3"], "--train-s is a learned policy's budget"),
        (["place", "blur", "--devices", "cpu_gpu", "--run"], "use --devices local"),
        (["place", "blur", "--devices", "cpu_gpu", "--costs", "measured"], "needs devices of this machine"),
        (["place", "no_such_pipeline"], "unknown pipeline"),
        (["bench", "placement", "--profiles", "nope"], "--profiles: unknown device profile"),
        (["bench", "placement", "--policies", "single,bogus"], "unknown placement policy bogus"),
    ],
)
def test_bad_place_options_are_one_error_line(capsys, argv, fragment):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and fragment in err


def test_bench_placement_compares_the_policies_case_by_case(capsys):
    obj, _ = run_json(
        capsys, "bench", "placement", "--pipelines", "conv_relu,harris", "--no-models", "--profiles", "cpu_gpu,memory_tight",
        "--policies", "single,roundrobin,etf,sct", "--json",
    )  # fmt: skip
    assert obj["simulated"] is True and obj["policies"] == ["single", "roundrobin", "etf", "sct"]
    cases = {(c["graph"], c["profile"]): c for c in obj["cases"]}
    assert set(cases) == {(g, p) for g in ("conv_relu", "harris") for p in ("cpu_gpu", "memory_tight")}
    tight = cases[("harris", "memory_tight")]
    assert tight["results"]["single"]["valid"] is False and tight["results"]["single"]["ratio"] is None
    for case in obj["cases"]:
        valid = [r["makespan_ms"] for r in case["results"].values() if r["valid"]]
        assert case["best_heuristic_ms"] == min(valid)
        assert all(r["ratio"] >= 1.0 - 1e-9 for r in case["results"].values() if r["valid"])
    assert obj["summary"]["per_policy"]["roundrobin"]["geomean_ratio"] > 1.0
    assert "| harris | 10 | memory_tight |" in obj["table"] and "OOM" in obj["table"]
