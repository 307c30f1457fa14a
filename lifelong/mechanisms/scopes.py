"""Adaptation scopes: which weights local adaptation and meta-steps change, as types.

A scope is a value of one of four types, built for a model's encoder by `parse_scope` from the
option string (``adapt_scope``, ``meta_scope``):

* `All`: every weight, the paper's (de Masson d'Autume et al., 2019, §3.3: "all the parameters
  of the model"; Meta-MbPA, Wang et al., 2020, §3, likewise);
* `Top` (``top<N>``): the top N encoder layers and the head;
* `Head`: the prediction head only;
* `Lora` (``lora``): a rank-r delta B·A on every layer's projections plus the head
  (`lifelong.mechanisms.lowrank`; not in the papers, a cheaper approximation of `All`).

Each knows the stage where its weights begin (`lifelong.encoders.hf.HFEncoder.run_stages`: the
frozen stages below are computed once and reused), its parameters' name prefixes in the
`Classifier` (the layer paths are the encoder's business: ``layer_prefix``), where adaptation
starts, how logits are computed under the adapted weights and the gradient of its L2 pull.
Code that needs a scope's kind asks its type (``isinstance(scope, Head)``), never its name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Protocol

from lifelong.options import Choice

if TYPE_CHECKING:
    import torch
    from torch import nn

    from lifelong.mechanisms.inner_loop import Params
    from lifelong.model import Classifier


class StagedEncoder(Protocol):
    """What a scope needs of an encoder: its stage-wise layers and their parameter paths."""

    @property
    def num_layers(self) -> int:
        """Stage-wise layers (0: an encoder without them, which allows `Head` only)."""
        ...

    def layer_prefix(self, index: int) -> str:
        """The name prefix, within the encoder, of layer ``index``'s parameters."""
        ...


ENCODER = "encoder."  # the encoder's parameters within a `Classifier`
HEAD = "head."  # the head's


@dataclass(frozen=True)
class AdaptScope:
    """Which parameters adaptation changes (the base of the four scope types).

    Attributes:
        stage: The encoder stage where adapted parameters begin: 0 for `All`,
            ``num_layers + 1 − N`` for `Top`, ``num_layers + 1`` for `Head`, 1 for `Lora`
            (the embeddings stay frozen).
        prefixes: Parameter-name prefixes (in the `Classifier`) that are adapted (for `Lora`:
            the layers the deltas sit on, and the head).

    """

    stage: int
    prefixes: tuple[str, ...]

    @property
    def name(self) -> str:
        """The option string that names this scope (for logs and errors)."""
        return type(self).__name__.lower()

    def params(self, model: nn.Module) -> Params:
        """The adapted parameters of ``model``, detached from its autograd graph."""
        return {
            name: p.detach()
            for name, p in model.named_parameters()
            if name.startswith(self.prefixes)
        }

    def start(self, model: Classifier, seed: int = 0) -> Params:
        """Where adaptation starts: the adapted weights themselves, with their autograd graph.

        Unlike `params`, a meta-step taken from them is differentiable with respect to the
        model. ``seed`` is unused here (`Lora` draws its A from it).
        """
        return {n: p for n, p in model.named_parameters() if n.startswith(self.prefixes)}

    def logits(
        self, model: Classifier, params: Params, inputs: Sequence[torch.Tensor]
    ) -> torch.Tensor:
        """Logits of inputs at ``stage`` (`lifelong.mechanisms.neighbours.frozen_prefix`).

        Computed under ``params``.
        """
        from lifelong.runtime import eager_call

        return eager_call(model, params, tuple(inputs), {"start": self.stage, "packed": True})

    def pull(self, anchor: Params, l2: float) -> Callable[[Params], Params] | None:
        """`local_adapt`'s ``pull``: ``None``, the default λ||W~ − W||² against ``anchor``."""
        return None


@dataclass(frozen=True)
class All(AdaptScope):
    """Every weight, embeddings included (MbPA++'s local adaptation, §3.3)."""


@dataclass(frozen=True)
class Top(AdaptScope):
    """The top ``n`` encoder layers and the head (``top<N>``)."""

    n: int = 1

    @property
    def name(self) -> str:
        """``top<N>``."""
        return f"top{self.n}"


