"""The data model every stream shares (`Example`, `Task`, `TaskStream`) and its loading path.

Every stream family reads its datasets through `load_task`: each split's file is read and
validated by the family's reader, then sampled with `sample_examples` from a seed derived from
(run seed, dataset, split), so a dataset's sample does not depend on the task order.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol

import numpy as np

from lifelong.options import PositiveInt, did_you_mean

log = logging.getLogger(__name__)


Embedder = Callable[[Sequence[str]], np.ndarray]
"""Embeds texts as rows of a matrix (FewRel's relation names, for the K-means clustering)."""


class StreamSpec(Protocol):
    """What one stream family is built from: its own keys, its own checks, its own builder.

    Each family (`text_classification.TextSpec`, `qa.QASpec`, `fewrel.FewRelSpec`) is a frozen
    dataclass whose fields are the config keys it reads; `lifelong.streams.registry` maps the
    config's ``stream`` name to it, so nothing outside a family's module knows its keys.

    Attributes:
        name: The config's ``stream`` value.
        kind: The task kind its examples are for (`lifelong.tasks`).
        order_key: The key that orders its tasks (what a sweep's ``orders`` axis sets).
        headline_metric: The ``metrics.json`` key its papers compare strategies by (what
            ``lifelong report --compare`` and ``--claims`` use by default).
        score_name: What its main metric is called in reports (``accuracy``; ``F1`` for QA,
            whose ``average_accuracy`` key holds the average F1).

    """

    name: ClassVar[str]
    kind: ClassVar[str]
    order_key: ClassVar[str]
    headline_metric: ClassVar[str]
    score_name: ClassVar[str]
    data_dir: str | None  # every family's (`SourceFields`)
    data_source: str

    def check(self) -> None:
        """Check names and orders without reading any file (`UnknownNameError`, `ValueError`)."""

    def build(self, seed: int = 0, embed: Embedder | None = None) -> TaskStream:
        """Read and sample the stream (``seed``: the run's; ``embed``: FewRel's name embedder)."""

    @property
    def order_label(self) -> str:
        """The task order in a run directory's name (``orderi``, ``ag_news-yelp``, ...)."""

    @property
    def order_id(self) -> str:
        """The task order as reports group runs by it (``i``, ``custom:a,b``, ``clusters-0``)."""


CUSTOM_PREFIX = "custom:"
"""Reports' order of a run given an explicit task list: ``custom:<tasks>``."""


@dataclass(frozen=True)
class SourceFields:
    """The keys every stream family reads: where its data is and how much of it.

    Attributes:
        data_dir: Directory of the real files; ``None``: the bundled sample (``data_source``
            ``hf``: the Hugging Face hub).
        data_source: ``"files"`` (each family's file layout) or ``"hf"`` (Hugging Face
            ``datasets``: the hub, ``save_to_disk`` directories or parquet; `streams.hf_datasets`).
        train_size: Training examples per task: text, per dataset (with real data and none
            given: the paper's 115,000); QA, questions per dataset; FewRel, sentences per
            relation (``None``: all).
        test_size: Test examples per task, likewise (text with real data: the paper's 7,600).

    """

    data_dir: str | None = None
    data_source: Literal["files", "hf"] = "files"
    train_size: PositiveInt | None = None
    test_size: PositiveInt | None = None


@dataclass(frozen=True)
class OrderedFields(SourceFields):
    """The keys of a family whose tasks are named datasets in a paper order (text, QA).

    Attributes:
        order: Paper task order ``"i"``..``"iv"``.
        tasks: Dataset names in training order (a list, or one comma-separated string),
            overriding ``order``.

    """

    order: Literal["i", "ii", "iii", "iv"] = "i"
    tasks: tuple[str, ...] | None = None

    datasets: ClassVar[Collection[str]]  # the family's dataset names
    orders: ClassVar[Mapping[str, tuple[str, ...]]]  # the family's paper orders
    family: ClassVar[str]  # prefix of its error messages (e.g. "QA ")
    kind: ClassVar[str]  # its streams' kind (`TaskStream.kind`)
    title: ClassVar[str]  # its streams' description, in words (e.g. "question answering")

    def task_names(self) -> tuple[str, ...]:
        """The dataset names in training order (`resolve_order`).

        Raises:
            UnknownNameError: An unknown dataset or order (named, with the valid ones).
            ValueError: A dataset listed twice.

        """
        return resolve_order(
            self.order, self.tasks, datasets=self.datasets, orders=self.orders, family=self.family
        )

    def check(self) -> None:
        """Order and dataset names, without reading any file (`task_names`)."""
        self.task_names()

    def load_stream(
        self, load: Callable[[str], Task], source: str, label_names: Sequence[str] = ()
    ) -> TaskStream:
        """Each dataset, read by ``load``, in training order: the family's stream.

        Args:
            load: Reads one dataset by its name.
            source: Where the data came from, in words (`describe_source`).
            label_names: The merged label space (QA has none).

        Returns:
            A `TaskStream` of the family's `kind`, described as ``"<title> (<source>): a -> b"``.

        Raises:
            UnknownNameError: An unknown dataset or order, before any file is read.

        """
        names = self.task_names()
        return TaskStream(
            tuple(load(name) for name in names),
            tuple(label_names),
            kind=self.kind,
            description=f"{self.title} ({source}): " + " -> ".join(names),
        )

    @property
    def order_label(self) -> str:
        """``order<name>`` or the dataset names joined by ``-``."""
        return "-".join(self.tasks) if self.tasks else f"order{self.order}"

    @property
    def order_id(self) -> str:
        """The order's name, or ``custom:<tasks>``."""
        return CUSTOM_PREFIX + ",".join(self.tasks) if self.tasks else str(self.order)


class DataFormatError(ValueError):
    """A data file is missing or does not have the expected layout (the message names it)."""


class UnknownNameError(ValueError):
    """A dataset, order or stream name that does not exist (the message lists the valid ones)."""


@dataclass(frozen=True)
class Example:
    """One input of a stream.

    Attributes:
        text: The input text (classification: the dataset's text fields joined; QA: the
            question; relation extraction: the sentence).
        label: The label in the stream's merged label space (0-based); for relation extraction
            the gold relation id; unused (0) for QA.
        text_pair: An optional second text (QA: the context paragraph).
        uid: Where the example came from, e.g. ``"ag_news_csv/train.csv:17"`` (file and line)
            or ``"squad/train-v1.1.json:<question id>"``.
        answers: QA only: the gold answers as (text, character offset in ``text_pair``).
        candidates: Relation extraction only: the candidate relation ids, gold included.

    """

    text: str
    label: int
    text_pair: str | None = None
    uid: str = ""
    answers: tuple[tuple[str, int], ...] = ()
    candidates: tuple[int, ...] = ()


@dataclass(frozen=True)
class Task:
    """One dataset of a stream.

    Attributes:
        name: Short name (``"ag_news"``, ``"yelp"``, ...).
        labels: The merged-space label ids this task uses.
        train: Training examples.
        test: Test examples.
        validation: Optional validation examples.

    """

    name: str
    labels: tuple[int, ...]
    train: tuple[Example, ...]
    test: tuple[Example, ...]
    validation: tuple[Example, ...] | None = None

    def __repr__(self) -> str:
        """One line: name, label count and split sizes (not the examples)."""
        splits = f"train={len(self.train)}, test={len(self.test)}"
        if self.validation is not None:
            splits += f", validation={len(self.validation)}"
        return f"Task({self.name!r}, labels={len(self.labels)}, {splits})"


@dataclass(frozen=True)
class TaskStream:
    """An ordered sequence of tasks over one shared label space.

    The learner sees one pass over the concatenated training data, in mini-batches, without task
    identifiers; test sets stay separate so that every task can be scored after every task.

    Attributes:
        tasks: The tasks, in training order.
        label_names: Name of every label in the merged label space (index = label id).
        kind: What the examples are for (``"classification"``); heads are chosen from it.

    """

    tasks: tuple[Task, ...]
    label_names: tuple[str, ...]
    kind: str = "classification"
    description: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.tasks:
            raise ValueError("a TaskStream needs at least one task")
        names = [t.name for t in self.tasks]
        if len(set(names)) != len(names):
            raise ValueError(f"task names must be unique, got {names}")
        for task in self.tasks:
            bad = [y for y in task.labels if not 0 <= y < len(self.label_names)]
            if bad:
                raise ValueError(
                    f"task {task.name!r} uses labels {bad} outside the stream's "
                    f"{len(self.label_names)}-label space"
                )

    @property
    def num_labels(self) -> int:
        """Size of the merged label space."""
        return len(self.label_names)

    @property
    def task_names(self) -> tuple[str, ...]:
        """Names of the tasks in training order."""
        return tuple(t.name for t in self.tasks)

    def __len__(self) -> int:
        return len(self.tasks)

    def __iter__(self) -> Iterator[Task]:
        return iter(self.tasks)

    def __repr__(self) -> str:
        """A few lines: kind, label space, and each task's sizes (not the examples)."""
        head = f"TaskStream({self.kind}, {len(self.tasks)} tasks, {self.num_labels} labels"
        head += f": {self.description})" if self.description else ")"
        return "\n".join([head, *(f"  {task!r}" for task in self.tasks)])


def batches(
    examples: Sequence[Example], batch_size: int, *, shuffle: bool = False, seed: int = 0
) -> Iterator[list[Example]]:
    """Yield mini-batches of examples, in order or shuffled with a seeded generator.

    Args:
        examples: The examples to split.
        batch_size: Examples per batch; the last batch may be smaller.
        shuffle: Whether to permute the examples first.
        seed: Seed of the permutation.

    Yields:
        Lists of at most ``batch_size`` examples covering every example exactly once.

    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    order = np.arange(len(examples))
    if shuffle:
        order = np.random.default_rng(seed).permutation(len(examples))
    for start in range(0, len(examples), batch_size):
        yield [examples[i] for i in order[start : start + batch_size]]


def resolve_order(
    order: str | None,
    tasks: Sequence[str] | None,
    *,
    datasets: Collection[str],
    orders: Mapping[str, tuple[str, ...]],
    family: str = "",
) -> tuple[str, ...]:
    """Turn an order name or an explicit task list into dataset names.

    Args:
        order: A paper order name (``"i"``..``"iv"``); ``None`` means ``"i"``.
        tasks: Dataset names in the order to train them (overrides ``order``).
        datasets: The family's dataset names.
        orders: The family's paper orders.
        family: Prefix for error messages (e.g. ``"QA "``).

    Raises:
        UnknownNameError: An unknown dataset or order (named, with the valid ones).
        ValueError: A dataset listed twice.

    """
    if tasks:
        unknown = [t for t in tasks if t not in datasets]
        if unknown:
            raise UnknownNameError(
                f"unknown {family}dataset{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(unknown)}{did_you_mean(unknown[0], datasets)}; expected names from "
                f"{', '.join(sorted(datasets))}"
            )
        if len(set(tasks)) != len(tasks):
            raise ValueError(f"a dataset appears twice in {list(tasks)}")
        return tuple(tasks)
    order = order or "i"
    if order not in orders:
        raise UnknownNameError(
            f"unknown {family}order {order!r}{did_you_mean(order, orders)}; expected one of "
            f"{', '.join(sorted(orders))}"
        )
    return orders[order]


_DIGITS = re.compile(r"\s*([0-9]+)\s*")


def decimal(text: str) -> int | None:
    """An ASCII decimal integer (surrounding whitespace allowed), else None.

    Stricter than ``int()``, which also takes ``+1``, ``1_0`` and non-ASCII digits: a label or
    id in a data file is plain digits, and anything else is reported, not guessed at.
    """
    match = _DIGITS.fullmatch(text)
    return int(match.group(1)) if match else None


def text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """The lines of a UTF-8 text file, numbered from 1, each with its line break.

    A UTF-8 byte-order mark at the start is dropped (spreadsheet programs write one). Lines end
    at a line feed (a carriage return before it is kept), as ``open(path, newline="")`` gives
    them to the ``csv`` module.

    Raises:
        DataFormatError: A line is not UTF-8, naming the file, the line, the byte and column;
            the file cannot be read (a directory, no permission, an I/O error), naming it.

    """
    try:
        f = path.open("rb")
    except OSError as err:
        raise DataFormatError(
            f"{path}: cannot read the data file ({err.strerror or err})"
        ) from None
    with f:
        for number, raw in enumerate(_read_lines(f, path), start=1):
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as err:
                problem = _not_utf8(raw[err.start], err.start + 1, err.reason)
                raise DataFormatError(f"{path}:{number}: {problem}") from None
            if line:  # (a file holding only a byte-order mark has no line)
                yield number, line


def _read_lines(f: Any, path: Path) -> Iterator[bytes]:
    """The file's lines; an I/O error while reading names the file (a `DataFormatError`)."""
    try:
        yield from f
    except OSError as err:
        raise DataFormatError(
            f"{path}: cannot read the data file ({err.strerror or err})"
        ) from None


def read_data(path: Path) -> bytes:
    """A data file's bytes.

    Raises:
        DataFormatError: It cannot be read (a directory, no permission, an I/O error).

    """
    try:
        return path.read_bytes()
    except OSError as err:
        raise DataFormatError(
            f"{path}: cannot read the data file ({err.strerror or err})"
        ) from None


def decode_text(path: Path, data: bytes) -> str:
    """A whole file's bytes as UTF-8 text (byte-order mark dropped).

    Raises:
        DataFormatError: The bytes are not UTF-8, naming the file and the line.

    """
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        number = data.count(b"\n", 0, err.start) + 1
        column = err.start - data.rfind(b"\n", 0, err.start)
        problem = _not_utf8(data[err.start], column, err.reason)
        raise DataFormatError(f"{path}:{number}: {problem}") from None


def _not_utf8(byte: int, column: int, reason: str) -> str:
    return (
        f"not UTF-8 text: byte 0x{byte:02x} at column {column} ({reason}); re-encode the "
        "file as UTF-8 (e.g. iconv -f latin1 -t utf-8)"
    )


def sample_examples(
    examples: Sequence[Example],
    size: int | None,
    *,
    seed: int,
    where: str,
    split: str = "train",
) -> tuple[Example, ...]:
    """Draw ``size`` examples without replacement with a seeded generator (all if ``None``).

    Raises:
        ValueError: ``size`` exceeds the number of examples available (naming ``where`` and
            the key that asks for fewer: ``train_size`` or ``test_size`` by ``split``).

    """
    if size is None:
        return tuple(examples)
    if size > len(examples):
        raise ValueError(
            f"{where}: asked for {size} examples but the file has {len(examples)}; "
            f"{size_hint(split, len(examples))}"
        )
    picked = np.random.default_rng(seed).choice(len(examples), size=size, replace=False)
    return tuple(examples[i] for i in np.sort(picked))


def size_hint(split: str, available: int) -> str:
    """How to ask for fewer examples of a split (the message ends a sampling error)."""
    key = "test_size" if split == "test" else "train_size"
    return f"set --{key.replace('_', '-')} (config key {key}) to {available} or fewer"


Reader = Callable[[Any, str], list[Example]]
"""Reads and validates one split: ``read(source, split) -> examples`` (split: train/test;
source: the split's file, or what names it, e.g. ``"squad test split (hf)"``)."""


def load_task(
    name: str,
    labels: tuple[int, ...],
    files: Mapping[str, Path | str],
    read: Reader,
    *,
    sizes: Mapping[str, int | None],
    seed: int,
    index: int,
) -> Task:
    """Load one dataset as a task: read each split, then sample it reproducibly.

    Args:
        name: The task's name.
        labels: Its label ids in the stream's label space.
        files: The ``"train"`` and ``"test"`` files (or names of the splits' sources).
        read: The family's reader.
        sizes: Examples to sample per split (``None``: all).
        seed: The run's sampling seed.
        index: The dataset's position in its family (seeds differ between datasets).

    """
    splits = {}
    for split, path in files.items():
        examples = read(path, split)
        split_seed = seed * 1000 + index * 10 + (split == "test")
        splits[split] = sample_examples(
            examples, sizes.get(split), seed=split_seed, where=str(path), split=split
        )
    log.info("%s: %d train / %d test", name, len(splits["train"]), len(splits["test"]))
    return Task(name, labels, splits["train"], splits["test"])
