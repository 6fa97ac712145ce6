"""What this session knows about the open pipeline's schedules: every distinct schedule
seen (a variant, numbered in order of first appearance), its prediction, and its
measurement once there is one; plus the baselines (the default schedule and Halide's
Adams2019) that speedups are quoted against. Views read it; only the main window writes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal

from engine.costmodel import Prediction, short_label
from engine.ir import Pipeline
from engine.measure import Measurement, autoscheduler_key
from engine.schedule import Schedule, default_schedule

if TYPE_CHECKING:
    from engine.bench.peers import PeerTiming

PREDICTED_LABEL = "predicted (analytic estimate)"  # the default model's; see predicted_label()


def predicted_label(prediction: Prediction | None) -> str:
    """The legend name of a prediction's series: which model predicted it."""
    return f"predicted ({short_label(prediction.model)})" if prediction is not None else PREDICTED_LABEL


@dataclass
class StageTimes:
    """Per-stage milliseconds and where they come from ("measured" or PREDICTED_LABEL)."""

    ms: dict[str, float]
    source: str

    @property
    def total(self) -> float:
        return sum(self.ms.values())


@dataclass
class Variant:
    number: int  # 1, 2, ...: the x of the history plot
    hash: str
    schedule: Schedule
    label: str  # what made it: "hand", "blur_x: add split(...)", ...
    spec: str  # the document's schedule spec when it was made (default, hand, a file)
    predicted_ms: float | None
    measurement: Measurement | None = None
    invalid: str = ""  # why the schedule no longer applies to the pipeline (a project from an older version), else ""
    raw: dict[str, Any] | None = None  # the saved JSON of a schedule that could not even be read (saved back as it was)

    @property
    def measured_ms(self) -> float | None:
        m = self.measurement
        return m.median_ms if m is not None and m.ok else None


class SessionHistory(QObject):
    changed = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.pipeline_hash = ""
        self.default_hash = ""
        self.variants: list[Variant] = []
        self._by_hash: dict[str, Variant] = {}
        self.measurements: dict[str, Measurement] = {}  # schedule hash (or autoscheduler_key("Adams2019")) -> latest
        self.cancelled: set[str] = set()  # schedule hashes whose last measurement was cancelled
        # ONNX Runtime / PyTorch timed in one run with a schedule's fresh measurement
        # (`peers_of`: that measurement): peers are compared with what was measured beside them.
        self.peers: list[PeerTiming] = []
        self.peers_of: Measurement | None = None

    def reset(self, p: Pipeline | None) -> None:
        self.pipeline_hash = p.content_hash() if p is not None else ""
        self.default_hash = default_schedule(p).content_hash() if p is not None else ""
        self.variants.clear()
        self._by_hash.clear()
        self.measurements.clear()
        self.cancelled.clear()
        self.peers, self.peers_of = [], None
        self.changed.emit()

    def forget_measurements(self) -> None:
        """The stored results were cleared: the session forgets its measurements too (variants
        and predictions stay), so nothing shown comes from a deleted result."""
        self.measurements.clear()
        self.cancelled.clear()
        for v in self.variants:
            v.measurement = None
        self.peers, self.peers_of = [], None
        self.changed.emit()

    def attach_peers(self, m: Measurement, timings: list[PeerTiming]) -> None:
        """Peers timed beside measurement `m` of the open pipeline (others are ignored)."""
        if m.pipeline_hash != self.pipeline_hash:
            return
        self.peers, self.peers_of = list(timings), m
        self.attach(m)  # emits changed

    def restore(self, variants: list[Variant], measurements: list[Measurement]) -> None:
        """Put back a saved session (after `reset` for its pipeline): variants in order,
        then the measurements that belong to this pipeline."""
        for v in variants:
            if v.hash not in self._by_hash:
                v.number = len(self.variants) + 1
                self.variants.append(v)
                self._by_hash[v.hash] = v
        for m in measurements:
            if m.pipeline_hash == self.pipeline_hash:
                self.measurements[m.schedule_hash] = m
                if m.schedule_hash in self._by_hash:
                    self._by_hash[m.schedule_hash].measurement = m
        self.changed.emit()

    def record(self, schedule: Schedule, label: str, spec: str, prediction: Prediction | None) -> Variant:
        """The variant for this schedule, added if new."""
        h = schedule.content_hash()
        v = self._by_hash.get(h)
        if v is None:
            v = Variant(len(self.variants) + 1, h, schedule.copy(), label, spec, prediction.total_ms if prediction else None)
            v.measurement = self.measurements.get(h)
            self.variants.append(v)
            self._by_hash[h] = v
            self.changed.emit()
        return v

    def variant(self, schedule_hash: str) -> Variant | None:
        return self._by_hash.get(schedule_hash)

    def attach(self, m: Measurement, cancelled: bool = False) -> None:
        """Keep a finished measurement of the open pipeline (others are ignored)."""
        if m.pipeline_hash != self.pipeline_hash:
            return
        if cancelled:
            self.cancelled.add(m.schedule_hash)
        else:
            self.cancelled.discard(m.schedule_hash)
            self.measurements[m.schedule_hash] = m
            v = self._by_hash.get(m.schedule_hash)
            if v is not None:
                v.measurement = m
        self.changed.emit()

    def measurement(self, schedule_hash: str) -> Measurement | None:
        return self.measurements.get(schedule_hash)

    def baseline_ms(self, which: str) -> float | None:
        """Median of a verified baseline measurement: 'default' or 'Adams2019'."""
        m = self.measurements.get(self.default_hash if which == "default" else autoscheduler_key(which))
        return m.median_ms if m is not None and m.ok and m.verified else None

    def stage_times(self, schedule_hash: str, prediction: Prediction | None) -> StageTimes | None:
        """Measured per-stage times of this schedule when known, else the prediction's."""
        m = self.measurements.get(schedule_hash)
        if m is not None and m.ok and m.stages and sum(m.stages.values()) > 0:
            return StageTimes(dict(m.stages), "measured")
        if prediction is not None:
            return StageTimes(dict(prediction.stages), predicted_label(prediction))
        return None
