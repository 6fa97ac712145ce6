"""Halide's compiler run in a child process, for everything but measurement (which has its
own worker pool in measure.py): the lowered Stmt of the CLI's `lower` and the app's Stmt tab.

A schedule that makes LLVM or Halide crash (a huge unroll, a compiler bug) then kills the
child, not the CLI or the app; the caller gets one `CompilerCrashError` that says what
happened, and a Halide rejection comes back as the `ScheduleError` it would have raised.
The child dies with its parent and speaks one JSON object each way (no pickle).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

from .ir import Pipeline
from .measure import worker_env
from .schedule import Schedule, ScheduleError


class CompilerCrashError(RuntimeError):
    """Halide's compiler crashed, hung or failed outside the schedule's control; the message says how."""


def lowered_stmt(p: Pipeline, sched: Schedule, html: bool = False, timeout_s: float = 300.0, fault: str | None = None) -> str:
    """Halide's lowered Stmt (text or HTML) for the schedule, computed in a child process.
    `fault` ("crash" or "hang") lets tests exercise the isolation."""
    request = {"task": "lower", "pipeline": p.to_json(), "schedule": sched.to_json(), "html": html, "fault": fault}
    got = _call(request, timeout_s)
    return str(got["stmt"])


def _call(request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    with tempfile.TemporaryFile(mode="w+b") as err:
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "engine.isolated", str(os.getpid())],
                input=json.dumps(request).encode(), stdout=subprocess.PIPE, stderr=err, env=worker_env(1), timeout=timeout_s,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            raise CompilerCrashError(f"Halide's compiler did not finish within {timeout_s:g} s; it was stopped") from None
        err.seek(0)
        tail = " ".join(err.read().decode(errors="replace").split())[-400:]
    if proc.returncode != 0:
        code = proc.returncode
        why = f"killed by signal {signal.Signals(-code).name}" if code < 0 else f"exited with status {code}"
        raise CompilerCrashError(f"Halide's compiler crashed ({why})" + (f"; it printed: {tail}" if tail else ""))
    try:
        got = json.loads(proc.stdout)
    except ValueError:
        raise CompilerCrashError(f"Halide's compiler process gave no answer{'; it printed: ' + tail if tail else ''}") from None
    if got.get("schedule_error"):
        e = got["schedule_error"]
        raise ScheduleError(e["stage"], e["reason"], e.get("directive"), e.get("index"), bool(e.get("update")))
    if got.get("error"):
        raise CompilerCrashError(got["error"])
    return got


def _serve(request: dict[str, Any]) -> dict[str, Any]:
    from . import halide_backend as HB  # noqa: PLC0415  # Halide is loaded in the child only

    if request.get("fault") == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    if request.get("fault") == "hang":
        while True:
            time.sleep(1)
    p = Pipeline.from_json(request["pipeline"])
    sched = Schedule.from_json(request["schedule"])
    try:
        return {"stmt": HB.lowered_stmt(p, sched, html=bool(request.get("html")))}
    except ScheduleError as exc:
        fields = {"stage": exc.stage, "reason": exc.reason, "directive": exc.directive, "index": exc.index, "update": exc.update}
        return {"schedule_error": fields}
    except Exception as exc:  # noqa: BLE001  # reported to the parent, which raises it as one error
        return {"error": f"{type(exc).__name__}: {exc}"}


def main(parent: int) -> None:
    from .worker import die_with_parent  # noqa: PLC0415

    die_with_parent(parent)
    request = json.loads(sys.stdin.buffer.read())
    sys.stdout.write(json.dumps(_serve(request)))
    sys.stdout.flush()


if __name__ == "__main__":
    main(int(sys.argv[1]))
