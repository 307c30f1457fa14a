"""Extractive question answering (SQuAD, TriviaQA, QuAC): context windows, spans, SQuAD F1/EM.

The record of an example is its question's token ids (the first ``max_query_length``), its
context's token ids with their character offsets, and the first gold answer's token span in the
context: one question, stored once however many windows its context needs. Rows are BERT's
SQuAD windows, ``[CLS] question [SEP] part of the context [SEP]`` of at most ``max_length``
tokens, consecutive windows sharing ``doc_stride`` context tokens (the Hugging Face ``stride``
convention of ``run_qa.py`` and of the fast tokenizers' overflow: windows start every
``max_context − doc_stride`` tokens until one reaches the end; the original BERT code instead
moves each window ``doc_stride`` tokens along). A window is labelled with the answer's (start,
end) tokens when it holds the whole answer, else (0, 0), the [CLS] token. Paper setup (de Masson
d'Autume et al., 2019, §4.1, after BERT's SQuAD recipe): 384 tokens per window, stride 128, 64
question tokens, answers of at most 30 tokens.

The prediction is the best valid span over all windows of a question (start + end logit,
``start <= end``, at most ``max_answer_length`` tokens), scored by SQuAD 1.1 exact match and F1
(the official evaluation script's normalisation, maximum over gold answers). Memory keys are read
once per question: the key network's vector at the first question token (position 1) of the
question's first window (MbPA++, §3: "the first token of the question").

Every window carries BERT's segment ids, as its SQuAD inputs do (Devlin et al., 2019, §4.2;
``run_squad.py`` ``segment_ids``; the tokenizer's ``token_type_ids`` for a question/context pair):
0 for ``[CLS] question [SEP]``, 1 for ``context [SEP]``, 0 on padding; unless the encoder has no
segment embeddings (``TaskSettings.token_types`` off), when rows carry none.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch

from lifelong.batch import Batch
from lifelong.heads import SpanHead
from lifelong.memory.records import ExampleRecords
from lifelong.model import PADDING_SCORE, task_loss
from lifelong.tasks.base import Settings, TaskSettings, Tokens, group_mean, pad_rows, pad_types
from lifelong.tasks.settings import check_windows

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase as Tokenizer

    from lifelong.streams.core import Example

PAPER_MAX_SEQ_LENGTH = 384
PAPER_DOC_STRIDE = 128
PAPER_MAX_QUERY_LENGTH = 64
PAPER_MAX_ANSWER_LENGTH = 30
NO_ANSWER = (-1, -1)  # the answer span of a question whose answer no token covers


class QA:
    """The extractive-QA task kind (main metric F1, also exact match).

    Args:
        tokenizer: A fast, right-padding, BERT-style Hugging Face tokenizer (offsets needed).
        labels: Unused (QA streams have no labels).
        settings: ``max_length``, ``doc_stride``, ``max_query_length``,
            ``max_answer_length`` and ``token_types`` are read.

    Raises:
        ValueError: The tokenizer is not fast or pads on the left, or a window could not hold
            ``max_query_length`` question tokens, the special tokens and more than
            ``doc_stride`` context tokens.

    """

    name: ClassVar[str] = "qa"
    metrics: ClassVar[tuple[str, ...]] = ("f1", "exact_match")
    stored_fields: ClassVar[tuple[str, ...]] = ("question", "context", "answer")

    def __init__(self, tokenizer: Tokenizer, labels: Sequence[str] = (), settings: Settings = None):
        settings = settings or TaskSettings(max_length=PAPER_MAX_SEQ_LENGTH)
        if not getattr(tokenizer, "is_fast", False):
            raise ValueError("QA needs a fast tokenizer (character offsets)")
        if tokenizer.padding_side != "right":
            raise ValueError("QA needs right padding (the null answer is token 0)")
        check_windows(settings.max_length, settings.doc_stride, settings.max_query_length)
        self.tokenizer = tokenizer
        self.tokens = Tokens(tokenizer)
        self.pad_id = self.tokens.pad
        self.max_length = settings.max_length
        self.doc_stride = settings.doc_stride
        self.max_query_length = settings.max_query_length
        self.max_answer_length = settings.max_answer_length
        self.key_position: int | None = 1  # the first question token
        self.token_types = settings.token_types  # segment ids on every window (BERT's SQuAD)

    def __call__(self, examples: Sequence[Example]) -> Batch:
        """Windows of ``examples``."""
        return self.rows(self.encode(examples))

    # -- examples -> records -> windows ------------------------------------------------------
    def encode(self, examples: Sequence[Example]) -> ExampleRecords:
        """Question ids, context ids and offsets, and the answer's context-token span.

        Raises:
            ValueError: No examples, or an example without a context (named by uid).

        """
        if not examples:
            raise ValueError("QA encode needs at least one example")
        for example in examples:
            if not example.text_pair:
                raise ValueError(f"{example.uid or example.text!r}: a QA example needs a context")
        questions = self.tokenizer([e.text for e in examples], add_special_tokens=False)
        contexts = self.tokenizer(
            [e.text_pair for e in examples], add_special_tokens=False, return_offsets_mapping=True
        )
        offsets = [np.asarray(o, dtype=np.int64).reshape(-1, 2) for o in contexts["offset_mapping"]]
        return ExampleRecords.build(
            question=[q[: self.max_query_length] for q in questions["input_ids"]],
            context=contexts["input_ids"],
            offsets=[o.reshape(-1) for o in offsets],
            answer=[answer_span(o, e.answers) for o, e in zip(offsets, examples)],
        )

    def windows(self, n_question: int, n_context: int) -> list[tuple[int, int]]:
        """The (start, stop) context-token ranges of one question's windows."""
        room = self.max_length - n_question - 3  # [CLS] question [SEP] ... [SEP]
        step = room - self.doc_stride
        out = []
        for start in range(0, max(n_context, 1), step):
            stop = min(start + room, n_context)
            out.append((start, stop))
            if stop == n_context:
                break
        return out

    def rows(self, records: ExampleRecords) -> Batch:
        """One row per window, labelled (start, end) where it holds the whole answer."""
        with_offsets = "offsets" in records.names
        rows, types, labels, groups, offsets = [], [], [], [], []
        for g in range(len(records)):
            question, context = records["question"][g], records["context"][g]
            s, e = records["answer"][g].tolist()
            head = len(question) + 2  # position of the first context token in a window
            for start, stop in self.windows(len(question), len(context)):
                row, row_types = self.tokens.pair(question, context[start:stop], self.max_length)
                rows.append(row)
                types.append(row_types)
                inside = s >= start and 0 <= e < stop
                labels.append((s - start + head, e - start + head) if inside else (0, 0))
                groups.append(g)
                if with_offsets:
                    window = np.full((len(rows[-1]), 2), -1, dtype=np.int64)
                    spans = records["offsets"][g].reshape(-1, 2)[start:stop]
                    window[head : head + len(spans)] = spans
                    offsets.append(window)
        ids, mask = pad_rows(rows, self.pad_id)
        token_offsets = None
        if with_offsets:
            token_offsets = torch.full((len(rows), ids.shape[1], 2), -1, dtype=torch.long)
            for w, window in enumerate(offsets):
                token_offsets[w, : len(window)] = torch.from_numpy(window)
        return Batch(
            ids,
            mask,
            torch.tensor(labels, dtype=torch.long).reshape(-1, 2),  # (n, 2)
            torch.tensor(groups, dtype=torch.long),
            examples=records,
            offsets=token_offsets,
            token_type_ids=pad_types(types) if self.token_types else None,  # (n, t)
        )

    def key_rows(self, records: ExampleRecords) -> Batch:
        """The first window of each question (keyed at its first question token)."""
        rows, types = [], []
        for question, context in zip(records["question"], records["context"]):
            start, stop = self.windows(len(question), len(context))[0]
            row, row_types = self.tokens.pair(question, context[start:stop], self.max_length)
            rows.append(row)
            types.append(row_types)
        ids, mask = pad_rows(rows, self.pad_id)
        return Batch(
            ids,
            mask,
            torch.zeros(len(rows), 2, dtype=torch.long),
            examples=records,
            token_type_ids=pad_types(types) if self.token_types else None,  # (n, t)
        )

    # -- model -------------------------------------------------------------------------------
    def head(self, hidden_size: int) -> SpanHead:
        """Start and end scores for every token."""
        return SpanHead(hidden_size)

    def loss(self, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        """Mean over windows of the mean start/end cross-entropy (BERT's SQuAD loss).

        The softmax runs over each window's real tokens: padding positions are masked out, so a
        window's loss does not depend on how far its batch happens to be padded.
        """
        return task_loss(span_scores(logits, batch), batch.labels)

    def loss_units(self, batch: Batch) -> int:
        """Windows."""
        return len(batch)

    def example_losses(self, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        """Each question's mean window loss, (num_examples,)."""
        losses = task_loss(span_scores(logits, batch), batch.labels, reduction="none")
        return group_mean(losses, batch.row_groups, batch.num_examples)

    def lengths(self, examples: Sequence[Example]) -> np.ndarray | None:
        """``None``: lengths are known only once tokenised (`TaskKind.lengths`)."""
        return None

    def score(
        self, scores: torch.Tensor, batch: Batch, examples: Sequence[Example]
    ) -> dict[str, float]:
        """Summed best-over-golds F1 and exact match of each question's decoded answer."""
        predictions = self.decode(scores, batch, examples)
        golds = [[text for text, _ in e.answers] for e in examples]
        f1 = sum(max(f1_score(p, g) for g in gold) for p, gold in zip(predictions, golds))
        em = sum(max(exact_match(p, g) for g in gold) for p, gold in zip(predictions, golds))
        return {"f1": f1, "exact_match": em}

    def decode(self, scores: torch.Tensor, batch: Batch, examples: Sequence[Example]) -> list[str]:
        """Each question's best valid answer over its windows, from logits (n, t, 2)."""
        if batch.offsets is None:
            raise ValueError("decoding answers needs the windows' offsets (rows from encode())")
        scores = scores.float()
        return best_spans(
            scores[..., 0],
            scores[..., 1],
            batch.offsets,
            batch.row_groups,
            [e.text_pair or "" for e in examples],
            self.max_answer_length,
        )


def span_scores(logits: torch.Tensor, batch: Batch) -> torch.Tensor:
    """Start/end scores (n, t, 2) with padding positions set to `PADDING_SCORE`."""
    padding = batch.attention_mask[..., None] == 0  # (n, t, 1)
    return logits.masked_fill(padding, PADDING_SCORE)


def answer_span(offsets: np.ndarray, answers: Sequence[tuple[str, int]]) -> tuple[int, int]:
    """Context-token span (start, end) of the first answer; `NO_ANSWER` if no token covers it.

    Args:
        offsets: Character span (start, end) of every context token, (n, 2).
        answers: Gold answers as (text, character offset in the context).

    """
    if not answers or not len(offsets):
        return NO_ANSWER
    text, char_start = answers[0]
    char_end = char_start + len(text)
    # Whitespace at the ends of an answer belongs to no token.
    char_start += len(text) - len(text.lstrip())
    char_end -= len(text) - len(text.rstrip())
    if char_end <= char_start or not offsets[0, 0] <= char_start < char_end <= offsets[-1, 1]:
        return NO_ANSWER
    start = int(np.flatnonzero(offsets[:, 1] > char_start)[0])
    end = int(np.flatnonzero(offsets[:, 0] < char_end)[-1])
    return start, end


def best_spans(
    start_logits: torch.Tensor | np.ndarray,
    end_logits: torch.Tensor | np.ndarray,
    offsets: torch.Tensor | np.ndarray,
    groups: torch.Tensor | np.ndarray,
    contexts: Sequence[str],
    max_answer_length: int = PAPER_MAX_ANSWER_LENGTH,
    n_best: int | None = 20,
) -> list[str]:
    """Decode every question's best answer over all its windows.

    A span is valid when it starts and ends on context tokens, ``start <= end`` and it has at
    most ``max_answer_length`` tokens; its score is ``start_logit + end_logit``. As in BERT, the
    search in each window considers the ``n_best`` context tokens with the highest start logits
    and those with the highest end logits (``None``: every context token, an exact search).

    Args:
        start_logits: Start scores (n windows, t tokens).
        end_logits: End scores (n windows, t tokens).
        offsets: Character span of every token in its context, (n, t, 2); (-1, -1) off the
            context.
        groups: The question of each window (n,).
        contexts: The context of every question.
        max_answer_length: Longest answer, in tokens.
        n_best: Start and end candidates per window.

    Returns:
        One answer per question: the context substring of its best span, ``""`` if none is valid.

    Raises:
        ValueError: The logits' shape is not the windows' shape.

    """
    starts, ends = _as_numpy(start_logits), _as_numpy(end_logits)
    offsets, groups = _host(offsets), _host(groups)  # device tensors: one copy each
    shape = offsets.shape[:2]
    if starts.shape != shape or ends.shape != shape:
        raise ValueError(f"logits of shape {starts.shape}/{ends.shape}, windows of shape {shape}")
    best: list[tuple[float, str]] = [(-np.inf, "")] * len(contexts)
    for w, i in enumerate(groups.tolist()):
        found = _best_in_window(starts[w], ends[w], offsets[w], max_answer_length, n_best)
        if found is not None and found[0] > best[i][0]:
            score, first, last = found
            best[i] = (score, contexts[i][offsets[w, first, 0] : offsets[w, last, 1]])
    return [text for _, text in best]


def _host(values: Any) -> np.ndarray:
    """A tensor (on any device) or array-like as a NumPy array, copied to the host if needed."""
    return np.asarray(values.cpu() if hasattr(values, "cpu") else values)


def _as_numpy(logits: Any) -> np.ndarray:
    if hasattr(logits, "detach"):
        logits = logits.detach().float().cpu().numpy()
    return np.asarray(logits, dtype=np.float64)


def _best_in_window(
    starts: np.ndarray,
    ends: np.ndarray,
    offsets: np.ndarray,
    max_answer_length: int,
    n_best: int | None,
) -> tuple[float, int, int] | None:
    """(score, start token, end token) of the best valid span of one window, if any."""
    context = np.flatnonzero(offsets[:, 0] >= 0)
    if len(context) == 0:
        return None
    k = len(context) if n_best is None else min(n_best, len(context))
    # Stable sorts: among equal logits, earlier tokens come first.
    first = context[np.argsort(-starts[context], kind="stable")[:k]]
    last = context[np.argsort(-ends[context], kind="stable")[:k]]
    scores = starts[first][:, None] + ends[last][None, :]
    length = last[None, :] - first[:, None] + 1
    scores = np.where((length >= 1) & (length <= max_answer_length), scores, -np.inf)
    a, b = np.unravel_index(int(np.argmax(scores)), scores.shape)
    if not np.isfinite(scores[a, b]):
        return None
    return float(scores[a, b]), int(first[a]), int(last[b])


# ---------------------------------------------------------------------------------------------
# The SQuAD 1.1 metric (the official evaluation script's definitions)
# ---------------------------------------------------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower-case, drop punctuation, drop the articles a/an/the, collapse whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: str) -> float:
    """1.0 if the normalised answers are equal, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_score(prediction: str, gold: str) -> float:
    """Token-level F1 of the normalised answers (bag of tokens); 0.0 without overlap."""
    predicted = normalize_answer(prediction).split()
    expected = normalize_answer(gold).split()
    same = sum((Counter(predicted) & Counter(expected)).values())
    if same == 0:
        return 0.0
    precision = same / len(predicted)
    recall = same / len(expected)
    return 2 * precision * recall / (precision + recall)


def squad_scores(predictions: Sequence[str], golds: Sequence[Sequence[str]]) -> dict[str, float]:
    """SQuAD 1.1 exact match and F1 in percent: best over each question's golds, mean over all.

    Args:
        predictions: One predicted answer per question.
        golds: The gold answer texts of every question.

    Returns:
        ``{"exact_match": ..., "f1": ...}``, each in [0, 100].

    Raises:
        ValueError: No questions, different lengths, or a question without gold answers.

    """
    if len(predictions) != len(golds):
        raise ValueError(f"{len(predictions)} predictions for {len(golds)} questions")
    if not predictions:
        raise ValueError("no questions to score")
    em = f1 = 0.0
    for i, (prediction, answers) in enumerate(zip(predictions, golds)):
        if not answers:
            raise ValueError(f"question {i} has no gold answers")
        em += max(exact_match(prediction, g) for g in answers)
        f1 += max(f1_score(prediction, g) for g in answers)
    return {"exact_match": 100.0 * em / len(golds), "f1": 100.0 * f1 / len(golds)}
