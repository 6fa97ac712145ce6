"""The Halide-style baseline the GNN paper compares against, on the same features.

Adams2019's architecture: each stage's features go through a small MLP to a stage cost;
the pipeline's cost is the sum. No information flows between stages except what the
schedule features already encode. (Adams2019 proper feeds the MLP's output into a
hand-written formula of the schedule features; here the MLP gives the log cost directly.)
The TVM-style baseline is in trees.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from . import features as F
from .dataset import Sample
from .gnn import MASKED, CostNet, GraphBatch, Normalizer, TorchCostModel, fit_net, load_torch, segment_logsumexp

HALIDE_NAME = "Halide-style per-stage MLP (learned prediction)"


class StageMLP(CostNet):
    """Per-stage MLP to a log cost; the total is the log of the summed costs."""

    def __init__(self, hidden: int = 64) -> None:
        super().__init__()
        self.norm = Normalizer(F.N_FEATURES, F.N_EDGE_FEATURES)
        self.body = nn.Sequential(nn.Linear(F.N_FEATURES, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.head = nn.Sequential(nn.Linear(hidden, 1))

    @staticmethod
    def base_ms(s: Sample) -> float:
        """The head gives each stage's log cost directly: the total is a sum over its stages."""
        return float(max(1, s.costed.sum()))

    def forward(self, b: GraphBatch) -> tuple[Tensor, Tensor]:
        c = self.head(self.body(b.x)).squeeze(1)
        c = c.masked_fill(~b.costed, MASKED)
        return c, segment_logsumexp(c, b.graph, b.n_graphs)


def train_halide(train: Sequence[Sample], hidden: int = 64, **fit: Any) -> tuple[TorchCostModel, dict[str, Any]]:
    torch.manual_seed(fit.get("seed", 0))  # the initial weights too
    net = StageMLP(hidden)
    stats = fit_net(net, train, **fit)
    cfg = {"kind": "halide", "hidden": hidden, "target": fit.get("target", "log"), "log_range": stats["log_range"]}
    return TorchCostModel(net, HALIDE_NAME, cfg), stats


def load_halide(directory: str | Path) -> TorchCostModel:
    return load_torch(directory, "halide", lambda c: StageMLP(c["hidden"]))
