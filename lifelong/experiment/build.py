"""What a run trains, built from its config: stream, encoder, task kind, model and strategy.

`build_run` builds what `lifelong.experiment.runs.run` trains, seeded as it seeds it, so a
probe or a notebook can inspect a trained strategy (its memory, its local adaptation). Each
section of the config goes to its component once: the stream's spec builds the stream, the
encoder section the encoder, the task section the task kind, the strategy section (parsed by
`lifelong.experiment.config.plan_run`) the strategy.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from lifelong._deprecated import deprecated_alias
from lifelong.experiment.config import (
    RunConfig,
    RunPlan,
    check_lengths,
    plan_run,
    runtime_of,
)

if TYPE_CHECKING:
    from torch import nn

    from lifelong.encoders.names import EncoderOptions
    from lifelong.model import Classifier
    from lifelong.runtime import Runtime
    from lifelong.strategy import Strategy
    from lifelong.streams.core import StreamSpec, TaskStream
    from lifelong.tasks import TaskKind
    from lifelong.tasks.settings import TaskSettings

log = logging.getLogger("lifelong")

__all__ = [
    "BuiltRun",
    "build_model",
    "build_planned",
    "build_run",
    "cached_kind",
    "model_and_kind",
    "name_embedder",
    "run_encoder",
    "seeded_stream",
]


def name_embedder(encoder: EncoderOptions, seed: int = 0) -> Callable[[Sequence[str]], np.ndarray]:
    """Embeds short texts (FewRel relation names): the encoder's mean token vector, unit norm.

    Mean pooling over the tokens then L2 normalisation is all-MiniLM-L6-v2's own sentence
    embedding (its sentence-transformers ``1_Pooling`` and ``Normalize`` modules), and the
    closest an offline encoder comes to Holla et al.'s mean GloVe word vector of a name. On
    the 80 FewRel relations it gives K-means clusters of 12, 12, 12, 11, 8, 8, 7, 5, 4 and 1
    relations, where the raw [CLS] vector gave 41, 10, 8, 5, 5, 3, 3, 2, 2 and 1 (``--glove``
    clusters the paper's way).
    """
    import torch

    from lifelong.encoders import load_tokenizer, tokenizer_name

    tokenizer = load_tokenizer(tokenizer_name(encoder.name))
    model = run_encoder(encoder, seed).eval()

    @torch.no_grad()
    def embed(names: Sequence[str]) -> np.ndarray:
        enc = tokenizer(list(names), padding=True, return_tensors="pt")
        hidden = model(enc["input_ids"], enc["attention_mask"]).hidden  # (n, t, d)
        mask = enc["attention_mask"][..., None].to(hidden.dtype)  # (n, t, 1)
        mean = (hidden * mask).sum(1) / mask.sum(1)  # (n, d)
        return torch.nn.functional.normalize(mean, dim=1).float().numpy()

    return embed


def run_encoder(encoder: EncoderOptions, seed: int = 0) -> nn.Module:
    """The encoder the ``encoder:`` section names (memory-augmented ones segment by segment)."""
    from lifelong.encoders import load_run_encoder

    return load_run_encoder(
        encoder.name,
        seed=seed,
        segment_length=encoder.segments,
        pooling=encoder.pooling,
        passes=encoder.document_passes,
    )


def build_model(
    encoder: EncoderOptions, settings: TaskSettings, stream: TaskStream, *, seed: int = 0
) -> tuple[Classifier, TaskKind]:
    """The task kind the stream needs, and encoder + the kind's head trained by its loss.

    The kind gives its rows segment ids (QA always, FewRel with ``segment_ids``) only when the
    encoder has segment embeddings; the memory-augmented encoders have none, and FewRel's
    ``segment_ids`` is refused for them (`ValueError`). ``max_length`` is checked against the
    loaded model's positions (`check_lengths`; a `ConfigError` before any training).
    """
    model, task, _ = model_and_kind(encoder, settings, stream.kind, stream.label_names, seed=seed)
    return model, task


def model_and_kind(
    encoder: EncoderOptions,
    settings: TaskSettings,
    kind: str,
    label_names: Sequence[str],
    *,
    seed: int,
) -> tuple[Classifier, TaskKind, TaskSettings]:
    """`build_model` for a kind and its labels; also the settings the model reads.

    The settings returned have ``token_types`` set (whether the encoder reads segment ids).
    """
    from lifelong.encoders import load_tokenizer, tokenizer_name
    from lifelong.encoders.base import reads_token_types
    from lifelong.encoders.names import limit_of_config
    from lifelong.model import Classifier
    from lifelong.tasks import build_task

    tokenizer = load_tokenizer(tokenizer_name(encoder.name))
    model = run_encoder(encoder, seed)
    model_config = getattr(getattr(model, "model", None), "config", None)
    if model_config is not None:  # a hub model first downloaded now: its limit is known now
        check_lengths(encoder, settings.max_length, limit_of_config(model_config.to_dict()))
    settings = dataclasses.replace(settings, token_types=reads_token_types(model))
    task = build_task(kind, tokenizer, tuple(label_names), settings)
    return Classifier(model, task.head(model.hidden_size), kind=task), task, settings


def cached_kind(
    task: TaskKind, settings: TaskSettings, token_cache: str, stream: TaskStream
) -> TaskKind:
    """``task`` serving every split of ``stream`` from token ids encoded once.

    The splits are read from ``token_cache`` where an earlier run on the same data (same kind,
    ``settings`` and tokenizer) wrote them, else tokenised now and written there
    (`lifelong.tasks.cache`).
    """
    from lifelong.tasks.cache import TokenCache, kind_identity, resolve_cache_dir
    from lifelong.tasks.prepared import prepare

    settings = dataclasses.replace(settings, token_types=bool(task.token_types))
    identity = kind_identity(task, task.tokenizer, settings)
    cache = TokenCache(task, identity, resolve_cache_dir(token_cache))
    cache.prepare_stream(stream)
    return prepare(task, cache=cache)


class BuiltRun(NamedTuple):
    """What a run of a config trains, built as `run` builds it, before any training.

    Attributes:
        stream: The task stream.
        kind: The task kind on the run's device, serving token ids from the token cache
            (``task`` is its deprecated name).
        strategy: The strategy, holding the model.
        runtime: The run's device and precision (``eval_batch_size``, ``prefetch``).
        model: The encoder and head the strategy trains (`lifelong.model.Classifier`;
            ``None`` where a caller built the other four itself).

    """

    stream: TaskStream
    kind: TaskKind
    strategy: Strategy
    runtime: Runtime
    model: Classifier | None = None

    @property
    def task(self) -> TaskKind:
        """Deprecated alias of `kind` ("task" names a stream's task; this is its kind)."""
        deprecated_alias("BuiltRun.task", "BuiltRun.kind")
        return self.kind


def build_run(
    config: RunConfig, *, stream: TaskStream | None = None, options: Any = None
) -> BuiltRun:
    """Build the stream, task kind, model and strategy of ``config``, seeded as `run` seeds them.

    `run` trains what this builds (`lifelong.learner.run_stream`) and writes the run directory;
    a probe or a notebook that inspects the trained strategy afterwards (its memory, its local
    adaptation) builds it here and calls ``run_stream`` itself::

        built = build_run(config)
        result = run_stream(built.stream, built.strategy, built.kind,
                            batch_size=config.training.batch_size, seed=config.training.seed,
                            runtime=built.runtime)

    Args:
        config: The run configuration.
        stream: A prebuilt stream (otherwise built from ``config``).
        options: The strategy's parsed options (default: `plan_run` checks ``config``
            first).

    Returns:
        The stream, the task kind, the strategy and the runtime.

    Raises:
        ConfigError: As `lifelong.experiment.config.plan_run`, when ``options`` is not
            given.

    """
    if options is None:
        return build_planned(plan_run(config), stream=stream)
    return _build(config, options, runtime_of(config.training), stream)


def build_planned(
    plan: RunPlan, *, stream: TaskStream | None = None, seeded: bool = False
) -> BuiltRun:
    """`build_run` from a checked config (`lifelong.experiment.config.plan_run`).

    Args:
        plan: The checked config.
        stream: A prebuilt stream (otherwise built from the config).
        seeded: ``stream`` was built by `seeded_stream` just before, nothing drawn since: the
            random generators go on from there, exactly as if it were built here.

    """
    return _build(plan.config, plan.options, plan.runtime, stream, seeded=seeded)


def seeded_stream(spec: StreamSpec, encoder: EncoderOptions, seed: int) -> TaskStream:
    """The stream of ``spec``, built as `build_run` builds it: right after seeding.

    `lifelong.experiment.runs.run` builds it before it creates the run directory, so a run
    refused for its data leaves nothing behind, then builds the rest with ``seeded=True``.

    Raises:
        DataFormatError: As the stream's loader (a file named, with the line).

    """
    from lifelong.training import seed_everything

    seed_everything(seed)
    embed = lambda names: name_embedder(encoder, seed)(names)  # noqa: E731 (loads it if called)
    return spec.build(seed, embed)  # checked when the config was built


def _build(
    config: RunConfig,
    options: Any,
    runtime: Runtime,
    stream: TaskStream | None,
    *,
    seeded: bool = False,
) -> BuiltRun:
    """Each section to its component once: stream, encoder and task, training, strategy."""
    from lifelong import registry
    from lifelong.runtime import compile_module
    from lifelong.strategy import StrategyContext
    from lifelong.tasks.prepared import on_device
    from lifelong.training import seed_everything

    settings, encoder = config.task, config.encoder  # only here: all
    choice, training = config.strategy, config.training
    seed = training.seed
    if stream is None:
        stream = seeded_stream(config.stream, encoder, seed)
    elif not seeded:
        seed_everything(seed)
    log.info("stream: %s", stream.description or ", ".join(stream.task_names))
    log.info("runtime: %s", runtime.describe())
    model, task, settings = model_and_kind(
        encoder, settings, stream.kind, stream.label_names, seed=seed
    )
    model.to(runtime.device)
    if training.compile:  # in place: parameter names and checkpoints stay the same
        compile_module(model.encoder)
        log.info("encoder compiled (torch.compile, dynamic shapes; eager under torch.func)")
    task = on_device(cached_kind(task, settings, training.token_cache, stream), runtime.device)
    context = StrategyContext(
        model,
        task,
        lr=training.lr,
        batch_size=training.batch_size,
        seed=seed,
        runtime=runtime,
        memory_index=training.memory_index,
    )
    strategy: Strategy = registry.build(choice.name, context, options)
    log.info("strategy %s with %s", choice.name, options)
    return BuiltRun(stream, task, strategy, runtime, model)
