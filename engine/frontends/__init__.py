"""Model importers: ONNX files, PyTorch modules and TensorFlow models into the pipeline IR.

`import_onnx(path)`, `import_torch(module, example_inputs)`, `import_tensorflow(path)` (a
.keras file, a SavedModel directory or a frozen GraphDef .pb) and `import_model(path)` (any
model file, by its kind) return an `ImportResult`
(the pipeline and an `ImportReport`); failures raise `ModelImportError` (unsupported
operators: `UnsupportedModelError`, listing every one).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .common import ImportReport, ImportResult, ModelImportError, UnsupportedModelError
from .onnx_import import import_onnx

if TYPE_CHECKING:
    import torch


def import_torch(
    module: torch.nn.Module, example_inputs: tuple[torch.Tensor, ...], name: str | None = None, weights_dir: str | Path | None = None
) -> ImportResult:
    """See torch_import.import_torch; torch is imported only when this is called (it is slow to load)."""
    from .torch_import import import_torch as impl  # noqa: PLC0415

    return impl(module, example_inputs, name, weights_dir)


def import_tensorflow(path: str | Path, weights_dir: str | Path | None = None) -> ImportResult:
    """See tensorflow_import.import_tensorflow; TensorFlow is imported only when this is called."""
    from .tensorflow_import import import_tensorflow as impl  # noqa: PLC0415

    return impl(path, weights_dir)


# What `import_model` reads: ONNX files and TensorFlow's (a SavedModel is its directory, or
# the saved_model.pb in it, which is what a file dialog can pick).
MODEL_SUFFIXES = (".onnx", ".keras", ".pb")


def is_model_file(path: str | Path) -> bool:
    """A model file `import_model` reads (by its name; a SavedModel directory counts)."""
    from .tensorflow_import import is_tensorflow_model  # noqa: PLC0415  # no TensorFlow import: names only

    return Path(path).suffix.lower() == ".onnx" or is_tensorflow_model(path)


def import_model(path: str | Path, weights_dir: str | Path | None = None) -> ImportResult:
    """Import an ONNX or TensorFlow model file (or SavedModel directory), chosen by its name."""
    if Path(path).suffix.lower() == ".onnx":
        return import_onnx(path, weights_dir)
    return import_tensorflow(path, weights_dir)


__all__ = [
    "MODEL_SUFFIXES",
    "ImportReport",
    "ImportResult",
    "ModelImportError",
    "UnsupportedModelError",
    "import_model",
    "import_onnx",
    "import_tensorflow",
    "import_torch",
    "is_model_file",
]
