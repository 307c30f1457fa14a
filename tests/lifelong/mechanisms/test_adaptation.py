import numpy as np
import pytest
import torch
from torch import nn

from lifelong.mechanisms.adaptation import AdaptationOptions, LocalAdapter
from lifelong.mechanisms.inner_loop import local_adapt
from lifelong.mechanisms.replay import episodic_writer
from lifelong.mechanisms.scopes import All, Head, Top, parse_scope
from lifelong.strategy import StrategyContext
from tests.conftest import classification, tiny_classifier, toy_stream


def memory_of(tokenizer, stored, tests):
    """The tiny model, an episodic memory of ``stored`` (lists of examples) and ``tests``."""
    torch.manual_seed(0)
    kind = classification(tokenizer)
    model = tiny_classifier(kind=kind)
    writer = episodic_writer(StrategyContext(model, kind))
    for examples in stored:
        writer.write(kind(list(examples)))
    return model, writer, kind(list(tests))


@pytest.fixture(scope="module")
def setup(tokenizer):
    stream = toy_stream(n_train=24)
    tests = [stream.tasks[0].test[0], stream.tasks[1].test[0], stream.tasks[0].test[5]]
    return memory_of(tokenizer, [t.train for t in stream], tests + [stream.tasks[1].test[6]])


def adapter(setup, **options):
    model, writer, _ = setup
    defaults = dict(k=6, steps=4, adapt_lr=0.05)
    return LocalAdapter(model, writer, AdaptationOptions(**{**defaults, **options}))


@pytest.mark.parametrize("scope", ["all", "top1", "head"])
def test_fast_path_gives_the_reference_predictions(setup, scope):
    _, _, test = setup
    reference = adapter(setup, adapt_scope=scope, adapt_path="reference").logits(test)
    fast = adapter(setup, adapt_scope=scope, adapt_path="fast").logits(test)
    torch.testing.assert_close(fast, reference, atol=1e-4, rtol=0)


@pytest.mark.parametrize("scope", ["all", "top1"])
def test_fast_path_batched_with_vmap_matches_too(setup, scope):
    _, _, test = setup
    reference = adapter(setup, adapt_scope=scope, adapt_path="reference").logits(test)
    vmapped = adapter(setup, adapt_scope=scope, fast_chunk=2).logits(test)
    torch.testing.assert_close(vmapped, reference, atol=1e-4, rtol=0)


def test_the_fast_path_on_cuda_adapts_all_weights_along_the_reference_path(setup):
    # on an H100 the packed one-example steps of `fast` + `all` ran at 0.64x the reference's
    # padded batch (docs/guide/devices.md); the other scopes keep their cached fast path
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    paths = {
        (scope, device.type): adapter(setup, adapt_scope=scope).path(device).__name__
        for scope in ("all", "top1", "head", "lora")
        for device in (cuda, cpu)
    }
    assert paths == {
        ("all", "cuda"): "reference_logits",
        ("all", "cpu"): "fast_logits",
        ("top1", "cuda"): "fast_logits",
        ("top1", "cpu"): "fast_logits",
        ("head", "cuda"): "fast_logits",
        ("head", "cpu"): "fast_logits",
        ("lora", "cuda"): "lora_logits",
        ("lora", "cpu"): "lora_logits",
    }
    assert adapter(setup, adapt_path="reference").path(cpu).__name__ == "reference_logits"
    # a fast_chunk the user chose keeps the (vmapped) fast path
    assert adapter(setup, adapt_scope="all", fast_chunk=4).path(cuda).__name__ == "fast_logits"


def test_adaptation_changes_predictions_and_never_the_base_weights(setup):
    model, _, test = setup
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    with torch.no_grad():
        plain = model(test.input_ids, test.attention_mask)
    for path in ("reference", "fast"):
        adapted = adapter(setup, adapt_path=path).logits(test)
        assert (adapted - plain).abs().max() > 1e-3
    for name, p in model.named_parameters():
        assert torch.equal(p, before[name]), name


