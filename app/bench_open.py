"""How long the app takes to open a model: `python -m app.bench_open MODEL.onnx [--repeats N] [--json]`.

Each repeat runs in a fresh process (offscreen, a throwaway database), so nothing is
reused between repeats: the window is built, then the model is opened (import, heuristic
schedule, loop nest, prediction, every view) and the window is shown with the graph tab
in front and painted once. Reported per phase, wall seconds; the graph view's own share
(layout and items) is timed apart."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

PHASES = ("cost_model_load", "import", "graph", "open", "show")


def _one(model: str) -> dict[str, float]:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    os.environ["SCHEDULE_EXPLORER_DB"] = os.path.join(tempfile.mkdtemp(prefix="bench-open-"), "db.sqlite")
    from PySide6.QtWidgets import QApplication  # noqa: PLC0415

    import engine.frontends as F  # noqa: PLC0415

    from .graph.panel import GraphPanel  # noqa: PLC0415
    from .main_window import MainWindow  # noqa: PLC0415

    spent = dict.fromkeys(("import", "graph"), 0.0)

    def timed(key: str, fn: Any) -> Any:
        def wrapper(*a: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                spent[key] += time.perf_counter() - t

        return wrapper

    F.import_onnx = timed("import", F.import_onnx)
    GraphPanel.show_document = timed("graph", GraphPanel.show_document)  # type: ignore[method-assign]  # a timing wrapper, this process only
    app = QApplication.instance() or QApplication([])
    w = MainWindow(size="full", persist_layout=False, ask_to_save=False)
    w.set_auto_measure(False)
    w.resize(1400, 900)
    # The app loads its cost model when it starts (its first prediction, on the start page's
    # example); a model opened later finds it loaded. Timed apart: once per process.
    from engine.costmodel import default_model  # noqa: PLC0415

    tm = time.perf_counter()
    default_model()
    spent["cost_model_load"] = time.perf_counter() - tm
    t0, c0 = time.perf_counter(), time.process_time()
    if not w.open_pipeline(model):
        raise SystemExit(f"could not open {model}")
    t1 = time.perf_counter()
    w.show()
    w.tabs.setCurrentWidget(w.graph)
    for _ in range(3):
        app.processEvents()
    w.grab()  # painted at least once
    t2 = time.perf_counter()
    view = w.graph.view
    out = {"open": t1 - t0, "show": t2 - t1, "total": t2 - t0, **spent, "total_cpu": time.process_time() - c0}
    assert w.doc.pipeline is not None  # open_pipeline succeeded
    out |= {"stages": len(w.doc.pipeline.stages), "nodes_drawn": len(view.nodes) + len(view.groups), "grouped": view.grouped}
    w.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m app.bench_open", description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a single repeat, in this process
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(_one(args.model)))
        return 0
    runs = []
    for _ in range(args.repeats):
        cmd = [sys.executable, "-m", "app.bench_open", args.model, "--one"]
        res = subprocess.run(cmd, capture_output=True, text=True, check=True)
        runs.append(json.loads(res.stdout.strip().splitlines()[-1]))
    med = {k: statistics.median(r[k] for r in runs) for k in (*PHASES, "total", "total_cpu")}
    result = {"model": args.model, "repeats": args.repeats, "median_s": med, "runs": runs, "load_avg_1m": os.getloadavg()[0]}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        first = runs[0]
        print(f"{args.model}: {first['stages']} stages, {first['nodes_drawn']} nodes drawn (grouped: {first['grouped']})")
        note = " (import and graph are part of open; cost_model_load: once per process, before)"
        print("median s: " + ", ".join(f"{k} {v:.2f}" for k, v in med.items()) + note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
