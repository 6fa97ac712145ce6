"""The hierarchical planner (Mirhoseini et al. 2018): a learned grouper and the seq2seq placer, trained jointly.

The grouper is a feed-forward policy that assigns each operation to one of G groups from its
features; each sample's groups are summarized (summed sizes, mean position and criticality,
size, cost share) and the placer (rl.py's Seq2SeqPlacer) emits a device per group. Both are
trained together with REINFORCE on the joint log-probability, with the same cost, baseline and
invalid-placement penalty as rl.py.

As in rl.py, said plainly: by default both are warm-started (the grouper imitates the
co-location grouping, the placer the group view of the best non-learned placer), those
placements are candidates, and the answer is the best valid placement simulated. From a
random start the grouper rarely finds useful groups within a short budget (its sampled
groupings scatter every chain), hence the co-location start (`group_start`).
"""

from __future__ import annotations

import threading

import numpy as np
import torch
from torch import nn

from ..policies import PlacementResult, Problem
from .common import (
    GROUP_FEATURES,
    NODE_FEATURES,
    Clock,
    Evaluator,
    Progress,
    Reporter,
    chain_groups,
    check_options,
    colocation_groups,
    few_threads,
    imitation_target,
    majority,
    node_features,
    op_weights,
    seeded,
    warm_best_s,
    warm_starts,
)
from .rl import RLRun, Seq2SeqPlacer, imitate, reinforce

__all__ = ["Grouper", "place_hrl", "train_hrl"]


class Grouper(nn.Module):
    """Operation features -> a distribution over G groups (two hidden layers)."""

    def __init__(self, n_features: int, n_groups: int, hidden: int = 64) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(n_features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, n_groups)
        )

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        return self.net(feats)  # [n, G] logits


