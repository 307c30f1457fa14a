import pytest
import torch
import torch.nn.functional as F

from lifelong.batch import Batch
from lifelong.model import Classifier, task_loss
from tests.conftest import tiny_classifier, toy_stream


def grouped_batch():
    """Five rows of two examples: rows 0-2 are example 0, rows 3-4 example 1."""
    ids = torch.arange(15).view(5, 3)
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 0, 0], [1, 1, 0], [1, 0, 0]])
    return Batch(ids, mask, torch.tensor([0, 1, 0, 0, 1]), torch.tensor([0, 0, 0, 1, 1]))


def test_rows_and_examples_are_counted_apart():
    batch = grouped_batch()
    assert len(batch) == batch.num_rows == 5 and batch.num_examples == 2
    assert batch.example_rows(1).tolist() == [3, 4]
    plain = Batch(torch.zeros(3, 2, dtype=torch.long), torch.ones(3, 2), torch.tensor([0, 1, 2]))
    assert plain.num_examples == 3 and plain.row_groups.tolist() == [0, 1, 2]


def test_select_trims_and_examples_at_renumbers_groups():
    batch = grouped_batch()
    rows = batch.select([3, 4])
    assert rows.groups.tolist() == [1, 1] and rows.input_ids.shape == (2, 2)
    second = batch.examples_at([1])
    assert second.groups.tolist() == [0, 0] and second.labels.tolist() == [0, 1]
    both = batch.examples_at([1, 0])
    assert both.groups.tolist() == [0, 0, 1, 1, 1] and both.num_examples == 2


def test_examples_at_carries_the_records(task):
    batch = task(list(toy_stream().tasks[0].train[:4]))
    part = batch.examples_at([2, 0])
    assert part.num_examples == 2 and len(part.examples) == 2
    assert part.examples["label"][0].tolist() == batch.examples["label"][2].tolist()


def test_task_loss_is_cross_entropy_for_labels_and_the_mean_of_start_end_for_spans():
    logits = torch.randn(3, 4)
    labels = torch.tensor([0, 3, 1])
    assert torch.allclose(task_loss(logits, labels), F.cross_entropy(logits, labels))
    spans = torch.randn(2, 7, 2)
    positions = torch.tensor([[1, 2], [4, 6]])
    expected = (
        F.cross_entropy(spans[..., 0], positions[:, 0])
        + F.cross_entropy(spans[..., 1], positions[:, 1])
    ) / 2
    assert torch.allclose(task_loss(spans, positions), expected)
    assert task_loss(spans, positions, reduction="none").shape == (2,)


def test_classifier_trains_with_its_task_kinds_loss(task):
    model = tiny_classifier(kind=task)
    batch = task(list(toy_stream().tasks[0].train[:4]))
    logits = model(batch.input_ids, batch.attention_mask)
    assert torch.allclose(model.loss(batch), F.cross_entropy(logits, batch.labels))
    assert model.loss_units(batch) == 4
    assert isinstance(Classifier(model.encoder, model.head).kind.loss(logits, batch), torch.Tensor)


def test_batch_to_moves_every_tensor():
    batch = grouped_batch()
    moved = batch.to("cpu")
    assert moved.groups is not None and torch.equal(moved.labels, batch.labels)


def typed_batch():
    """`grouped_batch` with segment ids: 0 on the first real token, 1 after, 0 on padding."""
    batch = grouped_batch()
    batch.token_type_ids = batch.attention_mask * (torch.arange(3) > 0)  # (5, 3)
    return batch


def test_inputs_are_ids_and_mask_plus_the_token_types_when_present():
    plain, typed = grouped_batch(), typed_batch()
    assert len(plain.inputs()) == 2 and plain.inputs()[1] is plain.attention_mask
    ids, mask, types = typed.inputs()
    assert ids is typed.input_ids and mask is typed.attention_mask
    assert types is typed.token_type_ids


def test_token_types_survive_moving_and_row_selection():
    batch = typed_batch()
    assert torch.equal(batch.to("cpu").token_type_ids, batch.token_type_ids)
    rows = batch.select([3, 4])  # trimmed to 2 tokens
    assert torch.equal(rows.token_type_ids, batch.token_type_ids[3:, :2])
    assert batch.select([3, 4], trim=False).token_type_ids.shape == (2, 3)
    both = batch.examples_at([1, 0])
    assert torch.equal(both.token_type_ids, batch.token_type_ids[[3, 4, 0, 1, 2]])
    assert grouped_batch().examples_at([1]).token_type_ids is None


