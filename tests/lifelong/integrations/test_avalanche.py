"""Avalanche interop (`lifelong.integrations.avalanche`): runs, benchmarks, metric definitions.

Runs only where avalanche-lib imports (``make test-avalanche``, in .venv-avalanche, which sets
``LIFELONG_REQUIRE_AVALANCHE=1`` so that a broken import fails there instead of skipping);
``make test`` skips this module. Forgetting and BWT, Avalanche's against ours, on one
accuracy matrix R (row i: after training task i; column j: task j; T tasks):

* units: Avalanche's are fractions, ours percent (factor 100);
* BWT: both are Lopez-Paz & Ranzato's ``mean_{j<T-1} (R[T-1, j] − R[j, j])``: they agree always;
* forgetting: Avalanche's stream forgetting is ``mean_{j<T-1} (R[j, j] − R[T-1, j])`` (the
  accuracy right after training j, i.e. −BWT); ours is ``mean_{j<T-1} (max_{j<=l<T-1} R[l, j] −
  R[T-1, j])`` (the best accuracy since j was trained; ``forgetting_any``: over every earlier
  row, Chaudhry et al. 2018). They agree when no task scores higher after later tasks than right
  after its own training; otherwise ours is larger, by ``max_{j<=l<T-1} R[l, j] − R[j, j]`` per
  task; ``forgetting_any`` further by what a task scored *before* it was trained;
* Avalanche averages over the experiences that have both a value right after their own
  training and one now (so the last task is left out, as in ours); both give nothing for T = 1.
"""

from __future__ import annotations

import json
import os
import warnings

import numpy as np
import pytest
import torch
from torch import nn

try:
    import avalanche.training  # noqa: F401
except Exception as err:  # missing, or torchvision against the CPU torch build
    if os.environ.get("LIFELONG_REQUIRE_AVALANCHE"):  # `make test-avalanche`: fail, never skip
        raise
    pytest.skip(
        f"avalanche-lib does not import here ({type(err).__name__}); `make test-avalanche`",
        allow_module_level=True,
    )

from avalanche.benchmarks.scenarios.dataset_scenario import benchmark_from_datasets
from avalanche.benchmarks.utils import _make_taskaware_tensor_classification_dataset
from avalanche.evaluation.metrics import accuracy_metrics, bwt_metrics, forgetting_metrics
from avalanche.training import Naive
from avalanche.training.plugins import EvaluationPlugin

from lifelong import registry
from lifelong.experiment.cli import main
from lifelong.experiment.config import from_dict
from lifelong.experiment.runs import build_model, name_embedder
from lifelong.integrations import avalanche as ava
from lifelong.learner import evaluate_all
from lifelong.metrics import backward_transfer, forgetting
from lifelong.options import OptionsError
from lifelong.strategy import StrategyHooks
from lifelong.streams.registry import build_stream
from lifelong.training import make_optimizer, predict_scores, seed_everything

pytestmark = pytest.mark.avalanche

SAMPLE = ["--train-size", "40", "--test-size", "20", "--lr", "1e-3", "--batch-size", "8"]


def run_cli(tmp_path, strategy, *options):
    out = tmp_path / "runs"
    code = main(
        ["run", "--encoder", "tiny", "--no-progress", "--strategy", strategy, *SAMPLE]
        + ["--output-dir", str(out), *options]
    )
    assert code == 0
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    return run_dir, json.loads((run_dir / "metrics.json").read_text())


@pytest.mark.parametrize(
    ("strategy", "options"),
    [("avalanche:naive", []), ("avalanche:replay", ["-o", "mem_size=30"])],
)
def test_avalanche_strategies_run_through_lifelong_run(tmp_path, capsys, strategy, options):
    """The bundled text sample (5 tasks), our tiny encoder, learner, metrics and run dir."""
    run_dir, metrics = run_cli(tmp_path, strategy, *options)
    printed = capsys.readouterr().out
    assert "Accuracy matrix" in printed and "BWT" in printed
    assert {"average_accuracy", "bwt", "fwt", "forgetting"} <= set(metrics)
    assert metrics["strategy"]["experiences"] == 5  # one Avalanche experience per task
    if strategy.lower() == "avalanche:replay":
        assert metrics["memory_examples"] == 30  # Avalanche's buffer, filled to mem_size
    rows = (run_dir / "accuracy.csv").read_text().strip().splitlines()
    assert len(rows) == 1 + 6  # header, before, after each of the 5 tasks
    assert (tmp_path / "runs" / "index.sqlite").is_file()


