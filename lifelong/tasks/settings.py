"""Settings task kinds are built from, and the checks on them (light: no torch)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from lifelong.options import NOT_A_KEY, NonNegativeInt, PositiveInt


@dataclass(frozen=True)
class TaskSettings:
    """How examples become rows; each kind reads the settings it needs.

    Attributes:
        max_length: Tokens per row (QA: per window; paper 384 for QA, 128 for classification).
        doc_stride: QA: context tokens shared by consecutive windows (paper: 128).
        max_query_length: QA: question tokens kept (paper: 64).
        max_answer_length: QA: longest predicted answer, in tokens (paper: 30).
        pair_loss: Relation extraction: ``"binary"`` cross-entropy per (sentence, candidate)
            row (Holla et al., 2020, ``rel_*.py``) or ``"softmax"`` over each sentence's
            candidates.
        segment_ids: Relation extraction: give the (sentence, relation) rows BERT's segment
            ids (0 for ``[CLS] sentence [SEP]``, 1 for ``relation [SEP]``). Off by default, as
            Holla et al. (2020) encode the pairs (``models/base_models.py`` ``encode_text``:
            ``batch_encode_plus(..., return_token_type_ids=False)``, used by ``rel_*.py``). QA
            rows always carry them (BERT's SQuAD inputs); classification rows are single
            segments and never do.
        token_types: Whether the encoder reads segment ids at all (`reads_token_types`);
            ``False`` for encoders without segment embeddings (the memory-augmented ones):
            then no kind builds them, and ``segment_ids`` is refused.

    """

    max_length: PositiveInt = 128
    doc_stride: NonNegativeInt = field(default=128, metadata={"streams": ("qa",)})
    max_query_length: PositiveInt = field(default=64, metadata={"streams": ("qa",)})
    max_answer_length: PositiveInt = field(default=30, metadata={"streams": ("qa",)})
    pair_loss: Literal["binary", "softmax"] = field(
        default="binary", metadata={"streams": ("fewrel",)}
    )
    segment_ids: bool = field(default=False, metadata={"streams": ("fewrel",)})
    token_types: bool = field(default=True, metadata=NOT_A_KEY)


def check_windows(
    max_length: int, doc_stride: int, max_query_length: int, specials: int = 3
) -> None:
    """Raise `ValueError` unless a window holds the question, the specials and > stride context."""
    if max_length - max_query_length - specials <= doc_stride or doc_stride < 0:
        raise ValueError(
            f"max_length {max_length} leaves no room for a {max_query_length}-token question, "
            f"{specials} special tokens and more than doc_stride {doc_stride} context tokens"
        )


def check_settings(kind: str, settings: TaskSettings) -> None:
    """The settings that task kind ``kind`` reads, checked before anything loads.

    QA windows must hold the question and more than the stride of context (`check_windows`);
    segment ids are a relation-extraction setting (QA rows always carry them, classification
    rows are single segments).

    Raises:
        ValueError: Naming the key(s) and what is wrong.

    """
    if settings.segment_ids and kind != "relation":
        raise ValueError(
            "key 'segment_ids': applies to the fewrel stream only (relation rows); QA rows "
            "always carry segment ids, classification rows none"
        )
    if settings.pair_loss != "binary" and kind != "relation":
        raise ValueError(
            f"key 'pair_loss': {settings.pair_loss!r} applies to the fewrel stream only "
            "(relation rows scored against their candidates)"
        )
    if kind == "qa":
        try:
            check_windows(settings.max_length, settings.doc_stride, settings.max_query_length)
        except ValueError as err:
            raise ValueError(f"keys 'max_length'/'doc_stride': {err}") from None
