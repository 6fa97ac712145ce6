"""The graph tab: the graph view under a slim bar with fit/zoom, find, and the colour legend."""

from __future__ import annotations

from PySide6.QtCore import QRectF, QSettings, QSize, QStringListModel, Qt, Slot
from PySide6.QtGui import QLinearGradient, QPainter, QPaintEvent, QPalette
from PySide6.QtWidgets import (
    QCompleter,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ..model.document import Document
from ..model.history import StageTimes
from .layout import DIRECTIONS
from .view import HEAT_STOPS, INLINE_FILL, INPUT_BORDER, INPUT_FILL, GraphView


class HeatLegend(QWidget):
    """'share of run time' gradient from 0 to the largest share, and what the times are."""

    BAR_W = 110

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.source = ""
        self.top_share = 0.0
        # Shrinks with the window: the caption is elided first (the tooltip says it all).
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)

    def set_state(self, source: str, top_share: float) -> None:
        self.source, self.top_share = source, top_share
        self.setToolTip(
            "Stages are tinted by their share of the run time, from 0 to the largest share."
            + (f"<br>Times: <b>{source}</b>." if source else "<br>No times yet.")
            + "<br>Blue pills are inputs; dashed grey boxes are inlined stages; the thick border marks the output."
        )
        self.updateGeometry()
        self.update()

    def _caption(self) -> str:
        return f"time share, {self.source}" if self.source else "time share: none yet"

    def sizeHint(self) -> QSize:  # noqa: N802  # Qt override
        fm = self.fontMetrics()
        text_w = fm.horizontalAdvance(self._caption()) + fm.horizontalAdvance("  0%  100%  ") + 2 * fm.horizontalAdvance("input  inlined ")
        return QSize(self.BAR_W + text_w + 40, max(22, fm.height() + 8))

    def _rest_width(self) -> int:
        """Width of everything right of the caption (the gradient, its ends, the swatches)."""
        fm = self.fontMetrics()
        return self.BAR_W + fm.horizontalAdvance("  0%  100%  ") + 2 * fm.horizontalAdvance("input  inlined ") + 40

    def minimumSizeHint(self) -> QSize:  # noqa: N802  # Qt override
        return QSize(self._rest_width() + self.fontMetrics().horizontalAdvance("time…"), self.sizeHint().height())

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802  # Qt override
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        fm = self.fontMetrics()
        h = self.height()
        ink = self.palette().color(QPalette.ColorRole.Text)
        muted = self.palette().color(QPalette.ColorRole.PlaceholderText)
        x = 0.0
        p.setPen(ink)
        caption = fm.elidedText(self._caption(), Qt.TextElideMode.ElideRight, max(0, self.width() - self._rest_width()))
        p.drawText(QRectF(x, 0, fm.horizontalAdvance(caption) + 2, h), Qt.AlignmentFlag.AlignVCenter, caption)
        x += fm.horizontalAdvance(caption) + 10
        zero = "0%"
        p.setPen(muted)
        p.drawText(QRectF(x, 0, fm.horizontalAdvance(zero) + 2, h), Qt.AlignmentFlag.AlignVCenter, zero)
        x += fm.horizontalAdvance(zero) + 4
        bar = QRectF(x, h / 2 - 6, self.BAR_W, 12)
        grad = QLinearGradient(bar.topLeft(), bar.topRight())
        for t, c in HEAT_STOPS:
            grad.setColorAt(t, c)
        p.setBrush(grad)
        p.setPen(muted)
        p.drawRoundedRect(bar, 3, 3)
        x += self.BAR_W + 4
        top = (f"{self.top_share:.0%}" if self.top_share >= 0.1 else f"{self.top_share:.1%}") if self.source else "–"
        p.drawText(QRectF(x, 0, fm.horizontalAdvance(top) + 2, h), Qt.AlignmentFlag.AlignVCenter, top)
        x += fm.horizontalAdvance(top) + 14
        for label, fill, border, dashed in (("input", INPUT_FILL, INPUT_BORDER, False), ("inlined", INLINE_FILL, muted, True)):
            sw = QRectF(x, h / 2 - 6, 18, 12)
            pen = p.pen()
            pen.setColor(border)
            pen.setStyle(Qt.PenStyle.DashLine if dashed else Qt.PenStyle.SolidLine)
            p.setPen(pen)
            p.setBrush(fill)
            p.drawRoundedRect(sw, 6 if label == "input" else 2, 6 if label == "input" else 2)
            x += 22
            p.setPen(muted)
            p.drawText(QRectF(x, 0, fm.horizontalAdvance(label) + 2, h), Qt.AlignmentFlag.AlignVCenter, label)
            x += fm.horizontalAdvance(label) + 10
        p.end()


DIRECTION_KEY = "graph/direction"  # QSettings key: the layout direction the user chose last


