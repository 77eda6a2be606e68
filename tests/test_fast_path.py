"""The fast path: sliding-window attention (the blocked CPU path and the FlexAttention mask of the CUDA
path both equal dense attention under the (T, T) sliding-window mask), torch.compile of the blocks, and
the analytic FLOPs behind the utilisation figure."""

import warnings

import json

import pytest
import torch
import torch.nn.functional as F

from conftest import SMOKE
from rltok.cli import main
from rltok.config import preset
from rltok.flops import flops_per_byte
from rltok.model import build_model
from rltok.model.blocks import _sliding_block_mask, local_attention


def dense(q, k, v, window):
    i = torch.arange(q.size(2))
    mask = (i[None, :] <= i[:, None]) & (i[None, :] > i[:, None] - window)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@pytest.mark.parametrize("length,window", [(256, 64), (200, 64), (65, 64), (7, 3), (64, 1)])
def test_blocked_sliding_window_equals_the_dense_mask_with_gradients(length, window):
    q, k, v = (torch.randn(2, 3, length, 8, requires_grad=True) for _ in range(3))
    y, reference = local_attention(q, k, v, window), dense(q, k, v, window)
    assert torch.allclose(y, reference, atol=1e-5)
    grads = torch.autograd.grad(y.square().sum(), (q, k, v))
    for a, b in zip(grads, torch.autograd.grad(reference.square().sum(), (q, k, v))):
        assert torch.allclose(a, b, atol=1e-4)


def test_flex_block_mask_of_the_cuda_path_equals_the_dense_mask():
    from torch.nn.attention.flex_attention import flex_attention

    q, k, v = (torch.randn(2, 2, 256, 16) for _ in range(3))
    with warnings.catch_warnings():  # eager FlexAttention on CPU warns that it is unfused: fine for a check
        warnings.simplefilter("ignore")
        y = flex_attention(q, k, v, block_mask=_sliding_block_mask(256, 64, torch.device("cpu")))
    assert torch.allclose(y, dense(q, k, v, 64), atol=1e-5)


@pytest.mark.slow
def test_compiled_blocks_train_like_eager_ones(tmp_path):
    """--compile (inductor; minutes on a CPU) gives the losses of the eager run."""
    losses = {}
    for name, extra in (("eager", []), ("compiled", ["--compile"])):
        out = tmp_path / name
        assert main([*SMOKE, "--max-steps", "5", "--precision", "fp32", "--out", str(out), *extra]) == 0
        losses[name] = [json.loads(line)["loss"] for line in (out / "metrics.jsonl").read_text().splitlines()
                        if '"loss"' in line]
    assert len(losses["eager"]) == 1 and abs(losses["eager"][0] - losses["compiled"][0]) < 1e-3


def test_flops_per_byte_counts_chunks_at_the_rate_and_attention_by_context():
    cfg = preset("tiny")
    unet = build_model(cfg)
    fewer, more = flops_per_byte(unet, 0.1, 512), flops_per_byte(unet, 0.4, 512)
    main_weights = sum(p.numel() for p in unet.main.parameters())
    assert more - fewer > 6 * 0.3 * main_weights  # the main network's weights, plus its longer attention
    cfg.boundaries.method = "flat"
    flat = build_model(cfg)
    # the flat model's full attention grows with the sequence; the U-Net's byte layers see a window
    assert flops_per_byte(flat, None, 4096) - flops_per_byte(flat, None, 512) > 2 * (
        flops_per_byte(unet, 0.2, 4096) - flops_per_byte(unet, 0.2, 512))
    assert flops_per_byte(unet, 0.2, 512) < flops_per_byte(flat, None, 512)
