import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lifelong.batch import Batch
from lifelong.learner import evaluate_metrics
from lifelong.strategy import StrategyHooks
from lifelong.streams import Example
from lifelong.tasks import TaskSettings, build_task
from lifelong.tasks.relation import candidate_loss
from tests.conftest import tiny_classifier

NAMES = ("place of birth", "employer", "spouse", "author")


def relation(tokenizer, max_length=32, pair_loss="binary", segment_ids=False):
    settings = TaskSettings(max_length=max_length, pair_loss=pair_loss, segment_ids=segment_ids)
    return build_task("relation", tokenizer, NAMES, settings)


def examples():
    return [
        Example("Ada was born in Paris .", 0, uid="t:1", candidates=(1, 0, 3)),
        Example("Bo works for Acme .", 1, uid="t:2", candidates=(2, 1)),
    ]


def test_one_record_per_sentence_and_one_row_per_candidate(tokenizer):
    kind = relation(tokenizer)
    batch = kind(examples())
    assert batch.num_examples == 2 and len(batch) == 5
    assert batch.labels.tolist() == [0, 1, 0, 0, 1]
    assert batch.groups.tolist() == [0, 0, 0, 1, 1]
    first = tokenizer.decode(batch.input_ids[1][batch.attention_mask[1].bool()])
    assert "born in paris" in first and "place of birth" in first
    assert batch.examples.names == ("sentence", "candidates", "label")
    assert batch.examples["candidates"][0].tolist() == [1, 0, 3]
    with pytest.raises(ValueError, match="t:9"):
        kind([Example("x", 0, uid="t:9")])


def test_rows_equal_the_tokenizers_own_pair_encoding(tokenizer):
    """Rows built from stored ids are exactly what tokenizer(sentence, relation) gives."""
    kind = relation(tokenizer, max_length=12)  # short: the sentence is cut first
    batch = kind(examples())
    for row, (text, name) in enumerate(
        [(e.text, NAMES[c]) for e in examples() for c in e.candidates]
    ):
        expected = tokenizer(text, name, truncation="only_first", max_length=12)["input_ids"]
        got = batch.input_ids[row][batch.attention_mask[row].bool()].tolist()
        assert got == expected


def test_rows_carry_no_segment_ids_by_default_as_in_holla_et_al(tokenizer):
    """Holla et al. encode the pairs with ``return_token_type_ids=False``: all segment 0."""
    kind = relation(tokenizer)
    assert not kind.token_types and kind(examples()).token_type_ids is None


def test_segment_ids_are_the_tokenizers_pair_token_types(tokenizer):
    kind = relation(tokenizer, max_length=12, segment_ids=True)  # the sentence is cut first
    batch = kind(examples())
    assert kind.token_types and batch.token_type_ids.shape == batch.input_ids.shape
    pairs = [(e.text, NAMES[c]) for e in examples() for c in e.candidates]
    for row, (text, name) in enumerate(pairs):
        expected = tokenizer(text, name, truncation="only_first", max_length=12)
        real = batch.attention_mask[row].bool()
        assert batch.input_ids[row][real].tolist() == expected["input_ids"]
        assert batch.token_type_ids[row][real].tolist() == expected["token_type_ids"]
        assert 1 in expected["token_type_ids"]
    assert (batch.token_type_ids[~batch.attention_mask.bool()] == 0).all()  # padding: 0
    rebuilt = kind.rows(batch.examples.only(kind.stored_fields))  # memory rows alike
    assert torch.equal(rebuilt.token_type_ids, batch.token_type_ids)
    assert kind.key_rows(batch.examples).token_type_ids is None  # one segment: the sentence


def test_segment_ids_need_an_encoder_that_reads_them(tokenizer):
    settings = TaskSettings(segment_ids=True, token_types=False)
    with pytest.raises(ValueError, match="segment_ids"):
        build_task("relation", tokenizer, NAMES, settings)


def test_key_rows_hold_the_sentence_alone(tokenizer):
    kind = relation(tokenizer)
    keys = kind.key_rows(kind.encode(examples()))
    assert len(keys) == 2 and kind.key_position is None
    text = tokenizer.decode(keys.input_ids[1][keys.attention_mask[1].bool()])
    assert "acme" in text and "employer" not in text


