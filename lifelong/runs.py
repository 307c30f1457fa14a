"""One run end to end: build stream, model and strategy from a config, train, write the run dir.

A run directory holds ``config.yaml`` (the resolved config), ``accuracy.csv`` (the matrix R with
the untrained row b first), ``metrics.json`` and ``log.txt``. Result files are written
atomically, after the run finished, so a directory never holds a half-written result.
"""

from __future__ import annotations

import io
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from lifelong import registry
from lifelong.config import ConfigError, RunConfig, validate_strategy_options
from lifelong.encoders import load_encoder, load_tokenizer
from lifelong.heads import ClassificationHead
from lifelong.learner import StreamResult, run_stream
from lifelong.metrics import summary
from lifelong.model import Classifier, Collator
from lifelong.strategy import StrategyContext
from lifelong.utils import atomic_write_text, seed_everything
from streams.core import TaskStream
from streams.text_classification import (
    PAPER_TEST_SIZE,
    PAPER_TRAIN_SIZE,
    text_classification_stream,
)

log = logging.getLogger("lifelong")


@dataclass
class RunOutcome:
    """What `run` returns: the result, its metrics and where it was written."""

    result: StreamResult
    metrics: dict[str, float]
    run_dir: Path


def build_stream(config: RunConfig) -> TaskStream:
    """The stream a config describes. Real data defaults to the paper's 115,000 / 7,600 sizes."""
    if config.stream != "text":
        raise ConfigError(f"unknown stream {config.stream!r}; expected 'text'")
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


def build_model(config: RunConfig, num_labels: int) -> tuple[Classifier, Collator]:
    """Encoder + classification head, and the matching collator."""
    tokenizer = load_tokenizer(config.encoder)
    encoder = load_encoder(config.encoder, seed=config.seed)
    model = Classifier(encoder, ClassificationHead(encoder.hidden_size, num_labels))
    return model, Collator(tokenizer, config.max_length)


def run(config: RunConfig, *, stream: TaskStream | None = None) -> RunOutcome:
    """Run one configuration end to end and write its run directory.

    Args:
        config: The run configuration.
        stream: A prebuilt stream (otherwise built from ``config``).

    Returns:
        The accuracy matrix, the metrics and the run directory.

    """
    validate_strategy_options(config)
    registry.get(config.strategy)  # fail fast on an unknown name, before loading data
    run_dir = _new_run_dir(config)
    handler = _attach_log(run_dir / "log.txt")
    try:
        seed_everything(config.seed)
        stream = stream or build_stream(config)
        log.info("stream: %s", stream.description or ", ".join(stream.task_names))
        model, collator = build_model(config, stream.num_labels)
        context = StrategyContext(
            model,
            collator,
            stream.num_labels,
            lr=config.lr,
            batch_size=config.batch_size,
            seed=config.seed,
        )
        strategy = registry.build(config.strategy, context, config.options_for())
        log.info("strategy %s with %s", config.strategy, config.options_for() or "defaults")
        start = time.perf_counter()
        result = run_stream(
            stream,
            strategy,
            collator,
            batch_size=config.batch_size,
            eval_batch_size=config.eval_batch_size,
            seed=config.seed,
            progress=config.progress,
        )
        metrics = summary(result.accuracy, result.before)
        metrics["seconds"] = round(time.perf_counter() - start, 1)
        report = getattr(strategy, "report", None)
        if callable(report):  # strategy-specific end-of-run numbers, e.g. a write rate
            metrics["strategy"] = report()
            log.info("strategy report: %s", metrics["strategy"])
        write_results(run_dir, config, result, metrics)
        log.info("run written to %s", run_dir)
        return RunOutcome(result, metrics, run_dir)
    finally:
        for name in ("lifelong", "streams"):
            logging.getLogger(name).removeHandler(handler)
        handler.close()


def accuracy_frame(result: StreamResult) -> pd.DataFrame:
    """R as a table: the untrained row first, then one row per trained task."""
    rows = np.vstack([result.before[None, :], result.accuracy])
    index = ["before"] + [f"after {n}" for n in result.task_names]
    return pd.DataFrame(rows, index=index, columns=list(result.task_names))


def write_results(
    run_dir: Path, config: RunConfig, result: StreamResult, metrics: dict[str, float]
) -> None:
    """Write config, accuracy matrix and metrics atomically."""
    atomic_write_text(run_dir / "config.yaml", yaml.safe_dump(config.to_dict(), sort_keys=False))
    buf = io.StringIO()
    accuracy_frame(result).to_csv(buf, float_format="%.4f", index_label="row")
    atomic_write_text(run_dir / "accuracy.csv", buf.getvalue())
    atomic_write_text(run_dir / "metrics.json", json.dumps(metrics, indent=2) + "\n")


def format_report(result: StreamResult, metrics: dict[str, float]) -> str:
    """The accuracy matrix and the metrics table as plain text."""
    matrix = accuracy_frame(result).to_string(float_format=lambda x: f"{x:6.1f}")
    names = {
        "average_accuracy": "average accuracy",
        "bwt": "BWT",
        "fwt": "FWT",
        "forgetting": "forgetting",
    }
    table = "\n".join(f"  {label:<17}{metrics[key]:7.1f}" for key, label in names.items())
    for key, value in dict(metrics.get("strategy", {})).items():
        table += f"\n  {key:<17}{value:7.3g}"
    return (
        f"Accuracy matrix (%; row = after training, column = task):\n{matrix}\n\n"
        f"Metrics (points):\n{table}"
    )


def _new_run_dir(config: RunConfig) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    where = "-".join(config.tasks) if config.tasks else f"order{config.order}"
    base = (
        Path(config.output_dir)
        / f"{stamp}_{config.strategy}_{config.stream}-{where}_s{config.seed}"
    )
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}_{n}")
    path.mkdir(parents=True)
    return path


def _attach_log(path: Path) -> logging.Handler:
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.DEBUG)
    log.setLevel(logging.DEBUG)
    log.addHandler(handler)
    logging.getLogger("streams").addHandler(handler)
    logging.getLogger("streams").setLevel(logging.INFO)
    return handler
