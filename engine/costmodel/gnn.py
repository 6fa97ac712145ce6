"""The graph neural network cost model (after Singh et al., "Using Graph Neural Networks
to model the performance of Deep Neural Networks") and the torch plumbing it shares with
the Halide-style baseline (baselines.py).

Each stage is a node with its feature row (engine/costmodel/features.py); edges are producer ->
consumer pairs with their own features. A few rounds of message passing run along the
edges in both directions (a producer learns how it is consumed, a consumer what it
reads), then a head gives each stage a log cost. The pipeline's predicted run time is
the sum of its stages' costs (inlined stages cost nothing of their own: their work is in
their consumers), so a prediction comes with a per-stage breakdown. Training minimizes
the squared error of the log total, or Adams2019's relative-throughput loss, plus
optionally pairwise (RankNet) and listwise (ListNet) ranking losses between schedules of
the same pipeline.

Options (`GNN_OPTIONS`, recorded in gnn.json; all off is the original network):
`relative` adds to each edge the producer's schedule relative to its consumer's (what no
per-stage model sees: the producer's tile against the consumer's, and more), `structure`
passes messages along the schedule's containment / sibling / inlining relations too,
`attention` weighs neighbours' messages, `readout` adds a graph-level term. All are
derived from a sample's stored rows (features.py is not changed by them). The shipped GNN
uses `relative` (README, "The GNN over 3 seeds": each option's measured effect).
"""

from __future__ import annotations

import io
import math
import random
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from ..ir import Pipeline
from . import features as F
from .dataset import Sample
from .files import ModelFileError, read_metadata, torch_archive, write_bytes, write_json
from .targets import LearnedModel, clip_predictions, log_range, targets_of

MASKED = -1e4  # log cost of an inlined stage (exp() of it is 0)
BATCH_GRAPHS = 256  # schedules per disjoint graph when predicting (bounds the activations' memory)
# torch's intra-op threads while predicting: on this 2-core machine two were 3-6x slower than
# one for every batch measured (1 to 64 schedules of 10 to 140 stages; small matrices).
INFERENCE_THREADS = 1
_THREADS_LOCK = threading.Lock()


@contextmanager
def inference_threads() -> Iterator[None]:
    """torch's thread count is the process's: set for one prediction and restored after it
    (predictions from two threads take turns, so neither restores the other's setting)."""
    with _THREADS_LOCK:
        before = torch.get_num_threads()
        torch.set_num_threads(INFERENCE_THREADS)
        try:
            yield
        finally:
            torch.set_num_threads(before)


# --- batching ------------------------------------------------------------------------------
@dataclass
class GraphBatch:
    """Several graphs as one disjoint graph."""

    x: Tensor  # [N, F] normalized node features
    edge_index: Tensor  # [2, E] global node ids, producer -> consumer
    edge_attr: Tensor  # [E, Fe]
    graph: Tensor  # [N] graph id of each node
    costed: Tensor  # [N] bool: stages with a cost of their own
    n_graphs: int
    y: Tensor  # [G] target (log ms), NaN when unknown
    group: Tensor  # [G] pipeline id, for pairwise ranking
    # The schedule's structure beyond producer -> consumer (see `structure_edges`): [2, S]
    # global node ids and [S, N_STRUCTURE] one-hot edge kinds; and per flow edge the
    # producer's schedule relative to its consumer's ([E, N_RELATIVE], see `relative_edge_features`).
    sedge_index: Tensor | None = None
    sedge_kind: Tensor | None = None
    relative: Tensor | None = None


class Normalizer(nn.Module):
    """Feature standardization fitted on training nodes; saved with the model's weights.
    With `n_relative` > 0 the batches also carry the schedule-structure edges and the
    relative edge features (standardized too): what the structured GNN reads."""

    x_mean: Tensor  # buffers, registered in __init__ (declared for the type checker)
    x_std: Tensor
    e_mean: Tensor
    e_std: Tensor
    r_mean: Tensor  # only with n_relative > 0
    r_std: Tensor

    def __init__(self, n_node: int, n_edge: int, n_relative: int = 0) -> None:
        super().__init__()
        self.n_relative = n_relative
        for k, n in (("x", n_node), ("e", n_edge)) + ((("r", n_relative),) if n_relative else ()):
            self.register_buffer(f"{k}_mean", torch.zeros(n))
            self.register_buffer(f"{k}_std", torch.ones(n))

    def fit(self, samples: Sequence[Sample]) -> None:
        x = np.concatenate([s.nodes for s in samples])
        e = np.concatenate([s.edges for s in samples]) if any(len(s.edges) for s in samples) else np.zeros((1, self.e_mean.numel()))
        arrays = [("x", x), ("e", e)]
        if self.n_relative:
            r = np.concatenate([relative_edge_features(s) for s in samples])
            arrays.append(("r", r if len(r) else np.zeros((1, self.n_relative))))
        for k, a in arrays:
            getattr(self, f"{k}_mean").copy_(torch.from_numpy(a.mean(0)))
            getattr(self, f"{k}_std").copy_(torch.from_numpy(np.maximum(a.std(0), 1e-3)))


