"""What a measurement worker process does with one job: compile, time, verify, profile.

Runs inside the worker (engine/measure.py starts it); returns a Measurement, never raises.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from . import halide_backend as HB
from . import reference as R
from . import segments
from .ir import Pipeline
from .measure import Job, Measurement, check_clock, failed, host_fingerprint, summarize, timed_rounds
from .schedule import Schedule, ScheduleError

Program = HB.Lowered | segments.Segmented
_REF_CACHE: OrderedDict[tuple[str, int], tuple[dict[str, np.ndarray], dict[str, np.ndarray], str]] = OrderedDict()
_COMPILED: OrderedDict[tuple[str, str], tuple[Program, float]] = OrderedDict()
# A file whose exclusive lock a job holds while it times (engine/cluster sets it per node):
# compiles of several jobs on a node run in parallel, their timings one at a time.
TIMING_LOCK_ENV = "SCHEDULE_EXPLORER_TIMING_LOCK"


@contextlib.contextmanager
def timing_slot() -> Iterator[None]:
    """Hold the node's timing lock ($SCHEDULE_EXPLORER_TIMING_LOCK) if one is set; the kernel
    releases it if this process dies."""
    path = os.environ.get(TIMING_LOCK_ENV)
    if not path:
        yield
        return
    import fcntl  # noqa: PLC0415  # POSIX only, and only on cluster nodes

    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def die_with_parent(parent: int) -> None:
    """End this process when `parent` dies, even in the middle of a job that hangs: the kernel's
    parent-death signal on Linux, and a watchdog thread on the parent id everywhere (a
    killed parent's children are re-parented, so the id changes)."""
    if sys.platform.startswith("linux"):
        try:
            PR_SET_PDEATHSIG = 1
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # it died before the signal was armed
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


def main(job_fd: int, result_fd: int, threads: int, parent: int | None = None) -> None:
    """Worker loop: one JSON job per line in, one JSON Measurement per line out."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when workers stop
    if parent is not None:
        die_with_parent(parent)
    with os.fdopen(job_fd, "r") as jobs, os.fdopen(result_fd, "w") as results:
        for line in jobs:
            body = json.loads(line)
            if body is None:
                return
            if body.get("fault") == "close_and_hang":  # tests: the result pipe closes, the process stays
                results.close()
                while True:
                    time.sleep(1)
            results.write(json.dumps(execute(Job(**body), threads).to_json()) + "\n")
            results.flush()


def execute(job: Job, threads: int) -> Measurement:
    try:
        return _execute(job, threads)
    except ScheduleError as exc:
        return failed(job, "invalid_schedule", str(exc))
    except Exception as exc:  # noqa: BLE001  # anything else is reported, never raised
        tail = traceback.format_exc().strip().splitlines()[-1]
        return failed(job, "error", f"{type(exc).__name__}: {exc} ({tail})")


def _execute(job: Job, threads: int) -> Measurement:
    if job.fault == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    if job.fault == "hang":
        while True:
            time.sleep(1)
    check_clock(job.clock, threads)  # a cluster's jobs arrive here without the local Runner's check
    p = Pipeline.from_json(job.pipeline)
    low, sched_key, compile_s = _compiled(p, job, threads)
    inputs, refs, method = _reference(p, job.seed, job.verify)
    keep = low.bind(inputs)
    outs = HB.output_arrays(p)
    run = low.runner(outs)
    with timing_slot():
        rounds = timed_rounds(run, job)
    times = [t for r in rounds for t in r]
    m = Measurement(
        p.name, p.content_hash(), sched_key, True, compile_s=compile_s, threads=threads, target=HB.target_string(),
        host=host_fingerprint(), runs=len(times), clock=job.clock, **summarize(times),
    )  # fmt: skip
    m.round_medians_ms = [summarize(r)["median_ms"] for r in rounds]
    if len(rounds) > 1:
        m.median_ms = statistics.median(m.round_medians_ms)
    m.gflops = p.flops() / (m.median_ms * 1e6) if m.median_ms else None
    if job.autoscheduler:
        m.search_s, m.schedule_source = low.extra["search_s"], low.schedule_source
    if job.fault == "garbage":  # a schedule that computes garbage
        for a in outs.values():
            a[...] = np.random.default_rng(1).uniform(-1e3, 1e3, a.shape)
    if job.verify:
        v = R.verify(p, outs, refs, method)
        m.verified, m.max_abs_err, m.max_rel_err, m.verify_method, m.tolerance = (
            v.ok,
            v.max_abs_err,
            v.max_rel_err,
            method,
            R.TOLERANCE_TEXT,
        )
        if not v.ok:
            m.ok, m.error_kind, m.error = False, "verification", f"output does not match the reference: {v.message}"
            return m
    if job.profile:
        low.compile(profile=True)
        with timing_slot():
            m.stages = _profile(low, run, m.median_ms or 0.0, job.min_time_s)
    del keep
    return m


def _compiled(p: Pipeline, job: Job, threads: int) -> tuple[Program, str, float]:
    """The compiled pipeline for this job, reused from an earlier job of this worker when
    the pipeline and schedule are the same (so a benchmark can interleave variants in
    rounds without re-running an autoscheduler's search or recompiling)."""
    sched_key = job.schedule_key()
    key = (p.content_hash(), sched_key)
    if key in _COMPILED:
        _COMPILED.move_to_end(key)
        low, compile_s = _COMPILED[key]
        if low.compiled_for != "plain":  # the last job profiled it
            low.compile()
        return low, sched_key, compile_s
    if job.autoscheduler:
        low = HB.autoschedule(p, job.autoscheduler, threads)
    else:
        low = segments.lower(p, Schedule.from_json(job.schedule or {"stages": {}}))
    compile_s = low.compile()
    _COMPILED[key] = (low, compile_s)
    while len(_COMPILED) > 8:
        _COMPILED.popitem(last=False)
    return low, sched_key, compile_s


def _reference(p: Pipeline, seed: int, verify: bool) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], str]:
    key = (p.content_hash(), seed)
    if key in _REF_CACHE:
        _REF_CACHE.move_to_end(key)
        return _REF_CACHE[key]
    inputs = R.make_inputs(p, seed)
    if not verify:
        return inputs, {}, ""
    refs, method = R.reference(p, inputs)
    _REF_CACHE[key] = (inputs, refs, method)
    while len(_REF_CACHE) > 3:
        _REF_CACHE.popitem(last=False)
    return inputs, refs, method


