"""The fast path: sliding-window attention (the blocked CPU path and the FlexAttention mask of the CUDA
path both equal dense attention under the (T, T) sliding-window mask), torch.compile of the blocks, and
the analytic FLOPs behind the utilisation figure."""

import json
import subprocess
import sys
import warnings

import pytest
import torch
import torch.nn.functional as F
from conftest import SMOKE

from rltok.config import preset
from rltok.flops import flops_per_byte
from rltok.layers.blocks import (
    FLEX_BLOCK,
    Stack,
    _sliding_block_mask,
    document_block_mask,
    local_attention,
    padded_rows,
)
from rltok.layers.packing import Packing
from rltok.pretrained import build_model


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
    # eager FlexAttention on CPU warns that it is unfused: fine for a check
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = flex_attention(q, k, v, block_mask=_sliding_block_mask(256, 64, torch.device("cpu")))
    assert torch.allclose(y, dense(q, k, v, 64), atol=1e-5)


def test_packed_rows_attend_within_their_sequence_as_the_padded_layout_does():
    """The main network's chunks, packed without padding, give what the right-padded layout gives."""
    stack = Stack(2, 32, 2, 2, None, 10000.0)
    lengths = torch.tensor([5, 1, 17, 9])
    valid = torch.arange(17) < lengths[:, None]
    positions = torch.sort(torch.randint(0, 500, (4, 17)), dim=1).values
    x = torch.randn(int(lengths.sum()), 32, requires_grad=True)
    packing = Packing.of(valid)
    packed = stack(packing.unpack(x), positions, packing)[: len(x)]
    padded = stack(packing.unpack(x), positions)[valid]
    assert torch.allclose(packed, padded, atol=1e-5)
    (g1,), (g2,) = (torch.autograd.grad(y.square().sum(), x) for y in (packed, padded))
    assert torch.allclose(g1, g2, atol=1e-4)


def test_a_varying_chunk_count_packs_into_few_shapes_with_little_padding():
    """The packed rows repeat from step to step (a bf16 matrix product on the CPU builds a kernel per
    new shape): a count drifting over 1400-1900 chunks, as the CPU preset's does, meets at most 9
    sizes, each at most 1/16 of padding; the padding rows are zeros and unpack drops them."""
    from rltok.layers.packing import bucket

    sizes = {bucket(n, 16, 16) for n in range(1400, 1900)}
    assert len(sizes) <= 9
    assert all(n <= bucket(n, 16, 16) <= n * 17 / 16 + 16 for n in range(1, 5000))
    valid = torch.arange(140) < torch.tensor([[103], [97], [121]])
    packing = Packing.of(valid)
    x = torch.randn(3, 140, 8)
    rows = packing.pack(x)
    assert packing.rows == len(rows) == 336 and not rows[321:].any()
    assert torch.equal(packing.unpack(rows), x * valid[..., None])


def test_the_main_network_pads_its_chunks_to_a_bucket_and_the_padding_changes_no_logit(
    monkeypatch,
):
    """The U-Net's main network runs on packed rows padded to a bucket, and its logits and gradients
    equal those of the exact packing."""
    from rltok.layers import packing as packing_module

    cfg = preset("smoke")
    cfg.model.n_main = 2
    torch.manual_seed(0)
    model = build_model(cfg)
    ids = torch.randint(0, 256, (3, 64))
    boundaries = torch.zeros(3, 64, dtype=torch.long)
    boundaries[0, [0, 40]], boundaries[1, ::3], boundaries[2, ::4] = 1, 1, 1  # 40 chunks, bucket 48
    rows = []
    model.main.blocks[0].mlp.gate_up.register_forward_hook(lambda m, i, o: rows.append(len(i[0])))

    def run():
        model.zero_grad()
        logits = model(ids, boundaries=boundaries).logits
        logits.square().mean().backward()
        return logits, model.main.blocks[0].mlp.gate_up.weight.grad.clone()

    padded = run()
    monkeypatch.setattr(packing_module, "bucket", lambda n, multiple, per_octave: n)
    exact = run()
    assert rows[0] > rows[1] == int(boundaries.sum()) and rows[0] % 16 == 0
    for a, b in zip(padded, exact):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_flex_document_mask_of_the_cuda_path_equals_attention_per_sequence():
    from torch.nn.attention.flex_attention import flex_attention

    lengths = [70, 3, 150, 77, 200]  # 500 rows, padded to a bucket of 512: blocks span sequences
    q, k, v = (torch.randn(1, 2, sum(lengths), 16) for _ in range(3))
    rows = padded_rows(sum(lengths))
    mask = document_block_mask(torch.tensor(lengths), rows, max(lengths))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        padded = (F.pad(t, (0, 0, 0, rows - sum(lengths))) for t in (q, k, v))
        y = flex_attention(*padded, block_mask=mask)[..., : sum(lengths), :]
    ends = torch.tensor(lengths).cumsum(0).tolist()
    want = torch.cat(
        [
            F.scaled_dot_product_attention(
                q[..., s:e, :], k[..., s:e, :], v[..., s:e, :], is_causal=True
            )
            for s, e in zip([0, *ends[:-1]], ends)
        ],
        dim=2,
    )
    assert torch.allclose(y, want, atol=1e-5)


