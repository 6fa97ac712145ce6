"""One local device of a real placed run: a process pinned to one CPU core with one Halide thread.

Started by `engine/placement/execute.py` (`python -m engine.placement.device_worker CMD_FD
RESULT_FD PARENT_PID`), one per device; speaks JSON lines over two pipes like the measurement
worker (no pickle). The first line configures it: the pipeline, the placement, the core, the
shared-memory block and its layout, and the pipes to and from the other devices. It compiles
each of its stages as its own Halide pipeline (a one-stage segment, so identical stages share
code), then runs rounds on command.

In a round the device runs its stages one at a time, always the ready one that comes first in
the graph's order (a stage is ready when its local producers ran and its remote ones arrived).
After a stage, it *sends* the output to every other device that reads it: one copy into that
device's slot in shared memory, then a 4-byte message (the node) down the pipe to it. The
receiver's *recv* event ends when it reads that message; it reads the slot in place. Every
event is stamped with CLOCK_MONOTONIC (`time.monotonic_ns`, one clock for all processes on
Linux), relative to the round's common start.
"""

from __future__ import annotations

import gc
import json
import os
import select
import struct
import sys
import time
import traceback
from collections.abc import Callable
from multiprocessing import resource_tracker, shared_memory
from typing import Any

import numpy as np

from .. import segments
from ..ir import Input, Pipeline
from ..schedule import Schedule, ScheduleError
from ..worker import die_with_parent

_MSG = struct.Struct("<i")  # one node index per message; a 4-byte pipe write is atomic
SPIN_NS = 2_000_000  # how long a waiting device polls before it sleeps in select()


def attach(name: str) -> shared_memory.SharedMemory:
    """Attach to the parent's block without this process's resource tracker claiming it (in
    Python < 3.13 it would unlink the block when this process exits, under the parent)."""
    shm = shared_memory.SharedMemory(name=name)
    try:
        resource_tracker.unregister(f"/{shm.name}", "shared_memory")
    except Exception:  # noqa: BLE001  # no tracker to tell: nothing would unlink the block either
        pass
    return shm


def view(shm: shared_memory.SharedMemory, offset: int, shape: list[int]) -> np.ndarray:
    return np.ndarray(tuple(shape), dtype=np.float32, buffer=shm.buf, offset=offset)


def one_stage(p: Pipeline, sched: Schedule, n: str) -> tuple[Pipeline, Schedule]:
    """Stage `n` as its own pipeline (what it reads are inputs), with its schedule and the
    wrappers it reads through: a copy is part of how `n` is scheduled, and without them a
    device would measure another schedule than the one given."""
    srcs = p.stage(n).sources()
    wraps = {k: w for k, w in sched.wrappers.items() if w.consumer == n}
    for w in wraps.values():
        if w.source not in srcs:  # validation refuses it; say so here too rather than lower a schedule without it
            raise ScheduleError(w.label, f"{n!r} does not read {w.source!r}, so its one-stage pipeline has nothing to copy")
    sub = Pipeline(p.name, [Input(x, p.shape_of(x)) for x in srcs], [p.stage(n)], [n])
    return sub, Schedule({n: sched.of(n)}, sched.name, wraps)


