"""CPU tensors standing for GPU tensors: no silent host conversion, and host syncs counted.

A CUDA tensor cannot become a NumPy array (``np.asarray(t)`` raises ``TypeError: can't convert
cuda:0 device type tensor to numpy``), and every ``item``/``tolist``/``bool``/``int``/``cpu``/
``nonzero`` on one makes the host wait for the device (a sync). On the CPU both are free and
silent, so code that converts a device tensor by accident, or syncs per neighbour, passes every
CPU test. `DeviceTensor` behaves like a CUDA tensor in both respects: it refuses the NumPy
conversion, and it counts its syncs while `count_syncs` is active. Results of
operations on it stay `DeviceTensor`s (as results of CUDA ops stay on the GPU); ``.cpu()``
gives a plain tensor (a copy to the host).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from lifelong.batch import Batch

SYNC_FUNCTIONS = {
    "item",
    "tolist",
    "__bool__",
    "__int__",
    "__float__",
    "__index__",
    "cpu",
    "numpy",
    "nonzero",
    "unique",
    "masked_select",
}
"""Tensor functions that copy a CUDA tensor's data to the host (and so wait for the device).

``.to(device)`` is not counted: on the CPU the emulated device *is* ``cpu``, so a move to the
run's device (a host-to-device copy on a GPU, no wait) cannot be told from a move to the host."""

_COUNTER: list[Counter | None] = [None]  # where `count_syncs` is counting, if anywhere


class DeviceTensor(torch.Tensor):
    """A tensor that acts, for host conversions, like one on a GPU."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in ("numpy", "__array__"):
            raise TypeError(
                "can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy "
                "the tensor to host memory first."
            )
        if _COUNTER[0] is not None and name in SYNC_FUNCTIONS:
            _COUNTER[0][name] += 1
        out = super().__torch_function__(func, types, args, kwargs or {})
        if name == "cpu" or _to_host(name, args, kwargs):
            return out.as_subclass(torch.Tensor)
        return out


def _to_host(name: str, args: tuple, kwargs: dict | None) -> bool:
    if name != "to":
        return False
    targets = [*args[1:], *(kwargs or {}).values()]
    return any(str(t) == "cpu" or getattr(t, "type", None) == "cpu" for t in targets)


def on_gpu(tensor: torch.Tensor | None) -> torch.Tensor | None:
    """``tensor`` as a `DeviceTensor` (None stays None)."""
    return None if tensor is None else tensor.as_subclass(DeviceTensor)


def batch_on_gpu(batch: Batch) -> Batch:
    """Every tensor of a batch as a `DeviceTensor`."""
    fields = ("input_ids", "attention_mask", "labels", "groups", "offsets", "token_type_ids")
    return dataclasses.replace(batch, **{f: on_gpu(getattr(batch, f)) for f in fields})


class GpuKind:
    """A task kind whose batches are `DeviceTensor`s (as a `PreparedKind` on CUDA)."""

    def __init__(self, kind: Any) -> None:
        self.kind = kind

    def __call__(self, examples):
        return batch_on_gpu(self.kind(examples))

    def rows(self, records):
        return batch_on_gpu(self.kind.rows(records))

    def key_rows(self, records):
        return batch_on_gpu(self.kind.key_rows(records))

    def __getattr__(self, name: str) -> Any:
        if name == "kind":
            raise AttributeError(name)
        return getattr(self.kind, name)


@contextmanager
def count_syncs() -> Iterator[Counter]:
    """Count `DeviceTensor` host syncs made in the block (the yielded counter, by function)."""
    counter: Counter = Counter()
    outer, _COUNTER[0] = _COUNTER[0], counter
    try:
        yield counter
    finally:
        _COUNTER[0] = outer
