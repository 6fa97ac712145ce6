"""Mirhoseini et al.'s placer: co-location groups, a sequence-to-sequence policy, REINFORCE on the simulator.

The encoder is a bidirectional LSTM over the groups in topological order (features: summed
flops, bytes, output and weight bytes, mean position and criticality, size, cost share); the
decoder an LSTM with content attention over the encoder's outputs that emits one device per
group, fed the device it chose before. Training is REINFORCE with the released placer's
choices: cost √(makespan), an exponential-moving-average baseline, several samples per step,
invalid (out-of-memory) placements penalized (above every valid sample of the step: common.Evaluator),
Adam, an entropy bonus; the advantage is
divided by the step's reward spread (a scale-free step size). A graph of at most `max_groups`
nodes is placed node by node.

What is added to the paper, said plainly: by default the policy is warm-started, i.e. first
trained to imitate (cross-entropy, until each group's choice has probability ~0.6, so that it
still explores) the group-level view of the fastest non-learned placer's placement (m-ETF,
m-SCT, ...; over memory or not: common.imitation_target), and the heuristics' placements are
candidates for the answer. The answer is the best
valid placement simulated, whichever produced it (`RLRun.source` says which), so it is never
worse than the best heuristic; `warm_start=False` gives the paper's cold start.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ..policies import PlacementResult, Problem
from .common import (
    GROUP_FEATURES,
    Adam,
    Clock,
    Evaluator,
    Progress,
    Reporter,
    check_options,
    colocation_groups,
    device_costs,
    few_threads,
    group_features,
    imitation_target,
    majority,
    node_features,
    op_weights,
    seeded,
    warm_best_s,
    warm_starts,
)

__all__ = ["RLRun", "Seq2SeqPlacer", "place_rl", "reinforce", "train_rl"]


class Seq2SeqPlacer(nn.Module):
    """Groups in, one device per group out: a BiLSTM encoder and an attentive LSTM decoder."""

    def __init__(self, n_features: int, n_devices: int, hidden: int = 64) -> None:
        super().__init__()
        self.n_devices = n_devices
        self.embed = nn.Linear(n_features, hidden)
        self.encoder = nn.LSTM(hidden, hidden // 2, batch_first=True, bidirectional=True)
        self.device_embed = nn.Embedding(n_devices + 1, hidden)  # + "no device yet" before the first group
        self.decoder = nn.LSTMCell(2 * hidden, hidden)
        self.att_enc = nn.Linear(hidden, hidden, bias=False)
        self.att_dec = nn.Linear(hidden, hidden)
        self.att_v = nn.Linear(hidden, 1, bias=False)
        self.out = nn.Linear(2 * hidden, n_devices)
        # How much a device's speed for the group counts at first: the policy starts near "fastest device".
        self.cost_weight = nn.Parameter(torch.tensor(-1.0))

    def forward(
        self,
        feats: torch.Tensor,  # [T, F] group features, or [K, T, F]: one sequence per sample (the hierarchical planner's)
        dev_cost: torch.Tensor,  # [T, D] (or [K, T, D]) log relative compute time of the group on each device
        samples: int,
        gen: torch.Generator | None = None,
        forced: torch.Tensor | None = None,  # [K, T] actions to score instead of sampling
        greedy: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sampled (or forced / greedy) devices [K, T], their log-probabilities [K] and entropies [K]."""
        if feats.dim() == 2:
            feats, dev_cost = feats.unsqueeze(0), dev_cost.unsqueeze(0)
        k = samples if forced is None else forced.shape[0]
        t_len = feats.shape[1]
        enc, _ = self.encoder(torch.tanh(self.embed(feats)))  # [1 or K, T, H]
        enc = enc.expand(k, -1, -1)
        dev_cost = dev_cost.expand(k, -1, -1)
        keys = self.att_enc(enc)  # [K, T, H]
        hidden = enc.shape[2]
        h = enc.new_zeros(k, hidden)
        c = enc.new_zeros(k, hidden)
        prev = torch.full((k,), self.n_devices, dtype=torch.long)
        actions, logp, ent = [], enc.new_zeros(k), enc.new_zeros(k)
        for t in range(t_len):
            h, c = self.decoder(torch.cat([enc[:, t], self.device_embed(prev)], dim=1), (h, c))
            score = self.att_v(torch.tanh(keys + self.att_dec(h).unsqueeze(1))).squeeze(2)  # [K, T]
            context = torch.bmm(torch.softmax(score, dim=1).unsqueeze(1), enc).squeeze(1)  # [K, H]
            logits = self.out(torch.cat([h, context], dim=1)) + self.cost_weight * dev_cost[:, t]
            dist = torch.distributions.Categorical(logits=logits, validate_args=False)
            if forced is not None:
                a = forced[:, t]
            elif greedy:
                a = logits.argmax(1)
            else:
                a = torch.multinomial(dist.probs, 1, generator=gen).squeeze(1)
            logp = logp + dist.log_prob(a)
            ent = ent + dist.entropy()
            actions.append(a)
            prev = a
        return torch.stack(actions, dim=1), logp, ent