@pytest.mark.parametrize("max_length", [32, 64])
def test_avalanche_replays_derived_memory_is_what_its_runs_measure(tmp_path, max_length):
    """The bytes `lifelong report` derives for an Avalanche Replay run that predates cost
    counting are the bytes such a run measures: its buffer's patterns, as Avalanche stores them."""
    from lifelong.experiment.reports.costs import avalanche_pattern_bytes, derived_cost
    from lifelong.experiment.rundir import load_run

    run_dir, metrics = run_cli(
        tmp_path, "avalanche:replay", "-o", "mem_size=30", "--max-length", str(max_length)
    )
    assert metrics["memory_bytes"] == 30 * avalanche_pattern_bytes(max_length)
    record = load_run(run_dir)
    del record.metrics["total_flops"], record.metrics["memory_bytes"]
    assert derived_cost(record)["memory_bytes"] == metrics["memory_bytes"]


def test_ours_and_avalanches_sit_in_one_report_table(tmp_path, capsys):
    """`lifelong report` over runs of both libraries: one table, a row per strategy."""
    for strategy in ("seq", "avalanche:naive"):
        assert (
            main(
                ["run", "--encoder", "tiny", "--no-progress", "--strategy", strategy]
                + SAMPLE
                + ["--output-dir", str(tmp_path / "runs")]
            )
            == 0
        )
    capsys.readouterr()
    assert main(["report", str(tmp_path / "runs"), "--no-plots"]) == 0
    table = capsys.readouterr().out
    rows = [line for line in table.splitlines() if line.startswith("|")]
    assert any("| seq " in row for row in rows)
    assert any("avalanche:naive" in row for row in rows)


def test_fewrel_runs_with_der(tmp_path):
    """FewRel through `lifelong run`: DER stores and replays candidate scores per relation."""
    out = tmp_path / "runs"
    code = main(
        ["run", "--encoder", "tiny", "--no-progress", "--strategy", "avalanche:der"]
        + ["--stream", "fewrel", "--fewrel-tasks", "2", "--train-size", "6", "--test-size", "6"]
        + ["-o", "mem_size=20", "--output-dir", str(out)]
    )
    assert code == 0
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["strategy"] == {"experiences": 2, "memory_examples": 20}


def test_options_are_checked_before_anything_loads():
    assert registry.options_class("avalanche:ewc") is ava.EWCOptions
    assert registry.parse("avalanche:replay", {"mem_size": "64"}).mem_size == 64
    assert registry.parse("avalanche:gem", {"max_grad_norm": "1"}).max_grad_norm == 1.0
    with pytest.raises(OptionsError, match="mem_size"):
        registry.parse("avalanche:replay", {"mem_size": 0})
    with pytest.raises(OptionsError, match="decay_factor"):
        registry.parse("avalanche:ewc", {"mode": "onlineweightedsum"})
    with pytest.raises(registry.UnknownStrategyError, match="avalanche:der"):
        registry.get("avalanche:icarl")


def tiny_sample(**changes):
    config = from_dict(dict(encoder="tiny", train_size=40, test_size=20, lr=1e-3, **changes))
    stream = build_stream(
        config.stream,
        seed=config.training.seed,
        embed=name_embedder(config.encoder, config.training.seed),
    )
    model, kind = build_model(
        config.encoder, config.task_settings(), stream, seed=config.training.seed
    )
    return config, stream, model, kind


class Plain(StrategyHooks):
    """Our evaluation of a model (what every strategy's ``predict`` does for plain models)."""

    def __init__(self, model):
        self.model = model

    def predict(self, batch):
        return predict_scores(self.model, batch)


def quiet_evaluator():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return EvaluationPlugin(
            accuracy_metrics(experience=True),
            forgetting_metrics(experience=True, stream=True),
            bwt_metrics(experience=True, stream=True),
            loggers=[],
        )


def train_and_evaluate(template, benchmark, after_each=None):
    """Avalanche's own loop: train on experience i, evaluate the whole test stream."""
    T = len(benchmark.train_stream)
    R = np.zeros((T, T))
    for i, experience in enumerate(benchmark.train_stream):
        template.train(experience, eval_streams=[])
        results = template.eval(benchmark.test_stream)
        R[i] = [results[f"Top1_Acc_Exp/eval_phase/test_stream/Exp{j:03d}"] for j in range(T)]
        if after_each is not None:
            after_each(i)
    return R, results


