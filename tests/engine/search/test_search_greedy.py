"""Greedy value-function search and coarse-to-fine beam search (engine/search/greedy.py, beam.py):
never worse than the seed, guided completion, confirmation. The contract every strategy keeps
is in test_search_contract.py."""

import json
import random

import pytest

from engine import zoo
from engine.cli import main
from engine.costmodel import AnalyticModel
from engine.measure import Runner
from engine.sampler import location_of, locations
from engine.schedule import Schedule, validate
from engine.search import Budget, run_search
from engine.search.base import CONFIRM_WITHIN
from engine.search.greedy import zero_measure_search
from engine.search.space import complete, options_at, order, seed_schedule, with_decision


@pytest.fixture(scope="module")
def runner():
    with Runner() as r:
        yield r


def test_greedy_is_never_worse_than_its_seed(runner):
    for name in ("blur", "matmul"):
        p = zoo.get(name, "small")
        # confirm=False: the strategy's own choice (confirmation re-ranks by re-measured medians)
        res = run_search(p, "greedy", Budget(trials=6, wall_s=60), seed=0, model=AnalyticModel(), runner=runner, confirm=False)
        seed = res.trials[0]
        assert seed.schedule.content_hash() == seed_schedule(p).content_hash() and seed.verified
        assert res.best_ms is not None and res.best_ms <= seed.measured_ms


def test_guided_completion_and_options_at_stay_legal():
    # A changed consumer makes some guide decisions illegal: complete() repairs them, and
    # options_at only proposes the requested locations.
    p = zoo.get("harris", "small")
    guide = seed_schedule(p)
    rng = random.Random(0)
    out = order(p)[0]
    for _ in range(4):
        partial = with_decision(Schedule(), out, complete(p, Schedule(), rng, None).of(out))  # a random output decision
        full = complete(p, partial, rng, guide)
        validate(p, full)
        st = order(p)[1]
        locs = locations(p, partial, st)[:2]
        for ss in options_at(p, partial, st, rng, 4, locs):
            assert location_of(ss) in locs
            validate(p, with_decision(partial, st, ss))


def test_confirmation_ranks_the_top_candidates_by_their_median(runner):
    # A search's best is re-measured with its runner-ups; the best median wins and is reported.
    p = zoo.get("blur", "small")
    res = run_search(p, "random", Budget(trials=5, wall_s=60), seed=2, model=AnalyticModel(), runner=runner)
    confirmed = [t for t in res.trials if t.confirmed_ms is not None]
    fastest = sorted((t for t in res.trials if t.verified), key=lambda t: t.measured_ms)[:3]
    # Only candidates noise could reorder (within CONFIRM_WITHIN of the best) are re-measured.
    close = [t for t in fastest if t.measured_ms <= CONFIRM_WITHIN * fastest[0].measured_ms]
    assert confirmed and {t.index for t in confirmed} == {t.index for t in close}
    assert res.best_ms == min(t.confirmed_ms for t in confirmed)
    assert res.best.content_hash() == min(confirmed, key=lambda t: t.confirmed_ms).schedule.content_hash()


def test_greedy_seeded_by_the_value_function_starts_from_its_schedule(runner):
    # greedy_v: the measuring search, seeded by zero-measurement greedy's schedule (not the heuristic's).
    p = zoo.get("matmul", "small")
    zero = zero_measure_search(p, 2).schedule
    res = run_search(p, "greedy_v", Budget(trials=3, wall_s=60), seed=2, model=AnalyticModel(), runner=runner, confirm=False)
    assert res.trials[0].schedule.content_hash() == zero.content_hash() != seed_schedule(p).content_hash()
    assert res.trials[0].verified and res.best_ms is not None and res.best_ms <= res.trials[0].measured_ms


def test_cli_zero_measurement_greedy_measures_its_schedule_once(tmp_path, capsys):
    # `search --measure 0`: V alone decides, nothing is measured while it searches, the result once after.
    args = ["search", "blur", "--size", "small", "--measure", "0", "--baseline", "none", "--db", str(tmp_path / "m.sqlite")]
    assert main([*args, "--json"]) == 0
    out = capsys.readouterr()
    res = json.loads(out.out)
    assert res["measurements_in_search"] == 0 and res["verified"] is True and res["best_ms"] > 0 and res["value_predicted_ms"] > 0
    assert "trial" not in out.err  # no progress line: no trial was measured
    assert main([*args, "--strategy", "random"]) == 2
    err = capsys.readouterr().err
    assert "--measure 0" in err and err.count("\n") == 1  # one error line
