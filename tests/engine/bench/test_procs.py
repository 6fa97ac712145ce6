"""The process table the benchmarks read (engine/bench/procs.py), against what the OS says of
this process and of a child started here."""

import os
import subprocess
import sys
import time

from engine.bench import fuzz
from engine.bench.procs import processes


def test_processes_name_this_process_its_cpu_and_a_live_child():
    t = time.process_time()
    while time.process_time() - t < 0.05:  # some CPU time of our own to see
        pass
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        procs = processes()
        assert procs is not None
        me = procs[os.getpid()]
        assert me.ppid == os.getppid() and me.state in "RS"
        own = os.times()
        assert abs(me.cpu_s - (own.user + own.system)) < 0.1  # seconds, not clock ticks
        assert procs[child.pid].ppid == os.getpid() and "time.sleep(30)" in procs[child.pid].cmdline
        n, cmds = fuzz.live_children()
        assert n == len(cmds) and any("time.sleep(30)" in c for c in cmds)
    finally:
        child.kill()
        child.wait()
    assert all("time.sleep(30)" not in c for c in fuzz.live_children()[1])
