"""The memory-augmented module families by name, with defaults scaled to the segment length.

`build_memory_module` is the one place that maps a name (``--encoder memformer``, a row of the
sorting table, a line of the encoder benchmark) to a configured `SegmentEncoder`. Following the
Memoria paper's sorting setup, every memory is sized relative to the segment length ``L``: the
baselines keep ``L`` cached tokens, Memformer ``L / 8`` slots (at least 4), ∞-former ``L``
basis functions, Memoria ``N_wm = L/8, N_stm^rem = L/4, N_ltm^rem = 5L/8, C_stm = L/2``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from lifelong.encoders.layers import ModuleConfig
from lifelong.encoders.names import ENCODERS, encoder_entry
from lifelong.encoders.segments import SegmentEncoder, Transformer


def build_transformer(config: ModuleConfig, segment_length: int, **kwargs: Any) -> SegmentEncoder:
    """The memory-less baseline (``transformer``) every family is built on."""
    return Transformer(config, **kwargs)


def build_transformer_xl(
    config: ModuleConfig, segment_length: int, **kwargs: Any
) -> SegmentEncoder:
    """Transformer-XL: ``transformer-xl``, sized to ``segment_length``."""
    from lifelong.encoders.transformer_xl import TransformerXL

    return TransformerXL(config, **{"memory_length": segment_length, **kwargs})


def build_compressive(config: ModuleConfig, segment_length: int, **kwargs: Any) -> SegmentEncoder:
    """Compressive Transformer: ``compressive``, sized to ``segment_length``."""
    from lifelong.encoders.transformer_xl import CompressiveTransformer

    half = max(1, segment_length // 2)
    defaults = {"memory_length": half, "compressed_length": half, "compression_rate": 2}
    return CompressiveTransformer(config, **{**defaults, **kwargs})


def build_memformer(config: ModuleConfig, segment_length: int, **kwargs: Any) -> SegmentEncoder:
    """Memformer (Wu et al. 2022): ``memformer``, its memory sized to ``segment_length``."""
    from lifelong.encoders.memformer import Memformer

    return Memformer(config, **{"slots": max(4, segment_length // 8), **kwargs})


def build_infinity_former(
    config: ModuleConfig, segment_length: int, **kwargs: Any
) -> SegmentEncoder:
    """∞-former: ``infinity-former``, sized to ``segment_length``."""
    from lifelong.encoders.infinity_former import InfinityFormer

    defaults = {"short_term_length": segment_length, "basis": segment_length}
    return InfinityFormer(config, **{**defaults, **kwargs})


def build_memoria(config: ModuleConfig, segment_length: int, **kwargs: Any) -> SegmentEncoder:
    """Memoria (Park & Bak 2023): ``memoria``, its memory sized to ``segment_length``."""
    from lifelong.encoders.memoria import EngramSettings, Memoria

    length = max(8, segment_length)
    settings = EngramSettings(
        working=length // 8,
        short_term_retrieve=length // 4,
        long_term_retrieve=5 * length // 8,
        short_term_capacity=length // 2,
    )
    return Memoria(config, kwargs.pop("settings", settings), **kwargs)


def build_memorizing(config: ModuleConfig, segment_length: int, **kwargs: Any) -> SegmentEncoder:
    """Memorizing Transformer: ``memorizing``, sized to ``segment_length``."""
    from lifelong.encoders.memorizing import MemorizingTransformer

    defaults = {"memory_size": 16 * segment_length, "k": 32}
    return MemorizingTransformer(config, **{**defaults, **kwargs})


def build_pkm(config: ModuleConfig, segment_length: int, **kwargs: Any) -> SegmentEncoder:
    """PKM (Lample et al. 2019): ``pkm``, its memory sized to ``segment_length``."""
    from lifelong.encoders.pkm import PKMTransformer

    # Lample et al. (|C| = 512, k = 32, H = 4, d_q = 512) scaled to a 128-wide module:
    # 16,384 slots of width d, k = 16, d_q = d
    defaults = {"sub_keys": 128, "k": 16, "heads": 4, "key_dim": config.d_model}
    return PKMTransformer(config, **{**defaults, **kwargs})


def build_memsizer(config: ModuleConfig, segment_length: int, **kwargs: Any) -> SegmentEncoder:
    """MemSizer (Zhang & Cai 2022): ``memsizer``, its memory sized to ``segment_length``."""
    from lifelong.encoders.memsizer import MemSizer

    return MemSizer(config, **{"slots": 32, **kwargs})  # the paper's language models: m = 32


def _memory_transformer(variant: str) -> Callable[..., SegmentEncoder]:
    def build(config: ModuleConfig, segment_length: int, **kwargs: Any) -> SegmentEncoder:
        from lifelong.encoders.memory_transformer import MemoryTransformer
        from lifelong.encoders.rmt import memory_module_config

        slots = kwargs.pop("slots", 20)  # the memory survey's Memory Transformer: 20 [mem]
        widened = memory_module_config(config, segment_length, slots, blocks=1)
        return MemoryTransformer(widened, slots=slots, **{"variant": variant, **kwargs})

    return build


def build_feedback(config: ModuleConfig, segment_length: int, **kwargs: Any) -> SegmentEncoder:
    """Feedback Transformer: ``feedback``, sized to ``segment_length``."""
    from lifelong.encoders.feedback import FeedbackTransformer

    return FeedbackTransformer(config, **{"span": segment_length, **kwargs})


def build_segatron(config: ModuleConfig, segment_length: int, **kwargs: Any) -> SegmentEncoder:
    """Segatron (Bai et al. 2021): ``segatron``, its memory sized to ``segment_length``."""
    from lifelong.encoders.segatron import Segatron

    return Segatron(config, **{"memory_length": segment_length, **kwargs})


def build_readtwice(config: ModuleConfig, segment_length: int, **kwargs: Any) -> SegmentEncoder:
    """ReadTwice: ``readtwice``, sized to ``segment_length``."""
    from lifelong.encoders.readtwice import ReadTwice

    # our choices (the reference's defaults live in its checkpoint's config): one summary per
    # 8 tokens, and room for 8 segments' summaries
    block = kwargs.pop("block", 8)
    size = kwargs.pop("memory_size", 8 * max(1, segment_length // block))
    return ReadTwice(config, block=block, memory_size=size, **kwargs)


def build_ernie_doc(config: ModuleConfig, segment_length: int, **kwargs: Any) -> SegmentEncoder:
    """ERNIE-Doc (Ding et al. 2021): ``ernie-doc``, its memory sized to ``segment_length``."""
    from lifelong.encoders.transformer_xl import TransformerXL

    defaults = {"memory_length": segment_length, "recurrence": "same-layer"}
    return TransformerXL(config, **{**defaults, **kwargs})


def build_rmt(config: ModuleConfig, segment_length: int, **kwargs: Any) -> SegmentEncoder:
    """RMT (Bulatov et al. 2022): ``rmt``, its memory sized to ``segment_length``."""
    from lifelong.encoders.rmt import RecurrentMemoryTransformer, memory_module_config

    # 10 memory tokens: the 2023 report's (section 4); the NeurIPS runs (booydar/LM-RMT
    # experiment_results) sweep 1-150
    slots = kwargs.pop("slots", 10)
    widened = memory_module_config(config, segment_length, slots)
    return RecurrentMemoryTransformer(widened, slots=slots, **kwargs)


build_memory_transformer = _memory_transformer("memtr")
"""Memory Transformer (Burtsev et al. 2020): ``memory-transformer``, 20 [mem] tokens."""

build_memctrl = _memory_transformer("memctrl")
"""Memory Transformer's MemCtrl variant (Burtsev et al. 2020): ``memctrl``."""


