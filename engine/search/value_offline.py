"""An offline-trained value function over partial schedules (after Steiner, Cummins, He and
Leather, "Value Function Based Performance Optimization of Deep Learning Workloads").

A state is a partial schedule: the first d stages of `space.order(p)` decided. Undecided
stages are what the schedule leaves unsaid (computed at root, serial: always legal, since
every consumer is decided before its producers), so a state is a schedule the loop-nest
model can build and the cost model's features describe. V(state) is the log run time (ms)
of the best schedule reachable from the state, predicted from the state's per-stage
features (engine/costmodel/features.py) plus a "decided" flag, by one of two networks:

- `gnn`: message passing along the stage graph (the cost model's `MessagePassing` rounds);
- `lstm`: a bidirectional LSTM over the stages in decision order (the paper's choice).

Both give per-stage log costs as a learned correction to the cost model's estimate of the
stage in the state (for an undecided stage: at root, serial) and V = log of their sum, so V
scales with the work to sizes the training data never reached, and at a complete schedule
starts from the cost model's prediction.

Training (`train_value`), as in the paper, iterates: round 0 takes trajectories from the
data set's measured schedules and random schedules; each later round runs greedy search
with the current V (with some random choices) on every training pipeline and collects the
states it visits and their siblings. A state's target is the best log time among the
completions known for it: the trajectory it lies on, noisy rollouts around that trajectory
(`space.complete` with `explore`), predicted by the default cost model in batches, and the
data set's measured schedules that extend it (their measured times; predictions of that
pipeline scaled by its median measured/predicted ratio, so the two agree in scale); then
backed up (a state's best is at most its children's). The pipelines: the shipped data set's
(resources/costmodel/dataset.jsonl.gz, small to large random pipelines and the zoo at small
size, measured) and fresh random pipelines (engine/randpipe.py, rollouts only). The zoo at
full size, where the search is benchmarked, is never trained on.

Weights ship beside the cost model's (resources/costmodel/value.pt + value.json, feature-
versioned, sha256-checked, loaded with weights_only=True) through the cost model's own
save / load (`TorchCostModel`, `load_torch`).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from ..costmodel import CostModel, model_by_name, model_dirs
from ..costmodel import features as F
from ..costmodel.dataset import Sample
from ..costmodel.gnn import (
    CostNet,
    GraphBatch,
    MessagePassing,
    Normalizer,
    TorchCostModel,
    collate,
    fit_net,
    inference_threads,
    load_torch,
    segment_logsumexp,
)
from ..ir import Pipeline
from ..loopnest import build
from ..randpipe import random_pipeline
from ..resources import COSTMODEL_DIR
from ..schedule import Schedule, validate
from .reuse import penalty_ms
from .space import complete, order, seed_schedule, stage_options, with_decision
from .space_templates import template_options

STEM = "value"  # value.pt + value.json
N_IN = F.N_FEATURES + 2  # the stage features, the decided flag, the cost model's log1p(ns) of the stage
DECIDED, COST = F.N_FEATURES, F.N_FEATURES + 1
VERSION = 1  # of the state encoding above (the stage features have their own, F.VERSION); value.json records both
MASKED = -1e4  # log cost of an inlined stage (exp() of it is 0), as in the cost model
K_GREEDY = 4  # random options per stage when V alone decides (zero-measurement greedy), besides the templates
# States kept per step by zero-measurement greedy. 10 with the capacity-traffic term: at 3
# (and 6) a blocked matmul's first decision (the output in 2-D tiles) fell out of the beam
# before the product's decision could show its lower traffic (README, issue 15).
BEAM = 10
BEAM_V_ALONE = 3  # the earlier setting (V alone, no capacity term): the bench's greedy0_v
# Besides the beam, per step the best state of each of this many further distinct structured
# decisions (templates) of the stage just decided. V's scores of a step's states are close
# together and often wrong in order at full size, so a beam of the 10 best by V can hold
# only variants of one poor line: attention's greedy0 kept a serial scalar `probs_sum` and an
# unblocked `scores` (measured 74-100 ms); keeping the best state of each of 10 more template
# decisions, it finds one measured 5-8x faster (12-18 ms; README, issue 15). It widens what V
# chooses among, so other pipelines' schedules move too, either way (measured there).
DIVERSE = 10


# --- states --------------------------------------------------------------------------------
def state_samples(p: Pipeline, partials: Sequence[Schedule], model: CostModel, targets: Sequence[float] | None = None) -> list[Sample]:
    """The graphs of states `partials`: one node per stage in decision order (the features
    of the partial schedule's loop nest, undecided stages at root; the decided flag; the cost
    model's per-stage estimate of the partial schedule, one batch for all), producer ->
    consumer edges; `targets` are the training targets in ms (exp of the best log time)."""
    if not partials:
        return []
    preds = model.predict_many(p, list(partials))
    names = order(p)
    pos = {s.name: k for k, s in enumerate(p.stages)}
    perm = np.array([pos[n] for n in names], dtype=np.int64)
    new_of_old = np.empty(len(perm), dtype=np.int64)
    new_of_old[perm] = np.arange(len(perm))
    out = []
    for i, (partial, pr) in enumerate(zip(partials, preds, strict=True)):
        nest = build(p, partial)
        x = F.stage_features(nest)
        ei, ef = F.edge_index_and_features(nest)
        extra = np.array(
            [[1.0 if n in partial.stages else 0.0, math.log1p(max(0.0, pr.stages.get(n, 0.0)) * 1e6)] for n in names], dtype=np.float32
        )
        nodes = np.concatenate([x[perm], extra], axis=1)
        t = float(targets[i]) if targets is not None else math.nan
        out.append(Sample(p.content_hash(), p.name, "", t, nodes, new_of_old[ei] if ei.size else ei, ef))
    return out


def _mlp(n_in: int, hidden: int, n_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, n_out))


def _base_log_ms(b: GraphBatch, norm: Normalizer) -> Tensor:
    """Per stage: the log ms of the cost model's estimate of the stage in the state (at root,
    serial while undecided), stored as log1p(ns)."""
    raw = b.x[:, COST] * norm.x_std[COST] + norm.x_mean[COST]
    return torch.log(torch.expm1(raw).clamp(min=1e-3)) - math.log(1e6)


def _cost_ms(s: Sample) -> float:
    """The cost model's estimate of the whole state (what the head's output corrects)."""
    return float(np.expm1(s.nodes[s.costed, COST].astype(np.float64)).sum() / 1e6)


class ValueNet(CostNet):
    """forward(GraphBatch) -> (per-stage log costs, V per graph); subclasses give `embed`."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.norm = Normalizer(N_IN, F.N_EDGE_FEATURES)
        self.enc = _mlp(N_IN, hidden, hidden)

    @staticmethod
    def base_ms(s: Sample) -> float:
        return _cost_ms(s)

    def embed(self, b: GraphBatch, h: Tensor) -> Tensor:
        raise NotImplementedError

    def forward(self, b: GraphBatch) -> tuple[Tensor, Tensor]:
        h = self.embed(b, torch.relu(self.enc(b.x)))
        c = torch.where(b.costed, self.head(h).squeeze(1) + _base_log_ms(b, self.norm), torch.full_like(h[:, 0], MASKED))
        return c, segment_logsumexp(c, b.graph, b.n_graphs)