# --- what the structured GNN sees beyond the per-stage rows ------------------------------------
# Per flow edge: the producer's schedule relative to its consumer's (differences of the stored
# log1p values: log ratios), which no per-stage model can see. The first is the one the issue
# names: the producer's tile (points per production) relative to its consumer's.
RELATIVE = (
    "points_per_production", "productions", "points_total", "bytes_at_production", "bytes_at_realization",
    "innermost_bytes_at_production", "compute_depth", "store_depth", "vector_size", "inner_parallelism", "working_set",
)  # fmt: skip
_REL_IDX = np.array([F.INDEX[k] for k in RELATIVE])
N_RELATIVE = len(RELATIVE) + 2  # + the producer's region against what one consumer production / iteration reads
# Structure edges: a stage inside a consumer that is itself inside another (containment two
# levels or more up), two stages computed inside the same consumer (siblings: they share its
# loops and its cache), and a stage inlined through a chain of inlined stages into the first
# stage that is not inlined (where its work really runs).
STRUCTURE = ("contained_in", "sibling", "inlined_into")
N_STRUCTURE = len(STRUCTURE)


def relative_edge_features(s: Sample) -> np.ndarray:
    """[E, N_RELATIVE] float32, per producer -> consumer edge of `s`."""
    src, dst = s.edge_index
    if not len(src):
        return np.zeros((0, N_RELATIVE), np.float32)
    x = s.nodes.astype(np.float32)
    d = x[src][:, _REL_IDX] - x[dst][:, _REL_IDX]
    prod_bytes = x[src, F.INDEX["bytes_at_production"]]
    e = s.edges
    extra = np.stack(
        [
            prod_bytes - e[:, F.EDGE_INDEX["bytes_per_consumer_realization"]],
            prod_bytes - e[:, F.EDGE_INDEX["bytes_per_consumer_iteration"]],
        ],
        1,
    )
    both = (e[:, F.EDGE_INDEX["producer_inline"]] < 0.5) & (e[:, F.EDGE_INDEX["consumer_inline"]] < 0.5)
    return (np.concatenate([d, extra], 1) * both[:, None]).astype(np.float32)  # 0 where either is inlined (no tile)


def structure_edges(s: Sample) -> tuple[np.ndarray, np.ndarray]:
    """([2, S] node index pairs, [S] kind index into STRUCTURE) of `s`'s schedule, derived from
    its edge features (producer_at_consumer, producer_inline): the containment and inlining
    relations, beyond the direct producer -> consumer edges the flow messages already use."""
    src, dst = s.edge_index
    e = s.edges
    at = e[:, F.EDGE_INDEX["producer_at_consumer"]] > 0.5
    inl = e[:, F.EDGE_INDEX["producer_inline"]] > 0.5
    parent: dict[int, int] = {}
    for a, b in zip(src[at].tolist(), dst[at].tolist()):
        parent.setdefault(a, b)
    into: dict[int, list[int]] = {}
    for a, b in zip(src[inl].tolist(), dst[inl].tolist()):
        into.setdefault(a, []).append(b)
    pairs: list[tuple[int, int, int]] = []
    for a, b in parent.items():  # ancestors two levels up and beyond
        seen = {a, b}
        c = parent.get(b)
        while c is not None and c not in seen:
            pairs.append((a, c, 0))
            seen.add(c)
            c = parent.get(c)
    kids: dict[int, list[int]] = {}
    for a, b in parent.items():
        kids.setdefault(b, []).append(a)
    for ks in kids.values():
        pairs += [(a, b, 1) for a in ks for b in ks if a != b]
    for a, direct in into.items():  # follow inlined consumers to the stages the work lands in
        stack, seen = [c for c in direct if c in into], set(direct)
        while stack:
            c = stack.pop()
            for d in into[c]:
                if d not in seen:
                    seen.add(d)
                    if d in into:
                        stack.append(d)
                    else:
                        pairs.append((a, d, 2))
    if not pairs:
        return np.zeros((2, 0), np.int64), np.zeros(0, np.int64)
    arr = np.array(pairs, np.int64)
    return arr[:, :2].T.copy(), arr[:, 2].copy()


