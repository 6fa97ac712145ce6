"""The learned placers, registered with engine.placement.policies on import (policies imports this lazily).

- `rl`: Mirhoseini et al.'s co-location groups and sequence-to-sequence placer, REINFORCE (rl.py).
- `hrl`: the hierarchical planner, a learned grouper trained jointly with the placer (hrl.py).
- `gnn`: a Placeto-style graph network trained on random graphs, placing unseen ones (gnn.py).
"""

from __future__ import annotations

from ..policies import register
from .gnn import place_gnn
from .hrl import place_hrl
from .rl import place_rl

__all__ = ["place_gnn", "place_hrl", "place_rl"]

register("rl", place_rl)
register("hrl", place_hrl)
register("gnn", place_gnn)
