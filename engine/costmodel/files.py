"""Saving and checking the cost-model package's files: weights, model text, metadata, datasets.

Every save goes through `atomic_path` (a temp file in the same directory, fsync, then
`os.replace`), so an interrupted `costmodel train` leaves the previous file or the new
one, never half of one. Loading checks a file before a native library sees it: LightGBM
aborts the whole process on a truncated text model, so `lightgbm_text` checks the
structure (and the sha256 the metadata recorded at save time, when there is one) first;
torch weights must be a zip archive, loaded with weights_only=True by the caller. Every
problem is one `ModelFileError` naming the file and what is wrong with it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import secrets
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


class ModelFileError(ValueError):
    """A cost-model file (weights, model text, metadata) that is missing, incomplete or malformed."""


# --- saving ----------------------------------------------------------------------------------
@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A fresh temp path beside `path` for the caller to write (by any means: open, gzip,
    SQLite); on a normal exit it is fsynced and renamed onto `path`, on an exception removed."""
    dest = Path(path)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    # Created here (exclusive, so no other writer shares it) with the umask's usual mode.
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    try:
        yield tmp
        with open(tmp, "rb+") as f:  # the data on disk before the name points at it
            os.fsync(f.fileno())
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(dest.parent)


def _fsync_dir(d: Path) -> None:
    """Make the rename itself durable (where the platform lets a directory be opened)."""
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def atomic_open(path: str | Path, mode: str = "wb") -> Iterator[IO[Any]]:
    """`open(path, mode)` whose file only appears at `path`, complete, when the block ends."""
    encoding = None if "b" in mode else "utf-8"  # binary modes take no encoding
    with atomic_path(path) as tmp, open(tmp, mode, encoding=encoding) as f:
        yield f


def write_bytes(path: str | Path, data: bytes) -> str:
    """Save `data` atomically; returns its sha256 (hex), for the metadata to record."""
    with atomic_open(path, "wb") as f:
        f.write(data)
    return hashlib.sha256(data).hexdigest()


def write_json(path: str | Path, obj: Any, indent: int = 2) -> None:
    with atomic_open(path, "w") as f:
        f.write(json.dumps(obj, indent=indent))


# --- loading ---------------------------------------------------------------------------------
def read_json(path: str | Path) -> dict[str, Any]:
    """A JSON object from `path`; unreadable, malformed or not an object is a ModelFileError."""
    try:
        obj = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ModelFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelFileError(f"{path}: not valid JSON ({exc}); an interrupted save? retrain or restore it") from None
    if not isinstance(obj, dict):
        raise ModelFileError(f"{path}: expected a JSON object, found {type(obj).__name__}")
    return obj


def read_metadata(path: str | Path, feature_version: int) -> dict[str, Any]:
    """A model's JSON metadata, refused when it was trained on another feature version."""
    cfg = read_json(path)
    if cfg.get("feature_version") != feature_version:
        raise ModelFileError(f"{path}: trained on features version {cfg.get('feature_version')}, this build has {feature_version}: retrain")
    return cfg