def collate(samples: Sequence[Sample], norm: Normalizer, targets: np.ndarray | None = None) -> GraphBatch:
    xs, eis, eas, gs, cs = [], [], [], [], []
    rel, sei, sek = [], [], []
    off = 0
    for k, s in enumerate(samples):
        xs.append(s.nodes)
        eis.append(s.edge_index + off)
        eas.append(s.edges)
        gs.append(np.full(len(s.nodes), k))
        cs.append(s.costed)
        if norm.n_relative:
            rel.append(relative_edge_features(s))
            ix, kind = structure_edges(s)
            sei.append(ix + off)
            sek.append(kind)
        off += len(s.nodes)
    x = (torch.from_numpy(np.concatenate(xs)).float() - norm.x_mean) / norm.x_std
    ea = torch.from_numpy(np.concatenate(eas)).float().reshape(-1, F.N_EDGE_FEATURES)
    ea = (ea - norm.e_mean) / norm.e_std
    groups: dict[str, int] = {}
    y = targets if targets is not None else np.full(len(samples), np.nan)
    b = GraphBatch(
        x, torch.from_numpy(np.concatenate(eis, axis=1)).long(), ea, torch.from_numpy(np.concatenate(gs)).long(),
        torch.from_numpy(np.concatenate(cs)), len(samples), torch.as_tensor(y, dtype=torch.float32),
        torch.tensor([groups.setdefault(s.pipeline_hash, len(groups)) for s in samples]),
    )  # fmt: skip
    if norm.n_relative:
        r = torch.from_numpy(np.concatenate(rel)).float().reshape(-1, norm.n_relative)
        b.relative = (r - norm.r_mean) / norm.r_std
        b.sedge_index = torch.from_numpy(np.concatenate(sei, axis=1)).long()
        b.sedge_kind = nn.functional.one_hot(torch.from_numpy(np.concatenate(sek)).long(), N_STRUCTURE).float()
    return b


def segment_logsumexp(v: Tensor, seg: Tensor, n: int) -> Tensor:
    """log(sum(exp(v))) per segment; the max is detached (the result is exact either way)."""
    mx = torch.full((n,), MASKED, dtype=v.dtype).scatter_reduce(0, seg, v.detach(), "amax", include_self=True)
    s = torch.zeros(n, dtype=v.dtype).index_add(0, seg, torch.exp(v - mx[seg]))
    return mx + torch.log(s)


def _mlp(n_in: int, hidden: int, n_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, n_out))


# --- the network ---------------------------------------------------------------------------
class CostNet(nn.Module):
    """What `fit_net` trains and `TorchCostModel` runs: forward(GraphBatch) returns (stage log
    costs, log totals); `norm` is fitted on the training nodes; the bias of `head`'s last
    Linear starts at the mean gap between the targets and `base_ms`."""

    norm: Normalizer
    head: nn.Sequential

    @staticmethod
    def base_ms(s: Sample) -> float:
        """What the head's output is a log factor of, for the sample."""
        raise NotImplementedError


def segment_softmax(logit: Tensor, seg: Tensor, n: int) -> Tensor:
    """Softmax of `logit` [M] within each segment (receiver) of `seg` [M]."""
    mx = torch.full((n,), -1e30, dtype=logit.dtype).scatter_reduce(0, seg, logit.detach(), "amax", include_self=True)
    w = torch.exp(logit - mx[seg])
    return w / torch.zeros(n, dtype=logit.dtype).index_add(0, seg, w)[seg]


