"""Encoders: the shared interface, Hugging Face models, and the memory-augmented modules.

The memory-augmented families (Transformer-XL, Compressive Transformer, Memformer, ∞-former,
Memoria, Memorizing Transformer) are `SegmentEncoder` subclasses in one module each; they are
built by name with `build_memory_module` and encode long inputs through `DocumentEncoder`.
Names load lazily: ``lifelong.encoders.base`` (the interface) imports no transformers.
"""

from __future__ import annotations

from lifelong._lazy import lazy_attributes

_API = {
    "Encoder": "lifelong.encoders.base",
    "EncoderOutput": "lifelong.encoders.base",
    "attention_implementation": "lifelong.encoders.base",
    "EncoderError": "lifelong.encoders.factory",
    "check_encoder_name": "lifelong.encoders.factory",
    "is_memory_encoder": "lifelong.encoders.factory",
    "load_run_encoder": "lifelong.encoders.factory",
    "tokenizer_name": "lifelong.encoders.factory",
    "MINILM": "lifelong.encoders.hf",
    "TINY": "lifelong.encoders.hf",
    "HFEncoder": "lifelong.encoders.hf",
    "load_encoder": "lifelong.encoders.hf",
    "load_tokenizer": "lifelong.encoders.hf",
    "minilm_path": "lifelong.encoders.hf",
    "tiny_bert_config": "lifelong.encoders.hf",
    "ModuleConfig": "lifelong.encoders.layers",
    "MEMORY_MODULES": "lifelong.encoders.memory_modules",
    "build_memory_module": "lifelong.encoders.memory_modules",
    "DocumentEncoder": "lifelong.encoders.segments",
    "SegmentEncoder": "lifelong.encoders.segments",
    "Transformer": "lifelong.encoders.segments",
}

__all__ = sorted(_API)


__getattr__ = lazy_attributes(__name__, _API)
