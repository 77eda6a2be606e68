"""The CUDA code paths, exercised on the CPU where PyTorch allows it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from rltok.layers import blocks
from rltok.layers.packing import Packing
from rltok.syncs import HostSyncs


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
        # the main network's packed chunks, each with its own rotary table
        packing = Packing.of(torch.arange(8) < torch.tensor([[5], [8]]))
        rows = packing.pack(torch.arange(8).expand(2, 8)[..., None])[:, 0]
        cos, sin = (t[0, 0] for t in blocks.rotary(rows[None], 16, 10000.0))
        attention(torch.randn(len(rows), 32), cos, sin, None, packing)
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


@pytest.mark.parametrize("method", ["rl", "hnet", "nawrot", "uniform"])
def test_a_training_micro_batch_reads_the_device_at_most_twice(method):
    """Forward (with the group estimator's rollouts for rl) and backward: one host read per
    segmentation, to learn how many chunks there are."""
    from conftest import smoke_model

    from rltok.config import LossWeights
    from rltok.objective import run_model, training_loss

    model = smoke_model(method).train()
    ids = torch.randint(0, 256, (4, 64))
    targets, valid = torch.roll(ids, -1, 1), torch.ones_like(ids, dtype=torch.bool)
    rollouts = model.boundary.rollouts(4, 4, ids.device) if method == "rl" else None
    assert method != "rl" or rollouts is not None
    with HostSyncs() as syncs:
        out, nll = run_model(model, ids, targets, valid, rollouts=rollouts)
        loss, _ = training_loss(model, out, nll, targets, valid, LossWeights())
        loss.backward()
    assert len(syncs.seen) <= 2, syncs.seen


def _in_a_fresh_interpreter(script: str):
    """Run `script` in a new Python at one thread and return the JSON of its last line."""
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(root)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_flex_attention_path_equals_the_cpu_path():
    """The CUDA path's attention (FlexAttention: sliding-window blocks in the byte layers, the document
    mask over the main network's packed chunks), compiled and run on the CPU, gives the CPU path's
    logits for rl (with the group estimator's extra segmentations), hnet, nawrot and uniform. Forward
    only: PyTorch has no FlexAttention backward on the CPU yet. In CI (about a minute with a cold
    compile cache). In a fresh interpreter: Inductor's compiler set-up does not survive every import that the
    rest of the suite makes in one process."""
    differences = _in_a_fresh_interpreter(
        "import json, sys; sys.path.insert(0, 'benchmarks'); "
        "from gpu_readiness import METHODS, flex_against_cpu; "
        "print(json.dumps({m: flex_against_cpu(m) for m in METHODS}))"
    )
    assert all(d < 1e-4 for d in differences.values()), differences


FLEX_COMPILES = """
import json, torch
import torch.nn.functional as F
from torch._dynamo.utils import counters
from rltok.layers import blocks
from rltok.layers.packing import Packing

torch._dynamo.config.recompile_limit = 1  # dynamo's budget per function, made tight
worst = 0.0
for n in (256, 200, 384, 256):  # fills its bucket, pads into the same one, another bucket, again
    qkv = torch.randn(n, 3, 2, 16).permute(1, 2, 0, 3)  # (3, H, N, D) strided, as Attention makes it
    packing = Packing.of(torch.ones(1, n, dtype=torch.bool))
    with blocks.flex_attention_everywhere():
        got = blocks.packed_attention(*qkv, packing)
    worst = max(worst, float((got - F.scaled_dot_product_attention(*qkv, is_causal=True)).abs().max()))
fallbacks = sum(v for k, v in counters["unimplemented"].items() if "recompile" in k)
print(json.dumps({"compiles": counters["frames"]["ok"], "fallbacks": fallbacks, "worst": worst}))
"""


def test_flex_attention_compiles_once_per_bucket_and_never_falls_back_to_eager():
    """Each bucket of packed rows compiles FlexAttention once, whether N fills it or is padded into it
    (the same strides), and a run may meet more buckets than dynamo's budget per function: past it,
    FlexAttention would run unfused, materialising every score. Here the budget is 1 and two buckets
    are met. In a fresh interpreter, as the test above."""
    seen = _in_a_fresh_interpreter(FLEX_COMPILES)
    assert seen["compiles"] == 2 and seen["fallbacks"] == 0, seen
    assert seen["worst"] < 1e-5, seen


def test_packed_rows_come_in_few_buckets_with_little_padding():
    from rltok.layers.blocks import FLEX_BLOCK, padded_rows

    for n in [1, 127, 128, 129, 1000, 1025, 26_000, 105_000]:
        rows = padded_rows(n)
        assert rows >= n and rows % FLEX_BLOCK == 0
        assert n <= 1024 or rows <= 1.25 * n
    # a run whose chunk count drifts by +-10% around 26k meets a handful of shapes, not thousands
    assert len({padded_rows(n) for n in range(23_400, 28_600)}) <= 4


def test_fsdp_gathers_bf16_weights_and_reduces_in_fp32_on_cuda(monkeypatch):
    """FSDP2 is given a mixed-precision policy where the run computes in bf16 on CUDA, none elsewhere
    (the wrapping is checked with fully_shard recorded: a CPU cannot run the CUDA case)."""
    import torch.distributed.fsdp as fsdp

    from rltok import parallel

    given = []
    monkeypatch.setattr(fsdp, "fully_shard", lambda module, **kwargs: given.append(kwargs))
    monkeypatch.setattr(parallel.Parallel, "distributed", property(lambda self: True))
    model = blocks.Stack(2, 32, 2, 1, None, 10000.0)
    par = parallel.Parallel(rank=0, world=2, fsdp=True)
    par.wrap(model, torch.device("cuda"), bf16=True)
    policy = given[0]["mp_policy"]
    assert len(given) == 3 and all(
        g["mp_policy"] is policy for g in given
    )  # 2 blocks, then the rest
    assert (policy.param_dtype, policy.reduce_dtype) == (torch.bfloat16, torch.float32)
    given.clear()
    par.wrap(model, torch.device("cpu"), bf16=True)
    par.wrap(model, torch.device("cuda"), bf16=False)
    assert given == [{}] * 6


def test_the_gpu_kernel_check_passes_a_right_kernel_and_fails_a_wrong_one():
    """The GPU benchmark's kernel check (outputs and q/k/v gradients against SDPA in fp32, within
    a few times what SDPA in the same dtype is off by): the CPU's sliding-window attention passes in fp32 and
    bf16, backward included; the same with a window one byte short, or with the mask's last
    sequence cut off, fails."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
    from gpu_parts import WINDOW, causal_reference, compare, sliding_reference

    cpu = torch.device("cpu")
    for dtype in (torch.float32, torch.bfloat16):
        right = compare(
            lambda q, k, v: blocks.local_attention(q, k, v, WINDOW),
            sliding_reference,
            (1, 2, 300, 16),
            dtype,
            cpu,
            backward=True,
        )
        assert all(c["within_tolerance"] for c in right.values()), right
        short = compare(
            lambda q, k, v: blocks.local_attention(q, k, v, WINDOW - 1),
            sliding_reference,
            (1, 2, 300, 16),
            dtype,
            cpu,
            backward=True,
        )
        assert not any(c["within_tolerance"] for c in short.values()), short
    merged = compare(
        lambda q, k, v: causal_reference(q, k, v, [100, 60]),
        lambda q, k, v: causal_reference(q, k, v, [100, 50, 10]),
        (2, 160, 16),
        torch.float32,
        cpu,
        backward=True,
    )
    assert not merged["out"]["within_tolerance"] and not merged["dk"]["within_tolerance"]
