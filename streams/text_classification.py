"""Text-classification streams over the Zhang et al. (2015) CSV datasets.

Each dataset lives in ``DIR/<folder>/{train,test}.csv``: no header, the label first (1-indexed),
then the text columns. The five datasets share one merged label space of 33 classes, in which Yelp
and Amazon share the five rating classes (4 + 5 + 14 + 10).
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from streams.core import (
    DataFormatError,
    Example,
    Task,
    TaskStream,
    UnknownNameError,
    load_task,
    resolve_order,
)

if TYPE_CHECKING:
    from streams.registry import StreamSpec

SAMPLE_DIR = Path(__file__).parent / "samples" / "text_classification"
"""The bundled sample: every dataset in the real layout, a few hundred rows each."""

PAPER_TRAIN_SIZE = 115_000
PAPER_TEST_SIZE = 7_600


@dataclass(frozen=True)
class DatasetSpec:
    """How one Zhang et al. (2015) dataset is laid out and where it sits in the merged labels.

    Attributes:
        name: Short name used in task orders and ``--tasks``.
        folder: Directory holding ``train.csv`` and ``test.csv``.
        columns: Column names after the label column.
        label_names: Class names, in the file's 1-indexed order.
        label_offset: Merged-space id of the file's label 1.

    """

    name: str
    folder: str
    columns: tuple[str, ...]
    label_names: tuple[str, ...]
    label_offset: int

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


def read_csv(path: Path, spec: DatasetSpec) -> list[Example]:
    """Read and validate every row of one Zhang et al. CSV file.

    Args:
        path: The CSV file.
        spec: The dataset's layout.

    Returns:
        One example per row, labels mapped into the merged label space.

    Raises:
        DataFormatError: The file is missing, or a row has the wrong column count, a label that
            is not an integer in range, or no text; the message names the file and line.

    """
    if not path.is_file():
        raise DataFormatError(
            f"{path}: file not found (expected the {spec.name} {path.stem} split, a CSV with "
            f"columns label,{','.join(spec.columns)})"
        )
    n_cols = 1 + len(spec.columns)
    n_labels = len(spec.label_names)
    examples = []
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        for row in reader:
            where = f"{path}:{reader.line_num}"
            if len(row) != n_cols:
                raise DataFormatError(
                    f"{where}: expected {n_cols} columns (label,{','.join(spec.columns)}), "
                    f"got {len(row)}"
                )
            try:
                label = int(row[0])
            except ValueError:
                raise DataFormatError(
                    f"{where}: label {row[0]!r} is not an integer in 1..{n_labels}"
                ) from None
            if not 1 <= label <= n_labels:
                raise DataFormatError(f"{where}: label {label} is out of range 1..{n_labels}")
            text = _join_text(row[1:])
            if not text:
                raise DataFormatError(f"{where}: empty text (all of {', '.join(spec.columns)})")
            examples.append(Example(text, spec.label_offset + label - 1, uid=where))
    if not examples:
        raise DataFormatError(f"{path}: the file has no rows")
    return examples


def _join_text(fields: Sequence[str]) -> str:
    # The Zhang et al. files escape newlines as a literal backslash-n.
    parts = (" ".join(f.replace("\\n", " ").split()) for f in fields)
    return " ".join(p for p in parts if p)


def load_dataset(
    name: str,
    data_dir: str | Path | None = None,
    *,
    train_size: int | None = None,
    test_size: int | None = None,
    seed: int = 0,
) -> Task:
    """Load one dataset as a task.

    Args:
        name: A key of `DATASETS`.
        data_dir: Directory holding ``<folder>/{train,test}.csv``; the bundled sample if ``None``.
        train_size: Training examples to sample (all if ``None``).
        test_size: Test examples to sample (all if ``None``).
        seed: Sampling seed; each dataset and split draws from its own derived seed.

    Returns:
        The task, its labels in the merged 33-class space.

    Raises:
        UnknownNameError: ``name`` is not a dataset.

    """
    if name not in DATASETS:
        raise UnknownNameError(
            f"unknown dataset {name!r}; expected one of {', '.join(sorted(DATASETS))}"
        )
    spec = DATASETS[name]
    folder = Path(data_dir if data_dir is not None else SAMPLE_DIR) / spec.folder
    return load_task(
        name,
        spec.labels,
        {split: folder / f"{split}.csv" for split in ("train", "test")},
        lambda path, split: read_csv(path, spec),
        sizes={"train": train_size, "test": test_size},
        seed=seed,
        index=list(DATASETS).index(name),
    )


def resolve_tasks(order: str | None = None, tasks: Sequence[str] | None = None) -> tuple[str, ...]:
    """Turn an order name or an explicit task list into dataset names.

    Args:
        order: One of ``"i"``..``"iv"``.
        tasks: Dataset names in the order to train them (overrides ``order``).

    """
    return resolve_order(order, tasks, datasets=DATASETS, orders=ORDERS, family="")


def text_classification_stream(
    order: str | None = "i",
    *,
    tasks: Sequence[str] | None = None,
    data_dir: str | Path | None = None,
    train_size: int | None = None,
    test_size: int | None = None,
    seed: int = 0,
) -> TaskStream:
    """Build a text-classification stream in a paper order or a chosen order.

    Args:
        order: Paper order ``"i"``..``"iv"`` (ignored when ``tasks`` is given).
        tasks: Dataset names, in training order, e.g. ``["ag_news", "yelp"]``.
        data_dir: Directory of the real CSVs; the bundled sample if ``None``.
        train_size: Training examples per dataset (paper: 115,000; all rows if ``None``).
        test_size: Test examples per dataset (paper: 7,600; all rows if ``None``).
        seed: Sampling seed.

    Returns:
        A `TaskStream` over the merged 33-class label space.

    """
    names = resolve_tasks(order, tasks)
    loaded = tuple(
        load_dataset(n, data_dir, train_size=train_size, test_size=test_size, seed=seed)
        for n in names
    )
    source = "bundled sample" if data_dir is None else str(data_dir)
    return TaskStream(
        loaded,
        merged_label_names(),
        description=f"text classification ({source}): " + " -> ".join(names),
    )


def from_spec(spec: StreamSpec) -> TaskStream:
    """The stream a `StreamSpec` describes; real data defaults to the paper's sizes.

    With a ``data_dir`` and no size given, each dataset is sampled to the paper's 115,000
    training and 7,600 test examples (de Masson d'Autume et al., 2019, §4.1); the bundled sample
    is read whole.
    """
    real = spec.data_dir is not None
    return text_classification_stream(
        spec.order,
        tasks=spec.tasks,
        data_dir=spec.data_dir,
        train_size=spec.train_size or (PAPER_TRAIN_SIZE if real else None),
        test_size=spec.test_size or (PAPER_TEST_SIZE if real else None),
        seed=spec.seed,
    )
