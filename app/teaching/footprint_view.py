"""The footprint view (issue 18 item 2): for a loop level of the selected stage, what one
iteration of it reads from each source and what it allocates, in elements and bytes, with
a bar against each of this machine's data caches (sizes from the OS, never invented) and
the smallest cache it all fits in. Numbers come from engine.teaching.footprint."""

from __future__ import annotations

from PySide6.QtCore import Qt, Slot
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine.ir import Pipeline
from engine.schedule import Schedule, ScheduleError
from engine.teaching.footprint import CacheLevel, Footprint, FootprintError, cache_sizes, footprint, loop_levels

WHOLE = "one whole realization"
MUTED = "color: palette(placeholder-text)"


def human_bytes(n: int) -> str:
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} B"


def data_caches(caches: tuple[CacheLevel, ...]) -> list[CacheLevel]:
    """The caches data lives in (L1d, L2, L3), smallest first; instruction caches left out."""
    return sorted((c for c in caches if c.type != "Instruction"), key=lambda c: c.level)


def fit_text(n: int, caches: list[CacheLevel]) -> str:
    """'fits in L2' for the smallest cache `n` bytes fit in, else 'larger than L3'."""
    known = [c for c in caches if c.size_bytes is not None]
    if not known:
        return "cache sizes unknown"
    for c in known:
        if n <= (c.size_bytes or 0):
            return f"fits in {c.label}"
    return f"larger than {known[-1].label}"


