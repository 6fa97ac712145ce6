"""This machine's processes as Linux /proc lists them: parent, state, CPU seconds, command line.

What the benchmarks read of the process table: `bench cluster` the CPU seconds of this
process's tree, `bench fuzz` the child processes a command left behind.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True)
class Proc:
    """One process: its parent, state letter (Z: a zombie), CPU seconds (user + system) of its
    own and of its reaped children, and its command line (arguments joined by spaces)."""

    pid: int
    ppid: int
    state: str
    cpu_s: float
    reaped_cpu_s: float
    cmdline: str


def processes() -> dict[int, Proc] | None:
    """Every process now, by pid (one that ends while it is read is left out); None where there
    is no /proc."""
    try:
        pids = [int(d) for d in os.listdir(PROC) if d.isdigit()]
    except OSError:
        return None
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    out: dict[int, Proc] = {}
    for pid in pids:
        try:
            stat = (PROC / str(pid) / "stat").read_text()
            cmd = (PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            # after the command name in parentheses (which may hold spaces): state, ppid, ..., utime stime cutime cstime
            fields = stat[stat.rindex(")") + 2 :].split()
            ut, st, cut, cst = (int(x) / tick for x in fields[11:15])
            out[pid] = Proc(pid, int(fields[1]), fields[0], ut + st, cut + cst, cmd)
        except (OSError, ValueError, IndexError):  # ended meanwhile
            continue
    return out
