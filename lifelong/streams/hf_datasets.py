"""Hugging Face ``datasets`` as a data source (``data_source: hf``) for every stream.

Each dataset of a stream has a `HubSource`: the hub id (and config) that holds it, which hub
split is our train and which our test split, and its columns. With ``data_dir`` a dataset is read
offline from ``DIR/<name>`` (``name``: ``ag_news``, ``yelp``, ..., ``squad``, ``quac``,
``fewrel``), which holds the hub dataset as `datasets` writes or the hub serves it, with the
hub's split names:

- a ``save_to_disk`` directory: ``DIR/<name>/dataset_dict.json`` (a ``DatasetDict``), or one
  ``Dataset`` per split in ``DIR/<name>/<split>/``;
- parquet files: ``DIR/<name>/<split>.parquet``, ``DIR/<name>/<split>-*.parquet``,
  ``DIR/<name>/<split>/*.parquet`` or the hub's ``DIR/<name>/data/<split>-*.parquet``
  (``huggingface-cli download --repo-type dataset <id> --local-dir DIR/<name>``).

Without ``data_dir`` the datasets are loaded from the hub by id (network needed; the
``datasets`` cache applies). Either way every row is validated as the file readers validate
theirs (a missing split or column, a label out of range, an empty text: an error naming the
dataset, the split and the row) and becomes the same `Example` (``uid`` ``"<name>/<split>:<row>"``),
then is sampled exactly as the files are.

This module only finds and opens the datasets; each stream module turns rows into examples.
``datasets`` is imported on first use (extra ``lifelong[hf]``).
"""

from __future__ import annotations

import glob
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lifelong.streams.core import DataFormatError


@dataclass(frozen=True)
class HubSource:
    """Where one dataset is on the hub and how its splits and columns map onto ours.

    Attributes:
        repo: Hub dataset id (``None``: no hub copy; ``data_dir`` must hold it).
        config: Hub config name (``None``: the default).
        splits: Our split (``train``, ``test``) -> the hub split name.
        columns: The columns every row must have.
        revision: Hub revision (e.g. ``refs/convert/parquet`` where ``main`` holds only a
            loading script, which ``datasets`` >= 4 no longer runs).
        data_files: Hub split -> file pattern, for repositories of raw files (CSV copies).
        csv_columns: Column names of header-less CSV ``data_files``.
        note: Why there is no ``repo``, or what to know about it (shown in errors).
        label_base: The first label id of a class-label column (``ClassLabel``: 0; raw CSV
            copies of Zhang et al.'s files: 1).

    """

    repo: str | None
    config: str | None
    splits: Mapping[str, str]
    columns: tuple[str, ...]
    revision: str | None = None
    data_files: Mapping[str, str] = field(default_factory=dict)
    csv_columns: tuple[str, ...] = ()
    note: str = ""
    label_base: int = 0


def require_datasets() -> Any:
    """The ``datasets`` module, or a `DataFormatError` naming the extra to install."""
    try:
        import datasets
    except ImportError:
        raise DataFormatError(
            "data_source 'hf' needs the Hugging Face datasets package: pip install 'lifelong[hf]'"
        ) from None
    return datasets


def open_split(name: str, split: str, source: HubSource, data_dir: str | Path | None) -> Split:
    """Open our ``split`` (``train`` or ``test``) of dataset ``name``, checking its columns.

    Args:
        name: Our dataset name (the folder under ``data_dir``).
        split: ``"train"`` or ``"test"``.
        source: The dataset's hub source.
        data_dir: Offline directory (see the module docstring); ``None``: the hub.

    Raises:
        DataFormatError: No such split (naming what was looked for), or a missing column.

    """
    hub_split = source.splits[split]
    if data_dir is None:
        dataset, where = _from_hub(name, hub_split, source), f"{source.repo} ({name})"
    else:
        folder = Path(data_dir) / name
        dataset, where = _from_dir(folder, hub_split, name), str(folder)
    where = f"{where} split {hub_split!r}"
    missing = [c for c in source.columns if c not in dataset.column_names]
    if missing:
        raise DataFormatError(
            f"{where}: missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
            f"(expected {', '.join(source.columns)}; found {', '.join(dataset.column_names)})"
        )
    return Split(name, split, dataset, where)