def linear_problem():
    """A linear head, its detached parameters, and the cross-entropy on 16 random points."""
    torch.manual_seed(0)
    head = nn.Linear(8, 3)
    x, y = torch.randn(16, 8), torch.randint(0, 3, (16,))
    params = {k: v.detach() for k, v in head.named_parameters()}

    def loss(p):
        return nn.functional.cross_entropy(torch.func.functional_call(head, p, (x,)), y)

    return head, params, loss


def test_local_adapt_lowers_the_neighbour_loss():
    head, params, loss = linear_problem()
    adapted = local_adapt(loss, params, steps=20, lr=0.5, l2=1e-3)
    assert loss(adapted) < loss(params) - 0.1
    assert all(torch.equal(params[k], v.detach()) for k, v in head.named_parameters())


def test_l2_pull_keeps_adapted_weights_closer_as_lambda_grows():
    _, params, loss = linear_problem()

    def distance(lam):
        adapted = local_adapt(loss, params, steps=30, lr=0.1, l2=lam)
        return sum(((adapted[k] - params[k]) ** 2).sum() for k in params).item()

    distances = [distance(lam) for lam in (0.0, 1e-2, 1e-1, 1.0, 4.0)]
    assert all(a > b for a, b in zip(distances, distances[1:])), distances


def test_second_order_gradient_flows_through_the_inner_loop():
    torch.manual_seed(0)
    w = torch.randn(3, 8, requires_grad=True)
    x, y = torch.randn(4, 8), torch.randint(0, 3, (4,))

    def loss(p):
        return nn.functional.cross_entropy(x @ p["w"].T, y)

    adapted = local_adapt(loss, {"w": w}, steps=1, lr=0.5, l2=0.0)
    outer = nn.functional.cross_entropy(torch.randn(4, 8) @ adapted["w"].T, y)
    (g,) = torch.autograd.grad(outer, w)
    assert torch.isfinite(g).all() and g.abs().sum() > 0


def test_scopes_select_the_right_parameters(setup):
    model, _, _ = setup
    encoder = model.encoder
    head = parse_scope("head", encoder)
    assert isinstance(head, Head) and head.stage == 3 and head.name == "head"
    assert set(head.params(model)) == {"head.linear.weight", "head.linear.bias"}
    top = parse_scope("top1", encoder)
    assert isinstance(top, Top) and top.n == 1 and top.stage == 2 and top.name == "top1"
    top1 = set(top.params(model))
    assert any(".layer.1." in n for n in top1) and not any(".layer.0." in n for n in top1)
    every = parse_scope("all", encoder)
    assert isinstance(every, All) and every.stage == 0
    assert len(every.params(model)) == len(list(model.parameters()))
    with pytest.raises(ValueError, match="top<N>"):
        parse_scope("top3", encoder)


def test_random_retrieval_draws_distinct_slots(setup):
    _, _, test = setup
    slots = adapter(setup, retrieval="random", k=5).neighbours(test)
    assert slots.shape == (len(test), 5)
    assert all(len(set(row)) == 5 for row in slots.tolist())


def test_nearest_retrieval_finds_the_example_itself(setup):
    _, writer, _ = setup
    stored = writer.batch(np.arange(4))
    slots = adapter(setup, k=1).neighbours(stored)
    assert slots[:, 0].tolist() == [0, 1, 2, 3]


def test_empty_memory_predicts_without_adaptation(task):
    model = tiny_classifier()
    writer = episodic_writer(StrategyContext(model, task))
    test = task(list(toy_stream().tasks[0].test))
    a = LocalAdapter(model, writer, AdaptationOptions())
    with torch.no_grad():
        torch.testing.assert_close(a.logits(test), model(test.input_ids, test.attention_mask))
    assert a.adapted == 0


