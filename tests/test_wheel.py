"""The built wheel holds every package and every file read at run time: a package list in
pyproject.toml once left out engine/search, engine/costmodel, engine/frontends and resources/,
and only a non-editable install showed it. .ci/wheel_check.py installs the wheel and runs it."""

import importlib.util
import zipfile
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def _wheel_check() -> ModuleType:
    """.ci/wheel_check.py, loaded from its path (.ci is no package)."""
    spec = importlib.util.spec_from_file_location("wheel_check", ROOT / ".ci" / "wheel_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_wheel_holds_every_module_and_the_shipped_data(tmp_path: Path) -> None:
    wc = _wheel_check()
    wheel = wc.build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        entry_points = next(z.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))

    for must in (
        "main.py",
        "engine/search/__init__.py",
        "engine/costmodel/__init__.py",
        "engine/frontends/onnx_import.py",
        "engine/resources.py",
        "resources/costmodel/default.json",
        "resources/costmodel/tvm.txt",
        "resources/costmodel/gnn.pt",
        "resources/costmodel/dataset.jsonl.gz",
        "resources/models/small_cnn.onnx",
        "resources/models/make_models.py",
    ):
        assert must in names, f"{must} is not in {wheel.name}"
    # Not just the ones named above: every source file of the three top-level folders.
    shipped = [rel for rel in wc.source_files() if rel.split("/")[0] in ("engine", "app", "resources")]
    assert len(shipped) > 100
    missing = [rel for rel in shipped if rel not in names]
    assert not missing, f"in the tree but not in {wheel.name}: {missing}"
    assert not [n for n in names if n.startswith("tests/")], "the tests are not part of the wheel"

    assert "schedule-explorer = main:main" in entry_points
    assert "[gui_scripts]\nschedule-explorer-gui = main:main" in entry_points