@dataclass(frozen=True)
class Split:
    """One opened split: its rows, and how errors and uids name them.

    Attributes:
        name: Our dataset name.
        split: Our split name (``train``, ``test``).
        dataset: The ``datasets.Dataset``.
        where: ``"<directory or hub id> split '<hub split>'"``, the prefix of errors.

    """

    name: str
    split: str
    dataset: Any
    where: str

    def rows(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """``(row number, row)`` pairs, row numbers 0-based as ``dataset[i]``."""
        yield from enumerate(self.dataset)

    def at(self, row: int) -> str:
        """The error prefix of one row."""
        return f"{self.where} row {row}"

    def uid(self, row: int | str) -> str:
        """An example's uid: ``"<name>/<split>:<row>"``."""
        return f"{self.name}/{self.split}:{row}"

    def class_names(self, column: str) -> tuple[str, ...] | None:
        """The names of a ``ClassLabel`` column, ``None`` if it is not one."""
        feature = self.dataset.features.get(column)
        names = getattr(feature, "names", None)
        return tuple(names) if names is not None else None

    def check_classes(self, column: str, expected: Sequence[str]) -> None:
        """A ``ClassLabel`` column must have as many classes as the dataset has labels.

        Raises:
            DataFormatError: A different number of classes (naming both lists).

        """
        names = self.class_names(column)
        if names is not None and len(names) != len(expected):
            raise DataFormatError(
                f"{self.where}: column {column!r} has {len(names)} classes {list(names)}; "
                f"expected {len(expected)} ({', '.join(expected)})"
            )


def _from_hub(name: str, hub_split: str, source: HubSource) -> Any:
    datasets = require_datasets()
    if source.repo is None:
        raise DataFormatError(
            f"{name}: no Hugging Face hub copy is known ({source.note}); pass --data-dir with "
            f"a directory holding {name}/ (save_to_disk or parquet)"
        )
    hint = (
        "; offline, pass --data-dir with a directory holding it (see lifelong.streams.hf_datasets)"
    )
    with _reading(f"{source.repo} ({name}): could not load it from the Hugging Face hub", hint):
        if source.data_files:
            pattern = source.data_files[hub_split]
            return datasets.load_dataset(
                "csv",
                data_files={hub_split: f"hf://datasets/{source.repo}/{pattern}"},
                column_names=list(source.csv_columns) or None,
                split=hub_split,
            )
        return datasets.load_dataset(
            source.repo, source.config, split=hub_split, revision=source.revision
        )


@contextmanager
def _reading(what: str, hint: str) -> Iterator[None]:
    """Turn whatever ``datasets``/``pyarrow`` raise while opening data into one line."""
    try:
        yield
    except DataFormatError:
        raise
    except Exception as err:  # ArrowInvalid, OSError, ConnectionError, DatasetNotFoundError...
        reason = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise DataFormatError(f"{what} ({type(err).__name__}: {reason}){hint}") from None


_SAVED_HINT = (
    "; is it whole? (a truncated or partly copied .arrow file cannot be read: copy or "
    "save_to_disk it again)"
)


def _from_dir(folder: Path, hub_split: str, name: str) -> Any:
    datasets = require_datasets()
    if (folder / "dataset_dict.json").is_file():
        with _reading(f"{folder}: cannot read the saved DatasetDict", _SAVED_HINT):
            loaded = datasets.load_from_disk(str(folder))
        if hub_split not in loaded:
            raise DataFormatError(
                f"{folder}: no split {hub_split!r} in the saved DatasetDict "
                f"(it has {', '.join(loaded) or 'none'})"
            )
        return loaded[hub_split]
    if (folder / hub_split / "state.json").is_file():
        with _reading(f"{folder / hub_split}: cannot read the saved dataset", _SAVED_HINT):
            return datasets.load_from_disk(str(folder / hub_split))
    patterns = (
        f"{hub_split}.parquet",
        f"{hub_split}-*.parquet",
        f"{hub_split}/*.parquet",
        f"data/{hub_split}-*.parquet",
    )
    for pattern in patterns:
        files = sorted(glob.glob(glob.escape(str(folder)) + "/" + pattern))
        if files:
            where = f"{folder}: cannot read the parquet files {pattern}"
            with _reading(where, "; is each file whole?"):
                return datasets.Dataset.from_parquet(files)
    raise DataFormatError(
        f"{folder}: no {name} split {hub_split!r} (expected a save_to_disk directory with "
        f"dataset_dict.json or {hub_split}/state.json, or parquet files "
        f"{', '.join(patterns)})"
    )


def describe_source(data_dir: str | Path | None, data_source: str) -> str:
    """Where a stream's data came from, in words (for its description)."""
    if data_source == "hf":
        return f"hf: {data_dir}" if data_dir is not None else "hf: hub"
    return "bundled sample" if data_dir is None else str(data_dir)
