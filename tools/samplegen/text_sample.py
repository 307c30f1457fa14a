"""The bundled sample of the five Zhang et al. (2015) text-classification datasets.

The sample is project-written: every row comes from templates filled with per-class slot
lexicons (``templates/text_classification/<dataset>.yaml``), so no text is copied from the real
corpora. The files copy the real layout exactly (``<folder>/{train,test}.csv``, no header, the
1-indexed label first, every field double-quoted, newlines inside a field written as a literal
backslash-n), so the loaders read the sample and the real data the same way. Each class has its
own vocabulary, so a small model can learn it from a few hundred rows, and the five star ratings
of Yelp and Amazon are graded from furious to enthusiastic.

Template syntax: ``{slot}`` draws a value from the class's lexicon (the same value every time
the slot recurs in a row); ``{slot#2}`` draws a second, different value; ``{slot.1}`` picks an
item of a list value; ``{slot:cap}``, ``{slot:upper}``, ``{slot:lower}`` and ``{slot:title}``
change case. Values may themselves contain slots.
"""

from __future__ import annotations

import csv
import io
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from lifelong.files import atomic_write_text

TEMPLATES = Path(__file__).parent / "templates" / "text_classification"
"""One YAML file per dataset: its folder, and per class (label order) row templates and slots."""

DATASET_FILES = ("ag_news", "yelp", "amazon", "dbpedia", "yahoo")
"""The datasets, in the order the generator draws them (each has its own generator)."""

MAX_WORDS = 60
"""Longest row, in words over all text fields, that the generator keeps."""

NEWLINE_RATE = 0.1
"""Share of rows in which one sentence break becomes a literal backslash-n, as in the real files."""

MAX_ATTEMPTS = 2000
"""Draws per row before giving up on finding a new, short enough row."""

Slots = Mapping[str, list]
"""A lexicon: slot name to its values (strings, or lists of strings read with ``{slot.N}``)."""

# ---------------------------------------------------------------------------------------------
# Template filling
# ---------------------------------------------------------------------------------------------

_SLOT = re.compile(r"\{([a-z_][a-z0-9_]*)(#\d+)?(?:\.(\d+))?(?::(cap|upper|lower|title))?\}")
_SMALL_WORDS = frozenset({"a", "an", "and", "at", "by", "for", "in", "of", "on", "the", "to"})
_SENTENCE_BREAK = re.compile(r"(?<=[a-z0-9)]{3}[.!?]) (?=[A-Z])")
_CLAUSE_BREAK = re.compile(r"(?<=[a-z]{3}[,;]) (?=[a-z])")


def _title_case(text: str) -> str:
    # Headline case; short function words stay lower case (a title never starts with a slot
    # value that begins with one).
    words = text.split(" ")
    return " ".join(w if w in _SMALL_WORDS else w[:1].upper() + w[1:] for w in words)


_CASES: dict[str, Callable[[str], str]] = {
    "cap": lambda s: s[:1].upper() + s[1:],
    "upper": str.upper,
    "lower": str.lower,
    "title": _title_case,
}


class _Filler:
    """Fills the templates of one row, drawing each slot once and reusing it within the row."""

    def __init__(self, slots: Slots, rng: random.Random) -> None:
        self._slots = slots
        self._rng = rng
        self._drawn: dict[str, object] = {}

    def fill(self, template: str) -> str:
        """Replace every slot of ``template`` (recursively)."""
        return _SLOT.sub(self._replace, template)

    def _replace(self, match: re.Match[str]) -> str:
        name, copy, index, case = match.groups()
        value = self._draw(name, name + (copy or ""))
        if index is not None:
            value = value[int(index)]
        text = self.fill(value)
        return _CASES[case](text) if case else text

    def _draw(self, name: str, key: str) -> object:
        if key not in self._drawn:
            pool = self._slots[name]
            used = [v for k, v in self._drawn.items() if k.split("#")[0] == name]
            fresh = [v for v in pool if v not in used] or list(pool)
            self._drawn[key] = self._rng.choice(fresh)
        return self._drawn[key]


# ---------------------------------------------------------------------------------------------
# Dataset descriptions (read from the YAML templates)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ClassSpec:
    """One class: row templates (one template per text column) and the lexicon they draw on."""

    rows: list[list[str]]
    slots: Slots


@dataclass(frozen=True)
class _DatasetSpec:
    """One dataset: its folder and its classes in label order (label 1 first)."""

    folder: str
    classes: tuple[_ClassSpec, ...]
    unique_title: bool = False


@cache
def datasets() -> tuple[_DatasetSpec, ...]:
    """Every dataset's templates, read from `TEMPLATES`."""
    out = []
    for name in DATASET_FILES:
        raw = yaml.safe_load((TEMPLATES / f"{name}.yaml").read_text(encoding="utf-8"))
        classes = tuple(_ClassSpec(c["rows"], c["slots"]) for c in raw["classes"])
        out.append(_DatasetSpec(raw["folder"], classes, bool(raw.get("unique_title", False))))
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------------------------


