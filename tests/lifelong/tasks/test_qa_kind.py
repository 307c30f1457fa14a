"""The QA task kind: windows from stored token ids, span labels, decoding, the SQuAD metric."""

import pytest
import torch

from lifelong.learner import evaluate_metrics
from lifelong.strategy import StrategyHooks
from lifelong.streams import qa_stream
from lifelong.streams.core import Example
from lifelong.tasks import TaskSettings, build_task
from lifelong.tasks.extractive_qa import (
    best_spans,
    exact_match,
    f1_score,
    normalize_answer,
    squad_scores,
)

FILLER = "the river flows past the old mill and the fields . "
LONG_CONTEXT = FILLER * 4 + "The key was hidden by Morgan Blake near the gate . " + FILLER * 4
ANSWER = "Morgan Blake"


def qa(tokenizer, max_length=48, doc_stride=16, max_query_length=16):
    settings = TaskSettings(
        max_length=max_length, doc_stride=doc_stride, max_query_length=max_query_length
    )
    return build_task("qa", tokenizer, (), settings)


def examples():
    long = Example(
        "Who hid the key?", 0, LONG_CONTEXT, "x:1", ((ANSWER, LONG_CONTEXT.index(ANSWER)),)
    )
    short = Example("Where is it?", 0, "It is in Rome .", "x:2", (("Rome", 9),))
    return [long, short]


@pytest.fixture
def kind(tokenizer):
    return qa(tokenizer)


@pytest.fixture
def windows(kind):
    return kind(examples())


def context_positions(batch, w):
    return (batch.offsets[w, :, 0] >= 0).nonzero().flatten().tolist()


def window_span(batch, w):
    context = context_positions(batch, w)
    return int(batch.offsets[w, context[0], 0]), int(batch.offsets[w, context[-1], 1])


def test_one_record_per_question_and_one_row_per_window(windows):
    assert windows.num_examples == 2 and windows.examples.names[:2] == ("question", "context")
    n, t = windows.input_ids.shape
    assert t <= 48 and windows.attention_mask.shape == (n, t) and windows.labels.shape == (n, 2)
    assert windows.groups.tolist() == [0] * (n - 1) + [1]
    assert n - 1 >= 3  # the long context needs several windows


def test_answer_lands_in_the_windows_that_hold_it(windows):
    n, t = windows.input_ids.shape
    start, end = LONG_CONTEXT.index(ANSWER), LONG_CONTEXT.index(ANSWER) + len(ANSWER)
    holding = 0
    for w in range(n - 1):
        s, e = windows.labels[w].tolist()
        first, last = window_span(windows, w)
        if first <= start and end <= last:
            holding += 1
            assert 0 < s <= e
            assert LONG_CONTEXT[windows.offsets[w, s, 0] : windows.offsets[w, e, 1]] == ANSWER
        else:
            assert (s, e) == (0, 0)
    assert holding >= 1
    s, e = windows.labels[-1].tolist()
    assert "It is in Rome ."[windows.offsets[-1, s, 0] : windows.offsets[-1, e, 1]] == "Rome"
    assert windows.attention_mask[-1].sum() < t  # the short window is padded
    assert (windows.offsets[-1, windows.attention_mask[-1] == 0] == -1).all()


def tokenizer_windows(tokenizer, examples, max_length, doc_stride, max_query_length):
    """The windows the fast tokenizer's own overflow makes (Hugging Face ``run_qa.py``)."""
    questions = []
    for e in examples:  # the question cut after max_query_length tokens, as the kind stores it
        offsets = tokenizer(e.text, add_special_tokens=False, return_offsets_mapping=True)
        spans = offsets["offset_mapping"]
        cut = spans[max_query_length - 1][1] if len(spans) > max_query_length else len(e.text)
        questions.append(e.text[:cut])
    encoded = tokenizer(
        questions,
        [e.text_pair for e in examples],
        truncation="only_second",
        max_length=max_length,
        stride=doc_stride,
        return_overflowing_tokens=True,
        padding="longest",
        return_tensors="pt",
    )
    return encoded["input_ids"], encoded["token_type_ids"], encoded["overflow_to_sample_mapping"]


