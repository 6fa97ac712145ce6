"""Built-in pipelines, each at a realistic 'full' size and a 'small' size for tests."""

from __future__ import annotations

import math
from collections.abc import Callable

from .ir import Pipeline
from .ops import FLOAT_LOWEST, Builder

SIZES = ("small", "full")


def _pick(size: str, small: int, full: int) -> int:
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r} (choose small or full)")
    return small if size == "small" else full


def blur(size: str = "full") -> Pipeline:
    n = _pick(size, 64, 2048)
    b = Builder("blur", f"separable 3x3 box blur of a {n}x{n} image")
    inp = b.input("input", (n + 2, n + 2), 0.0, 1.0)
    bx = b.stencil("blur_x", inp, [((0, k), 1 / 3) for k in range(3)])
    by = b.stencil("blur_y", bx, [((k, 0), 1 / 3) for k in range(3)])
    return b.build([by])


def _gaussian7() -> list[float]:
    w = [math.exp(-(k * k) / (2 * 1.5**2)) for k in range(-3, 4)]
    return [v / sum(w) for v in w]


def unsharp(size: str = "full") -> Pipeline:
    n = _pick(size, 64, 2048)
    b = Builder("unsharp", f"unsharp mask of a 3-channel {n}x{n} image (Halide's app)")
    inp = b.input("input", (3, n + 6, n + 6), 0.1, 1.0)
    gray = b.channel_mix("gray", inp, [0.299, 0.587, 0.114])
    g = _gaussian7()
    by = b.stencil("blur_y", gray, [((k, 0), g[k]) for k in range(7)])
    bx = b.stencil("blur_x", by, [((0, k), g[k]) for k in range(7)])
    center = b.crop("gray_c", gray, (3, 3), (n, n))
    sharp = b.pointwise("sharpen", "sharpen", [center, bx], lambda c, bl: 2.0 * c - bl)
    ratio = b.pointwise("ratio", "div", [sharp, center], lambda s, c: s / c)
    crop = b.crop("input_c", inp, (0, 3, 3), (3, n, n))
    out = b.pointwise("output", "mul", [crop, ratio], lambda i, r: i * r)
    return b.build([out])


def harris(size: str = "full") -> Pipeline:
    n = _pick(size, 64, 2048)
    b = Builder("harris", f"Harris corner response of a 3-channel {n}x{n} image (Halide's app)")
    inp = b.input("input", (3, n + 4, n + 4), 0.0, 1.0)
    gray = b.channel_mix("gray", inp, [0.299, 0.587, 0.114])
    sob_y = [((0, 0), -1 / 12), ((0, 1), -2 / 12), ((0, 2), -1 / 12), ((2, 0), 1 / 12), ((2, 1), 2 / 12), ((2, 2), 1 / 12)]
    sob_x = [((0, 0), -1 / 12), ((1, 0), -2 / 12), ((2, 0), -1 / 12), ((0, 2), 1 / 12), ((1, 2), 2 / 12), ((2, 2), 1 / 12)]
    iy = b.stencil("Iy", gray, sob_y)
    ix = b.stencil("Ix", gray, sob_x)
    ixx = b.pointwise("Ixx", "mul", [ix, ix], lambda a, c: a * c)
    iyy = b.pointwise("Iyy", "mul", [iy, iy], lambda a, c: a * c)
    ixy = b.pointwise("Ixy", "mul", [ix, iy], lambda a, c: a * c)
    box = [((dy, dx), 1.0) for dy in range(3) for dx in range(3)]
    sxx = b.stencil("Sxx", ixx, box)
    syy = b.stencil("Syy", iyy, box)
    sxy = b.stencil("Sxy", ixy, box)
    out = b.pointwise("harris", "harris_response", [sxx, syy, sxy], lambda a, c, d: a * c - d * d - 0.04 * (a + c) * (a + c))
    return b.build([out])


def conv_relu(size: str = "full") -> Pipeline:
    c, hw = _pick(size, 8, 64), _pick(size, 16, 56)
    b = Builder("conv_relu", f"NCHW 3x3 conv {c}->{c} channels at {hw}x{hw}, pad 1, + bias + ReLU")
    x = b.input("input", (1, c, hw, hw))
    w = b.input("weight", (c, c, 3, 3))
    bias = b.input("bias", (c,))
    conv = b.conv2d("conv", x, w, bias, pad=1)
    out = b.activation("relu", conv, "relu")
    return b.build([out])


def depthwise_conv(size: str = "full") -> Pipeline:
    c, hw = _pick(size, 8, 128), _pick(size, 16, 56)
    b = Builder("depthwise_conv", f"NCHW depthwise 3x3 conv, {c} channels at {hw}x{hw}, pad 1, + bias")
    x = b.input("input", (1, c, hw, hw))
    w = b.input("weight", (c, 1, 3, 3))
    bias = b.input("bias", (c,))
    out = b.conv2d("dwconv", x, w, bias, pad=1, groups=c)
    return b.build([out])


def maxpool(size: str = "full") -> Pipeline:
    c, hw = _pick(size, 8, 64), _pick(size, 16, 112)
    b = Builder("maxpool", f"3x3 stride-2 max pool, pad 1, {c} channels at {hw}x{hw} (ResNet stem)")
    x = b.input("input", (1, c, hw, hw))
    padded = b.pad("pool_pad", x, 1, FLOAT_LOWEST)
    out = b.pool2d("pool", padded, "max", 3, 2)
    return b.build([out])