class _Builders(Mapping[str, Callable[..., SegmentEncoder]]):
    """The families' builders by name: a view of the encoder table, each imported when used."""

    def __getitem__(self, name: str) -> Callable[..., SegmentEncoder]:
        entry = encoder_entry(name)
        if entry is None or not entry.family:
            raise KeyError(name)
        return resolve(entry.build)

    def __iter__(self) -> Iterator[str]:
        return iter(n for n, e in ENCODERS.items() if e.family)

    def __len__(self) -> int:
        return sum(e.family for e in ENCODERS.values())


MEMORY_MODULES: Mapping[str, Callable[..., SegmentEncoder]] = _Builders()
"""The memory-augmented families' builders by name (the rows of `ENCODERS` with a builder)."""


def resolve(path: str | None) -> Callable[..., Any]:
    """The function a table row's ``"module:function"`` names, imported now.

    Raises:
        ValueError: The row names no builder, or it does not import.

    """
    module, _, name = (path or "").partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as err:
        raise ValueError(f"encoder builder {path!r} does not import: {err}") from None


STRUCTURE_AWARE = tuple(n for n, e in ENCODERS.items() if e.structure_aware)
"""Families that read sentence and paragraph boundaries: their builders take the vocabulary's
boundary token ids (`lifelong.encoders.segatron.boundary_ids`; `EncoderEntry.structure_aware`)."""

DOCUMENT_PASSES: dict[str, int] = {n: e.passes for n, e in ENCODERS.items() if e.passes != 1}
"""Passes a document encoder makes over a document (`DocumentEncoder`'s ``passes``), where not 1.

ERNIE-Doc's retrospective feed (Ding et al. 2021, section 3.1) reads a document twice: a
skimming pass builds the memory, and the second pass, whose outputs are used, starts from it.
ReadTwice's first pass summarises every segment for the second (Zemlyanskiy et al. 2021). A
causal language model cannot do this (the first pass would show it the text it predicts), so
`lifelong lm` reads once; classification inputs are read twice.
"""


def build_memory_module(
    name: str, config: ModuleConfig, segment_length: int, **kwargs: Any
) -> SegmentEncoder:
    """Build a memory-augmented module family by name.

    Args:
        name: One of `MEMORY_MODULES` (``transformer`` is the memory-less baseline).
        config: Sizes shared by every family.
        segment_length: Tokens per segment; memory sizes default to multiples of it.
        **kwargs: Family-specific options overriding the defaults (see each class).

    Raises:
        KeyError: For an unknown name, listing the known ones.

    """
    if name not in MEMORY_MODULES:
        raise KeyError(f"unknown memory module {name!r}; known: {', '.join(MEMORY_MODULES)}")
    return MEMORY_MODULES[name](config, segment_length, **kwargs)
