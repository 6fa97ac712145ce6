"""Generate the sample TensorFlow models in this folder, reproducibly (fixed seeds), with Keras.

    .venv/bin/python resources/tf_models/make_tf_models.py

Two models in the spirit of the device-placement papers' benchmarks (Inception-V3 and an
LSTM language model), small enough to ship (weights are random, drawn from each layer's
initializer with a fixed seed, batch-norm statistics randomized so folding them is not a
no-op):

- `inception_small.keras`: an Inception-style image classifier as a Keras file: a stem
  (two convolutions, a max pool) and three inception blocks, each four parallel branches
  (1x1; 1x1 then 3x3; 1x1 then 5x5; 3x3 max pool then 1x1) concatenated, every convolution
  followed by batch norm and ReLU; global average pool and a softmax classifier. 64x64 RGB.
- `lstm_lm/`: a two-layer LSTM language model as a SavedModel (Keras' `model.export`): the
  one-hot tokens of 12 time steps, an embedding (a matmul of the one-hot vectors), two LSTM
  layers unrolled into per-step operations, and a softmax over the vocabulary at every step.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
from keras import layers

HERE = Path(__file__).resolve().parent
INCEPTION = "inception_small.keras"
LSTM_LM = "lstm_lm"
IMAGE = 64
STEPS, VOCAB, EMBED, HIDDEN = 12, 64, 32, 64


def conv_bn(x: keras.KerasTensor, filters: int, k: int, name: str, strides: int = 1) -> keras.KerasTensor:
    """Convolution (no bias) - batch norm - ReLU, as Inception-V3 writes every convolution."""
    x = layers.Conv2D(filters, k, strides=strides, padding="same", use_bias=False, name=f"{name}_conv")(x)
    x = layers.BatchNormalization(name=f"{name}_bn")(x)
    return layers.ReLU(name=f"{name}_relu")(x)


def inception_block(x: keras.KerasTensor, c1: int, c3r: int, c3: int, c5r: int, c5: int, cp: int, name: str) -> keras.KerasTensor:
    b1 = conv_bn(x, c1, 1, f"{name}_1x1")
    b3 = conv_bn(conv_bn(x, c3r, 1, f"{name}_3x3_reduce"), c3, 3, f"{name}_3x3")
    b5 = conv_bn(conv_bn(x, c5r, 1, f"{name}_5x5_reduce"), c5, 5, f"{name}_5x5")
    bp = layers.MaxPooling2D(3, strides=1, padding="same", name=f"{name}_pool")(x)
    bp = conv_bn(bp, cp, 1, f"{name}_pool_proj")
    return layers.Concatenate(name=f"{name}_concat")([b1, b3, b5, bp])


def inception_small(classes: int = 10) -> keras.Model:
    image = keras.Input((IMAGE, IMAGE, 3), name="image")
    x = conv_bn(image, 24, 3, "stem1", strides=2)  # 32x32
    x = conv_bn(x, 32, 3, "stem2")
    x = layers.MaxPooling2D(3, strides=2, padding="same", name="stem_pool")(x)  # 16x16
    x = inception_block(x, 16, 16, 24, 4, 8, 8, "mixed_a")  # 56 channels
    x = inception_block(x, 24, 24, 32, 8, 16, 16, "mixed_b")  # 88 channels
    x = layers.MaxPooling2D(3, strides=2, padding="same", name="reduce_pool")(x)  # 8x8
    x = inception_block(x, 32, 24, 48, 8, 16, 16, "mixed_c")  # 112 channels
    x = layers.GlobalAveragePooling2D(name="avg_pool")(x)
    x = layers.Dropout(0.2, name="dropout")(x)
    return keras.Model(image, layers.Dense(classes, activation="softmax", name="classifier")(x), name="inception_small")


def lstm_lm() -> keras.Model:
    tokens = keras.Input((STEPS, VOCAB), name="tokens")  # one-hot token vectors
    x = layers.Dense(EMBED, use_bias=False, name="embedding")(tokens)
    x = layers.LSTM(HIDDEN, return_sequences=True, unroll=True, name="lstm1")(x)
    x = layers.LSTM(HIDDEN, return_sequences=True, unroll=True, name="lstm2")(x)
    return keras.Model(tokens, layers.Dense(VOCAB, activation="softmax", name="logits")(x), name="lstm_lm")


def randomize_batchnorms(model: keras.Model, rng: np.random.Generator) -> None:
    for layer in model.layers:
        if isinstance(layer, layers.BatchNormalization):
            c = layer.gamma.shape[0]
            layer.set_weights([
                rng.uniform(0.5, 1.5, c), rng.uniform(-0.2, 0.2, c), rng.uniform(-0.3, 0.3, c), rng.uniform(0.5, 2.0, c)
            ])  # fmt: skip


def main() -> None:
    keras.utils.set_random_seed(0)  # every initializer draws from it: before the models are built
    model = inception_small()
    randomize_batchnorms(model, np.random.default_rng(1))
    model.save(HERE / INCEPTION)
    keras.utils.set_random_seed(0)
    lm = lstm_lm()
    shutil.rmtree(HERE / LSTM_LM, ignore_errors=True)
    lm.export(str(HERE / LSTM_LM), format="tf_saved_model", verbose=False)
    for name in (INCEPTION, LSTM_LM):
        path = HERE / name
        size = sum(p.stat().st_size for p in path.rglob("*")) if path.is_dir() else path.stat().st_size
        print(f"{path}: {size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
