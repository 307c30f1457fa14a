"""One run end to end: build stream, model and strategy from a config, train, write the run dir.

A run directory holds ``config.yaml`` (the resolved config, written when the run starts),
``accuracy.csv`` (the matrix R with the untrained row b first), ``metrics.json`` (written last:
its presence means the run finished), ``log.txt`` and, while the run is in progress,
``checkpoint.pt``. Every file is written atomically, so a directory never holds a half-written
one; `resume` continues a killed run from its checkpoint. Each run is a row in the run index
(`lifelong.index`).
"""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
import yaml
from torch import nn

from lifelong import registry
from lifelong.checkpoint import (
    CHECKPOINT_NAME,
    Checkpoint,
    Checkpointer,
    load_checkpoint,
    remove_stale_temporaries,
    restore_random_states,
)
from lifelong.config import ConfigError, RunConfig, load_yaml, validate_strategy_options
from lifelong.encoders import load_tokenizer
from lifelong.encoders.factory import load_run_encoder, tokenizer_name
from lifelong.heads import ClassificationHead, SpanHead
from lifelong.index import RunIndex, default_index_path
from lifelong.learner import StreamResult, run_stream
from lifelong.metrics import summary
from lifelong.model import Classifier, Collator, PairCollator, QACollator
from lifelong.strategy import Strategy, StrategyContext
from lifelong.utils import atomic_write_text, seed_everything
from streams.core import TaskStream
from streams.fewrel import fewrel_stream
from streams.qa import qa_stream
from streams.text_classification import (
    PAPER_TEST_SIZE,
    PAPER_TRAIN_SIZE,
    text_classification_stream,
)

log = logging.getLogger("lifelong")

RESULT_FILES = ("config.yaml", "accuracy.csv", "metrics.json")


@dataclass
class RunOutcome:
    """What `run` returns: the result, its metrics and where it was written."""

    result: StreamResult
    metrics: dict[str, float]
    run_dir: Path


STREAMS = ("text", "qa", "fewrel")


def build_stream(config: RunConfig) -> TaskStream:
    """The stream a config describes. Real data defaults to the paper's 115,000 / 7,600 sizes."""
    if config.stream not in STREAMS:
        raise ConfigError(f"unknown stream {config.stream!r}; expected one of {STREAMS}")
    if config.stream == "fewrel":
        return fewrel_stream(
            data_dir=config.data_dir,
            n_tasks=config.fewrel_tasks,
            seed=config.seed,
            order_seed=config.cluster_order,
            embed=None if config.glove else name_embedder(config),
            glove=config.glove,
            train_size=config.train_size,
            test_size=config.test_size,
        )
    if config.stream == "qa":
        return qa_stream(
            config.order,
            tasks=config.tasks,
            data_dir=config.data_dir,
            train_size=config.train_size,
            test_size=config.test_size,
            seed=config.seed,
        )
    real = config.data_dir is not None
    train = config.train_size if config.train_size or not real else PAPER_TRAIN_SIZE
    test = config.test_size if config.test_size or not real else PAPER_TEST_SIZE
    return text_classification_stream(
        config.order,
        tasks=config.tasks,
        data_dir=config.data_dir,
        train_size=train,
        test_size=test,
        seed=config.seed,
    )


def name_embedder(config: RunConfig) -> Callable[[Sequence[str]], np.ndarray]:
    """Embeds short texts (FewRel relation names) with the key encoder: the [CLS] vector."""
    tokenizer = load_tokenizer(tokenizer_name(config.encoder))
    encoder = run_encoder(config).eval()

    @torch.no_grad()
    def embed(names: Sequence[str]) -> np.ndarray:
        enc = tokenizer(list(names), padding=True, return_tensors="pt")
        return encoder(enc["input_ids"], enc["attention_mask"]).pooled.float().numpy()  # (n, d)

    return embed