class FootprintView(QWidget):
    """A loop-level chooser over a table: one row per read region and stored buffer."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.pipeline: Pipeline | None = None
        self.schedule: Schedule | None = None
        self.stage: str | None = None
        self.caches = cache_sizes()
        self.result: Footprint | None = None
        self.error = ""
        self.level = QComboBox()
        self.level.setObjectName("footprint_level")
        self.level.setToolTip("The loop whose one iteration is measured (outer to inner)")
        self.level.currentIndexChanged.connect(self.refresh)
        self.heading = QLabel("Select a stage to see what each of its loop levels reads and stores.")
        self.heading.setObjectName("footprint_heading")
        self.heading.setWordWrap(True)
        self.summary = QLabel()
        self.summary.setObjectName("footprint_summary")
        self.summary.setWordWrap(True)
        self.caches_label = QLabel(self._caches_text())
        self.caches_label.setObjectName("footprint_caches")
        self.caches_label.setWordWrap(True)
        self.caches_label.setStyleSheet(MUTED)
        self.table = QTableWidget()
        self.table.setObjectName("footprint_table")
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        row = QHBoxLayout()
        row.addWidget(QLabel("Per iteration of"))
        row.addWidget(self.level, 1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(self.heading)
        lay.addLayout(row)
        lay.addWidget(self.summary)
        lay.addWidget(self.table, 1)
        lay.addWidget(self.caches_label)

    def _caches_text(self) -> str:
        parts = [f"{c.label} {human_bytes(c.size_bytes) if c.size_bytes else 'unknown'}" for c in self.caches]
        src = next((c.source for c in self.caches), "unknown")
        return f"This machine's caches: {', '.join(parts) or 'unknown'} (from {src})"

    def set_target(self, pipeline: Pipeline | None, schedule: Schedule | None, stage: str | None) -> None:
        self.pipeline, self.schedule, self.stage = pipeline, schedule, stage
        keep = self.level.currentData()
        self.level.blockSignals(True)
        self.level.clear()
        self.level.addItem(WHOLE, None)
        if pipeline is not None and schedule is not None and stage is not None:
            try:
                for name in loop_levels(pipeline, schedule, stage):
                    self.level.addItem(f"{stage}.{name}", name)
            except (ScheduleError, KeyError) as exc:
                self.error = str(exc)
        k = self.level.findData(keep) if keep is not None else -1
        self.level.setCurrentIndex(k if k >= 0 else min(1, self.level.count() - 1))  # else the outermost loop
        self.level.blockSignals(False)
        self.refresh()

    def set_level(self, loop: str | None) -> bool:
        k = self.level.findData(loop)
        if k >= 0:
            self.level.setCurrentIndex(k)
        return k >= 0

    @Slot()
    def refresh(self) -> None:
        p, s, stage = self.pipeline, self.schedule, self.stage
        self.result, self.error = None, ""
        self.table.clear()
        self.table.setRowCount(0)
        if p is None or s is None or stage is None:
            self.heading.setText("Select a stage to see what each of its loop levels reads and stores.")
            self.summary.clear()
            return
        try:
            self.result = f = footprint(p, s, stage, self.level.currentData(), self.caches)
        except (FootprintError, ScheduleError) as exc:
            self.error = str(exc)
            self.heading.setText(self.error)
            self.summary.clear()
            return
        where = f"{stage}.{f.loop}" if f.loop else f"one realization of {stage}"
        self.heading.setText(f"{where}: runs {f.iterations} times per realization")
        caches = data_caches(f.caches)
        total = f.read_bytes + f.stored_bytes
        self.summary.setText(
            f"Per iteration: reads {human_bytes(f.read_bytes)}, allocates {human_bytes(f.stored_bytes)}; "
            f"together {human_bytes(total)}: {fit_text(total, caches)}"
        )
        headers = ["", "buffer", "region", "elements", "bytes", *[f"vs {c.label}" for c in caches], "fits"]
        self.table.setColumnCount(len(headers))
        self.table.setHorizontalHeaderLabels(headers)
        rows = [("read", r.source + f" ({r.kind})", r.region, r.elements, r.bytes) for r in f.reads]
        rows += [("stored", st.stage + f" at {st.level}", st.shape, st.elements, st.bytes) for st in f.stored]
        self.table.setRowCount(len(rows))
        for i, (what, name, region, elements, nbytes) in enumerate(rows):
            cells = [what, name, "×".join(map(str, region)), str(elements), human_bytes(nbytes)]
            for j, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if j >= 3:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(i, j, item)
            for j, c in enumerate(caches):
                self.table.setCellWidget(i, 5 + j, _bar(nbytes, c))
            self.table.setItem(i, 5 + len(caches), QTableWidgetItem(fit_text(nbytes, caches)))
        hdr = self.table.horizontalHeader()
        hdr.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        hdr.setStretchLastSection(True)
        self.table.resizeRowsToContents()  # rows as tall as the text at the current font scale

    def row_texts(self) -> list[list[str]]:
        """The table as text (what a test or a screen reader reads)."""
        out = []
        for i in range(self.table.rowCount()):
            row = []
            for j in range(self.table.columnCount()):
                item, bar = self.table.item(i, j), self.table.cellWidget(i, j)
                row.append(item.text() if item is not None else bar.format() if isinstance(bar, QProgressBar) else "")
            out.append(row)
        return out


def share_text(share: float, label: str) -> str:
    """'52% of L1d', '<0.1% of L3', '3.2× L1d'."""
    if share > 1:
        return f"{share:.3g}× {label}"
    if share < 0.001:
        return f"<0.1% of {label}"
    return f"{share * 100:.2g}% of {label}"


def _bar(nbytes: int, cache: CacheLevel) -> QProgressBar:
    """How much of `cache` the bytes take (a full red bar and 'N× L1' when they overflow it)."""
    bar = QProgressBar()
    bar.setRange(0, 1000)
    bar.setTextVisible(True)
    if cache.size_bytes is None:
        bar.setValue(0)
        bar.setFormat(f"{cache.label} size unknown")
        return bar
    share = nbytes / cache.size_bytes
    bar.setValue(min(1000, round(share * 1000)))
    bar.setFormat(share_text(share, cache.label))
    if share > 1:
        bar.setStyleSheet("QProgressBar::chunk { background: #c62828; }")
    return bar
