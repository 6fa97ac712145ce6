"""Where measurements run: this machine (`local`, the default) or a Ray cluster.

`parse_cluster(text)` reads the `--cluster` option (`local`, `ray`, `ray://HOST:PORT`,
`HOST:PORT`) into a `ClusterSpec`; `make_runner(spec)` returns the matching runner behind
the one runner interface (measure.MeasureRunner): the local `Runner`, or a `RayRunner`
(engine/cluster/ray_runner.py) that sends each job to a node of one host kind. Ray is an
optional extra, imported only when a Ray spec is used; without it the error says how to
install it. `describe(spec)` lists the nodes (host kind, Halide target, CPUs, load) for the
app's cluster settings.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from ..measure import MeasureRunner, Runner, default_threads, host_fingerprint

INSTALL_HINT = "Ray is not installed; install the cluster extra: pip install -e .[cluster]"
CLUSTER_HELP = (
    "where measurements run: local (default, this machine), ray (a Ray instance of its own on this machine, "
    "or the cluster $RAY_ADDRESS names), ray://HOST:PORT (Ray Client) or HOST:PORT (a running cluster's head)"
)
_HOST_PORT = re.compile(r"^(?P<host>[A-Za-z0-9.\-]+|\[[0-9A-Fa-f:]+\]):(?P<port>[0-9]{1,5})$")
LOOPBACK = ("127.0.0.1", "localhost", "[::1]")


class ClusterError(ValueError):
    """A cluster that cannot be used (a malformed --cluster, Ray missing, unreachable): one line."""


@dataclass(frozen=True)
class ClusterSpec:
    """`kind` "local" or "ray"; `address` None (a local Ray instance of its own, or
    $RAY_ADDRESS), "ray://HOST:PORT" or "HOST:PORT"."""

    kind: str = "local"
    address: str | None = None

    def __str__(self) -> str:
        return self.address or self.kind

    @property
    def loopback(self) -> bool:
        """Whether every Ray address involved is this machine's loopback (then Ray is told to
        use 127.0.0.1, never the machine's network address)."""
        if self.kind != "ray":
            return True
        addr = self.address or os.environ.get("RAY_ADDRESS") or ""
        host = addr.removeprefix("ray://").rsplit(":", 1)[0]
        return not addr or host in LOOPBACK


def parse_cluster(text: str) -> ClusterSpec:
    """`local`, `ray`, `ray://HOST:PORT` or `HOST:PORT`; anything else is a ClusterError saying what is expected."""
    t = text.strip()
    if t in ("", "local"):
        return ClusterSpec("local")
    if t == "ray":
        return ClusterSpec("ray")
    rest = t.removeprefix("ray://")
    m = _HOST_PORT.match(rest)
    if m is None or not 1 <= int(m["port"]) <= 65535:
        raise ClusterError(f"expected local, ray, ray://HOST:PORT or HOST:PORT (a port from 1 to 65535), got {text!r}")
    return ClusterSpec("ray", t)


def make_runner(spec: ClusterSpec | str = "local", threads: int | None = None, **ray_options: Any) -> MeasureRunner:
    """The runner for `spec`: `Runner(threads)` for local, a `RayRunner` for a Ray spec
    (`ray_options` go to it: kind, max_retries, startup_s, ...)."""
    spec = parse_cluster(spec) if isinstance(spec, str) else spec
    if spec.kind == "local":
        return Runner(threads)
    from .ray_runner import RayRunner  # noqa: PLC0415  # Ray only when a Ray spec is used

    return RayRunner(spec, threads=threads, **ray_options)


@dataclass
class NodeInfo:
    """One node as the app's cluster settings show it. `load` is the node's 1-minute load
    average divided by its cores (None when it could not be asked)."""

    node_id: str
    address: str
    alive: bool
    cpus: float
    host: str = ""
    target: str = ""
    load: float | None = None
    error: str = ""


def local_node() -> NodeInfo:
    """This machine as a node (the `local` spec)."""
    from ..halide_backend import target_string  # noqa: PLC0415  # Halide only when asked

    cores = os.cpu_count() or 1
    return NodeInfo("local", "127.0.0.1", True, float(default_threads()), host_fingerprint(), target_string(), os.getloadavg()[0] / cores)


def describe(spec: ClusterSpec | str) -> list[NodeInfo]:
    """The nodes measurements would run on: this machine for `local`, every node of the
    Ray cluster (connecting to it) otherwise."""
    spec = parse_cluster(spec) if isinstance(spec, str) else spec
    if spec.kind == "local":
        return [local_node()]
    from .ray_runner import cluster_nodes, connect  # noqa: PLC0415

    connect(spec)
    return cluster_nodes()


def shutdown() -> None:
    """Disconnect from Ray (stopping the instance this process started, if any); nothing if Ray was never used."""
    import sys  # noqa: PLC0415

    if "engine.cluster.ray_runner" in sys.modules:
        sys.modules["engine.cluster.ray_runner"].disconnect()


__all__ = [
    "CLUSTER_HELP", "INSTALL_HINT", "ClusterError", "ClusterSpec", "NodeInfo", "describe", "local_node", "make_runner",
    "parse_cluster", "shutdown",
]  # fmt: skip
