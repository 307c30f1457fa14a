"""What MbPA++'s local adaptation does at test time: a trained MbPA++ read five ways.

    python experiments/adaptation_probe.py experiments/fewrel/real_budget.yaml \\
        --data-dir data/fewrel_cfrl --order 0 [--seed 0] [--scopes top1] [--out probe.md]
    python experiments/adaptation_probe.py experiments/text_classification/real_budget.yaml \\
        --data-dir ../shared/data/text_real --order i

It trains the sweep config's MbPA++ run of that order and seed as `lifelong sweep` would
(`lifelong.experiment.runs.build_run`: the same config, seeds and token cache, so its last row is
the sweep run's), then predicts every task's test set after the last task:

* ``no adaptation``: the trained weights as they are, without the test-time step;
* ``as run``: local adaptation on the K nearest memories at the config's scope (the run's row);
* ``oracle: own label``: the same adaptation, but on K memories of the test example's own label
  (its relation or class), drawn at random. This hands the adaptation the answer (on a
  classification head it is close to 100% by construction): an upper bound, not a method;
* ``oracle: own task``: K random memories written while the test example's task was trained
  (its dataset or cluster), whatever their labels. This reads only task identity, which is what
  the adaptation can exploit when the head holds one row per class (the earlier tasks' class
  rows, pushed down by the later tasks, are pulled back up), and what it cannot when the head
  scores (sentence, relation) pairs with one relation-agnostic logit (FewRel);
* ``--scopes``: other scopes on the nearest neighbours (e.g. ``top1``).

Per task it also says how the nearest neighbours relate to the test example: the fraction with
its label and the fraction written while its task was trained (MbPA++ writes every example, in
stream order, so a memory slot's task is known). The question it answers: when MbPA++ keeps the
earlier tasks on one stream and not on another, is it the retrieval (wrong neighbours) or the
scope (right neighbours, nothing to adapt that holds what was lost)?
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from lifelong.batch import Batch
from lifelong.experiment.runs import build_run
from lifelong.experiment.sweep import load_sweep
from lifelong.files import atomic_write_text
from lifelong.learner import run_stream
from lifelong.mechanisms.adaptation import AdaptationOptions, LocalAdapter
from lifelong.streams import batches
from lifelong.training import evaluating

STRATEGIES = ("mbpa++", "mbpa", "mbpa++-rand")

Reader = Callable[[Batch, int], torch.Tensor]  # a test batch and its task -> row scores


def slot_tasks(sizes: Sequence[int], memory_size: int, written: int, offered: int) -> np.ndarray:
    """The task each memory slot was written in, (memory_size,), for a write-all memory.

    Raises:
        ValueError: The memory is not every training example in stream order (some were not
            written or were overwritten), so a slot's task is not known.

    """
    if not (memory_size == written == offered == sum(sizes)):
        raise ValueError(
            f"the memory holds {memory_size} of {offered} offered examples ({written} writes); "
            f"the probe needs every one of the stream's {sum(sizes)} training examples written "
            "once, in stream order (write_prob 1)"
        )
    return np.repeat(np.arange(len(sizes)), sizes)


def oracle_slots(labels: np.ndarray, memory_labels: np.ndarray, k: int, seed: int) -> np.ndarray:
    """K random memory slots whose value in ``memory_labels`` is each test example's, (n, k).

    ``memory_labels`` is any per-slot value: the stored label, or the task a slot was written in.
    ``k`` is cut to the fewest memories any of these values has, so every row has the same K.
    """
    rng = np.random.default_rng(seed)
    pools = [np.flatnonzero(memory_labels == y) for y in labels]
    k = min(k, *(len(p) for p in pools))
    if k == 0:
        raise ValueError("a test example's label has no memory: no oracle neighbours")
    return np.stack([rng.choice(p, k, replace=False) for p in pools])


@dataclass(frozen=True)
class TaskRow:
    """One task's test set after the last task: accuracy per predictor, and its neighbours."""

    name: str
    test: int
    accuracy: dict[str, float]  # predictor -> percent
    same_label: float  # percent of the K nearest memories with the test example's label
    same_task: float  # percent of them written while this task was trained


@dataclass(frozen=True)
class ProbeResult:
    """The probe of one trained run: a row per task and the run's own last row."""

    title: str
    rows: list[TaskRow]
    last_row: list[float]  # the learner's final evaluation (the "as run" column's check)

    @property
    def predictors(self) -> list[str]:
        """The accuracy columns, in order."""
        return list(self.rows[0].accuracy)


