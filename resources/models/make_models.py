"""Generate the sample ONNX models in this folder, reproducibly (fixed seeds), from PyTorch.

    .venv/bin/python resources/models/make_models.py

ResNet-50 (`ResNet50`, `export_resnet50`) is defined here too but never written to this
folder (about 100 MB of weights): `bench import` exports it to a temp dir when it runs.

Each model is a small, realistic building block of a well-known network, exported with the
TorchScript-based exporter (opset 17, static shapes). The convolutional models are exported
in TrainingMode.PRESERVE from eval mode, so their BatchNormalization nodes stay in the file
(as in models from other tools) and the importer's BN folding has something to do; the
batch-norm statistics are randomized so that folding them is not a no-op.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import torch
from torch import nn

HERE = Path(__file__).resolve().parent
OPSET = 17


class BasicBlock(nn.Module):
    """ResNet basic block: conv3x3-BN-ReLU-conv3x3-BN, identity shortcut, ReLU."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + x)


class ResNet18Stage(nn.Module):
    """ResNet-18's first stage (layer1): two basic blocks, 64 channels at 56x56."""

    def __init__(self, c: int = 64) -> None:
        super().__init__()
        self.layer1 = nn.Sequential(BasicBlock(c), BasicBlock(c))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer1(x)


class InvertedResidual(nn.Module):
    """MobileNetV2 block: 1x1 expand (x6) - BN - ReLU6, 3x3 depthwise - BN - ReLU6, 1x1 project - BN, residual."""

    def __init__(self, c: int = 24, expand: int = 6) -> None:
        super().__init__()
        h = c * expand
        self.conv = nn.Sequential(
            nn.Conv2d(c, h, 1, bias=False), nn.BatchNorm2d(h), nn.ReLU6(inplace=True),
            nn.Conv2d(h, h, 3, padding=1, groups=h, bias=False), nn.BatchNorm2d(h), nn.ReLU6(inplace=True),
            nn.Conv2d(h, c, 1, bias=False), nn.BatchNorm2d(c),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x)


class SmallCNN(nn.Module):
    """A small classifier: (conv-BN-ReLU-maxpool) x2, global average pool, linear."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        )  # fmt: skip
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.features(x)), 1))


class EncoderLayer(nn.Module):
    """A pre-norm transformer encoder layer, batch first, attention written out with matmul
    and softmax (nn.MultiheadAttention's export path needs ops that are not mapped)."""

    def __init__(self, d: int = 128, heads: int = 4, ff: int = 512) -> None:
        super().__init__()
        self.heads, self.dh = heads, d // heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, ff), nn.Linear(ff, d)
        self.act = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        qkv = self.qkv(self.ln1(x)).reshape(b, s, 3, self.heads, self.dh).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = torch.softmax(q @ k.transpose(-2, -1) * (1.0 / math.sqrt(self.dh)), dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, s, d))
        return x + self.fc2(self.act(self.fc1(self.ln2(x))))


