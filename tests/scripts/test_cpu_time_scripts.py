"""The scripts that time by this thread's CPU time (time.thread_time) run Halide on that
thread alone: Halide's worker threads' time would go uncounted."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "args",
    [["scripts/matmul_cpu_time.py", "1"], ["scripts/conv_ab.py", "--clock", "cpu", "--rounds", "1", "pw:8:8:8", "."]],
)
def test_a_cpu_time_script_refuses_more_than_one_halide_thread(args: list[str]) -> None:
    env = dict(os.environ, HL_NUM_THREADS="4")
    res = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode != 0
    assert "HL_NUM_THREADS=4" in res.stderr and "this thread's CPU time" in res.stderr, res.stderr


def test_the_default_is_one_thread_and_recorded() -> None:
    code = "import runpy, os; g = runpy.run_path('scripts/matmul_cpu_time.py'); print(os.environ['HL_NUM_THREADS'], g['HL_THREADS'])"
    env = {k: v for k, v in os.environ.items() if k != "HL_NUM_THREADS"}
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["1", "1"]
