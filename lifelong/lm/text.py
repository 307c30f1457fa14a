"""Character-level language modelling on real text: corpus, model wrapper, training, evaluation.

The protocol is nanoGPT's ``shakespeare_char`` (karpathy/nanoGPT, ``data/shakespeare_char/
prepare.py``, ``train.py``, ``config/train_shakespeare_char.py``): the vocabulary is the set of
characters of the corpus, the first 90% of the characters train and the last 10% validate,
training batches are windows at uniformly random offsets (``get_batch``), AdamW with β = (0.9,
0.99) and weight decay 0.1 on matrices only, a linear warm-up then cosine decay to a tenth of
the learning rate, gradient clipping at 1. Validation is one pass over every whole window of
the validation text (nanoGPT estimates the same mean from random windows).

A memory module reads a window segment by segment, carrying its memory (`CausalLM`);
``full-attention`` reads the whole window at once, ``transformer`` each segment on its own.
A module with a regulariser of its own (the Compressive Transformer's attention-reconstruction
loss, the ∞-former's KL) trains on the LM loss plus it, as its paper does; the losses
`train_lm` reports are the LM's alone.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from lifelong.encoders.segments import SegmentEncoder, drain_auxiliary
from lifelong.learner import DivergenceError
from lifelong.lm.flags import DEFAULT_CORPUS
from lifelong.streams.core import DataFormatError, decode_text

TRAIN_FRACTION = 0.9
"""nanoGPT's split: the first 90% of the characters train (``prepare.py``)."""


@dataclass(frozen=True)
class CharVocabulary:
    """The characters of a corpus, sorted; id = position (nanoGPT's ``stoi``)."""

    chars: str

    @classmethod
    def of(cls, text: str) -> CharVocabulary:
        """Every distinct character of ``text``."""
        return cls("".join(sorted(set(text))))

    @property
    def size(self) -> int:
        """Number of characters."""
        return len(self.chars)

    def encode(self, text: str) -> np.ndarray:
        """Text -> ids (n,) int64; a character outside the vocabulary is a `KeyError`."""
        lookup = {c: i for i, c in enumerate(self.chars)}
        return np.fromiter((lookup[c] for c in text), dtype=np.int64, count=len(text))

    def decode(self, ids: np.ndarray) -> str:
        """Ids -> text."""
        return "".join(self.chars[int(i)] for i in ids)


@dataclass(frozen=True)
class Corpus:
    """A corpus split for language modelling.

    Attributes:
        path: Where it was read from.
        vocab: Its characters.
        train: Training ids (n_train,).
        val: Validation ids (n_val,).

    """

    path: Path
    vocab: CharVocabulary
    train: np.ndarray
    val: np.ndarray


