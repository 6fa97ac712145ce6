"""Shared by the tuning tests: a small network with repeated identical layers."""

from engine.ir import Pipeline
from engine.ops import Builder


def repeated_net(c: int = 8, hw: int = 16, repeats: int = 3) -> Pipeline:
    """`repeats` identical 3x3 conv + bias + ReLU layers (c -> c, own weights), then one
    1x1 conv to 2c (a different task)."""
    b = Builder("repeated_net", f"{repeats} identical conv layers then a 1x1 conv")
    x = b.input("input", (1, c, hw, hw))
    for k in range(repeats):
        w = b.input(f"w{k}", (c, c, 3, 3))
        bias = b.input(f"b{k}", (c,))
        x = b.activation(f"relu{k}", b.conv2d(f"conv{k}", x, w, bias, pad=1), "relu")
    w = b.input("w_out", (2 * c, c, 1, 1))
    return b.build([b.conv2d("conv_out", x, w)])
