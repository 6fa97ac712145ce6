"""The onnx package's own backend model tests (pytorch-converted, pytorch-operator, simple: 140
models with inputs and expected outputs) as one test: every model is imported, its operator
records are evaluated on the test's inputs, and it is compiled by Halide with the default
schedule, run and verified against the test's own expected outputs (engine/bench/conformance.py).

The pass count is asserted as a floor, so it can only go up; every test that does not pass
must be listed as unsupported with its operators (none may fail)."""

import pytest

from engine.bench.conformance import cases, run_suite, summarize

PASSING = 126  # raise it when more pass; never lower it


@pytest.fixture(scope="module")
def results():
    return run_suite(compile=True, progress=False)


def test_every_backend_model_test_is_found():
    found = cases()
    assert len(found) == 140
    assert all((c / "test_data_set_0").is_dir() for c in found)


def test_conformance_pass_count_only_goes_up(results):
    s = summarize(results)
    by_op = ", ".join(f"{op} x{n}" for op, n in s["unsupported_ops"].items())
    assert s["cases"] == 140
    assert s["failed"] == 0, f"failed (not unsupported): {s['failures']}"
    assert s["passed"] >= PASSING, f"{s['passed']} of 140 pass (floor {PASSING}); unsupported by op: {by_op}"


def test_every_test_not_passing_names_its_unsupported_operators(results):
    for r in results:
        if r.status != "passed":
            assert r.status == "unsupported" and r.unsupported_ops and r.message, (r.name, r.status, r.message)
            assert set(r.unsupported_ops) <= set(r.ops), (r.name, r.unsupported_ops, r.ops)
