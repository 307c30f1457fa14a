"""Typed, frozen run configuration, checked where it enters (YAML, flags, Python).

Every key is typed (`lifelong.options`): a value outside what its key allows, an unknown key,
an unknown stream, order, dataset or encoder is an error naming the key and the value when the
config is built, before any data or model loads. Strategy options are checked against the
chosen strategy's ``Options`` by `strategy_options` (once per run, also before anything loads).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import os
import tempfile
import typing
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import yaml

from lifelong.encoders.names import (
    DEFAULT_SEGMENT_LENGTH,
    EncoderError,
    EncoderOptions,
    check_encoder_name,
    is_segmented,
    layer_count,
    offline,
    position_limit,
    segment_position_limit,
)
from lifelong.options import (
    NonNegativeInt,
    OptionsError,
    PositiveFloat,
    PositiveInt,
    Seed,
    convert,
    option_group,
)
from lifelong.tasks.settings import TaskSettings, check_settings

if TYPE_CHECKING:
    from lifelong.experiment.trackers import TrackingOptions
    from lifelong.registry import StrategyChoice
    from lifelong.runtime import Runtime
    from lifelong.streams.core import StreamSpec
    from lifelong.training import TrainingOptions

DEMO_CONFIG = Path(__file__).parent / "configs" / "demo.yaml"
"""The embedded demo: bundled sample, order i, MiniLM; what ``lifelong run`` runs by default."""


class ConfigError(ValueError):
    """A configuration file or value is invalid."""


@option_group
class RunConfig:
    """Everything that defines one run.

    Defaults are the papers' hyper-parameters where they exist (de Masson d'Autume et al., 2019,
    §4: BERT-base, 128 tokens, batch 32, Adam at 3e-5; QA windows 384 / stride 128 / 64 question
    tokens / 30 answer tokens; Holla et al., 2020, for FewRel: 10 clusters, binary pair loss);
    the demo config overrides what it needs for a CPU-sized sample.
    """

    stream: Literal["text", "qa", "fewrel"] = "text"  # text classification, QA or FewRel
    order: Literal["i", "ii", "iii", "iv"] = "i"  # paper task order (text classification, QA)
    tasks: tuple[str, ...] | None = None  # explicit dataset order (text, QA), overrides order
    data_dir: str | None = None  # real data directory; None = the bundled sample (hf: the hub)
    # "files": each stream's file layout (data_dir); "hf": Hugging Face datasets, from the hub by
    # id, or from data_dir holding save_to_disk directories or parquet files (streams.hf_datasets)
    data_source: Literal["files", "hf"] = "files"
    train_size: PositiveInt | None = None  # train examples per task (see the stream's spec)
    test_size: PositiveInt | None = None  # test examples per task (see the stream's spec)
    preprocess: Literal["none", "holla"] = "none"  # text: "holla" = Holla et al.'s (2020)
    # lower-casing and cleaning (streams.text_classification.holla_text); "none" = raw text
    encoder: str = "minilm"  # "minilm" (offline), "tiny" (random, tests), any HF name/path, or
    # a memory-augmented encoder: transformer-xl, compressive, memformer, infinity-former,
    # memoria, memorizing, ... (random init; `lifelong encoders`), or memoria-minilm and
    # rmt-minilm (on a pre-trained BERT)
    # memory-augmented encoders only: tokens per segment (None: DEFAULT_SEGMENT_LENGTH, 64);
    # set with a plain encoder it is an error (it would change nothing)
    segment_length: PositiveInt | None = None
    # what the head reads: BERT's pooler output (both references: Holla's base_models.py,
    # EM-in-LLL's BertForSequenceClassification) or the raw [CLS] state; "auto": the pooler
    # where the checkpoint has trained pooler weights (BERT), else [CLS] (MiniLM, "tiny").
    # Memory keys are always the raw [CLS] (EM-in-LLL memory.py)
    pooling: Literal["auto", "pooler", "cls"] = "auto"
    # memory-augmented encoders only: passes over each input, each from the memory the last left
    # (None: the design's own, 2 for ernie-doc's retrospective feed and readtwice, else 1)
    document_passes: PositiveInt | None = None
    max_length: PositiveInt = 128  # tokens per row (QA: per window) after truncation
    batch_size: PositiveInt = 32  # training mini-batch size in examples (MbPA++: 32)
    # evaluation batch size in examples; "auto": 64 on the CPU, 512 on a GPU (batches are
    # length-sorted, and prediction keeps no graph)
    eval_batch_size: PositiveInt | Literal["auto"] = "auto"
    lr: PositiveFloat = 3e-5  # learning rate of the main optimiser (MbPA++: 3e-5)
    seed: Seed = 0  # seeds shuffles, initialisation, memory, QA/FewRel sampling
    # (the text-classification sample is fixed: seed 42, Holla et al., 2020)
    strategy: str = "seq"  # registered strategy name (`lifelong strategies` lists them)
    strategy_options: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    # options per strategy name, e.g. {"replay": {"replay_every": 100}}; only the
    # chosen strategy's entry is used, every entry is validated against its strategy
    doc_stride: NonNegativeInt = 128  # QA: tokens shared by consecutive windows of a context
    max_query_length: PositiveInt = 64  # QA: question tokens kept
    max_answer_length: PositiveInt = 30  # QA: longest predicted answer, in tokens
    fewrel_tasks: PositiveInt = 10  # FewRel: relation clusters (tasks)
    pair_loss: Literal["binary", "softmax"] = "binary"  # FewRel: per pair (Holla) or softmax
    # FewRel: BERT segment ids on the (sentence, relation) rows; off as Holla et al. encode the
    # pairs (models/base_models.py: batch_encode_plus(..., return_token_type_ids=False)). QA
    # rows always carry them (BERT's SQuAD inputs); classification rows are single segments
    segment_ids: bool = False
    cluster_order: Seed = 0  # FewRel: seed of the cluster order (`--runs N`: 0..N-1)
    glove: str | None = None  # FewRel: GloVe file to embed relation names (default: key encoder)
    output_dir: str = "runs"  # where run directories are created
    checkpoint_every: NonNegativeInt = 0  # also checkpoint every N mini-batches (0 = task ends)
    keep_checkpoint: bool = False  # keep checkpoint.pt once the run has finished
    run_index: str | None = None  # SQLite run index; None = <output_dir>/index.sqlite
    progress: bool = True  # tqdm progress bars
    # where the run computes: "auto" (CUDA device 0 when one is visible, else the CPU), "cpu",
    # "cuda" or "cuda:N" (lifelong.runtime); a checkpoint resumes on any device
    device: str = "auto"
    # "auto": bf16 autocast on a bf16-capable CUDA device, else fp32; "fp16": autocast with
    # loss scaling, for GPUs without bf16 (lifelong.runtime)
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"
    # wrap the encoder in torch.compile (Module.compile: weights and checkpoints unchanged);
    # off by default: on 2 CPU cores it costs ~15 s of compilation per input shape and gains
    # little (experiments/bench/scale.py measures it), on a GPU it is unmeasured so far
    compile: bool = False
    # episodic memory's nearest-neighbour search: "auto" (exact while small, a recall-checked
    # IVF index when large; lifelong.memory.search.choose_index), "torch" (exact, on the run's
    # device), "Flat" (FAISS exact) or any FAISS index_factory string (e.g. "IVF1024,Flat")
    memory_index: str = "auto"
    # token ids of every split, tokenised once and reused by every run on the same data
    # (lifelong.tasks.cache): "auto" = $LIFELONG_CACHE_DIR, else ~/.cache/lifelong, /tokens;
    # "off" = tokenise once per run, in memory only; or a directory
    token_cache: str = "auto"
    # experiment trackers (lifelong.experiment.trackers): any of tensorboard, wandb, mlflow, csv
    loggers: tuple[str, ...] = ()
    tracking_uri: str | None = None  # mlflow: tracking URI; None = file:<output_dir>/mlruns
    wandb_mode: Literal["offline", "online"] = "offline"  # wandb: offline needs no network
    log_group: str | None = None  # tracker group (W&B group, MLflow experiment); sweeps: name

    def check(self) -> None:
        """Each section checked by its owner, then what ties sections; nothing is loaded."""
        from lifelong.experiment.trackers import TrackerError
        from lifelong.streams.core import UnknownNameError

        parts = self.sections()
        try:
            parts.stream.check()
        except (UnknownNameError, ValueError) as err:
            raise OptionsError(f"key 'tasks': {err}") from None
        try:
            parts.training.check()
            parts.encoder.check(parts.task.max_length)
        except ValueError as err:
            raise OptionsError(str(err)) from None
        try:
            parts.tracking.check()
        except TrackerError as err:
            raise OptionsError(f"key 'loggers': {err}") from None
        if self.data_source == "hf" and importlib.util.find_spec("datasets") is None:
            raise OptionsError(
                "key 'data_source': 'hf' needs the Hugging Face datasets package: "
                "pip install 'lifelong[hf]'"
            )
        if parts.task.segment_ids and not parts.encoder.has_segment_embeddings:
            raise OptionsError(
                f"key 'segment_ids': encoder {self.encoder!r} has no segment embeddings; "
                "segment ids need a BERT-style encoder"
            )
        try:
            check_settings(parts.stream.kind, parts.task)
        except ValueError as err:
            raise OptionsError(f"{err} (stream {self.stream!r})") from None

    def sections(self) -> Sections:
        """The config as its components receive it: each section typed by its owner.

        Only the run function opens the whole config; every builder gets its section
        (`Sections`).
        """
        from lifelong.experiment.trackers import TrackingOptions
        from lifelong.registry import StrategyChoice
        from lifelong.training import TrainingOptions

        def section(name: str, cls: type) -> Any:
            return cls(**{field: getattr(self, key) for field, key in section_keys()[name].items()})

        return Sections(
            stream=self.stream_spec(),
            task=section("task", TaskSettings),
            encoder=section("encoder", EncoderOptions),
            strategy=section("strategy", StrategyChoice),
            training=section("training", TrainingOptions),
            tracking=section("tracking", TrackingOptions),
        )

    @property
    def segments(self) -> int:
        """Tokens per segment of a memory-augmented encoder (``segment_length`` or 64)."""
        return self.segment_length or DEFAULT_SEGMENT_LENGTH

    def options_for(self, strategy: str | None = None) -> dict[str, Any]:
        """The option values given for ``strategy`` (default: the configured one)."""
        return dict(self.strategy_options.get(strategy or self.strategy, {}))

    def task_settings(self, *, token_types: bool = True) -> TaskSettings:
        """The ``task:`` section, with whether the encoder reads segment ids.

        Args:
            token_types: Whether the encoder reads segment ids (`reads_token_types`; known
                once it is built, not a config key).

        """
        keys = section_keys()["task"]
        return TaskSettings(
            **{field: getattr(self, key) for field, key in keys.items()}, token_types=token_types
        )

    def stream_spec(self) -> StreamSpec:
        """The stream's spec from the keys it reads (`lifelong.streams.registry`).

        Raises:
            OptionsError: A key only other streams read is set away from its default (it
                would change nothing), naming the key and the keys this stream reads.

        """
        from lifelong.streams.registry import spec_keys, stream_keys, stream_spec

        own = spec_keys(self.stream)
        for key, readers in stream_keys().items():
            if key not in own and getattr(self, key) != _DEFAULTS[key]:
                raise OptionsError(
                    f"key {key!r}: read by the {' and '.join(readers)} stream(s), not by "
                    f"{self.stream!r}, which reads {', '.join(own)}"
                )
        return stream_spec(self.stream, **{key: getattr(self, key) for key in own})

    @property
    def order_key(self) -> str:
        """The key a sweep's ``orders`` axis sets (the stream's, e.g. FewRel's cluster_order)."""
        return self.stream_spec().order_key

    @property
    def order_label(self) -> str:
        """The task order in words: ``orderi``, a dataset list, or FewRel's cluster order."""
        return self.stream_spec().order_label

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python form, one flat mapping of every key (the run index, trackers, sweeps)."""
        out = dataclasses.asdict(self)
        out["tasks"] = list(self.tasks) if self.tasks else None
        out["loggers"] = list(self.loggers)
        out["strategy_options"] = {k: dict(v) for k, v in self.strategy_options.items()}
        return out

    def to_sections(self) -> dict[str, dict[str, Any]]:
        """Plain-Python form by section, as a run directory's ``config.yaml`` holds it.

        The ``stream:`` section holds the chosen stream's keys only.
        """
        from lifelong.streams.registry import spec_keys

        flat, keys = self.to_dict(), section_keys()
        own = {"name", *spec_keys(self.stream)}
        out = {}
        for section, fields in keys.items():
            chosen = own if section == "stream" else fields
            out[section] = {field: flat[key] for field, key in fields.items() if field in chosen}
        return out

    def replace(self, where: str = "overrides", **changes: Any) -> RunConfig:
        """A copy with ``changes`` applied (checked like YAML values; errors name ``where``)."""
        return from_dict({**self.to_dict(), **changes}, where=where)


_DEFAULTS = {
    f.name: f.default for f in dataclasses.fields(RunConfig) if f.default is not dataclasses.MISSING
}


class Sections(NamedTuple):
    """A run config as its components receive it: one section each, typed by its owner.

    Attributes:
        stream: The stream's own spec (`lifelong.streams.registry`: TextSpec, QASpec, FewRelSpec).
        task: How the task kind makes rows (`lifelong.tasks.settings.TaskSettings`).
        encoder: Which encoder and how it reads (`lifelong.encoders.names.EncoderOptions`).
        strategy: The strategy and its options (`lifelong.registry.StrategyChoice`).
        training: Optimisation, seed, device, checkpoints (`lifelong.training.TrainingOptions`).
        tracking: Outputs and trackers (`lifelong.experiment.trackers.TrackingOptions`).

    """

    stream: StreamSpec
    task: TaskSettings
    encoder: EncoderOptions
    strategy: StrategyChoice
    training: TrainingOptions
    tracking: TrackingOptions


_RENAMED = {
    ("stream", "name"): "stream",
    ("encoder", "name"): "encoder",
    ("strategy", "name"): "strategy",
    ("strategy", "options"): "strategy_options",
}
"""Section fields whose flat key differs from the field's name."""


