"""Opening TensorFlow models in the window: File > Open lists them, a .keras file and a
SavedModel (picked through its saved_model.pb, as a file dialog does) open with their import report."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QMessageBox

from app.main_window import OPEN_FILTER, MainWindow


@pytest.fixture(scope="module")
def keras() -> Any:
    """Keras (and TensorFlow), imported by the tests that build a model, not at collection."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    pytest.importorskip("tensorflow", reason="the tensorflow extra is not installed")
    import keras

    return keras


@pytest.fixture(autouse=True)
def _weights_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Imported weights go to a throwaway cache, not the user's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@pytest.fixture
def warnings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every QMessageBox.warning text, instead of a modal that would block the test."""
    seen: list[str] = []
    monkeypatch.setattr(QMessageBox, "warning", lambda _parent, _title, text, *_a: seen.append(text))
    return seen


def _small_model(keras: Any) -> Any:
    keras.utils.set_random_seed(0)
    x = keras.Input((8, 8, 3), name="image")
    h = keras.layers.Conv2D(4, 3, padding="same", activation="relu")(x)
    h = keras.layers.GlobalAveragePooling2D()(h)
    return keras.Model(x, keras.layers.Dense(3, activation="softmax", name="probs")(h))


def test_the_open_dialog_lists_tensorflow_models() -> None:
    filters = OPEN_FILTER.split(";;")
    assert "*.keras" in filters[0] and "*.pb" in filters[0]  # the default "all we open" filter
    assert any(f.startswith("TensorFlow model") and "(*.keras *.pb)" in f for f in filters)


def test_keras_and_savedmodel_files_open_with_their_import_report(open_window, warnings: list[str], tmp_path: Path, keras: Any) -> None:
    model = _small_model(keras)
    model.save(tmp_path / "small.keras")
    model.export(str(tmp_path / "small_saved"), format="tf_saved_model", verbose=False)
    w: MainWindow = open_window("blur")
    for path in (tmp_path / "small.keras", tmp_path / "small_saved" / "saved_model.pb"):
        assert w.open_pipeline(str(path)), warnings
        assert not warnings
        report = w.import_report.report
        assert report is not None and w.doc.is_model and w.doc.schedule_spec == "heuristic"
        assert report.ops_mapped["Conv2D"] == 1 and len(w.doc.pipeline.stages) == report.stages
        text = w.import_report.toPlainText()
        assert "mapped TensorFlow node(s)" in text and "Conv2D" in text
    assert w.doc.pipeline.source["format"] == "saved_model"


def test_a_broken_keras_file_is_one_message_and_the_document_kept(open_window, warnings: list[str], tmp_path: Path) -> None:
    bad = tmp_path / "broken.keras"
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    w: MainWindow = open_window("blur")
    assert not w.open_pipeline(str(bad))
    assert len(warnings) == 1 and "broken.keras: not a loadable Keras model" in warnings[0]
    assert w.doc.pipeline is not None and w.doc.pipeline.name == "blur"
