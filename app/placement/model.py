"""The Placement tab's state: the open pipeline as an op graph, a device profile, the cost
table, the current placement and what the simulator says of it, and (after a real run on
this machine's cores) the measured execution.

Every change goes through `set_placement`, which simulates at once (about a millisecond for
200 stages), so an edit's makespan is on screen before the next repaint. Plain Python over
engine.placement; the only Qt is the `changed` signal the views listen to.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal

from engine.ir import Pipeline
from engine.placement.costs import CostTable, roofline_costs
from engine.placement.devices import DeviceProfile, load_profile
from engine.placement.graph import OpGraph, from_pipeline
from engine.placement.policies import PlacementResult, Problem
from engine.placement.simulator import Simulation, simulate

if TYPE_CHECKING:  # real execution starts processes: imported when a run is asked for
    from engine.placement.execute import Execution

DEFAULT_PROFILE = "cpu_gpu"


@dataclass(frozen=True)
class Placed:
    """One placement on screen: where each node runs, who made it, and its simulation."""

    placement: tuple[int, ...]
    label: str  # the policy that made it, or "edited"
    simulation: Simulation
    curve: tuple[float, ...] = ()  # a learned policy's training curve (makespan per step, seconds)
    train_s: float = 0.0


class PlacementModel(QObject):
    changed = Signal()  # placement, simulation, measurement or problem changed
    problem_changed = Signal()  # another pipeline, profile or cost table (the views rebuild)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.pipeline: Pipeline | None = None
        self.problem: Problem | None = None
        self.placed: Placed | None = None
        self.execution: Execution | None = None  # the last real run of `placed` (cleared on every change)
        self.profile_spec = DEFAULT_PROFILE

    # --- the problem ------------------------------------------------------------------
    def set_pipeline(self, p: Pipeline | None) -> None:
        """A new pipeline: everything on a single device of the current profile until a policy runs."""
        self.pipeline = p
        self._rebuild(self.problem.profile if self.problem is not None else load_profile(self.profile_spec))

    def set_profile(self, spec: str) -> None:
        """Another device profile (a shipped name, "local" or a JSON path); ProfileError when bad,
        and then nothing changes."""
        profile = load_profile(spec)
        self.profile_spec = spec
        self._rebuild(profile)

    def set_costs(self, costs: CostTable) -> None:
        """Costs measured on this machine replace the roofline estimate (same profile)."""
        if self.problem is None:
            return
        self.problem = Problem(self.problem.graph, self.problem.profile, costs)
        placement = self.placed.placement if self.placed is not None else (0,) * len(self.problem.graph.nodes)
        self.problem_changed.emit()
        self.set_placement(placement, self.placed.label if self.placed is not None else "single")

    def _rebuild(self, profile: DeviceProfile) -> None:
        self.execution = None
        if self.pipeline is None:
            self.problem, self.placed = None, None
        else:
            g = from_pipeline(self.pipeline)
            self.problem = Problem(g, profile, roofline_costs(g, profile))
            self.placed = self._simulated((0,) * len(g.nodes), "single")
        self.problem_changed.emit()
        self.changed.emit()

    # --- the placement ----------------------------------------------------------------
    @property
    def graph(self) -> OpGraph | None:
        return self.problem.graph if self.problem is not None else None

    @property
    def profile(self) -> DeviceProfile | None:
        return self.problem.profile if self.problem is not None else None

    def _simulated(self, placement: Sequence[int], label: str, curve: tuple[float, ...] = (), train_s: float = 0.0) -> Placed:
        assert self.problem is not None
        pl = tuple(int(d) for d in placement)
        sim = simulate(self.problem.graph, self.problem.profile, self.problem.costs, pl)
        return Placed(pl, label, sim, curve, train_s)

    def set_placement(self, placement: Sequence[int], label: str, curve: tuple[float, ...] = (), train_s: float = 0.0) -> None:
        if self.problem is None:
            return
        self.placed = self._simulated(placement, label, curve, train_s)
        self.execution = None
        self.changed.emit()

    def set_result(self, result: PlacementResult) -> None:
        self.set_placement(result.placement, result.policy, result.curve, result.train_s)

    def device_of(self, node: int) -> int:
        return self.placed.placement[node] if self.placed is not None else 0

    def with_device(self, node: int, device: int) -> tuple[int, ...]:
        """The current placement with one node moved (for the undoable edit)."""
        assert self.placed is not None
        pl = list(self.placed.placement)
        pl[node] = device
        return tuple(pl)

    def set_execution(self, ex: Execution) -> None:
        """A real run of the current placement (ignored if the placement changed meanwhile)."""
        if self.placed is not None and ex.placement == self.placed.placement:
            self.execution = ex
            self.changed.emit()

    def node_index(self, name: str) -> int | None:
        g = self.graph
        if g is None:
            return None
        return next((i for i, n in enumerate(g.nodes) if n.name == name), None)