def multi_row_setup(tokenizer, kind_name):
    """A memory of FewRel sentences or QA questions, and test examples of several rows each.

    QA rows carry segment ids, FewRel's only as ``relation+segments``.
    """
    from lifelong.streams import fewrel_stream, hashed_bag_of_words, qa_stream
    from lifelong.tasks import TaskSettings, build_task

    if kind_name.startswith("relation"):
        stream = fewrel_stream(embed=hashed_bag_of_words, n_tasks=2, train_size=6, test_size=2)
        settings = TaskSettings(max_length=40, segment_ids=kind_name == "relation+segments")
        kind_name = "relation"
    else:
        stream = qa_stream(tasks=["squad"], train_size=10, test_size=3)
        settings = TaskSettings(max_length=48, doc_stride=16, max_query_length=16)
    kind = build_task(kind_name, tokenizer, stream.label_names, settings)
    torch.manual_seed(0)
    model = tiny_classifier(kind=kind)
    writer = episodic_writer(StrategyContext(model, kind))
    for task in stream:
        writer.write(kind(list(task.train)))
    test = kind(list(stream.tasks[0].test[:3]))
    assert len(test) > test.num_examples  # several rows per test example
    return model, writer, test


@pytest.mark.parametrize("kind_name", ["relation", "relation+segments", "qa"])
@pytest.mark.parametrize("scope", ["all", "top1", "head"])
def test_fast_path_gives_the_reference_scores_on_multi_row_examples(tokenizer, kind_name, scope):
    model, writer, test = multi_row_setup(tokenizer, kind_name)
    assert (test.token_type_ids is not None) == (kind_name != "relation")
    options = {"k": 3, "steps": 3, "adapt_lr": 0.05, "adapt_scope": scope}
    reference = LocalAdapter(model, writer, AdaptationOptions(**options, adapt_path="reference"))
    fast = LocalAdapter(model, writer, AdaptationOptions(**options))
    ref, got = reference.logits(test), fast.logits(test)
    assert ref.shape == got.shape and ref.shape[0] == len(test)
    real = test.attention_mask.bool()  # QA: padding positions' scores are not compared
    if ref.dim() == 3:
        ref, got = ref[real], got[real]
    torch.testing.assert_close(got, ref, atol=1e-4, rtol=0)
    assert reference.adapted == fast.adapted == test.num_examples


class SegmentedClassification:
    """The classification kind with made-up segment ids (1 from the third token on).

    Gives one-row examples that carry token types, so the vmapped fast path caches and stacks
    them (no shipped kind has one-row examples with segment ids).
    """

    def __init__(self, kind):
        self.kind = kind
        self.token_types = True

    def __getattr__(self, name):
        return getattr(self.kind, name)

    def __call__(self, examples):
        return self.rows(self.kind.encode(examples))

    def rows(self, records):
        batch = self.kind.rows(records)
        batch.token_type_ids = batch.attention_mask * (torch.arange(batch.input_ids.shape[1]) > 1)
        return batch

    def key_rows(self, records):
        return self.rows(records)


@pytest.mark.parametrize("scope", ["all", "top1"])
def test_vmapped_fast_path_carries_one_row_examples_token_types(tokenizer, scope):
    torch.manual_seed(0)
    kind = SegmentedClassification(classification(tokenizer))
    model = tiny_classifier(kind=kind)
    writer = episodic_writer(StrategyContext(model, kind))
    stream = toy_stream(n_train=12)
    for task in stream:
        writer.write(kind(list(task.train)))
    test = kind([stream.tasks[0].test[0], stream.tasks[1].test[0], stream.tasks[0].test[3]])
    options = {"k": 4, "steps": 3, "adapt_lr": 0.05, "adapt_scope": scope}
    reference = LocalAdapter(model, writer, AdaptationOptions(**options, adapt_path="reference"))
    vmapped = LocalAdapter(model, writer, AdaptationOptions(**options, fast_chunk=2))
    expected = reference.logits(test)
    torch.testing.assert_close(vmapped.logits(test), expected, atol=1e-4, rtol=0)
    untyped = LocalAdapter(model, writer, AdaptationOptions(**options, adapt_path="reference"))
    test.token_type_ids = None
    assert (untyped.logits(test) - expected).abs().max() > 1e-4  # the types made a difference