@dataclass(frozen=True)
class Head(AdaptScope):
    """The prediction head only: everything below it is computed once per input."""


@dataclass(frozen=True)
class Lora(AdaptScope):
    """Rank-``rank`` deltas B·A on every layer's projections, plus the head.

    (`lifelong.mechanisms.lowrank`.)

    The deltas start at B = 0 (so the first step's weights are the model's) and the pull is
    the exact λ(Σ‖B A‖² + ‖H̃ − H‖²) (`lifelong.mechanisms.lowrank.lora_pull`).
    """

    rank: int = 8

    def start(self, model: Classifier, seed: int = 0) -> Params:
        """Step-0 deltas of one owner (`init_lora`, A drawn from ``seed``)."""
        from lifelong.mechanisms.lowrank import init_lora

        return init_lora(model, self.rank, 1, seed)

    def logits(
        self, model: Classifier, params: Params, inputs: Sequence[torch.Tensor]
    ) -> torch.Tensor:
        """Logits of stage-1 inputs (embedding outputs) under the deltas ``params``."""
        from lifelong.mechanisms.lowrank import lora_forward

        x, mask = inputs[:2]  # stage 1: the token types are in the embeddings already
        return lora_forward(model, params, x, mask, [0, len(x)])

    def pull(self, anchor: Params, l2: float) -> Callable[[Params], Params] | None:
        """The exact pull of the deltas and the head against ``anchor``."""
        from lifelong.mechanisms.lowrank import lora_pull

        return lambda p: lora_pull(p, anchor, l2)


def layer_prefixes(encoder: StagedEncoder, layers: range) -> tuple[str, ...]:
    """Classifier-level name prefixes of the encoder layers ``layers``."""
    return tuple(ENCODER + encoder.layer_prefix(i) for i in layers)


def adapts_head_only(text: str) -> bool:
    """Whether the scope named ``text`` adapts the head alone (`Head`), without an encoder."""
    return text == "head"


def check_scope(text: str, num_layers: int) -> None:
    """Raise unless ``text`` names a scope for an encoder of ``num_layers`` stage-wise layers.

    Options are checked with it before any model loads; `parse_scope` checks the same.

    Raises:
        ValueError: An unknown scope, or N outside 1..num_layers; any scope but ``head`` for
            an encoder without stage-wise layers (``num_layers == 0``: the memory-augmented
            document encoders).

    """
    if text != "head" and num_layers == 0:
        raise ValueError(
            f"adapt_scope {text!r} needs a BERT-style encoder with stage-wise layers; "
            "memory-augmented encoders support adapt_scope 'head' only"
        )
    match = re.fullmatch(r"top(\d+)", text)
    if text in ("all", "head", "lora") or (match and 1 <= int(match.group(1)) <= num_layers):
        return
    raise ValueError(
        f"adapt_scope {text!r}: expected 'all', 'head', 'lora' or 'top<N>' with "
        f"1 <= N <= {num_layers}"
    )


def parse_scope(text: str, encoder: StagedEncoder, rank: int = 8) -> AdaptScope:
    """The scope an option string names, for ``encoder``.

    Args:
        text: ``"all"``, ``"head"``, ``"lora"`` or ``"top<N>"``.
        encoder: The model's encoder (its ``num_layers`` and ``layer_prefix``).
        rank: lora's r (``adapt_rank``); unused by the other scopes.

    Raises:
        ValueError: As `check_scope`.

    """
    layers = encoder.num_layers
    check_scope(text, layers)
    if text == "all":
        return All(0, ("",))
    if text == "head":
        return Head(layers + 1, (HEAD,))
    if text == "lora":
        return Lora(1, (*layer_prefixes(encoder, range(layers)), HEAD), rank=rank)
    n = int(text.removeprefix("top"))
    return Top(layers + 1 - n, (*layer_prefixes(encoder, range(layers - n, layers)), HEAD), n)


Scope = Annotated[
    str, Choice("all", "head", "lora", pattern=r"top[1-9][0-9]*", pattern_name="top<N>")
]
"""The option type of a scope: ``all``, ``head``, ``top<N>`` (top N layers + head) or ``lora``
(a rank-``adapt_rank`` delta on every layer's projections + the head)."""
