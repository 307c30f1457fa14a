"""The run configuration: one typed section per component, checked where it enters.

A `RunConfig` is its sections, each a frozen dataclass owned by the component that reads it,
as torchtune's configs are:

========== ================================================ ===================================
section    class (owner)                                    what it holds
========== ================================================ ===================================
stream     the stream's spec (`lifelong.streams.registry`)  which data, its order and sizes
task       `lifelong.tasks.settings.TaskSettings`           how examples become rows
encoder    `lifelong.encoders.names.EncoderOptions`         which encoder and how it reads
strategy   `lifelong.registry.StrategyChoice`               the strategy and its options
training   `lifelong.training_options.TrainingOptions`      optimisation, seed, device
tracking   `lifelong.experiment.trackers.TrackingOptions`   outputs and trackers
========== ================================================ ===================================

Each key is declared once, as a field of its section: its type (`lifelong.options`), default
and description (the class's ``Attributes:``). `config_keys` enumerates them; the command line
(`lifelong.experiment.cli`) is generated from it, and `FLAT_KEYS` (the one alias table) maps
the old flat dialect (``lr: 1e-4`` for ``training: {lr: 1e-4}``), which still loads, with one
line naming each key's new place.

Every value is checked when the config is built: a value outside what its key allows, an
unknown key, stream, order, dataset or encoder is an error naming the key and the value, before
any data or model loads. Strategy options are checked against the chosen strategy's
``Options`` by `strategy_options` (once per run, also before anything loads).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import logging
import os
import tempfile
import typing
from collections.abc import Hashable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import yaml

from lifelong.encoders.names import (
    DEFAULT_SEGMENT_LENGTH,
    ENCODERS,
    EncoderError,
    EncoderOptions,
    check_encoder_name,
    is_segmented,
    layer_count,
    offline,
    position_limit,
    segment_position_limit,
)
from lifelong.experiment.trackers import TrackingOptions
from lifelong.options import OptionsError, convert, did_you_mean, field_docs
from lifelong.registry import StrategyChoice
from lifelong.streams.core import StreamSpec
from lifelong.streams.registry import STREAMS, stream_keys
from lifelong.tasks.settings import TaskSettings, check_settings
from lifelong.training_options import TrainingOptions

if TYPE_CHECKING:
    from lifelong.runtime import Runtime

log = logging.getLogger(__name__)

DEMO_CONFIG = Path(__file__).parent / "configs" / "demo.yaml"
"""The embedded demo: bundled sample, order i, MiniLM; what ``lifelong run`` runs by default."""


class ConfigError(ValueError):
    """A configuration file or value is invalid."""


SECTIONS: dict[str, type] = {
    "task": TaskSettings,
    "encoder": EncoderOptions,
    "strategy": StrategyChoice,
    "training": TrainingOptions,
    "tracking": TrackingOptions,
}
"""Section name -> its owner's class; ``stream`` is the chosen stream's spec (`STREAMS`)."""

SECTION_NAMES = ("stream", *SECTIONS)
"""Every section, in the order a run's ``config.yaml`` lists them."""

_RENAMED = {
    ("stream", "name"): "stream",
    ("encoder", "name"): "encoder",
    ("strategy", "name"): "strategy",
    ("strategy", "options"): "strategy_options",
}
"""Section fields whose flat key (and flag) is not the field's name: a ``name`` is its section's."""


class Key(NamedTuple):
    """One config key, as its section declares it.

    Attributes:
        name: The key's flat name: its ``--flag`` (underscores as dashes, unless ``flag``
            differs) and its name in errors and in the run index.
        section: The section holding it.
        field: Its field in that section.
        hint: Its type (`lifelong.options`: ranges, choices).
        default: Its default.
        doc: Its description, from the section's docstring.
        streams: The streams that read it (empty: every stream).
        flag: The command-line flag's name, without dashes (``logger`` for ``loggers``).
        metadata: The field's metadata (e.g. ``logger``: read only with that tracker on).

    """

    name: str
    section: str
    field: str
    hint: Any
    default: Any
    doc: str
    streams: tuple[str, ...]
    flag: str
    metadata: Mapping[str, Any] = {}