_FLAT_NAMES = frozenset({"stream", "encoder", "strategy"})
"""Section names that are also old flat keys (the name of the stream, encoder, strategy)."""


@functools.cache
def section_keys() -> dict[str, dict[str, str]]:
    """Section -> {its field: the flat `RunConfig` key}, from the owners' classes.

    The ``stream:`` section takes every stream's keys here; the chosen stream reads its own
    (`RunConfig.stream_spec` refuses the others' set away from their defaults).
    """
    from lifelong.experiment.trackers import TrackingOptions
    from lifelong.registry import StrategyChoice
    from lifelong.streams.registry import stream_keys
    from lifelong.training import TrainingOptions

    keys = {"stream": {"name": "stream", **{key: key for key in stream_keys()}}}
    owners = {
        "task": TaskSettings,
        "encoder": EncoderOptions,
        "strategy": StrategyChoice,
        "training": TrainingOptions,
        "tracking": TrackingOptions,
    }
    for section, cls in owners.items():
        keys[section] = {
            f.name: _RENAMED.get((section, f.name), f.name)
            for f in dataclasses.fields(cls)
            if f.name != "token_types"  # the encoder's, not a config key
        }
    return keys


def flatten(values: Mapping[str, Any], where: str = "config") -> dict[str, Any]:
    """Sectioned config values as flat `RunConfig` keys; flat (old) keys pass as they are.

    ``training: {lr: 1e-4}`` becomes ``lr: 1e-4``, ``strategy: {name: replay, options: {...}}``
    becomes ``strategy`` and ``strategy_options``. A mapping under ``stream``, ``encoder`` or
    ``strategy`` is that section; a string there is the old flat key (the name).

    Raises:
        ConfigError: A section holds a key it does not own (the section's keys are listed), a
            key is given twice (flat and in a section), or a section is not a mapping.

    """
    keys = section_keys()
    out: dict[str, Any] = {}

    def put(key: str, value: Any, given: str) -> None:
        if key in out:
            raise ConfigError(f"{where}: key {given!r} is given twice (flat and in a section)")
        out[key] = value

    for key, value in values.items():
        if key in keys and (isinstance(value, Mapping) or key not in _FLAT_NAMES):
            if not isinstance(value, Mapping):
                raise ConfigError(
                    f"{where}: section {key!r} must be a mapping of its keys "
                    f"({', '.join(keys[key])}), got {value!r}"
                )
            for field, inner in value.items():
                if field not in keys[key]:
                    raise ConfigError(
                        f"{where}: unknown key '{key}.{field}'; the {key} section's keys: "
                        f"{', '.join(keys[key])}"
                    )
                put(keys[key][field], inner, f"{key}.{field}")
        else:
            put(key, value, key)
    return out


