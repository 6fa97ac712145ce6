"""Devices, links and device profiles (JSON), validated with errors naming the file and field.

A profile is a set of devices (peak FLOP/s, memory bandwidth, memory capacity, the host they
sit in) and the links between every pair of them (latency α plus bytes / bandwidth β; the
simulator gives each device one send and one receive channel). The shipped profiles in
`resources/devices/*.json` are *simulated*: their figures are vendors' published peaks, cited
in each profile's description. `local_profile()` is this machine: one device per CPU core the
process may use, with figures measured here.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from ..resources import DEVICES_DIR

__all__ = [
    "KINDS",
    "Device",
    "DeviceProfile",
    "Link",
    "ProfileError",
    "load_profile",
    "local_profile",
    "parse_profile",
    "shipped_profiles",
]

KINDS = ("cpu", "gpu")
MAX_PROFILE_BYTES = 1 << 20  # a profile is a few KB; anything larger is not one


class ProfileError(ValueError):
    """A device profile that cannot be used; the message names the file and the field at fault."""


@dataclass(frozen=True)
class Device:
    name: str
    kind: str  # "cpu" | "gpu"
    peak_flops: float  # FLOP/s
    mem_bandwidth: float  # bytes/s
    memory_bytes: int
    host: str = "host0"
    measured: bool = False  # True only for devices of this machine (local profile)
    launch_s: float = 0.0  # fixed cost of starting one stage (a kernel launch, a thread-pool dispatch)
    # A CPU has no copy engine: its own core copies a tensor it sends, so it computes nothing
    # else meanwhile (a GPU's DMA engine sends while the device computes).
    copy_on_core: bool = False


@dataclass(frozen=True)
class Link:
    a: str
    b: str
    latency_s: float
    bandwidth: float  # bytes/s; an undirected pair

    def seconds(self, nbytes: float) -> float:
        """Time to move `nbytes` over this link (α + bytes/β)."""
        return self.latency_s + nbytes / self.bandwidth


@dataclass(frozen=True)
class DeviceProfile:
    name: str
    simulated: bool
    description: str
    devices: tuple[Device, ...]
    links: tuple[Link, ...]
    _names: dict[str, int] = field(init=False, repr=False, compare=False)
    _links: dict[tuple[int, int], Link] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        table: dict[tuple[int, int], Link] = {}
        names = {d.name: i for i, d in enumerate(self.devices)}
        for lk in self.links:
            i, j = names[lk.a], names[lk.b]
            table[(i, j)] = table[(j, i)] = lk
        object.__setattr__(self, "_names", names)
        object.__setattr__(self, "_links", table)

    def index(self, device_name: str) -> int:
        try:
            return self._names[device_name]
        except KeyError:
            raise ProfileError(f"profile {self.name!r}: no device {device_name!r} (devices: {', '.join(self._names)})") from None

    def link(self, a: int, b: int) -> Link:
        try:
            return self._links[(a, b)]
        except KeyError:
            raise ProfileError(f"profile {self.name!r}: no link between device {a} and device {b}") from None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "simulated": self.simulated,
            "description": self.description,
            "devices": [
                {
                    "name": d.name,
                    "kind": d.kind,
                    "peak_flops": d.peak_flops,
                    "mem_bandwidth": d.mem_bandwidth,
                    "memory_bytes": d.memory_bytes,
                    "host": d.host,
                    "launch_s": d.launch_s,
                    **({"measured": True} if d.measured else {}),
                    **({"copy_on_core": True} if d.copy_on_core else {}),
                }
                for d in self.devices
            ],
            "links": [{"a": lk.a, "b": lk.b, "latency_s": lk.latency_s, "bandwidth": lk.bandwidth} for lk in self.links],
        }


# --- parsing -------------------------------------------------------------------------


def _field(obj: dict[str, Any], key: str, where: str, kind: str, default: Any = None, required: bool = True) -> Any:
    """One checked field of a JSON object: `kind` is "str", "bool", "positive" (a finite number > 0),
    "nonneg" (finite, >= 0) or "int+" (a positive integer)."""
    if key not in obj:
        if required:
            raise ProfileError(f"{where}.{key}: missing")
        return default
    v = obj[key]
    at = f"{where}.{key}"
    if kind == "str":
        if not isinstance(v, str) or not v.strip():
            raise ProfileError(f"{at}: expected a non-empty string, got {v!r}")
        return v
    if kind == "bool":
        if not isinstance(v, bool):
            raise ProfileError(f"{at}: expected true or false, got {v!r}")
        return v
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise ProfileError(f"{at}: expected a finite number, got {v!r}")
    if kind == "int+":
        if not float(v).is_integer() or v <= 0:
            raise ProfileError(f"{at}: expected a positive whole number of bytes, got {v!r}")
        return int(v)
    if kind == "positive" and v <= 0:
        raise ProfileError(f"{at}: expected a number > 0, got {v!r}")
    if kind == "nonneg" and v < 0:
        raise ProfileError(f"{at}: expected a number >= 0, got {v!r}")
    return float(v)


def _known_fields(obj: dict[str, Any], fields: Sequence[str], where: str) -> None:
    """A JSON object with a field not among `fields` is refused, naming the first such (sorted) and all `fields`."""
    extra = sorted(set(obj) - set(fields))
    if extra:
        raise ProfileError(f"{where}: unknown field {extra[0]!r} (fields: {', '.join(fields)})")


def _names(v: Any, at: str, known: dict[str, int]) -> list[str]:
    """A link end: one device name or a list of them."""
    items = v if isinstance(v, list) else [v]
    if not items:
        raise ProfileError(f"{at}: expected a device name or a non-empty list of them")
    for x in items:
        if not isinstance(x, str):
            raise ProfileError(f"{at}: expected a device name, got {x!r}")
        if x not in known:
            raise ProfileError(f"{at}: unknown device {x!r} (devices: {', '.join(known)})")
    return items


def parse_profile(body: Any, origin: str) -> DeviceProfile:
    """A profile from its JSON body; `origin` (the file) begins every error message.

    Links: each entry's `a` and `b` are a device name or a list of names and connect every
    pair of the two (so one entry describes a PCIe tree or a network between hosts); every
    pair of devices needs exactly one link."""
    if not isinstance(body, dict):
        raise ProfileError(f"{origin}: expected a JSON object with name, simulated, description, devices, links")
    _known_fields(body, sorted(["name", "simulated", "description", "devices", "links"]), origin)
    name = _field(body, "name", origin, "str")
    simulated = _field(body, "simulated", origin, "bool")
    description = _field(body, "description", origin, "str")
    raw_devices = body.get("devices")
    if not isinstance(raw_devices, list) or not raw_devices:
        raise ProfileError(f"{origin}.devices: expected a non-empty list of devices, got {raw_devices!r}")
    device_keys = {"name", "kind", "peak_flops", "mem_bandwidth", "memory_bytes", "host", "launch_s", "measured", "copy_on_core"}
    devices: list[Device] = []
    known: dict[str, int] = {}
    for k, d in enumerate(raw_devices):
        where = f"{origin}.devices[{k}]"
        if not isinstance(d, dict):
            raise ProfileError(f"{where}: expected an object, got {d!r}")
        _known_fields(d, sorted(device_keys), where)
        dname = _field(d, "name", where, "str")
        if dname in known:
            raise ProfileError(f"{where}.name: duplicate device name {dname!r}")
        kind = _field(d, "kind", where, "str")
        if kind not in KINDS:
            raise ProfileError(f"{where}.kind: expected one of {', '.join(KINDS)}, got {kind!r}")
        devices.append(
            Device(
                dname,
                kind,
                _field(d, "peak_flops", where, "positive"),
                _field(d, "mem_bandwidth", where, "positive"),
                _field(d, "memory_bytes", where, "int+"),
                _field(d, "host", where, "str", "host0", required=False),
                _field(d, "measured", where, "bool", False, required=False),
                _field(d, "launch_s", where, "nonneg", 0.0, required=False),
                _field(d, "copy_on_core", where, "bool", False, required=False),
            )
        )
        known[dname] = k
    raw_links = body.get("links", [])
    if not isinstance(raw_links, list):
        raise ProfileError(f"{origin}.links: expected a list of links, got {raw_links!r}")
    links: list[Link] = []
    seen: dict[frozenset[str], int] = {}
    for k, lk in enumerate(raw_links):
        where = f"{origin}.links[{k}]"
        if not isinstance(lk, dict):
            raise ProfileError(f"{where}: expected an object, got {lk!r}")
        _known_fields(lk, ["a", "b", "latency_s", "bandwidth"], where)
        for end in ("a", "b"):
            if end not in lk:
                raise ProfileError(f"{where}.{end}: missing")
        ends_a, ends_b = _names(lk["a"], f"{where}.a", known), _names(lk["b"], f"{where}.b", known)
        latency = _field(lk, "latency_s", where, "nonneg")
        bandwidth = _field(lk, "bandwidth", where, "positive")
        pairs = {frozenset((x, y)) for x in ends_a for y in ends_b if x != y}
        if not pairs:
            raise ProfileError(f"{where}: connects no pair of distinct devices")
        for pair in sorted(pairs, key=lambda p: sorted(p, key=known.__getitem__)):
            x, y = sorted(pair, key=known.__getitem__)
            if pair in seen:
                raise ProfileError(f"{where}: {x} <-> {y} is already linked by links[{seen[pair]}]")
            seen[pair] = k
            links.append(Link(x, y, latency, bandwidth))
    for i, dx in enumerate(devices):
        for dy in devices[i + 1 :]:
            if frozenset((dx.name, dy.name)) not in seen:
                raise ProfileError(f"{origin}.links: no link between {dx.name!r} and {dy.name!r} (every pair of devices needs one)")
    return DeviceProfile(name, simulated, description, tuple(devices), tuple(links))


def shipped_profiles() -> list[str]:
    """The names of the profiles in resources/devices/ (their file names without .json)."""
    return sorted(p.stem for p in DEVICES_DIR.glob("*.json"))


def load_profile(spec: str) -> DeviceProfile:
    """A shipped profile by name ("cpu_gpu", ...), "local" (this machine), or a path to a JSON file."""
    if spec == "local":
        return local_profile()
    path = Path(spec)
    if spec in shipped_profiles():
        path = DEVICES_DIR / f"{spec}.json"
    elif path.suffix.lower() != ".json":
        raise ProfileError(
            f"unknown device profile {spec!r}: not a shipped one ({', '.join([*shipped_profiles(), 'local'])}) nor a .json file"
        )
    try:
        if path.stat().st_size > MAX_PROFILE_BYTES:
            raise ProfileError(f"{path}: {path.stat().st_size} bytes, larger than any device profile ({MAX_PROFILE_BYTES})")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProfileError(f"{path}: no such device profile") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{path}: cannot be read ({exc})") from None
    try:
        body = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProfileError(f"{path}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise ProfileError(f"{path}: nested too deeply to be a device profile") from None
    return parse_profile(body, str(path))


# --- this machine --------------------------------------------------------------------


@dataclass(frozen=True)
class LocalFigures:
    """What `local_profile` measured on this machine (once per process)."""

    copy_bandwidth: float  # bytes copied per second, one thread copying a buffer larger than the caches
    memory_bandwidth: float  # bytes moved per second by that copy (read + write): a stage's roofline
    handoff_latency_s: float  # one wake-up of a waiting thread through a pipe (a send/receive event)
    core_flops: float  # FLOP/s of one thread's float32 matrix multiply


def _copy_bandwidth(nbytes: int = 32 << 20, repeats: int = 5) -> float:
    src = np.ones(nbytes // 4, dtype=np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # touch the pages first
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
    return nbytes / best  # bytes copied; the memory traffic is twice that (read + write)


def _handoff_latency(rounds: int = 200) -> float:
    """Half a ping-pong between two threads over pipes: the cost of telling a waiting worker
    that a tensor is ready (what a cross-process send/receive event costs beside the copy)."""
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()

    def echo() -> None:
        for _ in range(rounds):
            os.read(r1, 1)
            os.write(w2, b"x")

    t = threading.Thread(target=echo, daemon=True)
    t.start()
    try:
        t0 = time.perf_counter()
        for _ in range(rounds):
            os.write(w1, b"x")
            os.read(r2, 1)
        elapsed = time.perf_counter() - t0
    finally:
        t.join()
        for fd in (r1, w1, r2, w2):
            os.close(fd)
    return elapsed / rounds / 2


def _core_flops(n: int = 384, repeats: int = 5) -> float:
    from threadpoolctl import threadpool_limits  # noqa: PLC0415  # only this measurement needs it (scikit-learn's dependency)

    a = np.ones((n, n), dtype=np.float32)
    b = np.ones((n, n), dtype=np.float32)
    best = math.inf
    with threadpool_limits(limits=1):  # one core's figure, as each local device is one core
        a @ b
        for _ in range(repeats):
            t0 = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best


@cache
def local_figures() -> LocalFigures:
    """Measured once per process (about 0.1 s) and cached."""
    copy = _copy_bandwidth()
    return LocalFigures(copy, 2 * copy, _handoff_latency(), _core_flops())


def local_cores() -> list[int]:
    """The CPU cores this process may run on (each one device of the local profile)."""
    return sorted(os.sched_getaffinity(0))


def local_profile() -> DeviceProfile:
    """This machine: one CPU device per core the process may use, measured figures, shared memory between them."""
    fig = local_figures()
    cores = local_cores()
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    devices = tuple(
        Device(
            f"cpu{c}",
            "cpu",
            fig.core_flops,
            fig.memory_bandwidth,
            total // len(cores),
            host="local",
            measured=True,
            launch_s=fig.handoff_latency_s,  # a stage starts when the executor hands it over: one wake-up
            copy_on_core=True,  # the sender's core copies into the receiver's slot (execute.py)
        )
        for c in cores
    )
    links = tuple(Link(x.name, y.name, fig.handoff_latency_s, fig.copy_bandwidth) for i, x in enumerate(devices) for y in devices[i + 1 :])
    description = (
        f"This machine: {len(cores)} CPU core(s) {cores}, one device each (a worker process pinned to the core, one Halide thread). "
        f"Measured here: one thread's float32 matmul {fig.core_flops / 1e9:.1f} GFLOP/s, memcpy {fig.copy_bandwidth / 1e9:.1f} GB/s "
        f"(also the shared-memory link's bandwidth), a pipe hand-off {fig.handoff_latency_s * 1e6:.1f} us (the link's latency); "
        f"memory: physical RAM shared equally."
    )
    return DeviceProfile("local", False, description, devices, links)