def run_encoder(config: RunConfig) -> nn.Module:
    """The encoder ``config.encoder`` names (memory-augmented ones segment by segment)."""
    return load_run_encoder(config.encoder, seed=config.seed, segment_length=config.segment_length)


def build_model(config: RunConfig, stream: TaskStream) -> tuple[Classifier, Collator]:
    """Encoder + head, and the collator matching the stream's kind.

    Classification: a linear head over the merged label space. Relation extraction: a two-way
    head over "sentence [SEP] relation name" pairs (`PairCollator`), the binary loss per pair of
    Holla et al. (2020); evaluation picks each sentence's best-scoring candidate. QA: a span
    head over context windows (`QACollator`; ``max_length`` tokens per window).
    """
    tokenizer = load_tokenizer(tokenizer_name(config.encoder))
    encoder = run_encoder(config)
    if stream.kind == "qa":
        collator = QACollator(
            tokenizer,
            config.max_length,
            config.doc_stride,
            config.max_query_length,
            config.max_answer_length,
        )
        return Classifier(encoder, SpanHead(encoder.hidden_size)), collator
    head = ClassificationHead(encoder.hidden_size, head_size(stream))
    model = Classifier(encoder, head, pair_loss=config.pair_loss)
    if stream.kind == "relation":
        return model, PairCollator(tokenizer, stream.label_names, config.max_length)
    return model, Collator(tokenizer, config.max_length)


def head_size(stream: TaskStream) -> int:
    """Outputs of the head: the label space, 2 (gold / not) for relation pairs and spans."""
    return 2 if stream.kind in ("relation", "qa") else stream.num_labels


def run(
    config: RunConfig, *, stream: TaskStream | None = None, run_dir: str | Path | None = None
) -> RunOutcome:
    """Run one configuration end to end and write its run directory.

    The run is recorded in the run index (``config.run_index``, default
    ``<output_dir>/index.sqlite``) and checkpointed (see `lifelong.checkpoint`), so that
    `resume` can continue it if it is killed.

    Args:
        config: The run configuration.
        stream: A prebuilt stream (otherwise built from ``config``).
        run_dir: The run directory to use (created if missing; sweeps name their runs);
            default: a new timestamped directory under ``config.output_dir``.

    Returns:
        The accuracy matrix, the metrics and the run directory.

    """
    validate_strategy_options(config)
    registry.get(config.strategy)  # fail fast on an unknown name, before loading data
    index_path = Path(config.run_index or default_index_path(config.output_dir)).resolve()
    config = config.replace(run_index=str(index_path))
    if run_dir is None:
        run_dir = _new_run_dir(config)
    else:
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run_dir / "config.yaml", yaml.safe_dump(config.to_dict(), sort_keys=False))
    return _execute(config, run_dir, stream, checkpoint=None)


def resume(
    run_dir: str | Path, *, stream: TaskStream | None = None, progress: bool | None = None
) -> RunOutcome:
    """Continue a run from its directory: from its checkpoint, or from the start if none.

    A run that already finished (results written, no checkpoint left) is not run again: its
    results are read back and its index row is marked finished if a kill left it running.

    Args:
        run_dir: A directory `run` created (it holds ``config.yaml``).
        stream: A prebuilt stream (otherwise built from the run's config).
        progress: Override the config's progress-bar setting.

    Raises:
        ConfigError: ``run_dir`` holds no run config.
        CheckpointError: The checkpoint is unreadable.

    """
    run_dir = Path(run_dir)
    if not (run_dir / "config.yaml").is_file():
        raise ConfigError(f"{run_dir}: not a run directory (no config.yaml)")
    config = load_yaml(run_dir / "config.yaml")
    if progress is not None:
        config = config.replace(progress=progress)
    remove_stale_temporaries(run_dir)
    has_checkpoint = (run_dir / CHECKPOINT_NAME).is_file()
    if not has_checkpoint and is_finished(run_dir):
        outcome = RunOutcome(read_result(run_dir), _read_metrics(run_dir), run_dir)
        index = _open_index(config)
        if (row := index.get(run_dir)) is None or row["status"] != "finished":
            index.start(run_dir, config.to_dict())
            index.finish(run_dir, outcome.metrics)
        return outcome
    checkpoint = load_checkpoint(run_dir) if has_checkpoint else None
    return _execute(config, run_dir, stream, checkpoint=checkpoint)


