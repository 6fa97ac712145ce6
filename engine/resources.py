"""Where the data shipped with Schedule Explorer lies: the one place that knows.

`resources/` is a package, installed with the wheel (package data) or found in a source
checkout, and located through importlib.resources rather than paths computed from
`__file__`, so the same code works from a checkout, an editable install and a wheel.
Wheels install unzipped, so the traversable is a real folder and callers get plain Paths
(glob, open, hand to ONNX Runtime or a subprocess).
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

__all__ = ["COSTMODEL_DIR", "DEVICES_DIR", "MAKE_MODELS", "MODELS_DIR", "resource_path"]


def resource_path(*parts: str) -> Path:
    """A file or folder under resources/, as a filesystem path (it need not exist)."""
    path = files("resources").joinpath(*parts)
    if not isinstance(path, Path):  # e.g. a zipimport: callers need real files
        raise RuntimeError(f"resources/{'/'.join(parts)} is not on the filesystem ({path!r}): install Schedule Explorer unzipped")
    return path


COSTMODEL_DIR = resource_path("costmodel")  # the shipped trained cost models and their training set
MODELS_DIR = resource_path("models")  # the sample ONNX models
DEVICES_DIR = resource_path("devices")  # the shipped (simulated) device profiles for placement
MAKE_MODELS = MODELS_DIR / "make_models.py"  # their PyTorch definitions (also ResNet-50 for `bench import`)
