"""No module reaches into another's private names (issue 19): a leading underscore means "this
module's own business", so `from engine.sampler import _decide` or `sampler._decide(...)` from
another module is a hidden coupling that a rename inside sampler silently breaks. This test parses
every source file of the product (engine/, app/, main.py) with `ast` and names each reach-in.

A module using its own private names is fine, and so are dunder names (`__version__`, `__file__`).
Only modules of this project count: an imported module is one that resolves to a file here."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class ReachIn:
    """One use of another module's private name: where, and what was reached."""

    path: str
    line: int
    target: str  # "engine.sampler._decide"

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: uses {self.target}"


def _sources() -> list[Path]:
    files = sorted((ROOT / "engine").rglob("*.py")) + sorted((ROOT / "app").rglob("*.py"))
    return files + [ROOT / "main.py"]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _project_modules() -> set[str]:
    return {_module_name(p) for p in _sources()}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module an ImportFrom names (relative imports resolved against `module`)."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    # In a package's __init__, `.` is the package itself; in a plain module it is the parent.
    keep = len(base) - node.level + (1 if is_package else 0)
    if keep < 0:
        raise ValueError(f"relative import beyond the top package in {module}, line {node.lineno}")
    parts = base[:keep] + ([node.module] if node.module else [])
    return ".".join(parts)


def _dotted(node: ast.expr) -> list[str] | None:
    """["a", "b", "c"] for the expression a.b.c, None if it is not a plain dotted name."""
    names: list[str] = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    names.append(node.id)
    return names[::-1]


def reach_ins(source: str, module: str, path: str, modules: set[str], is_package: bool = False) -> list[ReachIn]:
    """Every place in `source` (the text of `module`) that uses another project module's
    underscore name: `from X import _n`, or `_n` read as an attribute of a name bound to a
    project module by an import. `modules` is the set of project module names."""
    tree = ast.parse(source, filename=path)
    found: list[ReachIn] = []
    # Local names bound to project modules by imports: alias -> module name. `import a.b` binds
    # "a", and a.b.c is then looked up through the dotted path.
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    if alias.name in modules:
                        bound[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    if top in modules:
                        bound[top] = top
                for part in alias.name.split("."):
                    if _private(part) and alias.name in modules and alias.name != module:
                        found.append(ReachIn(path, node.lineno, alias.name))
                        break
        elif isinstance(node, ast.ImportFrom):
            source_module = _resolve(module, is_package, node)
            for alias in node.names:
                full = f"{source_module}.{alias.name}"
                if full in modules:  # `from pkg import submodule`
                    bound[alias.asname or alias.name] = full
                if _private(alias.name) and source_module != module and (source_module in modules or full in modules):
                    found.append(ReachIn(path, node.lineno, full))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not _private(node.attr):
            continue
        names = _dotted(node.value)
        if not names or names[0] not in bound:
            continue
        owner = ".".join([bound[names[0]], *names[1:]])
        if owner in modules and owner != module:
            found.append(ReachIn(path, node.lineno, f"{owner}.{node.attr}"))
    return sorted(found, key=lambda r: (r.path, r.line, r.target))


def test_no_module_uses_another_modules_private_names() -> None:
    modules = _project_modules()
    found: list[ReachIn] = []
    for file in _sources():
        rel = str(file.relative_to(ROOT))
        found += reach_ins(file.read_text(encoding="utf-8"), _module_name(file), rel, modules, file.name == "__init__.py")
    assert not found, "private names used across modules (make them public or keep them inside):\n" + "\n".join(map(str, found))


MODULES = {"engine", "engine.sampler", "engine.search", "engine.search.space", "app", "app.workers"}


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        ("engine.search.space", "from engine.sampler import _decide, locations\n", ["engine.sampler._decide"]),
        ("engine.search.space", "from ..sampler import _decide as d\n", ["engine.sampler._decide"]),
        ("engine.search.space", "from . import _key\n", ["engine.search._key"]),
        ("app.workers", "from engine import sampler\nsampler._decide(1)\n", ["engine.sampler._decide"]),
        ("app.workers", "import engine.sampler as S\nx = S._context\n", ["engine.sampler._context"]),
        ("app.workers", "import engine.sampler\nengine.sampler._order(p)\n", ["engine.sampler._order"]),
        ("app.workers", "def f():\n    from engine.search import space\n    return space._key\n", ["engine.search.space._key"]),
        # Allowed: own private names, dunders, public names, other objects' attributes, other packages.
        ("engine.sampler", "def _decide(): pass\n_decide()\n", []),
        ("app.workers", "from engine import sampler\nprint(sampler.__file__, sampler.mutate)\n", []),
        ("app.workers", "from engine.sampler import mutate\nrunner = object()\nrunner._proc\n", []),
        ("app.workers", "import os\nos._exit(0)\n", []),
    ],
)
def test_the_check_finds_each_kind_of_reach_in(module: str, source: str, expected: list[str]) -> None:
    assert [r.target for r in reach_ins(source, module, "x.py", MODULES)] == expected


def test_a_package_init_resolves_relative_imports_against_itself() -> None:
    found = reach_ins("from .space import _key\n", "engine.search", "engine/search/__init__.py", MODULES, is_package=True)
    assert [r.target for r in found] == ["engine.search.space._key"]