def read_checked(path: str | Path, sha256: str | None) -> bytes:
    """The bytes of `path`, checked against the sha256 its metadata recorded (when it did)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ModelFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        raise ModelFileError(
            f"{path}: contents do not match the sha256 recorded in its metadata (truncated, or saved apart from it?): retrain"
        )
    return data


def lightgbm_text(path: str | Path, sha256: str | None = None) -> str:
    """The text of a LightGBM model file, after checking it is whole: the `tree` header,
    `tree_sizes` whose byte counts lead from `Tree=0` exactly to `end of trees`, each block
    starting with its `Tree=k` line, and the `pandas_categorical` line LightGBM's Python
    package writes last. (LightGBM parses the trees at the offsets `tree_sizes` gives and
    crashes the process when the file is shorter.)"""
    raw = read_checked(path, sha256)

    def bad(what: str) -> ModelFileError:
        return ModelFileError(f"{path}: not a complete LightGBM text model ({what}); an interrupted save? retrain")

    if not raw.startswith(b"tree\nversion="):
        raise bad("no 'tree' / 'version=' header")
    m = re.search(rb"^tree_sizes=([0-9 ]*)$", raw, re.M)
    if m is None:
        raise bad("no tree_sizes line")
    sizes = [int(x) for x in m.group(1).split()]
    pos, end = raw.find(b"\nTree=0\n") + 1, raw.find(b"\nend of trees\n")
    if not sizes or pos <= 0:
        raise bad("no trees")
    if end < 0:
        raise bad("no 'end of trees' marker")
    for k, size in enumerate(sizes):
        if not raw.startswith(b"Tree=%d\n" % k, pos):
            raise bad(f"tree {k} of the {len(sizes)} in tree_sizes is not where tree_sizes puts it")
        pos += size
    if pos != end + 1:
        raise bad(f"the {len(sizes)} trees in tree_sizes do not end at 'end of trees'")
    if re.search(rb"\npandas_categorical:[^\n]*\n\Z", raw) is None:
        raise bad("it does not end with the pandas_categorical line")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise bad("not UTF-8 text") from None


def torch_archive(path: str | Path, sha256: str | None = None) -> bytes:
    """The bytes of a `.pt`, after checking them against the recorded sha256 (when there is
    one) and that they are torch's zip archive (what torch.save writes), whole: a bare
    pickle is refused before torch sees it, so not even the weights_only unpickler reads it."""
    data = read_checked(path, sha256)
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            names = z.namelist()
            broken = z.testzip()  # CRCs: a damaged archive fails here
    except (zipfile.BadZipFile, EOFError) as exc:
        raise ModelFileError(f"{path}: not a torch weights archive (a zip file as torch.save writes: {exc})") from None
    if broken is not None:
        raise ModelFileError(f"{path}: damaged torch weights archive (member {broken} fails its CRC)")
    if not any(n.endswith("/data.pkl") for n in names):
        raise ModelFileError(f"{path}: a zip file but not a torch weights archive (no data.pkl)")
    return data


# --- the model on this machine: its environment, the user's fine-tuned copy ------------------
def model_environment(directory: str | Path, stem: str) -> tuple[str, str, int] | None:
    """(target, host, threads) of the measurements the model `stem` in `directory` was trained
    or fine-tuned on: its metadata's `environment`, else the `split.json` beside it (what
    `costmodel train` writes), else None (unknown)."""
    d = Path(directory)
    for path in (d / f"{stem}.json", d / "split.json"):
        if path.exists():
            env = read_json(path).get("environment")
            if isinstance(env, list) and len(env) == 3:
                return (str(env[0]), str(env[1]), int(env[2]))
    return None


def finetuned_root() -> Path:
    """Where fine-tuned models live: the user data directory's `costmodel-finetuned/`, never
    the shipped resources (`costmodel finetune`, the app's Fine-tune action)."""
    from platformdirs import user_data_dir  # noqa: PLC0415

    return Path(user_data_dir("schedule-explorer", appauthor=False)) / "costmodel-finetuned"


CURRENT = "current.json"  # names the complete version directory in use


def finetuned_dir(root: Path | None = None) -> Path | None:
    """The fine-tuned model directory in use (None: none, or reset). A version directory only
    becomes current once every file in it is written, so a reader never sees half a model."""
    root = root or finetuned_root()
    pointer = root / CURRENT
    if not pointer.exists():
        return None
    name = read_json(pointer).get("dir")
    if not isinstance(name, str) or "/" in name or name.startswith("."):
        raise ModelFileError(f"{pointer}: no version directory named in it")
    d = root / name
    if not d.is_dir():
        raise ModelFileError(f"{pointer}: names {name}, which does not exist (removed by hand?): reset the fine-tuned model")
    return d


@contextmanager
def new_version(root: Path | None = None) -> Iterator[Path]:
    """A fresh version directory under `root` for the caller to fill; on a normal exit it becomes
    current (`current.json` replaced atomically) and older versions are removed, on an
    exception it is removed and the current one stays."""
    import shutil  # noqa: PLC0415

    root = root or finetuned_root()
    root.mkdir(parents=True, exist_ok=True)
    d = root / f"v-{int(time.time() * 1000)}-{secrets.token_hex(3)}"
    d.mkdir()
    try:
        yield d
        _fsync_dir(d)
        write_json(root / CURRENT, {"dir": d.name})
    except BaseException:
        shutil.rmtree(d, ignore_errors=True)
        raise
    for old in root.glob("v-*"):
        if old != d and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)


def reset_finetuned(root: Path | None = None) -> bool:
    """Back to the shipped model: the pointer goes first (one atomic unlink), then the
    versions. Returns whether there was a fine-tuned model."""
    import shutil  # noqa: PLC0415

    root = root or finetuned_root()
    pointer = root / CURRENT
    had = pointer.exists()
    pointer.unlink(missing_ok=True)
    if root.exists():
        _fsync_dir(root)
        for old in root.glob("v-*"):
            shutil.rmtree(old, ignore_errors=True)
    return had


def finetuned_for_this_host(root: Path | None = None) -> list[Path]:
    """[the fine-tuned model directory] when there is one and it was fine-tuned on this
    machine's target and host, else [] (a model of another machine is never used silently:
    the CLI and the app say when the host differs)."""
    if not ((root or finetuned_root()) / CURRENT).exists():  # checked first: a plain start loads no Halide
        return []
    from ..halide_backend import target_string  # noqa: PLC0415
    from ..measure import host_fingerprint  # noqa: PLC0415

    try:
        d = finetuned_dir(root)
        env = model_environment(d, "tvm") if d is not None else None
    except ModelFileError as exc:
        import sys  # noqa: PLC0415

        print(f"fine-tuned cost model not usable ({exc}); using the next", file=sys.stderr)
        return []
    return [d] if d is not None and env is not None and env[:2] == (target_string(), host_fingerprint()) else []
