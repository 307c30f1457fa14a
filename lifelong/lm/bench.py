"""``lifelong lm``: train every memory module as a character LM on real text, one row each.

Every module gets the same budget (width, depth, heads, steps, batch, window, learning-rate
schedule: `lifelong.lm.text.TrainSettings`) and reads the same random windows (one generator
per seed). A window of ``segments × segment_length`` characters is read segment by segment with
the module's memory; ``transformer`` reads each segment on its own (no memory) and
``full-attention`` the whole window at once. ``knn-lm`` is the ``transformer`` row's trained
model plus a datastore over the training text (`lifelong.lm.knn_lm`): its gain over
``transformer`` is the datastore's alone. Every row scores the validation text as two halves
(``val_bpc`` over both, ``heldout_bpc`` over the second); kNN-LM's k and λ are chosen on the
first half (the grid widened until the pair chosen is inside it: `KNNLM.tune`), so only the
second is scored for it (its ``val_bpc`` is null) and the rows compare on text none tuned on;
its row records the datastore search's recall at the chosen k on held-out contexts
(`held_out_recall`: queries the datastore does not hold).
``spalm`` is a Transformer-XL with SPALM's gated long-term memory over that same datastore
(keys from the frozen ``transformer`` row's model: `lifelong.lm.spalm`); its row adds the
gate's distribution over the validation tokens.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from lifelong.encoders.layers import ModuleConfig
from lifelong.encoders.memory_modules import STRUCTURE_AWARE, build_memory_module
from lifelong.encoders.segatron import boundary_ids
from lifelong.files import atomic_write_text
from lifelong.lm.flags import FULL_ATTENTION, KNN_LM, SPALM, check_modules
from lifelong.lm.text import (
    CausalLM,
    Corpus,
    TrainSettings,
    bits,
    evaluate_lm,
    load_corpus,
    train_lm,
    training_memory,
)
from lifelong.memory import EpisodicMemory
from lifelong.options import SEED_MAX
from lifelong.streams.core import DataFormatError


@dataclass(frozen=True)
class BenchSettings:
    """The shared budget of one bench run (defaults: nanoGPT's CPU ``shakespeare_char``).

    Attributes:
        width: d_model (``n_embd`` 128).
        layers: Layers (``n_layer`` 4).
        heads: Heads (``n_head`` 4).
        segment_length: Characters per segment (``block_size`` 64).
        segments: Segments per training window (1: nanoGPT's window).
        train: Steps, batch, learning rate and schedule (`TrainSettings`).
        eval_batch_size: Windows per evaluation pass.

    """

    width: int = 128
    layers: int = 4
    heads: int = 4
    segment_length: int = 64
    segments: int = 1
    train: TrainSettings = field(default_factory=TrainSettings)
    eval_batch_size: int = 64

    def __post_init__(self) -> None:
        # one source of truth for the window: the training settings take the segments' one
        object.__setattr__(self, "train", replace(self.train, window=self.window))

    @property
    def window(self) -> int:
        """Characters per training and evaluation window."""
        return self.segments * self.segment_length


@dataclass
class Row:
    """One module's measurements (``lifelong lm``'s table row and JSON entry)."""

    module: str
    params: int
    val_bpc: float | None
    heldout_bpc: float
    train_tokens_per_s: float
    eval_tokens_per_s: float
    memory_mb: float
    datastore: int | None = None
    final_train_loss: float | None = None
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


SPARSE_VALUES = frozenset({"pkm"})
"""Families whose memory values train with sparse updates (`train_lm`'s `SparseAdam` at
``TrainSettings.sparse_lr``): PKM, as Lample et al. (2019, §4.2) train its value table (the
lookups read k rows per token; a dense AdamW with weight decay would move all 16,384)."""


def build_lm(
    name: str,
    vocab: int,
    settings: BenchSettings,
    seed: int,
    chars: str | None = None,
    *,
    sparse_values: bool | None = None,
) -> CausalLM:
    """A randomly initialised character LM of family ``name`` at the bench's sizes.

    ``chars`` (the vocabulary's characters) gives a structure-aware family (Segatron) its
    sentence and paragraph boundaries. ``sparse_values`` overrides whether a family in
    `SPARSE_VALUES` trains its value table sparsely (default: as its paper, yes); the dense
    variant is for comparisons only (`experiments/bench/lm_speed.py`).
    """
    full = name == FULL_ATTENTION
    segment = settings.window if full else settings.segment_length
    config = ModuleConfig(
        vocab_size=vocab,
        d_model=settings.width,
        heads=settings.heads,
        layers=settings.layers,
        ffn=4 * settings.width,  # nanoGPT's MLP: 4 x n_embd
        dropout=0.0,
        max_positions=segment,
        causal=True,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        options: dict[str, Any] = {}
        if name in STRUCTURE_AWARE and chars is not None:
            options = boundary_ids(lambda c: chars.index(c) if c in chars else None)
        if name in SPARSE_VALUES:  # Lample et al. §4.2: sparse Adam on the value table
            options["sparse"] = True if sparse_values is None else sparse_values
        module = build_memory_module("transformer" if full else name, config, segment, **options)
        return CausalLM(module, segment)


def _middle(corpus: Corpus) -> int:
    """Where the validation text's held-out second half starts."""
    return len(corpus.val) // 2


def _halves(corpus: Corpus) -> tuple[np.ndarray, np.ndarray]:
    """The validation text's first half (kNN-LM tunes on it) and second half (held out).

    Every row scores the validation text as these two halves (whole windows of each), so
    kNN-LM's tuning pass is also its first-half score and no text is scored twice.
    """
    middle = _middle(corpus)
    return corpus.val[: middle + 1], corpus.val[middle:]


def _whole(data: np.ndarray, window: int) -> int:
    """Characters `evaluate_lm` scores in ``data``: its whole windows."""
    return (len(data) - 1) // window * window


def _validation(
    corpus: Corpus, window: int, first: tuple[float, float], held: tuple[float, float]
) -> tuple[float, float]:
    """Nats per character over both halves and tokens/s, from each half's (nats, tokens/s)."""
    n1, n2 = (_whole(half, window) for half in _halves(corpus))
    nats = (n1 * first[0] + n2 * held[0]) / (n1 + n2)
    return nats, (n1 + n2) / (n1 / first[1] + n2 / held[1])


LogProbs = Callable[[nn.Module, torch.Tensor, np.ndarray], torch.Tensor]
"""Next-character log-probabilities of a window batch given its starts in the scored text."""


def _trained_row(
    name: str,
    model: nn.Module,
    corpus: Corpus,
    settings: BenchSettings,
    device: torch.device,
    seed: int,
    progress: Callable[[str, int, int], None] | None,
    *,
    logits: LogProbs | None = None,
    log_probs_at: Callable[[int], LogProbs] | None = None,
) -> Row:
    """Train ``model``, then score the validation text and its held-out second half.

    Args:
        name: The row's module name.
        model: A fresh model.
        corpus: The text.
        settings: The budget.
        device: Where to train and score.
        seed: Seeds the training windows.
        progress: Called with (name, step, steps) after each step.
        logits: The training logits of a window batch (`train_lm`); default ``model(x)``.
        log_probs_at: Given where the scored text starts in the validation text (0 or the
            held-out half's start), the scorer of its windows; default the model's own.

    """
    start = time.perf_counter()
    memory = training_memory(model, settings.train, device, logits)

    def step(i: int, loss: float) -> None:
        if progress is not None:
            progress(name, i + 1, settings.train.steps)

    trained = train_lm(model, corpus.train, settings.train, seed=seed, device=device,
                       on_step=step, logits=logits)  # fmt: skip
    first, held = (
        evaluate_lm(model, half, settings.window, batch_size=settings.eval_batch_size,
                    device=device, log_probs=None if log_probs_at is None else log_probs_at(at))
        for half, at in zip(_halves(corpus), (0, _middle(corpus)), strict=True)
    )  # fmt: skip
    val, eval_rate = _validation(corpus, settings.window, first, held)
    return Row(
        module=name,
        params=sum(p.numel() for p in model.parameters()),
        val_bpc=bits(val),
        heldout_bpc=bits(held[0]),
        train_tokens_per_s=trained.tokens_per_second,
        eval_tokens_per_s=eval_rate,
        memory_mb=memory / 2**20,
        final_train_loss=float(np.mean(trained.losses[-50:])),
        seconds=time.perf_counter() - start,
    )


def _knn_row(
    model: CausalLM,
    store: EpisodicMemory,
    base: Row,
    corpus: Corpus,
    settings: BenchSettings,
    device: torch.device,
) -> Row:
    from lifelong.lm.knn_lm import KNNLM, held_out_recall

    start = time.perf_counter()
    window, batch = settings.window, settings.eval_batch_size
    knn = KNNLM(model, store)
    tune, held = _halves(corpus)
    knn.tune(tune, window, batch_size=batch)  # on the first half: it is not scored
    held_nats, rate = evaluate_lm(
        model, held, window, batch_size=batch, device=device, log_probs=knn.log_probs
    )
    return replace(
        base,
        module=KNN_LM,
        val_bpc=None,  # k and λ were chosen on the first half: only the second is scored
        heldout_bpc=bits(held_nats),
        eval_tokens_per_s=rate,
        datastore=len(store),
        seconds=time.perf_counter() - start,
        extra={
            "k": knn.k,
            "lambda": knn.lam,
            "grid": knn.grid,
            "eval_cost_vs_lm": base.eval_tokens_per_s / rate,
            "index": store.index_choice.describe() if store.index_choice else None,
            "held_out_recall": held_out_recall(knn, held, window, batch_size=batch),
        },
    )


SPALM_NEIGHBOURS = 4
"""K, the long-term-memory tokens per position: the memory survey's SPALM section (on
WikiText-103's development set, varying K from 1 to 16, SPALM's perplexity was best at 4)."""


def _spalm_row(
    frozen: CausalLM,
    store: EpisodicMemory,
    corpus: Corpus,
    settings: BenchSettings,
    device: torch.device,
    seed: int,
    progress: Callable[[str, int, int], None] | None,
) -> Row:
    from lifelong.lm.spalm import SemiparametricLM, gate_histogram, neighbour_table

    start = time.perf_counter()
    window, k = settings.window, SPALM_NEIGHBOURS
    train = neighbour_table(frozen, store, corpus.train, window, k, exclude_own=True)
    val = neighbour_table(frozen, store, corpus.val, window, k, exclude_own=False)
    model = SemiparametricLM(build_lm("transformer-xl", corpus.vocab.size, settings, seed))

    def train_logits(m: nn.Module, x: torch.Tensor, starts: np.ndarray) -> torch.Tensor:
        return m(x, *train.rows(starts, x.shape[1]))[0]

    gates: list[torch.Tensor] = []  # g_t over the validation text scored

    def log_probs_at(offset: int) -> LogProbs:
        def log_probs(m: nn.Module, x: torch.Tensor, starts: np.ndarray) -> torch.Tensor:
            logits, gate = m(x, *val.rows(starts + offset, x.shape[1]))
            gates.append(gate.flatten().cpu())
            return torch.log_softmax(logits.float(), -1)

        return log_probs

    row = _trained_row(SPALM, model, corpus, settings, device, seed, progress,
                       logits=train_logits, log_probs_at=log_probs_at)  # fmt: skip
    all_gates = torch.cat(gates)
    return replace(
        row,
        datastore=len(store),
        seconds=time.perf_counter() - start,
        extra={
            "k": k,
            "index": store.index_choice.describe() if store.index_choice else None,
            "gate_mean": float(all_gates.mean()),
            "gate_below_half": float((all_gates < 0.5).float().mean()),
            "gate_histogram": gate_histogram(all_gates),
        },
    )


def run_bench(
    modules: Sequence[str],
    *,
    corpus: Corpus,
    settings: BenchSettings,
    seed: int = 0,
    device: torch.device | str = "cpu",
    progress: Callable[[str, int, int], None] | None = None,
    on_row: Callable[[Row], None] | None = None,
) -> list[Row]:
    """Train and measure each module (``knn-lm`` reuses the ``transformer`` row's model)."""
    from lifelong.lm.knn_lm import build_datastore

    device = torch.device(device)
    built: dict[str, Row] = {}
    models: dict[str, CausalLM] = {}
    stores: list[EpisodicMemory] = []

    def datastore() -> EpisodicMemory:  # over the training text, keys from `transformer`
        if not stores:
            model, batch = models["transformer"], settings.eval_batch_size
            store = build_datastore(
                model, corpus.train, settings.window, batch_size=batch, device=device
            )
            stores.append(store)
        return stores[0]

    for name in _ordered(modules):
        if name == KNN_LM:
            row = _knn_row(models["transformer"], datastore(), built["transformer"], corpus,
                           settings, device)  # fmt: skip
        elif name == SPALM:
            row = _spalm_row(models["transformer"], datastore(), corpus, settings, device, seed,
                             progress)  # fmt: skip
        else:
            models[name] = build_lm(name, corpus.vocab.size, settings, seed, corpus.vocab.chars)
            row = _trained_row(name, models[name], corpus, settings, device, seed, progress)
        built[name] = row
        if name in modules and on_row is not None:
            on_row(row)
    return [built[name] for name in _ordered(modules) if name in modules]


def _ordered(modules: Sequence[str]) -> list[str]:
    """Run order: ``transformer`` first when a datastore needs its model, the others as given."""
    names = list(dict.fromkeys(modules))
    if {KNN_LM, SPALM} & set(names):
        names = ["transformer", *(n for n in names if n != "transformer")]
    return names


def markdown(rows: Sequence[Row], settings: BenchSettings, steps: int, seed: int) -> str:
    """The table ``lifelong lm`` prints, with the budget it ran under."""
    lines = [
        f"budget: width {settings.width}, {settings.layers} layers, {settings.heads} heads, "
        f"window {settings.window} = {settings.segments} x {settings.segment_length}, "
        f"{steps} steps of {settings.train.batch_size} windows, lr {settings.train.lr:g}, "
        f"seed {seed}",
        "",
        "| module | params | val bpc | held-out bpc | train tok/s | eval tok/s | memory MB | "
        "datastore |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        store = f"{r.datastore:,}" if r.datastore is not None else ""
        lines.append(
            f"| {r.module} | {r.params:,} | {_bpc(r.val_bpc)} | {r.heldout_bpc:.3f} | "
            f"{r.train_tokens_per_s:,.0f} | {r.eval_tokens_per_s:,.0f} | {r.memory_mb:.1f} | "
            f"{store} |"
        )
    return "\n".join(lines) + "\n"


def _bpc(value: float | None) -> str:
    """A bpc cell: ``–`` where the row does not score that text (kNN-LM's tuning half)."""
    return "–" if value is None else f"{value:.3f}"


class TooLargeError(ValueError):
    """The flags ask for more memory than the device has (one line, naming the flags)."""


def check_window(corpus: Corpus, window: int) -> None:
    """Refuse a corpus too short for one window (and its next character) in either part.

    Raises:
        DataFormatError: Naming the file, the part, its length and the window.

    """
    for part, ids in (("training", corpus.train), ("validation", corpus.val)):
        if len(ids) <= window:
            raise DataFormatError(
                f"{corpus.path}: its {part} part holds {len(ids):,} characters, too few for "
                f"one window of {window:,} (--segments x --segment-length) and the character "
                "after it; use a longer corpus or shorter windows"
            )


def check_size(settings: BenchSettings, vocab: int, device: torch.device) -> None:
    """Refuse a model whose training state cannot fit the device, before building it.

    The estimate is a lower bound: a Transformer's ~12·d² weights per layer, the embeddings
    and the output layer, each held four times while training (weights, gradients and
    AdamW's two moments, 4 bytes each), against the device's whole memory (the CPU's RAM).
    A model that passes may still not fit; `memory_as_one_line` reports that.

    Raises:
        TooLargeError: Naming the size and the flags that set it.

    """
    weights = settings.layers * 12 * settings.width**2 + 2 * vocab * settings.width
    weights += settings.window * settings.width  # position embeddings
    need = weights * 4 * 4
    have = device_memory(device)
    if have is not None and need > have:
        raise TooLargeError(
            f"a model of --layers {settings.layers} x --width {settings.width} needs at least "
            f"{need / 2**30:,.1f} GiB to train (weights, gradients, AdamW's moments); this "
            f"{device.type} has {have / 2**30:,.1f} GiB"
        )


def device_memory(device: torch.device) -> int | None:
    """Bytes of memory the device has (the CPU: physical RAM), or None if unknown."""
    try:
        if device.type == "cuda":
            return int(torch.cuda.get_device_properties(device).total_memory)
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, RuntimeError, AttributeError):
        return None


@contextmanager
def memory_as_one_line() -> Iterator[None]:
    """An allocation the device cannot make becomes one line naming the flags that size it."""
    try:
        yield
    except (MemoryError, torch.OutOfMemoryError, RuntimeError) as err:
        text = str(err)
        if not isinstance(err, MemoryError | torch.OutOfMemoryError) and not any(
            s in text for s in ("allocate", "out of memory", "overflow", "too large")
        ):
            raise
        found = re.search(r"allocate (\d+) bytes", text)
        asked = f" ({int(found.group(1)) / 2**30:,.1f} GiB asked)" if found else ""
        raise TooLargeError(
            f"the model or a training step does not fit in the device's memory{asked}; lower "
            "--batch-size, --segment-length, --segments or --width"
        ) from None


def check_flags(args: argparse.Namespace) -> list[str]:
    """Every flag of ``lifelong lm`` checked, before anything loads; the modules to train.

    Raises:
        ValueError: Naming the flag, its value and what it takes.

    """
    modules = check_modules([m.strip() for m in args.modules.split(",") if m.strip()])
    for name, value in (("--steps", args.steps), ("--segments", args.segments),
                        ("--segment-length", args.segment_length),
                        ("--batch-size", args.batch_size), ("--width", args.width),
                        ("--layers", args.layers), ("--heads", args.heads)):  # fmt: skip
        if value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value}")
    if not (math.isfinite(args.lr) and args.lr > 0):
        raise ValueError(f"--lr must be a positive finite number, got {args.lr}")
    if not 0 <= args.seed <= SEED_MAX:
        raise ValueError(f"--seed must be in [0, {SEED_MAX}] (a generator's seed), got {args.seed}")
    if args.width % args.heads:
        raise ValueError(f"--width {args.width} is not divisible by --heads {args.heads}")
    return modules


def command(args: argparse.Namespace) -> int:
    """``lifelong lm``: check every flag, then train and print one row per module."""
    from lifelong.runtime import resolve_device

    modules = check_flags(args)
    device = resolve_device(args.device)
    corpus = load_corpus(args.corpus)
    check_window(corpus, args.segments * args.segment_length)
    train = TrainSettings(  # the window follows from the segments (BenchSettings)
        steps=args.steps,
        batch_size=args.batch_size,
        lr=args.lr,
        warmup=min(100, max(1, args.steps // 20)),
    )
    settings = BenchSettings(
        width=args.width,
        layers=args.layers,
        heads=args.heads,
        segment_length=args.segment_length,
        segments=args.segments,
        train=train,
    )
    check_size(settings, corpus.vocab.size, device)
    print(f"corpus: {corpus.path} ({len(corpus.train):,} training / {len(corpus.val):,} "
          f"validation characters, {corpus.vocab.size} distinct); device {device}")  # fmt: skip
    bars: dict[str, Any] = {}

    def progress(name: str, step: int, total: int) -> None:
        if args.no_progress:
            return
        from tqdm import tqdm

        if name not in bars:
            bars[name] = tqdm(total=total, desc=name, leave=False)
        bars[name].update(1)

    budget = {**asdict(settings), "seed": args.seed, **corpus_identity(corpus.path)}
    written = _finished_rows(Path(args.json), budget) if args.json else {}
    done = [m for m in modules if m in written]
    if done:
        print(f"resuming: {', '.join(done)} already in {args.json} (same budget)")

    def show(row: Row) -> None:
        print(f"{row.module}: val bpc {_bpc(row.val_bpc)} ({row.seconds:.0f} s)", flush=True)
        written[row.module] = row
        if args.json:  # after every row, so a stopped run keeps what it measured
            _write_rows(Path(args.json), budget, _file_order(written, modules))

    with memory_as_one_line():
        run_bench(
            [m for m in modules if m not in done], corpus=corpus, settings=settings,
            seed=args.seed, device=device, progress=progress, on_row=show,
        )  # fmt: skip
    rows = [written[m] for m in modules]
    print()
    print(markdown(rows, settings, args.steps, args.seed))
    if args.json:
        _write_rows(Path(args.json), budget, _file_order(written, modules))
        print(f"written to {Path(args.json)}")
    return 0


def _file_order(rows: dict[str, Row], modules: Sequence[str]) -> list[Row]:
    """The rows of ``modules`` in their order, then rows an earlier run wrote for others."""
    earlier = [row for name, row in rows.items() if name not in modules]
    return [rows[m] for m in modules if m in rows] + earlier


def corpus_identity(path: str | Path) -> dict[str, str]:
    """The corpus as a budget names it: its file name and a digest of its bytes.

    Not its path: a JSON written in one checkout resumes in another (or after the file moved)
    as long as the text is the same, and is refused when the text differs.
    """
    import hashlib

    data = Path(path).read_bytes()
    return {"corpus": Path(path).name, "corpus_sha256": hashlib.sha256(data).hexdigest()[:16]}


def _write_rows(path: Path, budget: dict[str, Any], rows: Sequence[Row]) -> None:
    """Write the bench's JSON (budget and one entry per module) atomically."""
    payload = {"budget": budget, "modules": {r.module: asdict(r) for r in rows}}
    atomic_write_text(path, json.dumps(payload, indent=2) + "\n")


def _finished_rows(path: Path, budget: dict[str, Any]) -> dict[str, Row]:
    """Rows an earlier run of the same budget already wrote to ``path`` (resume), else none.

    Raises:
        ValueError: ``path`` holds rows of another budget or is not the bench's JSON.

    """
    if not path.exists():
        return {}
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
        old, rows = payload["budget"], payload["modules"]
        if not isinstance(old, dict) or not isinstance(rows, dict):
            raise TypeError("'budget' and 'modules' must be objects")
    except (ValueError, KeyError, TypeError, RecursionError) as error:
        raise ValueError(f"{path}: not a `lifelong lm` JSON ({type(error).__name__}: "
                         f"{error}); move it or choose another --json") from None  # fmt: skip
    new = json.loads(json.dumps(budget))  # the types the file holds
    changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    if changed:
        key = changed[0]
        raise ValueError(
            f"{path} holds rows of another budget ({key}: {old.get(key)!r} there, "
            f"{new.get(key)!r} now); move it or choose another --json"
        )
    try:
        return {name: _read_row(row) for name, row in rows.items()}
    except (TypeError, ValueError) as error:
        raise ValueError(f"{path}: a row does not match the bench's fields ({error})") from None


def _read_row(values: Any) -> Row:
    """A `Row` from its JSON object, each field of its type (a number where a number is)."""
    if not isinstance(values, dict):
        raise TypeError(f"a row must be an object, got {values!r:.40}")
    row = Row(**values)
    numbers = ("params", "val_bpc", "heldout_bpc", "train_tokens_per_s", "eval_tokens_per_s")
    for key in (*numbers, "memory_mb", "datastore", "final_train_loss", "seconds"):
        value = getattr(row, key)
        optional = key in ("datastore", "final_train_loss", "val_bpc")
        if (value is None and optional) or (
            isinstance(value, int | float) and not isinstance(value, bool)
        ):
            continue
        raise ValueError(f"{key} must be a number, got {value!r:.40}")
    if not isinstance(row.module, str) or not isinstance(row.extra, dict):
        raise ValueError("module must be a string and extra an object")
    return row
