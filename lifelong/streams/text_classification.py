"""Text-classification streams over the Zhang et al. (2015) CSV datasets.

Each dataset lives in ``DIR/<folder>/{train,test}.csv``: no header, the label first (1-indexed),
then the text columns. The five datasets share one merged label space of 33 classes, in which Yelp
and Amazon share the five rating classes (4 + 5 + 14 + 10).

Sampling follows Holla et al. (2020; reference code Nithin-Holla/MetaLifelongLanguage,
``datasets/text_classification_dataset.py`` and ``datasets/utils.py``): every dataset is sampled
with the fixed seed 42 whatever the run's seed, training and validation examples are one draw from
the training file split in two (paper: 115,000 + 5,000), and test examples are drawn from the test
file (paper: 7,600). The seed is theirs but the generator is numpy's, not pandas' and torch's, so
the rows drawn differ from theirs. Their text preprocessing is an option (``preprocess="holla"``).
"""

from __future__ import annotations

import csv
import logging
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, Literal, TypedDict, Unpack

import numpy as np

from lifelong.streams.core import (
    DataFormatError,
    Embedder,
    Example,
    OrderedFields,
    Task,
    TaskStream,
    UnknownNameError,
    decimal,
    sample_examples,
    size_hint,
    text_lines,
)
from lifelong.streams.hf_datasets import HubSource, describe_source, open_split

SAMPLE_DIR = Path(__file__).parent / "samples" / "text_classification"
"""The bundled sample: every dataset in the real layout, a few hundred rows each."""

log = logging.getLogger(__name__)

PAPER_TRAIN_SIZE = 115_000
PAPER_VALIDATION_SIZE = 5_000  # Holla et al. (2020): MAX_VAL_SIZE, held out of the training file
PAPER_TEST_SIZE = 7_600

SAMPLE_SEED = 42
"""Holla et al.'s sampling seed (``random_state=42``), fixed whatever the run's seed."""

DataSource = Literal["files", "hf"]
"""Where datasets are read from: the files of the module docstring, or Hugging Face
``datasets`` (`streams.hf_datasets`: the hub, a ``save_to_disk`` directory or parquet files)."""

Preprocessing = Literal["none", "holla"]
"""How the text columns become an example's text: ``"none"`` joins them with spaces, ``"holla"``
as Holla et al. (2020) do (`holla_text`)."""


@dataclass(frozen=True)
class DatasetSpec:
    """How one Zhang et al. (2015) dataset is laid out and where it sits in the merged labels.

    Attributes:
        name: Short name used in task orders and ``--tasks``.
        folder: Directory holding ``train.csv`` and ``test.csv``.
        columns: Column names after the label column.
        label_names: Class names, in the file's 1-indexed order.
        label_offset: Merged-space id of the file's label 1.
        holla_separator: What Holla et al.'s reference puts between the text columns: title
            ``". "`` body; nothing between Yahoo's three columns.

    """

    name: str
    folder: str
    columns: tuple[str, ...]
    label_names: tuple[str, ...]
    label_offset: int
    holla_separator: str = ". "

    @property
    def labels(self) -> tuple[int, ...]:
        """The merged-space label ids of this dataset."""
        return tuple(range(self.label_offset, self.label_offset + len(self.label_names)))


RATINGS = ("1 star", "2 stars", "3 stars", "4 stars", "5 stars")

DATASETS: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in (
        DatasetSpec(
            "ag_news",
            "ag_news_csv",
            ("title", "description"),
            ("World", "Sports", "Business", "Sci/Tech"),
            0,
        ),
        DatasetSpec("yelp", "yelp_review_full_csv", ("text",), RATINGS, 4),
        DatasetSpec("amazon", "amazon_review_full_csv", ("title", "review"), RATINGS, 4),
        DatasetSpec(
            "dbpedia",
            "dbpedia_csv",
            ("title", "description"),
            (
                "Company",
                "EducationalInstitution",
                "Artist",
                "Athlete",
                "OfficeHolder",
                "MeanOfTransportation",
                "Building",
                "NaturalPlace",
                "Village",
                "Animal",
                "Plant",
                "Album",
                "Film",
                "WrittenWork",
            ),
            9,
        ),
        DatasetSpec(
            "yahoo",
            "yahoo_answers_csv",
            ("question_title", "question_content", "best_answer"),
            (
                "Society & Culture",
                "Science & Mathematics",
                "Health",
                "Education & Reference",
                "Computers & Internet",
                "Sports",
                "Business & Finance",
                "Entertainment & Music",
                "Family & Relationships",
                "Politics & Government",
            ),
            23,
            holla_separator="",
        ),
    )
}


