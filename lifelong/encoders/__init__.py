"""Encoders: the shared interface, Hugging Face models, and the memory-augmented modules.

The memory-augmented families (Transformer-XL, Compressive Transformer, Memformer, ∞-former,
Memoria, Memorizing Transformer) are `SegmentEncoder` subclasses in one module each; they are
built by name with `build_memory_module` and encode long inputs through `DocumentEncoder`.
"""

from lifelong.encoders.base import Encoder, EncoderOutput
from lifelong.encoders.factory import is_memory_encoder, load_run_encoder, tokenizer_name
from lifelong.encoders.hf import (
    MINILM,
    TINY,
    HFEncoder,
    load_encoder,
    load_tokenizer,
    minilm_path,
    tiny_bert_config,
)
from lifelong.encoders.layers import ModuleConfig
from lifelong.encoders.memory_modules import MEMORY_MODULES, build_memory_module
from lifelong.encoders.segments import DocumentEncoder, SegmentEncoder, Transformer

__all__ = [
    "MEMORY_MODULES",
    "MINILM",
    "TINY",
    "DocumentEncoder",
    "Encoder",
    "EncoderOutput",
    "HFEncoder",
    "ModuleConfig",
    "SegmentEncoder",
    "Transformer",
    "build_memory_module",
    "is_memory_encoder",
    "load_encoder",
    "load_run_encoder",
    "load_tokenizer",
    "minilm_path",
    "tiny_bert_config",
    "tokenizer_name",
]