def plain_sgd_before_momentum(loss, params, *, steps, lr, l2):
    """`local_adapt` as it was before momentum: W~ ← W~ − lr (∇loss + 2λ(W~ − W))."""
    anchor = {k: v.detach() for k, v in params.items()}
    for _ in range(steps):
        grads = torch.func.grad(loss)(params)
        params = {k: v - lr * (grads[k] + 2 * l2 * (v - anchor[k])) for k, v in params.items()}
    return params


def test_local_adapt_without_momentum_is_exactly_plain_sgd():
    _, params, loss = linear_problem()
    expected = plain_sgd_before_momentum(loss, params, steps=7, lr=0.3, l2=0.05)
    for adapted in (
        local_adapt(loss, params, steps=7, lr=0.3, l2=0.05, momentum=0.0),
        local_adapt(loss, params, steps=7, lr=0.3, l2=0.05),  # the function's default: μ = 0
    ):
        assert all(torch.equal(adapted[k], expected[k]) for k in params)


def test_a_loss_scale_changes_nothing_in_fp32_but_the_rounding():
    """fp16's static inner loss scale multiplies the loss and divides the gradient back."""
    from lifelong.mechanisms.inner_loop import summed_gradient

    _, params, loss = linear_problem()
    plain = local_adapt(loss, params, steps=5, lr=0.3, l2=0.05, momentum=0.9)
    scaled = local_adapt(loss, params, steps=5, lr=0.3, l2=0.05, momentum=0.9, loss_scale=1024.0)
    summed = local_adapt(
        loss, params, steps=5, lr=0.3, l2=0.05, momentum=0.9,
        gradient=summed_gradient([loss, loss], [0.5, 0.5], loss_scale=1024.0),
    )  # fmt: skip
    for k in params:
        torch.testing.assert_close(scaled[k], plain[k])
        torch.testing.assert_close(summed[k], plain[k])


def sgd_by_hand(head, x, y, *, steps, lr, l2, momentum):
    """EM-in-LLL test.py's loop: torch.optim.SGD on CE + λ Σ (W − W~)² (a copy of ``head``)."""
    model = nn.Linear(head.in_features, head.out_features)
    model.load_state_dict(head.state_dict())
    origin = {k: v.detach().clone() for k, v in model.named_parameters()}
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    for _ in range(steps):
        optimizer.zero_grad()
        pull = sum(((origin[k] - p) ** 2).sum() for k, p in model.named_parameters())
        (nn.functional.cross_entropy(model(x), y) + l2 * pull).backward()
        optimizer.step()
    return {k: v.detach() for k, v in model.named_parameters()}


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_local_adapt_with_momentum_equals_torch_sgd(momentum):
    torch.manual_seed(0)
    head = nn.Linear(8, 3)
    x, y = torch.randn(16, 8), torch.randint(0, 3, (16,))
    params = {k: v.detach() for k, v in head.named_parameters()}

    def loss(p):
        return nn.functional.cross_entropy(torch.func.functional_call(head, p, (x,)), y)

    expected = sgd_by_hand(head, x, y, steps=10, lr=0.2, l2=0.05, momentum=momentum)
    adapted = local_adapt(loss, params, steps=10, lr=0.2, l2=0.05, momentum=momentum)
    for k in params:
        torch.testing.assert_close(adapted[k], expected[k], atol=1e-6, rtol=0)
    if momentum:  # and momentum makes a difference over these steps
        plain = local_adapt(loss, params, steps=10, lr=0.2, l2=0.05)
        assert max((plain[k] - adapted[k]).abs().max() for k in params) > 1e-3