@pytest.mark.parametrize(
    ("max_length", "stride", "query"), [(48, 16, 16), (40, 8, 8), (128, 32, 64)]
)
def test_windows_equal_the_tokenizers_overflow_windows(tokenizer, max_length, stride, query):
    """Rows rebuilt from stored ids are exactly the tokenizer's ``stride`` windows.

    Their segment ids too: 0 for ``[CLS] question [SEP]``, 1 for ``context [SEP]``, 0 on padding.
    """
    sample = [e for task in qa_stream("i") for e in task.train[:15]] + examples()
    kind = qa(tokenizer, max_length, stride, query)
    ours = kind(sample)
    ids, types, groups = tokenizer_windows(tokenizer, sample, max_length, stride, query)
    width = ours.input_ids.shape[1]
    assert ours.groups.tolist() == groups.tolist()
    assert torch.equal(ours.input_ids, ids[:, :width])
    assert ours.token_type_ids is not None and ours.token_type_ids.shape == ours.input_ids.shape
    assert torch.equal(ours.token_type_ids, types[:, :width])
    assert (ours.token_type_ids == 1).any(dim=1).all()  # every window has context tokens


def test_question_is_truncated_to_max_query_length(kind, tokenizer):
    question = " ".join(["river"] * 30) + " ?"
    example = Example(question, 0, LONG_CONTEXT, "x", ((ANSWER, LONG_CONTEXT.index(ANSWER)),))
    ids = kind([example]).input_ids[0].tolist()
    assert ids[0] == tokenizer.cls_token_id
    assert ids.index(tokenizer.sep_token_id) == 1 + 16


def test_memory_stores_no_offsets_and_rows_still_train(kind, windows):
    stored = windows.examples.only(kind.stored_fields)
    rebuilt = kind.rows(stored)
    assert rebuilt.offsets is None
    assert torch.equal(rebuilt.input_ids, windows.input_ids)
    assert torch.equal(rebuilt.token_type_ids, windows.token_type_ids)
    assert torch.equal(rebuilt.labels, windows.labels)


def test_key_row_is_the_first_window_keyed_at_the_first_question_token(kind, windows):
    keys = kind.key_rows(windows.examples)
    assert len(keys) == 2 and kind.key_position == 1
    width = keys.input_ids.shape[1]
    assert torch.equal(keys.input_ids[0], windows.input_ids[0][:width])
    assert torch.equal(keys.token_type_ids[0], windows.token_type_ids[0][:width])


def test_no_segment_ids_for_an_encoder_without_segment_embeddings(tokenizer):
    settings = TaskSettings(max_length=48, doc_stride=16, max_query_length=16, token_types=False)
    kind = build_task("qa", tokenizer, (), settings)
    batch = kind(examples())
    assert not kind.token_types and batch.token_type_ids is None
    assert kind.key_rows(batch.examples).token_type_ids is None


def test_best_spans_searches_all_windows(windows):
    n, t = windows.input_ids.shape
    starts, ends = torch.zeros(n, t), torch.zeros(n, t)
    starts[:, 0] = ends[:, 0] = 100.0  # [CLS] is never an answer
    a, b, c = (context_positions(windows, w)[0] for w in (0, 1, -1))
    starts[0, a + 3], ends[0, a + 4] = 3.0, 3.0  # a weaker span in the first window
    starts[1, b + 10], ends[1, b + 12] = 5.0, 5.0  # the best span, in the second window
    starts[-1, c + 3] = ends[-1, c + 3] = 1.0
    contexts = [e.text_pair for e in examples()]
    answers = best_spans(starts, ends, windows.offsets, windows.groups, contexts)
    off = windows.offsets
    assert answers[0] == LONG_CONTEXT[off[1, b + 10, 0] : off[1, b + 12, 1]]
    assert answers[1] == "Rome"


