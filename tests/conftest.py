"""Test set-up: Qt offscreen and a throwaway measurement database, before anything imports them."""

import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
_tmp = tempfile.mkdtemp(prefix="schedule-explorer-tests-")
os.environ["SCHEDULE_EXPLORER_DB"] = str(Path(_tmp) / "test.sqlite")
# The app's and search's predictions come from the analytic model in tests (its values are
# what tests reason about); the shipped learned model is tested on its own (test_costmodel).
os.environ["SCHEDULE_EXPLORER_COSTMODEL"] = "analytic"
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


import pytest  # noqa: E402

# tests/engine/... and tests/app/... mirror the packages they test; test modules' names are
# unique across the tree (pytest imports them by basename).
# Markers (declared in pyproject.toml), given by what a test module does, so that a new test
# is marked by the module it joins: `gui` opens a Qt window, `halide` compiles with Halide or
# starts worker processes, `slow` runs real searches, CLIs in subprocesses, benchmarks, the
# wheel build or sweeps over every zoo pipeline. `make test-fast` runs `-m "not slow"`.
SLOW_MODULES = {
    "test_bench_costmodel", "test_bench_fuzz", "test_bench_import", "test_calibration", "test_cli", "test_cli_errors",
    "test_costmodel_batch", "test_costmodel_files", "test_costmodel_learned", "test_features_incremental", "test_heuristic",
    "test_measure", "test_onnx_import", "test_peers", "test_reliability", "test_search_contract", "test_search_greedy",
    "test_search_lamcts", "test_segments", "test_torch_import", "test_wheel",
    "test_tensorflow_import",
    "test_finetune", "test_app_finetune",  # fine-tuning the shipped trees on 72 / 40 measurements; the app's adds a real measurement
    "test_cli_place_run",
    "test_placement_execute",
    "test_placement_learned",
    "test_cluster",  # a real 2-node Ray cluster (~80 s)
    "test_cli_stored",  # measure --force / forget / autoschedule --out, 5 worker runs (~35 s loaded)
    "test_teaching_halide",  # 17 Halide compiles traced store by store (~20-50 s loaded)
    "test_recipes_target",  # schedules for 3 targets on the zoo, 10 small pipelines measured (~10 s idle)
    "test_tuning_tune",  # whole-model tuning for real: 3 tuning runs and the tune command (~90 s at load 19, ~15 s idle)
    "test_tuning_cluster",  # tune on a real 2-node Ray cluster (~60 s loaded)
    "test_app_tuning",  # Tools → Tune Whole Model…: 3 real tuning runs through the dialog (~200 s at load 20, ~20 s idle)
    "test_onnx_conformance",  # the onnx package's 140 backend model tests, 126 compiled by Halide (~50 s loaded)
    "test_bench_strategies",  # real searches on the model objective and 3 hardware measurements per strategy
    "test_value_offline",  # trains the value function's GNN and LSTM on a fixed set, greedy with the shipped V (~10 s idle)
}  # fmt: skip
SLOW_TESTS = {  # the few multi-second tests of otherwise quick modules (real compiles in a loop, whole sessions)
    "test_random_pipeline_samples_compile_and_verify", "test_a_crashing_measurement_is_shown_and_the_app_keeps_working",
    "test_a_session_from_the_start_page_to_a_reopened_project", "test_fuzzed_projects_raise_only_project_error",
    "test_search_runs_off_thread_fills_table_and_plot_and_applies_undoably", "test_auto_measure_is_debounced_and_measures_the_last_edit",
    "test_queue_runs_one_at_a_time_and_drops_cancelled_requests",
    "test_applied_candidate_shows_its_measured_per_stage_bars",
    "test_peers_are_measured_beside_the_model_and_shown",  # imports torch and onnxruntime
    "test_compare_with_adams_measures_the_current_schedule_and_shows_adams_schedule",
    "test_measured_lessons_pass_with_the_solution_and_fail_with_the_start_measured_for_real",  # a worker and 4 measurements
}  # fmt: skip
PURE_PYTHON_MODULES = {
    "test_app_background", "test_costmodel", "test_database", "test_features", "test_features_incremental", "test_ir",
    "test_layering", "test_loopnest", "test_randpipe", "test_schedule", "test_wheel", "test_halide_source",
    "test_placement_simulator", "test_placement_profiles", "test_placement_policies", "test_cli_place",
    "test_placement_learned",
    "test_teaching_trace", "test_teaching_footprint", "test_cli_animate",
    "test_teaching_explain",
    "test_noise",  # a deterministic fake runner: nothing compiles
}  # fmt: skip


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = item.nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")
        if module.startswith("test_app") or "qtbot" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.gui)
        if module not in PURE_PYTHON_MODULES:
            item.add_marker(pytest.mark.halide)
        if module in SLOW_MODULES or getattr(item, "originalname", item.name) in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session", autouse=True)
def _isolated_qsettings(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Keep the user's remembered window layout out of the tests, and the tests' out of it."""
    from PySide6.QtCore import QSettings, QStandardPaths

    QStandardPaths.setTestModeEnabled(True)
    folder = str(tmp_path_factory.mktemp("qsettings"))
    for fmt in (QSettings.Format.NativeFormat, QSettings.Format.IniFormat):
        QSettings.setPath(fmt, QSettings.Scope.UserScope, folder)
    QSettings.setDefaultFormat(QSettings.Format.IniFormat)


@pytest.fixture
def open_window(qtbot):
    """Factory: a shown MainWindow at small size on `pipeline`, auto-measure off, closed after the test."""
    from app.main_window import MainWindow

    made = []

    def make(pipeline: str = "blur", schedule: str = "default", auto_measure: bool = False, **kw):
        w = MainWindow(size="small", persist_layout=kw.pop("persist_layout", False), ask_to_save=False, **kw)
        w.set_auto_measure(auto_measure)
        qtbot.addWidget(w)
        assert w.open_pipeline(pipeline, schedule)
        w.show()
        qtbot.waitExposed(w)
        made.append(w)
        return w

    yield make
    for w in made:
        w.close()