class ValueGNN(ValueNet):
    """Message passing both ways along the stage graph, then a per-stage head."""

    def __init__(self, hidden: int = 48, layers: int = 3) -> None:
        super().__init__(hidden)
        self.edge_enc = _mlp(F.N_EDGE_FEATURES, hidden, hidden)
        self.layers = nn.ModuleList(MessagePassing(hidden) for _ in range(layers))
        self.head = _mlp(hidden, hidden, 1)

    def embed(self, b: GraphBatch, h: Tensor) -> Tensor:
        e = torch.relu(self.edge_enc(b.edge_attr))
        for layer in self.layers:
            h = layer(h, b.edge_index, e)
        return h


class ValueLSTM(ValueNet):
    """A bidirectional LSTM over each graph's stages in decision order (the nodes of a state
    are in that order, see `state_samples`), then a per-stage head."""

    def __init__(self, hidden: int = 48, layers: int = 1) -> None:
        super().__init__(hidden)
        self.lstm = nn.LSTM(hidden, hidden, num_layers=layers, batch_first=True, bidirectional=True)
        self.head = _mlp(2 * hidden, hidden, 1)

    def embed(self, b: GraphBatch, h: Tensor) -> Tensor:
        lengths = torch.bincount(b.graph, minlength=b.n_graphs)
        seqs = nn.utils.rnn.pad_sequence(list(torch.split(h, lengths.tolist())), batch_first=True)
        packed = nn.utils.rnn.pack_padded_sequence(seqs, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, _ = self.lstm(packed)
        padded, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=seqs.shape[1])
        mask = torch.arange(seqs.shape[1])[None, :] < lengths[:, None]
        return padded[mask]  # row-major: graph by graph, node by node, as b.x