class GraphPanel(QWidget):
    """GraphView plus its bar. `show_document` redraws after any document change.
    `settings` (organisation, application): where the chosen layout direction is kept."""

    def __init__(self, parent: QWidget | None = None, settings: tuple[str, str] | None = None) -> None:
        super().__init__(parent)
        self.settings = settings
        self.view = GraphView()
        self.view.setToolTip("")
        bar = QHBoxLayout()
        bar.setContentsMargins(6, 3, 6, 3)
        bar.setSpacing(4)
        for text, tip, slot in (
            ("Fit", "Show the whole graph (F)", self.view.fit),
            ("−", "Zoom out (-, or the mouse wheel)", lambda: self.view.zoom_by(0.8)),
            ("+", "Zoom in (+, or the mouse wheel)", lambda: self.view.zoom_by(1.25)),
        ):
            b = QToolButton()
            b.setText(text)
            b.setToolTip(tip)
            b.setAutoRaise(True)
            b.clicked.connect(slot)
            bar.addWidget(b)
        self.group_button = QToolButton()
        self.group_button.setObjectName("graph_group")
        self.group_button.setText("Group")
        self.group_button.setCheckable(True)
        self.group_button.setAutoRaise(True)
        self.group_button.setToolTip(
            "One node per layer of an imported model (on by default from 60 stages).<br>"
            "Double-click a layer to expand it, its outline to collapse it; right-click for more."
        )
        self.group_button.toggled.connect(self._on_group_toggled)
        self.view.grouping_changed.connect(self._sync_group_button)
        bar.addWidget(self.group_button)
        self._sync_group_button()
        # Layout direction: two exclusive buttons, the choice remembered across runs.
        self.direction_buttons: dict[str, QToolButton] = {}
        for direction, text, tip in (
            ("LR", "→", "Lay the graph out left to right (inputs on the left)"),
            ("TB", "↓", "Lay the graph out top to bottom (inputs at the top): long models read down the page"),
        ):
            b = QToolButton()
            b.setObjectName(f"graph_direction_{direction}")
            b.setText(text)
            b.setToolTip(tip)
            b.setCheckable(True)
            b.setAutoRaise(True)
            b.clicked.connect(lambda _=False, d=direction: self.set_direction(d))
            bar.addWidget(b)
            self.direction_buttons[direction] = b
        self.view.direction_changed.connect(self.set_direction)
        saved = QSettings(*settings).value(DIRECTION_KEY, "LR") if settings is not None else "LR"
        self.view.set_direction(saved if saved in DIRECTIONS else "LR")  # a hand-edited setting is ignored
        self._sync_direction_buttons()
        bar.addSpacing(10)
        self.find_edit = QLineEdit()
        self.find_edit.setObjectName("graph_find")
        self.find_edit.setPlaceholderText("Find stage (Ctrl+F)")
        self.find_edit.setClearButtonEnabled(True)
        self.find_edit.setMinimumWidth(110)
        self.find_edit.setMaximumWidth(240)
        self.find_edit.setToolTip("Type a stage name (or part of one) and press Enter to select and centre it")
        self._names = QStringListModel(self)
        completer = QCompleter(self._names, self)
        completer.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        completer.setFilterMode(Qt.MatchFlag.MatchContains)
        completer.activated.connect(self.find)
        self.find_edit.setCompleter(completer)
        self.find_edit.returnPressed.connect(lambda: self.find_stage(self.find_edit.text()))
        bar.addWidget(self.find_edit)
        self.find_status = QLabel()
        self.find_status.setStyleSheet("color: #c62828")
        bar.addWidget(self.find_status)
        bar.addStretch(1)
        # The legend sits in a strip under the view: it never covers a node, and the bar
        # above stays narrow enough not to squeeze the docks.
        self.legend = HeatLegend()
        self.view.legend_changed.connect(self.legend.set_state)
        strip = QHBoxLayout()
        strip.setContentsMargins(8, 2, 8, 2)
        strip.addWidget(self.legend)
        strip.addStretch(1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addLayout(bar)
        lay.addWidget(self.view, 1)
        lay.addLayout(strip)
        self._fit_pending = True

    def show_document(self, doc: Document, times: StageTimes | None) -> None:
        if doc.pipeline is None:
            return
        if self.view.set_pipeline(doc.pipeline):
            self._names.setStringList([s.name for s in doc.pipeline.stages])
            self.find_edit.clear()  # the last model's search means nothing here
            self.find_status.clear()
            self._fit_pending = True
            if self.isVisible():
                self._fit_now()
        placements = {s.name: doc.placement_text(s.name) for s in doc.pipeline.stages}
        self.view.update_state(placements, times)

    @Slot(str)
    def set_direction(self, direction: str) -> None:
        """Lay out left to right ("LR") or top to bottom ("TB"), fit, and remember the choice."""
        self.view.set_direction(direction)
        self._sync_direction_buttons()
        if self.settings is not None:
            QSettings(*self.settings).setValue(DIRECTION_KEY, direction)
        if self.view.pipeline is not None:
            self._fit_now()

    def _sync_direction_buttons(self) -> None:
        for d, b in self.direction_buttons.items():
            b.setChecked(d == self.view.direction)

    @Slot()
    def _sync_group_button(self) -> None:
        self.group_button.setEnabled(bool(self.view.grouping))
        if self.group_button.isChecked() != self.view.grouped:
            self.group_button.blockSignals(True)
            self.group_button.setChecked(self.view.grouped)
            self.group_button.blockSignals(False)

    @Slot(bool)
    def _on_group_toggled(self, on: bool) -> None:
        self.view.set_grouped(on)
        self._fit_now()  # a different graph: show all of it

    def _fit_now(self) -> None:
        self._fit_pending = False
        self.view.fit(readable=True)

    def showEvent(self, event) -> None:  # noqa: N802, ANN001  # Qt override
        super().showEvent(event)
        if self._fit_pending:  # a hidden view has no size to fit to yet
            self._fit_now()

    def resizeEvent(self, event) -> None:  # noqa: N802, ANN001  # Qt override
        super().resizeEvent(event)
        if (self._fit_pending or self.view.auto_fit) and self.isVisible():
            self._fit_now()  # the window or a dock changed size, and the user has not moved the view

    @Slot()
    def focus_find(self) -> None:
        self.find_edit.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.find_edit.selectAll()

    @Slot(str)
    def find_stage(self, text: str) -> str | None:
        found = self.view.find_stage(text)
        self.find_status.setText("" if found or not text.strip() else "no such stage")
        return found
