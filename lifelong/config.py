"""Typed, frozen run configuration, loaded from YAML; an unknown key is an error naming it."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from lifelong.strategy import OptionsError, _convert

DEMO_CONFIG = Path(__file__).parent / "configs" / "demo.yaml"
"""The embedded demo: bundled sample, order i, MiniLM; what ``lifelong run`` runs by default."""


class ConfigError(ValueError):
    """A configuration file or value is invalid."""


@dataclass(frozen=True)
class RunConfig:
    """Everything that defines one run.

    Defaults are the paper's hyper-parameters where they exist; the demo config overrides what it
    needs for a CPU-sized sample.
    """

    stream: str = "text"  # "text" (classification), "qa" or "fewrel" (relation extraction)
    order: str = "i"  # paper task order i..iv (text classification, QA)
    tasks: tuple[str, ...] | None = None  # explicit task order, overrides `order`
    data_dir: str | None = None  # real data directory; None = the bundled sample
    train_size: int | None = None  # train examples per task; None = paper default / all rows
    test_size: int | None = None  # test examples per task; None = paper default / all rows
    encoder: str = "minilm"  # "minilm" (offline), "tiny" (random, tests), any HF name/path, or
    # a memory-augmented encoder: transformer-xl, compressive, memformer, infinity-former,
    # memoria, memorizing (random init), memoria-minilm / memoria-tiny (on a pre-trained BERT)
    segment_length: int = 64  # memory-augmented encoders: tokens per segment
    max_length: int = 128  # tokens per input after truncation
    batch_size: int = 32  # training mini-batch size (MbPA++: 32)
    eval_batch_size: int = 64  # evaluation batch size
    lr: float = 3e-5  # learning rate of the main optimiser (MbPA++: 3e-5)
    seed: int = 0  # seeds sampling, shuffles, initialisation and memory
    strategy: str = "seq"  # registered strategy name (`lifelong strategies` lists them)
    strategy_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # options per strategy name, e.g. {"replay": {"replay_every": 100}}; only the
    # chosen strategy's entry is used, every entry is validated against its strategy
    doc_stride: int = 128  # QA: tokens shared by consecutive windows of a context
    max_query_length: int = 64  # QA: question tokens kept
    max_answer_length: int = 30  # QA: longest predicted answer, in tokens
    fewrel_tasks: int = 10  # FewRel: relation clusters (tasks)
    pair_loss: str = "binary"  # FewRel: "binary" per pair (Holla et al.) or "softmax" per sentence
    cluster_order: int = 0  # FewRel: seed of the cluster order (`--runs N` uses 0..N-1)
    glove: str | None = None  # FewRel: GloVe file to embed relation names (default: key encoder)
    output_dir: str = "runs"  # where run directories are created
    checkpoint_every: int = 0  # also checkpoint every N training mini-batches (0 = task ends)
    keep_checkpoint: bool = False  # keep checkpoint.pt once the run has finished
    run_index: str | None = None  # SQLite run index; None = <output_dir>/index.sqlite
    progress: bool = True  # tqdm progress bars

    def options_for(self, strategy: str | None = None) -> dict[str, Any]:
        """The options given for ``strategy`` (default: the configured one)."""
        return dict(self.strategy_options.get(strategy or self.strategy, {}))

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python form (for YAML/JSON)."""
        out = dataclasses.asdict(self)
        out["tasks"] = list(self.tasks) if self.tasks else None
        out["strategy_options"] = {k: dict(v) for k, v in self.strategy_options.items()}
        return out

    def replace(self, **changes: Any) -> RunConfig:
        """A copy with ``changes`` applied (validated like YAML values)."""
        return from_dict({**self.to_dict(), **changes}, where="overrides")


def from_dict(values: Mapping[str, Any], *, where: str = "config") -> RunConfig:
    """Build a `RunConfig` from a mapping, converting and checking every value.

    Raises:
        ConfigError: An unknown key (named, with the valid ones) or a value of the wrong type.

    """
    if not isinstance(values, Mapping):
        raise ConfigError(
            f"{where}: expected a mapping of config keys, got {type(values).__name__}"
        )
    fields = {f.name for f in dataclasses.fields(RunConfig)}
    hints = typing.get_type_hints(RunConfig)
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        if key not in fields:
            raise ConfigError(
                f"{where}: unknown key {key!r}; valid keys: {', '.join(sorted(fields))}"
            )
        if key == "tasks":
            kwargs[key] = _tasks(value, where)
        elif key == "strategy_options":
            kwargs[key] = _strategy_options(value, where)
        else:
            try:
                kwargs[key] = _convert(value, hints[key], f"{where}: key {key!r}")
            except OptionsError as err:
                raise ConfigError(str(err)) from None
    return RunConfig(**kwargs)


def _tasks(value: Any, where: str) -> tuple[str, ...] | None:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        value = [t.strip() for t in value.split(",") if t.strip()]
    if not isinstance(value, list | tuple) or not all(isinstance(t, str) for t in value):
        raise ConfigError(f"{where}: key 'tasks' must be a list of dataset names, got {value!r}")
    return tuple(value)


def _strategy_options(value: Any, where: str) -> dict[str, dict[str, Any]]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(v, Mapping) for v in value.values()):
        raise ConfigError(
            f"{where}: key 'strategy_options' must map strategy names to option mappings"
        )
    return {str(k): dict(v) for k, v in value.items()}


def load_yaml(path: str | Path) -> RunConfig:
    """Load a `RunConfig` from a YAML file (errors name the file)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    try:
        values = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: invalid YAML: {err}") from None
    return from_dict(values, where=str(path))


def validate_strategy_options(config: RunConfig) -> None:
    """Check every ``strategy_options`` entry against its registered strategy's options."""
    from lifelong import registry
    from lifelong.strategy import parse_options

    for name, options in config.strategy_options.items():
        try:
            parse_options(registry.options_class(name), options, owner=f"strategy {name!r}")
        except (OptionsError, registry.UnknownStrategyError) as err:
            raise ConfigError(f"strategy_options: {err}") from None
