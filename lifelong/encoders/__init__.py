"""Encoders: the shared interface, Hugging Face models, and (later) memory-augmented modules."""

from lifelong.encoders.base import Encoder, EncoderOutput
from lifelong.encoders.hf import (
    MINILM,
    TINY,
    HFEncoder,
    load_encoder,
    load_tokenizer,
    minilm_path,
    tiny_bert_config,
)

__all__ = [
    "MINILM",
    "TINY",
    "Encoder",
    "EncoderOutput",
    "HFEncoder",
    "load_encoder",
    "load_tokenizer",
    "minilm_path",
    "tiny_bert_config",
]
