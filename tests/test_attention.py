"""Sliding-window attention: the blocked CPU path and the FlexAttention mask of the CUDA path both equal
dense attention under the (T, T) sliding-window mask."""

import warnings

import pytest
import torch
import torch.nn.functional as F

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
