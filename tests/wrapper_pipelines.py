"""Pipelines whose heuristic schedules carry wrappers (packed copies), shared by the tests
of what keeps them (mutation, crossover, guided search)."""

from engine.ir import Pipeline
from engine.ops import Builder


def two_dense_layers() -> Pipeline:
    """Two 64x128 -> 128 dense layers with bias and ReLU: the heuristic packs each weight
    (w0.in(fc0) at relu0.jo, w1.in(fc1) at relu1.jo)."""
    b = Builder("layers", "two packed dense layers")
    x = b.input("x", (64, 128))
    for c in range(2):
        x = b.activation(f"relu{c}", b.matmul(f"fc{c}", x, b.input(f"w{c}", (128, 128), -0.1, 0.1), b.input(f"b{c}", (128,))), "relu")
    return b.build([x])
