"""`bench fuzz` (engine/bench/fuzz.py): a quick run in its own process, as a user starts it,
must find nothing outside the engine's promises; and the instrument's own parts (NaN-aware
comparison, CLI classification, the guard that keeps CLI cases from measuring) work."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine import zoo
from engine.bench import fuzz as F
from engine.schedule import default_schedule

ROOT = Path(__file__).resolve().parents[3]
N, SAMPLE = 300, 4


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One quick run through the command line, in a child process (so that a crash of the
    calling process shows as one, instead of taking pytest down)."""
    out = tmp_path_factory.mktemp("fuzz") / "report.json"
    cmd = [sys.executable, "main.py", "bench", "fuzz", "--n", str(N), "--measure-sample", str(SAMPLE), "--json", "--out", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"bench fuzz exited with {proc.returncode}: {proc.stderr[-2000:]}"
    report = json.loads(out.read_text())
    assert json.loads(proc.stdout) == report
    return report


def _examples(report: dict, bad: dict[str, dict[str, int]]) -> str:
    lines = []
    for fam, cats in bad.items():
        res = report["measured"] if fam == "measured" else report["families"].get(fam, {})
        for cat, k in cats.items():
            ex = (res.get("examples", {}).get(cat) or [{}])[0]
            shown = {key: v for key, v in ex.items() if key in ("argv", "model", "mutation", "pipeline", "minimal", "message", "stderr")}
            lines.append(f"{fam}/{cat} x{k}: {json.dumps(shown)[:600]}")
    return "\n".join(lines)


def test_counts_add_up_and_the_calling_process_survives(quick: dict) -> None:
    r = quick
    assert r["n"] == N and r["seed"] == 0 and r["survived"] is True
    assert {f: v["tried"] for f, v in r["families"].items()} == {"schedules": N * 3 // 5, "onnx": N // 5, "cli": N // 5}
    for fam in [*r["families"].values(), r["measured"]]:
        assert sum(fam["counts"].values()) == fam["tried"]
    assert r["measured"]["tried"] == SAMPLE
    assert r["phase_escapes"] == {}, r["phase_escapes"]
    assert r["live_workers"] == 0, r["live_worker_cmdlines"]
    assert r["machine"]["host"] and r["machine"]["target"] and "| schedules | 180 |" in r["table"]


def test_no_exception_other_than_the_projects_own_error_types(quick: dict) -> None:
    foreign = quick["foreign_exceptions"]
    bad: dict[str, dict[str, int]] = {}
    for key, k in foreign.items():
        fam, cat = key.split("/", 1)
        bad.setdefault(fam, {})[cat] = k
    assert not foreign, "exceptions escaped:\n" + _examples(quick, bad)


def test_no_wrong_result_stored(quick: dict) -> None:
    r = quick
    assert r["stored_verified"] >= 1  # the recheck compared something
    assert r["rechecked"] == r["stored_verified"], [x for x in r["recheck"] if x.get("agree") is None]
    assert r["wrong_results_stored"] == 0, [x for x in r["recheck"] if x.get("agree") is False]


def test_every_outcome_is_one_the_engine_promises(quick: dict) -> None:
    """No bad input accepted, every CLI error one line with exit 2, no failure blamed on
    the wrong schedule: the list in the message is the bugs left."""
    problems = quick["problems"]
    assert not problems, "outcomes outside the promises:\n" + _examples(quick, problems) + f"\n{quick['misattributed'][:2]}"


def test_cases_are_deterministic_per_seed() -> None:
    a, b = (F.fuzz(40, seed=3, measure_sample=0) for _ in range(2))
    assert {f: v.counts for f, v in a.families.items()} == {f: v.counts for f, v in b.families.items()}
    assert a.families["schedules"].by_mutation == b.families["schedules"].by_mutation
    assert sum(v.tried for v in a.families.values()) == 40 and a.measured.tried == 0


def test_nan_aware_comparison() -> None:
    ref = np.array([1.0, np.nan, np.inf, -np.inf, 2.0])
    assert F.compare_outputs(ref.copy(), ref)[0]
    assert not F.compare_outputs(np.array([1.0, 0.0, np.inf, -np.inf, 2.0]), ref)[0]  # a value where the reference is NaN
    assert not F.compare_outputs(np.array([np.nan, np.nan, np.inf, -np.inf, 2.0]), ref)[0]  # NaN where it is finite
    assert not F.compare_outputs(np.array([1.0, np.nan, -np.inf, -np.inf, 2.0]), ref)[0]  # the other infinity
    assert not F.compare_outputs(np.array([1.0, np.nan, np.inf, -np.inf, 2.1]), ref)[0]  # finite value off
    assert F.compare_outputs(np.array([1.0, np.nan, np.inf, -np.inf, 2.0 + 1e-5]), ref)[0]  # within tolerance
    ok, detail = F.compare_outputs(np.full(3, np.nan), np.full(3, np.nan))
    assert ok and "no finite values" in detail
    assert not F.compare_outputs(np.zeros(3), np.zeros(4))[0]


def test_schedule_and_cli_classification(tmp_path: Path) -> None:
    p = zoo.get("blur", "small")
    assert F.check_schedule(p, default_schedule(p).to_json())[0] == "accepted"
    assert F.check_schedule(p, {"stages": {"nope": {"pure": []}}})[:2] == ("schedule_error", "validate")
    with F.no_heavy_work(tmp_path):  # the guard the CLI phase runs under
        # A measurement that would start is stopped before any worker starts, and counted.
        assert F.check_cli(["measure", "blur", "--size", "small", "--no-db"], True)[0] == "reached_run:measure"
        assert F.check_cli(["show", "blur", "--size", "small"], None)[0] == "ok"
        assert F.check_cli(["show", "blur", "--size", "small"], True)[0] == "accepted_bad"
        cat, stderr = F.check_cli(["show", "no_such_pipeline"], True)
        assert cat == "clean_error" and "no_such_pipeline" in stderr
    assert F.live_children() == (0, []), "a child process outlived its command"