def from_dict(values: Mapping[str, Any], *, where: str = "config") -> RunConfig:
    """Build a `RunConfig` from a mapping, converting and checking every value.

    Raises:
        ConfigError: An unknown key (named, with the valid ones), or a value its key does not
            allow (the key, the value and what is allowed).

    """
    if not isinstance(values, Mapping):
        raise ConfigError(
            f"{where}: expected a mapping of config keys, got {type(values).__name__}"
        )
    values = flatten(values, where)
    fields = {f.name for f in dataclasses.fields(RunConfig)}
    hints = typing.get_type_hints(RunConfig, include_extras=True)
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        if key not in fields:
            raise ConfigError(
                f"{where}: unknown key {key!r}; valid keys: {', '.join(sorted(fields))}"
            )
        try:
            if key == "tasks":
                kwargs[key] = _tasks(value, where)
            elif key == "loggers":
                kwargs[key] = _names(value, key, "logger names", where)
            elif key == "strategy_options":
                kwargs[key] = _strategy_options(value, where)
            else:
                kwargs[key] = convert(value, hints[key], f"{where}: key {key!r}")
        except OptionsError as err:
            raise ConfigError(str(err)) from None
    try:
        return RunConfig(**kwargs)
    except OptionsError as err:
        raise ConfigError(f"{where}: {str(err).removeprefix('RunConfig: ')}") from None


