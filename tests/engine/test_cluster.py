"""The Ray-backed runner (engine/cluster) on a real local Ray cluster: a head without CPUs and
two one-CPU nodes on 127.0.0.1 (ray.cluster_utils.Cluster), started once for the module.

Measurements go through it into SQLite and a second run reads them back; a CLI coordinator
killed mid-collection keeps what it stored and the resumed run measures only the rest; an application
error (wrong outputs) is not retried; a hang is cut by the per-job timeout (its task
cancelled); a node removed while it measures has its task retried on the other node and
the data set comes out complete, each sample once; cancelling a search cancels its running
task; the cluster shuts down with nothing left running."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from engine import api, zoo
from engine.cluster import ClusterError, ClusterSpec, parse_cluster
from engine.cluster.ray_runner import RayRunner, loopback_cluster
from engine.database import Database
from engine.halide_backend import target_string
from engine.measure import Job, host_fingerprint
from engine.schedule import default_schedule


def test_cluster_specs_and_missing_ray():
    assert parse_cluster("local") == ClusterSpec("local")
    assert parse_cluster("ray") == ClusterSpec("ray", None)
    assert parse_cluster("ray://10.0.0.5:10001") == ClusterSpec("ray", "ray://10.0.0.5:10001")
    assert parse_cluster("127.0.0.1:6379").loopback and not parse_cluster("10.0.0.5:6379").loopback
    for bad in ("rai", "host:", "host:99999", "ray://:1", "a b:1"):
        with pytest.raises(ClusterError, match="expected local, ray"):
            parse_cluster(bad)
    # Without Ray (its import blocked), --cluster ray is one line saying how to install it.
    code = "import sys; sys.modules['ray'] = None\nfrom engine.cli import main\nsys.exit(main(['search', 'blur', '--cluster', 'ray']))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines() == ["error: Ray is not installed; install the cluster extra: pip install -e .[cluster]"]


@pytest.fixture(scope="module")
def cluster():
    with loopback_cluster(nodes=2, cpus=1) as c:
        yield c


@pytest.fixture(scope="module")
def runner(cluster):
    r = RayRunner(ClusterSpec("ray", cluster.address), startup_s=4.0)
    yield r
    r.close()


def _job(p, **kw):
    return Job(p.to_json(), default_schedule(p).to_json(), min_time_s=0.05, min_runs=3, warmup=1, timeout_s=30.0, **kw)


def test_measures_on_the_nodes_and_does_not_retry_application_errors(runner, cluster, tmp_path):
    assert runner.slots == 2 and runner.threads == 1
    assert (runner.host, runner.target) == (host_fingerprint(), target_string())  # every node here is this machine
    p = zoo.get("blur", "small")
    good, garbage = runner.run_many([_job(p), _job(p, fault="garbage")])
    assert good.ok and good.verified and good.median_ms > 0 and good.threads == 1
    assert (good.host, good.target) == (runner.host, runner.target)
    assert garbage.error_kind == "verification" and not garbage.ok
    attempts = runner.attempts()
    assert len(attempts) == 2 and all(len(v) == 1 for v in attempts.values())  # the verification failure ran once
    assert set(n for v in attempts.values() for n in v) <= {n.node_id for n in cluster.worker_nodes}
    # Through the database: stored as it arrives, and a second run reads it back instead of measuring.
    with Database(tmp_path / "m.sqlite") as db:
        sent = runner.counts["submitted"]
        first = api.measure(p, default_schedule(p), runner, db, min_time_s=0.05)
        again = api.measure(p, default_schedule(p), runner, db, min_time_s=0.05)
        assert first.verified and not first.cached and again.cached and again.median_ms == first.median_ms
        assert runner.counts["submitted"] == sent + 1 and db.count() == 1
    # Every task that returned is in the timeline, with the worker node it ran on; two feeders a slot.
    nodes = [n for n, start, end in runner.timeline if end > start]
    assert len(nodes) == 3 and set(nodes) <= {n.node_id for n in cluster.worker_nodes} and runner.feeders == 4


def test_the_cli_collects_through_the_cluster_and_a_killed_run_resumes(cluster, tmp_path, capsys):
    import json
    import sqlite3
    from pathlib import Path

    from engine.cli import main

    db = tmp_path / "cli.sqlite"
    argv = ["costmodel", "generate", "--db", str(db), "--pipelines", "2", "--per-pipeline", "5", "--no-zoo", "--max-stages", "3"]
    argv += ["--cluster", cluster.address, "--json"]
    # A coordinator of its own (another process), killed once it has stored two samples.
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "main.py", *argv], cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline, stored = time.monotonic() + 90, 0
    while time.monotonic() < deadline and proc.poll() is None and stored < 2:
        time.sleep(0.1)
        try:
            with sqlite3.connect(db) as conn:
                stored = conn.execute("SELECT COUNT(*) FROM measurements").fetchone()[0]
        except sqlite3.Error:  # not created yet
            pass
    proc.kill()
    proc.wait(30)
    with Database(db) as d:
        kept = d.count()
    assert 2 <= kept < 10  # what it finished is there
    assert main(argv) == 0  # resumed here: only the rest is measured
    out = json.loads(capsys.readouterr().out)
    assert out["cluster"] == cluster.address and out["host"] == host_fingerprint()
    assert out["samples"] == 10 and out["cached"] == kept and out["measured"] == 10 - kept
    with pytest.raises(ClusterError, match="no node of kind 'a machine nobody has'"):
        RayRunner(ClusterSpec("ray", cluster.address), kind="a machine nobody has")


def test_a_hang_is_cut_by_the_timeout_and_recorded(runner, tmp_path):
    import ray

    p = zoo.get("blur", "small")
    with Database(tmp_path / "m.sqlite") as db:
        t0 = time.monotonic()
        m = api.measure(p, default_schedule(p), runner, db, fault="hang", timeout_s=1.0)
        assert m.error_kind == "timeout" and "cancelled" in (m.error or "")
        assert time.monotonic() - t0 < 30
        assert [f["kind"] for f in db.failures()] == ["timeout"]
    with pytest.raises(ray.exceptions.TaskCancelledError):
        ray.get(runner.cancelled_refs[-1], timeout=30)
    assert runner.in_flight() == []


def test_a_node_removed_mid_task_is_retried_and_the_dataset_is_complete(runner, cluster, tmp_path):
    from engine.costmodel.dataset import generate

    victim = sorted(cluster.worker_nodes, key=lambda n: n.node_id)[-1]
    removed = threading.Event()

    def remove_once_it_measures() -> None:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if any(victim.node_id in nodes for key, nodes in runner.attempts().items() if key not in before):
                cluster.remove_node(victim, allow_graceful=False)
                removed.set()
                return
            time.sleep(0.1)

    before = set(runner.attempts())
    killer = threading.Thread(target=remove_once_it_measures, daemon=True)
    killer.start()
    db_path = tmp_path / "data.sqlite"
    # Timing 1.5 s per sample: the victim is surely measuring when it goes.
    res = generate(
        db_path, 2, 2, seed=3, workers=2, with_zoo=False, max_stages=3, job_options={"min_time_s": 1.5, "max_runs": 10**9}, runner=runner
    )
    killer.join(5)
    assert removed.is_set()
    assert res["samples"] == 4 and res["measured"] == 4
    with Database(db_path) as db:
        keys = [(m.pipeline_hash, m.schedule_hash) for m in db.measurements()]
        assert len(keys) == 4 == len(set(keys))  # complete, each sample once
        assert [f for f in db.failures() if f["kind"] in ("crash", "timeout", "error")] == []  # the node's death is no sample's failure
        assert all(m.host == runner.host and m.threads == 1 for m in db.measurements())
    mine = {k: v for k, v in runner.attempts().items() if k not in before}
    retried = [nodes for nodes in mine.values() if len(nodes) > 1]
    assert retried and all(nodes[0] == victim.node_id and victim.node_id not in nodes[1:] for nodes in retried), (
        mine,
        victim.node_id,
        runner.counts,
    )
    assert runner.retries() >= 1
    runner.refresh()  # later jobs go to the live nodes only
    assert victim.node_id not in runner.node_ids and runner.slots == 1


def test_a_task_whose_worker_keeps_dying_is_retried_then_reported_failed(cluster):
    """A system failure (the task's Ray worker dies) is retried up to max_retries, then the job
    is one failed Measurement saying so: never an exception, never retried forever."""
    r = RayRunner(ClusterSpec("ray", cluster.address), startup_s=4.0, max_retries=1)
    try:
        m = r.run(_job(zoo.get("blur", "small"), fault="kill_task_worker"))
        assert not m.ok and m.error_kind == "crash" and "1 retries ran out" in m.error, m.error
        assert r.retries() == 1 and r.counts["lost"] == 1
    finally:
        r.close()


def test_cancelling_a_search_cancels_its_task(runner):
    import ray

    from engine.costmodel import AnalyticModel
    from engine.search import Budget, run_search, runner_measure

    p = zoo.get("blur", "small")
    cancel = threading.Event()
    measure = runner_measure(runner, None, should_cancel=cancel.is_set, min_time_s=20.0, max_runs=10**9)  # each trial would take 20 s
    out: dict[str, Any] = {}
    t = threading.Thread(
        target=lambda: out.update(res=run_search(p, "random", Budget(8, 120.0), model=AnalyticModel(), measure_fn=measure, cancel=cancel))
    )
    cancelled_before = runner.counts["cancelled"]
    t.start()
    deadline = time.monotonic() + 60
    while not runner.in_flight() and time.monotonic() < deadline:
        time.sleep(0.05)
    ref = runner.in_flight()[0]
    time.sleep(1.0)  # running on its node by now
    cancel.set()
    t.join(60)
    assert not t.is_alive() and out["res"].cancelled
    assert runner.counts["cancelled"] == cancelled_before + 1 and runner.in_flight() == [], (
        runner.counts,
        [t.to_json() for t in out["res"].trials],
    )
    assert ref in runner.cancelled_refs
    with pytest.raises(ray.exceptions.TaskCancelledError):
        ray.get(ref, timeout=30)


def test_the_cluster_shuts_down(cluster, runner):
    import ray

    runner.close()
    procs = [p.process for node in [cluster.head_node, *cluster.worker_nodes] for infos in node.all_processes.values() for p in infos]
    assert procs
    ray.shutdown()
    cluster.shutdown()
    assert not ray.is_initialized()
    for proc in procs:
        proc.wait(30)  # raises if it is still running
