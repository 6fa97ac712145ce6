"""Measurement: compile and time in worker processes, verify against the reference.

A `Runner` keeps a small pool of worker processes. Each job (plain JSON-able dict) is
compiled, warmed up, timed until a minimum total time, verified against the independent
reference, and optionally profiled per stage. A worker that crashes or runs past the
job's timeout is killed and replaced; the job comes back as a failed `Measurement` with
the reason. Nothing here imports Qt.
"""

from __future__ import annotations

import functools
import json
import math
import os
import platform
import select
import signal
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypedDict

from .ir import Pipeline, canonical_hash
from .schedule import Schedule, ScheduleError, validate

ERROR_KINDS = ("invalid_schedule", "verification", "crash", "timeout", "error")
_AUTO = "auto:"  # an autoscheduler's key; a schedule's is a hex hash, so the two never collide


def autoscheduler_key(name: str) -> str:
    """The schedule key that the database and the app's history give the result of Halide's
    autoscheduler `name` (a schedule's own key is its content hash): "auto:<name>"."""
    return f"{_AUTO}{name}"


def autoscheduler_of(key: str) -> str | None:
    """The autoscheduler named by a key from `autoscheduler_key`; None for a schedule's key."""
    return key[len(_AUTO) :] if key.startswith(_AUTO) else None


@dataclass
class Job:
    """One thing to measure. `schedule` is schedule JSON, or None with `autoscheduler` set."""

    pipeline: dict[str, Any]
    schedule: dict[str, Any] | None = None
    autoscheduler: str | None = None
    min_time_s: float = 0.3
    min_runs: int = 5
    max_runs: int = 2000
    warmup: int = 2
    rounds: int = 1  # independent timing rounds; the result is the median of their medians
    # "wall" (perf_counter) or "thread_cpu" (the timing thread's CPU time: with 1 Halide thread the
    # kernel runs on it, and time another process holds the core is not counted: labels on a shared machine)
    clock: str = "wall"
    profile: bool = False
    verify: bool = True
    seed: int = 0
    timeout_s: float = 300.0
    # tests inject "crash", "hang", "close_and_hang", "kill_task_worker" (a cluster task's Ray worker dies) or "garbage"
    # (wrong outputs) to exercise isolation and verification
    fault: str | None = None

    def schedule_key(self) -> str:
        if self.autoscheduler:
            return autoscheduler_key(self.autoscheduler)
        return Schedule.from_json(self.schedule or {"stages": {}}).content_hash()


@dataclass
class Measurement:
    pipeline: str
    pipeline_hash: str
    schedule_hash: str
    ok: bool
    verified: bool = False
    error: str | None = None
    error_kind: str | None = None
    median_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    iqr_ms: float | None = None
    round_medians_ms: list[float] = field(default_factory=list)
    runs: int = 0
    compile_s: float | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    verify_method: str = ""
    tolerance: str = ""
    threads: int = 0
    target: str = ""
    host: str = ""
    gflops: float | None = None
    stages: dict[str, float] = field(default_factory=dict)
    search_s: float | None = None
    schedule_source: str = ""
    created: float = field(default_factory=time.time)
    cached: bool = False
    clock: str = "wall"  # the Job's clock the times are of

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(d: dict[str, Any]) -> Measurement:
        known = {k: v for k, v in d.items() if k in Measurement.__dataclass_fields__}
        return Measurement(**known)


def default_threads() -> int:
    return int(os.environ.get("HL_NUM_THREADS") or os.cpu_count() or 1)


@functools.cache
def host_fingerprint() -> str:
    """CPU model, core count and architecture: measurements from other machines never mix."""
    model = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model} x{os.cpu_count()} {platform.machine()}"


def machine_record(host: str, target: str, load_before: float | None = None) -> dict[str, Any]:
    """Where a benchmark's figures were measured: `host` (host_fingerprint or a runner's), core
    count, Halide `target`, Python version; with `load_before` (the 1-minute load average when
    it started) also that and the load average now."""
    rec: dict[str, Any] = {"host": host, "cores": os.cpu_count(), "target": target, "python": platform.python_version()}
    if load_before is not None:
        rec.update(load_avg_1m_before=load_before, load_avg_1m_after=os.getloadavg()[0])
    return rec


