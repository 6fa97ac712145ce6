"""Event-driven simulation of a placed graph, with Baechi's semantics (Jeon et al.).

- Each device runs one node at a time; of the nodes whose inputs are all on the device, it
  starts the one with the lowest priority (by default the topological index: the order the
  graph lists them).
- Each device has one send and one receive channel. When a node finishes, its output is
  sent once to every other device that has a consumer of it (and cached there: further
  consumers on that device read the copy). A transfer starts when the tensor is ready, the
  sender's send channel and the receiver's receive channel are free, and takes the link's
  latency + bytes / bandwidth; transfers are served in the order they are requested. A
  device without a copy engine (`Device.copy_on_core`: a CPU core) does the copy itself: it
  starts its next node only when its sends are done, and the send time counts as busy.
- Memory per device: the weights of the nodes placed there (resident throughout), plus live
  tensors: an output from its node's start until the last consumer on that device finished
  and its sends are done (a graph output stays to the end), a received copy from the start
  of its transfer until its last consumer there finished. A peak over a device's capacity
  makes the placement invalid, with the reason; the timing is still reported.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from .costs import CostTable
from .devices import DeviceProfile
from .graph import OpGraph

__all__ = ["Event", "Simulation", "simulate"]

_FINISH, _READY, _FREE = 0, 1, 2  # _FREE: a copy-on-core device done with its sends (index = device)


@dataclass(frozen=True)
class Event:
    kind: str  # "compute" | "transfer"
    resource: str  # device name, or "a->b" for a transfer over the link between a and b
    node: int  # the node computed, or the producer whose output is sent
    start_s: float
    end_s: float
    bytes: int = 0


@dataclass(frozen=True)
class Simulation:
    makespan_s: float
    busy_s: tuple[float, ...]  # per device
    transfer_bytes: int
    transfer_s: float  # the transfers' durations, summed
    peak_memory_bytes: tuple[int, ...]  # per device
    valid: bool
    reason: str  # why invalid ("" when valid)
    timeline: tuple[Event, ...]
    start_s: tuple[float, ...] = ()  # per node
    finish_s: tuple[float, ...] = ()  # per node
    transfers: int = 0  # how many tensors crossed a link


@lru_cache(maxsize=64)
def _link_tables(prof: DeviceProfile) -> tuple[tuple[tuple[float, ...], ...], tuple[tuple[float, ...], ...]]:
    """Latency and 1/bandwidth per ordered device pair (0 on the diagonal), looked up once per profile."""
    n = len(prof.devices)
    lat = tuple(tuple(prof.link(a, b).latency_s if a != b else 0.0 for b in range(n)) for a in range(n))
    inv = tuple(tuple(1.0 / prof.link(a, b).bandwidth if a != b else 0.0 for b in range(n)) for a in range(n))
    return lat, inv


def check_placement(g: OpGraph, prof: DeviceProfile, placement: Sequence[int]) -> list[int]:
    """The placement as a list, or ValueError naming the first entry that is not a device index."""
    pl = list(placement)
    if len(pl) != len(g.nodes):
        raise ValueError(f"placement of {g.name!r}: {len(pl)} entries for {len(g.nodes)} nodes")
    n_dev = len(prof.devices)
    if not pl or (set(map(type, pl)) == {int} and 0 <= min(pl) and max(pl) < n_dev):
        return pl  # the common case, checked at C speed
    for i, d in enumerate(pl):
        if isinstance(d, bool) or not isinstance(d, int) or not 0 <= d < n_dev:
            raise ValueError(f"placement of {g.name!r}: node {i} ({g.nodes[i].name}) on {d!r}, not a device index 0..{n_dev - 1}")
    return pl


def simulate(
    g: OpGraph,
    prof: DeviceProfile,
    costs: CostTable,
    placement: Sequence[int],
    *,
    priority: Sequence[float] | None = None,
    timeline: bool = True,
) -> Simulation:
    """Simulate `placement` (a device index per node). `priority` (lower first) orders the ready
    nodes of a device, by default the topological index; `timeline=False` skips building the
    events (what a training loop that only reads the makespan wants)."""
    pl = check_placement(g, prof, placement)
    n, n_dev = len(g.nodes), len(prof.devices)
    if len(costs.seconds) != n or len(costs.source) != n_dev:
        raise ValueError(f"cost table is {len(costs.seconds)} nodes x {len(costs.source)} devices, the problem {n} x {n_dev}")
    prio: Sequence[float] = range(n) if priority is None else priority
    if len(prio) != n:
        raise ValueError(f"priority: {len(prio)} entries for {n} nodes")
    lat, inv_bw = _link_tables(prof)
    copies = [dev.copy_on_core for dev in prof.devices]
    send_busy = [0.0] * n_dev  # time copy-on-core devices spent sending
    secs = costs.seconds
    preds, succs, nodes = g.all_preds, g.all_succs, g.nodes

    remaining = [len(p) for p in preds]
    ready_at = [0.0] * n
    start = [0.0] * n
    finish = [0.0] * n
    send_free = [0.0] * n_dev
    recv_free = [0.0] * n_dev
    running = [False] * n_dev
    queues: list[list[tuple[float, int]]] = [[] for _ in range(n_dev)]
    transfers: list[tuple[int, int, int, float, float]] = []  # (producer, src, dst, start, end)
    moved_bytes = 0
    moved_s = 0.0
    events: list[tuple[float, int, int]] = [(0.0, _READY, i) for i in range(n) if not preds[i]]
    heapq.heapify(events)
    push, pop = heapq.heappush, heapq.heappop

    while events:
        now = events[0][0]
        touched: list[int] = []
        while events and events[0][0] <= now:
            _, kind, i = pop(events)
            if kind == _FREE:
                running[i] = False
                touched.append(i)
                continue
            d = pl[i]
            touched.append(d)
            if kind == _READY:
                push(queues[d], (prio[i], i))
                continue
            running[d] = False
            remote: dict[int, list[int]] = {}
            for c in succs[i]:
                dc = pl[c]
                if dc != d:
                    remote.setdefault(dc, []).append(c)
                    continue
                if ready_at[c] < now:
                    ready_at[c] = now
                remaining[c] -= 1
                if not remaining[c]:
                    push(events, (ready_at[c], _READY, c))
            if remote:
                size = nodes[i].output_bytes
                sent_at = now
                for dc, consumers in remote.items():
                    t0 = max(now, send_free[d], recv_free[dc])
                    t1 = t0 + lat[d][dc] + size * inv_bw[d][dc]
                    send_free[d] = recv_free[dc] = t1
                    sent_at = t1
                    transfers.append((i, d, dc, t0, t1))
                    moved_bytes += size
                    moved_s += t1 - t0
                    for c in consumers:
                        if ready_at[c] < t1:
                            ready_at[c] = t1
                        remaining[c] -= 1
                        if not remaining[c]:
                            push(events, (ready_at[c], _READY, c))
                if copies[d]:  # the core copies: it starts nothing else before its sends are done
                    running[d] = True
                    send_busy[d] += sent_at - now
                    push(events, (sent_at, _FREE, d))
        for d in sorted(set(touched)) if len(touched) > 1 else touched:
            if not running[d] and queues[d]:
                _, i = pop(queues[d])
                start[i] = now
                finish[i] = now + secs[i][d]
                running[d] = True
                push(events, (finish[i], _FINISH, i))

    makespan = max(finish, default=0.0)
    busy = list(send_busy)
    for i, d in enumerate(pl):
        busy[d] += secs[i][d]
    peak = _peak_memory(g, pl, n_dev, start, finish, transfers, makespan)
    reason = ""
    for d, dev in enumerate(prof.devices):
        if peak[d] > dev.memory_bytes:
            reason = f"device {dev.name} needs {peak[d] / 1e6:.1f} MB at its peak, more than its {dev.memory_bytes / 1e6:.1f} MB"
            break
    names = [dev.name for dev in prof.devices]
    tl: tuple[Event, ...] = ()
    if timeline:
        comp = [Event("compute", names[pl[i]], i, start[i], finish[i]) for i in range(n)]
        sends = [Event("transfer", f"{names[s]}->{names[t]}", i, t0, t1, nodes[i].output_bytes) for i, s, t, t0, t1 in transfers]
        tl = tuple(sorted(comp + sends, key=lambda e: (e.start_s, e.kind, e.node)))
    return Simulation(
        makespan_s=makespan,
        busy_s=tuple(busy),
        transfer_bytes=moved_bytes,
        transfer_s=moved_s,
        peak_memory_bytes=tuple(peak),
        valid=not reason,
        reason=reason,
        timeline=tl,
        start_s=tuple(start),
        finish_s=tuple(finish),
        transfers=len(transfers),
    )


def _peak_memory(
    g: OpGraph,
    pl: list[int],
    n_dev: int,
    start: list[float],
    finish: list[float],
    transfers: list[tuple[int, int, int, float, float]],
    makespan: float,
) -> list[int]:
    """Weights plus the peak of live tensors per device (a free at the same instant as an
    allocation counts first: the finished node's inputs are gone when the next one starts)."""
    nodes, succs = g.nodes, g.all_succs
    # When each copy of a tensor is last needed: the producer's own copy (per node), a received
    # copy ((producer, device) -> time).
    local = [0.0] * len(nodes)
    remote: dict[tuple[int, int], float] = {}
    for i in range(len(nodes)):
        d = pl[i]
        last = finish[i] if succs[i] else makespan  # a graph output is kept to the end
        for c in succs[i]:
            f = finish[c]
            if pl[c] == d:
                if f > last:
                    last = f
            elif remote.get((i, pl[c]), -1.0) < f:
                remote[(i, pl[c])] = f
        local[i] = last
    for i, _s, _t, _t0, t1 in transfers:
        if local[i] < t1:  # the sender's copy stays until it is sent
            local[i] = t1
    deltas: list[list[tuple[float, int, int]]] = [[] for _ in range(n_dev)]
    for i in range(len(nodes)):
        size = nodes[i].output_bytes
        dl = deltas[pl[i]]
        dl.append((start[i], 1, size))
        dl.append((local[i], 0, -size))
    for i, _s, t, t0, _t1 in transfers:
        size = nodes[i].output_bytes
        deltas[t].append((t0, 1, size))
        deltas[t].append((remote[(i, t)], 0, -size))
    weights = [0] * n_dev
    for i, d in enumerate(pl):
        weights[d] += nodes[i].weight_bytes
    peak = []
    for d in range(n_dev):
        live = best = 0
        for _, _, delta in sorted(deltas[d]):
            live += delta
            if live > best:
                best = live
        peak.append(weights[d] + best)
    return peak
