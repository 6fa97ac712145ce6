"""TensorFlow import from the frozen GraphDef: the shipped samples, a Keras model built here and
a frozen .pb, each compiled with Halide and verified against TensorFlow's own outputs; clear
errors for unsupported operators, malformed files and Keras files that would run code."""

import importlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from engine import api
from engine import reference as R
from engine.frontends import ModelImportError, UnsupportedModelError, import_model, import_tensorflow, is_model_file
from engine.frontends.tensorflow_import import import_keras
from engine.resources import tf_sample_models
from engine.schedule import default_schedule

METHOD = "outputs recorded from tensorflow at import"
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def tf():
    """TensorFlow, imported by the tests that use it (not at collection: it takes seconds)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return pytest.importorskip("tensorflow", reason="the tensorflow extra is not installed")


@pytest.fixture(scope="module")
def keras(tf):
    return importlib.import_module("keras")


def verified(p):
    """Compile the default schedule with Halide, run it on the recorded inputs, compare with TF's outputs."""
    run, v = api.run_once(p, default_schedule(p))
    assert run["method"] == METHOD
    assert v.ok, v.message
    return run


@pytest.fixture(scope="module")
def wdir(tmp_path_factory):
    return tmp_path_factory.mktemp("tf-weights")


@pytest.fixture(scope="module")
def samples(wdir, tf):
    return {p.name: import_tensorflow(p, wdir) for p in tf_sample_models()}


def test_the_shipped_samples_are_listed_and_small():
    names = [p.name for p in tf_sample_models()]
    assert names == ["inception_small.keras", "lstm_lm"]
    for p in tf_sample_models():
        size = sum(f.stat().st_size for f in p.rglob("*")) if p.is_dir() else p.stat().st_size
        assert size < 5e6
        assert is_model_file(p)


def test_inception_sample_imports_and_matches_tensorflow(samples, keras):
    res = samples["inception_small.keras"]
    r = res.report
    assert r.ops_mapped["Conv2D"] == 20 and r.ops_mapped["ConcatV2"] == 3 and r.ops_mapped["MaxPool"] == 5
    # Every batch norm (Keras writes it as Mul + AddV2) and the classifier's bias folded into the weights.
    assert sum("folded into Conv2D" in s for s in r.simplifications) == 20
    assert "Mul" not in r.ops_mapped and "BiasAdd" not in r.ops_mapped
    assert r.inputs[0]["shape"] == [1, 64, 64, 3] and r.outputs[0]["shape"] == [1, 10]
    p = res.pipeline
    assert p.source["kind"] == "tensorflow" and p.source["format"] == "keras"
    run = verified(p)
    # The recorded reference is TensorFlow's: Keras' eager call on the same input agrees with it.
    model = keras.saving.load_model(tf_sample_models()[0], compile=False, safe_mode=True)
    image = run["inputs"]["image"]
    eager = np.asarray(model(image, training=False))
    np.testing.assert_allclose(run["refs"][p.outputs[0]], eager, rtol=1e-4, atol=1e-6)
    assert abs(float(run["outputs"][p.outputs[0]].sum()) - 1.0) < 1e-4  # a softmax over 10 classes


def test_lstm_savedmodel_sample_is_many_stages_and_matches_tensorflow(samples):
    res = samples["lstm_lm"]
    r = res.report
    assert r.outputs[0]["shape"] == [1, 12, 64]
    assert r.stages >= 300  # two layers x 12 steps, each step's gates their own stages
    assert r.ops_mapped["Sigmoid"] == 2 * 12 * 3 and r.ops_mapped["Tanh"] == 2 * 12 * 2
    assert any("signature 'serving_default'" in s for s in r.simplifications)
    assert res.pipeline.source["format"] == "saved_model"
    # Each variable is one weight input however many steps read it: embedding, 2 x (kernel,
    # recurrent kernel, bias), the classifier's 2, and each layer's first step, whose zero
    # state turns the recurrent matmul into a constant folded into that step's bias.
    assert len([i for i in res.pipeline.inputs if i.weight]) == 1 + 2 * 3 + 2 + 2
    assert res.pipeline.outputs == ["output"] and res.pipeline.stages[0].name == "embedding_1_Tensordot_MatMul"
    verified(res.pipeline)


