"""`bench cluster`: cost-model samples collected on one local worker vs a local Ray cluster.

The same `costmodel generate` collection (random pipelines, `per_pipeline` verified schedules
each, one Halide thread per job) runs three times into fresh databases: on one local worker;
on a Ray cluster of `nodes` nodes with one CPU each on this machine (ray.cluster_utils, all on
127.0.0.1; its start-up is reported apart); and on a fresh such cluster where one node is
killed once `kill_at` of the samples are stored (a new node joins after it: reconnection).
Each run reports wall seconds and samples per second; the cluster runs also the sample count,
the distinct (pipeline, schedule) keys, a sha256 of the sorted keys (equal to the local run's:
nothing lost, nothing added), failures stored, and Ray's retries (task attempts beyond the
first, from the runner's ledger). The cluster's coordinator sends through `runner.feeders`
threads (two per node: a job waits on each node while the coordinator stores the last).
Where the time goes, per run: CPU seconds of the coordinator process, of the measurement
workers and of Ray's processes (Linux /proc, this process's tree), and for the cluster runs
each node's busy share of the wall time (its tasks' start to end, from the runner's timeline).
"""

from __future__ import annotations

import hashlib
import math
import os
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..cluster import ClusterSpec
from ..cluster.ray_runner import RayRunner, loopback_cluster
from ..costmodel.dataset import generate
from ..halide_backend import target_string
from ..measure import host_fingerprint
from .procs import processes


def _log(msg: str) -> None:
    print(f"[bench cluster] {msg}", file=sys.stderr, flush=True)


