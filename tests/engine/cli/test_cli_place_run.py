"""`place --run`: the placement run for real on this machine's cores, next to its simulation."""

import json

from engine.cli import main


def test_place_run_adds_the_verified_measured_makespan_and_the_simulators_error(capsys):
    argv = ["place", "blur", "--size", "small", "--devices", "local", "--policy", "roundrobin", "--run", "--rounds", "2", "--json"]
    assert main(argv) == 0
    obj = json.loads(capsys.readouterr().out)
    measured = obj["measured"]
    assert measured["verified"] is True and measured["rounds"] == 2
    assert measured["makespan_min_ms"] <= measured["makespan_ms"] <= measured["makespan_max_ms"]
    assert len(set(obj["placement"].values())) == min(2, len(obj["per_device"]))  # blur's two stages round-robin over the cores
    expected = (obj["makespan_ms"] - measured["makespan_ms"]) / measured["makespan_ms"]
    assert abs(obj["simulator_error"] - expected) < 1e-9