class MessagePassing(nn.Module):
    """One round: messages producer -> consumer and consumer -> producer (each computed
    from the sender's state and the edge's features, averaged per receiver, or with
    `attention` weighted by a softmax over the receiver's neighbours), then a residual update
    of every node. With `structure` a third message runs along the schedule's structure
    edges (containment, siblings, inlining: `structure_edges`), both ways."""

    def __init__(self, hidden: int, attention: bool = False, structure: bool = False, n_edge: int | None = None) -> None:
        super().__init__()
        ne = hidden if n_edge is None else n_edge
        self.fwd, self.bwd = _mlp(hidden + ne, hidden, hidden), _mlp(hidden + ne, hidden, hidden)
        self.attention, self.structure = attention, structure
        if attention:
            self.att_fwd, self.att_bwd = nn.Linear(2 * hidden, 1), nn.Linear(2 * hidden, 1)
        if structure:
            self.sfwd, self.sbwd = _mlp(hidden + N_STRUCTURE, hidden, hidden), _mlp(hidden + N_STRUCTURE, hidden, hidden)
        self.update = _mlp((5 if structure else 3) * hidden, hidden, hidden)
        self.norm = nn.LayerNorm(hidden)

    def forward(self, h: Tensor, edge_index: Tensor, e: Tensor, b: GraphBatch | None = None) -> Tensor:
        src, dst = edge_index
        n = h.shape[0]

        def mean_at(idx: Tensor, msg: Tensor) -> Tensor:
            deg = torch.zeros(n).index_add(0, idx, torch.ones(len(idx))).clamp(min=1)
            return torch.zeros(n, msg.shape[1]).index_add(0, idx, msg) / deg[:, None]

        def attend(idx: Tensor, msg: Tensor, att: nn.Module) -> Tensor:
            w = segment_softmax(att(torch.cat([h[idx], msg], 1)).squeeze(1), idx, n)
            return torch.zeros(n, msg.shape[1]).index_add(0, idx, msg * w[:, None])

        mf, mb = self.fwd(torch.cat([h[src], e], 1)), self.bwd(torch.cat([h[dst], e], 1))
        if self.attention:
            parts = [h, attend(dst, mf, self.att_fwd), attend(src, mb, self.att_bwd)]
        else:
            parts = [h, mean_at(dst, mf), mean_at(src, mb)]
        if self.structure:
            assert b is not None and b.sedge_index is not None and b.sedge_kind is not None, "structure edges need a structured batch"
            ss, sd = b.sedge_index
            parts += [
                mean_at(sd, self.sfwd(torch.cat([h[ss], b.sedge_kind], 1))),
                mean_at(ss, self.sbwd(torch.cat([h[sd], b.sedge_kind], 1))),
            ]
        return self.norm(h + self.update(torch.cat(parts, 1)))


# The options of the structured GNN (StageCostNet's keyword arguments), saved in gnn.json.
# Every one off is the original GNN (flow messages only, mean aggregation, sum readout).
GNN_OPTIONS = ("relative", "structure", "attention", "readout")