def test_benchmark_keeps_order_labels_and_our_accuracies():
    """The sample as an Avalanche benchmark: same tasks, merged labels, and the same R.

    Avalanche trains (Naive) and evaluates with its own loop on `as_benchmark`'s experiences;
    after every experience our evaluation of the same model gives the same accuracies.
    """
    seed_everything(0)
    config, stream, model, kind = tiny_sample()
    benchmark = ava.as_benchmark(stream, kind)
    assert len(benchmark.train_stream) == len(stream) == 5
    for experience, task in zip(benchmark.train_stream, stream):
        assert len(experience.dataset) == len(task.train)
        assert experience.classes_in_this_experience == set(task.labels)  # merged space
    seen = set().union(*(t.labels for t in stream))
    assert benchmark.train_stream[4].classes_seen_so_far == seen
    assert max(seen) < len(stream.label_names) == 33  # yelp and amazon share 5 classes

    template = Naive(
        model=ava.as_model(model, kind),
        optimizer=make_optimizer(model, config.training.lr),
        criterion=nn.CrossEntropyLoss(),
        train_mb_size=8,
        eval_mb_size=16,
        evaluator=quiet_evaluator(),
    )
    ours = []
    R_ava, results = train_and_evaluate(
        template, benchmark, lambda i: ours.append(evaluate_all(Plain(model), stream, kind))
    )
    R = np.vstack(ours)  # percent
    np.testing.assert_allclose(R, 100 * R_ava, atol=1e-9)  # both libraries' accuracy, one model
    # BWT: the same definition; Avalanche's stream forgetting is -BWT (first value, not best)
    bwt_ava = results["StreamBWT/eval_phase/test_stream"]
    forgetting_ava = results["StreamForgetting/eval_phase/test_stream"]
    assert 100 * bwt_ava == pytest.approx(backward_transfer(R), abs=1e-9)
    assert 100 * forgetting_ava == pytest.approx(-backward_transfer(R), abs=1e-9)
    # ours takes the best accuracy since training: larger by exactly that excess, per task
    T = len(R)
    excess = [R[j : T - 1, j].max() - R[j, j] for j in range(T - 1)]
    assert forgetting(R) == pytest.approx(100 * forgetting_ava + np.mean(excess), abs=1e-9)
    for j in range(T - 1):
        key = f"ExperienceForgetting/eval_phase/test_stream/Exp{j:03d}"
        assert 100 * results[key] == pytest.approx(R[j, j] - R[-1, j], abs=1e-9)


class Scripted(nn.Module):
    """Scores that make accuracy on experience j after training i exactly ``R[i, j]``.

    A pattern is ``(experience, index)``; it is classified right (class 0) when its index is
    below ``R[stage, experience] * n``. One trainable weight, at zero, so Avalanche can train.
    """

    def __init__(self, R, n):
        super().__init__()
        self.R, self.n, self.stage = R, n, 0
        self.weight = nn.Parameter(torch.zeros(()))

    def forward(self, x):
        right = x[:, 1] < torch.as_tensor(self.R[self.stage][x[:, 0].numpy()] * self.n)
        scores = torch.stack([right.float(), (~right).float()], dim=1)
        return scores + 0.0 * self.weight