def _names(value: Any, key: str, what: str, where: str) -> tuple[str, ...]:
    """A list of names, or one comma-separated string of them (``tasks``, ``loggers``)."""
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        value = [t.strip() for t in value.split(",") if t.strip()]
    if not isinstance(value, list | tuple) or not all(isinstance(t, str) for t in value):
        raise ConfigError(f"{where}: key {key!r} must be a list of {what}, got {value!r}")
    return tuple(value)


def _tasks(value: Any, where: str) -> tuple[str, ...] | None:
    """``tasks``: ``None`` (the order's tasks) or at least one name; empty is an error."""
    if value is None:
        return None
    names = _names(value, "tasks", "dataset names", where)
    if not names:
        raise ConfigError(
            f"{where}: key 'tasks': {value!r} names no dataset; give at least one, or leave "
            "tasks out (null) for the order's tasks"
        )
    return names


def _strategy_options(value: Any, where: str) -> dict[str, dict[str, Any]]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(v, Mapping) for v in value.values()):
        raise ConfigError(
            f"{where}: key 'strategy_options' must map strategy names to option mappings"
        )
    return {str(k): dict(v) for k, v in value.items()}


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (YAML keeps the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if isinstance(key, Hashable) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"key {key!r} is given twice (lines {seen[key]} and {line}); keep one",
                    key_node.start_mark,
                )
            if isinstance(key, Hashable):
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