def is_finished(run_dir: str | Path) -> bool:
    """Whether a run directory holds a finished run's results."""
    return all((Path(run_dir) / name).is_file() for name in RESULT_FILES)


def _execute(
    config: RunConfig,
    run_dir: Path,
    stream: TaskStream | None,
    *,
    checkpoint: Checkpoint | None,
) -> RunOutcome:
    index = _open_index(config)
    handler = _attach_log(run_dir / "log.txt")
    index.start(run_dir, config.to_dict())
    try:
        seed_everything(config.seed)
        stream = stream or build_stream(config)
        log.info("stream: %s", stream.description or ", ".join(stream.task_names))
        strategy, collator = _build_strategy(config, stream)
        log.info("strategy %s with %s", config.strategy, config.options_for() or "defaults")
        start = None
        if checkpoint is not None:
            strategy.load_state_dict(checkpoint.strategy)
            restore_random_states(checkpoint.rng)
            start = checkpoint.position
            log.info("resumed at task %d, mini-batch %d", start.task, start.step)
        began = time.perf_counter()
        result = run_stream(
            stream,
            strategy,
            collator,
            batch_size=config.batch_size,
            eval_batch_size=config.eval_batch_size,
            seed=config.seed,
            progress=config.progress,
            checkpointer=Checkpointer(run_dir, config.checkpoint_every),
            start=start,
        )
        metrics = summary(result.accuracy, result.before)
        metrics["metric"] = result.metric  # what R holds: accuracy, or F1 for QA
        for name, rows in result.secondary.items():  # e.g. QA's final average exact match
            metrics[f"average_{name}"] = round(float(rows[-1].mean()), 4)
        metrics["seconds"] = round(time.perf_counter() - began, 1)
        report = getattr(strategy, "report", None)
        if callable(report):  # strategy-specific end-of-run numbers, e.g. a write rate
            metrics["strategy"] = report()
            log.info("strategy report: %s", metrics["strategy"])
        write_results(run_dir, config, result, metrics)
        index.finish(run_dir, metrics)
        if not config.keep_checkpoint:
            (run_dir / CHECKPOINT_NAME).unlink(missing_ok=True)
        log.info("run written to %s", run_dir)
        return RunOutcome(result, metrics, run_dir)
    except Exception as err:
        index.fail(run_dir, f"{type(err).__name__}: {err}")
        raise
    finally:
        for name in ("lifelong", "streams"):
            logging.getLogger(name).removeHandler(handler)
        handler.close()


def _build_strategy(config: RunConfig, stream: TaskStream) -> tuple[Strategy, Collator]:
    model, collator = build_model(config, stream)
    context = StrategyContext(
        model,
        collator,
        head_size(stream),
        lr=config.lr,
        batch_size=config.batch_size,
        seed=config.seed,
        key_position=1 if stream.kind == "qa" else None,  # QA keys: the first question token
    )
    return registry.build(config.strategy, context, config.options_for()), collator


def _open_index(config: RunConfig) -> RunIndex:
    return RunIndex(config.run_index or default_index_path(config.output_dir))


def read_result(run_dir: str | Path) -> StreamResult:
    """The accuracy matrix of a finished run, read back from its ``accuracy.csv``."""
    path = Path(run_dir) / "accuracy.csv"
    frame = pd.read_csv(path, index_col="row")
    if frame.index[0] != "before" or len(frame) != len(frame.columns) + 1:
        raise ConfigError(f"{path}: expected a 'before' row then one row per task")
    values = frame.to_numpy(dtype=float)
    return StreamResult(tuple(frame.columns), values[1:], values[0])