def test_forgetting_and_bwt_definitions_against_avalanche():
    """A matrix where the definitions differ, evaluated by Avalanche's own metrics.

    Task 0 scores 50% after its training, 80% after task 1 and 60% at the end: Avalanche's
    forgetting is 50 − 60 = −10 (the first value), ours 80 − 60 = 20 (the best since
    training). Task 1 scores 95% before its training (shared labels), 90% after it and 50% at
    the end: 40 in both, and 45 in ``forgetting_any``. BWT agrees: −15.
    """
    R = np.array([[0.5, 0.95, 0.0], [0.8, 0.9, 0.2], [0.6, 0.5, 1.0]])
    n = 20

    def dataset(t):
        x = torch.stack([torch.full((n,), t), torch.arange(n)], dim=1)
        return _make_taskaware_tensor_classification_dataset(
            x, torch.zeros(n, dtype=torch.long), task_labels=0, targets=[0] * n
        )

    benchmark = benchmark_from_datasets(
        train=[dataset(t) for t in range(3)], test=[dataset(t) for t in range(3)]
    )
    model = Scripted(R, n)
    template = Naive(
        model=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.0),
        train_mb_size=n,
        eval_mb_size=n,
        evaluator=quiet_evaluator(),
    )

    def next_stage(i):
        model.stage = min(i + 1, 2)

    R_ava, results = train_and_evaluate(template, benchmark, next_stage)
    np.testing.assert_allclose(R_ava, R)
    R = 100 * R
    assert 100 * results["StreamBWT/eval_phase/test_stream"] == pytest.approx(-15)
    assert backward_transfer(R) == pytest.approx(-15)  # agree
    assert 100 * results["StreamForgetting/eval_phase/test_stream"] == pytest.approx(15)
    assert forgetting(R) == pytest.approx(30)  # (20 + 40) / 2: best since trained
    assert forgetting(R, since="any") == pytest.approx(32.5)  # (20 + 45) / 2
    per_task = "ExperienceForgetting/eval_phase/test_stream/Exp{:03d}"
    assert 100 * results[per_task.format(0)] == pytest.approx(-10)  # first value, not best
    assert 100 * results[per_task.format(1)] == pytest.approx(40)  # agree: 90 was the best
    assert per_task.format(2) not in results  # the last task: no forgetting (ours neither)


def test_relation_stream_scores_candidates_in_the_merged_space():
    """FewRel: Avalanche's argmax over the 80 relations is our best candidate."""
    seed_everything(0)
    config, stream, model, kind = tiny_sample(stream="fewrel", fewrel_tasks=2)
    task = stream.tasks[0]
    records = kind.encode(task.test[:6])
    codec = ava.RecordCodec(kind)
    x, y = codec.encode(records)
    assert y.tolist() == [e.label for e in task.test[:6]]
    scores = ava.as_model(model, kind).eval()(x)
    assert scores.shape == (6, codec.num_classes)
    batch = kind.rows(records)
    ours = kind.score(predict_scores(model, batch), batch, task.test[:6])["accuracy"]
    assert float((scores.argmax(1) == y).sum()) == ours
    for row, candidates in zip(scores, records["candidates"]):
        off = np.setdiff1d(np.arange(codec.num_classes), candidates)
        assert torch.all(row[off] == ava.PADDING_SCORE)


def test_qa_is_refused_with_a_reason():
    config = from_dict(dict(encoder="tiny", stream="qa", train_size=4, test_size=4, doc_stride=32))
    stream = build_stream(config.stream)
    _, kind = build_model(config.encoder, config.task_settings(), stream, seed=config.training.seed)
    with pytest.raises(ava.UnsupportedStreamError, match="span"):
        ava.as_benchmark(stream, kind)


CHECKPOINTED = [
    ("avalanche:naive", {}),
    ("avalanche:replay", {"mem_size": 12}),
    ("avalanche:agem", {"patterns_per_exp": 8, "sample_size": 8}),
    ("avalanche:ewc", {}),
    ("avalanche:lwf", {}),
    ("avalanche:gem", {"patterns_per_exp": 8}),
    ("avalanche:der", {"mem_size": 12}),
]


@pytest.mark.parametrize("name, options", CHECKPOINTED, ids=[n for n, _ in CHECKPOINTED])
def test_a_checkpoint_is_data_and_resumes_to_the_same_model(tmp_path, name, options):
    """state_dict is data (read by `load_data`: nothing pickled), and a strategy restored from
    it trains on to the very weights of the one that never stopped: weights, buffered examples
    and the plugins' memories (replay buffers, importances, teacher, GEM/A-GEM memories)."""
    from lifelong.experiment.runs import cached_kind
    from lifelong.serialization import load_data
    from lifelong.strategy import StrategyContext

    def build(model, kind):
        return registry.build(name, StrategyContext(model, kind, lr=1e-3, batch_size=8), options)

    seed_everything(0)
    config, stream, model, kind = tiny_sample()
    kind = cached_kind(kind, config.task_settings(), config.training.token_cache, stream)
    strategy = build(model, kind)
    strategy.observe(kind(stream.tasks[0].train[:16]))
    strategy.on_task_end(0)
    strategy.observe(kind(stream.tasks[1].train[:8]))  # pending at the checkpoint
    path = tmp_path / "state.pt"
    torch.save(strategy.state_dict(), path)
    _, _, model2, _ = tiny_sample()
    restored = build(model2, kind)
    restored.load_state_dict(load_data(path, what="checkpoint"))
    assert restored.report() == strategy.report()
    assert len(restored.pending) == 1 and restored.experiences == 1
    for a, b in zip(model.parameters(), model2.parameters(), strict=True):
        assert torch.equal(a, b)
    for each in (strategy, restored):  # both train on from the same random state
        seed_everything(1)
        each.observe(kind(stream.tasks[1].train[8:16]))
        each.on_task_end(1)
    assert restored.experiences == 2 and restored.report() == strategy.report()
    for a, b in zip(model.parameters(), model2.parameters(), strict=True):
        assert torch.equal(a, b)