_libc: Any = None


def _fflush() -> None:
    global _libc  # noqa: PLW0603  # one libc handle per process, opened on first use
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None)
        _libc.fflush(None)
    except OSError:
        pass


def capture_fds(fn: Callable[[], Any]) -> str:
    """Run fn with file descriptors 1 and 2 sent to a temp file (Halide's runtime prints
    there directly, below Python's sys.stdout) and sys.stdout/stderr to a string (the
    Halide module routes JIT prints, the profiler's reports among them, through
    sys.stdout); return both, file first."""
    sink = io.StringIO()
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        _fflush()
        saved = os.dup(1), os.dup(2)
        os.dup2(tmp.fileno(), 1)
        os.dup2(tmp.fileno(), 2)
        try:
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                fn()
        finally:
            _fflush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
        tmp.seek(0)
        return tmp.read().decode(errors="replace") + sink.getvalue()


def _profile(low: Program, run: Callable[[], None], median_ms: float, min_time_s: float) -> dict[str, float]:
    """Per-stage ms: the profiler's shares of time, scaled to the unprofiled median."""
    # The profiler samples about every millisecond: profile for at least 0.3 s in all.
    n = max(3, min(5000, int(max(min_time_s, 0.3) * 1000 / max(median_ms, 1e-3))))

    def runs() -> None:
        for _ in range(n):
            run()

    totals = low.profile_totals(capture_fds(runs))
    whole = sum(totals.values())
    if whole <= 0:
        return {}
    return {k: median_ms * v / whole for k, v in totals.items()}


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else None)