@functools.cache
def config_keys() -> dict[str, Key]:
    """Every config key by its flat name, read from the sections' classes (nothing listed here).

    The ``stream`` section holds every stream's keys; each stream reads its own (`Key.streams`).
    """
    readers = stream_keys()
    titles = ", ".join(f"{name} ({getattr(spec, 'title', name)})" for name, spec in STREAMS.items())
    keys = {
        "stream": Key(
            "stream",
            "stream",
            "name",
            Literal[tuple(STREAMS)],  # type: ignore[valid-type]
            "text",
            f"The task stream: {titles}.",
            (),
            "stream",
            {},
        )
    }
    owners: list[tuple[str, type]] = [("stream", spec) for spec in STREAMS.values()]
    for section, cls in [*owners, *SECTIONS.items()]:
        hints = typing.get_type_hints(cls, include_extras=True)
        docs = field_docs(cls)
        for f in dataclasses.fields(cls):
            name = _RENAMED.get((section, f.name), f.name)
            if f.metadata.get("key", True) is False or name in keys:
                continue
            streams = readers.get(f.name, ()) if section == "stream" else ()
            streams = f.metadata.get("streams", () if len(streams) == len(STREAMS) else streams)
            default = f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[misc]
            flag = f.metadata.get("flag", name)
            doc = docs.get(f.name, "")
            keys[name] = Key(
                name, section, f.name, hints[f.name], default, doc, streams, flag, f.metadata
            )
    return keys


FLAT_KEYS: Mapping[str, str] = {k.name: f"{k.section}.{k.field}" for k in config_keys().values()}
"""The one alias table: an old flat key -> its place (``lr`` -> ``training.lr``)."""