def test_best_spans_respects_max_answer_length_and_may_find_nothing(windows):
    n, t = windows.input_ids.shape
    contexts = [e.text_pair for e in examples()]
    off, groups = windows.offsets, windows.groups
    starts, ends = torch.zeros(n, t), torch.zeros(n, t)
    p = context_positions(windows, 1)[0] + 10
    starts[1, p], ends[1, p + 5] = 10.0, 10.0
    long = best_spans(starts, ends, off, groups, contexts, max_answer_length=6, n_best=None)
    assert long[0] == LONG_CONTEXT[off[1, p, 0] : off[1, p + 5, 1]]
    short = best_spans(starts, ends, off, groups, contexts, max_answer_length=3, n_best=None)
    assert short[0] == LONG_CONTEXT[off[1, p, 0] : off[1, p, 1]]
    starts, ends = torch.zeros(n, t), torch.zeros(n, t)
    for w in range(n):  # with one candidate each, the best end lies before the best start
        context = context_positions(windows, w)
        starts[w, context[-1]], ends[w, context[0]] = 1.0, 1.0
    assert best_spans(starts, ends, off, groups, contexts, n_best=1) == ["", ""]
    with pytest.raises(ValueError, match="logits of shape"):
        best_spans(starts[:, :5], ends, off, groups, contexts)


def test_impossible_windows_are_rejected(tokenizer):
    with pytest.raises(ValueError, match="leaves no room"):
        qa(tokenizer, max_length=48, doc_stride=30, max_query_length=16)


def gold_scores(batch):
    """Scores that put the gold span of every window holding one on top (an oracle)."""
    scores = torch.full((len(batch), batch.input_ids.shape[1], 2), -10.0)
    rows = torch.arange(len(batch))
    scores[rows, batch.labels[:, 0], 0] = torch.where(batch.labels[:, 0] > 0, 10.0, -10.0)
    scores[rows, batch.labels[:, 1], 1] = torch.where(batch.labels[:, 1] > 0, 10.0, -10.0)
    return scores


class GoldQA(StrategyHooks):
    def predict(self, batch):
        return gold_scores(batch)


def test_gold_logits_decode_to_the_answers_and_score_100(kind, windows):
    assert kind.decode(gold_scores(windows), windows, examples()) == ["Morgan Blake", "Rome"]
    assert kind.score(gold_scores(windows), windows, examples()) == {"f1": 2.0, "exact_match": 2.0}
    metrics = evaluate_metrics(GoldQA(), examples(), kind, batch_size=1, progress=False)
    assert metrics == {"f1": 100.0, "exact_match": 100.0}


def test_losses_per_window_and_per_question(kind, windows):
    logits = torch.randn(len(windows), windows.input_ids.shape[1], 2)
    per_question = kind.example_losses(logits, windows)
    assert per_question.shape == (2,) and kind.loss_units(windows) == len(windows)
    assert torch.isfinite(kind.loss(logits, windows))


# ---------------------------------------------------------------------------------------------
# The SQuAD 1.1 metric
# ---------------------------------------------------------------------------------------------


def test_normalisation_and_exact_match_ignore_case_punctuation_and_articles():
    assert normalize_answer("The Eiffel Tower!") == "eiffel tower"
    assert normalize_answer("  an  Apple,  a day ") == "apple day"
    assert normalize_answer("theatre") == "theatre"  # only whole-word articles go
    assert exact_match("The Eiffel Tower!", "eiffel tower") == 1.0
    assert exact_match("Eiffel", "eiffel tower") == 0.0


def test_f1_by_hand():
    # "big red dog" vs "red dog barked": 2 shared of 3 and 3 -> P = R = 2/3.
    assert f1_score("the big red dog", "red dog barked") == pytest.approx(2 / 3)
    # [red, dog, dog] vs [dog, barked]: "dog" counts once -> P = 1/3, R = 1/2, F1 = 0.4.
    assert f1_score("red dog dog", "dog barked") == pytest.approx(0.4)
    assert f1_score("Paris", "the city of London") == 0.0
    assert f1_score("the", "a") == 0.0  # both normalise to nothing


def test_squad_scores_take_the_best_gold_and_average_in_percent():
    scores = squad_scores(
        ["Paris", "1990", "big blue whale"],
        [["paris"], ["in 1991", "1991"], ["the blue whale", "whale"]],
    )
    # EM: 1, 0, 0. F1: 1, 0, max(0.8 vs "blue whale", 0.5 vs "whale") = 0.8.
    assert scores["exact_match"] == pytest.approx(100 / 3)
    assert scores["f1"] == pytest.approx(100 * 1.8 / 3)
    with pytest.raises(ValueError, match="2 predictions for 1 questions"):
        squad_scores(["a", "b"], [["a"]])
    with pytest.raises(ValueError, match="question 0 has no gold answers"):
        squad_scores(["a"], [[]])
