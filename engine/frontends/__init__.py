"""Model importers: ONNX files and PyTorch modules into the pipeline IR.

`import_onnx(path)` and `import_torch(module, example_inputs)` return an `ImportResult`
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


__all__ = ["ImportReport", "ImportResult", "ModelImportError", "UnsupportedModelError", "import_onnx", "import_torch"]
