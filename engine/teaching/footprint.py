"""Footprints: per iteration of a chosen loop of a stage, the region of each producer read and
the storage allocated there, beside this machine's cache sizes (read from the OS, never
guessed), so that locality is visible.

The regions are the loop-nest model's (`LoopNest.region_at`: inlined stages substituted,
producers computed inside the loop included), evaluated like the rest of the model at the
first iteration.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from .. import loopnest as LN
from ..ir import BYTES_PER_ELEMENT, Pipeline
from ..schedule import Schedule

CACHE_DIR = Path("/sys/devices/system/cpu/cpu0/cache")


class FootprintError(ValueError):
    """A stage or loop that has no footprint; the message names it."""


@dataclass(frozen=True)
class CacheLevel:
    level: int  # 1, 2, 3
    type: str  # "Data", "Instruction", "Unified"
    size_bytes: int | None  # None: the OS does not say
    source: str  # where the figure comes from: the sysfs file, "sysconf", or "unknown"

    @property
    def label(self) -> str:
        kind = {"Data": "d", "Instruction": "i"}.get(self.type, "")
        return f"L{self.level}{kind}"


@dataclass(frozen=True)
class Read:
    """The region of one source (input or stage) read per iteration of the loop."""

    source: str
    kind: str  # "input" or the source's placement: "root", "at", "inline"
    region: tuple[int, ...]  # extent per dim
    elements: int
    bytes: int


@dataclass(frozen=True)
class Stored:
    """A buffer allocated at the loop or inside it (the stage's own, or a producer's)."""

    stage: str
    level: str  # "root" or "stage.loop" where it is allocated
    shape: tuple[int, ...]
    elements: int
    bytes: int


@dataclass(frozen=True)
class Footprint:
    stage: str
    loop: str | None  # None: one whole realization of the stage
    iterations: int  # how many times the loop body runs per realization of the stage (1 for None)
    reads: tuple[Read, ...]
    stored: tuple[Stored, ...]
    caches: tuple[CacheLevel, ...]

    @property
    def read_bytes(self) -> int:
        return sum(r.bytes for r in self.reads)

    @property
    def stored_bytes(self) -> int:
        return sum(s.bytes for s in self.stored)

    def fits(self) -> str | None:
        """The smallest data cache level the reads fit in ("L1d", "L2", ...), None if none
        does or the sizes are unknown."""
        for c in sorted((c for c in self.caches if c.type != "Instruction" and c.size_bytes), key=lambda c: c.level):
            if self.read_bytes <= (c.size_bytes or 0):
                return c.label
        return None


def _parse_size(text: str) -> int | None:
    t = text.strip().upper()
    mult = {"K": 1024, "M": 1024**2, "G": 1024**3}
    try:
        if t and t[-1] in mult:
            return int(t[:-1]) * mult[t[-1]]
        return int(t)
    except ValueError:
        return None


def cache_sizes(cache_dir: Path = CACHE_DIR) -> tuple[CacheLevel, ...]:
    """This machine's caches (of cpu0), from sysfs; else from `os.sysconf`; else one entry per
    level with size None ("unknown"). Never an invented figure."""
    out: list[CacheLevel] = []
    if cache_dir.is_dir():
        for d in sorted(cache_dir.glob("index*")):
            try:
                level = int((d / "level").read_text().strip())
                kind = (d / "type").read_text().strip()
                parsed = _parse_size((d / "size").read_text())
            except (OSError, ValueError):
                continue
            out.append(CacheLevel(level, kind, parsed, str(d / "size")))
    if out:
        return tuple(sorted(out, key=lambda c: (c.level, c.type)))
    names = (
        (1, "Data", "SC_LEVEL1_DCACHE_SIZE"),
        (1, "Instruction", "SC_LEVEL1_ICACHE_SIZE"),
        (2, "Unified", "SC_LEVEL2_CACHE_SIZE"),
        (3, "Unified", "SC_LEVEL3_CACHE_SIZE"),
    )
    for level, kind, name in names:
        size: int | None = None
        if name in os.sysconf_names:
            try:
                v = os.sysconf(name)
                size = v if v > 0 else None
            except (OSError, ValueError):
                size = None
        out.append(CacheLevel(level, kind, size, "sysconf" if size else "unknown"))
    return tuple(out)


def loop_levels(p: Pipeline, sched: Schedule, stage: str) -> list[str]:
    """The loops of `stage`'s final definition, outer to inner (what `footprint` accepts)."""
    nest = LN.build(p, sched)
    return [lp.name for lp in nest.placements[stage].loops]


def footprint(p: Pipeline, sched: Schedule, stage: str, loop: str | None, caches: tuple[CacheLevel, ...] | None = None) -> Footprint:
    """What one iteration of `stage`'s loop `loop` reads and allocates (None: one realization)."""
    nest = LN.build(p, sched)
    pl = nest.placements[stage]
    if pl.compute == "inline":
        raise FootprintError(f"stage {stage!r} is inlined: it has no loops of its own")
    names = [lp.name for lp in pl.loops]
    if loop is not None and loop not in names:
        raise FootprintError(f"stage {stage!r} has no loop {loop!r} (its loops are {', '.join(names)})")
    k = -1 if loop is None else names.index(loop)
    iterations = math.prod(lp.extent for lp in pl.loops[: k + 1])
    # Sources of the stage and of the producers computed at its loops inside this one (the
    # engine's region of each includes what those producers read).
    inside = [q for q, qp in nest.placements.items() if qp.compute == "at" and qp.at[0] == stage and names.index(qp.at[1]) >= k]  # type: ignore[index]
    sources = dict.fromkeys(nest.effective_sources(stage))
    for q in inside:
        sources.update(dict.fromkeys(nest.effective_sources(q)))
    reads = []
    for src in sources:
        region = nest.region_at(src, stage, loop)
        kind = "input" if src in p.input_map else nest.placements[src].compute
        n = math.prod(region)
        reads.append(Read(src, kind, region, n, n * BYTES_PER_ELEMENT))
    # Buffers allocated at this loop or inside it: producers stored (or computed) at the stage's loops there.
    stored = []
    for q, qp in nest.placements.items():
        if qp.compute != "at":
            continue
        cons, at_loop = qp.store or qp.at  # type: ignore[misc]
        if cons == stage and names.index(at_loop) >= k:
            n = math.prod(qp.allocation)
            stored.append(Stored(q, f"{stage}.{at_loop}", qp.allocation, n, n * BYTES_PER_ELEMENT))
    return Footprint(stage, loop, iterations, tuple(reads), tuple(stored), cache_sizes() if caches is None else caches)