class StageCostNet(CostNet):
    """Node encoder, `layers` rounds of message passing, per-stage log-cost head.
    With layers=0 it is a per-stage MLP (the Halide-style baseline uses its own class).

    Options (each measured in README's "GNN" section): `relative` adds to each flow edge the
    producer's schedule relative to its consumer's (`relative_edge_features`); `structure`
    passes messages along containment / sibling / inlining edges too; `attention` weighs
    neighbours' messages by a learned softmax instead of a mean; `readout` adds a
    graph-level term (an MLP of the mean and max of the costed stages' states) to every
    stage's log cost: a whole-pipeline factor (threads, caches) the sum of stages misses."""

    def __init__(
        self, hidden: int = 64, layers: int = 3, *, relative: bool = False, structure: bool = False,
        attention: bool = False, readout: bool = False,
    ) -> None:  # fmt: skip
        super().__init__()
        self.options = {"relative": relative, "structure": structure, "attention": attention, "readout": readout}
        self.norm = Normalizer(F.N_FEATURES, F.N_EDGE_FEATURES, N_RELATIVE if (relative or structure) else 0)
        self.enc = _mlp(F.N_FEATURES, hidden, hidden)
        self.edge_enc = _mlp(F.N_EDGE_FEATURES + (N_RELATIVE if relative else 0), hidden, hidden)
        self.layers = nn.ModuleList(MessagePassing(hidden, attention, structure) for _ in range(layers))
        self.head = _mlp(hidden, hidden, 1)
        if readout:
            self.readout = _mlp(2 * hidden, hidden, 1)
            last = self.readout[-1]
            assert isinstance(last, nn.Linear)
            with torch.no_grad():  # starts as the plain sum
                last.weight.zero_()
                last.bias.zero_()

    @staticmethod
    def base_ms(s: Sample) -> float:
        """What the head's output adds to, summed over the sample (its bias starts at the mean gap)."""
        return analytic_ms(s)

    def stage_log_costs(self, b: GraphBatch) -> Tensor:
        """Per stage: the analytic estimate's log ms plus a learned correction. The estimate
        scales with the work and the bytes, so predictions follow it to sizes the training
        data never reached; the network learns what it gets wrong."""
        h = torch.relu(self.enc(b.x))
        ea = b.edge_attr
        if self.options["relative"]:
            assert b.relative is not None, "relative edge features need a structured batch"
            ea = torch.cat([ea, b.relative], 1)
        e = torch.relu(self.edge_enc(ea))
        for layer in self.layers:
            h = layer(h, b.edge_index, e, b)
        k = F.INDEX["analytic_ns"]
        raw = b.x[:, k] * self.norm.x_std[k] + self.norm.x_mean[k]  # log1p(ns), as stored
        base = torch.log(torch.expm1(raw).clamp(min=1e-3)) - math.log(1e6)
        c = self.head(h).squeeze(1) + base
        if self.options["readout"]:
            w = b.costed.float()[:, None]
            cnt = torch.zeros(b.n_graphs).index_add(0, b.graph, w[:, 0]).clamp(min=1)
            mean = torch.zeros(b.n_graphs, h.shape[1]).index_add(0, b.graph, h * w) / cnt[:, None]
            mx = torch.full((b.n_graphs, h.shape[1]), -1e4).scatter_reduce(
                0, b.graph[:, None].expand_as(h), torch.where(w > 0, h, torch.full_like(h, -1e4)), "amax", include_self=True
            )
            c = c + self.readout(torch.cat([mean, mx.clamp(min=-10)], 1)).squeeze(1)[b.graph]
        return torch.where(b.costed, c, torch.full_like(h[:, 0], MASKED))

    def forward(self, b: GraphBatch) -> tuple[Tensor, Tensor]:
        """(per-stage log cost [N], log total per graph [G])."""
        c = self.stage_log_costs(b)
        return c, segment_logsumexp(c, b.graph, b.n_graphs)


# --- training ----------------------------------------------------------------------------
def analytic_ms(s: Sample) -> float:
    """The analytic estimate of the whole sample (its costed stages), from the stored feature."""
    return float(np.expm1(s.nodes[s.costed, F.INDEX["analytic_ns"]].astype(np.float64)).sum() / 1e6)


def _batches(samples: Sequence[Sample], batch: int, per_group: int, rng: random.Random) -> list[list[int]]:
    """Batches made of chunks of `per_group` schedules of one pipeline, so the ranking loss has pairs."""
    by: dict[str, list[int]] = {}
    for k, s in enumerate(samples):
        by.setdefault(s.pipeline_hash, []).append(k)
    chunks = []
    for idx in by.values():
        rng.shuffle(idx)
        chunks += [idx[i : i + per_group] for i in range(0, len(idx), per_group)]
    rng.shuffle(chunks)
    out, cur = [], []
    for c in chunks:
        cur += c
        if len(cur) >= batch:
            out.append(cur)
            cur = []
    return out + ([cur] if cur else [])


def pairwise_loss(pred: Tensor, y: Tensor, group: Tensor) -> Tensor:
    """Logistic loss on every pair of the same pipeline whose times differ (RankNet)."""
    same = (group[:, None] == group[None, :]) & (y[:, None] < y[None, :] - 1e-6)
    if not bool(same.any()):
        return pred.sum() * 0
    diff = pred[:, None] - pred[None, :]  # should be negative where y_i < y_j
    return nn.functional.softplus(diff[same]).mean()


def adams_loss(pred: Tensor, y: Tensor, group: Tensor) -> Tensor:
    """Adams et al. 2019's loss (Halide's autoscheduler): the squared error of throughput
    relative to the best measured schedule of the same pipeline, (t_best / p_i - t_best / t_i)^2:
    errors on the fast schedules (the ones a search keeps) weigh most, on slow ones little."""
    n = int(group.max()) + 1 if len(group) else 0
    best = torch.full((n,), math.inf).scatter_reduce(0, group, y, "amin", include_self=True)[group]
    return ((torch.exp(best - pred) - torch.exp(best - y)) ** 2).mean()