KINDS: dict[str, Callable[[dict[str, Any]], ValueNet]] = {
    "gnn": lambda c: ValueGNN(int(c["hidden"]), int(c["layers"])),
    "lstm": lambda c: ValueLSTM(int(c["hidden"]), int(c["layers"])),
}


class OfflineValue:
    """A trained V: `values(p, partials)` is the predicted best log ms reachable from each."""

    def __init__(self, model: TorchCostModel, cost_model: CostModel | None = None) -> None:
        self.model = model
        self.net = model.net
        self.config = model.config
        self.name = f"value function ({self.config.get('kind')}, offline-trained prediction)"
        self._cost = cost_model

    @property
    def cost_model(self) -> CostModel:
        """The cost model whose per-stage estimates V was trained on (by its key)."""
        if self._cost is None:
            self._cost = model_by_name(str(self.config.get("cost_model", "default")))
        return self._cost

    def values(self, p: Pipeline, partials: Sequence[Schedule]) -> np.ndarray:
        if not partials:
            return np.zeros(0)
        samples = state_samples(p, partials, self.cost_model)
        with torch.no_grad(), inference_threads():
            _, v = self.net(collate(samples, self.net.norm))
        return v.double().numpy()

    def save(self, directory: str | Path) -> None:
        self.model.save(directory, STEM)


def load_value(directory: str | Path = COSTMODEL_DIR) -> OfflineValue:
    """The V saved by `OfflineValue.save` (ModelFileError for anything wrong with its files)."""
    from ..costmodel.files import ModelFileError  # noqa: PLC0415

    def make(cfg: dict[str, Any]) -> ValueNet:
        if cfg.get("value_version") != VERSION:
            raise ModelFileError(
                f"{Path(directory) / (STEM + '.json')}: state encoding {cfg.get('value_version')}, this build has {VERSION}: retrain"
            )
        if cfg.get("kind") not in KINDS:
            raise ModelFileError(f"{Path(directory) / (STEM + '.json')}: kind {cfg.get('kind')!r} is not one of {', '.join(KINDS)}")
        return KINDS[cfg["kind"]](cfg)

    return OfflineValue(load_torch(directory, STEM, make))


@cache
def shipped_value() -> OfflineValue:
    """The V of the first model directory that has one (as for the cost models:
    $SCHEDULE_EXPLORER_COSTMODEL, the user's, then the shipped one); loaded once per process."""
    for d in model_dirs():
        if (d / f"{STEM}.json").exists():
            return load_value(d)
    return load_value(COSTMODEL_DIR)  # the shipped one's error names what is missing


