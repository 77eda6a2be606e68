"""Data parallelism with PyTorch's own engine. Under torchrun a built model is wrapped in DDP or sharded
with FSDP2 (`fully_shard`, one unit per transformer block); the trainer asks this module for its rank,
for switching gradient sync off between accumulation steps, for sums across ranks and for full
(unsharded) state dicts. Without torchrun the world has one process and every call is a no-op.

Every rank draws the same global batch and takes its own slice of it, so `--batch-size` means the same
on one process and on many, and the data position is one generator state shared by all ranks."""

from __future__ import annotations

import gc
import inspect
import os
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_optimizer_state_dict,
)
from torch.nn.parallel import DistributedDataParallel

from rltok.errors import UserError
from rltok.layers.blocks import Block

FULL = StateDictOptions(full_state_dict=True, cpu_offload=True)


class PeerFailure(UserError):
    """Another process of a distributed run stopped; it prints its own reason, so the others stay brief."""


_DDP_KNOWS_FORWARD_SYNC = (
    "forward_sync_buffers" in inspect.signature(DistributedDataParallel).parameters
)


class DataParallel(DistributedDataParallel):
    """DDP that still answers for the wrapped model's attributes (`boundary`, `tokenizer`, ...)."""

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.module, name)


@dataclass
class Parallel:
    """This process's place in the run: rank, world size and how the model is spread."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    fsdp: bool = False
    _ddp: DistributedDataParallel | None = field(default=None, repr=False, compare=False)

    @property
    def main(self) -> bool:
        """True on the rank that logs, shows progress and writes files."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        """True under torchrun (a process group exists), even with one process."""
        return dist.is_available() and dist.is_initialized()

    @classmethod
    def start(cls, device: torch.device, fsdp: bool = False) -> tuple[Parallel, torch.device]:
        """Join torchrun's process group when launched by it (nccl on CUDA, gloo on CPU); return the
        process's place and the device it trains on (cuda:LOCAL_RANK on GPUs)."""
        if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
            if fsdp:
                raise UserError(
                    "--fsdp shards the model across the processes of torchrun; launch with "
                    "`torchrun --nproc-per-node N -m rltok train ... --fsdp`"
                )
            return cls(), device
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        local_rank = int(os.environ.get("LOCAL_RANK", rank))
        if device.type == "cuda":
            device = torch.device("cuda", local_rank)
            torch.cuda.set_device(device)
        if not dist.is_initialized():
            backend = "nccl" if device.type == "cuda" else "gloo"
            dist.init_process_group(
                backend,
                timeout=timedelta(minutes=10),
                device_id=device if device.type == "cuda" else None,
            )
        return cls(rank, world, local_rank, fsdp), device

    def stop(self, peer_failed: bool = False) -> None:
        """Leave the process group (after the last collective), releasing DDP's gradient reducer first;
        after a peer's failure, leave it as it is: its pending collectives can never finish."""
        if not self.distributed or peer_failed:
            return
        # The reducer holds the group from C++ and DDP sits in a reference cycle (and in any traceback of
        # the run), so it would be freed later, by the collector, possibly at interpreter exit. Freeing it
        # then drops the group's last reference while holding the GIL, and gloo's destructor joins worker
        # threads that may need the GIL to release a finished collective's tensors: a hang at exit. Freed
        # here, the group's last reference is its Python object's, whose destructor releases the GIL.
        if self._ddp is not None:
            for name in ("logger", "reducer", "process_group"):  # the logger holds the reducer too
                self._ddp.__dict__.pop(name, None)
            self._ddp = None
        gc.collect()
        dist.destroy_process_group()

    def wrap(self, model: nn.Module, device: torch.device, bf16: bool = False) -> nn.Module:
        """The model to train: itself on one process, DDP, or FSDP2-sharded in place (each block, then
        the rest); with `bf16` on CUDA, FSDP2 gathers the weights in bf16 and reduces in fp32."""
        if not self.distributed:
            return model
        if self.fsdp:
            from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

            # without a policy FSDP2 all-gathers fp32 weights that autocast then casts to bf16 anyway
            policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
            kwargs = {"mp_policy": policy} if device.type == "cuda" and bf16 else {}
            for module in model.modules():
                if isinstance(module, Block):
                    fully_shard(module, **kwargs)
            fully_shard(model, **kwargs)
            return model
        # buffers (the stored BPE) are identical on every rank: no broadcast, so a forward is collective-free
        # (forward_sync_buffers since torch 2.12 says just that; broadcast_buffers before it)
        no_sync = "forward_sync_buffers" if _DDP_KNOWS_FORWARD_SYNC else "broadcast_buffers"
        self._ddp = DataParallel(
            model,
            device_ids=[device.index] if device.type == "cuda" else None,
            **{no_sync: False},
        )
        return self._ddp

    @contextmanager
    def gradient_sync(self, model: nn.Module, enabled: bool) -> Iterator[None]:
        """Reduce gradients across ranks in this backward only if `enabled` (off between accumulation steps)."""
        if not self.distributed or enabled:
            yield
        elif self.fsdp:
            model.set_requires_gradient_sync(False)
            try:
                yield
            finally:
                model.set_requires_gradient_sync(True)
        else:
            with model.no_sync() if isinstance(model, DistributedDataParallel) else nullcontext():
                yield

    def sum(self, values: Tensor) -> Tensor:
        """Element-wise sum over ranks (a copy; the values themselves on one process)."""
        if not self.distributed:
            return values
        values = values.clone()
        dist.all_reduce(values)
        return values

    def broadcast(self, value: Any) -> Any:
        """Rank 0's Python object on every rank."""
        if not self.distributed:
            return value
        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def full_weights(self, model: nn.Module) -> dict[str, Tensor]:
        """The unsharded weights on CPU, with the wrapped model's own names (complete on rank 0)."""
        return get_model_state_dict(model, options=FULL)

    def full_optimizer_state(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> dict:
        """The optimizer state keyed by parameter name, unsharded (complete on rank 0), so any layout can load it."""
        return get_optimizer_state_dict(model, optimizer, options=FULL)

    def load_optimizer_state(
        self, model: nn.Module, optimizer: torch.optim.Optimizer, state: dict
    ) -> None:
        """Load a state written by `full_optimizer_state` into this process's (possibly sharded) optimizer,
        or the plain `optimizer.state_dict()` (keyed by position) that single-process runs saved before."""
        if state["state"] and all(isinstance(k, int) for k in state["state"]):
            optimizer.load_state_dict(state)
            return
        # strict=False: a parameter that has not had a gradient yet has no state, as in a fresh optimizer
        set_optimizer_state_dict(
            model, optimizer, state, options=StateDictOptions(full_state_dict=True, strict=False)
        )