def matmul(size: str = "full") -> Pipeline:
    n = _pick(size, 128, 1024)
    b = Builder("matmul", f"{n}x{n} by {n}x{n} matrix multiply (stored through an output stage)")
    a = b.input("A", (n, n))
    bb = b.input("B", (n, n))
    prod = b.matmul("prod", a, bb)
    out = b.pointwise("C", "copy", [prod], lambda v: v)
    return b.build([out])


def mlp(size: str = "full") -> Pipeline:
    bs, d_in, hid, d_out = (_pick(size, 16, 256), _pick(size, 64, 1024), _pick(size, 64, 1024), _pick(size, 32, 512))
    b = Builder("mlp", f"3 dense layers {d_in}->{hid}->{hid}->{d_out}, batch {bs}, ReLU between")
    x = b.input("x", (bs, d_in))
    w1, b1 = b.input("w1", (d_in, hid), -0.1, 0.1), b.input("b1", (hid,))
    w2, b2 = b.input("w2", (hid, hid), -0.1, 0.1), b.input("b2", (hid,))
    w3, b3 = b.input("w3", (hid, d_out), -0.1, 0.1), b.input("b3", (d_out,))
    h = b.activation("relu1", b.matmul("fc1", x, w1, b1), "relu")
    h = b.activation("relu2", b.matmul("fc2", h, w2, b2), "relu")
    out = b.matmul("fc3", h, w3, b3)
    return b.build([out])


def softmax(size: str = "full") -> Pipeline:
    rows, cols = _pick(size, 32, 2048), _pick(size, 64, 1024)
    b = Builder("softmax", f"row softmax of a {rows}x{cols} matrix (max, exp, sum, divide)")
    x = b.input("x", (rows, cols), -4.0, 4.0)
    out = b.softmax("softmax", x)
    return b.build([out])


def layernorm(size: str = "full") -> Pipeline:
    rows, cols = _pick(size, 32, 2048), _pick(size, 64, 1024)
    b = Builder("layernorm", f"layer normalization of {rows} tokens of width {cols}")
    x = b.input("x", (rows, cols))
    g, be = b.input("gamma", (cols,)), b.input("beta", (cols,))
    out = b.layernorm("layernorm", x, g, be)
    return b.build([out])


def resnet_block(size: str = "full") -> Pipeline:
    c, hw = _pick(size, 8, 64), _pick(size, 16, 56)
    b = Builder("resnet_block", f"ResNet basic block, {c} channels at {hw}x{hw}: conv-bn-relu-conv-bn-add-relu")
    x = b.input("input", (1, c, hw, hw))
    w1, w2 = b.input("w1", (c, c, 3, 3), -0.2, 0.2), b.input("w2", (c, c, 3, 3), -0.2, 0.2)
    s1, t1 = b.input("bn1_scale", (c,), 0.5, 1.5), b.input("bn1_shift", (c,))
    s2, t2 = b.input("bn2_scale", (c,), 0.5, 1.5), b.input("bn2_shift", (c,))
    h = b.conv2d("conv1", x, w1, pad=1)
    h = b.activation("relu1", b.channel_affine("bn1", h, s1, t1), "relu")
    h = b.conv2d("conv2", h, w2, pad=1)
    h = b.channel_affine("bn2", h, s2, t2)
    out = b.add("output", h, x, then_relu=True)
    return b.build([out])


def mobilenet_block(size: str = "full") -> Pipeline:
    c, hw, e = _pick(size, 8, 24), _pick(size, 16, 56), 6
    b = Builder("mobilenet_block", f"MobileNetV2 inverted residual, {c}->{c * e}->{c} channels at {hw}x{hw} (BN folded)")
    x = b.input("input", (1, c, hw, hw))
    we, be = b.input("w_expand", (c * e, c, 1, 1), -0.3, 0.3), b.input("b_expand", (c * e,))
    wd, bd = b.input("w_dw", (c * e, 1, 3, 3), -0.3, 0.3), b.input("b_dw", (c * e,))
    wp, bp = b.input("w_project", (c, c * e, 1, 1), -0.3, 0.3), b.input("b_project", (c,))
    h = b.activation("expand_relu6", b.conv2d("expand", x, we, be), "relu6")
    h = b.activation("dw_relu6", b.conv2d("dw", h, wd, bd, pad=1, groups=c * e), "relu6")
    h = b.conv2d("project", h, wp, bp)
    out = b.add("output", h, x)
    return b.build([out])


def attention(size: str = "full") -> Pipeline:
    s, d = _pick(size, 32, 1024), _pick(size, 16, 64)
    b = Builder("attention", f"one attention head, {s} tokens, head size {d}: softmax(QK^T/sqrt(d)) V")
    q, k, v = b.input("Q", (s, d)), b.input("K", (s, d)), b.input("V", (s, d))
    scores = b.matmul("scores", q, k, b_transposed=True)
    scaled = b.scale("scaled", scores, 1.0 / math.sqrt(d))
    probs = b.softmax("probs", scaled)
    out = b.matmul("out", probs, v)
    return b.build([out])


ZOO: dict[str, Callable[[str], Pipeline]] = {
    f.__name__: f
    for f in (
        blur,
        unsharp,
        harris,
        conv_relu,
        depthwise_conv,
        maxpool,
        matmul,
        mlp,
        softmax,
        layernorm,
        resnet_block,
        mobilenet_block,
        attention,
    )
}


def names() -> list[str]:
    return list(ZOO)


def get(name: str, size: str = "full") -> Pipeline:
    if name not in ZOO:
        raise KeyError(f"unknown pipeline {name!r} (built-in: {', '.join(ZOO)})")
    return ZOO[name](size)