def _read_metrics(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "metrics.json").read_text())


def accuracy_frame(result: StreamResult, rows: np.ndarray | None = None) -> pd.DataFrame:
    """R (or ``rows``, (T + 1, T)) as a table: the untrained row, then one row per task."""
    if rows is None:
        rows = np.vstack([result.before[None, :], result.accuracy])
    index = ["before"] + [f"after {n}" for n in result.task_names]
    return pd.DataFrame(rows, index=index, columns=list(result.task_names))


METRIC_LABELS = {"accuracy": "Accuracy", "f1": "F1", "exact_match": "Exact match"}


def write_results(
    run_dir: Path, config: RunConfig, result: StreamResult, metrics: dict[str, float]
) -> None:
    """Write config, the matrices and metrics atomically, ``metrics.json`` last.

    ``accuracy.csv`` holds R, the stream's main metric (accuracy; F1 for QA, as
    ``metrics.json``'s ``"metric"`` says); other metrics get their own file (``exact_match.csv``).
    """
    atomic_write_text(run_dir / "config.yaml", yaml.safe_dump(config.to_dict(), sort_keys=False))
    for name, frame in [("accuracy", accuracy_frame(result))] + [
        (name, accuracy_frame(result, rows)) for name, rows in result.secondary.items()
    ]:
        buf = io.StringIO()
        frame.to_csv(buf, float_format="%.4f", index_label="row")
        atomic_write_text(run_dir / f"{name}.csv", buf.getvalue())
    atomic_write_text(run_dir / "metrics.json", json.dumps(metrics, indent=2) + "\n")


def format_report(result: StreamResult, metrics: dict[str, float]) -> str:
    """The matrices (accuracy, or F1 and exact match for QA) and the metrics table as text."""
    matrices = [(result.metric, accuracy_frame(result))] + [
        (name, accuracy_frame(result, rows)) for name, rows in result.secondary.items()
    ]
    text = "\n\n".join(
        f"{METRIC_LABELS.get(name, name)} matrix (%; row = after training, column = task):\n"
        + frame.to_string(float_format=lambda x: f"{x:6.1f}")
        for name, frame in matrices
    )
    names = {
        "average_accuracy": "average accuracy",
        "bwt": "BWT",
        "fwt": "FWT",
        "forgetting": "forgetting",
    }
    table = "\n".join(f"  {label:<17}{metrics[key]:7.1f}" for key, label in names.items())
    for key, value in dict(metrics.get("strategy", {})).items():
        table += f"\n  {key:<17}{value:7.3g}"
    if result.metric != "accuracy":
        table = f"  (from the {METRIC_LABELS.get(result.metric, result.metric)} matrix)\n" + table
    return f"{text}\n\nMetrics (points):\n{table}"


def _new_run_dir(config: RunConfig) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    where = "-".join(config.tasks) if config.tasks else f"order{config.order}"
    if config.stream == "fewrel":
        where = f"clusters{config.fewrel_tasks}-o{config.cluster_order}"
    base = (
        Path(config.output_dir)
        / f"{stamp}_{config.strategy}_{config.stream}-{where}_s{config.seed}"
    )
    base.parent.mkdir(parents=True, exist_ok=True)
    path, n = base, 1
    while True:  # mkdir, not exists(): two processes starting together get different names
        try:
            path.mkdir()
            return path
        except FileExistsError:
            n += 1
            path = base.with_name(f"{base.name}_{n}")


def _attach_log(path: Path) -> logging.Handler:
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.DEBUG)
    log.setLevel(logging.DEBUG)
    log.addHandler(handler)
    logging.getLogger("streams").addHandler(handler)
    logging.getLogger("streams").setLevel(logging.INFO)
    return handler
