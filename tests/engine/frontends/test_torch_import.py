"""PyTorch import through torch.fx: modules verified against their own eager outputs."""

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from engine import halide_backend as HB
from engine import reference as R
from engine.frontends import ModelImportError, UnsupportedModelError, import_torch
from engine.schedule import default_schedule

ROOT = Path(__file__).resolve().parents[3]


def run_verified(result):
    p = result.pipeline
    low = HB.lower(p, default_schedule(p))
    HB.compile_jit(low)
    ins = R.make_inputs(p)
    _keep = HB.bind_inputs(low, ins)
    outs = HB.output_arrays(p)
    HB.make_runner(low, outs)()
    refs, method = R.reference(p, ins)
    assert method == "outputs recorded from torch at import"
    v = R.verify(p, outs, refs, method)
    assert v.ok, v.message
    return outs


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.dw, self.bn2 = nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8, bias=False), nn.BatchNorm2d(8)
        self.act = nn.ReLU6()
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2), nn.Linear(8, 5))

    def forward(self, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        y = self.act(self.bn2(self.dw(x)))
        return self.head(y + F.avg_pool2d(x, 2))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(48, 32), nn.Linear(32, 10)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        h = self.drop(F.gelu(self.fc1(x.view(x.size(0), -1))))
        return torch.tanh(self.fc2(h)), h.mean(dim=1, keepdim=True)


class Block(nn.Module):
    """Pre-norm attention + MLP, heads split with chunk / view / transpose, both attention spellings."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.h, self.dh = heads, d // heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(approximate="tanh"), nn.Linear(2 * d, d))

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        q, k, v = (t.view(b, s, self.h, self.dh).transpose(1, 2) for t in (q, k, v))
        att = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.dh), dim=-1)
        a1 = att @ v
        a2 = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj((a1 + a2).transpose(1, 2).reshape(b, s, d))
        return x + self.mlp(self.ln2(x))


class Indexing(nn.Module):
    def forward(self, x):
        y = torch.cat([x[:, :2], x[:, -1:] * 2.0], dim=1)
        z = torch.stack([y, y.permute(0, 1, 3, 2)], dim=1).sum(dim=1)
        return z[..., 1:, None, ::2].squeeze(-2) - x.unsqueeze(0)[0, :, :3, 1:, ::2]


def _bn_stats(m):
    g = torch.Generator().manual_seed(0)
    for bn in m.modules():
        if isinstance(bn, nn.BatchNorm2d):
            bn.running_mean.uniform_(-0.3, 0.3, generator=g)
            bn.running_var.uniform_(0.5, 2.0, generator=g)
    return m


@pytest.mark.parametrize(
    "module,shape",
    [(CNN, (2, 3, 16, 16)), (MLP, (4, 3, 4, 4)), (Block, (2, 8, 32)), (Indexing, (2, 4, 6, 6))],
    ids=["cnn", "mlp", "transformer_block", "indexing"],
)
def test_module_matches_eager(module, shape, tmp_path):
    torch.manual_seed(0)
    m = _bn_stats(module())
    x = torch.randn(*shape)
    res = import_torch(m, (x,), weights_dir=tmp_path)
    outs = run_verified(res)
    with torch.no_grad():
        eager = m.eval()(x)
    eager = eager if isinstance(eager, tuple) else (eager,)
    for name, e in zip(res.pipeline.outputs, eager):
        np.testing.assert_allclose(outs[name], e.numpy(), rtol=1e-3, atol=1e-4 * float(e.abs().max()))
    assert res.pipeline.source["kind"] == "torch" and res.report.unsupported == []


def test_cnn_simplifications_are_reported(tmp_path):
    res = import_torch(_bn_stats(CNN()), (torch.randn(1, 3, 16, 16),), weights_dir=tmp_path)
    text = "\n".join(res.report.simplifications)
    assert text.count("folded into the preceding Conv2d") == 2 and "Dropout 'head_2' removed" in text
    assert "Flatten 'head_1' is an index remapping" in text
    assert "BatchNorm2d" in res.report.ops_mapped and "channel_affine" not in {s.op for s in res.pipeline.stages}
    assert {i.name for i in res.pipeline.inputs if not i.weight} == {"x_"}
    with np.load(res.pipeline.source["weights"], allow_pickle=False) as z:
        assert {"input::x_", "output::output"} <= set(z.files)


def test_unsupported_calls_are_listed(tmp_path):
    class Bad(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(8, 2, batch_first=True)

        def forward(self, x):
            y = torch.cumsum(x, dim=1)
            z = x.pow(x) + torch.clamp(x, min=x)  # mapped ops, cases that are not
            return self.attn(y, y, y)[0] + torch.sort(x, dim=-1).values + z

    with pytest.raises(UnsupportedModelError) as err:
        import_torch(Bad(), (torch.randn(1, 4, 8),), weights_dir=tmp_path)
    found = {u["node"]: u["reason"] for u in err.value.unsupported}
    assert set(found) == {"cumsum", "attn", "sort", "pow_1", "clamp"}
    assert "tensor exponent" in found["pow_1"] and "tensor bounds" in found["clamp"] and "no mapping" in found["attn"]


def test_untraceable_module_is_a_clear_error(tmp_path):
    class Branchy(nn.Module):
        def forward(self, x):
            return x if x.sum() > 0 else -x

    with pytest.raises(ModelImportError, match="torch.fx cannot trace"):
        import_torch(Branchy(), (torch.randn(2, 2),), weights_dir=tmp_path)


def test_cli_import_of_a_python_file(tmp_path):
    src = tmp_path / "my_model.py"
    lines = [
        "import torch",
        "class Net(torch.nn.Module):",
        "    def __init__(self):",
        "        super().__init__()",
        "        self.fc = torch.nn.Linear(6, 3)",
        "    def forward(self, x):",
        "        return torch.relu(self.fc(x))",
    ]
    src.write_text("\n".join(lines) + "\n")
    out_json = tmp_path / "net.json"
    cmd = [sys.executable, str(ROOT / "main.py"), "import", f"{src}:Net", "--input-shape", "2,6", "--json", "--weights-dir",
           str(tmp_path), "--out", str(out_json)]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["inputs"] == [{"name": "x_", "shape": [2, 6]}] and out["ops_mapped"] == {"Linear": 1, "relu": 1}
    from engine.api import load_pipeline

    assert load_pipeline(str(out_json)).content_hash() == out["pipeline_hash"]
    from engine.frontends.torch_import import load_module_from_file  # the CLI's loader: errors name the problem

    with pytest.raises(ModelImportError, match="defines no 'Missing'"):
        load_module_from_file(f"{src}:Missing")
    with pytest.raises(ModelImportError, match="expected path/to/model.py:ClassName"):
        load_module_from_file(str(src))