def failed(job: Job, kind: str, message: str) -> Measurement:
    p = job.pipeline
    return Measurement(
        str(p.get("name", "?")), _pipeline_hash(p), _safe_key(job), False, error=message, error_kind=kind,
        threads=default_threads(), host=host_fingerprint(),
    )  # fmt: skip


def _pipeline_hash(d: dict[str, Any]) -> str:
    try:
        return Pipeline.from_json(d).content_hash()
    except Exception:  # noqa: BLE001  # a malformed pipeline still gets a stable key
        return canonical_hash(d)


def _safe_key(job: Job) -> str:
    try:
        return job.schedule_key()
    except ScheduleError:
        return canonical_hash(job.schedule)


# --- the parent side ---------------------------------------------------------------------
def _worker_pythonpath() -> str:
    """The worker's PYTHONPATH. A source checkout's root is prepended (`python main.py` put it
    on the parent's sys.path, a child started elsewhere would not have it); an installed
    engine (site-packages) is found by `python -m engine.worker` from any directory as it is."""
    root = str(Path(__file__).resolve().parent.parent)
    installed = {str(Path(sysconfig.get_path(k)).resolve()) for k in ("purelib", "platlib")}
    given = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]  # an empty entry would mean the cwd
    return os.pathsep.join(given if root in installed else [root, *given])


def worker_env(threads: int) -> dict[str, str]:
    """The environment of a child process that runs Halide (a measurement worker, engine/isolated.py)."""
    env = dict(os.environ, HL_NUM_THREADS=str(threads), PYTHONPATH=_worker_pythonpath())
    # Keep freed buffers in the process: otherwise glibc returns large blocks to the OS
    # and every run pays page faults for its root intermediates, which swamps the
    # schedule's own cost (seen up to 5x) for every schedule and baseline alike.
    env.update(MALLOC_MMAP_THRESHOLD_="1000000000", MALLOC_TRIM_THRESHOLD_="1000000000")
    return env


