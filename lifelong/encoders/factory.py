"""Encoders by run-config name: Hugging Face models and the memory-augmented document encoders.

``--encoder`` takes a Hugging Face name or path (``minilm``, ``tiny``, ``bert-base-uncased``),
a memory module family (`MEMORY_MODULES`, listed by ``lifelong encoders``; ``transformer`` has
no memory) or a memory attached to a pre-trained BERT (`ON_BERT`: ``memoria-minilm``,
``rmt-minilm`` and their ``-tiny`` twins). The memory modules are randomly initialised with
`TEXT_MODULE_SIZES`, read the MiniLM tokenizer's ids, and encode each input segment by
segment (`DocumentEncoder`, ``segment_length`` tokens per segment, read `DOCUMENT_PASSES`
times unless the run's ``document_passes`` says otherwise).
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import nn

from lifelong.encoders.hf import load_encoder, load_tokenizer
from lifelong.encoders.layers import ModuleConfig
from lifelong.encoders.memory_modules import (
    DOCUMENT_PASSES,
    MEMORY_MODULES,
    STRUCTURE_AWARE,
    build_memory_module,
)
from lifelong.encoders.names import (  # noqa: F401 (re-exported)
    MEMORIA_BERT,
    MINILM,
    ON_BERT,
    RMT_BERT,
    RMT_BERT_SLOTS,
    EncoderError,
    check_encoder_name,
)
from lifelong.encoders.segments import DocumentEncoder

TEXT_MODULE_SIZES = ModuleConfig(d_model=128, heads=4, layers=2, ffn=256, dropout=0.1)
"""Sizes of the memory modules on text streams (vocabulary: the MiniLM tokenizer's)."""


def is_memory_encoder(name: str) -> bool:
    """Whether ``name`` is a memory-augmented document encoder (not a plain HF model)."""
    return name in MEMORY_MODULES or name in ON_BERT


def tokenizer_name(name: str) -> str:
    """The tokenizer an encoder name reads: the MiniLM one for the memory modules."""
    if name in ON_BERT:
        return ON_BERT[name]
    return MINILM if name in MEMORY_MODULES else name


def load_run_encoder(
    name: str,
    *,
    seed: int = 0,
    segment_length: int = 64,
    pooling: str = "auto",
    passes: int | None = None,
) -> nn.Module:
    """Build the encoder a run config names (see the module docstring).

    Args:
        name: Encoder name (HF name/path, memory family, or a memory on a BERT: `ON_BERT`).
        seed: Seed of every random initialisation.
        segment_length: Tokens per segment of the memory-augmented encoders.
        pooling: A Hugging Face encoder's pooled vector: ``"auto"``, ``"pooler"`` or ``"cls"``
            (see `load_encoder`); the memory-augmented encoders pool as their modules do.
        passes: Reads of each input by a memory-augmented encoder (`DocumentEncoder`'s
            ``passes``); ``None``: the design's own (`DOCUMENT_PASSES`, else 1).

    """
    if passes is None:
        passes = DOCUMENT_PASSES.get(name, 1)
    if name in MEMORIA_BERT:
        from lifelong.encoders.memoria import EngramSettings, MemoriaBert

        bert = load_encoder(MEMORIA_BERT[name], seed=seed)
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            # The Memoria paper's Hyperpartisan setting scaled to the segment: N_wm = N_stm^rem =
            # N_ltm^rem = L/8 and C_stm = L/4 (it used 64/64/64/128 with 512-token segments),
            # lifespan 12 as there.
            n = max(4, segment_length // 8)
            settings = EngramSettings(n, n, n, 2 * n, lifespan=12.0)
            module = MemoriaBert(bert, bert.num_layers - 2, settings)
        return DocumentEncoder(module, segment_length, passes=passes)
    if name in RMT_BERT:
        from lifelong.encoders.rmt import RecurrentMemoryBert

        bert = load_encoder(RMT_BERT[name], seed=seed)
        module = RecurrentMemoryBert(bert, slots=RMT_BERT_SLOTS, seed=seed)
        return DocumentEncoder(module, segment_length, passes=passes)
    if name in MEMORY_MODULES:
        tokenizer = load_tokenizer(MINILM)
        config = replace(TEXT_MODULE_SIZES, vocab_size=len(tokenizer), max_positions=segment_length)
        options = {}
        if name in STRUCTURE_AWARE:
            from lifelong.encoders.segatron import boundary_ids

            vocabulary = tokenizer.get_vocab()  # word piece -> id
            options = boundary_ids(vocabulary.get)
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            module = build_memory_module(name, config, segment_length, **options)
        return DocumentEncoder(module, segment_length, passes=passes)
    return load_encoder(name, seed=seed, pooling=pooling)
