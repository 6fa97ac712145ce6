"""`tune --cluster` (issue 17 item 3): whole-model tuning measuring its trials on a real Ray
cluster on this machine (a head without CPUs and two one-CPU nodes, ray.cluster_utils), as
many trials at once as the cluster has slots; records keyed by the nodes' host and target."""

from __future__ import annotations

import json

import pytest
from tuning_fixtures import repeated_net

from engine.cluster import ClusterSpec
from engine.cluster.ray_runner import RayRunner, loopback_cluster
from engine.database import Database
from engine.tuning import tune
from engine.tuning.records import load
from engine.tuning.tune import where_of


@pytest.fixture(scope="module")
def cluster():
    with loopback_cluster(nodes=2, cpus=1) as c:
        yield c


def test_trials_run_on_both_nodes_at_once_and_records_name_the_nodes_host(cluster, tmp_path):
    p = repeated_net(c=4, hw=8, repeats=2)
    runner = RayRunner(ClusterSpec("ray", cluster.address), startup_s=4.0)
    try:
        assert runner.slots == 2
        with Database(tmp_path / "t.sqlite") as db:
            res = tune(p, runner, trials=4, db=db, budget_s=300)
            assert res.trials == 4 and sum(t.trials for t in res.tasks) == 4
            nodes = {n for ns in runner.attempts().values() for n in ns}
            assert len(nodes) == 2  # two trials at a time: one on each node
            t = next(t for t in res.tasks if t.best_ms is not None)
            rec = load(db, t.key, where_of(runner))
            assert rec is not None and rec.host == runner.host and rec.target == runner.target
    finally:
        runner.close()


def test_the_tune_command_takes_cluster(cluster, tmp_path, capsys):
    from engine.cli import main

    model = tmp_path / "net.json"
    model.write_text(json.dumps(repeated_net(c=4, hw=8, repeats=2).to_json()))
    argv = ["tune", str(model), "--cluster", cluster.address, "--trials", "2", "--no-compare", "--db", str(tmp_path / "c.sqlite")]
    assert main([*argv, "--quiet", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["cluster"] == cluster.address and obj["trials"] == 2 and obj["end_to_end"] is None
