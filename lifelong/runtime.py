"""Where a run computes and in what precision: one `Runtime`, made once from the run config.

Nothing below the run config chooses a device or a dtype (DESIGN §4). The run resolves
``device`` (``auto``, ``cpu``, ``cuda`` or ``cuda:N``) and ``precision`` (``auto``, ``fp32``,
``bf16``, ``fp16``) into a `Runtime`; the model is moved there, every batch the task kind
makes lands there (`lifelong.tasks.prepared.on_device`), and the learner runs training and
evaluation inside `Runtime.autocast`. Strategies never name a device: they create tensors next
to the tensors they already have.

Precision follows PyTorch's automatic mixed precision (``torch.autocast``): weights and
optimiser state stay fp32; matmuls and attention run in bf16 where autocast allows it, and
losses, softmaxes and norms stay fp32. ``auto`` is bf16 on a CUDA device that supports it
(compute capability 8.0 and up: A100, H100, H200) and fp32 everywhere else. bf16 keeps fp32's
exponent range, so no loss scaling is needed.

fp16 (for GPUs without bf16, e.g. V100 and T4) has a narrow exponent range, so gradients are
loss-scaled: every optimiser update goes through a dynamic ``torch.amp.GradScaler`` (one per
`lifelong.training.Trainer`: scale the loss, unscale before clipping, skip the step and
halve the scale when a gradient overflows). Inner loops (local adaptation, the meta-learners'
inner steps) take their gradients with ``torch.func.grad``, often inside ``vmap``, where a
step cannot be skipped; they scale their loss by the static `Runtime.inner_loss_scale`
(2^10 in fp16, 1 otherwise) and divide the gradient by it, which lifts small fp16 activation
gradients out of the underflow range.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import torch
from torch import nn
from torch.func import functional_call

if TYPE_CHECKING:
    from lifelong.batch import Batch

Precision = Literal["fp32", "bf16", "fp16"]
PRECISIONS: tuple[str, ...] = ("auto", "fp32", "bf16", "fp16")
"""What the ``precision`` key accepts (``auto``: bf16 on a bf16-capable CUDA device, else fp32)."""

_DEVICE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")


class DeviceError(ValueError):
    """A device or precision that is not valid, or not available on this machine."""


def check_device_name(name: str) -> None:
    """Raise `DeviceError` unless ``name`` is ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.

    Only the spelling is checked (a config naming ``cuda`` is valid on any machine); whether
    the device exists is `resolve_device`'s question, asked before anything loads.
    """
    if not isinstance(name, str) or not _DEVICE.match(name):
        raise DeviceError(f"device {name!r}: expected auto, cpu, cuda or cuda:N")


def resolve_device(name: str = "auto") -> torch.device:
    """The device ``name`` means here: ``auto`` is CUDA (device 0) when one is visible, else CPU.

    Raises:
        DeviceError: A bad spelling, or a CUDA device this machine does not have (the error says
            how many it has).

    """
    check_device_name(name)
    if name == "auto":
        return torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    device = torch.device(name)
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        index = device.index if device.index is not None else 0
        if index >= count:
            have = f"{count} CUDA device(s)" if count else "no CUDA device"
            raise DeviceError(f"device {name!r}: this machine has {have} (use cpu or auto)")
        device = torch.device("cuda", index)
    return device


def resolve_precision(name: str, device: torch.device) -> Precision:
    """The precision ``name`` means on ``device`` (``auto``: bf16 on bf16-capable CUDA, else fp32).

    bf16-capable means `native_bf16`: compute capability 8.0 or more.

    Raises:
        DeviceError: An unknown precision, or bf16 on a CUDA device that would emulate it.

    """
    if name not in PRECISIONS:
        raise DeviceError(f"precision {name!r}: expected one of {', '.join(PRECISIONS)}")
    native = native_bf16(device)
    if name == "auto":
        return "bf16" if native else "fp32"
    if name == "bf16" and device.type == "cuda" and not native:
        major, minor = torch.cuda.get_device_capability(device)
        raise DeviceError(
            f"precision 'bf16': {device} ({torch.cuda.get_device_name(device)}, compute "
            f"capability {major}.{minor}) has no bfloat16 units; CUDA would emulate it, slower "
            "than fp32 (use fp16, with loss scaling, or fp32)"
        )
    return name  # type: ignore[return-value]


def native_bf16(device: torch.device) -> bool:
    """Whether ``device`` is a CUDA GPU with bfloat16 tensor cores (compute capability >= 8.0).

    Ampere (A100, RTX 30xx), Ada, Hopper (H100, H200) and later. Not
    ``torch.cuda.is_bf16_supported()``: that is true wherever CUDA can *emulate* bf16 (V100,
    T4), where it runs slower than fp32, and it asks about the current device, not the run's.
    """
    if device.type != "cuda":
        return False
    return torch.cuda.get_device_capability(device) >= (8, 0)


@dataclass(frozen=True)
class Runtime:
    """The device and precision of a run.

    Attributes:
        device: Where the model, every batch and every adaptation run.
        precision: ``fp32``, or ``bf16`` or ``fp16`` autocast (weights and optimiser state
            stay fp32; fp16 gradients are loss-scaled).

    """

    device: torch.device = torch.device("cpu")
    precision: Precision = "fp32"

    @classmethod
    def resolve(cls, device: str = "auto", precision: str = "auto") -> Runtime:
        """The runtime a run config's ``device`` and ``precision`` keys mean on this machine."""
        where = resolve_device(device)
        return cls(where, resolve_precision(precision, where))

    @property
    def dtype(self) -> torch.dtype | None:
        """The autocast dtype (``None`` in fp32)."""
        return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.precision)

    def grad_scaler(self) -> torch.amp.GradScaler:
        """A new dynamic loss scaler for one optimiser: active in fp16, a pass-through otherwise.

        A disabled ``GradScaler`` returns the loss unscaled and steps the optimiser plainly, so
        the same update code serves every precision.
        """
        return torch.amp.GradScaler(self.device.type, enabled=self.precision == "fp16")

    @property
    def inner_loss_scale(self) -> float:
        """The static loss scale of inner-loop gradients: 2^10 in fp16, 1 otherwise.

        Inner loops cannot skip a step the way `grad_scaler` does (they run inside ``vmap``),
        so the scale is fixed: large enough to lift fp16 activation gradients of 1e-7 above
        fp16's smallest normal number (6e-5), small enough that gradients up to 64 do not
        overflow fp16's 65,504.
        """
        return 1024.0 if self.precision == "fp16" else 1.0

    def autocast(self) -> AbstractContextManager[Any]:
        """A context in which forward passes run in the run's precision (a no-op in fp32)."""
        if self.dtype is None:
            return nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.dtype)

    def eval_batch_size(self, requested: int | str) -> int:
        """The evaluation batch size a config's ``eval_batch_size`` means here.

        ``auto`` is 64 on the CPU (larger batches gain nothing on a few cores) and 512 on a
        GPU: prediction keeps no graph, so a BERT-base forward on 512 length-sorted rows of up
        to 128 tokens needs a few GiB, and fewer, larger kernels keep the device busy.
        """
        if requested != "auto":
            return int(requested)
        return 512 if self.device.type == "cuda" else 64

    @property
    def prefetch(self) -> int:
        """Training mini-batches made ahead in the background: 2 on a GPU, none on the CPU.

        On the CPU the background thread would only take cores from the model.
        """
        return 2 if self.device.type == "cuda" else 0

    def synchronize(self) -> None:
        """Wait for the device's queued work (CUDA kernels run asynchronously); for timings."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def describe(self) -> str:
        """The device (with the GPU's name on CUDA) and precision, for the run log."""
        where = str(self.device)
        if self.device.type == "cuda":
            where += f" ({torch.cuda.get_device_name(self.device)})"
        return f"{where}, {self.precision}"


CPU = Runtime()
"""fp32 on the CPU: the runtime of a strategy built without one (tests, library use)."""


_COPY = threading.local()  # each thread's copy stream, per CUDA device


def to_device(batch: Batch, device: torch.device) -> Batch:
    """``batch`` on ``device``; on a GPU copied from pinned memory on a side stream.

    The learner makes its next mini-batches in a background thread (`lifelong.learner.
    prefetched`): there the copy runs on that thread's own CUDA stream, from page-locked
    memory, while the default stream computes the current batch. The thread waits for its copy
    before handing the batch over, and tells the allocator that the default stream uses the
    batch, so its memory is not reused while the model still reads it. On the CPU: a plain
    ``to``.
    """
    if device.type != "cuda":
        return batch.to(device)
    streams = _COPY.__dict__.setdefault("streams", {})
    if device not in streams:  # one per thread and device, made once
        streams[device] = torch.cuda.Stream(device)
    stream = streams[device]
    with torch.cuda.stream(stream):
        moved = batch.pin_memory().to(device, non_blocking=True)
    stream.synchronize()  # this thread waits; the device goes on with the current batch
    moved.record_stream(torch.cuda.default_stream(device))
    return moved


def to_cpu(state: Any) -> Any:
    """A copy of a (nested) state with every tensor on the CPU: a device-neutral checkpoint.

    Dicts, lists, tuples and dataclasses (a pending episode's `Batch`) are walked; tensors are
    moved (and detached); anything else is kept.
    """
    if isinstance(state, torch.Tensor):
        return state.detach().cpu()
    if isinstance(state, dict):
        return {k: to_cpu(v) for k, v in state.items()}
    if isinstance(state, list):
        return [to_cpu(v) for v in state]
    if isinstance(state, tuple) and not hasattr(state, "_fields"):
        return tuple(to_cpu(v) for v in state)
    if dataclasses.is_dataclass(state) and not isinstance(state, type):
        fields = [f.name for f in dataclasses.fields(state) if f.init]
        return dataclasses.replace(state, **{name: to_cpu(getattr(state, name)) for name in fields})
    return state


# --- torch.compile ---------------------------------------------------------------------------

_COMPILED: weakref.WeakSet[nn.Module] = weakref.WeakSet()
"""Modules compiled by `compile_module` (that `eager` may have to switch off)."""


def compile_module(module: nn.Module, *, backend: str | Callable[..., Any] = "inductor") -> None:
    """``torch.compile`` a module in place (``Module.compile``: names and checkpoints unchanged).

    Shapes are dynamic from the first call (``dynamic=True``): batch sizes and sequence lengths
    vary from batch to batch, and static shapes recompiled for each new one until dynamo's
    recompile limit (8), after which it silently ran eager. The compiled forward serves plain
    calls only: under ``torch.func`` (local adaptation, meta-learning inner loops) the module
    runs eager (`eager`, `eager_call`), where dynamo cannot trace a functorch transform of a
    compiled function and fell back for every call after trying. `compile_report` says what
    was compiled.

    Args:
        module: The module (the run's encoder).
        backend: ``torch.compile``'s backend (tests count graphs with a counting backend).

    """
    module.compile(dynamic=True, backend=backend)
    _COMPILED.add(module)


@contextmanager
def eager(module: nn.Module) -> Iterator[None]:
    """Run ``module`` and its submodules uncompiled inside the block (a no-op if none is)."""
    compiled = [m for m in _COMPILED if _within(m, module)]
    saved = [m._compiled_call_impl for m in compiled]
    for m in compiled:
        m._compiled_call_impl = None
    try:
        yield
    finally:
        for m, impl in zip(compiled, saved):
            m._compiled_call_impl = impl


def _within(part: nn.Module, module: nn.Module) -> bool:
    return part is module or any(part is m for m in module.modules())


def eager_call(
    module: nn.Module,
    params: Mapping[str, torch.Tensor],
    args: Any,
    kwargs: Mapping[str, Any] | None = None,
) -> Any:
    """``torch.func.functional_call`` with ``module`` uncompiled (see `compile_module`).

    Every call that substitutes parameters goes through it: a compiled forward would be traced
    again for each new set of parameter tensors, and not at all under a ``torch.func``
    transform.
    """
    if not _COMPILED:
        return functional_call(module, params, args, kwargs)
    with eager(module):
        return functional_call(module, params, args, kwargs)


def compile_report() -> dict[str, int]:
    """What dynamo has done in this process: frames compiled and failed, distinct graphs.

    ``failed`` counts frames it tried and gave up on (each then ran eager); a run logs the
    report after every task, so recompiles and fallbacks show in its ``log.txt``.
    """
    from torch._dynamo.utils import counters

    frames = counters["frames"]
    return {
        "frames": int(frames.get("total", 0)),
        "compiled": int(frames.get("ok", 0)),
        "failed": int(frames.get("total", 0) - frames.get("ok", 0)),
        "graphs": int(counters["stats"].get("unique_graphs", 0)),
    }
