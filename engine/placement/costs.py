"""Seconds per node and device: the roofline here; measured costs come from `execute`.

A roofline cost is a prediction from a device's published figures, so every table says per
device where its figures come from ("roofline" or "measured").
"""

from __future__ import annotations

from dataclasses import dataclass

from .devices import DeviceProfile
from .graph import OpGraph

__all__ = ["CostTable", "roofline_costs"]


@dataclass(frozen=True)
class CostTable:
    seconds: tuple[tuple[float, ...], ...]  # [node][device]
    source: tuple[str, ...]  # per device: "measured" | "roofline"

    def __post_init__(self) -> None:
        for k, row in enumerate(self.seconds):
            if len(row) != len(self.source):
                raise ValueError(f"cost table: node {k} has {len(row)} costs for {len(self.source)} devices")
            for d, s in enumerate(row):
                if not s >= 0.0 or s == float("inf"):  # also NaN
                    raise ValueError(f"cost table: node {k} on device {d}: {s!r} is not a finite time >= 0")


def roofline_costs(g: OpGraph, prof: DeviceProfile) -> CostTable:
    """max(flops / peak FLOP/s, bytes / memory bandwidth) plus the device's per-stage launch time."""
    rows = tuple(tuple(max(n.flops / d.peak_flops, n.bytes_accessed / d.mem_bandwidth) + d.launch_s for d in prof.devices) for n in g.nodes)
    return CostTable(rows, tuple("roofline" for _ in prof.devices))