def _clean(text: str) -> str:
    """Collapse whitespace (no raw newlines survive) and trim."""
    return " ".join(text.split())


def _normalise(fields: Sequence[str]) -> str:
    """The text a loader sees, lower-cased: what must not repeat within a dataset."""
    return _clean(" ".join(f.replace("\\n", " ") for f in fields)).lower()


def _draw_row(spec: _ClassSpec, rng: random.Random) -> list[str]:
    """Fill one randomly chosen row template of a class."""
    filler = _Filler(spec.slots, rng)
    fields = [_clean(filler.fill(t)) for t in rng.choice(spec.rows)]
    for field in fields:
        if "{" in field or "}" in field:
            raise ValueError(f"malformed slot left in {field!r}")
    return fields


def _add_newline(fields: list[str], rng: random.Random) -> list[str]:
    """Turn one break of the longest field into a literal backslash-n, as the real files do.

    A sentence break is used where the field has one, a clause break (after a comma) otherwise.
    """
    i = max(range(len(fields)), key=lambda j: len(fields[j]))
    spots = list(_SENTENCE_BREAK.finditer(fields[i])) or list(_CLAUSE_BREAK.finditer(fields[i]))
    if not spots:
        return fields
    spot = rng.choice(spots)
    marker = rng.choice(("\\n", "\\n", "\\n\\n"))
    out = list(fields)
    out[i] = fields[i][: spot.start()] + marker + fields[i][spot.end() :]
    return out


def _new_row(
    spec: _DatasetSpec, label: int, rng: random.Random, seen: set[str], titles: set[str]
) -> list[str]:
    """Draw rows of class ``label`` until one is new and short; record and return it."""
    for _ in range(MAX_ATTEMPTS):
        fields = _draw_row(spec.classes[label - 1], rng)
        key = _normalise(fields)
        title = fields[0].lower()
        if key in seen or len(key.split()) > MAX_WORDS:
            continue
        if spec.unique_title and title in titles:
            continue
        seen.add(key)
        titles.add(title)
        if rng.random() < NEWLINE_RATE:
            fields = _add_newline(fields, rng)
        return [str(label), *fields]
    raise RuntimeError(
        f"{spec.folder}: no new row for class {label} after {MAX_ATTEMPTS} draws; "
        "add templates or slot values"
    )


def _split_rows(
    spec: _DatasetSpec, n_rows: int, rng: random.Random, seen: set[str], titles: set[str]
) -> list[list[str]]:
    """Draw ``n_rows`` balanced rows (labels round-robin) and shuffle them."""
    n_classes = len(spec.classes)
    rows = [_new_row(spec, 1 + i % n_classes, rng, seen, titles) for i in range(n_rows)]
    rng.shuffle(rows)
    return rows


def _dataset_rows(
    spec: _DatasetSpec, seed: int, train_rows: int, test_rows: int
) -> dict[str, list[list[str]]]:
    """Both splits of one dataset, from one generator and without repeats across them."""
    rng = random.Random(f"{seed}:{spec.folder}")
    seen: set[str] = set()
    titles: set[str] = set()
    return {
        "train": _split_rows(spec, train_rows, rng, seen, titles),
        "test": _split_rows(spec, test_rows, rng, seen, titles),
    }


def _write_csv(path: Path, rows: Sequence[Sequence[str]]) -> None:
    """Write rows in the Zhang et al. layout (every field quoted), atomically."""
    buf = io.StringIO(newline="")
    csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    atomic_write_text(path, buf.getvalue(), mode=0o644)


def generate(out_dir: Path, *, seed: int = 0, train_rows: int = 300, test_rows: int = 100) -> None:
    """Write the sample of all five datasets under ``out_dir``.

    Each dataset gets ``<folder>/train.csv`` and ``<folder>/test.csv`` with balanced classes,
    no text repeated within a dataset, and rows of at most `MAX_WORDS` words. The output is a
    function of the arguments only: the same call writes byte-identical files.

    Args:
        out_dir: Directory to hold the dataset folders (created if missing).
        seed: Seed of the generators (each dataset derives its own from it).
        train_rows: Rows per training file.
        test_rows: Rows per test file.

    Raises:
        ValueError: A row count is not positive.
        RuntimeError: The templates of a class cannot supply enough distinct rows.

    """
    if train_rows < 1 or test_rows < 1:
        raise ValueError(f"row counts must be positive, got {train_rows} and {test_rows}")
    for spec in datasets():
        splits = _dataset_rows(spec, seed, train_rows, test_rows)
        for split, rows in splits.items():
            _write_csv(Path(out_dir) / spec.folder / f"{split}.csv", rows)