def test_classifier_passes_token_types_to_the_encoder(task):
    model = tiny_classifier().eval()
    batch = task(list(toy_stream().tasks[0].train[:4]))
    segment_one = batch.attention_mask.clone()  # every real token in segment 1
    with torch.no_grad():
        plain = model(batch.input_ids, batch.attention_mask)
        zeros = model(batch.input_ids, batch.attention_mask, torch.zeros_like(batch.input_ids))
        ones = model(batch.input_ids, batch.attention_mask, segment_one)
        staged = model(batch.input_ids, batch.attention_mask, segment_one, start=0)
    torch.testing.assert_close(zeros, plain)
    assert (ones - plain).abs().max() > 1e-4
    torch.testing.assert_close(staged, ones, atol=1e-5, rtol=0)


def test_token_types_for_an_encoder_without_segment_embeddings_are_an_error(tokenizer):
    from lifelong.encoders import load_run_encoder
    from lifelong.heads import ClassificationHead
    from lifelong.tasks import TaskSettings, build_task

    encoder = load_run_encoder("transformer", segment_length=16)
    qa = build_task(
        "qa", tokenizer, (), TaskSettings(max_length=48, max_query_length=16, doc_stride=16)
    )
    with pytest.raises(ValueError, match="token_types=False"):  # at build time
        Classifier(encoder, qa.head(encoder.hidden_size), kind=qa)
    model = Classifier(encoder, ClassificationHead(encoder.hidden_size, 2))
    ids, mask = torch.ones(2, 4, dtype=torch.long), torch.ones(2, 4, dtype=torch.long)
    assert model(ids, mask).shape == (2, 2)
    with pytest.raises(ValueError, match="segment embeddings"):
        model(ids, mask, torch.zeros_like(ids))


def test_classifier_needs_the_head_matching_the_batch(task):
    model = tiny_classifier(num_labels=2)
    batch = task(list(toy_stream().tasks[1].train[:2]))  # labels 2, 3 are outside a 2-way head
    with pytest.raises(IndexError):
        model.loss(batch)


class SecondTokenHead(torch.nn.Module):
    """A third-party head that reads a token past [CLS] and does not declare ``reads_tokens``."""

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(hidden_size, 3)

    def forward(self, encoded):
        return self.linear(encoded.hidden[:, 1])


def test_only_heads_that_declare_it_get_the_cls_only_last_layer():
    from lifelong.encoders import load_encoder
    from lifelong.heads import ClassificationHead, reads_pooled_only

    torch.manual_seed(0)
    encoder = load_encoder("tiny").eval()
    ids = torch.randint(1000, 2000, (3, 7))
    mask = torch.ones_like(ids)
    mask[1, 4:] = 0
    x = encoder.run_stages(ids, mask, 0, encoder.num_layers)  # the top layer's input
    for head in (SecondTokenHead(encoder.hidden_size), ClassificationHead(encoder.hidden_size, 3)):
        model = Classifier(encoder, head).eval()
        full = model(x, mask, start=encoder.num_layers)
        packed = model(x, mask, start=encoder.num_layers, packed=True)
        torch.testing.assert_close(packed, full, atol=1e-5, rtol=0)
    assert not reads_pooled_only(SecondTokenHead(4))  # undeclared: every token is kept
    assert reads_pooled_only(ClassificationHead(4, 3))


def test_a_memory_encoders_regulariser_is_part_of_the_training_loss():
    from lifelong.encoders.layers import ModuleConfig
    from lifelong.encoders.memory_modules import build_memory_module
    from lifelong.encoders.segments import DocumentEncoder, drain_auxiliary
    from lifelong.heads import ClassificationHead

    torch.manual_seed(0)
    config = ModuleConfig(vocab_size=30, d_model=16, heads=2, layers=1, ffn=32, max_positions=4)
    encoder = DocumentEncoder(build_memory_module("compressive", config, 4), 4)
    model = Classifier(encoder, ClassificationHead(16, 2))
    ids = torch.randint(1, 30, (2, 32))  # 8 segments of 4: the FIFO memory evicts, compresses
    batch = Batch(ids, torch.ones(2, 32, dtype=torch.long), torch.tensor([0, 1]))
    model(*batch.inputs())  # a forward whose regulariser nobody reads: not carried over
    loss = model.loss(batch)
    model(*batch.inputs())
    regulariser = drain_auxiliary(encoder)
    assert regulariser is not None and regulariser > 0
    plain = model.criterion(model(*batch.inputs()), batch)
    assert loss.item() == pytest.approx((plain + regulariser).item(), rel=1e-5)
    assert drain_auxiliary(encoder) is not None  # the last forward's, until drained
    assert drain_auxiliary(encoder) is None
