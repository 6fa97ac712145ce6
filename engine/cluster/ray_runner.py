"""Measurement on a Ray cluster, behind the local runner's interface (measure.MeasureRunner).

Each job is one Ray task (one CPU of a node) that runs it with a local `Runner` kept in the
task's worker process, so everything the local runner isolates (a Halide crash, a schedule
that hangs inside Halide, wrong outputs) comes back as the same failed `Measurement` and is
an application result, never retried. Ray's own semantics, made explicit:

- a task whose Ray worker or node dies is retried on another node of the same kind
  (`max_retries`, system failures only); when the retries run out it is reported failed
  (kind "crash") with Ray's reason;
- an exception inside the task (an application error) is not retried (`retry_exceptions=False`);
- a job with no result `timeout_s + startup_s` seconds after it was sent is cancelled
  (`ray.cancel(force=True)`, which kills its worker) and reported as a "timeout" failure;
- `should_cancel` returning True cancels the task the same way ("cancelled").

Compiles run in parallel, one per CPU of a node; timings take the node's timing lock
(worker.TIMING_LOCK_ENV, a file lock per node id), so a node times one job at a time.
Callers that wait on one job per thread (`run`) keep every node fed with `feeders` threads
(two per slot): while one job runs on a node, the next waits in the driver's queue and Ray
hands it to the node's leased worker as soon as the first returns, so no node waits for the
coordinator to store a result and sample the next schedule. Placement is Ray's (within the
kind's nodes): pinning a thread to a node (soft node affinity) kept the handoffs as tight but
left a node idle at the end of a data set, and a task retried right after its node died
could be sent to the dead node again until Ray noticed (then cut only by the job timeout).
A runner measures on one host kind (host fingerprint and Halide target, probed per node):
the kind with most CPUs unless `kind` names one, its nodes chosen with Ray's node-id label
selector, so results of different machines never mix; `host` and `target` are that
kind's and key the database cache. A small actor (the ledger) records every task attempt's
start with its node, from which `retries()` counts Ray's retries.

Everything binds to 127.0.0.1 unless the user names another address: a Ray instance of
our own (`--cluster ray`) is started with node_ip_address 127.0.0.1 and no dashboard.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..measure import Job, Measurement, Runner, failed, host_fingerprint, worker_env
from ..worker import TIMING_LOCK_ENV
from . import INSTALL_HINT, ClusterError, ClusterSpec, NodeInfo

OBJECT_STORE_MB = 150  # a Ray instance of our own: results are small JSON records
FEED_DEPTH = 2  # jobs sent per slot by `feeders` threads: one runs, one waits in the queue
# Ray's own bookkeeping we never read, off on loopback clusters: their periodic reports cost
# about 5% of a core (of 2 here) that the measurements need. Ray's state API then shows no
# task events; the runner's ledger records attempts.
# worker_niceness 0: Ray starts its workers at nice 15 by default, and the measurement worker
# each task starts inherits it, so on a machine shared with other work (or with the coordinator)
# the nodes' compiles and timings got a small share of the CPU next to a local worker at nice 0.
QUIET_SYSTEM_CONFIG: dict[str, Any] = {
    "task_events_report_interval_ms": 60000, "metrics_report_interval_ms": 60000, "enable_metrics_collection": False,
    "event_stats": False, "worker_niceness": 0,
}  # fmt: skip
PROBE_TIMEOUT_S = 120.0  # a node's first task imports Halide
_LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # "0": Ray resolves 127.0.0.1 to itself, not to the network address
_AUTH_ENV = "RAY_AUTH_MODE"
_LOCK = threading.Lock()
_STATE: dict[str, Any] = {"spec": None, "owned": False}  # the connection this module made (None: none, or someone else's)


def _ray(spec: ClusterSpec | None = None) -> Any:
    """The `ray` module (imported on first use); a ClusterError with the install line without it."""
    if spec is not None and spec.loopback and "ray" not in sys.modules:
        # Ray's default turns a loopback address into this machine's network address, where
        # a loopback-bound cluster does not listen.
        os.environ.setdefault(_LOOPBACK_ENV, "0")
    joining = spec is not None and (spec.address or os.environ.get("RAY_ADDRESS"))
    if joining and "ray" not in sys.modules and (Path.home() / ".ray" / "auth_token").exists():
        # Ray 2.60's clusters use token authentication once a token exists (`ray start` makes
        # one, read when Ray is imported): a driver joining them must send it.
        os.environ.setdefault(_AUTH_ENV, "token")
    try:
        import ray  # noqa: PLC0415  # the optional extra, only for --cluster ray...
    except ImportError:
        raise ClusterError(INSTALL_HINT) from None
    if spec is not None and spec.loopback and os.environ.get(_LOOPBACK_ENV) != "0":
        # Ray was imported before the variable was set: the constant it was read into.
        from ray._private import ray_constants  # noqa: PLC0415

        ray_constants.ENABLE_RAY_CLUSTER = False
    return ray


def connect(spec: ClusterSpec) -> None:
    """Connect this process to `spec`'s cluster (start a loopback instance of our own for
    `ray` without $RAY_ADDRESS). A connection made elsewhere in the process (a test's
    cluster) is used as it is; one this module made for another spec is replaced."""
    ray = _ray(spec)
    want = spec.address or os.environ.get("RAY_ADDRESS") or None
    with _LOCK:
        if ray.is_initialized():
            if _STATE["spec"] is None or _STATE["spec"] == (want or "local"):
                return
            ray.shutdown()
        env = {"env_vars": {"PYTHONPATH": worker_env(1)["PYTHONPATH"]}}  # a source checkout's root for the workers
        common: dict[str, Any] = {"log_to_driver": False, "logging_level": "WARNING", "runtime_env": env}
        try:
            if want is None:
                ray.init(
                    address="local", _node_ip_address="127.0.0.1", include_dashboard=False, object_store_memory=OBJECT_STORE_MB << 20,
                    _system_config=QUIET_SYSTEM_CONFIG, **common,
                )  # fmt: skip
            elif want.startswith("ray://"):
                ray.init(address=want, **common)
            else:
                ray.init(address=want, **({"_node_ip_address": "127.0.0.1"} if spec.loopback else {}), **common)
        except Exception as exc:  # noqa: BLE001  # Ray raises many kinds (ConnectionError, RuntimeError, ValueError): one line
            raise ClusterError(f"--cluster {spec}: cannot connect to Ray: {_first_line(exc)}") from None
        _STATE.update(spec=want or "local", owned=want is None)


def disconnect() -> None:
    """Disconnect (stopping the instance `connect` started, if it did)."""
    if "ray" not in sys.modules:
        return
    ray = sys.modules["ray"]
    with _LOCK:
        if _STATE["spec"] is not None and ray.is_initialized():
            ray.shutdown()
        _STATE.update(spec=None, owned=False)


@contextlib.contextmanager
def loopback_cluster(nodes: int = 2, cpus: int = 1, object_store_mb: int = 100) -> Iterator[Any]:
    """A Ray cluster on this machine for tests and benchmarks (`ray.cluster_utils.Cluster`):
    a head without CPUs (the driver's node, so any worker node may be removed) and `nodes`
    nodes of `cpus` CPUs, all on 127.0.0.1, no dashboard, this process connected to it;
    a killed node is noticed within about 5 s. Yields the Cluster; shut down on exit."""
    _ray(ClusterSpec("ray"))
    from ray.cluster_utils import Cluster  # noqa: PLC0415

    ray = sys.modules["ray"]
    common: dict[str, Any] = {"object_store_memory": object_store_mb << 20, "node_ip_address": "127.0.0.1"}
    health = {"health_check_period_ms": 1000, "health_check_timeout_ms": 5000, "health_check_failure_threshold": 5}
    # No log monitor: the driver is not sent the workers' output (log_to_driver=False).
    head = {"num_cpus": 0, "include_dashboard": False, "include_log_monitor": False, "_system_config": {**health, **QUIET_SYSTEM_CONFIG}}
    head.update(common)
    cluster = Cluster(initialize_head=True, head_node_args=head)
    try:
        for _ in range(nodes):
            cluster.add_node(num_cpus=cpus, **common)
        ray.init(address=cluster.address, _node_ip_address="127.0.0.1", log_to_driver=False, logging_level="WARNING")
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()


# --- what runs on the nodes --------------------------------------------------------------------
_NODE_RUNNERS: dict[int, Runner] = {}  # threads -> this Ray worker's Runner (its worker process is reused)


def measure_task(key: str, job: dict[str, Any], threads: int, ledger: Any) -> dict[str, Any]:
    """One job on this node (a Ray task): the attempt is recorded in the ledger, then the
    job runs in this Ray worker's own local Runner. Returns the Measurement's JSON, with
    TASK_KEY: the node and the task's start and end (wall clock), for the runner's timeline."""
    import ray  # noqa: PLC0415  # inside a Ray worker

    start = time.time()
    node = ray.get_runtime_context().get_node_id()
    if ledger is not None:
        # Waited for: a call not waited for may reach the ledger after the task's result has
        # reached the caller, whose attempts() then misses it (seen in CI under load).
        ray.get(ledger.started.remote(key, node))
        if job.get("fault") == "kill_task_worker":  # tests: this Ray worker dies, a system failure Ray retries
            os._exit(1)
    runner = _NODE_RUNNERS.get(threads)
    if runner is None:
        os.environ[TIMING_LOCK_ENV] = os.path.join(tempfile.gettempdir(), f"schedule-explorer-timing-{node}.lock")
        runner = _NODE_RUNNERS[threads] = Runner(threads)
    out = runner.run(Job(**job)).to_json()
    out[TASK_KEY] = {"node": node, "start": start, "end": time.time()}
    return out


TASK_KEY = "_task"  # not a Measurement field: Measurement.from_json ignores it


def probe_task() -> dict[str, Any]:
    """This node's host fingerprint, Halide target and load (1-minute load average per core)."""
    from ..halide_backend import target_string  # noqa: PLC0415  # Halide only on the node

    return {"host": host_fingerprint(), "target": target_string(), "load": os.getloadavg()[0] / (os.cpu_count() or 1)}


class Ledger:
    """An actor that records each task attempt's start (its key and node): attempts per key."""

    def __init__(self) -> None:
        self._starts: list[tuple[str, str]] = []

    def started(self, key: str, node: str) -> None:
        self._starts.append((key, node))

    def starts(self) -> list[tuple[str, str]]:
        return list(self._starts)


def cluster_nodes() -> list[NodeInfo]:
    """Every node of the connected cluster; the live ones probed (host kind, target, load)."""
    ray = _ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: PLC0415

    nodes = ray.nodes()
    probe = ray.remote(num_cpus=0, max_retries=0)(probe_task)
    refs = {
        n["NodeID"]: probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote()
        for n in nodes
        if n["Alive"]
    }
    ray.wait(list(refs.values()), num_returns=len(refs), timeout=PROBE_TIMEOUT_S)
    out = []
    for n in nodes:
        info = NodeInfo(n["NodeID"], n.get("NodeManagerAddress", ""), bool(n["Alive"]), float(n.get("Resources", {}).get("CPU", 0.0)))
        ref = refs.get(n["NodeID"])
        if ref is not None:
            try:
                got = ray.get(ref, timeout=0.1)
                info.host, info.target, info.load = got["host"], got["target"], got["load"]
            except Exception as exc:  # noqa: BLE001  # a node that cannot be probed is shown with the reason
                ray.cancel(ref, force=True)
                info.error = _first_line(exc)
        out.append(info)
    return out


# --- the coordinator's side ----------------------------------------------------------------------
class RayRunner:
    """Runs jobs as Ray tasks on the nodes of one host kind (see the module doc). Thread-safe:
    several threads may each wait on their own job (the data set's generation does)."""

    def __init__(
        self,
        spec: ClusterSpec,
        *,
        threads: int | None = None,
        kind: str | None = None,
        max_retries: int = 3,
        startup_s: float = 30.0,
    ) -> None:
        connect(spec)
        self.spec, self.max_retries, self.startup_s = spec, max_retries, startup_s
        ray = self._ray = _ray()
        self.host = self.target = ""
        self.threads = threads or 0
        self._guard = threading.Lock()
        self.refresh(kind)
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: PLC0415

        here = ray.get_runtime_context().get_node_id()
        self._ledger = ray.remote(num_cpus=0)(Ledger).options(scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False)).remote()
        self._keys: set[str] = set()
        self._in_flight: dict[str, Any] = {}  # key -> ObjectRef
        self.timeline: deque[tuple[str, float, float]] = deque(maxlen=100_000)  # (node, start, end) of the tasks that returned
        self.counts: Counter[str] = Counter()  # submitted, completed, cancelled, timeouts, lost (retries ran out), task_errors
        self.cancelled_refs: list[Any] = []
        self._closed = False

    def refresh(self, kind: str | None = None) -> None:
        """Probe the nodes again (a node that joined, one that left) and send later jobs to
        the live nodes of this runner's kind (on the first call: `kind`, or the kind with
        most CPUs). Jobs already sent keep their nodes."""
        self.nodes = cluster_nodes()
        usable = [n for n in self.nodes if n.alive and n.host and n.cpus >= 1]
        cpus: dict[tuple[str, str], float] = {}
        for n in usable:
            cpus[(n.host, n.target)] = cpus.get((n.host, n.target), 0.0) + n.cpus
        self.kinds = {f"{h} / {t}": c for (h, t), c in cpus.items()}
        if self.host:  # the kind is fixed once chosen: a search never changes machines
            chosen = (self.host, self.target)
        elif kind is not None:
            named = [k for k in cpus if kind in (k[0], f"{k[0]} / {k[1]}")]
            if not named:
                raise ClusterError(f"--cluster {self.spec}: no node of kind {kind!r}; the kinds are: {'; '.join(self.kinds) or 'none'}")
            chosen = named[0]
        elif cpus:
            chosen = max(cpus, key=lambda k: cpus[k])
        else:
            raise ClusterError(f"--cluster {self.spec}: no live node with a CPU answered ({len(self.nodes)} nodes)")
        mine = [n for n in usable if (n.host, n.target) == chosen]
        if not mine:
            raise ClusterError(f"--cluster {self.spec}: no live node of kind {chosen[0]} / {chosen[1]} is left")
        self.host, self.target = chosen
        self.node_ids = [n.node_id for n in mine]
        self.slots = int(sum(n.cpus for n in mine))  # jobs that can run at once (one CPU each)
        self.threads = self.threads or int(min(n.cpus for n in mine))
        self._task = self._ray.remote(measure_task).options(
            num_cpus=1, max_retries=self.max_retries, retry_exceptions=False,
            label_selector={"ray.io/node-id": f"in({','.join(self.node_ids)})"},
        )  # fmt: skip

    @property
    def feeders(self) -> int:
        """Threads that keep every slot fed when each waits on one job (`run`): FEED_DEPTH per
        slot, so a node's next job is queued while the coordinator handles the last result."""
        return self.slots * FEED_DEPTH

    # --- submitting and collecting ----------------------------------------------------------------
    def _submit(self, job: Job) -> tuple[str, Any]:
        key = uuid.uuid4().hex
        body = asdict(job)
        # The local Runner inside the task is a backstop; the coordinator's deadline comes first.
        body["timeout_s"] = job.timeout_s + self.startup_s + 30.0
        ref = self._task.remote(key, body, self.threads, self._ledger)
        with self._guard:
            self._keys.add(key)
            self._in_flight[key] = ref
            self.counts["submitted"] += 1
        return key, ref

    def _done(self, key: str, counter: str) -> None:
        with self._guard:
            self._in_flight.pop(key, None)
            self.counts[counter] += 1

    def _cancel(self, job: Job, key: str, ref: Any, counter: str, kind: str, message: str) -> Measurement:
        self._ray.cancel(ref, force=True)
        with self._guard:
            self.cancelled_refs.append(ref)
        self._done(key, counter)
        return failed(job, kind, message)

    def _result(self, job: Job, key: str, ref: Any) -> Measurement:
        from ray import exceptions as rx  # noqa: PLC0415

        try:
            raw = self._ray.get(ref)
        except rx.TaskCancelledError:
            self._done(key, "cancelled")
            return failed(job, "error", "cancelled")
        except rx.RayTaskError as exc:  # raised inside the task: an application error, not retried
            self._done(key, "task_errors")
            return failed(job, "error", f"the task failed on the cluster: {_first_line(exc.cause if exc.cause else exc)}")
        except rx.RayError as exc:  # its worker or node died more often than max_retries allows
            self._done(key, "lost")
            return failed(job, "crash", f"the task's Ray worker or node died and {self.max_retries} retries ran out: {_first_line(exc)}")
        task = raw.pop(TASK_KEY, None)
        m = Measurement.from_json(raw)
        if task is not None:
            with self._guard:
                self.timeline.append((str(task["node"]), float(task["start"]), float(task["end"])))
        self._done(key, "completed")
        if m.ok and (m.host, m.target) != (self.host, self.target):
            return failed(job, "error", f"measured on {m.host} / {m.target}, not on this runner's kind {self.host} / {self.target}")
        return m

    def _deadline(self, job: Job) -> float:
        return time.monotonic() + job.timeout_s + self.startup_s

    def _timeout_message(self, job: Job) -> str:
        return f"no result within the {job.timeout_s:g} s timeout (+{self.startup_s:g} s to start) on the cluster; its task was cancelled"

    def run(self, job: Job, should_cancel: Callable[[], bool] | None = None) -> Measurement:
        """Measure one job on a node; `should_cancel` is polled every 0.1 s (True cancels its task)."""
        key, ref = self._submit(job)
        deadline = self._deadline(job)
        poll = 0.1 if should_cancel is not None else 1.0  # ray.wait returns as soon as the result is there
        while True:
            ready, _ = self._ray.wait([ref], timeout=max(0.01, min(poll, deadline - time.monotonic())))
            if ready:
                return self._result(job, key, ref)
            if should_cancel is not None and should_cancel():
                return self._cancel(job, key, ref, "cancelled", "error", "cancelled")
            if time.monotonic() > deadline:
                return self._cancel(job, key, ref, "timeouts", "timeout", self._timeout_message(job))

    def run_many(
        self,
        jobs: Iterable[Job],
        should_cancel: Callable[[], bool] | None = None,
        on_result: Callable[[int, Measurement], None] | None = None,
    ) -> list[Measurement]:
        """Measure `jobs`, at most `slots` at a time, in the order given; `on_result(i, m)` as each arrives."""
        todo = list(jobs)
        out: list[Measurement | None] = [None] * len(todo)
        pending: dict[Any, tuple[int, str, float]] = {}
        nxt = 0
        while nxt < len(todo) or pending:
            while nxt < len(todo) and len(pending) < self.slots and not (should_cancel is not None and should_cancel()):
                key, ref = self._submit(todo[nxt])
                pending[ref] = (nxt, key, self._deadline(todo[nxt]))
                nxt += 1
            if not pending:
                break
            ready, _ = self._ray.wait(list(pending), num_returns=1, timeout=0.1)
            now, stop = time.monotonic(), should_cancel is not None and should_cancel()
            for ref in list(pending):
                i, key, deadline = pending[ref]
                if ref in ready:
                    out[i] = self._result(todo[i], key, ref)
                elif stop:
                    out[i] = self._cancel(todo[i], key, ref, "cancelled", "error", "cancelled")
                elif now > deadline:
                    out[i] = self._cancel(todo[i], key, ref, "timeouts", "timeout", self._timeout_message(todo[i]))
                else:
                    continue
                del pending[ref]
                if on_result is not None:
                    on_result(i, out[i])  # type: ignore[arg-type]  # just set
            if stop:
                nxt = len(todo)
        return [m if m is not None else failed(j, "error", "cancelled") for m, j in zip(out, todo)]

    # --- what the tests, the benchmark and the app read ---------------------------------------------
    def in_flight(self) -> list[Any]:
        """The ObjectRefs of the jobs sent and not yet collected."""
        with self._guard:
            return list(self._in_flight.values())

    def attempts(self) -> dict[str, list[str]]:
        """key -> the node of each attempt that started, for this runner's tasks."""
        got: dict[str, list[str]] = {}
        for key, node in self._ray.get(self._ledger.starts.remote(), timeout=30):
            if key in self._keys:
                got.setdefault(key, []).append(node)
        return got

    def retries(self) -> int:
        """Attempts beyond the first (Ray's retries after a worker or node died)."""
        return sum(len(v) - 1 for v in self.attempts().values())

    def close(self) -> None:
        """Cancel the jobs still running and end the ledger; the connection stays (disconnect ends it)."""
        if self._closed or not self._ray.is_initialized():  # Ray's calls would start a new instance
            self._closed = True
            return
        self._closed = True
        for ref in self.in_flight():
            self._ray.cancel(ref, force=True)
        with self._guard:
            self._in_flight.clear()
        try:
            self._ray.kill(self._ledger)
        except Exception:  # noqa: BLE001  # already gone with its node or the connection
            pass

    def __enter__(self) -> RayRunner:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