# --- greedy with V ------------------------------------------------------------------------
def keep_states(
    kids: Sequence[Schedule], vals: Sequence[float] | np.ndarray, structured: set[int], stage: str, beam: int, diverse: int = 0
) -> list[Schedule]:
    """The states a step of `value_greedy` keeps: the `beam` distinct `kids` of lowest score
    (ties: the first offered), then, best first, the kids of up to `diverse` further distinct
    decisions of `stage` among the structured ones (indices in `structured`; see DIVERSE)."""
    ranked = sorted(range(len(kids)), key=lambda i: (vals[i], i))
    states: list[Schedule] = []
    seen: set[str] = set()
    for i in ranked:
        h = kids[i].content_hash()
        if h not in seen:
            seen.add(h)
            states.append(kids[i])
        if len(states) >= max(1, beam):
            break
    decided, extra = {x.stages[stage] for x in states}, 0
    for i in ranked:
        if extra >= diverse:
            break
        if i in structured and kids[i].stages[stage] not in decided:
            decided.add(kids[i].stages[stage])
            states.append(kids[i])
            extra += 1
    return states


def value_greedy(
    p: Pipeline,
    value: OfflineValue,
    rng: random.Random,
    k: int = K_GREEDY,
    explore: float = 0.0,
    visited: list[list[Schedule]] | None = None,
    check: Callable[[], None] | None = None,
    templates: bool = True,
    beam: int = 1,
    reuse: bool = False,
    diverse: int = 0,
    final: list[tuple[float, Schedule]] | None = None,
) -> Schedule:
    """A complete schedule decided stage by stage from an empty one, by V alone: per stage
    `k` legal options (the sampler's) and, with `templates`, the structured ones
    (space_templates); the state V scores lowest is kept (with probability `explore` a
    random one instead, for training). With `beam` > 1 the `beam` best distinct states are
    kept at every step (each expanded, all children scored in one batch) and the best
    complete one wins: V is surest about complete schedules, and a decision that looked
    best early need not end best; with `diverse` > 0 also the best state of each of up to
    `diverse` further distinct template decisions of the step's stage (see DIVERSE). No
    cost-model completion and no measurement. `visited`
    collects each step's children; `check` runs between steps (a search's cancel). With
    `reuse`, each state's score is V's predicted ms plus the capacity traffic of its decided
    stages (search/reuse.py): V cannot see cache-capacity effects at sizes it was not trained on.
    `final` receives the last step's kept states, complete, as (score in ms, schedule), best
    first (the returned schedule is the first): the candidates V ranks next."""
    states = [Schedule(name="greedy")]
    scored: list[Schedule] = []  # the last scored step's children, V's `vals` of them (for `final`)
    vals: np.ndarray = np.zeros(0)
    for st in order(p):
        if check is not None:
            check()
        kids: list[Schedule] = []
        structured: set[int] = set()  # indices of kids whose decision is a template
        for partial in states:
            opts = stage_options(p, partial, st, rng, k)
            n_random = len(opts)
            if templates:  # the structured decisions too, after the random ones
                have = set(opts)
                opts += [o for o in template_options(p, partial, st) if o not in have]
            structured.update(range(len(kids) + n_random, len(kids) + len(opts)))
            if not opts:  # no random options asked for and no template fits: one random decision
                opts = stage_options(p, partial, st, rng, 1)
            kids += [with_decision(partial, st, o) for o in opts]
        if visited is not None:
            visited.append(kids)
        if explore > 0 and rng.random() < explore:
            states = [kids[rng.randrange(len(kids))]]
            continue
        vals = value.values(p, kids)
        if reuse:
            vals = np.log(np.exp(vals) + np.array([penalty_ms(p, c, decided_only=True) for c in kids]))
        scored = kids
        states = keep_states(kids, vals, structured, st, beam, diverse)
    best = states[0]  # ranked by V at the last step
    validate(p, best)
    if final is not None:
        score = {c.content_hash(): float(math.exp(x)) for c, x in zip(scored, vals)}
        final[:] = sorted(((score.get(x.content_hash(), math.inf), x) for x in states), key=lambda c: c[0])
    return best


