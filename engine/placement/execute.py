"""Real execution of a placement on this machine: each CPU core is a device.

One worker process per device (`device_worker.py`), pinned to its core with one Halide thread,
compiles the stages placed on it, each as its own Halide pipeline, so that a stage is the unit
of placement. The schedule is the default one (every stage computed at root, serially) unless a
schedule whose stages are all at root is given. Tensors that cross devices go through one
`multiprocessing.shared_memory` block: the producer copies its output into the receiving
device's slot (once per receiving device) and tells it down a pipe; those are the send and
recv events, stamped on CLOCK_MONOTONIC (one clock for every process on Linux).

Compiling is not timed. After warm-up rounds, every round starts both devices at one agreed
instant and ends when the last event ends; the makespan is the median over rounds. The
pipeline's outputs (written straight into shared memory) are verified against the reference
after the first warm-up round and after the last round: an unverified run raises, it never
returns a time.

`LocalDevices` keeps the device processes (and their compiled stages) for many placements;
`run_placement` starts and ends them for one. `measured_costs` times each stage on each pinned
core (a run of the whole pipeline placed on that device), so the simulator can be calibrated
against real runs (`calibrate.py`).
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import cache
from multiprocessing import shared_memory
from typing import Any

import numpy as np

from .. import reference as R
from ..halide_backend import target_string
from ..ir import BYTES_PER_ELEMENT, Pipeline
from ..measure import PipeWorker, host_fingerprint, reap, worker_env
from ..schedule import Kind, Schedule
from .costs import CostTable, roofline_costs
from .devices import DeviceProfile, Link, local_cores, local_profile
from .graph import OpGraph, from_pipeline

__all__ = [
    "ExecEvent",
    "Execution",
    "ExecutionError",
    "LocalDevices",
    "VerificationError",
    "accelerator_note",
    "costs_from_runs",
    "measured_costs",
    "run_placement",
    "with_links",
]

KINDS = ("compute", "send", "recv")
ALIGN = 64  # bytes; every tensor in the shared block starts on a cache line
START_DELAY_S = 0.02  # a round starts this long after the command is sent, on every device at once
_REFS: dict[tuple[str, int], tuple[dict[str, np.ndarray], dict[str, np.ndarray], str]] = {}
_COSTS: dict[tuple[str, str, tuple[str, ...]], CostTable] = {}


class ExecutionError(RuntimeError):
    """A placed run that could not be made or whose outputs are wrong; the message says which
    device and stage, or which input is at fault."""


class VerificationError(ExecutionError):
    """The placed run's outputs differ from the reference: no time is reported."""


@dataclass(frozen=True)
class ExecEvent:
    kind: str  # "compute" | "send" (the copy into the receiver's slot and the message) | "recv" (waiting for, then reading, the message)
    device: int
    node: int
    peer: int  # the other device of a send or recv; -1 for compute
    start_s: float  # from the round's common start
    end_s: float
    bytes: int = 0


@dataclass(frozen=True)
class Execution:
    """A placement run for real: measured, verified, on this machine's cores."""

    pipeline: str
    profile: str
    devices: tuple[str, ...]
    placement: tuple[int, ...]
    rounds: int
    makespan_s: float  # median over the timed rounds
    makespan_min_s: float
    makespan_max_s: float
    round_makespans_s: tuple[float, ...]
    busy_s: tuple[float, ...]  # per device, median over rounds: computing and sending (the core is occupied)
    compute_s: tuple[float, ...]  # per device, median over rounds: computing only
    transfers: int  # cross-device sends per round (one per tensor and receiving device)
    transfer_bytes: int
    events: tuple[ExecEvent, ...]  # the median round's
    verified: bool
    max_abs_err: float | None
    max_rel_err: float | None
    compile_s: tuple[float, ...]  # per device (not timed in the makespan)
    host: str = ""
    target: str = ""
    note: str = ""  # accelerators seen (none are used as devices yet)
    stage_s: tuple[tuple[float, ...], ...] = field(default=(), repr=False)  # [round][node]: each stage's compute time

    @property
    def spread_s(self) -> float:
        return self.makespan_max_s - self.makespan_min_s

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("stage_s")
        d["events"] = [asdict(e) for e in self.events]
        return d

    def timeline(self) -> tuple[Any, ...]:
        """The median round as the simulator's events (compute on a device, transfer on "a->b"
        from the send's start to the receiver reading the message), for the same Gantt chart."""
        from .simulator import Event  # noqa: PLC0415  # the simulator is only needed for this view

        out = []
        recv = {(e.node, e.device): e for e in self.events if e.kind == "recv"}
        for e in self.events:
            if e.kind == "compute":
                out.append(Event("compute", self.devices[e.device], e.node, e.start_s, e.end_s))
            elif e.kind == "send":
                r = recv.get((e.node, e.peer))
                end = max(e.end_s, r.end_s) if r is not None else e.end_s
                link = f"{self.devices[e.device]}->{self.devices[e.peer]}"
                out.append(Event("transfer", link, e.node, e.start_s, end, e.bytes))
        return tuple(sorted(out, key=lambda ev: (ev.start_s, ev.resource)))


