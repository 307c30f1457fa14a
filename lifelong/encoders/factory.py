"""Encoders by run-config name: Hugging Face models and the memory-augmented document encoders.

``--encoder`` takes a Hugging Face name or path (``minilm``, ``tiny``, ``bert-base-uncased``),
a memory module family (a row of the encoder table `ENCODERS`, listed by ``lifelong
encoders``; ``transformer`` has no memory) or a memory attached to a pre-trained BERT
(``memoria-minilm``, ``rmt-minilm`` and their ``-tiny`` twins). The memory modules are
randomly initialised with `TEXT_MODULE_SIZES`, read the MiniLM tokenizer's ids, and encode each
input segment by segment (`DocumentEncoder`, ``segment_length`` tokens per segment, read
`EncoderEntry.passes` times unless the run's ``document_passes`` says otherwise).
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import nn

from lifelong.encoders.hf import load_encoder, load_tokenizer
from lifelong.encoders.layers import ModuleConfig
from lifelong.encoders.memory_modules import build_memory_module, resolve
from lifelong.encoders.names import (  # noqa: F401 (re-exported)
    MINILM,
    EncoderError,
    check_encoder_name,
    encoder_entry,
)
from lifelong.encoders.segments import DocumentEncoder, SegmentWrap

TEXT_MODULE_SIZES = ModuleConfig(d_model=128, heads=4, layers=2, ffn=256, dropout=0.1)
"""Sizes of the memory modules on text streams (vocabulary: the MiniLM tokenizer's)."""


def is_memory_encoder(name: str) -> bool:
    """Whether ``name`` is a memory-augmented document encoder (not a plain HF model)."""
    entry = encoder_entry(name)
    return entry is not None and entry.build is not None


def tokenizer_name(name: str) -> str:
    """The tokenizer an encoder name reads: the MiniLM one for the memory modules."""
    entry = encoder_entry(name)
    if entry is None or entry.build is None:
        return name
    return entry.bert or MINILM


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
        name: Encoder name (HF name/path, or a row of the encoder table, `ENCODERS`).
        seed: Seed of every random initialisation.
        segment_length: Tokens per segment of the memory-augmented encoders.
        pooling: A Hugging Face encoder's pooled vector: ``"auto"``, ``"pooler"`` or ``"cls"``
            (see `load_encoder`); the memory-augmented encoders pool as their modules do.
        passes: Reads of each input by a memory-augmented encoder (`DocumentEncoder`'s
            ``passes``); ``None``: the design's own (`EncoderEntry.passes`).

    """
    entry = encoder_entry(name)
    if entry is None or entry.build is None:
        return load_encoder(name, seed=seed, pooling=pooling)
    passes = entry.passes if passes is None else passes
    if entry.bert is not None:
        bert = load_encoder(entry.bert, seed=seed)
        module = resolve(entry.build)(bert, segment_length, seed)
        wrap = None
        if entry.wrap_segments:  # each segment [CLS] text [SEP], as the BERT was trained
            tokens = load_tokenizer(entry.bert)
            wrap = SegmentWrap(tokens.cls_token_id, tokens.sep_token_id)
        return DocumentEncoder(module, segment_length, passes=passes, wrap=wrap)
    tokenizer = load_tokenizer(MINILM)
    config = replace(TEXT_MODULE_SIZES, vocab_size=len(tokenizer), max_positions=segment_length)
    options = {}
    if entry.structure_aware:
        from lifelong.encoders.segatron import boundary_ids

        vocabulary = tokenizer.get_vocab()  # word piece -> id
        options = boundary_ids(vocabulary.get)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        module = build_memory_module(name, config, segment_length, **options)
    return DocumentEncoder(module, segment_length, passes=passes)


def memoria_on_bert(bert: nn.Module, segment_length: int, seed: int) -> nn.Module:
    """Memoria's three memories on a pre-trained BERT (``memoria-minilm``, ``memoria-tiny``).

    The Memoria paper's Hyperpartisan setting scaled to the segment: N_wm = N_stm^rem =
    N_ltm^rem = L/8 and C_stm = L/4 (it used 64/64/64/128 with 512-token segments), lifespan 12
    as there.
    """
    from lifelong.encoders.memoria import EngramSettings, MemoriaBert

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        n = max(4, segment_length // 8)
        settings = EngramSettings(n, n, n, 2 * n, lifespan=12.0)
        return MemoriaBert(bert, bert.num_layers - 2, settings)


def rmt_on_bert(bert: nn.Module, segment_length: int, seed: int) -> nn.Module:
    """RMT's memory tokens added to a pre-trained BERT (``rmt-minilm``, ``rmt-tiny``)."""
    from lifelong.encoders.names import RMT_BERT_SLOTS
    from lifelong.encoders.rmt import RecurrentMemoryBert

    return RecurrentMemoryBert(bert, slots=RMT_BERT_SLOTS, seed=seed)