# --- training data ----------------------------------------------------------------------------
@dataclass
class TrainConfig:
    kind: str = "gnn"
    cost_model: str = "tvm"  # the key of the cost model giving targets and per-stage estimates
    hidden: int = 48
    layers: int = 3
    dataset_pipelines: int = 100  # of the shipped data set's, those with the most measurements
    random_pipelines: int = 40  # fresh ones (seeds 50000 + i), small and medium
    trajectories: int = 3  # per pipeline in round 0 (measured and random schedules)
    rounds: int = 2  # rounds of greedy with the current V after round 0
    round_pipelines: int = 40  # pipelines each later round runs greedy on
    k: int = 6  # options per stage in a training trajectory
    explore: float = 0.25  # chance a training trajectory takes a random option
    rollouts: int = 2  # noisy completions per state
    rollout_explore: float = 0.4
    epochs: int = 40
    rank_weight: float = 1.0  # pairwise ranking loss within a pipeline's states (what greedy's choices need)
    seed: int = 0
    # The training pipelines' heuristic schedules (engine/heuristic.py) as trajectories and
    # rollout guides: a random completion says little about the best reachable time, and
    # without a good completion policy V never learns which early decisions (strips, a
    # parallel outer loop) pay off later. Only in training: greedy with V never sees them.
    # Off by default: the shipped V was trained without them, and a V trained with them on 32
    # pipelines (round 0 only) ranked steps closer to the guided completions but measured
    # slower on layernorm, mlp and softmax (README, issue 15).
    heuristic_guide: bool = False
    siblings: int = 8  # template options per step along the heuristic's trajectory (space_templates), as states
    templates: bool = False  # the later rounds' greedy also offers the template decisions


@dataclass
class TrainingPipeline:
    p: Pipeline
    measured: list[tuple[Schedule, float]] = field(default_factory=list)  # verified (schedule, ms)


def training_pipelines(cfg: TrainConfig, dataset: Path | None = None) -> list[TrainingPipeline]:
    """The data set's pipelines with the most measured schedules (each with them), then
    fresh random ones."""
    import json  # noqa: PLC0415

    from ..costmodel.export import SHIPPED_DATASET, shipped_db  # noqa: PLC0415
    from ..database import Database  # noqa: PLC0415

    out: list[TrainingPipeline] = []
    if cfg.dataset_pipelines > 0:
        with Database(shipped_db(dataset or SHIPPED_DATASET)) as db:
            rows = db.conn.execute(
                "SELECT p.hash, p.json, s.json, m.median_ms FROM measurements m JOIN pipelines p ON p.hash = m.pipeline_hash "
                "JOIN schedules s ON s.hash = m.schedule_hash WHERE m.pipeline_hash IN (SELECT hash FROM cm_pipelines) "
                "ORDER BY m.pipeline_hash, m.schedule_hash"
            ).fetchall()
        by: dict[str, tuple[str, list[tuple[str, float]]]] = {}
        for ph, pj, sj, ms in rows:
            by.setdefault(ph, (pj, []))[1].append((sj, float(ms)))
        ranked = sorted(by, key=lambda h: (-len(by[h][1]), h))[: cfg.dataset_pipelines]
        for ph in sorted(ranked):
            pj, scheds = by[ph]
            p = Pipeline.from_json(json.loads(pj))
            if p.content_hash() != ph:  # stored by another build: its timings are not this pipeline's
                continue
            out.append(TrainingPipeline(p, [(Schedule.from_json(json.loads(sj)), ms) for sj, ms in scheds]))
    for i in range(cfg.random_pipelines):
        out.append(TrainingPipeline(random_pipeline(50000 + i, max_stages=10, size="small" if i % 2 else "medium")))
    return out


def _is_prefix(state: Schedule, s: Schedule) -> bool:
    return all(s.stages.get(k) == v for k, v in state.stages.items())


def _prefixes(p: Pipeline, s: Schedule) -> list[Schedule]:
    """The states along `s`: its first d decisions in `order(p)`, d = 1..n."""
    out, cur = [], Schedule(name="state")
    for st in order(p):
        cur = with_decision(cur, st, s.stages[st])
        out.append(cur)
    return out


