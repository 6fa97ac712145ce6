"""Whole-model tuning off the GUI thread (as app/search/worker.py runs a search).

`tune_job` runs on the service's `Background` thread with its own runner (the app's cluster
setting: this machine or a Ray cluster) and its own Database connection: first ONNX
Runtime's time on the same machine (the line the end-to-end curve is drawn against,
verified), then engine.tuning.tune, whose `TuneProgress` records reach the GUI through the
helper's queued signal. Cancel kills the running trial's worker; the records written so
far stay in the database, so the next start resumes from them.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QObject, Signal

from engine import reference as R
from engine.bench.peers import check_peer, make_peers, time_peer
from engine.cluster import make_runner
from engine.database import Database
from engine.ir import Pipeline
from engine.tuning import TuneProgress, TuneResult, tune

from ..background import Background, Job, Outcome


@dataclass(frozen=True)
class TuneRequest:
    id: int
    pipeline: Pipeline  # a snapshot: the document may change while tuning runs
    budget_s: float
    trials: int
    cluster: str = "local"


@dataclass(frozen=True)
class PeerTime:
    """ONNX Runtime's verified time of the model (None: not an ONNX model, or it failed)."""

    peer: str
    ms: float | None
    verified: bool | None
    note: str = ""


def peer_time(p: Pipeline, threads: int) -> PeerTime:
    inputs = R.make_inputs(p, 0)
    peer = make_peers(p, inputs, threads).get("onnxruntime")
    if isinstance(peer, str) or peer is None:
        return PeerTime("onnxruntime", None, None, peer or "")
    t = time_peer(peer, 0.3)
    if not t.ok:
        return PeerTime("onnxruntime", None, None, t.error or "failed")
    refs, method = R.reference(p, inputs)
    return PeerTime("onnxruntime", t.median_ms, check_peer(peer, p, refs, method).ok)


def tune_job(req: TuneRequest, job: Job) -> TuneResult:
    p = req.pipeline
    runner = make_runner(req.cluster)
    db: Database | None = None
    try:
        db = Database()
        job.report(peer_time(p, runner.threads))
        return tune(p, runner, budget_s=req.budget_s, trials=req.trials, db=db, progress=job.report, cancel=job.cancel)
    finally:
        runner.close()
        if db is not None:
            db.close()


class TuneService(QObject):
    """GUI-thread handle: start, cancel, shutdown; signals carry the plain records."""

    peer = Signal(object)  # PeerTime
    progress = Signal(object)  # TuneProgress
    finished = Signal(object, str)  # TuneResult or None, error text ("" when it ran)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._background = Background("tuning", parent=self)
        self._job: Job | None = None
        self.current: TuneRequest | None = None
        self._next_id = 1
        self._closed = False

    @property
    def busy(self) -> bool:
        return self.current is not None

    def start(self, p: Pipeline, budget_s: float, trials: int, cluster: str = "local") -> TuneRequest:
        if self._closed:
            raise RuntimeError("the tuning service is shut down")
        if self.busy:
            raise RuntimeError("tuning is already running")
        req = TuneRequest(self._next_id, p, budget_s, trials, cluster)
        self._next_id += 1
        self.current = req
        self._job = self._background.submit(lambda job: tune_job(req, job), lambda out: self._done(req, out), self._report)
        return req

    def cancel(self) -> None:
        if self._job is not None:
            self._job.cancel.set()

    def shutdown(self, timeout_s: float = 30.0) -> bool:
        if self._closed:
            return True
        self._closed = True
        return self._background.shutdown(timeout_s)

    def _report(self, rec: object) -> None:
        if isinstance(rec, PeerTime):
            self.peer.emit(rec)
        elif isinstance(rec, TuneProgress):
            self.progress.emit(rec)

    def _done(self, req: TuneRequest, out: Outcome) -> None:
        if self.current is None or self.current.id != req.id:
            return
        self.current = None
        self._job = None
        self.finished.emit(out.value if out.error is None else None, out.error_text)
