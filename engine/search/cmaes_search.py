"""CMA-ES alone over the schedule encoding (the `cmaes` package): the baseline LaMCTS's
partitions must beat (LaMCTS runs the same CMA-ES, but only inside a selected region).

One CMA-ES over the whole box [0, 1]^d of encoding.py, started at the heuristic seed's
encoding; each generation's candidates are decoded to the nearest legal schedules (guided
by the best ones so far), predicted, and the best few predicted are measured; CMA-ES is
told the rewards (-log ms; measured where measured, calibrated predictions elsewhere,
lamcts.Pool). When it has converged (`should_stop`) it restarts from the best schedule so far
with the initial step size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits

from .base import SearchContext
from .encoding import Encoding, encode
from .lamcts import Pool
from .space import initial_population, measure_seed


@dataclass
class CMAESParams:
    sigma: float = 0.2  # initial step size, in units of the box's width
    popsize: int = 12
    n_init: int = 12  # predicted starting samples around the seed (the pool's first guides)
    decode_k: int = 6  # loop sets sampled per stage when decoding (as LaMCTS)
    guides: int = 3  # best schedules offered to the decoder
    measure_per_round: int = 2  # best predicted of each generation measured


def cmaes_search(ctx: SearchContext, params: CMAESParams | None = None) -> None:
    """CMA-ES over schedule encodings until the budget is spent (see the module doc)."""
    from cmaes import CMA  # noqa: PLC0415  # loads when this search runs, not with the CLI

    prm = params or CMAESParams()
    pool = Pool(Encoding.of(ctx.p))
    seed = measure_seed(ctx)
    init = initial_population(ctx, seed, prm.n_init, prm.n_init, "cmaes")
    pool.measure_best(ctx, pool.add(ctx, init), prm.measure_per_round)
    enc = pool.enc
    bounds = np.column_stack([enc.lo, enc.hi])

    def start(mean: np.ndarray) -> CMA:
        return CMA(mean=mean.copy(), sigma=prm.sigma, bounds=bounds, seed=ctx.rng.randrange(2**31), population_size=prm.popsize)

    opt = start(encode(enc, seed) if seed is not None else pool.X[0])
    while not ctx.done():
        ctx.check()
        with threadpool_limits(1, user_api="blas"):  # small matrices: threads only add contention
            xs = [opt.ask() for _ in range(prm.popsize)]
        guides = pool.top(prm.guides) + ([ctx.best.schedule] if ctx.best else [])
        idx = pool.decode_add(ctx, xs, guides, prm.decode_k, "cmaes")
        r = pool.rewards(ctx)
        with threadpool_limits(1, user_api="blas"):
            opt.tell([(x, -float(r[i])) for x, i in zip(xs, idx)])
        pool.measure_best(ctx, idx, prm.measure_per_round)
        if opt.should_stop():
            best = int(np.argmax(pool.rewards(ctx)))
            opt = start(pool.X[best])
    ctx.check()  # done() is also true when cancelled: report it as such