def _predict_ms(model: CostModel, p: Pipeline, scheds: list[Schedule]) -> np.ndarray:
    if not scheds:
        return np.zeros(0)
    try:
        return np.array([float(pr.total_ms) for pr in model.predict_many(p, scheds)])
    except Exception:  # noqa: BLE001  # a schedule the model cannot predict is just not a target
        return np.full(len(scheds), math.inf)


def collect(
    tp: TrainingPipeline,
    model: CostModel,
    rng: random.Random,
    cfg: TrainConfig,
    value: OfflineValue | None = None,
) -> list[Sample]:
    """Training states of one pipeline with their targets (see the module doc): without
    `value`, the prefixes of measured and random schedules; with it, the states a greedy
    trajectory with V visits (every step's children)."""
    p = tp.p
    trajs: list[Schedule] = []
    heur = seed_schedule(p) if cfg.heuristic_guide else None
    if value is None:
        ms = sorted(tp.measured, key=lambda sm: sm[1])
        picks = ms[:1] + rng.sample(ms[1:], min(len(ms) - 1, cfg.trajectories - 2)) if ms else []
        trajs = [s for s, _ in picks]
        while len(trajs) < cfg.trajectories:
            trajs.append(complete(p, Schedule(), rng))
        if heur is not None:
            trajs.append(heur)
        states = [st for t in trajs for st in _prefixes(p, t)]
        if heur is not None:
            states += _template_siblings(p, heur, cfg.siblings)
    else:
        visited: list[list[Schedule]] = []  # every step's children
        trajs = [value_greedy(p, value, rng, cfg.k, cfg.explore, visited, templates=cfg.templates)]
        states = [c for kids in visited for c in kids]
    # Completions per state: the trajectories it lies on, rollouts around the first of them,
    # and the heuristic's completion (its decisions repaired where the state made them illegal).
    comps: list[list[Schedule]] = []
    for st in states:
        on = [t for t in trajs if _is_prefix(st, t)]
        guide = on[0] if on else (heur or trajs[0])
        cs = on + [complete(p, st, rng, guide, explore=cfg.rollout_explore) for _ in range(cfg.rollouts)]
        if not on:
            cs.append(complete(p, st, rng, guide))
        if heur is not None and guide is not heur:
            cs.append(complete(p, st, rng, heur))
        comps.append(cs)
    flat = [c for cs in comps for c in cs]
    pred = _predict_ms(model, p, flat)
    measured = {s.content_hash(): m for s, m in tp.measured}
    scale = 1.0
    if measured:  # predictions in this pipeline's measured scale
        own = [(measured[c.content_hash()], pv) for c, pv in zip(flat, pred) if c.content_hash() in measured and math.isfinite(pv)]
        if own:
            scale = float(np.median([m / pv for m, pv in own]))
    best: list[float] = []
    i = 0
    for cs in comps:
        vals = [measured.get(c.content_hash(), scale * pred[i + j]) for j, c in enumerate(cs)]
        i += len(cs)
        best.append(min(vals))
    for i, st in enumerate(states):
        ext = [m for s, m in tp.measured if _is_prefix(st, s)]
        if ext:
            best[i] = min(best[i], min(ext))
    _back_up(p, states, best)
    keep = [i for i, b in enumerate(best) if math.isfinite(b) and b > 0]
    return state_samples(p, [states[i] for i in keep], model, [best[i] for i in keep])


def _template_siblings(p: Pipeline, s: Schedule, n: int) -> list[Schedule]:
    """Along `s`'s trajectory, each step's other choices among the first `n` templates
    (space_templates): the alternatives greedy with V will weigh, with their own targets."""
    out: list[Schedule] = []
    cur = Schedule(name="state")
    for st in order(p):
        out += [with_decision(cur, st, o) for o in template_options(p, cur, st)[:n] if o != s.stages[st]]
        cur = with_decision(cur, st, s.stages[st])
    return out