# samples -> (op-level placements [K][n], their log-probabilities [K], entropies [K])
SampleFn = Callable[[int], tuple[list[list[int]], torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class RLRun:
    """A training run: the answer, where it came from, and what the policy itself reached."""

    result: PlacementResult
    source: str  # "policy" or "warm start: NAME" (the best placement's origin)
    groups: int
    steps: int
    simulations: int
    policy_best_s: float  # best valid makespan among the policy's own samples (inf if none valid)
    warm_best_s: float  # best valid warm-start candidate's makespan (inf without warm start)


def reinforce(
    evaluator: Evaluator,
    sample_fn: SampleFn,
    params: Sequence[torch.nn.Parameter],
    go: Callable[[int], bool],
    samples: int,
    lr: float,
    entropy: float,
    decay: float = 0.9,
    report: Callable[[Sequence[float]], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> tuple[list[float], float]:
    """REINFORCE: cost √makespan (invalid penalized: Evaluator.costs), EMA baseline, several samples per step.

    `stop` (the time budget) is checked between a step's simulations: a step it interrupts is
    not learned from (its placements still count for the answer). Returns the curve (per step:
    the mean makespan of the step's samples, an invalid one at its penalty's makespan) and the
    best valid makespan sampled.
    """
    opt = Adam(params, lr=lr)
    baseline: float | None = None
    curve: list[float] = []
    best = float("inf")
    step = 0
    while go(step):
        placements, logp, ent = sample_fn(samples)
        costs = evaluator.costs(placements, stop=stop)
        for p in placements[: len(costs)]:
            sim = evaluator.cache[tuple(p)]
            if sim.valid:
                best = min(best, sim.makespan_s)
        if len(costs) < len(placements):
            break
        reward = -costs
        baseline = float(reward.mean()) if baseline is None else decay * baseline + (1 - decay) * float(reward.mean())
        # The advantage in units of the step's spread (a scale-free step size; Adam alone is not, with few samples).
        adv = torch.as_tensor((reward - baseline) / (reward.std() + 1e-3), dtype=torch.float32)
        loss = -(adv * logp).mean() - entropy * ent.mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        curve.append(evaluator.curve_point(costs))
        if report is not None:
            report(curve)
        step += 1
    return curve, best


def imitate(
    score_fn: Callable[[], torch.Tensor],
    choices: int,
    params: Sequence[torch.nn.Parameter],
    go: Callable[[int], bool],
    lr: float,
    keep: float = 0.6,
) -> None:
    """Warm start: raise the log-likelihood `score_fn()` of a target placement until each of its
    `choices` has probability `keep` on average (geometric mean), so that sampling still explores
    around it (0.6 measured better than a tighter prior: bench placement's random 200-node graph on
    memory_tight, 2.18 vs 2.57 ms); Adam steps while `go(k)` (a step cap, and on a time budget
    half of it: Clock.loop(steps, share=0.5))."""
    opt = Adam(params, lr=lr)
    goal = float(np.log(keep)) * choices
    k = 0
    while go(k):
        k += 1
        logp = score_fn().mean()
        if float(logp.detach()) >= goal:
            break
        opt.zero_grad()
        (-logp).backward()
        opt.step()


@few_threads
def train_rl(
    problem: Problem,
    seed: int = 0,
    train_s: float = 30.0,
    steps: int | None = None,
    samples: int = 16,
    max_groups: int = 64,
    hidden: int = 64,
    lr: float = 1e-3,
    entropy: float = 1e-2,
    warm_start: bool = True,
    imitation_steps: int = 50,
    target_rule: str = "fastest",
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
) -> RLRun:
    """Train the seq2seq placer on `problem` (for `steps` steps, else for `train_s` seconds).

    Same seed and same `steps` give the same result; a time budget gives as many steps as the
    machine manages (the curve's length says how many), everything included from the call on:
    the heuristics' warm starts (always run: the answer is never worse than them), at most half
    of it imitating the fastest (`target_rule`: common.imitation_target), then REINFORCE for the rest. `progress` gets the curve while it
    trains; `cancel`, once set, stops the training (the best placement so far is the answer).
    """
    clock = Clock(None if steps is not None else train_s, cancel)
    gen = seeded(seed)
    ev = Evaluator(problem)
    n_dev = len(problem.profile.devices)
    feats = node_features(problem)
    weight = op_weights(problem)
    groups = colocation_groups(problem.graph, max_groups, weight)
    n_groups = max(groups) + 1
    gfeat = torch.as_tensor(group_features(feats, groups, n_groups, problem))
    dcost = torch.as_tensor(device_costs(problem, groups, n_groups))
    model = Seq2SeqPlacer(GROUP_FEATURES, n_dev, hidden)
    index = torch.as_tensor(groups)

    def sample(k: int) -> tuple[list[list[int]], torch.Tensor, torch.Tensor]:
        acts, logp, ent = model(gfeat, dcost, k, gen)
        return acts[:, index].tolist(), logp, ent

    cands = warm_starts(problem, ev) if warm_start else []
    warm_best = warm_best_s(cands, ev)
    if cands:
        target = torch.as_tensor([majority(imitation_target(cands, ev, target_rule), groups, n_groups, problem)])
        imitate(
            lambda: model(gfeat, dcost, 1, forced=target)[1],
            n_groups,
            list(model.parameters()),
            clock.loop(imitation_steps, share=0.5),
            1e-2,
        )
    go = clock.loop(steps)
    curve, policy_best = reinforce(
        ev, sample, list(model.parameters()), go, samples, lr, entropy, report=Reporter(progress), stop=clock.over
    )
    if not clock.over():
        with torch.no_grad():  # the trained policy's own choice, a candidate too
            greedy, _, _ = model(gfeat, dcost, 1, greedy=True)
        gsim = ev.simulate(greedy[0, index].tolist())
        if gsim.valid:
            policy_best = min(policy_best, gsim.makespan_s)
    result = ev.result("rl", clock.started, curve)
    return RLRun(result, ev.best_source, n_groups, len(curve), ev.calls, policy_best, warm_best)


def place_rl(problem: Problem, seed: int = 0, **options: object) -> PlacementResult:
    """The registry's placer ("rl"): options as train_rl's (train_s, steps, samples, max_groups, warm_start, ...)."""
    check_options("rl", train_rl, options)
    return train_rl(problem, seed, **options).result  # type: ignore[arg-type]
