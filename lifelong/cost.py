"""What a run costs: rows and tokens through the model, estimated FLOPs, bytes held, seconds.

A `CostMeter` is active while the learner runs a stream (`metering`). It counts every call of a
module that is not inside another counted call (the outermost one: the whole classifier when a
strategy calls it, a single layer when the local adaptation runs the upper stages alone), in the
phase the learner is in:

* ``train``: everything between a task's first mini-batch and its end (stream updates, replay,
  meta and inner steps, memory writes and their key network);
* ``evaluate``: predicting the test sets after each task, without gradients;
* ``adapt``: test-time work that trains (MbPA++'s local adaptation and its retrieval,
  Meta-MbPA's coarse adaptation, OML-ER's meta-test): any forward with gradients while
  evaluating is counted here, and `phase` ``"adapt"`` times it.

**The FLOP rule** (Kaplan et al., 2020, "Scaling Laws for Neural Language Models", §2.1, Table 1):
a forward pass costs 2·N FLOPs per token and its backward pass 4·N, so a training step costs
6·N per token, where N counts the non-embedding parameters of the module called (embedding
lookups are not multiplications; for the backward, those that require gradients). Tokens are
the positions the module computes: the padded length of each row (what the hardware runs), one
per row for a module fed pooled vectors (the head). Rows are the model's input rows: one per
text for classification, one per candidate relation (FewRel) or context window (QA). A forward
taken with gradients enabled is counted as backpropagated too (every such forward here feeds a
loss). Work that is not a module call (RanPAC's ridge solves) is added with `add_flops`.
Under ``torch.func.vmap`` (batched local adaptation) a module sees one example; the meter counts
the batched tensor underneath, so vmapped calls count every example. Inside a ``torch.compile``d
module the hooks do nothing (the compiled module's own call is counted, from outside it), so
the meter adds no graphs and no guards.

**Bytes held** (`held_bytes`): what a strategy keeps beside its model at the end of a run: its
episodic memory's stored token ids and keys, EWC's Fisher and anchor, NCM's class sums, RanPAC's
projection and Gram matrix. Model weights and optimiser state are not counted.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np
import torch
import torch._C._functorch as functorch
from torch import nn

PHASES = ("train", "evaluate", "adapt")
"""The phases a run's cost is split into (see the module docstring)."""

FORWARD_FLOPS_PER_PARAM_TOKEN = 2
"""Forward FLOPs per non-embedding parameter and token (Kaplan et al., 2020, §2.1)."""

BACKWARD_FLOPS_PER_PARAM_TOKEN = 4
"""Backward FLOPs per trainable non-embedding parameter and token (Kaplan et al., 2020, §2.1)."""

RULE = (
    "FLOPs = 2·N·tokens per forward + 4·N·tokens per backward (N: non-embedding parameters of "
    "the module called; tokens: padded positions computed); Kaplan et al. 2020, §2.1"
)
"""The rule, as ``metrics.json`` states it."""


@dataclass
class PhaseCost:
    """What one phase computed.

    Attributes:
        forward_rows: Encoder passes: rows forwarded from their token ids (the model, the
            encoder, the key network).
        forward_tokens: Their token positions (padded).
        backward_rows: Those of them backpropagated (forwards taken with gradients).
        backward_tokens: Their token positions.
        head_forward_rows: Rows through a head called on its own (on stored encoder outputs:
            the meta-learners' inner steps, head-scope local adaptation, predictions from
            cached features).
        head_backward_rows: Those of them backpropagated.
        flops: Estimated FLOPs (`RULE`), plus any added by `add_flops`.
        seconds: Wall seconds spent in the phase (``adapt``'s are not in ``evaluate``'s).

    """

    forward_rows: int = 0
    forward_tokens: int = 0
    backward_rows: int = 0
    backward_tokens: int = 0
    head_forward_rows: int = 0
    head_backward_rows: int = 0
    flops: float = 0.0
    seconds: float = 0.0