def listwise_loss(pred: Tensor, y: Tensor, group: Tensor) -> Tensor:
    """ListNet within each pipeline: cross-entropy between the softmax of the measured and of
    the predicted negative log times (which schedule is fastest, softly); groups of one give 0."""
    n = int(group.max()) + 1 if len(group) else 0
    p_true = segment_softmax(-y, group, n)
    log_p = -pred - segment_logsumexp(-pred, group, n)[group]
    size = torch.zeros(n).index_add(0, group, torch.ones(len(group)))[group]
    return -(p_true * log_p * (size > 1)).sum() / max(1, int((torch.bincount(group) > 1).sum()))


LOSSES = ("mse", "adams", "mse+adams")


def fit_net(
    net: CostNet,
    train: Sequence[Sample],
    *,
    epochs: int = 60,
    lr: float = 2e-3,
    batch: int = 64,
    rank_weight: float = 0.0,
    list_weight: float = 0.0,
    loss: str = "mse",
    per_group: int = 8,
    target: str = "log",
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Train a network whose forward(GraphBatch) returns (stage costs, log totals) and whose
    `base_ms(sample)` is what its per-stage head output is a log factor of.

    `loss`: 'mse' (squared error of the log time), 'adams' (`adams_loss`) or both summed;
    plus `rank_weight` x the pairwise (`pairwise_loss`) and `list_weight` x the listwise
    (`listwise_loss`) ranking losses within a pipeline. Batches hold chunks of `per_group`
    schedules of one pipeline, so every pipeline-relative loss has company to compare with."""
    if loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r} (choose from {', '.join(LOSSES)})")
    torch.manual_seed(seed)
    rng = random.Random(seed)
    norm = net.norm
    norm.fit(train)
    y = targets_of(train, target)
    with torch.no_grad():  # start from the mean correction (or cost) per stage: faster, steadier training
        base = [net.base_ms(s) for s in train]
        last = net.head[-1]
        assert isinstance(last, nn.Linear), f"{type(net).__name__}: the head ends in a Linear layer"
        last.bias.fill_(float(np.mean(y - np.log(np.maximum(base, 1e-9)))))
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(1, epochs))
    data = [collate([train[i] for i in idx], norm, y[idx]) for idx in _batches(train, batch, per_group, rng)]
    losses = []
    net.train()
    for ep in range(epochs):
        rng.shuffle(data)
        total = 0.0
        for b in data:
            _, pred = net(b)
            value = pred.sum() * 0
            if loss != "adams":
                value = value + nn.functional.mse_loss(pred, b.y)
            if loss != "mse":
                value = value + adams_loss(pred, b.y, b.group)
            if rank_weight:
                value = value + rank_weight * pairwise_loss(pred, b.y, b.group)
            if list_weight:
                value = value + list_weight * listwise_loss(pred, b.y, b.group)
            opt.zero_grad()
            value.backward()
            nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            total += value.detach().item() * b.n_graphs
        sched.step()
        losses.append(total / len(train))
        if log is not None and (ep % 10 == 0 or ep == epochs - 1):
            log(f"epoch {ep}: loss {losses[-1]:.4f}")
    net.eval()
    return {"epochs": epochs, "final_loss": losses[-1] if losses else math.nan, "samples": len(train), "log_range": log_range(y)}


# --- the CostModel ----------------------------------------------------------------------------
class TorchCostModel(LearnedModel):
    """A trained stage-cost network behind the `CostModel` interface: a batch of schedules
    runs as one disjoint graph (up to BATCH_GRAPHS of them), without gradients."""

    kind = "torch"

    def __init__(self, net: CostNet, name: str, config: dict[str, Any]) -> None:
        self.net, self.name, self.config = net, name, config

    def predict_samples(self, samples: Sequence[Sample], pipeline: Pipeline | None = None) -> tuple[np.ndarray, list[np.ndarray]]:
        """(total ms per sample, per-stage ms arrays). Nothing is cached per row (`pipeline`
        is not used): message passing makes every stage's cost depend on its neighbours'."""
        totals, stages = [], []
        with torch.no_grad(), inference_threads():
            for i in range(0, len(samples), BATCH_GRAPHS):
                chunk = samples[i : i + BATCH_GRAPHS]
                b = collate(chunk, self.net.norm)
                c, tot = self.net(b)
                totals.append(torch.exp(tot).numpy())
                ms = torch.where(b.costed, torch.exp(c), torch.zeros_like(c)).numpy()
                stages += np.split(ms, np.cumsum([len(s.nodes) for s in chunk])[:-1])  # nodes are in sample order
        return clip_predictions(np.concatenate(totals) if totals else np.zeros(0), stages, self.config), stages

    def save(self, directory: str | Path, stem: str) -> None:
        """`stem`.pt (the state_dict, torch's zip format) and `stem`.json (architecture,
        feature version, the weights' sha256), each written atomically."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        buf = io.BytesIO()
        torch.save(self.net.state_dict(), buf)
        digest = write_bytes(d / f"{stem}.pt", buf.getvalue())
        write_json(d / f"{stem}.json", {**self.config, "name": self.name, "feature_version": F.VERSION, "sha256": digest})


def load_torch(directory: str | Path, stem: str, make: Callable[[dict[str, Any]], CostNet]) -> TorchCostModel:
    """The model saved by `TorchCostModel.save`. Weights must be a zip archive and load with
    weights_only=True (no code runs); anything wrong with either file is a ModelFileError."""
    d = Path(directory)
    meta, weights = d / f"{stem}.json", d / f"{stem}.pt"
    cfg = read_metadata(meta, F.VERSION)
    try:
        net, name = make(cfg), str(cfg["name"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelFileError(f"{meta}: missing or bad architecture entry ({type(exc).__name__}: {exc})") from None
    data = torch_archive(weights, cfg.get("sha256"))
    try:
        state = torch.load(io.BytesIO(data), weights_only=True)  # never unpickles code
        net.load_state_dict(state)  # missing / unexpected keys and shape mismatches raise here
    except Exception as exc:  # noqa: BLE001  # UnpicklingError, RuntimeError, KeyError...: all one "bad file"
        lines = [x.strip() for x in str(exc).splitlines() if x.strip()]  # load_state_dict lists every tensor: keep two
        detail = "; ".join(lines[:2]) + (f"; and {len(lines) - 2} more" if len(lines) > 2 else "")
        raise ModelFileError(f"{weights}: not usable weights for {meta.name} ({type(exc).__name__}: {detail})") from None
    net.eval()
    return TorchCostModel(net, name, cfg)


GNN_NAME = "GNN cost model (learned prediction)"


def train_gnn(
    train: Sequence[Sample], hidden: int = 64, layers: int = 3, options: dict[str, bool] | None = None, **fit: Any
) -> tuple[TorchCostModel, dict[str, Any]]:
    """The GNN with `options` (GNN_OPTIONS: all off unless given) trained by `fit_net(**fit)`."""
    opts = {k: bool((options or {}).get(k, False)) for k in GNN_OPTIONS}
    unknown = set(options or {}) - set(GNN_OPTIONS)
    if unknown:
        raise ValueError(f"unknown GNN options {sorted(unknown)} (choose from {', '.join(GNN_OPTIONS)})")
    torch.manual_seed(fit.get("seed", 0))  # the initial weights too
    net = StageCostNet(hidden, layers, **opts)
    stats = fit_net(net, train, **fit)
    cfg = {
        "kind": "gnn", "hidden": hidden, "layers": layers, **opts, "target": fit.get("target", "log"),
        "loss": fit.get("loss", "mse"), "rank_weight": fit.get("rank_weight", 0.0), "list_weight": fit.get("list_weight", 0.0),
        "log_range": stats["log_range"],
    }  # fmt: skip
    return TorchCostModel(net, GNN_NAME, cfg), stats


def load_gnn(directory: str | Path) -> TorchCostModel:
    """The saved GNN; a file from before the options were recorded is the original GNN (all off)."""

    def make(c: dict[str, Any]) -> StageCostNet:
        opts = {k: c.get(k, False) for k in GNN_OPTIONS}
        if not all(isinstance(v, bool) for v in opts.values()):
            raise ValueError(f"GNN options must be true or false, got {opts}")
        return StageCostNet(int(c["hidden"]), int(c["layers"]), **opts)

    return load_torch(directory, "gnn", make)