def probe(
    config_path: Path,
    data_dir: str | None,
    order: str,
    seed: int,
    strategy: str,
    scopes: Sequence[str],
) -> ProbeResult:
    """Train the config's ``strategy`` run of ``order`` and ``seed``; read its final test sets.

    ``data_dir`` ``None`` keeps the config's (the bundled sample where it names none).
    """
    sweep = load_sweep(config_path)
    if data_dir is not None:
        sweep = sweep.with_run(data_dir=data_dir)
    sweep = sweep.with_grid(strategies=[strategy], orders=[order], seeds=[seed])
    config = sweep.points()[0].config
    built = build_run(config)
    stream, kind, trained = built.stream, built.kind, built.strategy
    result = run_stream(
        stream,
        trained,
        kind,
        batch_size=config.training.batch_size,
        eval_batch_size=built.runtime.eval_batch_size(config.training.eval_batch_size),
        seed=config.training.seed,
        progress=False,
        runtime=built.runtime,
    )
    adapter: LocalAdapter = trained.adapter  # type: ignore[attr-defined]
    model, writer, device = adapter.model, adapter.writer, built.runtime.device
    memory = writer.memory
    tasks_of = slot_tasks(
        [len(t.train) for t in stream], len(memory), writer.written, writer.offered
    )
    memory_labels = memory.get_array("label", np.arange(len(memory)))[:, 0]  # (m,)

    def oracle(values: np.ndarray, wanted: Callable[[Batch, int], np.ndarray]) -> Reader:
        def predict(batch: Batch, task: int) -> torch.Tensor:
            slots = oracle_slots(
                wanted(batch, task), values, adapter.options.k, config.training.seed
            )
            with evaluating(model):
                return adapter.path(device)(batch, slots)

        return predict

    def own_label(batch: Batch, task: int) -> np.ndarray:
        return np.array([int(y[0]) for y in batch.examples["label"]])

    def own_task(batch: Batch, task: int) -> np.ndarray:
        return np.full(batch.num_examples, task)

    def adapted(options: AdaptationOptions) -> Reader:
        """Scores after local adaptation with ``options`` (at ``steps=0``: the plain scores)."""
        other = LocalAdapter(model, writer, options, seed=config.training.seed)
        return lambda batch, task: other.logits(batch)

    predictors: dict[str, Reader] = {
        "no adaptation": adapted(dataclasses.replace(adapter.options, steps=0)),
        f"as run ({adapter.options.adapt_scope})": lambda batch, task: adapter.logits(batch),
        "oracle: own label": oracle(memory_labels, own_label),
        "oracle: own task": oracle(tasks_of, own_task),
    }
    for scope in scopes:
        options = dataclasses.replace(adapter.options, adapt_scope=scope)
        predictors[f"{scope}, nearest"] = adapted(options)

    rows = []
    for t, part in enumerate(stream):
        correct = dict.fromkeys(predictors, 0.0)
        same_label = same_task = 0.0
        for chunk in batches(part.test, 64):
            batch = kind(chunk)
            slots = adapter.neighbours(batch)  # (n, K)
            gold = np.array([e.label for e in chunk])  # (n,)
            same_label += float((memory_labels[slots] == gold[:, None]).mean(1).sum())
            same_task += float((tasks_of[slots] == t).mean(1).sum())
            for name, predict in predictors.items():
                correct[name] += kind.score(predict(batch, t), batch, chunk)["accuracy"]
        n = len(part.test)
        accuracy = {name: 100 * value / n for name, value in correct.items()}
        rows.append(TaskRow(part.name, n, accuracy, 100 * same_label / n, 100 * same_task / n))
    title = f"{strategy}, {config.stream.name} order {order}, seed {seed} ({config_path.name})"
    return ProbeResult(title, rows, [float(v) for v in result.accuracy[-1]])


def table(result: ProbeResult) -> str:
    """Markdown: a line per task, then pooled (over test examples) and mean (over tasks)."""
    names = result.predictors
    head = ["task", "test", *names, "neighbours: same label", "same task"]
    lines = [result.title, "", "| " + " | ".join(head) + " |", "|---" * len(head) + "|"]

    def line(cells: Sequence[str]) -> None:
        lines.append("| " + " | ".join(cells) + " |")

    for r in result.rows:
        line([r.name, str(r.test), *(f"{r.accuracy[k]:.1f}" for k in names),
              f"{r.same_label:.1f}", f"{r.same_task:.1f}"])  # fmt: skip
    total = sum(r.test for r in result.rows)
    for title, weights in (
        ("pooled", [r.test / total for r in result.rows]),
        ("mean", [1 / len(result.rows)] * len(result.rows)),
    ):

        def mean(value: Callable[[TaskRow], float], w: list[float] = weights) -> str:
            return f"{sum(wi * value(r) for wi, r in zip(w, result.rows)):.1f}"

        line([title, str(total) if title == "pooled" else "",
              *(mean(lambda r, k=k: r.accuracy[k]) for k in names),
              mean(lambda r: r.same_label), mean(lambda r: r.same_task)])  # fmt: skip
    check = ", ".join(f"{v:.1f}" for v in result.last_row)
    lines += [
        "",
        f"The run's own last row (its `as run` column, computed by the learner): {check}.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("config", type=Path, help="a sweep config (real_budget.yaml)")
    parser.add_argument("--data-dir", help="the data (default: the config's)")
    parser.add_argument("--order", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--strategy", choices=STRATEGIES, default="mbpa++")
    parser.add_argument("--scopes", default="", help="other scopes, comma-separated (top1)")
    parser.add_argument("--out", type=Path, help="also write the table here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    scopes = [s for s in args.scopes.split(",") if s]
    text = table(probe(args.config, args.data_dir, args.order, args.seed, args.strategy, scopes))
    print(text)
    if args.out:
        atomic_write_text(args.out, text + "\n")


if __name__ == "__main__":
    main()