def test_a_planted_avalanche_state_is_refused(tmp_path):
    """A state that names a class outside the closed lists is refused, nothing created."""
    from lifelong.integrations.avalanche_state import AvalancheStateError, decode

    with pytest.raises(AvalancheStateError, match="not allowed"):
        decode({"~": "object", "type": "avalanche.logging.CSVLogger", "state": {}}, {})
    with pytest.raises(AvalancheStateError, match="not allowed"):
        decode({"~": "function", "name": "os.system"}, {})
    seed_everything(0)
    config, stream, model, kind = tiny_sample()
    from lifelong.strategy import StrategyContext

    strategy = registry.build("avalanche:naive", StrategyContext(model, kind, lr=1e-3))
    state = strategy.state_dict()
    old = dict(state, avalanche=b"a pickle")
    del old["template"]
    with pytest.raises(ValueError, match="a pickle is not read"):
        strategy.load_state_dict(old)


def test_avalanche_naive_and_our_seq_train_the_same_model(tmp_path):
    """With our batch order and no dropout (the tiny encoder has none) the two loops take the
    same updates: their accuracy matrices agree within 0.5 points per cell on the demo stream."""
    import pandas as pd

    matrices = {}
    for strategy in ("seq", "avalanche:naive"):
        out = tmp_path / strategy.replace(":", "-")
        args = ["run", "--encoder", "tiny", "--no-progress", "--strategy", strategy, *SAMPLE]
        assert main([*args, "--tasks", "ag_news,yelp,dbpedia", "--output-dir", str(out)]) == 0
        (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
        matrices[strategy] = pd.read_csv(run_dir / "accuracy.csv", index_col="row").to_numpy()
    gap = np.abs(matrices["seq"] - matrices["avalanche:naive"]).max()
    assert gap <= 0.5, (gap, matrices)
    assert matrices["seq"][1:].max() > matrices["seq"][0].max()  # it learnt something


def test_avalanche_losses_reach_the_trackers(tmp_path):
    import csv

    args = ["run", "--encoder", "tiny", "--no-progress", "--strategy", "avalanche:replay"]
    args += [*SAMPLE, "--tasks", "ag_news,yelp", "--logger", "csv", "--output-dir", str(tmp_path)]
    assert main(args) == 0
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    steps = list(csv.DictReader((run_dir / "logs" / "steps.csv").open()))
    losses = [r for r in steps if r["name"] == "train/loss"]
    assert len(losses) == 2 * 5 and [int(r["step"]) for r in losses] == list(range(10))
    assert {r["task"] for r in losses} == {"ag_news", "yelp"}


def test_avalanche_strategies_clip_as_ours_by_default():
    assert ava.NaiveOptions().max_grad_norm == 0.0  # as our seq (Holla's cls_baseline.py)
    assert ava.ReplayOptions().max_grad_norm == 1.0  # as ClipOptions: every other strategy
    assert ava.EWCOptions().our_batch_order


def test_avalanche_clip_bounds_the_update_as_our_trainer_does():
    """With a clip far below the gradient norm, `avalanche:naive` and our `seq` (both clipping at
    ``max_grad_norm``) take the same clipped updates on the same batches: equal weights after a
    task. Without the `GradientClip` plugin the weights differ (up to 0.03 on the tiny model when
    the plugin was left out): AdamW's steps depend on each gradient's scale against the others'."""
    from lifelong.experiment.runs import cached_kind
    from lifelong.strategy import StrategyContext

    weights = {}
    for name in ("seq", "avalanche:naive"):
        seed_everything(0)
        config, stream, model, kind = tiny_sample()
        kind = cached_kind(kind, config.task_settings(), config.training.token_cache, stream)
        start = [p.detach().clone() for p in model.parameters()]
        context = StrategyContext(model, kind, lr=1e-2, batch_size=8)
        strategy = registry.build(name, context, {"max_grad_norm": 1e-3})
        for i in range(0, 24, 8):
            strategy.observe(kind(stream.tasks[0].train[i : i + 8]))
        strategy.on_task_end(0)
        weights[name] = [p.detach().clone() for p in model.parameters()]
        assert any(not torch.equal(w, s) for w, s in zip(weights[name], start))  # it trained
    for a, b in zip(weights["seq"], weights["avalanche:naive"]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


class _Recorded:
    """Avalanche Replay's memory mini-batches, replayed to our `er` step by step.

    Stands in for ER's reservoir: at step k it holds the memory part of Avalanche's k-th joined
    mini-batch (nothing during the first experience, whose batches Avalanche does not join), and
    each write (ER offers the stream batch after its update) moves to the next step.
    """

    def __init__(self, parts):
        self.parts, self.step = parts, 0

    def __len__(self):
        part = self.parts[self.step]
        return 0 if part is None else len(part)

    def sample(self, n):
        from types import SimpleNamespace

        # ER asks for a batch of n (the stream's size); Avalanche's memory loader also yields
        # its buffer's remainder (12 patterns in batches of 8: 8, then 4), which we replay too
        return SimpleNamespace(examples=self.parts[self.step])

    def write(self, examples, keys=None):
        self.step += 1
        return np.arange(len(examples))


def test_er_fed_avalanche_replays_batches_and_memory_gives_its_matrix():
    """Chaudhry et al.'s update (one step on the stream batch joined with a memory batch, mean
    loss) is Avalanche's Replay's: given Avalanche's own joined batches (its buffer is
    experience-balanced, ours a reservoir), our `er` trains to the same accuracy matrix."""
    from avalanche.core import SupervisedPlugin

    from lifelong.experiment.runs import cached_kind
    from lifelong.learner import run_stream
    from lifelong.memory import ExampleRecords
    from lifelong.strategy import StrategyContext
    from lifelong.streams.core import batches

    class Spy(SupervisedPlugin):
        def __init__(self):
            super().__init__()
            self.seen = []

        def before_forward(self, strategy, **kwargs):
            self.seen.append((strategy.mb_x.detach().cpu(), strategy.mb_y.detach().cpu()))

    def built(name, options):
        seed_everything(0)
        config, stream, model, kind = tiny_sample()
        kind = cached_kind(kind, config.task_settings(), config.training.token_cache, stream)
        context = StrategyContext(model, kind, lr=1e-3, batch_size=8)
        return stream, kind, registry.build(name, context, options)

    stream, kind, replay = built("avalanche:replay", {"mem_size": 12, "max_grad_norm": 0.0})
    spy = Spy()
    replay.avalanche.plugins.append(spy)
    ours = run_stream(stream, replay, kind, batch_size=8, progress=False).accuracy

    chunks = [
        c for i, t in enumerate(stream.tasks) for c in batches(t.train, 8, shuffle=True, seed=i)
    ]
    assert len(spy.seen) == len(chunks)  # one joined batch per stream batch
    parts = []
    for (x, y), chunk in zip(spy.seen, chunks):
        decoded = replay.codec.decode(x)
        fields = {k: list(v) for k, v in decoded.fields.items() if k != "label"}
        records = ExampleRecords.build(**fields, label=[[int(v)] for v in y])
        stream_part = kind.encode(list(chunk)).only(kind.stored_fields)
        head = records.select(range(len(chunk)))
        for name in stream_part.names:  # the stream batch comes first, in our order
            assert all(np.array_equal(a, b) for a, b in zip(head[name], stream_part[name]))
        memory = records.select(range(len(chunk), len(records)))
        parts.append(memory if len(memory) else None)
    assert parts[0] is None and parts[-1] is not None  # joined from the second experience on

    stream, kind, er = built("er", {"memory_size": 12})
    er.writer.memory = _Recorded(parts)
    theirs = run_stream(stream, er, kind, batch_size=8, progress=False).accuracy
    assert er.writer.memory.step == len(chunks)
    np.testing.assert_allclose(ours, theirs, atol=0.5)  # as Naive and SEQ: the same updates
    assert ours[1:].max() > ours.min()  # it learnt something
