"""Compiled schedules run with denormals flushed (engine/fpenv.py): the thread that makes a
runner gets FTZ/DAZ, a Halide pipeline then reads a denormal input as zero, and
SCHEDULE_EXPLORER_DENORMALS=keep leaves IEEE denormals alone."""

import platform
import threading

import numpy as np
import pytest

from engine import fpenv
from engine import halide_backend as HB
from engine.heuristic import heuristic_schedule
from engine.ops import Builder

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or platform.machine() != "x86_64", reason="FTZ/DAZ is set through glibc's x86-64 fenv_t"
)
TINY = np.float32(1e-39)  # a float32 denormal (the smallest normal is 1.18e-38)


def _scaled(x: np.ndarray) -> np.ndarray:
    """x * 1 through a compiled Halide pipeline, with a runner made on this thread."""
    b = Builder("scale")
    inp = b.input("x", x.shape)
    p = b.build([b.scale("y", inp, 1.0)])
    low = HB.lower(p, heuristic_schedule(p))
    low.compile()
    keep = low.bind({"x": x})
    outs = HB.output_arrays(p)
    low.runner(outs)()
    del keep
    return outs[p.outputs[0]]


def _in_thread(fn):
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("v", fn()))
    t.start()
    t.join()
    return got["v"]


def test_a_runner_s_thread_flushes_denormals_and_halide_code_reads_them_as_zero():
    def work():
        fpenv.flush_denormals(False)  # a thread without the bits
        assert (fpenv.mxcsr() or 0) & fpenv.FTZ_DAZ == 0
        out = _scaled(np.full((4, 16), TINY, np.float32))
        return out, fpenv.mxcsr()

    out, bits = _in_thread(work)
    assert bits & fpenv.FTZ_DAZ == fpenv.FTZ_DAZ
    assert np.all(out == 0.0)


def test_keep_leaves_ieee_denormals(monkeypatch):
    monkeypatch.setenv("SCHEDULE_EXPLORER_DENORMALS", "keep")

    def work():
        fpenv.flush_denormals(False)
        assert fpenv.flush_denormals() is False
        return _scaled(np.full((4, 16), TINY, np.float32)), fpenv.mxcsr()

    out, bits = _in_thread(work)
    assert bits & fpenv.FTZ_DAZ == 0
    assert np.all(out == TINY)