def merged_label_names() -> tuple[str, ...]:
    """Names of the 33 merged labels, indexed by merged label id."""
    names: dict[int, str] = {}
    for spec in DATASETS.values():
        for offset, name in enumerate(spec.label_names):
            label = spec.label_offset + offset
            prefix = "review" if spec.name in ("yelp", "amazon") else spec.name
            names.setdefault(label, f"{prefix}:{name}")
    return tuple(names[i] for i in range(len(names)))


ORDERS: dict[str, tuple[str, ...]] = {
    "i": ("yelp", "ag_news", "dbpedia", "amazon", "yahoo"),
    "ii": ("dbpedia", "yahoo", "ag_news", "amazon", "yelp"),
    "iii": ("yelp", "yahoo", "amazon", "dbpedia", "ag_news"),
    "iv": ("ag_news", "yelp", "amazon", "yahoo", "dbpedia"),
}
"""The four task orders of de Masson d'Autume et al. (2019), used by every later paper."""


def read_csv(path: Path, spec: DatasetSpec, preprocess: Preprocessing = "none") -> list[Example]:
    """Read and validate every row of one Zhang et al. CSV file.

    Args:
        path: The CSV file.
        spec: The dataset's layout.
        preprocess: ``"none"``: the text columns joined with spaces, escaped newlines and runs of
            whitespace collapsed; ``"holla"``: `holla_text`. Rows are validated the same way.

    Returns:
        One example per row, labels mapped into the merged label space.

    Raises:
        DataFormatError: The file is missing, or a row has the wrong column count, a label that
            is not an integer in range, or no text; the message names the file and line.
        ValueError: ``preprocess`` is not one of ``"none"``, ``"holla"``.

    """
    if preprocess not in ("none", "holla"):
        raise ValueError(f"preprocess must be 'none' or 'holla', got {preprocess!r}")
    if not path.is_file():
        raise DataFormatError(
            f"{path}: file not found (expected the {spec.name} {path.stem} split, a CSV with "
            f"columns label,{','.join(spec.columns)})"
        )
    n_cols = 1 + len(spec.columns)
    n_labels = len(spec.label_names)
    examples: list[Example] = []
    reader = csv.reader(line for _, line in text_lines(path))
    try:
        for row in reader:
            where = f"{path}:{reader.line_num}"
            if len(row) != n_cols:
                raise DataFormatError(
                    f"{where}: expected {n_cols} columns (label,{','.join(spec.columns)}), "
                    f"got {len(row)}"
                )
            label = decimal(row[0])
            if label is None:
                raise DataFormatError(
                    f"{where}: label {row[0]!r} is not an integer in 1..{n_labels}"
                )
            examples.append(row_example(label - 1, row[1:], spec, preprocess, where, where))
    except csv.Error as err:  # e.g. a field over csv's size limit (a quote left open)
        raise DataFormatError(f"{path}:{reader.line_num}: not a CSV row ({err})") from None
    if not examples:
        raise DataFormatError(f"{path}: the file has no rows")
    return examples


def row_example(
    label: int,
    fields: Sequence[str],
    spec: DatasetSpec,
    preprocess: Preprocessing,
    where: str,
    uid: str,
    columns: Sequence[str] | None = None,
    base: int = 1,
) -> Example:
    """One validated row as an example, whatever its source (CSV line, `datasets` row).

    Args:
        label: The row's label, 0-based in the dataset's own classes.
        fields: Its text columns, in the dataset's order.
        spec: The dataset.
        preprocess: ``"none"`` or ``"holla"`` (see `read_csv`).
        where: The error prefix (file and line, or dataset, split and row).
        uid: The example's uid.
        columns: The text columns' names, for errors (default: ``spec.columns``).
        base: The source's first label (CSV files: 1; hub ``ClassLabel`` ids: 0), for errors.

    Raises:
        DataFormatError: The label is out of range, or the text is empty.

    """
    n_labels = len(spec.label_names)
    if not 0 <= label < n_labels:
        raise DataFormatError(
            f"{where}: label {label + base} is out of range {base}..{n_labels - 1 + base}"
        )
    text = _join_text(fields)
    if not text:
        raise DataFormatError(f"{where}: empty text (all of {', '.join(columns or spec.columns)})")
    if preprocess == "holla":
        text = holla_text(fields, spec)
    return Example(text, spec.label_offset + label, uid=uid)


