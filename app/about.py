"""Help > About: the versions of what the app runs on."""

from __future__ import annotations

import importlib.metadata

import PySide6
from PySide6.QtCore import qVersion

import engine


def package_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def versions() -> dict[str, str]:
    """Versions shown in Help > About (torch is looked up, never imported: it is slow to load)."""
    return {
        "Schedule Explorer": engine.__version__,
        "Halide": package_version("halide"),
        "PyTorch": package_version("torch"),
        "Qt": qVersion(),
        "PySide6": PySide6.__version__,
    }


def format_flop(n: float) -> str:
    for scale, unit in ((1e12, "TFLOP"), (1e9, "GFLOP"), (1e6, "MFLOP"), (1e3, "kFLOP")):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.3g} FLOP"


def about_html() -> str:
    rows = "".join(f"<tr><td>{k}</td><td>&nbsp;&nbsp;{v}</td></tr>" for k, v in versions().items())
    return (
        "<h3>Schedule Explorer</h3>"
        "<p>Explore Halide schedules of deep-learning and image-processing pipelines: "
        "see the pipeline graph and the loop nest a schedule produces, edit the schedule, "
        "compare the cost model's prediction with measurements.</p>"
        f"<table>{rows}</table>"
    )