def _back_up(p: Pipeline, states: list[Schedule], best: list[float]) -> None:
    """A state's best is at most each child's (a child decides one more stage): deepest first."""
    idx = {frozenset(st.stages.items()): i for i, st in enumerate(states)}
    names = order(p)
    for i in sorted(range(len(states)), key=lambda i: -len(states[i].stages)):
        st = states[i]
        d = len(st.stages)
        if d <= 1:
            continue
        j = idx.get(frozenset((n, st.stages[n]) for n in names[: d - 1]))
        if j is not None and best[i] < best[j]:
            best[j] = best[i]


# --- training ------------------------------------------------------------------------------
def make_net(cfg: TrainConfig) -> ValueNet:
    return KINDS[cfg.kind]({"hidden": cfg.hidden, "layers": cfg.layers})


def fit(cfg: TrainConfig, samples: Sequence[Sample], cost_model: CostModel, log: Callable[[str], None] | None = None) -> OfflineValue:
    """A fresh network of `cfg.kind` fitted to `samples` (log targets, mean squared error)."""
    torch.manual_seed(cfg.seed)
    net = make_net(cfg)
    stats = fit_net(net, samples, epochs=cfg.epochs, seed=cfg.seed, rank_weight=cfg.rank_weight, log=log)
    conf = {**asdict(cfg), "value_version": VERSION, "final_loss": stats["final_loss"], "samples": len(samples)}
    return OfflineValue(TorchCostModel(net, f"value function ({cfg.kind})", conf), cost_model)


def loss(value: OfflineValue, samples: Sequence[Sample]) -> float:
    """Mean squared error of V's log ms against the samples' log targets."""
    with torch.no_grad(), inference_threads():
        _, v = value.net(collate(samples, value.net.norm))
    y = torch.log(torch.tensor([s.time_ms for s in samples], dtype=torch.float32))
    return float(nn.functional.mse_loss(v, y))


def train_value(
    cfg: TrainConfig,
    pipelines: list[TrainingPipeline] | None = None,
    model: CostModel | None = None,
    log: Callable[[str], None] | None = None,
) -> tuple[OfflineValue, dict[str, Any]]:
    """Round 0 on measured and random trajectories, then `cfg.rounds` rounds of greedy with
    the current V collecting more states, refitting on all of them each round. Returns V and
    its statistics (per round: states, training loss, held-out loss on 10% of the pipelines)."""
    t0 = time.perf_counter()
    rng = random.Random(cfg.seed)
    tps = pipelines if pipelines is not None else training_pipelines(cfg)
    model = model or model_by_name(cfg.cost_model)
    held = {tp.p.content_hash() for tp in random.Random(cfg.seed + 1).sample(tps, max(1, len(tps) // 10))} if len(tps) > 1 else set()
    data: list[Sample] = []
    for tp in tps:
        data += collect(tp, model, rng, cfg)
    rounds: list[dict[str, Any]] = []

    def refit() -> OfflineValue:
        train = [s for s in data if s.pipeline_hash not in held]
        test = [s for s in data if s.pipeline_hash in held]
        v = fit(cfg, train, model)
        rounds.append({
            "states": len(data), "train_loss": loss(v, train), "heldout_loss": loss(v, test) if test else None,
            "elapsed_s": round(time.perf_counter() - t0, 1),
        })  # fmt: skip
        if log is not None:
            log(f"round {len(rounds) - 1}: {rounds[-1]}")
        return v

    value = refit()
    for _ in range(cfg.rounds):
        order_ = [tp for tp in tps if tp.p.content_hash() not in held]
        for tp in rng.sample(order_, min(cfg.round_pipelines, len(order_))):
            data += collect(tp, model, rng, cfg, value)
        value = refit()
    value.config["rounds_log"] = rounds
    value.config["pipelines"] = len(tps)
    value.config["cost_model_name"] = getattr(model, "name", type(model).__name__)
    return value, {"rounds": rounds, "pipelines": len(tps), "train_s": time.perf_counter() - t0}