HUB: dict[str, HubSource] = {
    "ag_news": HubSource(
        "fancyzhx/ag_news", None, {"train": "train", "test": "test"}, ("label", "text")
    ),
    "yelp": HubSource(
        "Yelp/yelp_review_full",
        "yelp_review_full",
        {"train": "train", "test": "test"},
        ("label", "text"),
    ),
    "amazon": HubSource(
        "vgaraujov/amazon_review_full",
        None,
        {"train": "train", "test": "test"},
        ("label", "title", "content"),
        data_files={"train": "train.csv", "test": "test.csv"},
        csv_columns=("label", "title", "content"),
        note="a community copy of Zhang et al.'s CSV files (labels 1..5); no maintained "
        "hub dataset holds Amazon Review Full",
        label_base=1,
    ),
    "dbpedia": HubSource(
        "fancyzhx/dbpedia_14",
        "dbpedia_14",
        {"train": "train", "test": "test"},
        ("label", "title", "content"),
    ),
    "yahoo": HubSource(
        "community-datasets/yahoo_answers_topics",
        "yahoo_answers_topics",
        {"train": "train", "test": "test"},
        ("topic", "question_title", "question_content", "best_answer"),
    ),
}
"""Where each dataset is on the Hugging Face hub (`streams.hf_datasets`), checked against the hub's
dataset cards (2026-11). The first column is the label, the others the text columns in the
order of the CSV files. Labels are the hub's 0-based ``ClassLabel`` ids in Zhang et al.'s class
order, except Amazon's CSV copy (1..5, as the files). AG News on the hub has title and
description already joined into ``text`` (``title + " " + description``), so ``preprocess:
holla`` cannot put Holla et al.'s ``". "`` between them there."""


def read_hf_split(
    name: str, split: str, data_dir: str | Path | None, preprocess: Preprocessing = "none"
) -> list[Example]:
    """Read and validate one split of a dataset from Hugging Face ``datasets``.

    Args:
        name: A key of `DATASETS`.
        split: ``"train"`` or ``"test"``.
        data_dir: A directory holding ``<name>/`` (``save_to_disk`` or parquet; see
            `streams.hf_datasets`), or ``None`` for the hub.
        preprocess: As `read_csv`.

    Raises:
        DataFormatError: A missing split or column, a ``ClassLabel`` with another number of
            classes, a label that is not an integer in range, or an empty text (naming the
            dataset, the split and the row).

    """
    spec, source = DATASETS[name], HUB[name]
    opened = open_split(name, split, source, data_dir)
    label_column, *text_columns = source.columns
    opened.check_classes(label_column, spec.label_names)
    base = source.label_base
    examples = []
    for i, row in opened.rows():
        where = opened.at(i)
        value = row[label_column]
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise DataFormatError(f"{where}: label {value!r} is not an integer")
        try:
            label = int(value) - base
        except ValueError:
            raise DataFormatError(f"{where}: label {value!r} is not an integer") from None
        fields = [_text_field(row[c], c, where) for c in text_columns]
        examples.append(
            row_example(label, fields, spec, preprocess, where, opened.uid(i), text_columns, base)
        )
    if not examples:
        raise DataFormatError(f"{opened.where}: the split has no rows")
    return examples