def test_momentum_adaptation_is_pure_and_stays_differentiable_to_second_order():
    torch.manual_seed(0)
    x, y = torch.randn(4, 5, dtype=torch.float64), torch.randint(0, 3, (4,))
    query = torch.randn(4, 5, dtype=torch.float64)
    anchor = {"w": torch.randn(3, 5, dtype=torch.float64)}  # fixed: the pull is a constant's

    def loss(p):
        return nn.functional.cross_entropy(x @ p["w"].T, y)

    def outer(w, first_order=False):
        steps = {"steps": 3, "lr": 0.3, "l2": 0.1, "momentum": 0.9}
        adapted = local_adapt(loss, {"w": w}, **steps, anchor=anchor, first_order=first_order)
        return nn.functional.cross_entropy(query @ adapted["w"].T, y)

    w = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    before = w.detach().clone()
    # the meta-gradient through three momentum steps matches finite differences
    assert torch.autograd.gradcheck(outer, (w,))
    assert torch.equal(w.detach(), before)
    (second,) = torch.autograd.grad(outer(w), w)
    (first,) = torch.autograd.grad(outer(w, first_order=True), w)
    assert (second - first).norm() > 1e-6 * first.norm()


def test_vmapped_momentum_adaptation_equals_one_example_at_a_time():
    torch.manual_seed(0)
    head = nn.Linear(6, 3)
    params = {k: v.detach() for k, v in head.named_parameters()}
    xs, ys = torch.randn(5, 8, 6), torch.randint(0, 3, (5, 8))

    def adapt(x, y):
        def loss(p):
            return nn.functional.cross_entropy(torch.func.functional_call(head, p, (x,)), y)

        return local_adapt(loss, params, steps=4, lr=0.2, l2=1e-3, momentum=0.9)

    batched = torch.func.vmap(adapt)(xs, ys)
    for i in range(5):
        one = adapt(xs[i], ys[i])
        for k in params:
            torch.testing.assert_close(batched[k][i], one[k], atol=1e-6, rtol=0)


@pytest.mark.parametrize("scope", ["all", "head"])
def test_fast_and_vmap_paths_match_the_reference_with_momentum(setup, scope):
    _, _, test = setup
    options = {"adapt_scope": scope, "momentum": 0.9, "adapt_lr": 0.02}
    reference = adapter(setup, adapt_path="reference", **options).logits(test)
    without = adapter(setup, adapt_path="reference", **{**options, "momentum": 0.0}).logits(test)
    assert (reference - without).abs().max() > 1e-4  # momentum reaches the adapter
    fast = adapter(setup, **options).logits(test)
    vmapped = adapter(setup, fast_chunk=2, **options).logits(test)
    torch.testing.assert_close(fast, reference, atol=1e-4, rtol=0)
    torch.testing.assert_close(vmapped, reference, atol=1e-4, rtol=0)


def test_local_adaptation_defaults_are_the_paper_and_em_in_lll_values():
    o = AdaptationOptions()
    # K = 32, L = 30, λ = 1e-3 (de Masson d'Autume et al., 2019); SGD lr 2e-3 with momentum
    # 0.9 (EM-in-LLL settings.py / test.py)
    assert (o.k, o.steps, o.l2, o.adapt_lr, o.momentum) == (32, 30, 1e-3, 2e-3, 0.9)
    with pytest.raises(ValueError, match="momentum"):
        AdaptationOptions(momentum=1.0)


def test_the_head_prefix_computes_the_last_layer_at_cls_alone_as_the_full_layer(setup):
    from lifelong.mechanisms.neighbours import frozen_prefix
    from lifelong.streams import Example

    model, writer, _ = setup
    texts = ["short", "a far longer input that pads the others", "in between, this"]
    test = writer.kind([Example(t, 0) for t in texts])
    stage = model.encoder.num_layers + 1
    assert not test.attention_mask.bool().all()  # padded rows
    staged, mask = frozen_prefix(model, stage, *test.inputs())
    with torch.no_grad():
        full = model.encoder.run_stages(test.input_ids, test.attention_mask, 0, stage)
        plain = model(*test.inputs())
        from_prefix = model(staged, mask, start=stage, packed=True)
    assert staged.shape[1] == 1
    torch.testing.assert_close(staged[:, 0], full[:, 0], rtol=0, atol=1e-5)
    torch.testing.assert_close(from_prefix, plain, rtol=0, atol=1e-5)
    assert (from_prefix.argmax(-1) == plain.argmax(-1)).all()  # the same predictions


