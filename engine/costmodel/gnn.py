"""The graph neural network cost model (after Singh et al., "Using Graph Neural Networks
to model the performance of Deep Neural Networks") and the torch plumbing it shares with
the Halide-style baseline (baselines.py).

Each stage is a node with its feature row (engine/costmodel/features.py); edges are producer ->
consumer pairs with their own features. A few rounds of message passing run along the
edges in both directions (a producer learns how it is consumed, a consumer what it
reads), then a head gives each stage a log cost. The pipeline's predicted run time is
the sum of its stages' costs (inlined stages cost nothing of their own: their work is in
their consumers), so a prediction comes with a per-stage breakdown. Training minimizes
the squared error of the log total (plus, optionally, a pairwise ranking loss between
schedules of the same pipeline).
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


class Normalizer(nn.Module):
    """Feature standardization fitted on training nodes; saved with the model's weights."""

    x_mean: Tensor  # buffers, registered in __init__ (declared for the type checker)
    x_std: Tensor
    e_mean: Tensor
    e_std: Tensor

    def __init__(self, n_node: int, n_edge: int) -> None:
        super().__init__()
        for k, n in (("x", n_node), ("e", n_edge)):
            self.register_buffer(f"{k}_mean", torch.zeros(n))
            self.register_buffer(f"{k}_std", torch.ones(n))

    def fit(self, samples: Sequence[Sample]) -> None:
        x = np.concatenate([s.nodes for s in samples])
        e = np.concatenate([s.edges for s in samples]) if any(len(s.edges) for s in samples) else np.zeros((1, self.e_mean.numel()))
        for k, a in (("x", x), ("e", e)):
            getattr(self, f"{k}_mean").copy_(torch.from_numpy(a.mean(0)))
            getattr(self, f"{k}_std").copy_(torch.from_numpy(np.maximum(a.std(0), 1e-3)))


def collate(samples: Sequence[Sample], norm: Normalizer, targets: np.ndarray | None = None) -> GraphBatch:
    xs, eis, eas, gs, cs = [], [], [], [], []
    off = 0
    for k, s in enumerate(samples):
        xs.append(s.nodes)
        eis.append(s.edge_index + off)
        eas.append(s.edges)
        gs.append(np.full(len(s.nodes), k))
        cs.append(s.costed)
        off += len(s.nodes)
    x = (torch.from_numpy(np.concatenate(xs)).float() - norm.x_mean) / norm.x_std
    ea = torch.from_numpy(np.concatenate(eas)).float().reshape(-1, F.N_EDGE_FEATURES)
    ea = (ea - norm.e_mean) / norm.e_std
    groups: dict[str, int] = {}
    y = targets if targets is not None else np.full(len(samples), np.nan)
    return GraphBatch(
        x, torch.from_numpy(np.concatenate(eis, axis=1)).long(), ea, torch.from_numpy(np.concatenate(gs)).long(),
        torch.from_numpy(np.concatenate(cs)), len(samples), torch.as_tensor(y, dtype=torch.float32),
        torch.tensor([groups.setdefault(s.pipeline_hash, len(groups)) for s in samples]),
    )  # fmt: skip


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


class MessagePassing(nn.Module):
    """One round: messages producer -> consumer and consumer -> producer (each computed
    from the sender's state and the edge's features, averaged per receiver), then a
    residual update of every node."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.fwd, self.bwd = _mlp(2 * hidden, hidden, hidden), _mlp(2 * hidden, hidden, hidden)
        self.update = _mlp(3 * hidden, hidden, hidden)
        self.norm = nn.LayerNorm(hidden)

    def forward(self, h: Tensor, edge_index: Tensor, e: Tensor) -> Tensor:
        src, dst = edge_index
        n = h.shape[0]

        def mean_at(idx: Tensor, msg: Tensor) -> Tensor:
            deg = torch.zeros(n).index_add(0, idx, torch.ones(len(idx))).clamp(min=1)
            return torch.zeros(n, msg.shape[1]).index_add(0, idx, msg) / deg[:, None]

        to_consumer = mean_at(dst, self.fwd(torch.cat([h[src], e], 1)))
        to_producer = mean_at(src, self.bwd(torch.cat([h[dst], e], 1)))
        return self.norm(h + self.update(torch.cat([h, to_consumer, to_producer], 1)))


class StageCostNet(CostNet):
    """Node encoder, `layers` rounds of message passing, per-stage log-cost head.
    With layers=0 it is a per-stage MLP (the Halide-style baseline uses its own class)."""

    def __init__(self, hidden: int = 64, layers: int = 3) -> None:
        super().__init__()
        self.norm = Normalizer(F.N_FEATURES, F.N_EDGE_FEATURES)
        self.enc = _mlp(F.N_FEATURES, hidden, hidden)
        self.edge_enc = _mlp(F.N_EDGE_FEATURES, hidden, hidden)
        self.layers = nn.ModuleList(MessagePassing(hidden) for _ in range(layers))
        self.head = _mlp(hidden, hidden, 1)

    @staticmethod
    def base_ms(s: Sample) -> float:
        """What the head's output adds to, summed over the sample (its bias starts at the mean gap)."""
        return analytic_ms(s)

    def stage_log_costs(self, b: GraphBatch) -> Tensor:
        """Per stage: the analytic estimate's log ms plus a learned correction. The estimate
        scales with the work and the bytes, so predictions follow it to sizes the training
        data never reached; the network learns what it gets wrong."""
        h = torch.relu(self.enc(b.x))
        e = torch.relu(self.edge_enc(b.edge_attr))
        for layer in self.layers:
            h = layer(h, b.edge_index, e)
        k = F.INDEX["analytic_ns"]
        raw = b.x[:, k] * self.norm.x_std[k] + self.norm.x_mean[k]  # log1p(ns), as stored
        base = torch.log(torch.expm1(raw).clamp(min=1e-3)) - math.log(1e6)
        return torch.where(b.costed, self.head(h).squeeze(1) + base, torch.full_like(h[:, 0], MASKED))

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


def fit_net(
    net: CostNet,
    train: Sequence[Sample],
    *,
    epochs: int = 60,
    lr: float = 2e-3,
    batch: int = 64,
    rank_weight: float = 0.0,
    target: str = "log",
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Train a network whose forward(GraphBatch) returns (stage costs, log totals) and whose
    `base_ms(sample)` is what its per-stage head output is a log factor of."""
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
    data = [collate([train[i] for i in idx], norm, y[idx]) for idx in _batches(train, batch, 8, rng)]
    losses = []
    net.train()
    for ep in range(epochs):
        rng.shuffle(data)
        total = 0.0
        for b in data:
            _, pred = net(b)
            loss = nn.functional.mse_loss(pred, b.y)
            if rank_weight:
                loss = loss + rank_weight * pairwise_loss(pred, b.y, b.group)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            total += loss.detach().item() * b.n_graphs
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


def train_gnn(train: Sequence[Sample], hidden: int = 64, layers: int = 3, **fit: Any) -> tuple[TorchCostModel, dict[str, Any]]:
    torch.manual_seed(fit.get("seed", 0))  # the initial weights too
    net = StageCostNet(hidden, layers)
    stats = fit_net(net, train, **fit)
    cfg = {"kind": "gnn", "hidden": hidden, "layers": layers, "target": fit.get("target", "log"), "log_range": stats["log_range"]}
    return TorchCostModel(net, GNN_NAME, cfg), stats


def load_gnn(directory: str | Path) -> TorchCostModel:
    return load_torch(directory, "gnn", lambda c: StageCostNet(c["hidden"], c["layers"]))