def read_yaml(path: str | Path, what: str = "config") -> Any:
    """Parse a YAML file (UTF-8, a byte-order mark allowed).

    Raises:
        ConfigError: The file is missing or unreadable, not UTF-8, not valid YAML, or gives a
            key twice in one mapping; the message names the file (and the line).

    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: {what} file not found")
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as err:
        raise ConfigError(f"{path}: cannot read the {what} file: {err.strerror}") from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}{_yaml_problem(err)}") from None
    except RecursionError:
        raise ConfigError(f"{path}: invalid YAML: nested too deeply for a {what} file") from None


def _yaml_problem(err: yaml.YAMLError) -> str:
    """``:LINE:COLUMN: invalid YAML: what`` in one line (PyYAML's own message takes several)."""
    mark = getattr(err, "problem_mark", None)
    where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    context = getattr(err, "context", None)
    return f"{where}: invalid YAML: {f'{context}, ' if context else ''}{problem}"


def load_yaml(path: str | Path) -> RunConfig:
    """Load a `RunConfig` from a YAML file (errors name the file).

    Raises:
        ConfigError: As `read_yaml`; an empty file (it would silently be the defaults); or
            a key or value `from_dict` refuses.

    """
    values = read_yaml(path)
    if values is None:
        raise ConfigError(
            f"{path}: the config file is empty; give at least one key (an empty mapping, "
            "{}, runs the built-in defaults on purpose)"
        )
    return from_dict(values, where=str(path))


def load_run_config(path: str | Path) -> RunConfig:
    """Load a run directory's ``config.yaml``, flat (earlier versions) or by section.

    Runs started before ``segment_length`` became optional saved it (64) whatever the
    encoder; with a plain encoder that value meant nothing and is dropped, so those runs still
    resume. Anything else is checked as `load_yaml` checks it.
    """
    values = read_yaml(path)
    if values is None:
        raise ConfigError(f"{path}: the run's config file is empty")
    if isinstance(values, Mapping):
        values = flatten(values, where=str(path))
        if not is_segmented(str(values.get("encoder", "minilm"))):
            if values.get("segment_length") == DEFAULT_SEGMENT_LENGTH:
                values = {k: v for k, v in values.items() if k != "segment_length"}
    return from_dict(values, where=str(path))


def preflight(config: RunConfig) -> Any:
    """What a run checks before it creates anything: the encoder and the device, the options.

    A paper config naming ``bert-base-uncased`` or ``device: cuda`` is valid anywhere; only
    running it offline without the model in the Hugging Face cache, or on a machine without
    that device, is refused, here, in one line. Each check reads one section.

    Returns:
        The chosen strategy's parsed options (see `strategy_options`).

    Raises:
        ConfigError: The encoder cannot load here, ``max_length`` exceeds its positions, the
            device or precision is not available here, or a strategy option is not allowed.

    """
    stream, task, encoder, strategy, training, tracking = config.sections()
    try:
        check_encoder_name(encoder.name)
    except EncoderError as err:
        raise ConfigError(f"key 'encoder': {err}") from None
    check_lengths(encoder, task.max_length)
    check_sources(stream)
    check_tracking(tracking)
    check_memory_index(training.memory_index, runtime_of(training).device)
    options = strategy_options(strategy)
    check_scopes(options, encoder.name)
    check_outputs(tracking)  # last: it creates output_dir
    return options


SCOPE_OPTIONS = ("adapt_scope", "meta_scope")
"""Strategy options naming what a local adaptation adapts (`lifelong.scopes.Scope`)."""


def check_scopes(options: Any, encoder: str) -> None:
    """A ``top<N>`` scope within the encoder's layers, said before the model loads.

    Raises:
        ConfigError: Naming the option, the scope and the encoder's layers (where its
            ``config.json`` is at hand: `layer_count`; otherwise the model's load checks it).

    """
    from lifelong.scopes import check_scope

    layers = layer_count(encoder)
    if layers is None:
        return
    for key in SCOPE_OPTIONS:
        value = getattr(options, key, None)
        if isinstance(value, str):
            try:
                check_scope(value, layers)
            except ValueError as err:
                raise ConfigError(
                    f"strategy option {key!r}: {err} (encoder {encoder!r} has {layers} layers)"
                ) from None


def check_sources(stream: StreamSpec) -> None:
    """Refuse a missing data directory or GloVe file, or the hub where it is off limits.

    Raises:
        ConfigError: ``data_dir`` is not a directory; ``glove`` is not a file;
            ``data_source: hf`` without ``data_dir`` in offline mode.

    """
    data_dir = stream.data_dir
    if data_dir is not None and not Path(data_dir).expanduser().is_dir():
        raise ConfigError(
            f"key 'data_dir': {data_dir}: no such directory (leave it out for the bundled sample)"
        )
    glove = getattr(stream, "glove", None)
    if glove is not None and not Path(glove).expanduser().is_file():
        raise ConfigError(f"key 'glove': {glove}: no such file (a GloVe text file is expected)")
    if stream.data_source == "hf" and data_dir is None and datasets_offline():
        raise ConfigError(
            "key 'data_dir': data_source 'hf' without a data directory reads the Hugging Face "
            "hub, which offline mode (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE) forbids; pass "
            "--data-dir DIR holding <dataset>/ as save_to_disk directories or parquet files"
        )


def check_tracking(tracking: TrackingOptions) -> None:
    """Refuse an unreachable MLflow tracker now, not after minutes of MLflow's retries.

    Raises:
        ConfigError: An ``http(s)`` MLflow ``tracking_uri`` that does not answer within a few
            seconds.

    """
    if "mlflow" in tracking.loggers and tracking.tracking_uri:
        from lifelong.experiment.trackers import TrackerError, check_tracking_uri

        try:
            check_tracking_uri(tracking.tracking_uri)
        except TrackerError as err:
            raise ConfigError(f"key 'tracking_uri': {err}") from None


def datasets_offline() -> bool:
    """Whether the ``datasets`` library may not reach the hub (its or the hub's offline flag)."""
    flag = os.environ.get("HF_DATASETS_OFFLINE", "").lower() in ("1", "true", "yes", "on")
    return flag or offline()


def check_outputs(tracking: TrackingOptions) -> None:
    """``output_dir`` (and the run index's folder) exist as writable directories, or can.

    Raises:
        ConfigError: A file is in the way, or the directory cannot be created or written
            (read-only file system, permissions), naming the key, the path and the reason.

    """
    index = Path(tracking.run_index).parent if tracking.run_index else None
    for key, folder in (("output_dir", Path(tracking.output_dir)), ("run_index", index)):
        if folder is None:
            continue
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=folder):
                pass  # a real write: os.access says yes to root on a read-only mount
        except FileExistsError:
            raise ConfigError(f"key {key!r}: {folder} is a file, not a directory") from None
        except OSError as err:
            raise ConfigError(
                f"key {key!r}: cannot write in {folder} ({err.strerror or err}); choose "
                "a writable directory"
            ) from None


