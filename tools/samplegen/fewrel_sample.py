"""The bundled lifelong-FewRel sample: 20 relations in Wang et al.'s file layout.

Project-written: every sentence comes from a relation's templates (``templates/fewrel.yaml``),
each using the relation's own cue words so that a small model can learn it from a few sentences,
filled from a shared lexicon of invented names. ``relation_name.txt`` names the relations
(``///name``, 1-indexed in file order) and every line of ``training_data.txt`` /
``val_data.txt`` lists the gold among `SAMPLE_NEGATIVES` negatives, exactly as the real files do.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from lifelong.files import atomic_write_text
from lifelong.streams.fewrel import RELATION_FILE, TEST_FILE, TRAIN_FILE

TEMPLATES = Path(__file__).parent / "templates" / "fewrel.yaml"
"""The lexicon (slot -> values) and the relations with their sentence templates."""

SAMPLE_TRAIN_PER_RELATION = 16
SAMPLE_TEST_PER_RELATION = 6
SAMPLE_NEGATIVES = 10


@cache
def _templates() -> dict[str, Any]:
    return yaml.safe_load(TEMPLATES.read_text(encoding="utf-8"))


def _relations() -> list[tuple[str, list[str]]]:
    """(name, templates) of every relation, in file order."""
    return [(r["name"], r["templates"]) for r in _templates()["relations"]]


_SLOT = re.compile(r"\{([a-z]+)(#\d+)?\}")


def _fill(template: str, rng: random.Random) -> str:
    """Fill ``{slot}`` / ``{slot#2}`` from `_LEXICON`; ``#n`` draws a value the row lacks."""
    drawn: dict[tuple[str, str], str] = {}

    def value(match: re.Match[str]) -> str:
        key = (match.group(1), match.group(2) or "")
        if key not in drawn:
            used = {v for (slot, _), v in drawn.items() if slot == key[0]}
            drawn[key] = rng.choice([v for v in _templates()["lexicon"][key[0]] if v not in used])
        return drawn[key]

    return _SLOT.sub(value, template)


def _sample_sentences(templates: Sequence[str], n: int, rng: random.Random) -> list[str]:
    sentences: dict[str, None] = {}
    for _ in range(100 * n):
        if len(sentences) == n:
            return list(sentences)
        sentences.setdefault(_fill(rng.choice(templates), rng), None)
    raise RuntimeError(f"the templates {templates[0]!r}... cannot supply {n} distinct sentences")


def _sample_line(gold: int, sentence: str, rng: random.Random) -> str:
    # As in the real files: 1-indexed ids, the gold listed among its negatives at a random
    # place, a space after the last id, and " \t" after the sentence.
    others = [r for r in range(1, len(_relations()) + 1) if r != gold]
    ids = [*rng.sample(others, SAMPLE_NEGATIVES), gold]
    rng.shuffle(ids)
    return f"{gold}\t{' '.join(map(str, ids))} \t{sentence} \t\n"


def write_fewrel_sample(root: str | Path, seed: int = 0) -> None:
    """Write the project-written sample in the real layout under ``root``, atomically per file.

    ``relation_name.txt`` names 20 relations (``///name`` as in the real file); every relation
    gets `SAMPLE_TRAIN_PER_RELATION` training and `SAMPLE_TEST_PER_RELATION` test sentences from
    its templates (no sentence repeated), each line listing `SAMPLE_NEGATIVES` negatives drawn
    from the other relations; lines are shuffled. The files depend only on ``seed``.
    """
    root = Path(root)
    rng = random.Random(f"fewrel-sample:{seed}")
    n_train, n_test = SAMPLE_TRAIN_PER_RELATION, SAMPLE_TEST_PER_RELATION
    train: list[str] = []
    test: list[str] = []
    for gold, (_, templates) in enumerate(_relations(), start=1):
        sentences = _sample_sentences(templates, n_train + n_test, rng)
        train += [_sample_line(gold, s, rng) for s in sentences[:n_train]]
        test += [_sample_line(gold, s, rng) for s in sentences[n_train:]]
    rng.shuffle(train)
    rng.shuffle(test)
    contents = {
        RELATION_FILE: "".join(f"///{name}\n" for name, _ in _relations()),
        TRAIN_FILE: "".join(train),
        TEST_FILE: "".join(test),
    }
    for name, text in contents.items():
        atomic_write_text(root / name, text, mode=0o644)