def _default_section(name: str) -> Any:
    return STREAMS["text"]() if name == "stream" else SECTIONS[name]()


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Everything that defines one run: one section per component.

    Each section may be given as its class, a mapping of its fields, or, for ``stream``,
    ``encoder`` and ``strategy``, a name::

        RunConfig(stream="qa", encoder="tiny", training={"lr": 1e-3})

    Defaults are the papers' hyper-parameters where they exist (de Masson d'Autume et al., 2019,
    §4: BERT-base, 128 tokens, batch 32, Adam at 3e-5; QA windows 384 / stride 128 / 64 question
    tokens / 30 answer tokens; Holla et al., 2020, for FewRel: 10 clusters, binary pair loss);
    ``lifelong run``'s demo config overrides what it needs for a CPU-sized sample.

    Attributes:
        stream: The stream's spec (`lifelong.streams.registry`: TextSpec, QASpec, FewRelSpec).
        task: How the task kind makes rows (`lifelong.tasks.settings.TaskSettings`).
        encoder: Which encoder and how it reads (`lifelong.encoders.names.EncoderOptions`).
        strategy: The strategy and its options (`lifelong.registry.StrategyChoice`).
        training: Optimisation, seed, device, checkpoints
            (`lifelong.training_options.TrainingOptions`).
        tracking: Outputs and trackers (`lifelong.experiment.trackers.TrackingOptions`).

    Raises:
        OptionsError: A value its key does not allow, an unknown key or stream, or keys that
            do not fit together (named).

    """

    stream: StreamSpec = dataclasses.field(default_factory=lambda: _default_section("stream"))
    task: TaskSettings = dataclasses.field(default_factory=TaskSettings)
    encoder: EncoderOptions = dataclasses.field(default_factory=EncoderOptions)
    strategy: StrategyChoice = dataclasses.field(default_factory=StrategyChoice)
    training: TrainingOptions = dataclasses.field(default_factory=TrainingOptions)
    tracking: TrackingOptions = dataclasses.field(default_factory=TrackingOptions)

    def __post_init__(self) -> None:
        for name in SECTION_NAMES:
            object.__setattr__(self, name, build_section(name, getattr(self, name)))
        self.check()

    def check(self) -> None:
        """Each section checked by its owner, then what ties sections; nothing is loaded."""
        from lifelong.experiment.trackers import TrackerError
        from lifelong.streams.core import UnknownNameError

        try:
            self.stream.check()
        except (UnknownNameError, ValueError) as err:
            raise OptionsError(f"key 'tasks': {err}") from None
        try:
            self.training.check()
            self.encoder.check(self.task.max_length)
        except ValueError as err:
            raise OptionsError(str(err)) from None
        try:
            self.tracking.check()
        except TrackerError as err:
            raise OptionsError(f"key 'loggers': {err}") from None
        if self.stream.data_source == "hf" and importlib.util.find_spec("datasets") is None:
            raise OptionsError(
                "key 'data_source': 'hf' needs the Hugging Face datasets package: "
                "pip install 'lifelong[hf]'"
            )
        if self.task.segment_ids and not self.encoder.has_segment_embeddings:
            raise OptionsError(
                f"key 'segment_ids': encoder {self.encoder.name!r} has no segment embeddings; "
                "segment ids need a BERT-style encoder"
            )
        try:
            check_settings(self.stream.kind, self.task)
        except ValueError as err:
            raise OptionsError(f"{err} (stream {self.stream.name!r})") from None

    @classmethod
    def demo(cls, **changes: Any) -> RunConfig:
        """The demo config: what ``lifelong run`` runs with no ``--config`` (`DEMO_CONFIG`).

        ``RunConfig()`` holds each key's own default (SEQ, the papers' learning rate 3e-5);
        the command line starts from the demo (REPLAY, lr 1e-4, batch 16, gradients clipped
        at 1). This is the same starting point in Python, with flat-key ``changes`` on top
        (``RunConfig.demo(strategy="mbpa++", order="ii")`` is ``lifelong run --strategy
        mbpa++ --order ii``).
        """
        config = load_yaml(DEMO_CONFIG)
        return config.replace("RunConfig.demo", **changes) if changes else config

    def options_for(self, strategy: str | None = None) -> dict[str, Any]:
        """The option values given for ``strategy`` (default: the configured one)."""
        return self.strategy.options_for(strategy)

    def task_settings(self, *, token_types: bool = True) -> TaskSettings:
        """The ``task`` section, with whether the encoder reads segment ids.

        Args:
            token_types: Whether the encoder reads segment ids (`reads_token_types`; known
                once it is built, not a config key).

        """
        return dataclasses.replace(self.task, token_types=token_types)

    @property
    def order_key(self) -> str:
        """The key a sweep's ``orders`` axis sets (the stream's, e.g. FewRel's cluster_order)."""
        return self.stream.order_key

    @property
    def order_label(self) -> str:
        """The task order in words: ``orderi``, a dataset list, or FewRel's cluster order."""
        return self.stream.order_label

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python form, one flat mapping by key name (the run index, trackers, sweeps).

        Holds the chosen stream's keys and every other section's (`config_keys`).
        """
        own = _spec_fields(self.stream.name)
        out = {}
        for key in config_keys().values():
            if key.section == "stream" and key.field not in own:
                continue  # another stream's key
            section = getattr(self, key.section)
            out[key.name] = _plain(getattr(section, key.field))
        return out

    def to_sections(self) -> dict[str, dict[str, Any]]:
        """Plain-Python form by section, as a run directory's ``config.yaml`` holds it.

        The ``stream:`` section holds the chosen stream's keys only.
        """
        return sections_of(self.to_dict())

    def replace(self, where: str = "overrides", **changes: Any) -> RunConfig:
        """A copy with ``changes`` applied: flat key names (``lr=1e-4``, `config_keys`).

        Values are checked like YAML values; errors name ``where``. Use `merge` for sectioned
        changes.
        """
        return self.merge(changes, where=where)

    def merge(self, changes: Mapping[str, Any], where: str = "overrides") -> RunConfig:
        """A copy with ``changes`` applied: sectioned (``{"training": {"lr": 1e-4}}``) or flat.

        A change of stream keeps the keys the new stream also reads.
        """
        values = self.to_sections()
        for section, fields in sectioned(changes, where).items():
            if (
                section == "stream"
                and fields.get("name", values["stream"]["name"]) != self.stream.name
            ):
                values["stream"] = {
                    k: v for k, v in values["stream"].items() if k in _spec_fields(fields["name"])
                }
            values[section] = {**values[section], **fields}
        return from_dict(values, where=where)


def sections_of(record: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A flat record (`RunConfig.to_dict`) by section, as ``config.yaml`` holds it."""
    out: dict[str, dict[str, Any]] = {name: {} for name in SECTION_NAMES}
    for key in config_keys().values():
        if key.name in record:
            out[key.section][key.field] = record[key.name]
    return out


