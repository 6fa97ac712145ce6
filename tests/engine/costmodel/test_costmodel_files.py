"""Cost-model files: atomic saves, checks before LightGBM or torch sees a file, one clear
error for every bad file, and the analytic fallback (with its reason) for the app's model.
Real LightGBM, real torch, real files."""

import errno
import hashlib
import io
import json
import os
import pickle
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

import engine.costmodel as C
from engine.costmodel import ENV_VAR, AnalyticModel, ModelFileError, default_choice, default_model
from engine.costmodel import files as CF
from engine.costmodel.baselines import load_halide, train_halide
from engine.costmodel.dataset import sample_of
from engine.costmodel.gnn import load_gnn, train_gnn
from engine.costmodel.trees import TVMModel
from engine.randpipe import random_pipeline
from engine.sampler import sample_schedule
from engine.schedule import default_schedule

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def trained():
    """Tiny real models (LightGBM, GNN, Halide MLP) on analytic timings of random pipelines."""
    model, samples = AnalyticModel(2), []
    for seed in range(4):
        p = random_pipeline(seed, max_stages=4)
        for s in [default_schedule(p)] + [sample_schedule(p, random.Random(seed * 10 + k)) for k in range(3)]:
            samples.append(sample_of(p, s, model.predict(p, s).total_ms))
    tvm, _ = TVMModel.fit(samples, rounds=5)
    gnn, _ = train_gnn(samples, hidden=8, layers=1, epochs=1)
    halide, _ = train_halide(samples, hidden=8, epochs=1)
    return {"tvm": tvm, "gnn": gnn, "halide": halide}


@pytest.fixture
def only_dir(tmp_path, monkeypatch):
    """The app's model search sees only `tmp_path` (not the user's or the shipped models); the cache is reset around the test."""
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    monkeypatch.setattr(C, "default_dir", lambda: tmp_path / "none")
    monkeypatch.setattr(C, "SHIPPED", tmp_path / "none")
    default_model.cache_clear()
    yield tmp_path
    default_model.cache_clear()


