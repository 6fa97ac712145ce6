"""The dock panels: built-in pipelines and the stages of the open one (the performance
panel has its own module)."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRect, QSize, Qt, Signal, Slot
from PySide6.QtGui import QFont, QFontMetrics, QPainter, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QHeaderView,
    QListWidget,
    QListWidgetItem,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine import zoo

from .model.document import Document

NAME_ROLE = Qt.ItemDataRole.UserRole
DESCRIPTION_ROLE = Qt.ItemDataRole.UserRole + 1
STAGES_ROLE = Qt.ItemDataRole.UserRole + 2

_Index = QModelIndex | QPersistentModelIndex


class _PipelineDelegate(QStyledItemDelegate):
    """A pipeline row: bold name and stage count over its wrapped, muted description."""

    PAD = 5

    def _fonts(self, base: QFont) -> tuple[QFont, QFont]:
        bold, small = QFont(base), QFont(base)
        bold.setBold(True)
        small.setPointSizeF(base.pointSizeF() * 0.92)
        return bold, small

    def _text_width(self, option: QStyleOptionViewItem) -> int:
        view = self.parent()
        width = view.viewport().width() if isinstance(view, QListWidget) else option.rect.width()
        return max(80, width - 2 * self.PAD - 2)

    def sizeHint(self, option: QStyleOptionViewItem, index: _Index) -> QSize:  # noqa: N802  # Qt override
        bold, small = self._fonts(option.font)
        width = self._text_width(option)
        desc = QFontMetrics(small).boundingRect(QRect(0, 0, width, 10_000), Qt.TextFlag.TextWordWrap, index.data(DESCRIPTION_ROLE) or "")
        return QSize(width, 2 * self.PAD + QFontMetrics(bold).height() + 2 + desc.height())

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: _Index) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        opt.text = ""  # the style draws background and selection; the text is drawn below
        style = opt.widget.style() if opt.widget is not None else QApplication.style()
        style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, opt.widget)
        selected = bool(opt.state & QStyle.StateFlag.State_Selected)
        fg = opt.palette.color(QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text)
        muted = fg if selected else opt.palette.color(QPalette.ColorRole.PlaceholderText)
        bold, small = self._fonts(opt.font)
        r = opt.rect.adjusted(self.PAD + 1, self.PAD, -self.PAD, -self.PAD)
        line = QFontMetrics(bold).height()
        painter.save()
        painter.setFont(bold)
        painter.setPen(fg)
        painter.drawText(
            QRect(r.x(), r.y(), r.width(), line), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, index.data(NAME_ROLE)
        )
        n = index.data(STAGES_ROLE)
        painter.setFont(small)
        painter.setPen(muted)
        count = f"{n} stage{'s' if n != 1 else ''}"
        painter.drawText(QRect(r.x(), r.y(), r.width(), line), Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, count)
        body = QRect(r.x(), r.y() + line + 2, r.width(), r.height() - line - 2)
        painter.drawText(body, Qt.AlignmentFlag.AlignLeft | Qt.TextFlag.TextWordWrap, index.data(DESCRIPTION_ROLE) or "")
        painter.restore()


class PipelinePanel(QWidget):
    """The zoo: one row per built-in pipeline; choosing a row asks for it to be opened."""

    pipeline_selected = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.list = QListWidget()
        self.list.setItemDelegate(_PipelineDelegate(self.list))
        self.list.setResizeMode(QListWidget.ResizeMode.Adjust)  # re-wrap descriptions when the dock is resized
        self.list.setAlternatingRowColors(True)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setToolTip("Built-in pipelines; select one to open it")
        self.list.currentItemChanged.connect(self._on_current)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.list)

    def populate(self, size: str) -> None:
        """(Re)fill the list; descriptions name the extents of this size."""
        current = self.current_name()
        self.list.blockSignals(True)
        self.list.clear()
        for name in zoo.names():
            p = zoo.get(name, size)
            n = len(p.stages)
            item = QListWidgetItem(name)
            item.setData(NAME_ROLE, name)
            item.setData(DESCRIPTION_ROLE, p.description)
            item.setData(STAGES_ROLE, n)
            item.setToolTip(f"<b>{name}</b> ({size} size, {n} stages)<br>{p.description}")
            self.list.addItem(item)
        self.list.blockSignals(False)
        self.set_current(current)

    def current_name(self) -> str | None:
        item = self.list.currentItem()
        return item.data(NAME_ROLE) if item is not None else None

    def set_current(self, name: str | None) -> None:
        """Show `name` as selected (no row for a pipeline file) without emitting."""
        self.list.blockSignals(True)
        try:
            for row in range(self.list.count()):
                if self.list.item(row).data(NAME_ROLE) == name:
                    self.list.setCurrentRow(row)
                    self.list.scrollToItem(self.list.item(row))
                    return
            self.list.setCurrentRow(-1)
            self.list.clearSelection()
        finally:
            self.list.blockSignals(False)

    def item_for(self, name: str) -> QListWidgetItem | None:
        for row in range(self.list.count()):
            if self.list.item(row).data(NAME_ROLE) == name:
                return self.list.item(row)
        return None

    @Slot(QListWidgetItem, QListWidgetItem)
    def _on_current(self, item: QListWidgetItem | None, _previous: QListWidgetItem | None) -> None:
        if item is not None:
            self.pipeline_selected.emit(item.data(NAME_ROLE))


class StagesPanel(QWidget):
    """The open pipeline's stages with op, shape and where each is computed."""

    stage_selected = Signal(object)  # stage name, or None

    COLUMNS = ("Stage", "Op", "Shape", "Computed")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tree = QTreeWidget()
        self.tree.setColumnCount(len(self.COLUMNS))
        self.tree.setHeaderLabels(list(self.COLUMNS))
        self.tree.setRootIsDecorated(False)
        self.tree.setUniformRowHeights(True)
        self.tree.setAlternatingRowColors(True)
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.tree.header().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.tree.header().setStretchLastSection(True)
        self.tree.setToolTip("Stages in definition order; select one to highlight its code in the loop nest")
        self.tree.itemSelectionChanged.connect(self._on_selection)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.tree)

    def set_document(self, doc: Document) -> None:
        """Refill from the document, keeping the selected stage if it still exists."""
        keep = self.current_stage()
        self.tree.blockSignals(True)
        self.tree.clear()
        if doc.pipeline is not None:
            for s in doc.pipeline.stages:
                where = doc.placement_text(s.name)
                shape = "×".join(map(str, s.shape))
                kind = "reduction" if s.is_reduction else "stage"
                if s.name in doc.pipeline.outputs:
                    kind = "output " + kind
                item = QTreeWidgetItem([s.name, s.op, shape, where])
                item.setData(0, Qt.ItemDataRole.UserRole, s.name)
                item.setToolTip(0, f"{s.name}: {kind}, op {s.op}, shape {shape}, computed {where}")
                self.tree.addTopLevelItem(item)
        self.tree.blockSignals(False)
        if keep is not None:
            self.select(keep)

    def current_stage(self) -> str | None:
        items = self.tree.selectedItems()
        return items[0].data(0, Qt.ItemDataRole.UserRole) if items else None

    def item_for(self, stage: str) -> QTreeWidgetItem | None:
        for i in range(self.tree.topLevelItemCount()):
            item = self.tree.topLevelItem(i)
            if item is not None and item.data(0, Qt.ItemDataRole.UserRole) == stage:
                return item
        return None

    def select(self, stage: str | None) -> None:
        item = self.item_for(stage) if stage else None
        if item is None:
            self.tree.clearSelection()
        else:
            self.tree.setCurrentItem(item)
        self._on_selection()

    @Slot()
    def _on_selection(self) -> None:
        self.stage_selected.emit(self.current_stage())
