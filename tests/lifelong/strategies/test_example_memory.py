"""Episodic memory holds whole examples: every count (R_I, ⌊r·R_I⌋, sizes) counts examples.

A FewRel sentence is one example however many (sentence, candidate) rows it expands into, a QA
question one example however many context windows; replay draws examples and expands them.
"""

import numpy as np
import pytest

from lifelong import registry
from lifelong.memory import KeyEncoder
from lifelong.strategy import StrategyContext
from lifelong.streams import batches, fewrel_stream, hashed_bag_of_words, qa_stream
from lifelong.tasks import TaskSettings, build_task
from tests.conftest import tiny_classifier


@pytest.fixture(scope="module")
def fewrel():
    return fewrel_stream(embed=hashed_bag_of_words, n_tasks=3)


@pytest.fixture(scope="module")
def qa():
    return qa_stream(tasks=["squad", "trivia_web"], train_size=12, test_size=4)


def context(kind):
    return StrategyContext(tiny_classifier(kind=kind), kind, lr=1e-3, batch_size=4)


def relation_kind(tokenizer, stream):
    return build_task("relation", tokenizer, stream.label_names, TaskSettings(max_length=48))


def qa_kind(tokenizer):
    settings = TaskSettings(max_length=48, doc_stride=16, max_query_length=16)
    return build_task("qa", tokenizer, (), settings)


def spy_on_replays(strategy):
    """Record (examples, rows) of every replay batch the strategy takes."""
    seen = []
    original = strategy.replay.replay_batches

    def replay_batches(slots=None):
        out = original(slots)
        seen.append((sum(b.num_examples for b in out), sum(len(b) for b in out)))
        return out

    strategy.replay.replay_batches = replay_batches
    return seen


def feed(strategy, kind, examples, size=4):
    for chunk in batches(examples, size):
        strategy.observe(kind(chunk))


def test_fewrel_replay_draws_sentences_with_all_their_candidates_every_ri_sentences(
    tokenizer, fewrel
):
    kind = relation_kind(tokenizer, fewrel)
    options = {"replay_every": 8, "replay_ratio": 0.5}  # 4 sentences after every 8
    strategy = registry.build("replay", context(kind), options)
    replays = spy_on_replays(strategy)
    sentences = fewrel.tasks[0].train[:24]
    rows = len(kind(list(sentences)))
    assert rows > 2 * len(sentences)  # several candidate rows per sentence
    feed(strategy, kind, sentences)
    assert len(replays) == 24 // 8  # every R_I sentences, not every R_I rows
    memory = strategy.replay.memory
    candidates = {len(c) for c in memory.get(np.arange(len(memory))).examples["candidates"]}
    for n_examples, n_rows in replays:
        assert n_examples == 4 and n_rows > n_examples  # floor(r·R_I) sentences, all candidates
    assert min(candidates) > 1
    assert len(memory) == 24  # sentences written, not rows
    assert strategy.report()["memory_examples"] == 24 and strategy.report()["write_rate"] == 1.0


def test_replayed_sentences_expand_to_exactly_their_candidate_rows(tokenizer, fewrel):
    kind = relation_kind(tokenizer, fewrel)
    strategy = registry.build("replay", context(kind), {"replay_every": 1000})
    sentences = list(fewrel.tasks[0].train[:6])
    batch = kind(sentences)
    strategy.observe(batch)
    rebuilt = strategy.replay.writer.batch(np.arange(6))
    assert rebuilt.num_examples == 6 and len(rebuilt) == len(batch)
    assert rebuilt.groups.tolist() == batch.groups.tolist()
    assert (rebuilt.input_ids == batch.input_ids).all()
    assert (rebuilt.labels == batch.labels).all()


def test_qa_replay_counts_questions_and_replays_all_their_windows(tokenizer, qa):
    kind = qa_kind(tokenizer)
    options = {"replay_every": 6, "replay_ratio": 0.5}
    strategy = registry.build("replay", context(kind), options)
    replays = spy_on_replays(strategy)
    questions = qa.tasks[0].train[:12]
    windows = len(kind(list(questions)))
    assert windows > len(questions)  # the short windows cut contexts into several
    feed(strategy, kind, questions)
    assert len(replays) == 12 // 6
    assert all(n_examples == 3 and n_rows >= n_examples for n_examples, n_rows in replays)
    assert len(strategy.replay.memory) == 12
    stored = strategy.replay.memory.get(np.arange(12)).examples
    assert stored.names == ("question", "context", "answer")  # no offsets kept


def test_keys_are_read_once_per_example(tokenizer, fewrel, qa):
    for kind, examples in (
        (relation_kind(tokenizer, fewrel), list(fewrel.tasks[0].train[:5])),
        (qa_kind(tokenizer), list(qa.tasks[0].train[:5])),
    ):
        strategy = registry.build("mbpa++", context(kind), {})
        batch = kind(examples)
        assert len(batch) > 5
        keys = strategy.replay.writer.keys(batch.examples)
        assert keys.shape == (5, strategy.replay.writer.key_encoder.dim)


@pytest.mark.parametrize("name", ["replay", "agem", "oml-er", "anml-er", "maml-er", "mbpa++"])
def test_only_strategies_that_search_key_their_memory(name, tokenizer, fewrel, monkeypatch):
    """A memory that is only sampled is written without running a key network (cls_replay.py)."""
    kind = relation_kind(tokenizer, fewrel)
    calls = []
    real = KeyEncoder.__call__
    monkeypatch.setattr(KeyEncoder, "__call__", lambda self, b: calls.append(1) or real(self, b))
    options = MEMORY.get(name, {"support_batches": 1, "replay_every": 8, "replay_ratio": 0.5})
    strategy = registry.build(name, context(kind), options)
    feed(strategy, kind, fewrel.tasks[0].train[:12])
    if hasattr(strategy, "on_eval_start"):
        strategy.on_eval_start()
    memory = strategy.replay.memory
    assert len(memory) > 0
    if name == "mbpa++":
        assert memory.keyed and calls
    else:
        assert not memory.keyed and not calls
        assert strategy.replay.writer.key_encoder is None  # no copy of the encoder either


