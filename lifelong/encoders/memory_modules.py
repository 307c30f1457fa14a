"""The memory-augmented module families by name, with defaults scaled to the segment length.

`build_memory_module` is the one place that maps a name (``--encoder memformer``, a row of the
sorting table, a line of the encoder benchmark) to a configured `SegmentEncoder`. Following the
Memoria paper's sorting setup, every memory is sized relative to the segment length ``L``: the
baselines keep ``L`` cached tokens, Memformer ``L / 8`` slots (at least 4), ∞-former ``L``
basis functions, Memoria ``N_wm = L/8, N_stm^rem = L/4, N_ltm^rem = 5L/8, C_stm = L/2``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lifelong.encoders.layers import ModuleConfig
from lifelong.encoders.segments import SegmentEncoder, Transformer


def _transformer(config: ModuleConfig, segment_length: int, **kwargs: Any) -> SegmentEncoder:
    return Transformer(config, **kwargs)


def _transformer_xl(config: ModuleConfig, segment_length: int, **kwargs: Any) -> SegmentEncoder:
    from lifelong.encoders.transformer_xl import TransformerXL

    return TransformerXL(config, **{"memory_length": segment_length, **kwargs})


def _compressive(config: ModuleConfig, segment_length: int, **kwargs: Any) -> SegmentEncoder:
    from lifelong.encoders.transformer_xl import CompressiveTransformer

    half = max(1, segment_length // 2)
    defaults = {"memory_length": half, "compressed_length": half, "compression_rate": 2}
    return CompressiveTransformer(config, **{**defaults, **kwargs})


def _memformer(config: ModuleConfig, segment_length: int, **kwargs: Any) -> SegmentEncoder:
    from lifelong.encoders.memformer import Memformer

    return Memformer(config, **{"slots": max(4, segment_length // 8), **kwargs})


def _infinity_former(config: ModuleConfig, segment_length: int, **kwargs: Any) -> SegmentEncoder:
    from lifelong.encoders.infinity_former import InfinityFormer

    defaults = {"short_term_length": segment_length, "basis": segment_length}
    return InfinityFormer(config, **{**defaults, **kwargs})


def _memoria(config: ModuleConfig, segment_length: int, **kwargs: Any) -> SegmentEncoder:
    from lifelong.encoders.memoria import EngramSettings, Memoria

    length = max(8, segment_length)
    settings = EngramSettings(
        working=length // 8,
        short_term_retrieve=length // 4,
        long_term_retrieve=5 * length // 8,
        short_term_capacity=length // 2,
    )
    return Memoria(config, kwargs.pop("settings", settings), **kwargs)


def _memorizing(config: ModuleConfig, segment_length: int, **kwargs: Any) -> SegmentEncoder:
    from lifelong.encoders.memorizing import MemorizingTransformer

    defaults = {"memory_size": 16 * segment_length, "k": 32}
    return MemorizingTransformer(config, **{**defaults, **kwargs})


def _pkm(config: ModuleConfig, segment_length: int, **kwargs: Any) -> SegmentEncoder:
    from lifelong.encoders.pkm import PKMTransformer

    # Lample et al. (|C| = 512, k = 32, H = 4, d_q = 512) scaled to a 128-wide module:
    # 16,384 slots of width d, k = 16, d_q = d
    defaults = {"sub_keys": 128, "k": 16, "heads": 4, "key_dim": config.d_model}
    return PKMTransformer(config, **{**defaults, **kwargs})


def _memsizer(config: ModuleConfig, segment_length: int, **kwargs: Any) -> SegmentEncoder:
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


def _feedback(config: ModuleConfig, segment_length: int, **kwargs: Any) -> SegmentEncoder:
    from lifelong.encoders.feedback import FeedbackTransformer

    return FeedbackTransformer(config, **{"span": segment_length, **kwargs})


def _segatron(config: ModuleConfig, segment_length: int, **kwargs: Any) -> SegmentEncoder:
    from lifelong.encoders.segatron import Segatron

    return Segatron(config, **{"memory_length": segment_length, **kwargs})


def _readtwice(config: ModuleConfig, segment_length: int, **kwargs: Any) -> SegmentEncoder:
    from lifelong.encoders.readtwice import ReadTwice

    # our choices (the reference's defaults live in its checkpoint's config): one summary per
    # 8 tokens, and room for 8 segments' summaries
    block = kwargs.pop("block", 8)
    size = kwargs.pop("memory_size", 8 * max(1, segment_length // block))
    return ReadTwice(config, block=block, memory_size=size, **kwargs)


def _ernie_doc(config: ModuleConfig, segment_length: int, **kwargs: Any) -> SegmentEncoder:
    from lifelong.encoders.transformer_xl import TransformerXL

    defaults = {"memory_length": segment_length, "recurrence": "same-layer"}
    return TransformerXL(config, **{**defaults, **kwargs})


def _rmt(config: ModuleConfig, segment_length: int, **kwargs: Any) -> SegmentEncoder:
    from lifelong.encoders.rmt import RecurrentMemoryTransformer, memory_module_config

    # 10 memory tokens: the 2023 report's (section 4); the NeurIPS runs (booydar/LM-RMT
    # experiment_results) sweep 1-150
    slots = kwargs.pop("slots", 10)
    widened = memory_module_config(config, segment_length, slots)
    return RecurrentMemoryTransformer(widened, slots=slots, **kwargs)


MEMORY_MODULES: dict[str, Callable[..., SegmentEncoder]] = {
    "transformer": _transformer,
    "transformer-xl": _transformer_xl,
    "compressive": _compressive,
    "memformer": _memformer,
    "infinity-former": _infinity_former,
    "memoria": _memoria,
    "memorizing": _memorizing,
    "pkm": _pkm,
    "memsizer": _memsizer,
    "rmt": _rmt,
    "ernie-doc": _ernie_doc,
    "memory-transformer": _memory_transformer("memtr"),
    "memctrl": _memory_transformer("memctrl"),
    "feedback": _feedback,
    "segatron": _segatron,
    "readtwice": _readtwice,
}

STRUCTURE_AWARE = ("segatron",)
"""Families that read sentence and paragraph boundaries: their builders take the vocabulary's
boundary token ids (`lifelong.encoders.segatron.boundary_ids`)."""

DOCUMENT_PASSES: dict[str, int] = {"ernie-doc": 2, "readtwice": 2}
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