def test_test_inputs_are_keyed_once_across_evaluations(setup):
    _, writer, test = setup
    local = adapter(setup, adapt_scope="head")
    first = local.neighbours(test)  # keyed here, or by an earlier test of this module
    hits = writer.queries.hits
    again = local.neighbours(test)  # the next evaluation: the frozen key network is not rerun
    assert writer.queries.hits == hits + 1
    assert (first == again).all()
    assert (first == writer.memory.nearest(writer.keys(test.examples), 6)[1]).all()


BF16_TOLERANCE = 1e-2
"""Batched adaptation under bf16 autocast against fp32, relative to the largest |logit|: bf16
keeps 8 significant bits (a relative step of 2^-8 = 3.9e-3 per rounding); measured 2e-3 here."""


@pytest.mark.parametrize(
    ("scope", "options"),
    [
        ("all", {"fast_chunk": 2}),  # vmapped over test examples
        ("top1", {"fast_chunk": 2}),
        ("head", {}),  # vmapped 64 at a time by default
        ("lora", {"fast_chunk": 2}),
    ],
)
def test_batched_adaptation_in_bf16_stays_within_its_stated_tolerance(setup, scope, options):
    """fp32: equal to the per-example reference within 1e-4 (the tests above); bf16 (a run's
    ``precision: bf16`` autocast): within `BF16_TOLERANCE` of fp32 and the same predictions."""
    _, _, test = setup
    fp32 = adapter(setup, adapt_scope=scope, **options).logits(test)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        bf16 = adapter(setup, adapt_scope=scope, **options).logits(test)
    scale = float(fp32.abs().max())
    assert float((bf16.float() - fp32).abs().max()) <= BF16_TOLERANCE * scale
    assert (bf16.argmax(-1) == fp32.argmax(-1)).all()


def test_vmapped_chunks_group_similar_widths_and_keep_the_batch_order():
    from lifelong.mechanisms.neighbours import in_batch_order, trimmed, width_chunks

    chunks = width_chunks(np.array([5, 2, 9, 2, 5]), 2)
    assert [c.tolist() for c in chunks] == [[1, 3], [0, 4], [2]]  # narrowest first, stable
    parts = [torch.tensor([10.0, 30.0]), torch.tensor([0.0, 40.0]), torch.tensor([20.0])]
    assert in_batch_order(parts, chunks).tolist() == [0.0, 10.0, 20.0, 30.0, 40.0]
    x, mask = torch.ones(2, 6, 3), torch.tensor([[1, 1, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0]])
    assert [t.shape[1] for t in trimmed([x, mask], mask)] == [3, 3]


@pytest.fixture(scope="module")
def ragged(tokenizer):
    """A memory whose examples run from 3 to 10 tokens, and test inputs whose neighbours differ."""
    from lifelong.streams import Example

    words = ["alpha", "beta", "gamma", "delta"]
    stored = [Example(" ".join([words[i % 4]] * (1 + i % 8)), i % 4) for i in range(24)]
    tests = [Example(" ".join([words[y]] * n), y) for y, n in ((0, 7), (1, 1), (2, 5), (3, 2))]
    return memory_of(tokenizer, [stored], tests)


@pytest.mark.parametrize("scope", ["all", "lora"])
def test_a_vmapped_chunk_of_reordered_examples_predicts_as_one_at_a_time(ragged, scope):
    model, writer, test = ragged
    one = adapter(ragged, adapt_scope=scope, fast_chunk=1, k=2)
    slots = one.neighbours(test)
    one.cache.fill(slots)
    widths = one.cache.widths(slots).tolist()
    assert widths != sorted(widths)  # the chunks really reorder the examples
    chunked = adapter(ragged, adapt_scope=scope, fast_chunk=3, k=2)
    if scope == "lora":
        batched = chunked.lora_logits(test, slots, batching="vmap")
    else:
        batched = chunked.logits(test)
    torch.testing.assert_close(batched, one.logits(test), atol=1e-4, rtol=0)