class CostMeter:
    """Counts rows, tokens, FLOPs and seconds per phase (see the module docstring).

    Args:
        state: A `to_dict` of an earlier process's meter (a resumed run adds to it).

    """

    def __init__(self, state: dict[str, Any] | None = None) -> None:
        self.phases = {name: PhaseCost() for name in PHASES}
        for name, values in (state or {}).items():
            if name in self.phases:
                known = {f.name for f in fields(PhaseCost)}
                self.phases[name] = PhaseCost(**{k: v for k, v in values.items() if k in known})
        self.stack: list[list[Any]] = []  # [phase, started] of the phases entered, innermost last
        self.depth = 0  # counted module calls in progress (only the outermost is counted)
        self.transparent: list[nn.Module] = []  # staged model calls in progress (not counted)
        self.params: weakref.WeakKeyDictionary[nn.Module, list[nn.Parameter]] = (
            weakref.WeakKeyDictionary()
        )

    # -- phases ------------------------------------------------------------------------------
    @property
    def current(self) -> str | None:
        """The innermost phase entered, or None outside every phase."""
        return self.stack[-1][0] if self.stack else None

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Count and time what runs inside as phase ``name`` (the outer phase's clock pauses)."""
        if name not in self.phases:
            raise ValueError(f"unknown cost phase {name!r}; the phases are {', '.join(PHASES)}")
        now = time.perf_counter()
        if self.stack:
            self._stop_clock(now)
        self.stack.append([name, now])
        try:
            yield
        finally:
            now = time.perf_counter()
            self._stop_clock(now)
            self.stack.pop()
            if self.stack:
                self.stack[-1][1] = now

    def _stop_clock(self, now: float) -> None:
        name, started = self.stack[-1]
        self.phases[name].seconds += now - started
        self.stack[-1][1] = now

    # -- counting ----------------------------------------------------------------------------
    def count(self, module: nn.Module, x: torch.Tensor, *, rows: str | None) -> None:
        """Count one outermost call of ``module`` whose first input is ``x``.

        Args:
            module: The module called.
            x: Its first input: token ids, hidden states or pooled vectors.
            rows: ``"encoder"`` for a call on token ids (an encoder pass begins: the model,
                the encoder, the key network, or the embedding stage run alone), ``"head"`` for
                a head called on an encoder's output, None for any other part (a layer run
                alone: its FLOPs only).

        """
        if not self.stack:
            return
        n_rows, tokens = rows_and_tokens(x)
        forward, trainable = self._parameters(module)
        backward = torch.is_grad_enabled() and (trainable > 0 or _tracked(x))
        name = self.current or "train"
        if name == "evaluate" and backward:
            name = "adapt"  # training while evaluating: test-time adaptation
        cost = self.phases[name]
        if rows == "encoder":
            cost.forward_rows += n_rows
            cost.forward_tokens += tokens
            if backward:
                cost.backward_rows += n_rows
                cost.backward_tokens += tokens
        elif rows == "head":
            cost.head_forward_rows += n_rows
            cost.head_backward_rows += n_rows if backward else 0
        cost.flops += FORWARD_FLOPS_PER_PARAM_TOKEN * forward * tokens
        if backward:
            cost.flops += BACKWARD_FLOPS_PER_PARAM_TOKEN * trainable * tokens

    def _parameters(self, module: nn.Module) -> tuple[int, int]:
        """(Non-embedding parameters, those of them that require gradients now).

        The parameters are listed once per module; which of them train is read at each call
        (SEQ*'s and the prototype baselines' warm-ups freeze the encoder mid-run).
        """
        if module not in self.params:
            self.params[module] = non_embedding_tensors(module)
        tensors = self.params[module]
        forward = sum(p.numel() for p in tensors)
        return forward, sum(p.numel() for p in tensors if p.requires_grad)

    def add_flops(self, flops: float) -> None:
        """Add work that is not a module call (a linear solve) to the current phase."""
        if self.stack:
            self.phases[self.current or "train"].flops += float(flops)

    # -- results -----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, dict[str, float]]:
        """Plain-Python form, per phase (checkpoints; `summary` for ``metrics.json``).

        The phase running now is counted up to this moment (its clock restarts from here).
        """
        if self.stack:
            self._stop_clock(time.perf_counter())
        return {name: asdict(cost) for name, cost in self.phases.items()}

    def summary(self) -> dict[str, Any]:
        """Per phase and in total, rounded, with the rule: what ``metrics.json`` ``cost`` holds."""
        out: dict[str, Any] = {"rule": RULE}
        for name, cost in self.phases.items():
            values = asdict(cost)
            values["seconds"] = round(values["seconds"], 1)
            values["flops"] = float(f"{values['flops']:.4g}")
            out[name] = values
        out["total_flops"] = float(f"{sum(c.flops for c in self.phases.values()):.4g}")
        return out


_ACTIVE: list[CostMeter] = []


def active() -> CostMeter | None:
    """The meter counting now (inside `metering`), or None."""
    return _ACTIVE[-1] if _ACTIVE else None


@contextmanager
def metering(meter: CostMeter) -> Iterator[CostMeter]:
    """Count every outermost module call with ``meter`` while inside (global module hooks)."""

    def before(module: nn.Module, args: tuple[Any, ...]) -> None:
        if torch.compiler.is_compiling():  # inside a compiled module: its call was counted
            return
        if meter.depth == 0 and (x := _first_tensor(args)) is not None:
            if getattr(module, "runs_from_stages", False) and x.is_floating_point():
                meter.transparent.append(module)  # the model from a stage: its parts count
                return
            head = not isinstance(args[0], torch.Tensor)  # fed an encoder's output
            kind = "head" if head else None if x.is_floating_point() else "encoder"
            meter.count(module, x, rows=kind)
        meter.depth += 1

    def after(module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
        if torch.compiler.is_compiling():
            return
        if meter.transparent and meter.transparent[-1] is module and meter.depth == 0:
            meter.transparent.pop()
        elif meter.depth > 0:
            meter.depth -= 1

    pre = torch.nn.modules.module.register_module_forward_pre_hook(before)
    post = torch.nn.modules.module.register_module_forward_hook(after, always_call=True)
    _ACTIVE.append(meter)
    try:
        yield meter
    finally:
        _ACTIVE.remove(meter)
        pre.remove()
        post.remove()
        meter.depth = 0
        meter.transparent.clear()


@contextmanager
def phase(name: str) -> Iterator[None]:
    """`CostMeter.phase` of the active meter; nothing when none is active (a library call)."""
    meter = active()
    if meter is None:
        yield
        return
    with meter.phase(name):
        yield


def add_flops(flops: float) -> None:
    """`CostMeter.add_flops` of the active meter (nothing when none is active)."""
    meter = active()
    if meter is not None:
        meter.add_flops(flops)


def non_embedding_tensors(module: nn.Module) -> list[nn.Parameter]:
    """The parameters of ``module`` outside embedding tables (each once)."""
    embedding = {
        id(p) for m in module.modules() if isinstance(m, nn.Embedding) for p in m.parameters()
    }
    return [p for p in module.parameters() if id(p) not in embedding]


def non_embedding_parameters(module: nn.Module) -> tuple[int, int]:
    """Parameters of ``module`` outside embedding tables: (all, those requiring gradients)."""
    tensors = non_embedding_tensors(module)
    return sum(p.numel() for p in tensors), sum(p.numel() for p in tensors if p.requires_grad)


def rows_and_tokens(x: torch.Tensor) -> tuple[int, int]:
    """Rows and token positions a module computes on its first input ``x``.

    Token ids (n, t) are n rows of t tokens, hidden states (n, t, d) likewise; pooled vectors
    (n, d) are n rows of one position each. Under ``vmap`` the batched tensor underneath is
    counted, so every example's rows and tokens are.
    """
    base = x
    while functorch.is_functorch_wrapped_tensor(base):
        base = functorch.get_unwrapped(base)
    shape = tuple(x.shape)
    if x.is_floating_point() and len(shape) >= 1:
        shape = shape[:-1]  # drop the feature width: positions only
    positions = max(int(np.prod(shape[1:])), 1) if len(shape) > 1 else 1
    width = x.shape[-1] if x.is_floating_point() and x.dim() else 1
    tokens = base.numel() // max(width, 1)
    return tokens // positions, tokens


def _first_tensor(args: tuple[Any, ...]) -> torch.Tensor | None:
    """A call's first input as a tensor: a tensor, or an encoder output's pooled vector."""
    if not args:
        return None
    first = args[0]
    if isinstance(first, torch.Tensor):
        return first
    pooled = getattr(first, "pooled", None)  # a head fed an `EncoderOutput`
    return pooled if isinstance(pooled, torch.Tensor) else None


def _tracked(x: torch.Tensor) -> bool:
    """Whether ``x`` carries gradients (it requires them, or a grad transform tracks it)."""
    return bool(x.requires_grad) or functorch.is_gradtrackingtensor(x)


def held_bytes(obj: Any, _seen: set[int] | None = None, _depth: int = 0) -> int:
    """Bytes ``obj`` (a strategy) holds beside its model: every part with a ``held_bytes()``.

    Walks the strategy's attributes, containers and parts (not modules without ``held_bytes``,
    optimisers or tensors of their own) and sums what the parts that hold data report: episodic
    memories (`lifelong.memory.EpisodicMemory.held_bytes`), EWC's Fisher state, the prototype
    statistics. Each part is counted once.
    """
    seen = set() if _seen is None else _seen
    if id(obj) in seen or _depth > 6:
        return 0
    seen.add(id(obj))
    own = getattr(obj, "held_bytes", None)
    if callable(own) and not isinstance(obj, type):
        return int(own())
    if isinstance(obj, nn.Module | torch.optim.Optimizer | torch.Tensor | np.ndarray | type):
        return 0
    if isinstance(obj, dict):
        parts = list(obj.values())
    elif isinstance(obj, list | tuple | set):
        parts = list(obj)
    elif hasattr(obj, "__dict__") and type(obj).__module__.startswith("lifelong"):
        parts = list(vars(obj).values())
    else:
        return 0
    return sum(held_bytes(part, seen, _depth + 1) for part in parts)


def tensor_bytes(*parts: Any) -> int:
    """Bytes of the tensors and arrays in ``parts`` (nested in dicts, lists and tuples too).

    A tensor met twice (the same storage) is counted once.
    """
    seen: set[tuple[int, int]] = set()

    def walk(obj: Any) -> int:
        if isinstance(obj, np.ndarray):
            return obj.nbytes
        if isinstance(obj, torch.Tensor):
            key = (obj.untyped_storage().data_ptr(), obj.numel()) if obj.numel() else (id(obj), 0)
            if key in seen:
                return 0
            seen.add(key)
            return obj.numel() * obj.element_size()
        if isinstance(obj, dict):
            return sum(walk(v) for v in obj.values())
        if isinstance(obj, list | tuple):
            return sum(walk(v) for v in obj)
        return 0

    return sum(walk(p) for p in parts)