class _Groups:
    """Differentiable-free summaries of a batch of groupings, the placer's input (as common.group_features)."""

    def __init__(self, problem: Problem, feats: np.ndarray, n_groups: int) -> None:
        g = problem.graph
        raw = np.array([[nd.flops, nd.bytes_accessed, nd.output_bytes, nd.weight_bytes] for nd in g.nodes], dtype=np.float64)
        sec = np.asarray(problem.costs.seconds, dtype=np.float64).reshape(len(g.nodes), -1)
        self.raw = torch.as_tensor(raw, dtype=torch.float64)
        self.sec = torch.as_tensor(sec, dtype=torch.float64)
        self.mean_cost = self.sec.mean(1, keepdim=True)
        self.feats = torch.as_tensor(feats[:, 4:], dtype=torch.float64)
        self.n_groups = n_groups

    def __call__(self, assign: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """assign [K, n] -> group features [K, G, F] and log relative device costs [K, G, D]."""
        onehot = torch.nn.functional.one_hot(assign, self.n_groups).transpose(1, 2).to(torch.float64)  # [K, G, n]
        sums = torch.log1p(onehot @ self.raw)
        sums = (sums - sums.mean(1, keepdim=True)) / (sums.std(1, keepdim=True) + 1e-6)
        cnt = onehot.sum(2, keepdim=True)
        mean = (onehot @ self.feats) / cnt.clamp(min=1)
        share = (onehot @ self.mean_cost) / self.mean_cost.sum() * self.n_groups
        feats = torch.cat([sums, mean, torch.log1p(cnt), share], dim=2).to(torch.float32)
        t = onehot @ self.sec + 1e-12
        dev = torch.log(t / t.mean(2, keepdim=True)).to(torch.float32)
        return feats, dev


def topology(problem: Problem) -> np.ndarray:
    """The grouper's adjacency features (the paper's grouper reads adjacency too): each node's linear chain
    and its co-location key, as positions in [0, 1] (nodes of one chain or key share the value)."""
    g = problem.graph
    chains = np.asarray(chain_groups(g), dtype=np.float64)
    keys: dict[str, int] = {}
    key = np.asarray([keys.setdefault(nd.colocate or f"#{i}", len(keys)) for i, nd in enumerate(g.nodes)], dtype=np.float64)
    return np.stack([chains / max(chains.max(), 1.0), key / max(key.max(), 1.0)], axis=1).astype(np.float32)


@few_threads
def train_hrl(
    problem: Problem,
    seed: int = 0,
    train_s: float = 30.0,
    steps: int | None = None,
    samples: int = 16,
    n_groups: int = 32,
    hidden: int = 64,
    lr: float = 1e-3,
    entropy: float = 1e-2,
    warm_start: bool = True,
    group_start: bool = True,
    imitation_steps: int = 50,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
) -> RLRun:
    """Train grouper and placer jointly on `problem`; same seed and `steps` give the same result.
    `progress` and `cancel` as train_rl's.

    `group_start`: first train the grouper alone to imitate the co-location groups (common.colocation_groups);
    `warm_start`: then both to imitate the best heuristic's placement of them, which are also candidates.
    A time budget counts from the call, as train_rl's: the warm starts take at most half of it."""
    clock = Clock(None if steps is not None else train_s, cancel)
    gen = seeded(seed)
    ev = Evaluator(problem)
    n = len(problem.graph.nodes)
    n_groups = max(1, min(n_groups, n))
    feats_np = node_features(problem)
    feats = torch.as_tensor(np.concatenate([feats_np, topology(problem)], axis=1))
    summarize = _Groups(problem, feats_np, n_groups)
    grouper = Grouper(NODE_FEATURES + 2, n_groups, hidden)
    placer = Seq2SeqPlacer(GROUP_FEATURES, len(problem.profile.devices), hidden)
    params = list(grouper.parameters()) + list(placer.parameters())

    def joint(
        k: int, forced_groups: torch.Tensor | None = None, forced_devices: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """K joint samples (or the forced ones): op placements [K, n], groups [K, n], log-probabilities, entropies."""
        logits = grouper(feats)
        dist = torch.distributions.Categorical(logits=logits.expand(k, -1, -1), validate_args=False)
        if forced_groups is None:
            assign = torch.multinomial(torch.softmax(logits, 1), k, replacement=True, generator=gen).T
        else:
            assign = forced_groups
        gfeat, dcost = summarize(assign)
        devices, logp, ent = placer(gfeat, dcost, k, gen, forced=forced_devices)
        placement = torch.gather(devices, 1, assign)  # [K, n]: each op takes its group's device
        return placement, assign, logp + dist.log_prob(assign).sum(1), ent + dist.entropy().sum(1)

    def grouper_logp(assign: torch.Tensor) -> torch.Tensor:
        return torch.distributions.Categorical(logits=grouper(feats), validate_args=False).log_prob(assign).sum(1)

    cands = warm_starts(problem, ev) if warm_start else []
    warm_best = warm_best_s(cands, ev)
    weight = op_weights(problem)
    target_groups = colocation_groups(problem.graph, n_groups, weight)
    t_groups = torch.as_tensor([target_groups])
    if group_start:  # the grouper starts near the co-location groups (which the placer then learns to place)
        go = clock.loop(imitation_steps, share=0.5)
        imitate(lambda: grouper_logp(t_groups), n, list(grouper.parameters()), go, 1e-2, keep=0.9)
    if cands:  # both start near the best heuristic's placement of those groups: n + G choices in all
        t_devices = torch.as_tensor([majority(imitation_target(cands, ev), target_groups, n_groups, problem)])
        imitate(lambda: joint(1, t_groups, t_devices)[2], n + n_groups, params, clock.loop(imitation_steps, share=0.5), 1e-2)

    def sample(k: int) -> tuple[list[list[int]], torch.Tensor, torch.Tensor]:
        placement, _, logp, ent = joint(k)
        return placement.tolist(), logp, ent

    curve, policy_best = reinforce(ev, sample, params, clock.loop(steps), samples, lr, entropy, report=Reporter(progress), stop=clock.over)
    result = ev.result("hrl", clock.started, curve)
    return RLRun(result, ev.best_source, n_groups, len(curve), ev.calls, policy_best, warm_best)


def place_hrl(problem: Problem, seed: int = 0, **options: object) -> PlacementResult:
    """The registry's placer ("hrl"): options as train_hrl's."""
    check_options("hrl", train_hrl, options)
    return train_hrl(problem, seed, **options).result  # type: ignore[arg-type]
