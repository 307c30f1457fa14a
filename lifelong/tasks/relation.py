"""Relation extraction (lifelong FewRel): one sentence, its candidate relations, the gold one.

The record of an example is the sentence's token ids, its candidate relation ids and the gold
relation: what Holla et al. (2020) keep in memory (``rel_replay.py`` stores ``(text, label,
candidates)`` and expands on read). Rows are the (sentence, candidate) pairs ``[CLS] sentence
[SEP] relation name [SEP]`` (the sentence cut first), labelled 1 for the gold relation and 0
otherwise, scored by a two-way head; the prediction is the candidate whose row has the highest
margin ``score[1] − score[0]``, and accuracy counts sentences. The loss is Holla et al.'s binary
cross-entropy per pair (``pair_loss="binary"``, mean over rows) or a softmax over each
sentence's candidates (``"softmax"``, mean over sentences), for stream and memory rows alike.

Holla et al. encode the pairs without segment ids (``models/base_models.py`` ``encode_text``:
``batch_encode_plus(..., return_token_type_ids=False)``, so every token reads segment 0), and so
do we by default; with
``TaskSettings.segment_ids`` a row carries BERT's pair segment ids instead (0 for ``[CLS]
sentence [SEP]``, 1 for ``relation name [SEP]``, as the tokenizer gives a pair).

Memory keys are read once per sentence: the key network's [CLS] vector of ``[CLS] sentence
[SEP]``, without any relation name (a choice of ours: Holla et al. retrieve no neighbours, and a
key should not depend on which candidates an example happens to list).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import torch
from torch import nn

from lifelong.batch import Batch
from lifelong.heads import ClassificationHead
from lifelong.memory.records import ExampleRecords
from lifelong.tasks.base import Settings, TaskSettings, Tokens, group_mean, pad_rows, pad_types

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase as Tokenizer

    from lifelong.streams.core import Example


class Relation:
    """The relation-extraction task kind (accuracy of the best-scoring candidate per sentence).

    Args:
        tokenizer: A BERT-style Hugging Face tokenizer.
        labels: Name of every relation (index = relation id).
        settings: ``max_length``, ``pair_loss``, ``segment_ids`` and ``token_types`` are read.

    Raises:
        ValueError: ``segment_ids`` for an encoder that reads no token types.

    """

    name: ClassVar[str] = "relation"
    metrics: ClassVar[tuple[str, ...]] = ("accuracy",)
    stored_fields: ClassVar[tuple[str, ...]] = ("sentence", "candidates", "label")

    def __init__(self, tokenizer: Tokenizer, labels: Sequence[str] = (), settings: Settings = None):
        settings = settings or TaskSettings()
        if settings.segment_ids and not settings.token_types:
            raise ValueError(
                "segment_ids: the encoder has no segment embeddings (token_types is off); "
                "relation rows can carry segment ids only for a BERT-style encoder"
            )
        self.token_types = settings.segment_ids  # Holla et al.: off
        self.tokenizer = tokenizer
        self.tokens = Tokens(tokenizer)
        self.pad_id = self.tokens.pad
        self.max_length = settings.max_length
        self.pair_loss = settings.pair_loss
        names = tokenizer(list(labels), add_special_tokens=False)["input_ids"]
        self.relation_tokens = [np.asarray(n, dtype=np.int64) for n in names]
        self.key_position: int | None = None  # the pooled [CLS] vector of the sentence

    def __call__(self, examples: Sequence[Example]) -> Batch:
        """Rows of ``examples``."""
        return self.rows(self.encode(examples))

    def encode(self, examples: Sequence[Example]) -> ExampleRecords:
        """Sentence token ids (no special tokens), candidate ids and the gold of each example.

        Raises:
            ValueError: An example without candidates (named by its uid).

        """
        for example in examples:
            if not example.candidates:
                raise ValueError(f"{example.uid or example.text[:40]!r}: no candidate relations")
        sentences = self.tokenizer([e.text for e in examples], add_special_tokens=False)
        return ExampleRecords.build(
            sentence=[ids[: self.max_length] for ids in sentences["input_ids"]],
            candidates=[e.candidates for e in examples],
            label=[[e.label] for e in examples],
        )

    def rows(self, records: ExampleRecords) -> Batch:
        """One row per (sentence, candidate) pair, labelled 1 for the gold relation."""
        rows, types, labels, groups = [], [], [], []
        for g, (sentence, candidates, gold) in enumerate(
            zip(records["sentence"], records["candidates"], records["label"])
        ):
            for relation in candidates.tolist():
                row, row_types = self.tokens.pair(
                    sentence, self.relation_tokens[relation], self.max_length
                )
                rows.append(row)
                types.append(row_types)
                labels.append(int(relation == int(gold[0])))
                groups.append(g)
        ids, mask = pad_rows(rows, self.pad_id)
        return Batch(
            ids,
            mask,
            torch.tensor(labels, dtype=torch.long),
            torch.tensor(groups, dtype=torch.long),
            examples=records,
            token_type_ids=pad_types(types) if self.token_types else None,  # (n, t)
        )

    def key_rows(self, records: ExampleRecords) -> Batch:
        """``[CLS] sentence [SEP]`` per example (keyed at [CLS])."""
        rows = [self.tokens.single(s, self.max_length) for s in records["sentence"]]
        ids, mask = pad_rows(rows, self.pad_id)
        return Batch(ids, mask, torch.zeros(len(rows), dtype=torch.long), examples=records)

    def head(self, hidden_size: int) -> ClassificationHead:
        """One logit per pair row (gold or not) over its pooled vector.

        Holla et al.'s relation models score a (sentence, relation) pair with one output
        (``LinearPLN(768, 1)``, ``TransformerClsModel(n_classes=1)``: ``models/rel_oml.py``,
        ``base_models.py``) trained with ``BCEWithLogitsLoss``. (A two-output head with softmax
        cross-entropy is the same loss of the margin but moves it twice as fast per SGD step,
        so its inner loops ran at twice the paper's rate.)
        """
        return ClassificationHead(hidden_size, 1)

    def loss(self, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        """Binary cross-entropy per row (mean over rows), or softmax over candidates."""
        if self.pair_loss == "softmax":
            return self.example_losses(logits, batch).mean()
        return binary_losses(logits, batch.labels).mean()

    def loss_units(self, batch: Batch) -> int:
        """Rows (binary loss) or sentences (softmax)."""
        return batch.num_examples if self.pair_loss == "softmax" else len(batch)

    def example_losses(self, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        """Each sentence's loss: its rows' mean binary loss, or −log p(gold candidate)."""
        groups, n = batch.row_groups, batch.num_examples
        if self.pair_loss == "softmax":
            return candidate_loss(logits, batch.labels, groups, n)
        return group_mean(binary_losses(logits, batch.labels), groups, n)

    def lengths(self, examples: Sequence[Example]) -> np.ndarray | None:
        """``None``: lengths are known only once tokenised (`TaskKind.lengths`)."""
        return None

    def score(
        self, scores: torch.Tensor, batch: Batch, examples: Sequence[Example]
    ) -> dict[str, float]:
        """Sentences whose best-scoring candidate row is the gold one."""
        margin = pair_scores(scores).cpu().numpy()  # (rows,) one copy
        gold = batch.labels.cpu().numpy() == 1  # (rows,)
        correct = 0
        for g in range(batch.num_examples):
            rows = batch.example_rows(g)
            correct += int(gold[rows[margin[rows].argmax()]])
        return {"accuracy": float(correct)}


def pair_scores(logits: torch.Tensor) -> torch.Tensor:
    """Each pair row's score, (rows,) in fp32, from the head's one logit per row (rows, 1)."""
    return logits[:, 0].float()


def binary_losses(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Binary cross-entropy with logits of each pair row (rows,): gold 1, negative 0."""
    return nn.functional.binary_cross_entropy_with_logits(
        pair_scores(logits), labels.float(), reduction="none"
    )


def candidate_loss(
    logits: torch.Tensor, labels: torch.Tensor, groups: torch.Tensor, n: int
) -> torch.Tensor:
    """−log softmax of the gold candidate within each sentence's rows, shape (n,).

    Args:
        logits: Pair scores (rows, 1).
        labels: 1 for the gold row of a sentence, 0 for the others (rows,).
        groups: The sentence of each row (rows,).
        n: Number of sentences.

    """
    # (rows,) in fp32 whatever the autocast dtype: a loss, as CUDA autocast computes exp/log
    # (and as it must: CUDA's exp returns fp32, which a bf16 buffer cannot index_add)
    scores = pair_scores(logits)
    top = scores.new_full((n,), -torch.inf).scatter_reduce(0, groups, scores, "amax")
    top = top.detach()  # a constant shift: keeps exp() finite, changes no gradient
    total = scores.new_zeros(n).index_add(0, groups, torch.exp(scores - top[groups]))
    log_z = top + torch.log(total)  # (n,) log Σ exp over each sentence's candidates
    gold = scores.new_zeros(n).index_add(0, groups, scores * (labels == 1).to(scores.dtype))
    return log_z - gold