def _plain(value: Any) -> Any:
    """A section's value as plain YAML data (tuples as lists, mappings as dicts)."""
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _fields_of(section: Any) -> dict[str, Any]:
    """A section instance's config keys by field (not `NOT_A_KEY` fields)."""
    return {
        f.name: getattr(section, f.name)
        for f in dataclasses.fields(section)
        if f.metadata.get("key", True)
    }


def _spec_fields(stream: str) -> set[str]:
    cls = STREAMS.get(stream)
    return {"name", *(f.name for f in dataclasses.fields(cls))} if cls else {"name"}  # type: ignore[arg-type]


def build_section(name: str, value: Any, where: str = "") -> Any:
    """Section ``name`` from its class, a mapping of its fields, or a name; every value checked.

    Raises:
        OptionsError: An unknown key (with the section's keys), a key only other streams read
            set away from its default, or a value its key does not allow (named).

    """
    prefix = f"{where}: " if where else ""
    if isinstance(value, str) and (name == "stream" or name in ("encoder", "strategy")):
        value = {"name": value}
    elif name == "stream" and isinstance(value, tuple(STREAMS.values())):
        value = {"name": value.name, **_fields_of(value)}
    elif name != "stream" and isinstance(value, SECTIONS[name]):
        value = _fields_of(value)
    if not isinstance(value, Mapping):
        raise OptionsError(
            f"{prefix}section {name!r} must be a mapping of its keys "
            f"({', '.join(k.field for k in _section_keys(name))}), got {value!r}"
        )
    if name == "stream":
        return _build_stream(value, prefix)
    cls = SECTIONS[name]
    keys = {k.field: k for k in _section_keys(name)}
    kwargs = {}
    for field, raw in value.items():
        if field not in keys:
            raise OptionsError(
                f"{prefix}unknown key '{name}.{field}'{_placed(field, keys)}; the {name} "
                f"section's keys: {', '.join(keys)}"
            )
        kwargs[field] = _convert(keys[field], raw, prefix)
    return cls(**kwargs)


def _placed(field: str, keys: Iterable[str]) -> str:
    """Where a key given in the wrong section belongs, or the section's key it resembles."""
    for key in config_keys().values():
        if key.field == field and key.field != "name":
            return f" (it belongs in the {key.section} section: {key.section}.{field})"
    return did_you_mean(field, keys)


def _build_stream(value: Mapping[str, Any], prefix: str) -> StreamSpec:
    from lifelong.streams.registry import spec_class

    name = value.get("name", "text")
    if not isinstance(name, str) or name not in STREAMS:  # a list or mapping is no name either
        raise OptionsError(
            f"{prefix}key 'stream': {name!r} is not allowed; expected one of {', '.join(STREAMS)}"
        )
    cls = spec_class(name)
    own = _spec_fields(name)
    keys = {k.field: k for k in _section_keys("stream")}
    kwargs = {}
    for field, raw in value.items():
        if field == "name":
            continue
        if field not in keys:
            raise OptionsError(
                f"{prefix}unknown key 'stream.{field}'{_placed(field, keys)}; the stream "
                f"section's keys: {', '.join(keys)}"
            )
        converted = _convert(keys[field], raw, prefix)
        if field in own:
            kwargs[field] = converted
        elif converted != keys[field].default:
            raise OptionsError(
                f"{prefix}key {field!r}: read by the {' and '.join(keys[field].streams)} "
                f"stream(s), not by {name!r}, which reads {', '.join(sorted(own - {'name'}))}"
            )
    return cls(**kwargs)


def _section_keys(section: str) -> list[Key]:
    return [k for k in config_keys().values() if k.section == section]


def _convert(key: Key, value: Any, prefix: str) -> Any:
    """``value`` as ``key``'s type; lists of names may be one comma-separated string."""
    where = f"{prefix}key {key.name!r}"
    if key.name == "tasks":
        return _tasks(value, where)
    if key.name == "strategy_options":
        return _strategy_options(value, where)
    if typing.get_origin(key.hint) is tuple:
        return _names(value, where)
    return convert(value, key.hint, where)