def test_a_keras_model_built_here_imports_and_verifies(wdir, keras):
    keras.utils.set_random_seed(3)
    image = keras.Input((12, 12, 4), name="image")
    x = keras.layers.DepthwiseConv2D(3, padding="same", depth_multiplier=2)(image)
    x = keras.layers.Conv2DTranspose(3, 3, strides=2, padding="same")(x)  # 24x24
    x = keras.layers.Conv2D(6, 3, strides=2, dilation_rate=1, padding="valid", activation="tanh")(x)
    x = keras.layers.LayerNormalization()(x)
    x = keras.layers.AveragePooling2D(2, padding="same")(x)
    x = keras.layers.ZeroPadding2D(1)(x)
    x = keras.layers.Flatten()(x)
    seq = keras.Input((5, 3), name="seq")
    h = keras.layers.GRU(4, unroll=True)(seq)
    scale = keras.Input((7,), name="scale")
    s = keras.ops.log(scale)  # its test data must be positive
    y = keras.layers.Concatenate()([keras.layers.Dense(5, activation="sigmoid")(x), h, keras.layers.Dense(3)(s)])
    out2 = keras.layers.Softmax()(keras.layers.Dense(4)(y))
    model = keras.Model([image, seq, scale], [y, out2])
    res = import_keras(model, "mixed", wdir)
    r = res.report
    assert {"DepthwiseConv2dNative", "Conv2DBackpropInput", "Conv2D", "AvgPool", "Pad", "Log", "Softmax", "MatMul"} <= set(r.ops_mapped)
    assert [o["shape"] for o in r.outputs] == [[1, 12], [1, 4]]
    assert any("U[0.5, 1.5)" in s and "scale" in s for s in r.simplifications)
    p = res.pipeline
    run = verified(p)
    assert run["inputs"]["scale"].min() >= 0.5
    eager = model([run["inputs"][n] for n in ("image", "seq", "scale")], training=False)
    for name, e in zip(p.outputs, eager):
        np.testing.assert_allclose(run["refs"][name], np.asarray(e), rtol=1e-4, atol=1e-6)


def _frozen_pb(tf, fn, spec, path):
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    frozen = convert_variables_to_constants_v2(tf.function(fn).get_concrete_function(spec))
    path.write_bytes(frozen.graph.as_graph_def().SerializeToString())
    return path


def test_a_frozen_graphdef_imports_through_load_pipeline(tmp_path, tf):
    rng = np.random.default_rng(0)
    w = tf.constant(rng.normal(size=(3, 3, 2, 4)).astype(np.float32))

    def fn(x):
        y = tf.nn.relu6(tf.nn.conv2d(x, w, strides=1, padding="SAME"))
        y = tf.nn.max_pool2d(y, 2, 2, "VALID")
        a, b = tf.split(y, 2, axis=3)
        z = tf.reduce_mean(tf.sigmoid(a) * b[:, ::-1, :, 1:], axis=[1, 2], keepdims=True)
        return tf.pow(x[:, :1, :1, :], 1.5) + tf.broadcast_to(z[..., :1], (1, 1, 1, 2))  # a fractional power: positive test data

    pb = _frozen_pb(tf, fn, tf.TensorSpec((None, 8, 8, 2), tf.float32, name="x"), tmp_path / "frozen.pb")
    p = api.load_pipeline(str(pb))
    assert p.source["format"] == "graphdef" and p.outputs and api.load_pipeline(str(pb)).content_hash() == p.content_hash()
    assert {"expand", "conv", "pool_nd", "slice"} <= {r.op for r in p.ops}
    assert [r.attrs["p"] for r in p.ops if r.attrs.get("fn") == "pow"] == [1.5]
    x = R.make_inputs(p)[p.inputs[0].name]
    assert x.shape == (1, 8, 8, 2) and x.min() >= 0.5  # the unknown batch size is 1; pow 1.5 needs x > 0
    verified(p)


def test_an_unsupported_operator_is_one_error_naming_it(tmp_path, tf):
    def fn(x):
        return tf.math.cumsum(tf.tanh(x), axis=1) + tf.math.cumprod(x, axis=1)

    pb = _frozen_pb(tf, fn, tf.TensorSpec((2, 6), tf.float32, name="x"), tmp_path / "cum.pb")
    with pytest.raises(UnsupportedModelError) as err:
        import_model(pb, tmp_path)
    ops = {(u["op"], u["node"]) for u in err.value.unsupported}
    assert ops == {("Cumsum", "Cumsum"), ("Cumprod", "Cumprod")}
    assert "Cumsum (node 'Cumsum'" in str(err.value) and "Cumprod" in str(err.value)
    with pytest.raises(api.InputError, match="unsupported node.*Cumsum"):
        api.load_pipeline(str(pb))