def test_candidate_loss_is_a_softmax_over_each_sentences_rows():
    logits = torch.tensor([[1.0], [2.0], [0.0], [-1.0], [1.0]])  # one score per pair row
    labels = torch.tensor([1, 0, 0, 0, 1])
    groups = torch.tensor([0, 0, 0, 1, 1])
    first = -torch.log_softmax(torch.tensor([1.0, 2.0, 0.0]), 0)[0]
    second = -torch.log_softmax(torch.tensor([-1.0, 1.0]), 0)[1]
    torch.testing.assert_close(
        candidate_loss(logits, labels, groups, 2), torch.stack([first, second])
    )


def test_binary_and_softmax_losses_for_stream_and_memory_rows_alike(tokenizer):
    binary, softmax = relation(tokenizer), relation(tokenizer, pair_loss="softmax")
    batch = binary(examples())
    logits = torch.randn(len(batch), 1)
    bce = F.binary_cross_entropy_with_logits(logits[:, 0], batch.labels.float(), reduction="none")
    assert torch.allclose(binary.loss(logits, batch), bce.mean())  # Holla's BCEWithLogitsLoss
    assert binary.loss_units(batch) == 5 and softmax.loss_units(batch) == 2
    rebuilt = softmax.rows(batch.examples)  # as a memory read expands it: still grouped
    expected = candidate_loss(logits, batch.labels, batch.groups, 2).mean()
    assert torch.allclose(softmax.loss(logits, rebuilt), expected)
    per_sentence = binary.example_losses(logits, batch)
    torch.testing.assert_close(per_sentence, torch.stack([bce[:3].mean(), bce[3:].mean()]))


def test_a_pair_row_has_one_logit_as_in_holla_et_al(tokenizer):
    """Holla's relation models: LinearPLN(768, 1) / TransformerClsModel(n_classes=1), BCE.

    A two-output head with softmax cross-entropy moved the margin twice as fast per SGD step,
    so its inner loops ran at twice the paper's rate."""
    head = relation(tokenizer).head(32)
    assert head.linear.out_features == 1


def test_score_picks_each_sentences_best_row(tokenizer):
    labels = torch.tensor([0, 1, 0, 0, 1])
    groups = torch.tensor([0, 0, 0, 1, 1])
    batch = Batch(torch.zeros(5, 3, dtype=torch.long), torch.ones(5, 3), labels, groups)
    # margins: sentence 0 -> rows (0.0, 2.0, 1.0): gold row 1 wins; sentence 1 -> (3.0, -1.0)
    scores = torch.tensor([[0.0, 0.0], [0.0, 2.0], [0.0, 1.0], [0.0, 3.0], [1.0, 0.0]])
    assert relation(tokenizer).score(scores, batch, examples()) == {"accuracy": 1.0}


class Gold(StrategyHooks):
    def predict(self, batch):
        return batch.labels.float()[:, None]  # (rows, 1): the gold row scores highest


def test_evaluation_counts_sentences_not_pairs(tokenizer):
    kind = relation(tokenizer)
    metrics = evaluate_metrics(Gold(), examples(), kind, batch_size=1, progress=False)
    assert metrics == {"accuracy": 100.0}


def test_the_model_trains_on_pairs(tokenizer):
    kind = relation(tokenizer)
    model = tiny_classifier(kind=kind)
    batch = kind(examples())
    loss = model.loss(batch)
    loss.backward()
    assert np.isfinite(float(loss.detach())) and model.head.linear.weight.grad is not None


class Uninformed(StrategyHooks):
    """A scorer that knows nothing: constant scores (every candidate ties) or random ones."""

    def __init__(self, constant):
        self.constant = constant
        self.rng = torch.Generator().manual_seed(0)

    def predict(self, batch):
        if self.constant:
            return torch.zeros(len(batch), 1)
        return torch.randn(len(batch), 1, generator=self.rng)


@pytest.mark.parametrize("constant", [True, False], ids=["ties", "random"])
def test_an_uninformed_scorer_scores_near_chance_on_the_sample(constant, tokenizer):
    # chance is 1 / 11 on test lines of 11 candidates: no position or tie-break gives the gold away
    from lifelong.streams.fewrel import fewrel_stream, hashed_bag_of_words

    streams = [fewrel_stream(embed=hashed_bag_of_words, seed=seed) for seed in range(8)]
    test = [ex for stream in streams for task in stream for ex in task.test]  # shuffles differ
    assert all(len(ex.candidates) == 11 for ex in test) and len(test) >= 900
    kind = build_task("relation", tokenizer, streams[0].label_names, TaskSettings(max_length=16))
    accuracy = evaluate_metrics(Uninformed(constant), test, kind, progress=False)["accuracy"]
    sd = 100 * np.sqrt((1 / 11) * (10 / 11) / len(test))
    assert abs(accuracy - 100 / 11) < 3 * sd
