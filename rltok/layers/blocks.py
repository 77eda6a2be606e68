"""Transformer pieces: RMSNorm, rotary positions, causal attention (full or sliding-window), gated MLP."""

from __future__ import annotations

import contextlib
import functools
import itertools
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rltok.layers.cache import KVCache
from rltok.layers.packing import Packing, bucket


def rms_norm(x: Tensor) -> Tensor:
    """Parameter-free RMSNorm, in x's dtype (it accumulates in fp32 inside). CUDA autocast (torch 2.12
    on) returns rms_norm in fp32, which would hand attention fp32 queries and keys beside bf16 values:
    FlexAttention rejects the mix."""
    return F.rms_norm(x, (x.size(-1),)).type_as(x)


def rotary(positions: Tensor, head_dim: int, base: float) -> tuple[Tensor, Tensor]:
    """cos/sin tables of shape (B, 1, T, head_dim/2) for integer positions of shape (B, T)."""
    inv_freq = base ** (
        -torch.arange(0, head_dim, 2, device=positions.device, dtype=torch.float32) / head_dim
    )
    angles = positions.float()[..., None] * inv_freq
    return angles.cos()[:, None], angles.sin()[:, None]


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate pairs of channels of x (B, H, T, D) by the position angles."""
    x1, x2 = x.float().chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).type_as(x)


def local_attention(q: Tensor, k: Tensor, v: Tensor, window: int) -> Tensor:
    """Causal attention over the last `window` positions, q/k/v (B, H, T, D): queries in blocks of
    `window`, each block seeing its own keys and the block before, so time and memory grow linearly in
    T (a dense (T, T) mask grows quadratically). On CUDA, FlexAttention with a block-sparse mask."""
    if _flex(q):
        return flex(q, k, v, _sliding_block_mask(q.size(2), window, q.device))
    B, H, T, D = q.shape
    W, pad = window, -q.size(2) % window
    q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
    n = (T + pad) // W

    def with_previous(t: Tensor) -> Tensor:  # (B, H * n, 2W, D): the block before, then the block
        t = t.view(B, H, n, W, D)
        return torch.cat([F.pad(t, (0, 0, 0, 0, 1, 0))[:, :, :n], t], dim=3).view(
            B, H * n, 2 * W, D
        )

    i = torch.arange(W, device=q.device)[:, None]
    # key j sits W - j + i positions behind query i
    j = torch.arange(2 * W, device=q.device)[None, :]
    visible = (j > i) & (j <= i + W)
    first = torch.arange(n, device=q.device)[:, None, None] == 0  # block 0 has no block before it
    mask = (visible & ~(first & (j < W))).expand(H, n, W, 2 * W).reshape(H * n, W, 2 * W)
    y = F.scaled_dot_product_attention(
        q.view(B, H * n, W, D), with_previous(k), with_previous(v), attn_mask=mask
    )
    return y.view(B, H, n * W, D)[:, :, :T]


def packed_attention(q: Tensor, k: Tensor, v: Tensor, packing: Packing) -> Tensor:
    """Causal attention within each of the consecutive sequences that q/k/v (H, rows, D) hold, as
    `packing` lays them out (no output of the padding rows after them is read), with no padding
    to the longest: one attention per sequence on the CPU, FlexAttention with a block-sparse document
    mask on CUDA. There the rows are padded further, to a coarser bucket (`padded_rows`), so that a
    varying chunk count compiles once per bucket, not once per count."""
    if _flex(q):
        N, rows = q.size(1), padded_rows(q.size(1))
        if packing.block_mask is None:  # built by the first layer, used by every layer
            packing.block_mask = document_block_mask(packing.lengths, rows, packing.longest)
        # contiguous also when N fills its bucket exactly, so every step of a bucket has the same
        # strides and reuses its compile
        q, k, v = (F.pad(t, (0, 0, 0, rows - N)).contiguous()[None] for t in (q, k, v))
        return flex(q, k, v, packing.block_mask)[0, :, :N]
    ends = list(itertools.accumulate(packing.sizes))
    # no output of the padding rows is read; zeros, as attention among their zero rows would give
    padding = q.new_zeros(q.size(0), q.size(1) - ends[-1], q.size(2))
    return torch.cat(
        [
            *(
                F.scaled_dot_product_attention(
                    q[:, start:end], k[:, start:end], v[:, start:end], is_causal=True
                )
                for start, end in zip([0, *ends[:-1]], ends)
            ),
            padding,
        ],
        dim=1,
    )


_FLEX_EVERYWHERE = False


@contextlib.contextmanager
def flex_attention_everywhere() -> Iterator[None]:
    """Run the CUDA attention path (FlexAttention, compiled) whatever the device: how the tests check
    that path on a CPU (PyTorch runs FlexAttention's forward there, not yet its backward)."""
    global _FLEX_EVERYWHERE
    before, _FLEX_EVERYWHERE = _FLEX_EVERYWHERE, True
    try:
        yield
    finally:
        _FLEX_EVERYWHERE = before


def _flex(t: Tensor) -> bool:
    return t.is_cuda or _FLEX_EVERYWHERE


@functools.cache
def _flex_attention():
    from torch.nn.attention.flex_attention import flex_attention

    # static shapes: the packed rows come in buckets, and Inductor's CPU code for dynamic ones fails
    return torch.compile(flex_attention, dynamic=False)


# compiles FlexAttention may keep: one per bucket of packed rows (at most 8 up to 1024 rows and 4 per
# doubling above, so 48 up to 2^20) and one per byte-layer length, with room to spare
FLEX_COMPILES = 128


def flex(q: Tensor, k: Tensor, v: Tensor, block_mask) -> Tensor:
    """Compiled FlexAttention of q/k/v (B, H, T, D) under `block_mask`."""
    # dynamo's default budget is 8 compiles per function, after which it would run FlexAttention
    # eagerly, materialising every score: a run meets more buckets than that as its rate moves.
    # Inside a compiled block it is traced with the block's shapes instead.
    budget = (
        contextlib.nullcontext()
        if torch.compiler.is_compiling()
        else torch._dynamo.config.patch(recompile_limit=FLEX_COMPILES)
    )
    with budget:
        return _flex_attention()(q, k, v, block_mask=block_mask)


FLEX_BLOCK = 128  # FlexAttention's block of queries and keys


def padded_rows(n: int) -> int:
    """n rounded up to FlexAttention's bucket: a multiple of the block, of a quarter of n's octave
    above 1024 rows, so at most about 12% (25% at worst) of the rows are padding."""
    return bucket(n, FLEX_BLOCK, 4)


def document_block_mask(lengths: Tensor, rows: int, longest: int):
    """FlexAttention's block mask for causal attention within consecutive sequences of `lengths`
    rows (none longer than `longest`), padded to `rows` (the padding rows attend among themselves).
    Built from the lengths block by block, and linear in `rows`: a block of queries needs the key
    blocks from the start of its first row's sequence up to itself, at most `longest / 128 + 2` of
    them, and a block of keys is needed by as many query blocks; no (rows x rows) table is made."""
    from torch.nn.attention.flex_attention import BlockMask

    device, n = lengths.device, len(lengths)
    documents = torch.repeat_interleave(
        torch.arange(n + 1, device=device),
        torch.cat([lengths, (rows - lengths.sum())[None]]),
        output_size=rows,
    )
    starts = torch.cat([torch.cumsum(lengths, 0) - lengths, lengths.sum()[None]])
    blocks = rows // FLEX_BLOCK
    width = min(blocks, longest // FLEX_BLOCK + 2)
    block = torch.arange(blocks, device=device)
    # the first key block of each query block; only the padding, which may be longer than
    # `longest`, is cut short (its outputs are dropped), and the sequence stays non-decreasing
    first = torch.maximum(starts[documents[block * FLEX_BLOCK]] // FLEX_BLOCK, block - (width - 1))
    # key block j is needed by the query blocks from j to the last whose first key block is <= j
    last = torch.searchsorted(first, block, right=True) - 1

    def table(start: Tensor) -> Tensor:
        """Each block's `width` consecutive indices from `start`, laid end to end and read as the
        (blocks x blocks) table FlexAttention expects: a row's entries past its own `width` run into
        the next rows, and no kernel reads past a row's count."""
        flat = (start[:, None] + torch.arange(width, device=device)).clamp(max=blocks - 1)
        flat = F.pad(flat.flatten().int(), (0, blocks - width))
        return flat.as_strided((1, 1, blocks, blocks), (0, 0, width, 1))

    def same_document_causal(b, h, query, key):
        return (documents[query] == documents[key]) & (key <= query)

    return BlockMask(
        seq_lengths=(rows, rows),
        kv_num_blocks=(block - first + 1).int()[None, None],
        kv_indices=table(first),
        full_kv_num_blocks=None,
        full_kv_indices=None,
        q_num_blocks=(last - block + 1).int()[None, None],
        q_indices=table(block),
        full_q_num_blocks=None,
        full_q_indices=None,
        BLOCK_SIZE=(FLEX_BLOCK, FLEX_BLOCK),
        mask_mod=same_document_causal,
    )


@functools.lru_cache(maxsize=16)
def _sliding_block_mask(length: int, window: int, device: torch.device):
    from torch.nn.attention.flex_attention import create_block_mask

    def sliding(b, h, query, key):
        return (key <= query) & (key > query - window)

    return create_block_mask(sliding, None, None, length, length, device=device)


class Attention(nn.Module):
    """Multi-head causal self-attention with rotary positions.

    With a `packing` given, x holds only the valid rows, packed (N, C), with their rotary tables
    (N, D/2), and attention runs within each sequence's rows: the varying number of chunks per
    sequence costs no padding.
    """

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.proj = nn.Linear(d_model, d_model, bias=False)

    def forward(
        self,
        x: Tensor,
        cos: Tensor,
        sin: Tensor,
        window: int | None,
        packing: Packing | None = None,
    ) -> Tensor:
        qkv = self.qkv(x)
        if packing is not None:
            return self.proj(self._packed(qkv, cos, sin, packing))
        B, T, C3 = qkv.shape
        C = C3 // 3
        q, k, v = qkv.view(B, T, 3, self.n_heads, C // self.n_heads).permute(2, 0, 3, 1, 4)
        q, k = apply_rotary(rms_norm(q), cos, sin), apply_rotary(rms_norm(k), cos, sin)
        if window is None or window >= T:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            y = local_attention(q, k, v, window)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))

    def _packed(self, qkv: Tensor, cos: Tensor, sin: Tensor, packing: Packing) -> Tensor:
        """Attention output (N, C) for packed rows qkv (N, 3C) of the sequences `packing` lays out,
        cos/sin (N, D/2) each row's own rotary table."""
        N, C = qkv.size(0), qkv.size(1) // 3
        # each (H, N, D)
        q, k, v = qkv.view(N, 3, self.n_heads, C // self.n_heads).permute(1, 2, 0, 3)
        q, k = apply_rotary(rms_norm(q), cos, sin), apply_rotary(rms_norm(k), cos, sin)
        return packed_attention(q, k, v, packing).transpose(0, 1).reshape(N, C)

    def step(
        self,
        x: Tensor,
        cos: Tensor,
        sin: Tensor,
        cache: KVCache,
        layer: int,
        rows: Tensor | None,
        slots: Tensor,
        visible: Tensor,
    ) -> Tensor:
        """One new position per row of `rows` (None: every row): x (R, C) joins the cache and attends over it."""
        R, C = x.shape
        # (R, H, 1, D) each
        q, k, v = self.qkv(x).view(R, 3, self.n_heads, 1, C // self.n_heads).unbind(1)
        q, k = apply_rotary(rms_norm(q), cos, sin), apply_rotary(rms_norm(k), cos, sin)
        keys, values = cache.store(layer, rows, slots, k[:, :, 0], v[:, :, 0])
        y = F.scaled_dot_product_attention(
            q, keys.to(q.dtype), values.to(q.dtype), attn_mask=visible
        )
        return self.proj(y.reshape(R, C))


class GatedMLP(nn.Module):
    """SwiGLU feed-forward of width mult x d."""

    def __init__(self, d_model: int, mult: int):
        super().__init__()
        self.gate_up = nn.Linear(d_model, 2 * mult * d_model, bias=False)
        self.down = nn.Linear(mult * d_model, d_model, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)


class Block(nn.Module):
    """Pre-norm transformer block."""

    def __init__(self, d_model: int, n_heads: int, mlp_mult: int):
        super().__init__()
        self.attn = Attention(d_model, n_heads)
        self.mlp = GatedMLP(d_model, mlp_mult)

    def forward(
        self,
        x: Tensor,
        cos: Tensor,
        sin: Tensor,
        window: int | None,
        packing: Packing | None = None,
    ) -> Tensor:
        x = x + self.attn(rms_norm(x), cos, sin, window, packing)
        return x + self.mlp(rms_norm(x))

    def step(
        self,
        x: Tensor,
        cos: Tensor,
        sin: Tensor,
        cache: KVCache,
        layer: int,
        rows: Tensor | None,
        slots: Tensor,
        visible: Tensor,
    ) -> Tensor:
        """The block at one new position per row, x (R, d)."""
        x = x + self.attn.step(rms_norm(x), cos, sin, cache, layer, rows, slots, visible)
        return x + self.mlp(rms_norm(x))


class Stack(nn.Module):
    """A run of blocks sharing one attention pattern: sliding-window (byte layers) or full (main network)."""

    def __init__(
        self,
        n_layers: int,
        d_model: int,
        n_heads: int,
        mlp_mult: int,
        window: int | None,
        rope_base: float,
    ):
        super().__init__()
        self.blocks = nn.ModuleList(Block(d_model, n_heads, mlp_mult) for _ in range(n_layers))
        self.head_dim = d_model // n_heads
        self.window = window
        self.rope_base = rope_base

    def forward(self, x: Tensor, positions: Tensor, packing: Packing | None = None) -> Tensor:
        """x (B, T, d) at integer positions (B, T); attention is causal in T. With a `packing`, x is
        right-padded and is returned packed, (packing.rows, d): its N valid rows, then the few rows
        that pad N to a bucket; the right padding costs no MLP work."""
        if packing is not None:
            x, positions = packing.pack(x), packing.pack(positions[..., None])[:, 0]
            cos, sin = (t[0, 0] for t in rotary(positions[None], self.head_dim, self.rope_base))
        else:
            cos, sin = rotary(positions, self.head_dim, self.rope_base)
        for block in self.blocks:
            x = block(x, cos, sin, self.window, packing)
        return x

    def cache(
        self, batch: int, span: int | None, device: torch.device, dtype: torch.dtype
    ) -> KVCache:
        """An empty cache for incremental decoding: keys within the attention window, or within `span`
        positions (a sliding context) for full-attention stacks."""
        n_heads = self.blocks[0].attn.n_heads
        return KVCache(
            len(self.blocks), batch, n_heads, self.head_dim, self.window or span, device, dtype
        )

    def step(
        self, x: Tensor, positions: Tensor, cache: KVCache, rows: Tensor | None = None
    ) -> Tensor:
        """x (R, d): the next position (R,) of each row of `rows` (None: every row of the cache);
        equals forward() at that position."""
        cos, sin = rotary(positions[:, None], self.head_dim, self.rope_base)
        slots, visible = cache.advance(rows, positions)
        for layer, block in enumerate(self.blocks):
            x = block.step(x, cos, sin, cache, layer, rows, slots, visible)
        return x