def sectioned(values: Mapping[str, Any], where: str = "config") -> dict[str, dict[str, Any]]:
    """Config values by section; a flat (old) key goes to its section by `FLAT_KEYS`.

    A mapping under ``stream``, ``encoder`` or ``strategy`` is that section; a string there is
    the old flat key (the name).

    Raises:
        ConfigError: An unknown key (the sections and flat keys listed), a key given twice
            (flat and in a section), or a section that is not a mapping.

    """
    if not isinstance(values, Mapping):
        raise ConfigError(
            f"{where}: expected a mapping of config keys, got {type(values).__name__}"
        )
    keys = config_keys()
    out: dict[str, dict[str, Any]] = {}
    given: dict[tuple[str, str], str] = {}

    def put(section: str, field: str, value: Any, name: str) -> None:
        if (section, field) in given:
            raise ConfigError(
                f"{where}: key {name!r} is given twice ({given[section, field]} and {name})"
            )
        given[section, field] = name
        out.setdefault(section, {})[field] = value

    for name, value in values.items():
        if name in SECTION_NAMES and isinstance(value, Mapping):
            for field, inner in value.items():
                put(name, str(field), inner, f"{name}.{field}")
        elif name in keys:
            put(keys[name].section, keys[name].field, value, name)
        elif name in SECTION_NAMES:
            raise ConfigError(
                f"{where}: section {name!r} must be a mapping of its keys "
                f"({', '.join(k.field for k in _section_keys(name))}), got {value!r}"
            )
        else:
            raise ConfigError(
                f"{where}: unknown key {name!r}{did_you_mean(name, [*SECTION_NAMES, *keys])}; "
                f"sections: {', '.join(SECTION_NAMES)} (or the old flat keys: "
                f"{', '.join(sorted(keys))})"
            )
    return out


def flatten(values: Mapping[str, Any], where: str = "config") -> dict[str, Any]:
    """Config values (by section or flat) as flat key names (`FLAT_KEYS`), unchecked.

    What reports read from a run directory's ``config.yaml`` (``{"lr": 1e-4, ...}``).

    Raises:
        ConfigError: As `sectioned`.

    """
    names = {(k.section, k.field): k.name for k in config_keys().values()}
    return {
        names[section, field]: value
        for section, fields in sectioned(values, where).items()
        for field, value in fields.items()
        if (section, field) in names
    }


def flat_keys_in(values: Any) -> list[str]:
    """The old flat keys a config mapping uses (`FLAT_KEYS`), in its order."""
    if not isinstance(values, Mapping):
        return []
    keys = config_keys()
    return [
        str(k)
        for k, v in values.items()
        if k in keys and not (k in SECTION_NAMES and isinstance(v, Mapping))
    ]


def moved_keys_note(values: Any, where: str) -> str | None:
    """One line naming each flat key's new place, or None for a sectioned config."""
    flat = flat_keys_in(values)
    if not flat:
        return None
    places = ", ".join(f"{k} -> {FLAT_KEYS[k]}" for k in flat)
    return f"{where}: flat keys still load but belong in sections: {places}"


def from_dict(values: Mapping[str, Any], *, where: str = "config") -> RunConfig:
    """Build a `RunConfig` from a mapping by section (or flat keys), converting every value.

    Raises:
        ConfigError: An unknown key (named, with the valid ones), or a value its key does not
            allow (the key, the value and what is allowed).

    """
    parts = sectioned(values, where)
    try:
        built = {name: build_section(name, parts.get(name, {})) for name in SECTION_NAMES}
        return RunConfig(**built)
    except OptionsError as err:
        raise ConfigError(f"{where}: {err}") from None


def _names(value: Any, where: str) -> tuple[str, ...]:
    """A list of names, or one comma-separated string of them (``tasks``, ``loggers``)."""
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        value = [t.strip() for t in value.split(",") if t.strip()]
    if not isinstance(value, list | tuple) or not all(isinstance(t, str) for t in value):
        raise OptionsError(f"{where} must be a list of names, got {value!r}")
    return tuple(value)


def _tasks(value: Any, where: str) -> tuple[str, ...] | None:
    """``tasks``: ``None`` (the order's tasks) or at least one name; empty is an error."""
    if value is None:
        return None
    names = _names(value, where)
    if not names:
        raise OptionsError(
            f"{where}: {value!r} names no dataset; give at least one, or leave "
            "tasks out (null) for the order's tasks"
        )
    return names


