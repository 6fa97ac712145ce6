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

__all__ = [
    "COSTMODEL_DIR",
    "DEVICES_DIR",
    "MAKE_MODELS",
    "MAKE_TF_MODELS",
    "MODELS_DIR",
    "PLACEMENT_DIR",
    "TF_MODELS_DIR",
    "resource_path",
    "tf_sample_models",
]


def resource_path(*parts: str) -> Path:
    """A file or folder under resources/, as a filesystem path (it need not exist)."""
    path = files("resources").joinpath(*parts)
    if not isinstance(path, Path):  # e.g. a zipimport: callers need real files
        raise RuntimeError(f"resources/{'/'.join(parts)} is not on the filesystem ({path!r}): install Schedule Explorer unzipped")
    return path


COSTMODEL_DIR = resource_path("costmodel")  # the shipped trained cost models and their training set
MODELS_DIR = resource_path("models")  # the sample ONNX models
DEVICES_DIR = resource_path("devices")  # the shipped (simulated) device profiles for placement
PLACEMENT_DIR = resource_path("placement")  # the trained graph-network placer's weights (engine/placement/learned/gnn.py)
MAKE_MODELS = MODELS_DIR / "make_models.py"  # their PyTorch definitions (also ResNet-50 for `bench import`)
TF_MODELS_DIR = resource_path("tf_models")  # the sample TensorFlow models (a .keras file, a SavedModel directory)
MAKE_TF_MODELS = TF_MODELS_DIR / "make_tf_models.py"  # their Keras definitions


def tf_sample_models() -> list[Path]:
    """The shipped TensorFlow models, sorted: each .keras file and each SavedModel directory
    (the paths `engine.frontends.import_tensorflow` and `api.load_pipeline` take)."""
    found = [p for p in TF_MODELS_DIR.iterdir() if p.suffix == ".keras" or (p / "saved_model.pb").is_file()]
    return sorted(found)
