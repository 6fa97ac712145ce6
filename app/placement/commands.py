"""Undoable placement edits: a stage moved to another device by hand, or a policy's whole
placement applied. Each keeps the placement it replaced, so undo restores it exactly (and
its label: undoing a hand edit of an m-ETF placement shows "etf" again)."""

from __future__ import annotations

from PySide6.QtGui import QUndoCommand

from .model import Placed, PlacementModel


class SetPlacement(QUndoCommand):
    def __init__(
        self, model: PlacementModel, placement: tuple[int, ...], label: str, text: str, curve: tuple[float, ...] = (), train_s: float = 0.0
    ) -> None:
        super().__init__(text)
        self.model = model
        self.before: Placed | None = model.placed
        self.placement, self.label, self.curve, self.train_s = placement, label, curve, train_s

    def redo(self) -> None:
        self.model.set_placement(self.placement, self.label, self.curve, self.train_s)

    def undo(self) -> None:
        b = self.before
        if b is not None:
            self.model.set_placement(b.placement, b.label, b.curve, b.train_s)


def move_stage(model: PlacementModel, node: int, device: int) -> SetPlacement | None:
    """The command that puts one stage on `device` (None when it is there already)."""
    if model.placed is None or model.profile is None or model.graph is None or model.device_of(node) == device:
        return None
    name, dev = model.graph.nodes[node].name, model.profile.devices[device].name
    return SetPlacement(model, model.with_device(node, device), "edited", f"{name} on {dev}")
