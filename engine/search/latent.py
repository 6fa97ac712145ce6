"""A learned latent space for LaMCTS's partitions (PlaLaM, Yang et al.): a small autoencoder.

Schedule encodings (encoding.py) are long (26 to 130+ numbers for the zoo) and most of the
box holds no legal schedule: one-hot locations, tile fractions that only some locations
have, flags that go together. k-means, the SVM boundaries and CMA-ES all work better in a
few dimensions that follow where legal schedules lie. The autoencoder (x -> tanh latent of
`dim` numbers in [-1, 1] -> sigmoid reconstruction in [0, 1]) is fitted on encodings of
random legal schedules, which cost no evaluation (sampling is cheap; predicting and
measuring are what a budget counts), plus the search's own samples.

torch runs on one thread here (small matrices; the machine is shared) and under its own
seed (`torch.random.fork_rng`): a fit is a function of its data and seed, and the
process's global torch random state is left as it was.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class AutoencoderParams:
    dim: int = 8  # latent dimensions
    hidden: int = 64
    steps: int = 300  # full-batch Adam steps per fit
    lr: float = 1e-2


@dataclass
class Autoencoder:
    """x in [0, 1]^n <-> z in [-1, 1]^dim; `fit` before `encode` / `decode`."""

    n: int
    params: AutoencoderParams = field(default_factory=AutoencoderParams)
    seed: int = 0
    losses: list[float] = field(default_factory=list)  # reconstruction MSE per step of the last fit

    def __post_init__(self) -> None:
        if self.n < 1 or self.params.dim < 1:
            raise ValueError(f"autoencoder: input and latent sizes must be positive, got n={self.n}, dim={self.params.dim}")
        self._net: tuple[Any, Any] | None = None  # (encoder, decoder) torch modules once fitted

    @property
    def lo(self) -> np.ndarray:
        return -np.ones(self.params.dim)

    @property
    def hi(self) -> np.ndarray:
        return np.ones(self.params.dim)

    def fit(self, X: np.ndarray) -> list[float]:
        """Fit (from scratch, under `seed`) to reconstruct the rows of X; returns the losses."""
        import torch  # noqa: PLC0415  # loads when a latent search runs, not with the engine

        X = np.asarray(X, dtype=np.float32)
        if X.ndim != 2 or X.shape[1] != self.n or len(X) == 0:
            raise ValueError(f"autoencoder: expected a non-empty (rows, {self.n}) array, got shape {X.shape}")
        prm, threads = self.params, torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(self.seed)
                enc = torch.nn.Sequential(
                    torch.nn.Linear(self.n, prm.hidden), torch.nn.ELU(), torch.nn.Linear(prm.hidden, prm.dim), torch.nn.Tanh()
                )
                dec = torch.nn.Sequential(
                    torch.nn.Linear(prm.dim, prm.hidden), torch.nn.ELU(), torch.nn.Linear(prm.hidden, self.n), torch.nn.Sigmoid()
                )
                opt = torch.optim.Adam([*enc.parameters(), *dec.parameters()], lr=prm.lr)
                xt = torch.from_numpy(X)
                self.losses = []
                for _ in range(prm.steps):
                    opt.zero_grad()
                    loss = torch.mean((dec(enc(xt)) - xt) ** 2)
                    loss.backward()
                    opt.step()
                    self.losses.append(loss.item())
        finally:
            torch.set_num_threads(threads)
        self._net = (enc.eval(), dec.eval())
        return self.losses

    def _run(self, k: int, A: np.ndarray) -> np.ndarray:
        import torch  # noqa: PLC0415

        if self._net is None:
            raise RuntimeError("autoencoder: fit() before encode() or decode()")
        A = np.atleast_2d(np.asarray(A, dtype=np.float32))
        with torch.no_grad():
            return self._net[k](torch.from_numpy(A)).numpy().astype(np.float64)

    def encode(self, X: np.ndarray) -> np.ndarray:
        """Latent codes of the rows of X."""
        return self._run(0, X)

    def decode(self, Z: np.ndarray) -> np.ndarray:
        """Reconstructions (in [0, 1]) of the latent rows Z."""
        return self._run(1, Z)