class DeviceWorker:
    def __init__(self, cfg: dict[str, Any]) -> None:
        os.sched_setaffinity(0, {int(cfg["core"])})
        nice = int(cfg.get("nice", 0))
        if nice and os.getpriority(os.PRIO_PROCESS, 0) != nice:
            try:
                os.setpriority(os.PRIO_PROCESS, 0, nice)
            except PermissionError:
                raise PermissionError(f"nice {nice} needs root or CAP_SYS_NICE") from None
        # Real-time (SCHED_FIFO) during rounds only: on a machine others load, the cores are ours
        # for the round's duration (the kernel's RT throttling still leaves them 5%).
        self.realtime = bool(cfg.get("realtime", False))
        p = Pipeline.from_json(cfg["pipeline"])
        sched = Schedule.from_json(cfg["schedule"])
        order: list[str] = cfg["order"]
        place: list[int] = cfg["placement"]
        me = int(cfg["device"])
        index = {n: i for i, n in enumerate(order)}
        self.shm = attach(cfg["shm"])
        layout: dict[str, list[Any]] = cfg["layout"]

        def slot(key: str) -> np.ndarray:
            off, shape = layout[key]
            return view(self.shm, off, shape)

        self.local = [i for i, d in enumerate(place) if d == me]
        self.in_fds = {int(fd): int(peer) for peer, fd in cfg["in_fds"].items()}
        self.out_fds = {int(peer): int(fd) for peer, fd in cfg["out_fds"].items()}
        arrays: dict[str, np.ndarray] = {}
        for i in self.local:
            n = order[i]
            arrays[n] = slot(f"out:{n}") if n in p.outputs else np.zeros(p.stage(n).shape, np.float32)
        self.preds: dict[int, list[int]] = {}
        self.sends: dict[int, list[tuple[int, np.ndarray, np.ndarray]]] = {}
        self.runs: dict[int, Callable[[], None]] = {}
        self.compile_s = 0.0
        for i in self.local:
            n = order[i]
            binds = {}
            for x in p.stage(n).sources():
                if x in p.input_map:  # resident on every device: a private copy made once
                    binds[x] = arrays.setdefault(f"input:{x}", np.array(slot(f"in:{x}")))
                elif place[index[x]] == me:
                    binds[x] = arrays[x]
                else:
                    binds[x] = slot(f"slot:{x}@{me}")
            sub, sub_sched = one_stage(p, sched, n)
            seg = segments.lower(sub, sub_sched, segmented=True)
            self.compile_s += seg.compile()
            seg.bind(binds)
            self.runs[i] = seg.runner({n: arrays[n]})
            self.preds[i] = sorted(index[x] for x in p.producers(n))
            readers = sorted({place[index[c]] for c in p.consumers(n)} - {me})
            self.sends[i] = [(d, arrays[n], slot(f"slot:{n}@{d}")) for d in readers]
        self._keep = (p, arrays)

    def run_round(self, t0_ns: int) -> list[list[int]]:
        """One run of this device's stages; events as [kind, node, peer, start_ns, end_ns, bytes]
        relative to `t0_ns` (kind 0 compute, 1 send, 2 recv)."""
        if not self.realtime:
            return self._round(t0_ns)
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
        except PermissionError:
            raise PermissionError("real-time scheduling (SCHED_FIFO) needs root or CAP_SYS_NICE") from None
        try:
            return self._round(t0_ns)
        finally:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))

    def _round(self, t0_ns: int) -> list[list[int]]:
        clock = time.monotonic_ns
        preds, runs, sends, out_fds = self.preds, self.runs, self.sends, self.out_fds
        fds = list(self.in_fds)
        events: list[list[int]] = []
        have: set[int] = set()  # nodes whose output is here: computed locally or received
        todo = list(self.local)

        def receive(block: bool) -> None:
            # Poll (spin) while blocked, as a GPU runtime's spin-wait does: a process that sleeps
            # in select() is woken by the scheduler, up to milliseconds late on a busy machine.
            waited = clock()
            ready, _, _ = select.select(fds, [], [], 0)
            while block and not ready:
                if clock() - waited > SPIN_NS:
                    ready, _, _ = select.select(fds, [], [], None)
                    break
                ready, _, _ = select.select(fds, [], [], 0)
            for fd in ready:
                data = os.read(fd, 4096)
                if not data:
                    raise EOFError(f"device {self.in_fds[fd]} closed its pipe")
                seen = clock()
                for (node,) in _MSG.iter_unpack(data):
                    have.add(node)
                    start = waited if block else seen
                    events.append([2, node, self.in_fds[fd], start - t0_ns, seen - t0_ns, 0])

        pause = (t0_ns - clock()) / 1e9 - 0.002
        if pause > 0:
            time.sleep(pause)
        while clock() < t0_ns:  # the last two milliseconds: spin, so both devices start together
            pass
        while todo:
            if fds:
                receive(False)
            pick = next((i for i in todo if all(j in have for j in preds[i])), None)
            if pick is None:
                receive(True)
                continue
            todo.remove(pick)
            start = clock()
            runs[pick]()
            end = clock()
            events.append([0, pick, -1, start - t0_ns, end - t0_ns, 0])
            have.add(pick)
            for dev, src, dst in sends[pick]:
                start = clock()
                np.copyto(dst, src)
                os.write(out_fds[dev], _MSG.pack(pick))
                end = clock()
                events.append([1, pick, dev, start - t0_ns, end - t0_ns, src.nbytes])
        return events

    def close(self) -> None:
        self._keep = None  # type: ignore[assignment]
        self.runs.clear()
        self.sends.clear()
        try:
            self.shm.close()
        except BufferError:  # a Halide buffer still views it: the process is about to exit anyway
            pass


def main(cmd_fd: int, result_fd: int, parent: int) -> None:
    die_with_parent(parent)
    with os.fdopen(cmd_fd, "r") as cmds, os.fdopen(result_fd, "w") as results:

        def reply(obj: dict[str, Any]) -> None:
            results.write(json.dumps(obj) + "\n")
            results.flush()

        worker: DeviceWorker | None = None
        for line in cmds:
            msg = json.loads(line)
            if msg is None:
                break
            try:
                if "setup" in msg:  # a new placement: the stages' compiled code stays cached (segments' LRU)
                    if worker is not None:
                        worker.close()
                        worker = None
                    worker = DeviceWorker(msg["setup"])
                    reply({"ready": True, "compile_s": worker.compile_s, "pid": os.getpid()})
                elif "release" in msg:
                    if worker is not None:
                        worker.close()
                        worker = None
                    reply({"released": True})
                else:
                    assert worker is not None, "a round before the setup"
                    gc.disable()  # no collector pause inside a timed round
                    try:
                        events = worker.run_round(int(msg["t0_ns"]))
                    finally:
                        gc.enable()
                    reply({"events": events})
            except Exception as exc:  # noqa: BLE001  # reported to the parent, which raises it with the device named
                tail = traceback.format_exc().strip().splitlines()[-1]
                reply({"error": f"{type(exc).__name__}: {exc} ({tail})"})
                break
        if worker is not None:
            worker.close()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
