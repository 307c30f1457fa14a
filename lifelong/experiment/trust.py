"""What a run directory may decide when a run resumes, and what a run records of its stream.

A run directory is data: its ``config.yaml`` can be edited and its ``checkpoint.pt`` planted
(a shared results folder, a downloaded run). So a resume checks what it is told:

* **the checkpoint is what the config says** (`check_trained_as`): a checkpoint stores the
  run-config keys it was trained under (`trained_as`); a resume whose ``config.yaml`` differs in
  any key outside `RESUME_MAY_CHANGE` (an edited strategy, task list, learning rate, encoder)
  is refused in one line naming each key, its trained value and its value now;
* **the stream is the one trained on** (`stream_fingerprint`, `check_stream`): the checkpoint
  stores a digest of every example of the stream, and a resume that builds (or is given)
  another stream is refused;
* **the run directory chooses no place far from it** (`check_locations`): the keys that name
  where `lifelong` writes (the run index, the output and token-cache folders, MLflow's store)
  are taken from ``config.yaml`` only where they lie within the folder two levels above the run
  directory, where runs and sweeps put them (``<output_dir>/index.sqlite``,
  ``<output_dir>/<sweep>/index.sqlite``, ``<output_dir>/mlruns``); anywhere else they must
  come from the command (a flag, a keyword of `lifelong.experiment.runs.resume`, a sweep
  file), or the resume is refused naming the flag.

A run given its stream in Python records that stream's order and sizes in its config
(`record_given_stream`), so that reports file it where it belongs and a resume rebuilds it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from lifelong.experiment.config import (
    RESUME_MAY_CHANGE,
    ConfigError,
    RunConfig,
    config_keys,
    trained_as_record,
)

if TYPE_CHECKING:
    from lifelong.streams.core import TaskStream

LOCATION_FLAGS = {
    "output_dir": "--output-dir",
    "run_index": "--run-index",
    "token_cache": "--token-cache",
    "tracking_uri": "--tracking-uri",
}
"""The keys naming where `lifelong` writes, and the ``lifelong run --resume`` flag of each."""


def trained_as(config: RunConfig) -> dict[str, Any]:
    """The keys that define what a run computes (all but `RESUME_MAY_CHANGE`), plain Python.

    Of ``strategy_options`` only the chosen strategy's entry counts: the others are not read.
    """
    return trained_as_record(config.to_dict(), config.strategy.name)


def check_trained_as(stored: Mapping[str, Any], config: RunConfig, where: str) -> None:
    """Refuse a config that differs from what a checkpoint was trained as.

    Args:
        stored: The checkpoint's `trained_as` record.
        config: The config the resume would continue under.
        where: The checkpoint, for the message.

    Raises:
        ConfigError: One line naming every differing key, its trained value and its value now.

    """
    now = trained_as(config)
    # checkpoints written before the config became its sections recorded every stream's keys
    others = {k.name for k in config_keys().values() if k.section == "stream"} - set(now)
    keys = sorted(
        k for k in set(stored) | set(now) if stored.get(k) != now.get(k) and k not in others
    )
    if not keys:
        return
    shown = "; ".join(f"{k}: trained as {stored.get(k)!r}, now {now.get(k)!r}" for k in keys)
    raise ConfigError(
        f"{where}: the run's config.yaml differs from what this checkpoint was trained as "
        f"({shown}); put config.yaml back or start a new run (a resume may change only "
        f"{', '.join(sorted(RESUME_MAY_CHANGE))})"
    )


def stream_fingerprint(stream: TaskStream) -> dict[str, Any]:
    """A digest of a stream: its tasks, sizes and a SHA-256 of every example and label name.

    Two streams with the same fingerprint hold the same examples in the same order.
    """
    digest = hashlib.sha256()
    digest.update(repr((stream.kind, stream.label_names)).encode())
    for task in stream:
        digest.update(repr((task.name, task.labels)).encode())
        for split in (task.train, task.test, task.validation or ()):
            digest.update(b"\x00split")
            for example in split:
                digest.update(repr(example).encode())
    return {
        "tasks": list(stream.task_names),
        "sizes": [[len(t.train), len(t.test)] for t in stream],
        "sha256": digest.hexdigest(),
    }


def check_stream(stored: Mapping[str, Any], stream: TaskStream, where: str) -> None:
    """Refuse a stream other than the one a checkpoint was trained on.

    Raises:
        ConfigError: Naming the tasks and sizes trained on and those now.

    """
    now = stream_fingerprint(stream)
    if now["sha256"] == stored.get("sha256"):
        return
    was = _stream_words(stored)
    other = _stream_words(now)
    detail = f"{was}, now {other}" if was != other else f"{was}, now other examples"
    raise ConfigError(
        f"{where}: this checkpoint was trained on another stream ({detail}); a run given its "
        "stream in Python resumes with lifelong.resume(run_dir, stream=<that stream>), and a "
        "run built from its config needs the data it was built from"
    )


def _stream_words(fingerprint: Mapping[str, Any]) -> str:
    tasks = fingerprint.get("tasks") or []
    sizes = fingerprint.get("sizes") or []
    parts = [f"{t} {s[0]}/{s[1]}" for t, s in zip(tasks, sizes, strict=False)]
    return "tasks " + ", ".join(parts) if parts else "an unknown stream"


def record_given_stream(config: RunConfig, stream: TaskStream) -> RunConfig:
    """``config`` with its stream keys describing ``stream``, a stream given in Python.

    The order (or the task list) and the sizes per task are the stream's, so that the run's
    ``config.yaml``, its index row and the reports say what was run. FewRel's tasks are
    clusters, which no key names: its config is kept, and the checkpoint's stream fingerprint
    keeps a resume from building another stream.

    Raises:
        ConfigError: The stream is of another kind than the config's stream, or names a task
            that is not one of its family's datasets (no config could record it).

    """
    spec = config.stream
    if stream.kind != spec.kind:
        raise ConfigError(
            f"stream=: a {stream.kind!r} stream, but the config's stream {config.stream.name!r} "
            f"makes {spec.kind!r} tasks; set the config's stream to the one given"
        )
    orders = getattr(spec, "orders", None)
    if orders is None:
        return config
    names = stream.task_names
    unknown = [n for n in names if n not in spec.datasets]
    if unknown:
        raise ConfigError(
            f"stream=: task {unknown[0]!r} is not a {config.stream.name} dataset "
            f"({', '.join(spec.datasets)}), so the run's config.yaml could not say what was "
            "run; name the tasks after their datasets, or train with lifelong.build_run and "
            "lifelong.run_stream, which write no run directory"
        )
    order = next((key for key, tasks in orders.items() if tuple(tasks) == names), None)
    changes: dict[str, Any] = {"order": order, "tasks": None} if order else {"tasks": names}
    changes["train_size"] = _uniform(len(t.train) for t in stream)
    changes["test_size"] = _uniform(len(t.test) for t in stream)
    return config.replace("stream=", **changes)


def _uniform(sizes: Iterable[int]) -> int | None:
    """The size every task has, or None (all rows) where they differ."""
    found = set(sizes)
    return found.pop() if len(found) == 1 and 0 not in found else None


def check_locations(run_dir: Path, config: RunConfig, confirmed: Mapping[str, Any]) -> RunConfig:
    """``config`` with the places it writes to checked for a resume of ``run_dir``.

    Each key of `LOCATION_FLAGS` is taken from ``confirmed`` (what the command was given) when
    there, else from ``config`` (the run's ``config.yaml``) only where it lies within the
    folder two levels above the run directory (`run_home`): the run index, output folder and
    MLflow store a run or a sweep makes by default do.

    Args:
        run_dir: The run directory being resumed.
        config: Its stored config (with the resume's other changes).
        confirmed: Location keys the caller gave (a flag, a keyword, a sweep file).

    Returns:
        ``config`` with the confirmed locations applied.

    Raises:
        ConfigError: A location from ``config.yaml`` far from the run (`run_home`), naming
            the key, the place and the flag that confirms it.

    """
    config = config.replace("resume", **confirmed) if confirmed else config
    home = run_home(run_dir)
    for key, place in _places(config):
        if key in confirmed or place is None or _inside(place, home):
            continue
        flag = LOCATION_FLAGS[key]
        raise ConfigError(
            f"{run_dir / 'config.yaml'}: key {key!r} names {place}, outside {home}, where the "
            "run lies; a run directory's files do not choose where lifelong writes: pass "
            f"{flag} {_flag_value(key, config)} to resume with it (or {flag} with another)"
        )
    return config


def run_home(run_dir: Path) -> Path:
    """The folder two levels above a run directory: a run's ``output_dir``, or a sweep's."""
    return run_dir.resolve().parent.parent


def _places(config: RunConfig) -> list[tuple[str, Path | str | None]]:
    """Each location key with the local path (or remote address) it makes the run write to."""
    out: list[tuple[str, Path | str | None]] = [("output_dir", Path(config.tracking.output_dir))]
    out.append(
        ("run_index", Path(config.tracking.run_index) if config.tracking.run_index else None)
    )
    cache = config.training.token_cache
    out.append(("token_cache", None if cache in ("auto", "off") else Path(cache)))
    if "mlflow" in config.tracking.loggers and config.tracking.tracking_uri:
        out.append(("tracking_uri", _uri_place(config.tracking.tracking_uri)))
    return out


def _uri_place(uri: str) -> Path | str:
    """The local path of a ``file:``, ``sqlite:`` or plain-path URI; a remote one as it is."""
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return Path(parsed.path or uri)
    if parsed.scheme == "sqlite":
        return Path(parsed.path[1:] if parsed.path.startswith("//") else parsed.path)
    return uri


def _inside(place: Path | str, home: Path) -> bool:
    if isinstance(place, str):  # a server: never the run directory's choice
        return False
    return place.expanduser().resolve().is_relative_to(home)


def _flag_value(key: str, config: RunConfig) -> str:
    value = str(config.to_dict()[key])
    return value if value and " " not in value else repr(value)
