"""Run `python main.py ARGS` many times without paying Python's and the engine's imports each time.

A server process imports main.py and the CLI once, then forks one child per run; the child
sets its working directory, environment and standard streams, runs main.py as `__main__`
(exactly what `python main.py ARGS` runs after start-up) and exits with its status. Each run
is still its own process: a crash, an exit status, a signal or a stray write is the child's
and is seen as a subprocess would see it. Tests that check the CLI's start-up itself keep
using a real subprocess (tests/engine/cli/test_cli_errors.py compares both on a few cases).

    with CliForkServer() as srv:
        r = srv.run(["measure", "blur", "--size", "small"], env={...})  # a CompletedProcess

or `shared_server().run(...)` for one server per test process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class CliForkServer:
    """One server process; `run` is sequential (one child at a time). `preload` names modules
    the server imports too (onnx, torch) so that children that need them start at once."""

    def __init__(self, preload: tuple[str, ...] = ()) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", *preload],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=ROOT,
            text=True,
        )
        self._dir = tempfile.mkdtemp(prefix="cli-fork-")
        ready = self._proc.stdout.readline()
        if ready.strip() != "ready":
            raise RuntimeError(f"the CLI fork server did not start: {ready!r}")

    def run(
        self, args: list[str], *, env: dict[str, str] | None = None, cwd: str | Path = ROOT, timeout: float = 300
    ) -> subprocess.CompletedProcess:
        out, err = os.path.join(self._dir, "out"), os.path.join(self._dir, "err")
        req = {"args": [str(a) for a in args], "env": dict(os.environ if env is None else env), "cwd": str(cwd)}
        req.update(stdout=out, stderr=err, timeout=timeout)
        self._proc.stdin.write(json.dumps(req) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError("the CLI fork server died")
        rc = json.loads(line)["returncode"]
        with open(out, encoding="utf-8", errors="replace") as f_out, open(err, encoding="utf-8", errors="replace") as f_err:
            return subprocess.CompletedProcess(["main.py", *req["args"]], rc, f_out.read(), f_err.read())

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.stdin.close()
            self._proc.wait(timeout=30)
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> CliForkServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_SHARED: CliForkServer | None = None


def shared_server() -> CliForkServer:
    """One server per test process (preloading onnx), started on first use, closed at exit."""
    global _SHARED  # noqa: PLW0603
    if _SHARED is None or _SHARED._proc.poll() is not None:
        import atexit

        _SHARED = CliForkServer(preload=("onnx",))
        atexit.register(_SHARED.close)
    return _SHARED


def _child(req: dict) -> None:
    """In the forked child: become `python main.py ARGS` and never return."""
    import runpy
    import traceback

    code = 1
    try:
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
            os.dup2(os.open(path, flags, 0o600), fd)
        os.dup2(os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 2)
        sys.argv = [str(ROOT / "main.py"), *req["args"]]
        try:
            runpy.run_path(str(ROOT / "main.py"), run_name="__main__")
            code = 0
        except SystemExit as e:  # what the interpreter does with sys.exit's argument
            if e.code is None:
                code = 0
            elif isinstance(e.code, int):
                code = e.code
            else:
                print(e.code, file=sys.stderr)
                code = 1
        except BaseException:  # noqa: BLE001  # an uncaught exception: traceback and status 1, as Python does
            traceback.print_exc()
            code = 1
        import atexit

        atexit._run_exitfuncs()  # what interpreter shutdown runs
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code & 0xFF)


def _serve(preload: list[str]) -> None:
    import importlib
    import select
    import signal

    sys.path.insert(0, str(ROOT))
    import main  # noqa: F401  # what every run imports first
    from engine import cli

    cli.commands()
    for name in preload:
        importlib.import_module(name)
    reply = sys.stdout
    reply.write("ready\n")
    reply.flush()
    for line in sys.stdin:
        req = json.loads(line)
        reply.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(req)
        exited = os.pidfd_open(pid)  # readable once the child exits: a timed wait without polling
        if not select.select([exited], [], [], float(req["timeout"]))[0]:
            os.kill(pid, signal.SIGKILL)
        os.close(exited)
        _, status = os.waitpid(pid, 0)
        reply.write(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}) + "\n")
        reply.flush()


if __name__ == "__main__" and sys.argv[1:2] == ["--serve"]:
    _serve(sys.argv[2:])