def check_lengths(encoder: EncoderOptions, max_length: int, limit: int | None = None) -> None:
    """``max_length`` (or a Memoria segment) within the encoder's positions, said before loading.

    Args:
        encoder: The ``encoder:`` section.
        max_length: The task's tokens per row.
        limit: The encoder's position limit if already known (a loaded model's); default: read
            from its ``config.json`` where one is at hand (`position_limit`).

    Raises:
        ConfigError: Naming the key, the value and the encoder's limit.

    """
    if encoder.segmented:
        limit = segment_position_limit(encoder.name)
        if limit is not None and encoder.segments > limit:
            raise ConfigError(
                f"key 'segment_length': {encoder.segments} tokens per segment is above the "
                f"{limit} positions of the BERT that encoder {encoder.name!r} reads each "
                f"segment with; use --segment-length {limit} or less"
            )
        return
    limit = position_limit(encoder.name) if limit is None else limit
    if limit is not None and max_length > limit:
        raise ConfigError(
            f"key 'max_length': {max_length} tokens is above encoder {encoder.name!r}'s limit "
            f"of {limit} positions (max_position_embeddings); use --max-length {limit} or less, "
            "or a memory-augmented encoder that reads long inputs segment by segment (e.g. "
            "--encoder memoria-minilm --segment-length 64)"
        )