@cache
def accelerator_note() -> str:
    """Whether a CUDA device is present (torch's view); only CPU cores are measured devices so far."""
    try:
        import torch  # noqa: PLC0415  # optional and slow to import: only asked here
    except ImportError:
        return "no CUDA device (torch not installed); the local devices are CPU cores"
    if torch.cuda.is_available():
        names = ", ".join(torch.cuda.get_device_name(k) for k in range(torch.cuda.device_count()))
        return f"CUDA present ({names}) but not yet a measured device; the local devices are CPU cores"
    return "no CUDA device (torch.cuda.is_available() is False); the local devices are CPU cores"


# --- checks ----------------------------------------------------------------------------
def _check(p: Pipeline, g: OpGraph, profile: DeviceProfile, placement: Sequence[int], schedule: Schedule | None) -> Schedule:
    if len(placement) != len(g.nodes):
        raise ExecutionError(f"placement of {p.name!r}: {len(placement)} devices given for {len(g.nodes)} stages")
    for k, d in enumerate(placement):
        if isinstance(d, bool) or not isinstance(d, int | np.integer) or not 0 <= int(d) < len(profile.devices):
            raise ExecutionError(
                f"placement of {p.name!r}: stage {k} ({g.nodes[k].name}) on device {d!r}, "
                f"the profile {profile.name!r} has devices 0..{len(profile.devices) - 1}"
            )
    sched = schedule if schedule is not None else Schedule({})
    for n in g.nodes:
        kind = sched.of(n.name).compute().kind
        if kind != Kind.COMPUTE_ROOT:
            raise ExecutionError(
                f"stage {n.name!r} is {kind} in schedule {sched.name!r}: a placed run needs every stage at root (the unit of placement)"
            )
    return sched


def _reference(p: Pipeline, seed: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], str]:
    key = (p.content_hash(), seed)
    if key not in _REFS:
        inputs = R.make_inputs(p, seed)
        refs, method = R.reference(p, inputs)
        while len(_REFS) >= 4:
            _REFS.pop(next(iter(_REFS)))
        _REFS[key] = (inputs, refs, method)
    return _REFS[key]


