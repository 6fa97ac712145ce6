"""app/background.py, the one off-GUI-thread helper of the measurement queue, the search
and the Stmt loading: results, exceptions and progress arrive on the GUI thread in order,
cancel and latest-only drop what no longer matters, shutdown closes on the worker thread."""

import threading

import pytest
from pytestqt.qtbot import QtBot

from app.background import Background, Job, Outcome


@pytest.fixture
def background(qtbot: QtBot):
    b = Background("test")
    yield b
    b.shutdown(timeout_s=10)


def test_value_and_progress_arrive_on_the_gui_thread_in_order(qtbot: QtBot, background: Background) -> None:
    gui = threading.get_ident()
    seen: list[object] = []
    threads: list[int] = []

    def work(job: Job) -> int:
        threads.append(threading.get_ident())
        for i in range(3):
            job.report(i)
        return 42

    background.submit(work, lambda out: seen.append(out), lambda rec: (seen.append(rec), threads.append(threading.get_ident())))
    assert seen == []  # never inside submit, even when the job is quick
    qtbot.waitUntil(lambda: len(seen) == 4, timeout=5000)
    assert seen[:3] == [0, 1, 2]
    out = seen[3]
    assert isinstance(out, Outcome) and out.value == 42 and out.error is None and not out.cancelled
    assert threads[0] != gui and all(t == gui for t in threads[1:])
    assert not background.busy


def test_an_exception_is_delivered_and_the_thread_keeps_working(qtbot: QtBot, background: Background) -> None:
    outs: list[Outcome] = []

    def fail(job: Job) -> None:
        raise ValueError("bad schedule")

    background.submit(fail, outs.append)
    background.submit(lambda job: "next", outs.append)
    qtbot.waitUntil(lambda: len(outs) == 2, timeout=5000)
    assert isinstance(outs[0].error, ValueError) and outs[0].error_text == "ValueError: bad schedule" and outs[0].value is None
    assert outs[1].value == "next" and outs[1].error is None


def test_cancel_before_start_never_runs_and_a_running_job_sees_its_flag(qtbot: QtBot, background: Background) -> None:
    started, release = threading.Event(), threading.Event()
    ran: list[str] = []
    outs: list[Outcome] = []

    def first(job: Job) -> str:
        started.set()
        release.wait(5)
        ran.append("first")
        return "partial" if job.cancel.is_set() else "full"

    a = background.submit(first, outs.append)
    b = background.submit(lambda job: ran.append("second"), outs.append)
    assert started.wait(5)
    background.cancel(b.id)
    background.cancel(a.id)
    release.set()
    qtbot.waitUntil(lambda: len(outs) == 2, timeout=5000)
    assert ran == ["first"]
    assert outs[0].id == a.id and outs[0].value == "partial" and outs[0].cancelled
    assert outs[1].id == b.id and outs[1].cancelled and outs[1].value is None


def test_latest_only_delivers_the_newest_and_skips_the_waiting(qtbot: QtBot) -> None:
    b = Background("latest", latest_only=True)
    started, release = threading.Event(), threading.Event()
    ran: list[int] = []
    outs: list[Outcome] = []

    def job_n(n: int):
        def work(job: Job) -> int:
            if n == 0:
                started.set()
                release.wait(5)
            ran.append(n)
            return n

        return work

    b.submit(job_n(0), outs.append)
    assert started.wait(5)  # 0 runs while the others come
    for n in range(1, 4):
        b.submit(job_n(n), outs.append)
    release.set()
    qtbot.waitUntil(lambda: not b.busy, timeout=5000)
    assert ran == [0, 3]  # 1 and 2 were superseded while waiting
    assert [o.value for o in outs] == [3]
    assert b.shutdown(timeout_s=10)


def test_shutdown_runs_finally_on_the_worker_thread_and_delivers_nothing_after(qtbot: QtBot) -> None:
    b = Background("closing")
    started = threading.Event()
    where: list[int] = []
    outs: list[Outcome] = []

    def long(job: Job) -> str:
        started.set()
        job.cancel.wait(5)
        where.append(threading.get_ident())
        return "stopped"

    b.submit(long, outs.append)
    assert started.wait(5) and b.alive
    assert b.shutdown(timeout_s=10, finally_=lambda: where.append(threading.get_ident()))
    assert not b.alive and len(where) == 2 and where[0] == where[1] != threading.get_ident()
    qtbot.wait(50)
    assert outs == []
    with pytest.raises(RuntimeError, match="closing background thread is shut down"):
        b.submit(long)