def _truncate_mid_trees(path: Path) -> None:
    """Cut a LightGBM text model half-way through its trees (what an interrupted non-atomic save left)."""
    raw = path.read_bytes()
    first, end = raw.index(b"\nTree=0\n"), raw.index(b"\nend of trees")
    path.write_bytes(raw[: (first + end) // 2])


def _drop_sha(meta: Path) -> None:
    """Metadata without the recorded digest (as in models saved before it was recorded): only the structure is checked."""
    cfg = json.loads(meta.read_text())
    cfg.pop("sha256")
    meta.write_text(json.dumps(cfg))


def _probe():
    p = random_pipeline(1, max_stages=4)
    return p, default_schedule(p)


# --- saving: digests recorded, and atomic ---------------------------------------------------------
def test_saved_models_record_their_sha256_and_load_back(trained, tmp_path):
    for key, ext, load in (("tvm", "txt", TVMModel.load), ("gnn", "pt", load_gnn), ("halide", "pt", load_halide)):
        trained[key].save(tmp_path, key)
        meta = json.loads((tmp_path / f"{key}.json").read_text())
        assert meta["sha256"] == hashlib.sha256((tmp_path / f"{key}.{ext}").read_bytes()).hexdigest()
        p, s = _probe()
        assert load(tmp_path).predict(p, s).total_ms == pytest.approx(trained[key].predict(p, s).total_ms)
    names = sorted(x.name for x in tmp_path.iterdir())
    assert names == ["gnn.json", "gnn.pt", "halide.json", "halide.pt", "tvm.json", "tvm.txt"]  # no temp files left


class _DiskFull(io.FileIO):
    """A file that writes half of what it is given and then fails, like a full disk or a kill mid-write."""

    def write(self, b):
        super().write(bytes(b)[: max(1, len(b) // 2)])
        raise OSError(errno.ENOSPC, "No space left on device (injected)")


def _disk_full_after(n_ok: int):
    """An `open` for engine/costmodel/files.py: the first `n_ok` files written work, the next fails mid-write."""
    opened = []

    def fake_open(path, mode="r", **kw):
        if "w" not in mode:
            return open(path, mode, **kw)
        opened.append(path)
        if len(opened) <= n_ok:
            return open(path, mode, **kw)
        raw = _DiskFull(path, "w")
        return raw if "b" in mode else io.TextIOWrapper(raw, encoding=kw.get("encoding", "utf-8"))

    return fake_open


@pytest.mark.parametrize("key", ["tvm", "gnn"])
def test_an_interrupted_save_leaves_the_old_files_whole_and_no_temp_file(trained, tmp_path, monkeypatch, key):
    old = trained[key]
    old.save(tmp_path, key)
    before = {x.name: x.read_bytes() for x in tmp_path.iterdir()}
    retrained = TVMModel(old.booster, old.base + 1.0, old.config) if key == "tvm" else _retrained_gnn(old)
    monkeypatch.setattr(CF, "open", _disk_full_after(0), raising=False)  # the model file's write fails half-way
    with pytest.raises(OSError, match="injected"):
        retrained.save(tmp_path, key)
    monkeypatch.undo()
    assert {x.name: x.read_bytes() for x in tmp_path.iterdir()} == before  # old files untouched, no temp file left
    p, s = _probe()
    load = TVMModel.load if key == "tvm" else load_gnn
    assert load(tmp_path).predict(p, s).total_ms == pytest.approx(old.predict(p, s).total_ms)


def _retrained_gnn(old):
    """The same architecture with other weights: a retrained model to save over the old one."""
    import torch

    from engine.costmodel.gnn import StageCostNet, TorchCostModel

    torch.manual_seed(1)
    net = StageCostNet(old.config["hidden"], old.config["layers"])
    net.load_state_dict({k: v + 0.5 for k, v in old.net.state_dict().items()})
    return TorchCostModel(net, old.name, old.config)


def test_a_save_interrupted_between_model_and_metadata_is_caught_at_load(trained, tmp_path, monkeypatch):
    """New model text, old metadata: the recorded sha256 no longer matches: a clear error, not the wrong model."""
    old = trained["tvm"]
    old.save(tmp_path, "tvm")
    other, _ = TVMModel.fit([sample_of(*_probe(), 1.0), sample_of(*_probe(), 1.0)], rounds=3)
    monkeypatch.setattr(CF, "open", _disk_full_after(1), raising=False)  # tvm.txt is saved, tvm.json fails
    with pytest.raises(OSError, match="injected"):
        other.save(tmp_path, "tvm")
    monkeypatch.undo()
    assert sorted(x.name for x in tmp_path.iterdir()) == ["tvm.json", "tvm.txt"]
    with pytest.raises(ModelFileError, match=r"tvm\.txt: contents do not match the sha256"):
        TVMModel.load(tmp_path)


def test_an_interrupted_dataset_export_keeps_the_old_file(tmp_path, monkeypatch):
    from engine.costmodel.export import export_dataset, import_dataset
    from engine.database import Database
    from engine.measure import Measurement

    src = tmp_path / "src.sqlite"
    p, s = _probe()
    with Database(src) as db:
        db.conn.execute("INSERT INTO cm_pipelines VALUES (?, ?, 'random', 1)", (p.content_hash(), p.name))
        db.conn.commit()
        db.put_pipeline(p.content_hash(), p.name, p.to_json())
        db.put_schedule(s.content_hash(), s.to_json())
        db.record(Measurement(p.name, p.content_hash(), s.content_hash(), True, True, median_ms=1.0, target="t", host="h", threads=1))
    out = tmp_path / "out" / "d.jsonl.gz"
    out.parent.mkdir()
    export_dataset(src, out)
    before = out.read_bytes()
    monkeypatch.setattr(CF, "open", _disk_full_after(0), raising=False)
    with pytest.raises(OSError, match="injected"):
        export_dataset(src, out)
    monkeypatch.undo()
    assert out.read_bytes() == before and [x.name for x in out.parent.iterdir()] == ["d.jsonl.gz"]
    assert import_dataset(out, tmp_path / "back.sqlite") == {"pipelines": 1, "samples": 1}


# --- loading: LightGBM text models --------------------------------------------------------------
@pytest.mark.parametrize("with_sha", [True, False])
def test_a_truncated_lightgbm_model_is_a_clear_error_in_this_process(trained, tmp_path, with_sha):
    trained["tvm"].save(tmp_path, "tvm")
    _truncate_mid_trees(tmp_path / "tvm.txt")
    if not with_sha:
        _drop_sha(tmp_path / "tvm.json")
    what = "contents do not match the sha256" if with_sha else "not a complete LightGBM text model"
    with pytest.raises(ModelFileError, match=rf"{tmp_path / 'tvm.txt'}: {what}"):
        TVMModel.load(tmp_path)  # LightGBM itself would crash this process on the file


@pytest.mark.parametrize(
    "damage, why",
    [
        (lambda t: t.replace("tree_sizes=", "tree_sizes=7 "), "not where tree_sizes puts it"),
        (lambda t: t.replace("\nend of trees", "\nend of forest"), "no 'end of trees' marker"),
        (lambda t: t[: t.index("\npandas_categorical")], "pandas_categorical line"),
        (lambda t: "\n".join(x for x in t.split("\n") if not x.startswith("tree_sizes=")), "no tree_sizes line"),
        (lambda t: "<html>" + t, "no 'tree' / 'version=' header"),
    ],
)
def test_each_lightgbm_structure_check_names_what_is_wrong(trained, tmp_path, damage, why):
    trained["tvm"].save(tmp_path, "tvm")
    _drop_sha(tmp_path / "tvm.json")
    txt = tmp_path / "tvm.txt"
    txt.write_text(damage(txt.read_text()))
    with pytest.raises(ModelFileError, match=why):
        TVMModel.load(tmp_path)


def test_the_shipped_lightgbm_model_passes_the_checks():
    assert CF.lightgbm_text(C.SHIPPED / "tvm.txt").startswith("tree\n")


def test_a_truncated_lightgbm_model_never_kills_the_process(trained, tmp_path):
    """In a fresh process: LightGBM on the raw truncated file dies (the premise), while the
    app's model choice survives it, falls back to the analytic model and says why."""
    trained["tvm"].save(tmp_path, "tvm")
    _truncate_mid_trees(tmp_path / "tvm.txt")
    (tmp_path / "default.json").write_text(json.dumps({"model": "tvm"}))
    raw = subprocess.run(
        [sys.executable, "-c", "import sys, lightgbm; lightgbm.Booster(model_file=sys.argv[1])", str(tmp_path / "tvm.txt")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert raw.returncode != 0  # a signal (negative) with LightGBM 4.x: it takes the whole process down
    script = (
        "import sys; from pathlib import Path; import engine.costmodel as C\n"
        "C.default_dir = lambda: Path(sys.argv[1]) / 'none'; C.SHIPPED = Path(sys.argv[1]) / 'none'\n"
        "c = C.default_choice(); assert C.default_model() is c.model\n"
        "print(type(c.model).__name__); print(c.fallback_reason)\n"
    )
    env = {**os.environ, ENV_VAR: str(tmp_path)}
    ok = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert ok.returncode == 0, ok.stderr
    kind, reason = ok.stdout.splitlines()[:2]
    assert kind == "AnalyticModel" and str(tmp_path / "tvm.txt") in reason and "sha256" in reason


# --- loading: torch weights ---------------------------------------------------------------------
class _Marker:
    """Unpickling this creates a file: proof that a loader ran code from the file."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.mark.parametrize("as_torch_archive", [False, True])
def test_a_pickle_saved_as_weights_is_refused_and_runs_nothing(trained, tmp_path, as_torch_archive):
    import torch

    trained["gnn"].save(tmp_path, "gnn")
    _drop_sha(tmp_path / "gnn.json")  # a file swapped in after the save: only the format stands in its way
    marker = tmp_path / "pwned"
    if as_torch_archive:  # a zip archive like real weights, with the payload in its data.pkl
        torch.save(_Marker(str(marker)), tmp_path / "gnn.pt")
        what = "not usable weights for gnn.json (UnpicklingError"
    else:
        (tmp_path / "gnn.pt").write_bytes(pickle.dumps(_Marker(str(marker))))
        what = "not a torch weights archive"
    with pytest.raises(ModelFileError, match=rf"gnn\.pt: {re.escape(what)}"):
        load_gnn(tmp_path)
    assert not marker.exists()
    pickle.loads(pickle.dumps(_Marker(str(marker))))  # the premise: unpickled, the payload runs
    assert marker.exists()


def test_weights_that_do_not_fit_the_architecture_are_one_clear_error(trained, tmp_path):
    trained["gnn"].save(tmp_path, "gnn")
    trained["halide"].save(tmp_path, "halide")
    meta = tmp_path / "gnn.json"
    cfg = json.loads(meta.read_text())
    meta.write_text(json.dumps({**cfg, "hidden": 16}))  # shapes no longer match
    with pytest.raises(ModelFileError, match=r"gnn\.pt: not usable weights for gnn\.json \(RuntimeError: .*size mismatch"):
        load_gnn(tmp_path)
    (tmp_path / "gnn.pt").write_bytes((tmp_path / "halide.pt").read_bytes())  # another model's state dict
    meta.write_text(json.dumps({k: v for k, v in cfg.items() if k != "sha256"}))
    with pytest.raises(ModelFileError, match=r"gnn\.pt: not usable weights .*Missing key"):
        load_gnn(tmp_path)
    (tmp_path / "gnn.pt").write_bytes((tmp_path / "halide.pt").read_bytes()[:-100])  # truncated archive
    with pytest.raises(ModelFileError, match=r"gnn\.pt: not a torch weights archive"):
        load_gnn(tmp_path)


# --- loading: JSON metadata ---------------------------------------------------------------------
def test_corrupt_json_metadata_is_a_clear_error(trained, tmp_path):
    trained["tvm"].save(tmp_path, "tvm")
    trained["gnn"].save(tmp_path, "gnn")
    tvm_meta, gnn_meta = tmp_path / "tvm.json", tmp_path / "gnn.json"
    good = gnn_meta.read_text()
    tvm_meta.write_text(tvm_meta.read_text()[:40])  # truncated
    with pytest.raises(ModelFileError, match=rf"{tvm_meta}: not valid JSON"):
        TVMModel.load(tmp_path)
    gnn_meta.write_text("[1, 2]")
    with pytest.raises(ModelFileError, match=rf"{gnn_meta}: expected a JSON object, found list"):
        load_gnn(tmp_path)
    gnn_meta.write_text(json.dumps({k: v for k, v in json.loads(good).items() if k != "hidden"}))
    with pytest.raises(ModelFileError, match=rf"{gnn_meta}: missing or bad architecture entry \(KeyError: 'hidden'\)"):
        load_gnn(tmp_path)
    gnn_meta.write_bytes(b"\xff\xfe{")
    with pytest.raises(ModelFileError, match=rf"{gnn_meta}: not valid JSON"):
        load_gnn(tmp_path)


# --- the app's and search's model: fallback with a reason, loaded once -------------------------
def test_a_bad_model_file_falls_back_to_analytic_with_the_reason(trained, only_dir, monkeypatch):
    trained["gnn"].save(only_dir, "gnn")
    (only_dir / "default.json").write_text(json.dumps({"model": "gnn"}))
    (only_dir / "gnn.pt").write_bytes(pickle.dumps({"weights": [1.0]}))
    _drop_sha(only_dir / "gnn.json")  # swapped in behind the metadata's back: the format check is what catches it
    loads = []
    real = C.load_model
    monkeypatch.setattr(C, "load_model", lambda d, k: loads.append(k) or real(d, k))
    choice = default_choice()
    assert isinstance(choice.model, AnalyticModel) and choice.source == "analytic"
    assert str(only_dir / "gnn.pt") in choice.fallback_reason and "not a torch weights archive" in choice.fallback_reason
    p, s = _probe()
    for _ in range(3):
        default_model().predict(p, s)
    assert default_choice() is choice and loads == ["gnn"]  # loaded once per process, not per prediction


def test_a_corrupt_default_json_falls_back_with_the_reason(only_dir):
    (only_dir / "default.json").write_text('{"model": "tv')
    choice = default_choice()
    assert isinstance(choice.model, AnalyticModel)
    assert f"{only_dir / 'default.json'}: not valid JSON" in choice.fallback_reason


def test_a_good_model_has_no_fallback_reason(trained, only_dir):
    trained["tvm"].save(only_dir, "tvm")
    (only_dir / "default.json").write_text(json.dumps({"model": "tvm"}))
    choice = default_choice()
    assert isinstance(choice.model, TVMModel) and choice.source == str(only_dir) and choice.fallback_reason == ""


def test_the_app_says_why_its_prediction_is_the_analytic_estimate(trained, only_dir, open_window):
    trained["tvm"].save(only_dir, "tvm")
    (only_dir / "default.json").write_text(json.dumps({"model": "tvm"}))
    _truncate_mid_trees(only_dir / "tvm.txt")
    w = open_window("blur")
    label = w.performance.values["Predicted"]
    assert "analytic estimate" in label.text() and "learned model is not usable" in label.text()
    assert str(only_dir / "tvm.txt") in label.toolTip()
