"""The CUDA code paths, exercised on the CPU where PyTorch allows it."""

import torch
import torch.nn.functional as F

from rltok.layers import blocks


def test_attention_gets_one_dtype_when_rms_norm_comes_back_in_fp32(monkeypatch):
    # CUDA autocast (torch >= 2.12) runs rms_norm in fp32 (torch._C._dispatch_dump("aten::rms_norm")
    # lists an AutocastCUDA kernel, and no AutocastCPU one); do the same here under CPU autocast
    real = F.rms_norm
    monkeypatch.setattr(blocks.F, "rms_norm", lambda x, shape: real(x.float(), shape))
    seen = []

    def sdpa(q, k, v, **kwargs):
        seen.append((q.dtype, k.dtype, v.dtype))
        return torch.zeros_like(q)

    monkeypatch.setattr(blocks.F, "scaled_dot_product_attention", sdpa)
    attention = blocks.Attention(32, 2)
    x = torch.randn(2, 8, 32)
    cos, sin = blocks.rotary(torch.arange(8).expand(2, 8), 16, 10000.0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        attention(x, cos, sin, None)
        attention(x, cos, sin, 4)  # the sliding window
        valid = torch.arange(8) < torch.tensor([[5], [8]])  # the main network's packed chunks
        attention(torch.randn(int(valid.sum()), 32), cos, sin, None, valid)
    assert seen and all(len(set(dtypes)) == 1 for dtypes in seen), seen


def test_the_utilisation_table_tells_the_h100_variants_apart():
    from rltok.flops import peak_of

    assert peak_of("NVIDIA H100 80GB HBM3") == 989e12
    assert peak_of("NVIDIA H100 PCIe") == 756e12
    assert peak_of("NVIDIA H100 NVL") == 835e12
    assert peak_of("NVIDIA H200") == 989e12 and peak_of("Some Future GPU") is None


def test_peak_tflops_gives_a_cpu_run_its_utilisation(tmp_path):
    import json

    from conftest import SMOKE

    from rltok.cli import main

    out = tmp_path / "run"
    assert main([*SMOKE, "--max-steps", "10", "--peak-tflops", "1", "--out", str(out)]) == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    mfu = [r["mfu"] for r in records if "mfu" in r]
    assert mfu and all(0 < m < 1 for m in mfu)