def load_corpus(
    path: str | Path = DEFAULT_CORPUS, train_fraction: float = TRAIN_FRACTION
) -> Corpus:
    """Read a UTF-8 text file and split it (first ``train_fraction`` of characters train).

    Raises:
        DataFormatError: The file is missing, not UTF-8 (naming the line), or too short to
            hold a training and a validation part.

    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise DataFormatError(f"{path}: cannot read the corpus ({err.strerror})") from None
    text = decode_text(path, data)
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"train_fraction must be in (0, 1), got {train_fraction}")
    cut = int(len(text) * train_fraction)
    if cut < 2 or len(text) - cut < 2:
        raise DataFormatError(f"{path}: {len(text)} characters are too few to split for an LM")
    vocab = CharVocabulary.of(text)
    ids = vocab.encode(text)
    return Corpus(path, vocab, ids[:cut], ids[cut:])


def random_windows(
    data: np.ndarray, batch: int, length: int, generator: np.random.Generator
) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
    """Random windows (nanoGPT's ``get_batch``).

    Returns:
        Inputs and next-character targets (b, length), and each window's start in ``data``
        (b,) (a model reading per-position side inputs, e.g. SPALM's neighbours, needs it).

    """
    if len(data) <= length:
        raise ValueError(f"a window of {length} needs more than {len(data)} characters")
    starts = generator.integers(0, len(data) - length, size=batch)
    x = np.stack([data[s : s + length] for s in starts])
    y = np.stack([data[s + 1 : s + 1 + length] for s in starts])
    return torch.from_numpy(x), torch.from_numpy(y), starts


def whole_windows(
    data: np.ndarray, length: int, batch: int
) -> Iterator[tuple[torch.Tensor, torch.Tensor, np.ndarray]]:
    """Every non-overlapping window of ``data`` (the tail shorter than a window is left out).

    Yields inputs and targets (b, length) and the windows' starts in ``data`` (b,).
    """
    count = (len(data) - 1) // length
    x = torch.from_numpy(data[: count * length].reshape(count, length))
    y = torch.from_numpy(data[1 : count * length + 1].reshape(count, length))
    for first in range(0, count, batch):
        rows = np.arange(first, min(first + batch, count))
        yield x[first : first + batch], y[first : first + batch], rows * length


EMBEDDING_STD = 0.02
"""Standard deviation of the token and position embeddings (nanoGPT ``model.py``,
``_init_weights``: ``normal_(std=0.02)`` for every ``nn.Embedding``)."""


class CausalLM(nn.Module):
    """A causal segment encoder with a character head, reading a window segment by segment.

    Gradients flow through the memory across the window's segments (as far as the module
    lets them: Transformer-XL and the Compressive Transformer stop them at their caches, as
    their papers do). The head is tied to the module's input embedding when the module has
    one of the same shape (nanoGPT ties ``lm_head`` to ``wte``). The module's token and
    position embeddings are drawn from N(0, 0.02²) as nanoGPT draws ``wte`` and ``wpe``: with
    PyTorch's N(0, 1) default the tied head's logits start about 11 times the scale of a
    LayerNormed state (an untrained model's loss was 75 nats per character instead of ln V).

    Args:
        module: A causal `SegmentEncoder`.
        segment_length: Tokens per segment (a window of one segment is read at once).

    """

    def __init__(self, module: SegmentEncoder, segment_length: int) -> None:
        super().__init__()
        if not module.config.causal:
            raise ValueError("module must be causal (ModuleConfig(causal=True)) for an LM")
        self.module = module
        self.segment_length = segment_length
        self.head = nn.Linear(module.hidden_size, module.config.vocab_size, bias=False)
        embed = getattr(module, "embed", None)
        words, positions = getattr(embed, "words", None), getattr(embed, "positions", None)
        for table in (words, positions):
            if isinstance(table, nn.Embedding):  # nanoGPT's _init_weights: N(0, 0.02)
                nn.init.normal_(table.weight, mean=0.0, std=EMBEDDING_STD)
        if isinstance(words, nn.Embedding) and words.weight.shape == self.head.weight.shape:
            self.head.weight = words.weight

    def hidden(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Final token vectors (b, T, d) of a window, segment by segment with the memory."""
        mask = torch.ones_like(input_ids)
        memory: Any = None
        out = []
        for start in range(0, input_ids.shape[1], self.segment_length):
            stop = start + self.segment_length
            step = self.module.step(input_ids[:, start:stop], mask[:, start:stop], memory)
            out.append(step.hidden)
            memory = step.memory
        return torch.cat(out, dim=1)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Next-character logits (b, T, V)."""
        return self.head(self.hidden(input_ids))


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy in nats per character: (b, T, V), (b, T) -> ()."""
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


def learning_rate(step: int, lr: float, min_lr: float, warmup: int, decay_steps: int) -> float:
    """Learning rate (nanoGPT's ``get_lr``): warm-up, cosine decay to ``min_lr`` at decay_steps."""
    if step < warmup:
        return lr * (step + 1) / (warmup + 1)
    if step > decay_steps:
        return min_lr
    ratio = (step - warmup) / max(1, decay_steps - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


def adamw(model: nn.Module, lr: float, weight_decay: float = 0.1) -> torch.optim.AdamW:
    """AdamW as nanoGPT's ``configure_optimizers``: decay on tensors of rank >= 2, β = (0.9, 0.99).

    (β₂ = 0.99 is ``config/train_shakespeare_char.py``'s, for its small batches.) Sparse
    parameters (`lifelong.encoders.pkm.sparse_parameters`) are left to a sparse optimiser.
    """
    from lifelong.encoders.pkm import sparse_parameters

    sparse = {id(p) for p in sparse_parameters(model)}
    params = [p for p in model.parameters() if p.requires_grad and id(p) not in sparse]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.99))


@dataclass(frozen=True)
class TrainSettings:
    """The training budget (defaults: nanoGPT's CPU configuration of ``shakespeare_char``).

    Attributes:
        steps: Optimiser steps (``max_iters`` 2,000; ``lr_decay_iters`` the same).
        batch_size: Windows per step (12).
        window: Characters per window (64 = nanoGPT's ``block_size`` for one segment).
        lr: Peak learning rate (1e-3); it decays to a tenth (``min_lr`` 1e-4).
        warmup: Warm-up steps (100).
        clip: Gradient-norm clip (1.0).
        sparse_lr: Learning rate of sparse value tables (PKM: 1e-3, Lample et al. section 4.2).

    """

    steps: int = 2000
    batch_size: int = 12
    window: int = 64
    lr: float = 1e-3
    warmup: int = 100
    clip: float = 1.0
    sparse_lr: float = 1e-3


@dataclass
class TrainResult:
    """What `train_lm` measured: final training loss and throughput.

    Attributes:
        losses: The LM loss (nats per character) of each step, without a module's regulariser.
        tokens_per_second: Training characters per second.
        seconds: Training time.

    """

    losses: list[float]
    tokens_per_second: float
    seconds: float


def train_lm(
    model: nn.Module,
    data: np.ndarray,
    settings: TrainSettings,
    *,
    seed: int = 0,
    device: torch.device | str = "cpu",
    on_step: Callable[[int, float], None] | None = None,
    logits: Callable[[nn.Module, torch.Tensor, np.ndarray], torch.Tensor] | None = None,
) -> TrainResult:
    """Train on random windows of ``data`` (see the module docstring for the recipe).

    Args:
        model: The LM (any module whose parameters ``logits`` trains).
        data: Training ids.
        settings: The budget.
        seed: Seeds the windows.
        device: Where to train.
        on_step: Called with (step, loss) after each step.
        logits: Next-character logits (b, T, V) of a window batch and its starts; default
            ``model(x)``.

    """
    from lifelong.encoders.pkm import sparse_parameters

    device = torch.device(device)
    model.to(device).train()
    generator = np.random.default_rng(seed)
    optimiser = adamw(model, settings.lr)
    sparse = sparse_parameters(model)
    sparse_optimiser = torch.optim.SparseAdam(sparse, lr=settings.sparse_lr) if sparse else None
    losses = []
    start = time.perf_counter()
    for step in range(settings.steps):
        lr = learning_rate(step, settings.lr, settings.lr / 10, settings.warmup, settings.steps)
        for group in optimiser.param_groups:
            group["lr"] = lr
        x, y, starts = random_windows(data, settings.batch_size, settings.window, generator)
        x = x.to(device)
        drain_auxiliary(model)  # nothing left from an earlier pass (or evaluation)
        loss = lm_loss(model(x) if logits is None else logits(model, x, starts), y.to(device))
        regulariser = drain_auxiliary(model)  # Compressive's reconstruction, ∞-former's KL
        optimiser.zero_grad(set_to_none=True)
        if sparse_optimiser is not None:
            sparse_optimiser.zero_grad(set_to_none=True)
        (loss if regulariser is None else loss + regulariser).backward()
        dense = [p for g in optimiser.param_groups for p in g["params"] if p.grad is not None]
        torch.nn.utils.clip_grad_norm_(dense, settings.clip)
        optimiser.step()
        if sparse_optimiser is not None:
            sparse_optimiser.step()
        value = loss.item()
        if not math.isfinite(value):
            raise DivergenceError(
                f"training loss is {value} at step {step}; lower the learning rate (--lr)"
            )
        losses.append(value)
        if on_step is not None:
            on_step(step, value)
    seconds = time.perf_counter() - start
    tokens = settings.steps * settings.batch_size * settings.window
    return TrainResult(losses, tokens / seconds, seconds)


@torch.no_grad()
def evaluate_lm(
    model: nn.Module,
    data: np.ndarray,
    window: int,
    *,
    batch_size: int = 64,
    device: torch.device | str = "cpu",
    log_probs: Callable[[nn.Module, torch.Tensor, np.ndarray], torch.Tensor] | None = None,
) -> tuple[float, float]:
    """Mean nats per character over every whole window of ``data``, and tokens per second.

    Args:
        model: The trained model.
        data: Ids to score.
        window: Characters per window (the training window).
        batch_size: Windows per forward pass.
        device: Where to compute.
        log_probs: Next-character log-probabilities (b, T, V) of a window batch and its
            starts in ``data``; default: the model's own (kNN-LM passes its mixture).

    """
    model.to(device).eval()
    total, count = 0.0, 0
    start = time.perf_counter()
    for x, y, starts in whole_windows(data, window, batch_size):
        x, y = x.to(device), y.to(device)
        if log_probs is None:
            logp = torch.log_softmax(model(x).float(), -1)
        else:
            logp = log_probs(model, x, starts)
        total += float(-logp.gather(-1, y[..., None]).sum())
        count += y.numel()
    return total / count, count / (time.perf_counter() - start)


def bits(nats: float) -> float:
    """Nats per character -> bits per character."""
    return nats / math.log(2)


def training_memory(
    model: nn.Module,
    settings: TrainSettings,
    device: torch.device,
    logits: Callable[[nn.Module, torch.Tensor, np.ndarray], torch.Tensor] | None = None,
) -> int:
    """Bytes one training step holds.

    Parameters, gradients and AdamW's two moments (4 copies of every trainable parameter) plus
    the peak of the activations the step saves for backward
    (`lifelong.encoders.profiling.peak_saved_bytes`, parameters excluded). The step runs on a
    copy, so the model's state (batch-norm statistics, gradients) is left as it was.
    """
    from lifelong.encoders.profiling import peak_saved_bytes

    params = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    probe = copy.deepcopy(model).to(device).train()
    x = torch.zeros(settings.batch_size, settings.window, dtype=torch.long, device=device)
    starts = np.zeros(settings.batch_size, dtype=np.int64)

    def step() -> None:
        lm_loss(probe(x) if logits is None else logits(probe, x, starts), x).backward()

    _, saved = peak_saved_bytes(step, exclude=probe.parameters())
    return 4 * params + saved


__all__ = [
    "DEFAULT_CORPUS",
    "CausalLM",
    "CharVocabulary",
    "Corpus",
    "TrainResult",
    "TrainSettings",
    "adamw",
    "bits",
    "evaluate_lm",
    "learning_rate",
    "lm_loss",
    "load_corpus",
    "random_windows",
    "train_lm",
    "training_memory",
    "whole_windows",
]