def _text_field(value: Any, column: str, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DataFormatError(f"{where}: column {column!r} holds {value!r}, not text")
    return value


def _join_text(fields: Sequence[str]) -> str:
    # The Zhang et al. files escape newlines as a literal backslash-n.
    parts = (" ".join(f.replace("\\n", " ").split()) for f in fields)
    return " ".join(p for p in parts if p)


# Holla et al.'s cleaning, in their order (reference: `preprocess` in
# datasets/text_classification_dataset.py); rewritten here, same regular expressions.
_ESCAPED_NEWLINES = re.compile(r"(?:\\n)+")  # the files' literal backslash-n
_ESCAPED_BACKSLASHES = re.compile(r"(?:\\\\)+")  # literal double backslashes
_WHITESPACE_RUN = re.compile(r"\s{2,}")
_REPEATED_STOPS = re.compile(r"([.?!]){2,}")  # "what???" -> "what?" (the run's last mark)
_LINK = re.compile(r"https?://\S+\b|www\.(?:\w+\.)+\S*")


def holla_clean(text: str) -> str:
    """Holla et al.'s (2020) text cleaning, as their reference code's ``preprocess``.

    In order: lower-case; each run of escaped newlines (a literal backslash-n) becomes a space;
    runs of escaped backslashes are dropped; runs of two or more whitespace characters become one
    space; a run of ``.``, ``?``, ``!`` becomes its last mark; ``$`` is followed by a space; links
    (``http(s)://...``, ``www....``) are removed. Nothing is stripped, so removing a link can
    leave two spaces, as in the reference.
    """
    text = text.lower()
    text = _ESCAPED_NEWLINES.sub(" ", text)
    text = _ESCAPED_BACKSLASHES.sub("", text)
    text = _WHITESPACE_RUN.sub(" ", text)
    text = _REPEATED_STOPS.sub(r"\1", text)
    text = text.replace("$", "$ ")
    return _LINK.sub("", text)


def holla_text(fields: Sequence[str], spec: DatasetSpec) -> str:
    """One row's text as Holla et al. (2020) build it: the columns joined, then `holla_clean`.

    Title ``". "`` body for AG News, DBpedia and Amazon; Yelp's one column as it is; Yahoo's
    title, content and answer with nothing between them (``spec.holla_separator``). Unlike the
    reference, rows with an empty column are kept (its pandas ``dropna`` drops them).
    """
    return holla_clean(spec.holla_separator.join(fields))


class TextSampling(TypedDict, total=False):
    """`load_dataset`'s sampling options, which `text_classification_stream` passes on."""

    train_size: int | None
    test_size: int | None
    validation_size: int | None
    sample_seed: int
    preprocess: Preprocessing
    data_source: DataSource


def load_dataset(
    name: str,
    data_dir: str | Path | None = None,
    *,
    train_size: int | None = None,
    test_size: int | None = None,
    validation_size: int | None = None,
    sample_seed: int = SAMPLE_SEED,
    preprocess: Preprocessing = "none",
    data_source: DataSource = "files",
) -> Task:
    """Load one dataset as a task, sampled as Holla et al. (2020) sample it.

    Training and validation examples are one draw of ``train_size + validation_size`` rows of
    the training file (paper: 115,000 + 5,000), split at random into the two, so they are
    disjoint; test examples are drawn from the test file. The draws depend on ``sample_seed``
    (and the dataset and split), never on the run's seed.

    Args:
        name: A key of `DATASETS`.
        data_dir: Directory holding ``<folder>/{train,test}.csv``; the bundled sample if ``None``.
        train_size: Training examples to sample (``None``: every row not held out).
        test_size: Test examples to sample (all if ``None``).
        validation_size: Training-file rows held out as ``Task.validation``. ``None``: with a
            ``train_size``, the paper's 5,000 capped to the rows training leaves; without one,
            none (every row trains, and ``validation`` is ``None``).
        sample_seed: Sampling seed; Holla et al.'s 42 by default.
        preprocess: ``"none"`` or ``"holla"`` (their lower-casing and cleaning, `holla_text`).
        data_source: ``"files"`` (the CSV files) or ``"hf"`` (Hugging Face ``datasets``:
            `read_hf_split`; ``data_dir`` ``None`` = the hub). Rows are sampled the same way.

    Returns:
        The task, its labels in the merged 33-class space.

    Raises:
        UnknownNameError: ``name`` is not a dataset.
        ValueError: More examples asked for than a file has (naming it).

    """
    if name not in DATASETS:
        raise UnknownNameError(
            f"unknown dataset {name!r}; expected one of {', '.join(sorted(DATASETS))}"
        )
    seed = sample_seed * 1000 + list(DATASETS).index(name) * 10  # + 1 for the test split
    (rows, train_where), (test_rows, test_where) = (
        _read_split(name, split, data_dir, preprocess, data_source) for split in ("train", "test")
    )
    n_validation = _validation_size(len(rows), train_size, validation_size)
    train, validation = _draw_train(rows, train_size, n_validation, seed=seed, where=train_where)
    test = sample_examples(test_rows, test_size, seed=seed + 1, where=test_where, split="test")
    log.info("%s: %d train / %d validation / %d test", name, len(train), n_validation, len(test))
    return Task(name, DATASETS[name].labels, train, test, validation)


def _read_split(
    name: str,
    split: str,
    data_dir: str | Path | None,
    preprocess: Preprocessing,
    data_source: DataSource,
) -> tuple[list[Example], str]:
    # the split's rows and how sampling errors name it
    if data_source == "hf":
        return read_hf_split(name, split, data_dir, preprocess), f"{name} {split} split (hf)"
    if data_source != "files":
        raise ValueError(f"data_source must be 'files' or 'hf', got {data_source!r}")
    path = Path(data_dir if data_dir is not None else SAMPLE_DIR) / DATASETS[name].folder
    path = path / f"{split}.csv"
    return read_csv(path, DATASETS[name], preprocess), str(path)


def _validation_size(n_rows: int, train_size: int | None, validation_size: int | None) -> int:
    # the default holds out at most the paper's 5,000 and never takes rows training asked for
    if validation_size is not None:
        if validation_size < 0:
            raise ValueError(f"validation_size must be >= 0, got {validation_size}")
        return validation_size
    if train_size is None:
        return 0
    return max(0, min(PAPER_VALIDATION_SIZE, n_rows - train_size))


def _draw_train(
    rows: Sequence[Example], train_size: int | None, n_validation: int, *, seed: int, where: str
) -> tuple[tuple[Example, ...], tuple[Example, ...] | None]:
    # One draw of train + validation rows in random order, its first train_size rows training:
    # the reference draws 120,000 rows and splits them 115,000 / 5,000. Without validation it
    # is the same draw as `sample_examples`.
    if n_validation == 0:
        return sample_examples(rows, train_size, seed=seed, where=where), None
    if n_validation + (1 if train_size is None else train_size) > len(rows):
        asked = "at least 1" if train_size is None else str(train_size)
        raise ValueError(
            f"{where}: asked for {asked} training + {n_validation} validation examples but "
            f"the file has {len(rows)}; {size_hint('train', len(rows) - n_validation)}"
        )
    n_train = len(rows) - n_validation if train_size is None else train_size
    drawn = np.random.default_rng(seed).choice(len(rows), n_train + n_validation, replace=False)
    train = tuple(rows[i] for i in np.sort(drawn[:n_train]))
    return train, tuple(rows[i] for i in np.sort(drawn[n_train:]))


def text_classification_stream(
    order: str | None = "i",
    *,
    tasks: Sequence[str] | None = None,
    data_dir: str | Path | None = None,
    **sampling: Unpack[TextSampling],
) -> TaskStream:
    """Build a text-classification stream in a paper order or a chosen order.

    Args:
        order: Paper order ``"i"``..``"iv"`` (ignored when ``tasks`` is given).
        tasks: Dataset names, in training order, e.g. ``["ag_news", "yelp"]``.
        data_dir: Directory of the real CSVs; the bundled sample if ``None``.
        **sampling: Each dataset's sampling, as `load_dataset`'s keyword arguments
            (``train_size``, ``test_size``, ``validation_size``, ``sample_seed``,
            ``preprocess``, ``data_source``; the same defaults).

    Returns:
        A `TaskStream` over the merged 33-class label space.

    """
    spec = TextSpec(order=order, tasks=tuple(tasks) if tasks else None)
    source = describe_source(data_dir, sampling.get("data_source", "files"))
    load = partial(load_dataset, data_dir=data_dir, **sampling)
    return spec.load_stream(load, source, merged_label_names())


@dataclass(frozen=True)
class TextSpec(OrderedFields):
    """The text-classification stream (config ``stream: text``): the five datasets.

    Attributes:
        preprocess: ``"none"`` joins the text columns with spaces; ``"holla"`` lower-cases,
            cleans and joins them as Holla et al. (2020) do (`holla_text`).

    Sizes count examples per dataset; with real data and no size given, the paper's
    (`build`). The run's seed is not used: the sample is fixed (seed 42, Holla et al., 2020).

    """

    name: ClassVar[str] = "text"
    kind: ClassVar[str] = "classification"
    order_key: ClassVar[str] = "order"
    # the mean of the five datasets' accuracies (de Masson d'Autume et al., 2019, Table 1)
    headline_metric: ClassVar[str] = "average_accuracy"
    score_name: ClassVar[str] = "accuracy"
    datasets: ClassVar[Collection[str]] = DATASETS
    orders: ClassVar[Mapping[str, tuple[str, ...]]] = ORDERS
    family: ClassVar[str] = ""
    title: ClassVar[str] = "text classification"

    preprocess: Preprocessing = "none"

    def build(self, seed: int = 0, embed: Embedder | None = None) -> TaskStream:
        """The stream; real data defaults to the paper's sizes.

        With real data (a ``data_dir``, or the hub) and no size given, each dataset is sampled
        to the paper's 115,000 training and 7,600 test examples (de Masson d'Autume et al.,
        2019, §4.1) plus 5,000 validation examples (Holla et al., 2020); the bundled sample is
        read whole, without a validation split. ``seed`` and ``embed`` are unused.
        """
        real = self.data_dir is not None or self.data_source == "hf"
        return text_classification_stream(
            self.order,
            tasks=self.tasks,
            data_dir=self.data_dir,
            train_size=self.train_size or (PAPER_TRAIN_SIZE if real else None),
            test_size=self.test_size or (PAPER_TEST_SIZE if real else None),
            preprocess=self.preprocess,
            data_source=self.data_source,
        )