def _strategy_options(value: Any, where: str) -> dict[str, dict[str, Any]]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(v, Mapping) for v in value.values()):
        raise OptionsError(f"{where} must map strategy names to option mappings")
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
    return config_from_yaml(read_yaml(path), str(path))


def config_from_yaml(values: Any, where: str) -> RunConfig:
    """`load_yaml` of values already read (`read_yaml`); ``where`` names the file in errors."""
    if values is None:
        raise ConfigError(
            f"{where}: the config file is empty; give at least one key (an empty mapping, "
            "{}, runs the built-in defaults on purpose)"
        )
    note = moved_keys_note(values, where)
    if note:
        log.warning(note)
    return from_dict(values, where=where)


def load_run_config(path: str | Path) -> RunConfig:
    """Load a run directory's ``config.yaml``, by section or flat (earlier versions, silently).

    Runs started before ``segment_length`` became optional saved it (64) whatever the
    encoder; with a plain encoder that value meant nothing and is dropped, so those runs still
    resume. Anything else is checked as `load_yaml` checks it.
    """
    values = read_yaml(path)
    if values is None:
        raise ConfigError(f"{path}: the run's config file is empty")
    parts = sectioned(values, where=str(path))
    encoder = parts.get("encoder", {})
    if not is_segmented(str(encoder.get("name", "minilm"))):
        if encoder.get("segment_length") == DEFAULT_SEGMENT_LENGTH:
            del encoder["segment_length"]
    return from_dict(parts, where=str(path))


RESUME_MAY_CHANGE = frozenset(
    {
        *("device", "precision", "compile"),  # where and how fast it computes
        *("checkpoint_every", "keep_checkpoint", "progress", "probe"),  # bookkeeping, probes
        *("output_dir", "run_index", "token_cache", "save_model"),  # places, what is kept
        *("loggers", "tracking_uri", "wandb_mode", "log_group"),  # trackers
    }
)
"""Run-config keys a resume may find changed: none of them changes what the run computes.

Every other key (strategy and its options, stream, tasks, sizes, encoder, learning rate,
seed, ...) is what the checkpoint was trained as, and must be as it was."""


def trained_as_record(record: Mapping[str, Any], strategy: str) -> dict[str, Any]:
    """What a checkpoint stores of a flat record (`RunConfig.to_dict`) it was trained as.

    The keys outside `RESUME_MAY_CHANGE`; of ``strategy_options`` only ``strategy``'s entry
    (the others are not read).
    """
    out = {k: v for k, v in record.items() if k not in RESUME_MAY_CHANGE}
    out["strategy_options"] = dict(record["strategy_options"].get(strategy, {}))
    return out


class RunPlan(NamedTuple):
    """A checked run config and what a run reads of it, each derived once (`plan_run`).

    `lifelong.experiment.runs.run` hands each piece to the one place that reads it: the
    record to the run index and trackers, the sections to ``config.yaml``, the options and
    runtime to the build, ``trained_as`` to the checkpoints.

    Attributes:
        config: The config as given.
        options: The chosen strategy's parsed options (`strategy_options`).
        runtime: The device and precision, resolved on this machine (`runtime_of`).
        index_path: The run index: ``tracking.run_index``, else ``<output_dir>/index.sqlite``,
            absolute.
        record: The flat record (`RunConfig.to_dict`) with ``run_index`` resolved: what the
            run index and the trackers hold.
        sections: The record by section: what the run directory's ``config.yaml`` holds.
        trained_as: What checkpoints store of it (`trained_as_record`).
        label: The stream's order in words (the run directory's name).

    """

    config: RunConfig
    options: Any
    runtime: Runtime
    index_path: Path
    record: dict[str, Any]
    sections: dict[str, dict[str, Any]]
    trained_as: dict[str, Any]
    label: str