def _keys(db: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(db) as conn:
        return [tuple(r) for r in conn.execute("SELECT pipeline_hash, schedule_hash FROM measurements ORDER BY 1, 2")]


def _failures(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM failures").fetchone()[0])


def _check(db: Path, reference: list[tuple[str, str]] | None) -> dict[str, Any]:
    keys = _keys(db)
    digest = hashlib.sha256("\n".join(f"{a} {b}" for a, b in keys).encode()).hexdigest()
    out: dict[str, Any] = {"samples": len(keys), "distinct": len(set(keys)), "sha256": digest, "failures_stored": _failures(db)}
    if reference is not None:
        out["same_keys_as_local"] = keys == reference
        out["missing_vs_local"] = len(set(reference) - set(keys))
        out["extra_vs_local"] = len(set(keys) - set(reference))
    return out


def _tree_cpu() -> dict[str, float]:
    """CPU seconds so far of this process ("coordinator"), of the measurement workers
    (engine.worker processes, and the children this process reaped: the local Runner's
    worker) and of the other processes under this one (Ray's), each with its reaped
    children; empty where /proc is not there."""
    procs = processes()
    if procs is None:
        return {}
    children: dict[int, list[int]] = {}
    for pid, pr in procs.items():
        children.setdefault(pr.ppid, []).append(pid)
    out = {"coordinator": 0.0, "workers": 0.0, "ray": 0.0}
    me = os.getpid()
    todo = [me]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        if pid not in procs:
            continue
        pr = procs[pid]
        if pid == me:
            out["coordinator"] += pr.cpu_s
            out["workers"] += pr.reaped_cpu_s
        else:
            out["workers" if "engine.worker" in pr.cmdline else "ray"] += pr.cpu_s + pr.reaped_cpu_s
    return out


def _cpu_since(before: dict[str, float], samples: int) -> dict[str, Any]:
    after = _tree_cpu()
    if not before or not after:
        return {}
    used = {k: round(after[k] - before[k], 2) for k in after}
    return {"cpu_s": used, "cpu_per_sample_s": round(sum(used.values()) / max(samples, 1), 4)}


def _busy(timeline: Iterable[tuple[str, float, float]], t0: float, t1: float) -> dict[str, Any]:
    """Each node's tasks, busy seconds and busy share of the run's wall time (t0 to t1,
    wall clock), and how long it sat idle after its last task (the data set's last
    pipeline, measured one schedule after another, keeps one node busy at the end)."""
    nodes: dict[str, list[tuple[float, float]]] = {}
    for node, start, end in timeline:
        if start >= t0:
            nodes.setdefault(node, []).append((start, end))
    wall = max(t1 - t0, 1e-9)
    per = {
        n[:8]: {
            "tasks": len(d), "busy_s": round(sum(b - a for a, b in d), 2), "busy_share": round(sum(b - a for a, b in d) / wall, 3),
            "idle_at_end_s": round(t1 - max(b for _, b in d), 2),
        }
        for n, d in nodes.items()
    }  # fmt: skip
    return {"nodes_busy": per, "busy_share": round(sum(x["busy_s"] for x in per.values()) / (wall * max(len(per), 1)), 3)}


def _collect(db: Path, n_pipelines: int, per_pipeline: int, seed: int, max_stages: int, job: dict[str, Any], **kw: Any) -> dict[str, Any]:
    cpu = _tree_cpu()
    t0, w0 = time.perf_counter(), time.time()
    res = generate(db, n_pipelines, per_pipeline, seed, with_zoo=False, max_stages=max_stages, threads=1, job_options=job, **kw)
    wall = time.perf_counter() - t0
    out = {"wall_s": round(wall, 2), "samples_per_s": round(res.get("samples", 0) / wall, 3), "generate": res}
    out.update(_cpu_since(cpu, int(res.get("samples", 0))))
    runner = kw.get("runner")
    if isinstance(runner, RayRunner):
        out.update(_busy(runner.timeline, w0, w0 + wall))
    return out


def _kill_when(db: Path, n: int, cluster: Any, runner: RayRunner, info: dict[str, Any], stop: threading.Event) -> None:
    """Kill one worker node once `n` samples are stored, then add a fresh node and refresh the
    runner (on the main thread: Ray starts a node's processes with signal handlers)."""
    while not stop.is_set():
        try:
            count = len(_keys(db)) if db.exists() else 0
        except sqlite3.Error:  # the generation is creating the file
            count = 0
        if count >= n:
            break
        time.sleep(0.2)
    if stop.is_set():
        return
    victim = next(iter(cluster.worker_nodes))
    info["killed_after_samples"] = count
    info["killed_node"] = victim.node_id
    cluster.remove_node(victim, allow_graceful=False)
    _log(f"killed node {victim.node_id[:8]} after {count} samples")
    cluster.add_node(num_cpus=1, object_store_memory=100 << 20, node_ip_address="127.0.0.1")
    runner.refresh()
    info["replacement_joined_after_samples"] = len(_keys(db))
    _log(f"a fresh node joined after {info['replacement_joined_after_samples']} samples")


def bench_cluster(
    samples: int = 200, per_pipeline: int = 10, nodes: int = 2, seed: int = 0, max_stages: int = 6, fault: bool = True, kill_at: float = 0.3
) -> dict[str, Any]:
    """Throughput of `samples` cost-model samples, local (one worker) vs a `nodes`-node local
    Ray cluster (one CPU each), and a fault run (see the module doc)."""
    n_pipelines = math.ceil(samples / per_pipeline)
    job = {"min_time_s": 0.05, "timeout_s": 20.0}
    load_before = os.getloadavg()
    out: dict[str, Any] = {
        "machine": {"host": host_fingerprint(), "target": target_string(), "cores": os.cpu_count()},
        "samples_asked": n_pipelines * per_pipeline, "pipelines": n_pipelines, "per_pipeline": per_pipeline, "nodes": nodes,
        "cpus_per_node": 1, "threads_per_job": 1, "seed": seed,
    }  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        local_db = Path(tmp, "local.sqlite")
        _log(f"local: one worker, {n_pipelines} pipelines x {per_pipeline}")
        out["local"] = _collect(local_db, n_pipelines, per_pipeline, seed, max_stages, job, workers=1)
        reference = _keys(local_db)
        out["local"].update(_check(local_db, None))
        _log(f"local: {out['local']['samples']} samples in {out['local']['wall_s']} s")
        t0 = time.perf_counter()
        with loopback_cluster(nodes, cpus=1) as cluster:
            start_s = time.perf_counter() - t0
            runner = RayRunner(ClusterSpec("ray", cluster.address), threads=1)
            try:
                _log(f"cluster up in {start_s:.1f} s; collecting")
                db = Path(tmp, "cluster.sqlite")
                out["cluster"] = _collect(db, n_pipelines, per_pipeline, seed, max_stages, job, workers=runner.feeders, runner=runner)
                out["cluster"].update(
                    _check(db, reference), start_s=round(start_s, 2), retries=runner.retries(), counts=dict(runner.counts)
                )
            finally:
                runner.close()
        _log(f"cluster: {out['cluster']['samples']} samples in {out['cluster']['wall_s']} s")
        out["speedup"] = (
            round(out["cluster"]["samples_per_s"] / out["local"]["samples_per_s"], 3) if out["local"]["samples_per_s"] else None
        )
        if fault:
            with loopback_cluster(nodes, cpus=1) as cluster:
                runner = RayRunner(ClusterSpec("ray", cluster.address), threads=1)
                info: dict[str, Any] = {}
                done = threading.Event()
                db = Path(tmp, "fault.sqlite")
                got: dict[str, Any] = {}

                def collect() -> None:
                    try:
                        got.update(_collect(db, n_pipelines, per_pipeline, seed, max_stages, job, workers=runner.feeders, runner=runner))
                    finally:
                        done.set()

                collector = threading.Thread(target=collect, daemon=True)
                collector.start()
                try:
                    _kill_when(db, int(kill_at * n_pipelines * per_pipeline), cluster, runner, info, done)
                finally:
                    collector.join()
                    out["fault"] = {**got, **_check(db, reference), **info}
                    out["fault"].update(retries=runner.retries(), counts=dict(runner.counts))
                    runner.close()
            _log(f"fault: {out['fault']['samples']} samples, {out['fault']['retries']} retries")
    out["load_before"] = [round(x, 2) for x in load_before]
    out["load_after"] = [round(x, 2) for x in os.getloadavg()]
    out["table"] = _table(out)
    return out


def _table(r: dict[str, Any]) -> str:
    lines = [
        "| run | samples | distinct | samples/s | wall s | CPU s per sample | nodes busy | retries | lost / extra vs local |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in ("local", "cluster", "fault"):
        x = r.get(name)
        if not x:
            continue
        diff = f"{x['missing_vs_local']} / {x['extra_vs_local']}" if "missing_vs_local" in x else "-"
        cells = [name, x["samples"], x["distinct"], x["samples_per_s"], x["wall_s"], x.get("cpu_per_sample_s", "-")]
        cells += [x.get("busy_share", "-"), x.get("retries", "-"), diff]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    lines.append(f"\ncluster / local throughput: {r.get('speedup')}x ({r['nodes']} nodes x 1 CPU; 1 Halide thread per job)")
    for name in ("local", "cluster", "fault"):
        c = (r.get(name) or {}).get("cpu_s")
        if c:
            lines.append(f"{name} CPU s: coordinator {c['coordinator']}, measurement workers {c['workers']}, Ray {c['ray']}")
    if "fault" in r and "killed_after_samples" in r["fault"]:
        f = r["fault"]
        lines.append(f"fault run: a node killed after {f['killed_after_samples']} samples; {f['retries']} Ray retries")
    lines.append(f"load before {r['load_before']}, after {r['load_after']} (uptime's 1/5/15-minute averages)")
    return "\n".join(lines)
