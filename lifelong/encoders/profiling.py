"""Peak memory of autograd graphs, measured through the tensors they save for the backward pass.

On CPU the allocator is invisible to ``tracemalloc``, so comparing training schemes (full
back-propagation through time vs Memformer's memory replay) by process memory is unreliable.
`SavedTensorMeter` instead counts the bytes of the tensors autograd keeps alive for backward
(the activations), using `torch.autograd.graph.saved_tensors_hooks`: a tensor is counted when a
graph saves it and released when the graph that saved it is freed. Storages shared by several
saved tensors are counted once. It works the same on CPU and GPU.

Example::

    with SavedTensorMeter(exclude=model.parameters()) as meter:
        model(x).sum().backward()
    print(meter.peak)  # bytes

"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import torch

T = TypeVar("T")


class _Saved:
    """What the pack hook hands autograd: the tensor, with a finaliser that releases its bytes.

    It holds a detached alias: holding a saved *output* itself would link the graph node to a
    tensor whose ``grad_fn`` is that node, a cycle that keeps unused graphs alive.
    """

    __slots__ = ("tensor", "__weakref__")

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor


def _storage_key(tensor: torch.Tensor) -> tuple[int, int]:
    """(storage address, storage bytes) of a tensor; its own size when it has no plain storage."""
    try:
        storage = tensor.untyped_storage()
        return storage.data_ptr(), storage.nbytes()
    except (RuntimeError, NotImplementedError):  # sparse, nested or wrapper tensors
        return id(tensor), tensor.numel() * tensor.element_size()


class SavedTensorMeter:
    """Context manager tracking the live and peak bytes of tensors saved by autograd graphs.

    Args:
        exclude: Tensors whose storages are not counted (typically the model's parameters, which
            are alive anyway and are saved by every graph that uses them).

    Attributes:
        current: Bytes of saved tensors alive now (distinct storages).
        peak: The largest value ``current`` reached inside the context.

    """

    def __init__(self, exclude: Iterable[torch.Tensor] = ()) -> None:
        self._excluded = {_storage_key(t)[0] for t in exclude}
        self._counts: dict[int, int] = {}
        self._sizes: dict[int, int] = {}
        self.current = 0
        self.peak = 0
        self._hooks: Any = None

    def __enter__(self) -> SavedTensorMeter:
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._hooks.__exit__(*exc)
        self._hooks = None

    def _pack(self, tensor: torch.Tensor) -> _Saved | torch.Tensor:
        key, size = _storage_key(tensor)
        if key in self._excluded:
            return tensor
        saved = _Saved(tensor.detach())  # detached: a saved output would otherwise form a cycle
        if self._counts.get(key, 0) == 0:
            self._sizes[key] = size
            self.current += size
            self.peak = max(self.peak, self.current)
        self._counts[key] = self._counts.get(key, 0) + 1
        weakref.finalize(saved, self._release, key)
        return saved

    @staticmethod
    def _unpack(saved: _Saved | torch.Tensor) -> torch.Tensor:
        return saved.tensor if isinstance(saved, _Saved) else saved

    def _release(self, key: int) -> None:
        self._counts[key] -= 1
        if self._counts[key] == 0:
            del self._counts[key]
            self.current -= self._sizes.pop(key)


def peak_saved_bytes(fn: Callable[[], T], exclude: Iterable[torch.Tensor] = ()) -> tuple[T, int]:
    """Run ``fn()`` under a `SavedTensorMeter` and return its result with the peak saved bytes.

    Args:
        fn: The work to measure, e.g. a forward and backward pass.
        exclude: Tensors not to count (e.g. ``module.parameters()``).

    Returns:
        ``fn``'s result and the peak bytes of tensors saved by autograd while it ran.

    """
    with SavedTensorMeter(exclude) as meter:
        result = fn()
    return result, meter.peak


__all__ = ["SavedTensorMeter", "peak_saved_bytes"]
