"""The floating-point environment compiled schedules run in: denormals flushed to zero.

A schedule that rounds a row up to whole vectors computes lanes past the valid region from
whatever the buffer held; when that memory happens to hold denormal floats, every FMA on them
takes a microcode assist (~100 cycles on Intel). The same schedule then ran 0.3 ms or 6 ms
depending on where malloc put its buffers (MobileNetV2's 192->64 projection at 14x14, Sapphire
Rapids, 1 thread), and a measurement was a draw. With the SSE control register's FTZ and DAZ
bits set (as inference runtimes and `torch.set_flush_denormal` do), denormal operands read
as zero and denormal results are flushed: the times are stable, and no valid output changes
by more than the smallest normal float (1.2e-38). SCHEDULE_EXPLORER_DENORMALS=keep leaves
IEEE denormals on (for a user who needs them). x86-64 Linux (glibc) only; elsewhere a no-op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import platform

FTZ_DAZ = 0x8040  # MXCSR bits: flush to zero (15), denormals are zero (6)
_MXCSR_OFFSET = 28  # glibc's x86-64 fenv_t: 28 bytes of x87 state, then the SSE MXCSR
_FENV_BYTES = 32


@functools.cache
def _libm() -> ctypes.CDLL | None:
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        return None
    name = ctypes.util.find_library("m")
    return ctypes.CDLL(name) if name else None


def _fenv() -> tuple[ctypes.Array[ctypes.c_ubyte], int] | None:
    """This thread's fenv_t and the MXCSR in it (None where it can't be read)."""
    lib = _libm()
    env = (ctypes.c_ubyte * _FENV_BYTES)()
    if lib is None or lib.fegetenv(env) != 0:
        return None
    return env, int.from_bytes(bytes(env[_MXCSR_OFFSET : _MXCSR_OFFSET + 4]), "little")


def mxcsr() -> int | None:
    """This thread's MXCSR (None where it can't be read)."""
    got = _fenv()
    return got and got[1]


def flush_denormals(flush: bool = True) -> bool:
    """Set (or with flush=False clear) FTZ and DAZ on the calling thread; threads it starts
    later inherit them, as Halide's thread pool does. False where not applied: not x86-64
    glibc, or SCHEDULE_EXPLORER_DENORMALS=keep (then nothing is set)."""
    lib = _libm()
    if lib is None or (flush and os.environ.get("SCHEDULE_EXPLORER_DENORMALS", "") == "keep"):
        return False
    got = _fenv()
    if got is None:
        return False
    env, bits = got
    bits = bits | FTZ_DAZ if flush else bits & ~FTZ_DAZ
    ctypes.memmove(ctypes.addressof(env) + _MXCSR_OFFSET, bits.to_bytes(4, "little"), 4)
    return lib.fesetenv(env) == 0 and ((mxcsr() or 0) & FTZ_DAZ == FTZ_DAZ) == flush