def test_document_mask_tables_are_exact_and_linear_in_the_rows():
    """The block tables list exactly the blocks where some query sees some key, the transposed
    (backward) tables are the transpose of the forward ones, and both store rows x a constant."""
    from torch.nn.attention.flex_attention import _transpose_ordered

    torch.manual_seed(0)
    sizes = {}
    for n_seq in (10, 40):
        lengths = torch.randint(1, 300, (n_seq,))
        n = int(lengths.sum())
        rows = padded_rows(n)
        mask = document_block_mask(lengths, rows, 300)
        blocks = rows // FLEX_BLOCK
        doc = torch.repeat_interleave(
            torch.arange(n_seq + 1), torch.cat([lengths, torch.tensor([rows - n])])
        )
        seen = (doc[:, None] == doc[None, :]) & torch.ones(rows, rows, dtype=torch.bool).tril()
        seen[n:] = False  # the padding's own rows may see less: their outputs are dropped
        needed = seen.view(blocks, FLEX_BLOCK, blocks, FLEX_BLOCK).any(3).any(1)
        listed = mask.to_dense()[0, 0].bool()
        assert torch.equal(listed[: -(-n // FLEX_BLOCK)], needed[: -(-n // FLEX_BLOCK)])
        q_num, q_idx = _transpose_ordered(mask.kv_num_blocks, mask.kv_indices.contiguous())
        assert torch.equal(q_num, mask.q_num_blocks)
        for j in range(blocks):
            k = int(q_num[0, 0, j])
            assert torch.equal(q_idx[0, 0, j, :k], mask.q_indices[0, 0, j, :k])
        sizes[rows] = mask.kv_indices.untyped_storage().nbytes()
    (r1, b1), (r2, b2) = sorted(sizes.items())
    assert b2 / b1 < 1.2 * r2 / r1  # linear, where a (blocks x blocks) table grows as the square


@pytest.mark.slow
@pytest.mark.on_demand
def test_compiled_blocks_train_like_eager_ones(tmp_path):
    """--compile (inductor; minutes on a CPU) gives the losses of the eager run. Each run is a fresh
    process, as a user's is (inductor must import its own build tools)."""
    losses = {}
    for name, extra in (("eager", []), ("compiled", ["--compile"])):
        out = tmp_path / name
        subprocess.run(
            [
                sys.executable,
                "-m",
                "rltok",
                *SMOKE,
                "--max-steps",
                "5",
                "--precision",
                "fp32",
                "--out",
                str(out),
                *extra,
            ],
            check=True,
            capture_output=True,
        )
        losses[name] = [
            json.loads(line)["loss"]
            for line in (out / "metrics.jsonl").read_text().splitlines()
            if '"loss"' in line
        ]
    assert len(losses["eager"]) == 1 and abs(losses["eager"][0] - losses["compiled"][0]) < 1e-3


def test_flops_per_byte_counts_chunks_at_the_rate_and_attention_by_context():
    cfg = preset("tiny")
    unet = build_model(cfg)
    fewer, more = flops_per_byte(unet, 0.1, 512), flops_per_byte(unet, 0.4, 512)
    main_weights = sum(p.numel() for p in unet.main.parameters())
    # the main network's weights, plus its longer attention
    assert more - fewer > 6 * 0.3 * main_weights
    cfg.boundaries.method = "flat"
    flat = build_model(cfg)
    # the flat model's full attention grows with the sequence; the U-Net's byte layers see a window
    assert flops_per_byte(flat, None, 4096) - flops_per_byte(flat, None, 512) > 2 * (
        flops_per_byte(unet, 0.2, 4096) - flops_per_byte(unet, 0.2, 512)
    )
    assert flops_per_byte(unet, 0.2, 512) < flops_per_byte(flat, None, 512)
