#!/usr/bin/env python3
"""CI: the wheel installs and runs, away from the source tree.

    .venv/bin/python .ci/wheel_check.py

Builds the wheel from a copy of the working tree (a build in the tree would reuse a stale
build/lib, and others may be editing it), installs it with its dependencies into a FRESH
venv (no --system-site-packages: it must be what `pip install .` gives a user; with pip's
cache and the local wheel mirror this takes about a minute here, so the honest check is
affordable), then from an empty temporary directory, with no PYTHONPATH and private
XDG data/cache/config folders, runs the installed commands and checks their output:
`schedule-explorer pipelines --json`, a small verified `measure` (its worker process is
started with `python -m engine.worker`, which must find the installed engine), an import
of a shipped sample model, and the GUI script taking an offscreen screenshot.

tests/test_wheel.py uses `build_wheel` to check the wheel's file list quickly.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def source_files() -> list[str]:
    """The working tree's files as a checkout would have them (tracked, plus untracked that
    git does not ignore; caches and build outputs are ignored), relative to the root."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    return sorted(rel for rel in set(listed.split("\0")) if rel and (ROOT / rel).is_file())  # not those deleted since


def copy_tree(dest: Path) -> Path:
    """`source_files()` copied under `dest`."""
    for rel in source_files():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest / rel)
    return dest


def build_wheel(out_dir: Path) -> Path:
    """Build the project's wheel into `out_dir` (from a fresh copy of the tree) and return its path.
    No build isolation: the running interpreter's setuptools builds it, so no index is needed."""
    with tempfile.TemporaryDirectory(prefix="se-wheel-src-") as src:
        copy_tree(Path(src))
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(out_dir), src], check=True
        )  # fmt: skip
    wheels = sorted(out_dir.glob("schedule_explorer-*.whl"))
    if len(wheels) != 1:
        raise RuntimeError(f"expected one schedule_explorer wheel in {out_dir}, found {[w.name for w in wheels]}")
    return wheels[0]


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> str:
    t = time.monotonic()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    print(f"  {Path(cmd[0]).name} {' '.join(cmd[1:])[:100]}  ({time.monotonic() - t:.1f} s)", flush=True)
    if done.returncode != 0:
        raise SystemExit(f"wheel check: {' '.join(cmd)} exited {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    return done.stdout


def require(ok: bool, message: str) -> None:
    if not ok:
        raise SystemExit(f"wheel check: {message}")


def main() -> int:
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="se-wheel-check-") as tmp_name:
        tmp = Path(tmp_name)
        wheel = build_wheel(tmp / "dist")
        print(f"wheel check: built {wheel.name} ({wheel.stat().st_size / 1e6:.1f} MB)", flush=True)

        env_dir = tmp / "venv"
        venv.create(env_dir, with_pip=True)
        bin_dir = env_dir / "bin"
        t = time.monotonic()
        subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "--quiet", str(wheel)], check=True)
        print(f"wheel check: installed into a fresh venv in {time.monotonic() - t:.0f} s", flush=True)

        work = tmp / "elsewhere"  # not the repository: nothing there to import by accident
        work.mkdir()
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "SCHEDULE_EXPLORER_COSTMODEL")}
        env.update(XDG_DATA_HOME=str(tmp / "data"), XDG_CACHE_HOME=str(tmp / "cache"), XDG_CONFIG_HOME=str(tmp / "config"))
        env["QT_QPA_PLATFORM"] = "offscreen"  # the GUI script's screenshot needs no display

        where = json.loads(
            _run(
                [str(bin_dir / "python"), "-c", "import json, engine, engine.search, engine.costmodel, engine.frontends, main;"
                 "from engine.resources import COSTMODEL_DIR, MODELS_DIR;"
                 "print(json.dumps({'engine': engine.__file__, 'main': main.__file__, 'costmodel': str(COSTMODEL_DIR),"
                 " 'models': sorted(p.name for p in MODELS_DIR.glob('*.onnx'))}))"],
                work, env,
            )
        )  # fmt: skip
        site = str(env_dir)
        require(where["engine"].startswith(site) and where["main"].startswith(site), f"imported outside the venv: {where}")
        require((Path(where["costmodel"]) / "default.json").is_file(), f"no shipped cost model in {where['costmodel']}")
        require(len(where["models"]) >= 4, f"sample models missing: {where['models']}")

        cli, gui = str(bin_dir / "schedule-explorer"), str(bin_dir / "schedule-explorer-gui")
        names = [p["name"] for p in json.loads(_run([cli, "pipelines", "--json"], work, env))["pipelines"]]
        require("blur" in names, f"`pipelines --json` lists no blur: {names}")

        m = json.loads(_run([cli, "measure", "blur", "--size", "small", "--no-db", "--json"], work, env))
        require(m["ok"] and m["verified"] and m["median_ms"] > 0, f"measure blur did not verify: {m}")

        model = Path(where["costmodel"]).parent / "models" / "small_cnn.onnx"
        imported = json.loads(_run([cli, "import", str(model), "--json"], work, env))
        require(imported["stages"] > 0, f"importing {model.name} gave no stages: {imported}")

        shot = work / "shot.png"
        _run([gui, "blur", "--size", "small", "--screenshot", str(shot)], work, env)
        require(shot.is_file() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"the GUI script wrote no PNG to {shot}")
    print(f"wheel check: passed in {time.monotonic() - start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