def plan_run(config: RunConfig) -> RunPlan:
    """Check ``config`` before a run creates anything, and derive what the run reads of it.

    A paper config naming ``bert-base-uncased`` or ``device: cuda`` is valid anywhere; only
    running it offline without the model in the Hugging Face cache, or on a machine without
    that device, is refused, here, in one line. The config's own checks run first; then each
    section goes once to its component (the strategy's options to the registry, the stream's
    order label to its spec); ``output_dir`` is created last.

    Raises:
        ConfigError: The encoder cannot load here, ``max_length`` exceeds its positions, the
            device or precision is not available here, or a strategy option is not allowed.

    """
    from lifelong import registry
    from lifelong.experiment.index import default_index_path

    stream, task, encoder = config.stream, config.task, config.encoder
    strategy, training, tracking = config.strategy, config.training, config.tracking
    index_path = Path(tracking.run_index or default_index_path(tracking.output_dir)).resolve()
    record = {**config.to_dict(), "run_index": str(index_path)}
    try:
        check_encoder_name(encoder.name)
    except EncoderError as err:
        raise ConfigError(f"key 'encoder': {err}") from None
    check_lengths(encoder, task.max_length)
    check_sources(stream)
    check_tracking(tracking)
    runtime = runtime_of(training)
    check_memory_index(training.memory_index, runtime.device)
    try:  # the strategy section, to the registry
        options = strategy.parse()
    except (OptionsError, registry.UnknownStrategyError) as err:
        raise ConfigError(str(err)) from None
    check_scopes(options, encoder.name)
    check_kind(strategy.name, stream.kind, stream.name)
    if training.probe and stream.kind != "classification":
        raise ConfigError(
            f"--probe fits a classifier per task on classification streams; the {stream.name} "
            f"stream's tasks are {stream.kind}"
        )
    label = stream.order_label  # the stream section, to its spec
    check_outputs(tracking.output_dir, str(index_path))  # last: it creates output_dir
    entry = ENCODERS.get(encoder.name)
    if entry is not None and entry.plumbing_only:  # once every check passed: refusals stay one line
        log.info(
            "encoder %r is random (for testing the plumbing): its scores mean nothing; "
            "--encoder minilm learns (the demo: about 85 s on 2 cores)",
            encoder.name,
        )
    return RunPlan(
        config,
        options,
        runtime,
        index_path,
        record,
        sections_of(record),
        trained_as_record(record, strategy.name),
        label,
    )


def preflight(config: RunConfig) -> Any:
    """What a run checks before it creates anything (`plan_run`): the strategy's options.

    Returns:
        The chosen strategy's parsed options (see `strategy_options`).

    Raises:
        ConfigError: As `plan_run`.

    """
    return plan_run(config).options


def check_kind(strategy: str, kind: str, stream: str) -> None:
    """The strategy runs on the stream's task kind (its ``kinds``), said before anything loads.

    Raises:
        ConfigError: Naming the strategy, the kinds it runs on and the stream.

    """
    from lifelong import registry
    from lifelong.strategy import supports

    cls = registry.get(strategy)
    if not supports(cls, kind):
        raise ConfigError(
            f"strategy {strategy!r} runs on {' and '.join(cls.kinds)} streams; the {stream} "
            f"stream's tasks are {kind}"
        )


SCOPE_OPTIONS = ("adapt_scope", "meta_scope")
"""Strategy options naming what a local adaptation adapts (`lifelong.mechanisms.scopes.Scope`)."""


def check_scopes(options: Any, encoder: str) -> None:
    """A ``top<N>`` scope within the encoder's layers, said before the model loads.

    Raises:
        ConfigError: Naming the option, the scope and the encoder's layers (where its
            ``config.json`` is at hand: `layer_count`; otherwise the model's load checks it).

    """
    from lifelong.mechanisms.scopes import check_scope

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


def check_outputs(output_dir: str, run_index: str | None = None) -> None:
    """``output_dir`` (and the run index's folder) exist as writable directories, or can.

    Args:
        output_dir: The ``output_dir`` key.
        run_index: The ``run_index`` key (its folder is checked), if set.

    Raises:
        ConfigError: A file is in the way, or the directory cannot be created or written
            (read-only file system, permissions), naming the key, the path and the reason.

    """
    index = Path(run_index).parent if run_index else None
    for key, folder in (("output_dir", Path(output_dir)), ("run_index", index)):
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
    if is_segmented(encoder.name):  # plain fields: the encoder section is read, not re-entered
        segments = encoder.segment_length or DEFAULT_SEGMENT_LENGTH
        limit = segment_position_limit(encoder.name)
        if limit is not None and segments > limit:
            raise ConfigError(
                f"key 'segment_length': {segments} tokens per segment is above the "
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