class Bottleneck(nn.Module):
    """ResNet-50's bottleneck: 1x1 reduce, 3x3 (stride here, as in torchvision), 1x1 expand (x4), each with BN;
    projection shortcut (1x1 conv + BN) where the shape changes."""

    def __init__(self, cin: int, mid: int, stride: int) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid)
        self.conv2, self.bn2 = nn.Conv2d(mid, mid, 3, stride, 1, bias=False), nn.BatchNorm2d(mid)
        self.conv3, self.bn3 = nn.Conv2d(mid, mid * 4, 1, bias=False), nn.BatchNorm2d(mid * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != mid * 4:
            self.downsample = nn.Sequential(nn.Conv2d(cin, mid * 4, 1, stride, bias=False), nn.BatchNorm2d(mid * 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + (x if self.downsample is None else self.downsample(x)))


class ResNet50(nn.Module):
    """ResNet-50 (torchvision's layout and module names, no torchvision): stem, 3-4-6-3
    bottlenecks, global average pool, fc. `width` is the stem's channels (64 in the real
    network); a smaller width keeps the graph (53 convs, ~170 stages after BN folding) with
    fewer weights."""

    def __init__(self, width: int = 64, classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin, layers = width, []
        for k, (blocks, stride) in enumerate(((3, 1), (4, 2), (6, 2), (3, 2))):
            mid = width * 2**k
            layers.append(nn.Sequential(*[Bottleneck(cin if b == 0 else mid * 4, mid, stride if b == 0 else 1) for b in range(blocks)]))
            cin = mid * 4
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class ConvBNAct(nn.Sequential):
    """Conv - BN - activation (ReLU6 by default), as MobileNetV2's blocks are built."""

    def __init__(self, cin: int, cout: int, k: int = 3, stride: int = 1, groups: int = 1, act: bool = True) -> None:
        layers: list[nn.Module] = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
        super().__init__(*layers, *([nn.ReLU6(inplace=True)] if act else []))


class MBBlock(nn.Module):
    """MobileNetV2's inverted residual at any stride and expansion (torchvision's layout)."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        h = cin * expand
        layers: list[nn.Module] = [ConvBNAct(cin, h, 1)] if expand != 1 else []
        layers += [ConvBNAct(h, h, 3, stride, groups=h), ConvBNAct(h, cout, 1, act=False)]
        self.conv = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.residual else self.conv(x)


class MobileNetV2(nn.Module):
    """MobileNetV2 (width 1.0; torchvision's inverted-residual settings), random weights."""

    SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))

    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        layers: list[nn.Module] = [ConvBNAct(3, 32, 3, 2)]
        cin = 32
        for t, c, n, s in self.SETTINGS:
            for k in range(n):
                layers.append(MBBlock(cin, c, s if k == 0 else 1, t))
                cin = c
        layers.append(ConvBNAct(cin, 1280, 1))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(1280, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


class Fire(nn.Module):
    """SqueezeNet's fire module: 1x1 squeeze, then 1x1 and 3x3 expands concatenated."""

    def __init__(self, cin: int, squeeze: int, e1: int, e3: int) -> None:
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.expand1x1 = nn.Conv2d(squeeze, e1, 1)
        self.expand3x3 = nn.Conv2d(squeeze, e3, 3, padding=1)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.squeeze(x))
        return torch.cat([self.relu(self.expand1x1(x)), self.relu(self.expand3x3(x))], 1)


class SqueezeNet(nn.Module):
    """SqueezeNet 1.1 (torchvision's layout; floor-mode pooling, which gives the same shapes
    at 224x224), random weights."""

    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 3, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
            Fire(64, 16, 64, 64), Fire(128, 16, 64, 64), nn.MaxPool2d(3, 2),
            Fire(128, 32, 128, 128), Fire(256, 32, 128, 128), nn.MaxPool2d(3, 2),
            Fire(256, 48, 192, 192), Fire(384, 48, 192, 192), Fire(384, 64, 256, 256), Fire(512, 64, 256, 256),
        )  # fmt: skip
        self.classifier = nn.Sequential(nn.Conv2d(512, classes, 1), nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(self.classifier(self.features(x)), 1)


class ViT(nn.Module):
    """A ViT-style encoder (ViT-Ti/16's sizes: 224x224, 16x16 patches, 196 tokens, width 192,
    3 heads, MLP 768): patch embedding by a strided conv, learned position embedding, pre-norm
    encoder layers, mean-pooled tokens (no class token), a linear head."""

    def __init__(
        self, depth: int = 12, d: int = 192, heads: int = 3, ff: int = 768, patch: int = 16, size: int = 224, classes: int = 1000
    ) -> None:
        super().__init__()
        self.embed = nn.Conv2d(3, d, patch, patch)
        self.pos = nn.Parameter(torch.randn(1, (size // patch) ** 2, d) * 0.02)
        self.layers = nn.Sequential(*[EncoderLayer(d, heads, ff) for _ in range(depth)])
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x).flatten(2).transpose(1, 2) + self.pos
        return self.head(self.norm(self.layers(x)).mean(1))


def randomize_bn(m: nn.Module, g: torch.Generator) -> None:
    """Draw every BatchNorm2d's weight, bias and running statistics of `m` from `g`, in place
    (a fresh BatchNorm2d is nearly the identity); engine/bench/peers.py rebuilds the exported
    models' weights with it."""
    for bn in m.modules():
        if isinstance(bn, nn.BatchNorm2d):
            with torch.no_grad():
                bn.weight.uniform_(0.5, 1.5, generator=g)
                bn.bias.uniform_(-0.2, 0.2, generator=g)
                bn.running_mean.uniform_(-0.2, 0.2, generator=g)
                bn.running_var.uniform_(0.5, 2.0, generator=g)


MODELS = {
    "resnet18_stage": (ResNet18Stage, (1, 64, 56, 56)),
    "mobilenetv2_block": (InvertedResidual, (1, 24, 56, 56)),
    "transformer_layer": (EncoderLayer, (1, 64, 128)),
    "small_cnn": (SmallCNN, (1, 3, 32, 32)),
}


# The sample set of whole networks (issue 14 item 5): realistic input sizes, exported when a
# benchmark runs (`bench models --tune`: into a cache directory, never committed; ResNet-50
# alone is about 100 MB of weights). name -> (module factory, input shape).
SAMPLE_SET = {
    "resnet50": (ResNet50, (1, 3, 224, 224)),
    "mobilenetv2": (MobileNetV2, (1, 3, 224, 224)),
    "squeezenet": (SqueezeNet, (1, 3, 224, 224)),
    "vit_tiny": (ViT, (1, 3, 224, 224)),
    "transformer_block": (lambda: EncoderLayer(768, 12, 3072), (1, 128, 768)),  # BERT-base's layer at 128 tokens
}


def export_sample(name: str, out_dir: Path) -> Path:
    """A SAMPLE_SET model exported to OUT_DIR/NAME.onnx (same seeds as `export`)."""
    factory, shape = SAMPLE_SET[name]
    torch.manual_seed(0)
    return _export(factory(), shape, Path(out_dir) / f"{name}.onnx")


def sample_module(name: str) -> nn.Module:
    """The SAMPLE_SET model as `export_sample` built it (same seeds, so the same weights as the
    exported file), in eval mode: the benchmark's PyTorch peer."""
    factory, _shape = SAMPLE_SET[name]
    with torch.random.fork_rng():
        torch.manual_seed(0)
        module = factory().eval()
        randomize_bn(module, torch.Generator().manual_seed(1))
    return module


def export(name: str, out_dir: Path = HERE) -> Path:
    cls, shape = MODELS[name]
    torch.manual_seed(0)  # the weights' initialization: before the model is built
    return _export(cls(), shape, out_dir / f"{name}.onnx")


def export_resnet50(path: Path, size: int = 224, width: int = 64) -> Path:
    """ResNet-50 at 1x3xSIZExSIZE, random weights, BN kept in the file (as `export` does)."""
    torch.manual_seed(0)
    return _export(ResNet50(width), (1, 3, size, size), Path(path))


def _export(model: nn.Module, shape: tuple[int, ...], path: Path) -> Path:
    g = torch.Generator().manual_seed(1)
    model = model.eval()
    randomize_bn(model, g)
    x = torch.randn(*shape, generator=g)
    keep_bn = any(isinstance(m, nn.BatchNorm2d) for m in model.modules())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model, (x,), str(path), opset_version=OPSET, dynamo=False, input_names=["input"], output_names=["output"],
            training=torch.onnx.TrainingMode.PRESERVE if keep_bn else torch.onnx.TrainingMode.EVAL,
            do_constant_folding=not keep_bn,
        )  # fmt: skip
    return path


def main() -> None:
    for name in MODELS:
        path = export(name)
        print(f"{path.name}: {path.stat().st_size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