class PipeWorker:
    """A child process `python -m MODULE JOB_FD RESULT_FD ARGS... PARENT_PID` speaking JSON lines
    over two pipes (jobs in, results out); its stdout and stderr go to a temp file so that a
    crash report can quote what it printed last. The measurement worker (engine/worker.py) and
    placement's device processes (placement/execute.py) are two."""

    def __init__(self, module: str, args: Sequence[str], env: dict[str, str], pass_fds: Sequence[int] = ()) -> None:
        job_r, self._job_w = os.pipe()
        self._res_r, res_w = os.pipe()
        self.stderr = tempfile.TemporaryFile(mode="w+b")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, str(job_r), str(res_w), *args, str(os.getpid())],
            pass_fds=(job_r, res_w, *pass_fds), stdin=subprocess.DEVNULL, stdout=self.stderr, stderr=self.stderr, env=env,
        )  # fmt: skip
        os.close(job_r)
        os.close(res_w)
        self._buf = b""

    def send(self, obj: Any) -> None:
        os.write(self._job_w, (json.dumps(obj) + "\n").encode())

    def poll(self, timeout: float) -> dict[str, Any] | None:
        """A complete result line if one arrives within `timeout` (in all, however many pieces
        it comes in); raises EOFError if the pipe closed."""
        end = time.monotonic() + timeout
        while b"\n" not in self._buf:
            ready, _, _ = select.select([self._res_r], [], [], max(0.0, end - time.monotonic()))
            if not ready:
                return None
            chunk = os.read(self._res_r, 1 << 20)
            if not chunk:
                raise EOFError
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def stderr_tail(self, n: int = 400) -> str:
        self.stderr.seek(0, os.SEEK_END)
        size = self.stderr.tell()
        self.stderr.seek(max(0, size - n))
        return " ".join(self.stderr.read().decode(errors="replace").split())

    def close_pipes(self) -> None:
        """The parent's ends of the pipes and the stderr file closed (the process already ended)."""
        for fd in (self._job_w, self._res_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self.stderr.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        reap(self.proc)
        self.close_pipes()


def reap(proc: subprocess.Popen, timeout: float = 5.0) -> bool:
    """Wait up to `timeout` for a process that was told to exit or killed; False if it has not
    exited by then (a killed process on a saturated machine can take longer to go: it is left
    to subprocess's own reaping, and the caller carries on instead of raising)."""
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        return False
    return True


class MeasureRunner(Protocol):
    """What measures jobs: the local `Runner`, or a cluster's (engine/cluster). `host` and
    `target` are those of the machines its measurements come from, the database's cache key."""

    threads: int
    slots: int  # jobs it runs at once (threads may each wait on one)

    @property
    def host(self) -> str: ...

    @property
    def target(self) -> str: ...

    def run(self, job: Job, should_cancel: Callable[[], bool] | None = None) -> Measurement: ...

    def close(self) -> None: ...


class Runner:
    """Runs jobs in an isolated worker process, one job at a time, reused across jobs."""

    slots = 1

    def __init__(self, threads: int | None = None) -> None:
        self.threads = threads or default_threads()
        self._worker: PipeWorker | None = None

    @property
    def host(self) -> str:
        return host_fingerprint()

    @property
    def target(self) -> str:
        from .halide_backend import target_string  # noqa: PLC0415  # Halide loads in the parent only when asked

        return target_string()

    @property
    def worker_pid(self) -> int | None:
        """The current worker process's id (None before the first job or after a failure)."""
        return self._worker.proc.pid if self._worker is not None and self._worker.proc.poll() is None else None

    def _get(self) -> PipeWorker:
        if self._worker is None or self._worker.proc.poll() is not None:
            self._replace()
            self._worker = PipeWorker("engine.worker", [str(self.threads)], worker_env(self.threads))
        return self._worker

    def run(self, job: Job, should_cancel: Callable[[], bool] | None = None) -> Measurement:
        """Measure one job. `should_cancel` is polled; a cancelled job kills its worker."""
        try:
            check_clock(job.clock, self.threads)
            p = Pipeline.from_json(job.pipeline)
            if job.schedule is not None:
                validate(p, Schedule.from_json(job.schedule))
        except ScheduleError as exc:
            return failed(job, "invalid_schedule", str(exc))
        except ValueError as exc:
            return failed(job, "error", str(exc))
        w = self._get()
        try:
            w.send(asdict(job))
        except OSError:
            self._replace()
            w = self._get()
            w.send(asdict(job))
        deadline = time.monotonic() + job.timeout_s
        while True:
            if should_cancel is not None and should_cancel():
                self._replace()
                return failed(job, "error", "cancelled")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._replace()
                return failed(job, "timeout", f"no result within the {job.timeout_s:g} s timeout; the worker was killed and replaced")
            try:
                got = w.poll(min(remaining, 0.1))
                if got is not None:
                    m = Measurement.from_json(got)
                    if not m.ok:
                        # A failed job (Halide error, wrong output) may have left the process
                        # corrupted: the next job gets a fresh one, so that a later crash is
                        # never blamed on an innocent schedule.
                        self._replace()
                    return m
            except EOFError:  # it closed its result pipe: exiting, or stuck on the way out (a crash all the same)
                stuck = not reap(w.proc)
                if stuck:
                    w.proc.kill()
                    reap(w.proc)
                return self._crashed(job, w, stuck)
            if w.proc.poll() is not None:
                return self._crashed(job, w, stuck=False)

    def _crashed(self, job: Job, w: PipeWorker, stuck: bool) -> Measurement:
        """The failed Measurement of a job whose worker died (or had to be killed); the worker is replaced."""
        code = w.proc.returncode
        tail = w.stderr_tail()
        self._replace()
        if stuck or code is None:
            why = "closed its result pipe and did not exit, so it was killed"
        else:
            why = f"killed by signal {signal.Signals(-code).name}" if code < 0 else f"exited with status {code}"
        return failed(job, "crash", f"the worker process crashed ({why}); it was replaced" + (f". It printed: {tail}" if tail else ""))

    def run_many(self, jobs: Iterable[Job]) -> list[Measurement]:
        return [self.run(j) for j in jobs]

    def _replace(self) -> None:
        if self._worker is not None:
            self._worker.kill()
        self._worker = None

    def close(self) -> None:
        if self._worker is not None:
            try:
                self._worker.send(None)
                reap(self._worker.proc, 2.0)
            except OSError:
                pass
            self._replace()

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Summary(TypedDict):
    """Run times in ms; the keys are Measurement's fields (the worker passes them as keywords)."""

    median_ms: float
    min_ms: float
    max_ms: float
    iqr_ms: float


def scaled_options(kernel_ms: float, *, runs: int = 30, min_s: float = 0.05, max_s: float = 0.6, warmup_s: float = 0.05) -> dict[str, Any]:
    """Job options scaled to a kernel that takes about `kernel_ms` a run (a first, quick
    measurement or a stored one): a timed window of `runs` runs, within [min_s, max_s]
    seconds, split into 3 independent rounds (their median of medians is the result, their
    disagreement the label's spread), and a warm-up of about `warmup_s` seconds (at least 2
    runs, at most 200) so that caches, page mappings and Halide's thread pool are in their
    steady state before the clock starts. A fixed window times a 20 us kernel thousands
    of times but a 50 ms one once; scaled, each gets enough runs for a stable median."""
    if not kernel_ms > 0:  # also NaN
        raise ValueError(f"kernel time must be a positive number of ms, not {kernel_ms!r}")
    run_s = kernel_ms / 1000.0
    window = min(max_s, max(min_s, runs * run_s))
    warmup = int(min(200, max(2, -(-warmup_s // run_s))))
    return {"min_time_s": window / 3, "min_runs": 3, "warmup": warmup, "rounds": 3}


def log_range(times: Sequence[float | None]) -> float:
    """The |log| range of positive times (0 with fewer than two)."""
    r = [x for x in times if x and x > 0]
    return float(math.log(max(r) / min(r))) if len(r) >= 2 else 0.0


def round_spread(m: Measurement) -> float:
    """How far a measurement's independent rounds disagree: the |log| range of their medians
    (0 with one round). A label's reliability: what careful labelling re-measures on."""
    return log_range(m.round_medians_ms)


CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "thread_cpu": time.thread_time}


def check_clock(clock: str, threads: int) -> None:
    """ValueError unless `clock` (CLOCKS) can time a job run on `threads` Halide threads: the
    thread CPU clock counts the timing thread only, so with more threads it would leave out
    the others' work and under-report every label."""
    if clock not in CLOCKS:
        raise ValueError(f"unknown clock {clock!r} (choose from {', '.join(CLOCKS)})")
    if clock == "thread_cpu" and threads != 1:
        raise ValueError(f"the thread CPU clock times the calling thread only: use 1 Halide thread (--threads 1), not {threads}")


def timed_rounds(run: Callable[[], Any], job: Job) -> list[list[float]]:
    """The runner's timing protocol: `job.warmup` untimed runs (one at least), then `job.rounds`
    rounds, each timing runs (seconds) until it has `job.min_runs` and `job.min_time_s` in all,
    at most `job.max_runs`. The worker times schedules with it, bench peers the other runtimes."""
    if job.clock not in CLOCKS:
        raise ValueError(f"unknown clock {job.clock!r} (choose from {', '.join(CLOCKS)})")
    for _ in range(max(1, job.warmup)):
        run()
    clock = CLOCKS[job.clock]
    out: list[list[float]] = []
    for _ in range(max(1, job.rounds)):
        times: list[float] = []
        total = 0.0
        while len(times) < job.max_runs and (len(times) < job.min_runs or total < job.min_time_s):
            t0 = clock()
            run()
            dt = clock() - t0
            times.append(dt)
            total += dt
        out.append(times)
    return out


def summarize(times_s: list[float]) -> Summary:
    ms = sorted(t * 1000 for t in times_s)
    q = statistics.quantiles(ms, n=4) if len(ms) >= 2 else [ms[0]] * 3
    return {"median_ms": statistics.median(ms), "min_ms": ms[0], "max_ms": ms[-1], "iqr_ms": q[2] - q[0]}
