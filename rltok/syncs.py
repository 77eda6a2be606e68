"""Counting host syncs on any device: the reads of a tensor's value (item, tolist, bool/int/float of
one) and the ops whose output shape depends on data (nonzero, boolean indexing, ...), each of which
makes a GPU wait for the host. On the CPU nothing waits, but the same calls happen, so the count
made here is the count a GPU run pays."""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

DATA_SHAPED = {"aten::nonzero", "aten::masked_select", "aten::unique_consecutive", "aten::_unique2"}


class HostSyncs(TorchDispatchMode):
    """`with HostSyncs() as syncs:` ... `syncs.seen` lists what forced one, in order."""

    def __init__(self):
        super().__init__()
        self.seen: list[str] = []
        self._tolist = None

    def __enter__(self) -> HostSyncs:
        self._tolist = real = torch.Tensor.tolist

        def tolist(t: torch.Tensor):  # not an op: it reads the values without dispatching one
            self.seen.append("tolist")
            return real(t)

        torch.Tensor.tolist = tolist
        return super().__enter__()

    def __exit__(self, *args) -> None:
        torch.Tensor.tolist = self._tolist
        return super().__exit__(*args)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name, kwargs = func._schema.name, kwargs or {}
        boolean_index = name == "aten::index" and any(
            isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in args[1] if i is not None
        )
        unsized = name == "aten::repeat_interleave" and kwargs.get("output_size") is None
        if name == "aten::_local_scalar_dense" or name in DATA_SHAPED or boolean_index or unsized:
            self.seen.append(name)
        return func(*args, **kwargs)