MEMORY = {
    "replay": {"replay_every": 8},
    "agem": {"replay_every": 8, "memory_batch": 4},
    "er": {"memory_size": 16},  # the reservoir holds every one of the 12
    "mbpa": {"k": 2, "steps": 1},
    "mbpa++": {"replay_every": 8, "k": 2, "steps": 1},
    "oml-er": {"support_batches": 1, "replay_every": 8, "replay_ratio": 0.5},
    "anml-er": {"support_batches": 1, "replay_every": 8, "replay_ratio": 0.5},
}


@pytest.mark.parametrize("name", sorted(MEMORY))
@pytest.mark.parametrize("stream", ["fewrel", "qa"])
def test_every_memory_strategy_stores_examples_not_rows(name, stream, tokenizer, fewrel, qa):
    kind = relation_kind(tokenizer, fewrel) if stream == "fewrel" else qa_kind(tokenizer)
    examples = (fewrel if stream == "fewrel" else qa).tasks[0].train[:12]
    strategy = registry.build(name, context(kind), MEMORY[name])
    feed(strategy, kind, examples)
    if hasattr(strategy, "on_eval_start"):
        strategy.on_eval_start()  # OML/ANML-ER write an episode's batches after learning it
    report = strategy.report()
    assert report["memory_examples"] == 12 and report["write_rate"] == 1.0
    predictions = strategy.predict(kind(list(examples[:2])))
    assert predictions.shape[0] == len(kind(list(examples[:2])))  # one score row per row


def test_meta_mbpa_pools_and_replays_examples(tokenizer, fewrel):
    kind = relation_kind(tokenizer, fewrel)
    options = {"k": 2, "write_rate": 1.0, "beta": 1e-3, "steps": 1, "replay_every": 8}
    options |= {"replay_ratio": 0.25, "meta_scope": "head", "adapt_scope": "head"}
    strategy = registry.build("meta-mbpa", context(kind), options)
    feed(strategy, kind, fewrel.tasks[0].train[:16])
    assert strategy.report()["meta_replays"] == 2
    slots, weights = strategy.pool([kind(list(fewrel.tasks[0].test[:3]))])
    assert len(slots) <= 3 * 2 and np.isclose(weights.sum(), 1.0)  # examples: 3 inputs x K
    scores = strategy.predict_set([kind(list(fewrel.tasks[0].test[:3]))])[0]
    # one logit per (sentence, candidate) pair: the reference's one-output pair scorer
    assert scores.shape == (len(kind(list(fewrel.tasks[0].test[:3]))), 1)


def test_meta_mbpa_head_meta_step_on_qa_windows(tokenizer, qa):
    """Span scores of memory and stream rows line up with their (untrimmed) masks."""
    kind = qa_kind(tokenizer)
    options = {"k": 2, "write_rate": 1.0, "beta": 1e-3, "steps": 1, "meta_scope": "head"}
    strategy = registry.build("meta-mbpa", context(kind), {**options, "adapt_scope": "head"})
    feed(strategy, kind, qa.tasks[0].train[:12])
    assert len(strategy.memory) > 0 and np.isfinite(
        strategy.observe(kind(list(qa.tasks[1].train[:4])))["loss"]
    )


QA_RUNS = {
    **MEMORY,
    "seq": {},
    "ewc": {"fisher_samples": 4},
    "maml-er": {"support_batches": 1, "replay_every": 8, "replay_ratio": 0.5},
    "meta-mbpa": {"k": 2, "steps": 1, "replay_every": 8, "adapt_scope": "all"},
    "meta-mbpa-head": {"k": 2, "steps": 1, "meta_scope": "head", "adapt_scope": "top1"},
}


@pytest.mark.parametrize("name", sorted(QA_RUNS))
def test_every_strategy_feeds_bert_the_qa_windows_segment_ids(name, tokenizer, qa):
    """Training, replay, keys and (adapted) prediction all give BERT the windows' segment ids.

    Every QA window has context tokens, segment 1: an embedding call that saw no 1 lost them.
    """
    kind = qa_kind(tokenizer)
    model = tiny_classifier(kind=kind)
    seen = []

    def record(module, args, kwargs):
        types = kwargs.get("token_type_ids")
        seen.append(types is not None and bool((types == 1).any()))

    # registered before the strategy copies the encoder (key network, neuromodulator)
    model.encoder.model.embeddings.register_forward_pre_hook(record, with_kwargs=True)
    strategy_name = name.removesuffix("-head")
    context = StrategyContext(model, kind, lr=1e-3, batch_size=4)
    strategy = registry.build(strategy_name, context, QA_RUNS[name])
    feed(strategy, kind, qa.tasks[0].train[:12])
    if hasattr(strategy, "on_task_end"):
        strategy.on_task_end(0)
    if hasattr(strategy, "on_eval_start"):
        strategy.on_eval_start()
    test = kind(list(qa.tasks[0].test[:2]))
    assert strategy.predict(test).shape[:2] == test.input_ids.shape
    assert seen and all(seen), f"{seen.count(False)} of {len(seen)} BERT calls lost them"