def _layout(p: Pipeline, g: OpGraph, placement: Sequence[int]) -> tuple[dict[str, list[Any]], int]:
    """Offsets in the shared block: the pipeline's inputs, its outputs, and one slot per
    cross-device tensor and receiving device."""
    layout: dict[str, list[Any]] = {}
    size = 0

    def add(key: str, shape: tuple[int, ...]) -> None:
        nonlocal size
        layout[key] = [size, list(shape)]
        size += -(-BYTES_PER_ELEMENT * math.prod(shape) // ALIGN) * ALIGN

    for i in p.inputs:
        add(f"in:{i.name}", i.shape)
    for o in p.outputs:
        add(f"out:{o}", p.stage(o).shape)
    for a, b in g.edges:
        if placement[a] != placement[b] and f"slot:{g.nodes[a].name}@{placement[b]}" not in layout:
            add(f"slot:{g.nodes[a].name}@{placement[b]}", p.stage(g.nodes[a].name).shape)
    return layout, max(size, ALIGN)


# --- the device processes ----------------------------------------------------------------
class _Device(PipeWorker):
    """A device process (placement/device_worker.py), with `extra_fds` (the shared block) passed on."""

    def __init__(self, extra_fds: list[int]) -> None:
        super().__init__("engine.placement.device_worker", [], worker_env(1), extra_fds)

    def receive(self, deadline: float, what: str) -> dict[str, Any]:
        try:
            msg = self.poll(max(0.0, deadline - time.monotonic()))
        except EOFError:
            raise ExecutionError(f"{what}: the device process died ({self.stderr_tail() or 'nothing printed'})") from None
        if msg is None:
            raise ExecutionError(f"{what}: no answer within the time limit")
        if "error" in msg:
            raise ExecutionError(f"{what}: {msg['error']}")
        return msg

    def close(self) -> None:
        try:
            self.send(None)
        except OSError:
            pass
        if not reap(self.proc):
            self.proc.kill()
            reap(self.proc)
        self.close_pipes()


class LocalDevices:
    """This machine's devices as processes (one per core of `profile`, pinned, one Halide thread),
    kept across placements: a stage compiled for one placement is reused by the next (segments'
    per-process cache), so calibrating many placements of one pipeline compiles each stage once
    per device. Pipes join every ordered pair of devices. Use as a context manager."""

    def __init__(self, profile: DeviceProfile | None = None, nice: int = 0, realtime: bool = False) -> None:
        self.profile = profile if profile is not None else local_profile()
        # On a machine that others load: a negative `nice` raises the device processes' CPU
        # share, `realtime` runs them SCHED_FIFO during rounds (both need root; calibration
        # options). The defaults leave them as any process.
        self.nice, self.realtime = nice, realtime
        cores = local_cores()
        for k, dev in enumerate(self.profile.devices):
            if not dev.measured:
                raise ExecutionError(
                    f"device {dev.name!r} of profile {self.profile.name!r} is simulated: only local_profile's devices run for real"
                )
            if k >= len(cores):
                raise ExecutionError(f"device {dev.name!r}: this process may use {len(cores)} core(s) {cores}")
        self.cores = cores[: len(self.profile.devices)]
        nd = len(self.cores)
        self._ends = {(a, b): os.pipe() for a in range(nd) for b in range(nd) if a != b}  # (sender, receiver) -> (read, write)
        self._devices: list[_Device] = []
        try:
            for d in range(nd):
                mine = [r for (_, b), (r, _) in self._ends.items() if b == d] + [w for (a, _), (_, w) in self._ends.items() if a == d]
                self._devices.append(_Device(mine))
        except BaseException:
            self.close()
            raise
        finally:
            for r, w in self._ends.values():  # the children hold their ends now
                os.close(r)
                os.close(w)
        self.compile_s = [0.0] * nd  # the last run's

    @property
    def pids(self) -> list[int]:
        """The device processes' ids, device by device."""
        return [dev.proc.pid for dev in self._devices]

    def __enter__(self) -> LocalDevices:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for dev in self._devices:
            dev.close()
        self._devices = []

    def run(
        self, p: Pipeline, placement: Sequence[int], rounds: int = 7, *, schedule: Schedule | None = None,
        warmup: int = 2, seed: int = 0, timeout_s: float = 300.0,
    ) -> Execution:  # fmt: skip
        """See `run_placement`. A run that failed on the devices closes them (one may hold a half-read
        message); refused input and wrong outputs leave them usable."""
        if not self._devices:
            raise ExecutionError("the local devices were closed")
        if rounds < 1:
            raise ExecutionError(f"rounds: expected at least 1, got {rounds}")
        g = from_pipeline(p)
        sched = _check(p, g, self.profile, placement, schedule)  # bad input is refused before the devices hear of it
        try:
            return self._run(p, g, [int(d) for d in placement], rounds, sched, warmup, seed, timeout_s)
        except VerificationError:
            raise  # every round ran to its end and the devices let go of the block: they stay usable
        except BaseException:
            self.close()
            raise

    def _run(
        self, p: Pipeline, g: OpGraph, place: list[int], rounds: int, sched: Schedule, warmup: int, seed: int, timeout_s: float
    ) -> Execution:
        prof = self.profile
        inputs, refs, method = _reference(p, seed)
        layout, size = _layout(p, g, place)
        deadline = time.monotonic() + timeout_s
        shm = shared_memory.SharedMemory(create=True, size=size)
        try:
            for i in p.inputs:
                off, shape = layout[f"in:{i.name}"]
                np.ndarray(tuple(shape), np.float32, shm.buf, off)[...] = inputs[i.name]
            for d, dev in enumerate(self._devices):
                dev.send({
                    "setup": {
                        "pipeline": p.to_json(), "schedule": sched.to_json(), "order": [n.name for n in g.nodes],
                        "placement": place, "device": d, "core": self.cores[d], "nice": self.nice, "realtime": self.realtime,
                        "shm": shm.name, "layout": layout,
                        "in_fds": {str(a): r for (a, b), (r, _) in self._ends.items() if b == d},
                        "out_fds": {str(b): w for (a, b), (_, w) in self._ends.items() if a == d},
                    }
                })  # fmt: skip
            for d, dev in enumerate(self._devices):
                self.compile_s[d] = float(dev.receive(deadline, f"device {prof.devices[d].name} (compiling)")["compile_s"])
            outs = {o: np.ndarray(tuple(layout[f"out:{o}"][1]), np.float32, shm.buf, layout[f"out:{o}"][0]) for o in p.outputs}

            def one_round(what: str) -> list[ExecEvent]:
                for o in outs.values():
                    o[...] = np.nan  # a stage that did not write its output cannot pass as having run
                t0 = time.monotonic_ns() + int(START_DELAY_S * 1e9)
                for dev in self._devices:
                    dev.send({"t0_ns": t0})
                evs = []
                for d, dev in enumerate(self._devices):
                    for kind, node, peer, start, end, nbytes in dev.receive(deadline, f"device {prof.devices[d].name} ({what})")["events"]:
                        evs.append(ExecEvent(KINDS[kind], d, node, peer, start / 1e9, end / 1e9, nbytes))
                return evs

            def release() -> None:
                for dev in self._devices:  # let go of the block before it is unlinked
                    dev.send({"release": True})
                for d, dev in enumerate(self._devices):
                    dev.receive(deadline + 10, f"device {prof.devices[d].name} (releasing)")

            def verify(what: str) -> R.Verification:
                v = R.verify(p, outs, refs, method)
                if not v.ok:
                    release()
                    raise VerificationError(f"{p.name!r} placed {place} ({what}): outputs do not match the reference: {v.message}")
                return v

            for k in range(max(1, warmup)):
                one_round(f"warm-up round {k + 1}")
                if k == 0:
                    verify("first warm-up round")
            timed = [one_round(f"round {k + 1}") for k in range(rounds)]
            v = verify("last round")
            outs.clear()
            release()
        finally:
            try:
                shm.close()
            except BufferError:  # a failed run's views are still alive; the memory goes with them
                pass
            shm.unlink()
        return _summary(p, g, prof, place, timed, self.compile_s, v)


def run_placement(
    p: Pipeline,
    placement: Sequence[int],
    rounds: int = 7,
    *,
    profile: DeviceProfile | None = None,
    schedule: Schedule | None = None,
    warmup: int = 2,
    seed: int = 0,
    timeout_s: float = 300.0,
) -> Execution:
    """Run `p` for real with stage k of `graph.from_pipeline(p)` on device `placement[k]` of the
    local profile: `rounds` timed rounds after `warmup` (at least 1) untimed ones, outputs
    verified against the reference. Starts and ends the device processes (`LocalDevices`
    keeps them for many placements)."""
    prof = profile if profile is not None else local_profile()
    _check(p, from_pipeline(p), prof, placement, schedule)  # a bad placement is refused before any process starts
    with LocalDevices(prof) as devices:
        return devices.run(p, placement, rounds, schedule=schedule, warmup=warmup, seed=seed, timeout_s=timeout_s)


def _summary(
    p: Pipeline, g: OpGraph, prof: DeviceProfile, place: list[int], timed: list[list[ExecEvent]], compile_s: list[float], v: R.Verification
) -> Execution:
    spans = [max(e.end_s for e in evs) for evs in timed]
    med = statistics.median(spans)
    k_med = min(range(len(spans)), key=lambda k: abs(spans[k] - med))
    nd = len(prof.devices)

    def per_device(evs: list[ExecEvent], kinds: tuple[str, ...]) -> list[float]:
        tot = [0.0] * nd
        for e in evs:
            if e.kind in kinds:
                tot[e.device] += e.end_s - e.start_s
        return tot

    busy = [per_device(evs, ("compute", "send")) for evs in timed]
    comp = [per_device(evs, ("compute",)) for evs in timed]
    stage_s = []
    for evs in timed:
        row = [0.0] * len(g.nodes)
        for e in evs:
            if e.kind == "compute":
                row[e.node] = e.end_s - e.start_s
        stage_s.append(tuple(row))
    sends = [e for e in timed[k_med] if e.kind == "send"]
    return Execution(
        p.name, prof.name, tuple(d.name for d in prof.devices), tuple(place), len(timed), med, min(spans), max(spans), tuple(spans),
        tuple(statistics.median(b[d] for b in busy) for d in range(nd)), tuple(statistics.median(c[d] for c in comp) for d in range(nd)),
        len(sends), sum(e.bytes for e in sends), tuple(sorted(timed[k_med], key=lambda e: (e.start_s, e.device))), v.ok,
        v.max_abs_err, v.max_rel_err, tuple(compile_s), host_fingerprint(), target_string(),
        accelerator_note(), tuple(stage_s),
    )  # fmt: skip


# --- measured costs ----------------------------------------------------------------------
def measured_costs(
    p: Pipeline, graph: OpGraph, profile: DeviceProfile, rounds: int = 7, *, devices: LocalDevices | None = None
) -> CostTable:
    """Seconds per stage on each measured device of `profile`: the whole pipeline run on that one
    pinned core, each stage's median compute time plus the executor's share of dispatch between
    stages (the single-device makespan minus the stages' sum, spread evenly); a simulated device
    of a mixed profile gets its roofline column. Cached in memory per pipeline and profile.
    `devices`: local devices already started (and their compiled stages) to measure on."""
    names = tuple(n.name for n in graph.nodes)
    if names != tuple(p.stage_order):
        raise ExecutionError(f"measured costs: graph {graph.name!r} is not the stage graph of pipeline {p.name!r} (from_pipeline)")
    key = (p.content_hash(), profile.name, tuple(d.name for d in profile.devices))
    if key in _COSTS:
        return _COSTS[key]
    measured = [d for d, dev in enumerate(profile.devices) if dev.measured]
    runs: dict[int, Execution] = {}
    if measured:
        local = devices if devices is not None else LocalDevices()
        try:
            for d in measured:  # a measured device is one of this machine's, by name
                k = local.profile.index(profile.devices[d].name)
                runs[d] = local.run(p, [k] * len(names), rounds)
        finally:
            if devices is None:
                local.close()
    table = costs_from_runs(graph, profile, {d: [ex] for d, ex in runs.items()})
    _COSTS[key] = table
    return table


def costs_from_runs(graph: OpGraph, profile: DeviceProfile, runs: dict[int, list[Execution]]) -> CostTable:
    """The cost table from single-device runs (`runs[d]`: runs of the whole graph on device d): per
    stage the median compute time over all their rounds, plus the executor's dispatch between
    stages (makespan minus the stages' sum, median over runs, spread evenly over the stages); a
    device without runs gets its roofline column."""
    n = len(graph.nodes)
    roof = roofline_costs(graph, profile)
    cols: list[tuple[float, ...]] = []
    for d in range(len(profile.devices)):
        if not runs.get(d):
            cols.append(tuple(row[d] for row in roof.seconds))
            continue
        for ex in runs[d]:
            if len(set(ex.placement)) != 1 or len(ex.placement) != n:
                raise ExecutionError(f"cost of device {d}: a run placed {list(ex.placement)} is not the whole graph on one device")
        stage_rounds = [r for ex in runs[d] for r in ex.stage_s]
        per_stage = [statistics.median(r[k] for r in stage_rounds) for k in range(n)]
        overhead = statistics.median(max(0.0, ex.makespan_s - ex.compute_s[ex.placement[0]]) for ex in runs[d]) / max(1, n)
        cols.append(tuple(s + overhead for s in per_stage))
    return CostTable(
        tuple(tuple(c[k] for c in cols) for k in range(n)),
        tuple("measured" if runs.get(d) else "roofline" for d in range(len(profile.devices))),
    )


def with_links(profile: DeviceProfile, latency_s: float, bandwidth: float) -> DeviceProfile:
    """`profile` with every link's figures replaced (for calibrating the local profile's links from a measurement)."""
    return replace(profile, links=tuple(Link(lk.a, lk.b, latency_s, bandwidth) for lk in profile.links))