def test_malformed_files_are_one_clear_error(tmp_path, tf):
    junk = b"\x08\x96\x01 this is not a model \xff\xfe" * 20
    (tmp_path / "bad.keras").write_bytes(junk)
    (tmp_path / "bad.pb").write_bytes(junk)
    (tmp_path / "saved").mkdir()
    (tmp_path / "saved" / "saved_model.pb").write_bytes(junk)
    (tmp_path / "empty.pb").write_bytes(b"")
    with zipfile.ZipFile(tmp_path / "other.keras", "w") as zf:  # a zip archive, but not a Keras model
        zf.writestr("notes.txt", "hello")
    tf.saved_model.save(tf.Module(), str(tmp_path / "unsigned"))  # a real SavedModel with nothing to serve
    cases = {
        "bad.keras": "not a loadable Keras model",
        "other.keras": "not a loadable Keras model",
        "bad.pb": "not a readable GraphDef",
        "saved": "not a loadable SavedModel",
        "unsigned": "the SavedModel has no signatures",
        "empty.pb": "an empty GraphDef",
    }
    for name, what in cases.items():
        with pytest.raises(ModelImportError) as err:
            import_tensorflow(tmp_path / name, tmp_path)
        msg = str(err.value)
        assert what in msg and str(tmp_path / name) in msg and "\n" not in msg
        with pytest.raises(api.InputError, match=what):
            api.load_pipeline(str(tmp_path / name / "saved_model.pb" if name in ("saved", "unsigned") else tmp_path / name))


def test_a_keras_file_with_a_lambda_layer_is_refused_without_running_it(tmp_path, monkeypatch, keras):
    marker = tmp_path / "ran"
    monkeypatch.setenv("SX_TEST_MARKER", str(marker))
    x = keras.Input((4,), name="x")
    # The function leaves a file behind when it runs (it is saved as bytecode in the .keras file).
    model = keras.Model(x, keras.layers.Lambda(lambda t: t * 2 + (open(os.environ["SX_TEST_MARKER"], "w").close() or 0))(x))
    assert marker.exists()  # building it ran the function once, here
    marker.unlink()
    model.save(tmp_path / "lambda.keras")
    with pytest.raises(ModelImportError, match="lambda.keras: not a loadable Keras model.*[Ll]ambda"):
        import_tensorflow(tmp_path / "lambda.keras", tmp_path)
    assert not marker.exists()


def test_tensorflow_loads_only_for_a_tensorflow_model_and_its_absence_is_one_line():
    """In a fresh process: the engine and the model-kind check do not import TensorFlow; with
    TensorFlow unimportable, opening a TF model is one error saying how to install the extra."""
    code = (
        "import sys\n"
        "from engine import api\n"
        "from engine.frontends import is_model_file\n"
        "from engine.resources import tf_sample_models\n"
        "assert all(is_model_file(p) for p in tf_sample_models())\n"
        "print('loaded' if 'tensorflow' in sys.modules else 'not loaded')\n"
        "sys.modules['tensorflow'] = None  # what an environment without the extra gives: ImportError\n"
        "try:\n"
        "    api.load_pipeline(str(tf_sample_models()[1]))\n"
        "except api.InputError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    lines = out.stdout.splitlines()
    assert lines[0] == "not loaded", out.stderr
    assert lines[1:] == [
        "TensorFlow is not installed: pip install 'schedule-explorer[tensorflow]' (in a checkout: .venv/bin/pip install -e '.[tensorflow]')"
    ]


def test_a_node_hung_on_the_graph_by_a_control_edge_never_runs(tmp_path, tf):
    """A GraphDef may attach any op to a mapped one by a control dependency; importing and
    running the reference must not execute it (here: a WriteFile)."""
    target = tmp_path / "written"

    def fn(x):
        w = tf.io.write_file(str(target), "ran")
        with tf.control_dependencies([w]):
            return tf.tanh(x) * 2.0

    pb = _frozen_pb(tf, fn, tf.TensorSpec((3, 4), tf.float32, name="x"), tmp_path / "hook.pb")
    assert b"WriteFile" in pb.read_bytes()
    res = import_tensorflow(pb, tmp_path)
    assert res.report.ops_mapped == {"Identity": 1, "Mul": 1, "Tanh": 1}
    verified(res.pipeline)
    assert not target.exists()


def test_a_savedmodel_that_writes_files_is_refused_before_it_loads(tmp_path, tf):
    """Loading a SavedModel runs its restore and initializer graph functions: one holding a
    file-writing (or Python-calling) op is refused before TensorFlow loads anything."""
    target = tmp_path / "written"

    class Writer(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec((2, 3), tf.float32)])
        def serve(self, x):
            w = tf.io.write_file(str(target), "ran")
            with tf.control_dependencies([w]):
                return tf.tanh(x)

    m = Writer()
    tf.saved_model.save(m, str(tmp_path / "writer"), signatures=m.serve)
    with pytest.raises(ModelImportError, match=r"writer: refused: node 'WriteFile' in function '.*' is WriteFile, which writes files"):
        import_tensorflow(tmp_path / "writer", tmp_path)
    assert not target.exists()