def check_memory_index(memory_index: str, device: Any) -> None:
    """The memory's FAISS index on the run's device: faiss-gpu must take what goes to the GPU.

    Raises:
        ConfigError: As `lifelong.memory.search.check_gpu_index`, naming the key.

    """
    from lifelong.memory.search import check_gpu_index

    try:
        check_gpu_index(memory_index, device)
    except ValueError as err:
        raise ConfigError(f"key 'memory_index': {err}") from None


def runtime_of(training: TrainingOptions) -> Runtime:
    """The device and precision the ``training:`` section asks for, resolved on this machine.

    Raises:
        ConfigError: A CUDA device this machine lacks, or bf16 where the device has none.

    """
    from lifelong.runtime import DeviceError, Runtime

    try:
        return Runtime.resolve(training.device, training.precision)
    except DeviceError as err:
        raise ConfigError(f"keys 'device'/'precision': {err}") from None


def strategy_options(strategy: StrategyChoice) -> Any:
    """The chosen strategy's options, parsed and checked; every other entry is checked too.

    Called once per run, before any data or model loads.

    Raises:
        ConfigError: An unknown strategy, an unknown option or a value not allowed (named).

    """
    from lifelong import registry

    try:
        return strategy.parse()
    except (OptionsError, registry.UnknownStrategyError) as err:
        raise ConfigError(str(err)) from None
