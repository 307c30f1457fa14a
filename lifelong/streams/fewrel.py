"""The lifelong FewRel benchmark (Wang et al., 2019; used by Holla et al., 2020).

Data layout (the files of Wang et al.'s lifelong relation detection release), in one directory:

- ``relation_name.txt``: line k names relation k (1-indexed), e.g. ``///place of birth``. Leading
  slashes and surrounding whitespace are dropped (``"place of birth"``); 80 lines for FewRel.
- ``training_data.txt`` (training set) and ``val_data.txt`` (the test set, as in the papers):
  one example a line, ``gold_id <TAB> candidate_ids <TAB> sentence``, ids 1-indexed and
  space-separated. The candidate ids are the negatives; the real files also list the gold among
  them, which is accepted and dropped (duplicates too). A trailing tab after the sentence (the real
  files end every line with a space and a tab) and blank lines are allowed.

The stream: the relation names are embedded (a caller-given ``embed`` function, or GloVe vectors
averaged over a name's words) and clustered by K-means into ``n_tasks`` clusters; task k holds the
relations of the k-th cluster in an order shuffled by ``order_seed`` (the papers average over
several such orders). A task's training examples are the training lines whose gold relation is in
the cluster, its test examples the test lines whose gold relation is in the cluster, so that the
tasks' test sets together form one test set over all relations.

An `Example` holds ``text`` = the sentence, ``label`` = the gold relation id (0-based),
``candidates`` = candidate relation ids with the gold among them at a position drawn per example
from a seeded generator (so the position never gives the gold away), ``uid`` =
``"<file name>:<line number>"``.

Negatives of **training** examples are restricted to relations seen so far (tasks 0..k), as in
Holla et al.'s ``remove_unseen_relations`` (``datasets/utils.py``; Wang et al. do the same): the
line's negatives that are seen are kept, with no top-up, and when none survives the line's last
two negatives stand in (which may be unseen). A training example of a first task thus often has
fewer candidates than the file lists. **Test** examples keep all the candidates of their line
(Holla et al.'s pooled test set is built from the full ``val_data.txt``).

The clustering is fixed whatever the run's seed: ``KMeans(n_clusters=10, random_state=0)``, as
``datasets/utils.py`` does over GloVe 6B-300d name vectors. Sizes count sentences **per
relation** (at most that many of each relation; all if ``None``), so a cluster of 41 relations
gets 41 times the sentences of a one-relation cluster, as with the whole files.

The bundled sample is written by ``python -m tools.samplegen fewrel``.
"""

from __future__ import annotations

import logging
import math
import re
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from lifelong.options import PositiveInt, Seed
from lifelong.streams.core import (
    DataFormatError,
    Embedder,
    Example,
    SourceFields,
    Task,
    TaskStream,
    decimal,
    text_lines,
)
from lifelong.streams.hf_datasets import (
    HubSource,
    Split,
    describe_source,
    open_split,
    require_datasets,
)

log = logging.getLogger(__name__)

SAMPLE_DIR = Path(__file__).parent / "samples" / "fewrel"
"""The bundled, project-written sample in the real layout (20 relations)."""

RELATION_FILE = "relation_name.txt"
TRAIN_FILE = "training_data.txt"
TEST_FILE = "val_data.txt"

CLUSTER_PREFIX = "clusters-"
"""Reports' order of a FewRel run: ``clusters-<cluster_order>``."""

PAPER_N_TASKS = 10
"""Clusters (tasks) in Wang et al. (2019) and Holla et al. (2020)."""

CLUSTER_SEED = 0
"""K-means ``random_state`` of Holla et al. (``datasets/utils.py``), whatever the run's seed."""


# ---------------------------------------------------------------------------------------------
# Reading the files
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RelationLine:
    """One line of ``training_data.txt`` or ``val_data.txt``, ids already 0-based.

    Attributes:
        gold: The gold relation id.
        negatives: The negative candidate ids, in file order, without the gold or repeats.
        sentence: The sentence, whitespace normalised.
        uid: ``"<file name>:<line number>"``.
        line: The line number (1-based).

    """

    gold: int
    negatives: tuple[int, ...]
    sentence: str
    uid: str
    line: int


def _require_file(path: Path, what: str) -> None:
    if not path.is_file():
        raise DataFormatError(f"{path}: file not found (expected {what})")


def clean_relation_name(raw: str) -> str:
    """A relation name without its leading slashes and outer whitespace (``///x`` -> ``x``)."""
    return raw.strip().lstrip("/").strip()


def read_relation_names(path: str | Path) -> list[str]:
    """Read ``relation_name.txt``: line k names relation k (1-indexed).

    Args:
        path: The file.

    Returns:
        The cleaned names; index i is relation id i (0-based), i.e. file line i + 1.

    Raises:
        DataFormatError: The file is missing or empty, or a line before the last name is blank;
            the message names the file and line.

    """
    path = Path(path)
    _require_file(path, "one relation name a line, line k naming relation k")
    lines = [line.rstrip("\r\n") for _, line in text_lines(path)]
    while lines and not clean_relation_name(lines[-1]):
        lines.pop()  # blank lines at the end name no relation
    if not lines:
        raise DataFormatError(f"{path}: the file names no relation")
    names = []
    for number, line in enumerate(lines, start=1):
        name = clean_relation_name(line)
        if not name:
            raise DataFormatError(
                f"{path}:{number}: blank relation name (line k must name relation k)"
            )
        names.append(name)
    return names


def relation_names(data_dir: str | Path | None = None) -> list[str]:
    """The relation names of a data directory (the bundled sample if ``None``), by 0-based id."""
    return read_relation_names(_data_dir(data_dir) / RELATION_FILE)


def _parse_id(token: str, what: str, n_relations: int, where: str) -> int:
    rel = decimal(token)
    if rel is None:
        raise DataFormatError(f"{where}: {what} {token!r} is not an integer relation id")
    if not 1 <= rel <= n_relations:
        raise DataFormatError(
            f"{where}: {what} {rel} is not in {RELATION_FILE} (ids 1..{n_relations})"
        )
    return rel - 1


def parse_relation_line(line: str, n_relations: int, path: Path, number: int) -> RelationLine:
    """Parse one ``gold <TAB> candidates <TAB> sentence`` line.

    Args:
        line: The line, without its line break.
        n_relations: Lines of ``relation_name.txt`` (valid ids are 1..n_relations).
        path: The file, for the uid and error messages.
        number: The line number (1-based).

    Raises:
        DataFormatError: Wrong field count, a non-integer or out-of-range id, no negative
            candidate, or an empty sentence; the message starts with ``"<path>:<line>:"``.

    """
    where = f"{path}:{number}"
    fields = line.split("\t")
    if len(fields) == 4 and not fields[3].strip():
        fields = fields[:3]  # the real files end every line with a tab
    if len(fields) != 3:
        raise DataFormatError(
            f"{where}: expected 3 tab-separated fields (gold_id, candidate_ids, sentence), "
            f"got {len(fields)}"
        )
    gold = _parse_id(fields[0].strip(), "gold id", n_relations, where)
    tokens = fields[1].split()
    if not tokens:
        raise DataFormatError(f"{where}: empty candidate list")
    candidates = (_parse_id(t, "candidate id", n_relations, where) for t in tokens)
    negatives = tuple(dict.fromkeys(c for c in candidates if c != gold))
    if not negatives:
        raise DataFormatError(f"{where}: the candidate list holds no negative (only the gold id)")
    sentence = " ".join(fields[2].split())
    if not sentence:
        raise DataFormatError(f"{where}: empty sentence")
    return RelationLine(gold, negatives, sentence, f"{path.name}:{number}", number)


def read_relation_file(path: str | Path, n_relations: int) -> list[RelationLine]:
    """Read and validate every line of ``training_data.txt`` or ``val_data.txt``.

    Args:
        path: The file.
        n_relations: Lines of ``relation_name.txt``.

    Returns:
        One `RelationLine` per non-blank line, ids 0-based; lines whose candidate field is
        ``noNegativeAnswer`` are skipped (and counted in the log), as Holla et al.'s reader does.

    Raises:
        DataFormatError: The file is missing or has no example, or a line is malformed (see
            `parse_relation_line`); the message names the file and line.

    """
    path = Path(path)
    _require_file(path, "lines 'gold_id<TAB>candidate_ids<TAB>sentence', ids 1-indexed")
    lines, skipped = [], 0
    for number, raw in text_lines(path):
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        if _no_negative(line):
            skipped += 1
            continue
        lines.append(parse_relation_line(line, n_relations, path, number))
    if skipped:
        log.info("%s: skipped %d line(s) marked %s, as Holla et al. do", path, skipped, NO_NEGATIVE)
    if not lines:
        raise DataFormatError(f"{path}: the file has no examples")
    return lines


NO_NEGATIVE = "noNegativeAnswer"
"""The candidate field of a line with no negative relation. Holla et al.'s reader skips such
lines (``datasets/utils.py`` ``read_rel_data``, L102–107), so this one does too."""


def _no_negative(line: str) -> bool:
    fields = line.split("\t")
    return len(fields) >= 2 and fields[1].strip() == NO_NEGATIVE


def _data_dir(data_dir: str | Path | None) -> Path:
    return Path(data_dir) if data_dir is not None else SAMPLE_DIR


# ---------------------------------------------------------------------------------------------
# Hugging Face datasets (data_source "hf")
# ---------------------------------------------------------------------------------------------

HUB_SOURCE = HubSource(
    None,
    None,
    {"train": "train", "test": "test"},
    ("relation", "candidates", "sentence"),
    note="Wang et al.'s lifelong FewRel (candidate sets included) is not on the hub; "
    "thunlp/few_rel is FewRel 1.0 without them. Convert the release with "
    "lifelong.streams.fewrel.fewrel_dataset(DIR).save_to_disk('DIR_HF/fewrel')",
)
"""Lifelong FewRel in ``datasets`` form: splits ``train`` (``training_data.txt``) and ``test``
(``val_data.txt``); columns ``relation`` (a ``ClassLabel`` whose names are the relation names,
so the gold id is 0-based and the names travel with the data), ``candidates`` (0-based ids of
the line's candidates, the gold allowed as in the files) and ``sentence``. `fewrel_dataset`
writes it from the files."""


def read_hf_relations(
    data_dir: str | Path | None,
) -> tuple[list[str], list[RelationLine], list[RelationLine]]:
    """Relation names, training lines and test lines from a ``datasets`` copy (`HUB_SOURCE`).

    Row ``i`` gets line number ``i + 1``, which seeds its candidate shuffle, so a dataset
    converted by `fewrel_dataset` from files without blank lines gives the same examples.

    Raises:
        DataFormatError: No copy (the hub has none), a missing split or column, a
            ``relation`` column that is not a ``ClassLabel``, or a malformed row (as
            `parse_relation_line`, naming the split and row).

    """
    train = open_split("fewrel", "train", HUB_SOURCE, data_dir)
    test = open_split("fewrel", "test", HUB_SOURCE, data_dir)
    names = train.class_names("relation")
    if names is None:
        raise DataFormatError(
            f"{train.where}: column 'relation' must be a ClassLabel naming the relations"
        )
    if test.class_names("relation") != names:
        raise DataFormatError(f"{test.where}: column 'relation' names other relations than train")
    cleaned = [clean_relation_name(n) for n in names]
    return cleaned, _hf_lines(train, len(names)), _hf_lines(test, len(names))


def _hf_lines(opened: Split, n_relations: int) -> list[RelationLine]:
    lines = []
    for i, row in opened.rows():
        where = opened.at(i)
        gold = _hf_id(row["relation"], "relation", n_relations, where)
        candidates = row["candidates"]
        if not isinstance(candidates, list) or not candidates:
            raise DataFormatError(f"{where}: 'candidates' must be a non-empty list of ids")
        ids = (_hf_id(c, "candidate id", n_relations, where) for c in candidates)
        negatives = tuple(dict.fromkeys(c for c in ids if c != gold))
        if not negatives:
            raise DataFormatError(f"{where}: the candidates hold no negative (only the gold id)")
        sentence = " ".join(str(row["sentence"] or "").split())
        if not sentence:
            raise DataFormatError(f"{where}: empty sentence")
        lines.append(RelationLine(gold, negatives, sentence, opened.uid(i), i + 1))
    if not lines:
        raise DataFormatError(f"{opened.where}: the split has no rows")
    return lines


def _hf_id(value: object, what: str, n_relations: int, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < n_relations:
        raise DataFormatError(
            f"{where}: {what} {value!r} is not a relation id in 0..{n_relations - 1}"
        )
    return value


def fewrel_dataset(data_dir: str | Path | None = None) -> Any:
    """Wang et al.'s lifelong-FewRel files as a ``datasets.DatasetDict`` (`HUB_SOURCE` form).

    ``fewrel_dataset(DIR).save_to_disk("HF/fewrel")`` (or ``.push_to_hub(...)``) makes a copy
    that ``--data-source hf --data-dir HF`` reads; the stream built from it equals the one
    built from the files.
    """
    datasets = require_datasets()
    root = _data_dir(data_dir)
    names = relation_names(root)
    features = datasets.Features(
        {
            "relation": datasets.ClassLabel(names=names),
            "candidates": datasets.Sequence(datasets.Value("int32")),
            "sentence": datasets.Value("string"),
        }
    )
    splits = {}
    for split, file in (("train", TRAIN_FILE), ("test", TEST_FILE)):
        lines = read_relation_file(root / file, len(names))
        columns = {
            "relation": [x.gold for x in lines],
            "candidates": [[x.gold, *x.negatives] for x in lines],
            "sentence": [x.sentence for x in lines],
        }
        splits[split] = datasets.Dataset.from_dict(columns, features=features)
    return datasets.DatasetDict(splits)


# ---------------------------------------------------------------------------------------------
# Embedding and clustering the relation names
# ---------------------------------------------------------------------------------------------

_WORD = re.compile(r"[^\W_]+")


def name_words(name: str) -> list[str]:
    """The lower-cased words of a name, split on whitespace, punctuation and underscores."""
    return _WORD.findall(name.lower())


def hashed_bag_of_words(names: Sequence[str], dim: int = 256) -> np.ndarray:
    """A deterministic, model-free embedding: unit-norm hashed bag of words (CRC32 buckets).

    Meant for tests and demos; the real runs embed names with the key encoder or GloVe.

    Returns:
        Array of shape ``(len(names), dim)``; a name without words maps to zeros.

    """
    out = np.zeros((len(names), dim))
    for row, name in enumerate(names):
        for word in name_words(name):
            out[row, zlib.crc32(word.encode("utf-8")) % dim] += 1.0
        norm = np.linalg.norm(out[row])
        if norm > 0:
            out[row] /= norm
    return out


def read_glove(path: str | Path, words: Iterable[str] | None = None) -> dict[str, np.ndarray]:
    """Read the vectors of a GloVe text file (``word v1 v2 ...`` a line).

    Every line is checked for a word and the vector size of the first line; only the vectors of
    ``words`` (lower-cased; all if ``None``) are parsed. A word matches a file entry
    case-insensitively, the exact lower-case entry first, else the first entry in the file.

    Raises:
        DataFormatError: The file is missing or empty, or a line has the wrong number of fields
            or (for a wanted word) a value that is not a number; the message names file and line.

    """
    path = Path(path)
    _require_file(path, "a GloVe text file, 'word v1 v2 ...' a line")
    wanted = None if words is None else {w.lower() for w in words}
    vectors: dict[str, np.ndarray] = {}
    dim = 0
    for number, raw in text_lines(path):
        line = raw.rstrip()
        if not line:
            continue
        where = f"{path}:{number}"
        if not dim:
            dim = len(line.split(" ")) - 1
            if dim < 1:
                raise DataFormatError(f"{where}: expected a word followed by its vector")
        parts = line.rsplit(" ", dim)  # some GloVe words hold spaces
        if len(parts) != dim + 1 or not parts[0]:
            raise DataFormatError(
                f"{where}: expected a word and {dim} numbers (the size of the first vector), "
                f"got {len(parts)} fields"
            )
        key = parts[0].lower()
        if (wanted is None or key in wanted) and (key not in vectors or parts[0] == key):
            try:
                vectors[key] = np.array(parts[1:], dtype=np.float64)
            except ValueError:
                raise DataFormatError(
                    f"{where}: the vector of {parts[0]!r} has a non-number"
                ) from None
    if not dim:
        raise DataFormatError(f"{path}: the file holds no vector")
    return vectors


def glove_embedder(path: str | Path) -> Embedder:
    """An embedding of names by their mean GloVe word vector (words as in `name_words`).

    A word missing from the file counts as a zero vector in the mean, as torchtext's GloVe gives
    Holla et al. (``get_vecs_by_tokens``: unknown words map to zeros); the file is read on each
    call, parsing only the vectors of the names' words.

    Raises:
        DataFormatError: (When called) a name has no word in the file, naming the name and file;
            or the file is malformed (see `read_glove`).

    """
    path = Path(path)

    def embed(names: Sequence[str]) -> np.ndarray:
        tokens = [name_words(name) for name in names]
        vectors = read_glove(path, {w for words in tokens for w in words})
        rows = []
        for rel, (name, words) in enumerate(zip(names, tokens)):
            known = [vectors[w] for w in words if w in vectors]
            if not known:
                raise DataFormatError(
                    f"{path}: relation {rel} {name!r} has no word in this GloVe file "
                    f"(words: {words})"
                )
            rows.append(np.sum(known, axis=0) / len(words))  # unknown words: zero vectors
        return np.stack(rows)

    return embed


def embed_names(names: Sequence[str], embed: Embedder) -> np.ndarray:
    """Call ``embed`` and check that it returned one finite vector per name."""
    vectors = np.asarray(embed(list(names)), dtype=np.float64)
    if vectors.ndim != 2 or vectors.shape[0] != len(names) or vectors.shape[1] < 1:
        raise ValueError(
            f"the embedding returned shape {vectors.shape}; expected ({len(names)}, dim)"
        )
    if not np.isfinite(vectors).all():
        raise ValueError("the embedding returned non-finite values")
    return vectors


def cluster_relations(
    names: Sequence[str],
    n_tasks: int,
    seed: int,
    embed: Embedder,
    order: Sequence[int] | None = None,
) -> list[list[int]]:
    """Partition relations into ``n_tasks`` clusters by K-means over their name embeddings.

    ``KMeans(n_clusters=n_tasks, random_state=seed, n_init=10)``; the result depends only on the
    names, ``n_tasks``, ``seed``, the embedding and the order the names are given to K-means in
    (k-means++ picks its first centres by row).

    Args:
        names: Relation names, index = relation id.
        n_tasks: Number of clusters.
        seed: K-means seed (0 <= seed < 2**32).
        embed: The name embedding.
        order: The relation ids in the order their vectors go to K-means (Holla et al.: first
            appearance in the training file, `first_appearance`); default: by id.

    Returns:
        The clusters as sorted lists of relation ids, ordered by their smallest id; all non-empty.

    Raises:
        ValueError: ``n_tasks`` < 1 or above the number of relations, or the embedding has fewer
            distinct vectors than ``n_tasks`` (some cluster would be empty).

    """
    from sklearn.cluster import KMeans  # heavy import, only when clustering

    if not 1 <= n_tasks <= len(names):
        raise ValueError(f"cannot make {n_tasks} tasks out of {len(names)} relations")
    _check_seed(seed, "seed")
    rows = np.arange(len(names)) if order is None else np.asarray(order, dtype=np.int64)
    if sorted(rows.tolist()) != list(range(len(names))):
        raise ValueError(f"order must list every relation id 0..{len(names) - 1} once")
    vectors = embed_names([names[i] for i in rows], embed)  # (R, d), rows in `order`
    if len(np.unique(vectors, axis=0)) < n_tasks:
        raise ValueError(
            f"the embedding maps the {len(names)} relation names to fewer than {n_tasks} "
            "distinct vectors, so some cluster would be empty"
        )
    labels = np.empty(len(names), dtype=np.int64)
    labels[rows] = KMeans(n_clusters=n_tasks, random_state=seed, n_init=10).fit(vectors).labels_
    clusters = [sorted(np.flatnonzero(labels == c).tolist()) for c in range(n_tasks)]
    if any(not c for c in clusters):  # K-means relocates empty clusters; guard anyway
        raise ValueError(f"K-means left an empty cluster: {clusters}")
    return sorted(clusters, key=lambda c: c[0])


def first_appearance(lines: Sequence[RelationLine], n_relations: int) -> list[int]:
    """Relation ids in the order they first appear as gold in ``lines``, then the others by id.

    Holla et al. order the relations so before clustering their names (``datasets/utils.py``
    ``get_relation_index``, called in ``train_rel.py``), and K-means++ depends on that order.
    """
    order = list(dict.fromkeys(line.gold for line in lines))
    return order + [r for r in range(n_relations) if r not in set(order)]


def cluster_order(n_tasks: int, order_seed: int) -> list[int]:
    """The task order of run ``order_seed``: the ``order_seed``-th distinct shuffle of the clusters.

    Shuffles are drawn one after another from one generator (seed 0), as Holla et al. draw each
    order's ``random.shuffle`` from one seeded stream, and a shuffle equal to an earlier one is
    skipped, so runs 0..N−1 (``--runs N``, a sweep's ``orders``) are N different orders even for
    few clusters (independent seeds gave orders 0 and 2 the same order of 5 clusters).

    Raises:
        ValueError: ``order_seed`` is not below the number of orders, ``n_tasks!``.

    """
    _check_seed(order_seed, "order_seed")
    if order_seed >= math.factorial(min(n_tasks, 20)):
        raise ValueError(f"{n_tasks} clusters have only {math.factorial(n_tasks)} orders")
    rng = np.random.default_rng(0)
    seen: set[tuple[int, ...]] = set()
    while True:
        order = tuple(rng.permutation(n_tasks).tolist())
        if order in seen:
            continue
        if len(seen) == order_seed:
            return list(order)
        seen.add(order)


def _check_seed(value: int, what: str) -> None:
    if not 0 <= value < 2**32:
        raise ValueError(f"{what} must be in 0..2**32-1, got {value}")


# ---------------------------------------------------------------------------------------------
# The stream
# ---------------------------------------------------------------------------------------------

_TRAIN, _TEST = 0, 1


def make_train_example(
    line: RelationLine, seen: Sequence[int], *, seed: int, order_seed: int
) -> Example:
    """A training example whose negatives are the line's seen ones (Holla's rule).

    Holla et al.'s ``remove_unseen_relations`` (``datasets/utils.py``): keep the negatives
    that are among the ``seen`` relations, without topping them up; when none is seen, keep the
    line's last two negatives instead. The candidates are then shuffled by a generator derived
    from ``seed``, ``order_seed`` and the line, so the result does not depend on what else is
    loaded.
    """
    rng = np.random.default_rng([seed, order_seed, _TRAIN, line.line])
    seen_set = set(seen)
    kept = [c for c in line.negatives if c in seen_set] or list(line.negatives[-2:])
    return _example(line, [line.gold, *kept], rng)


def make_test_example(line: RelationLine, *, seed: int) -> Example:
    """A test example with all the line's candidates, shuffled (same for every task order)."""
    rng = np.random.default_rng([seed, _TEST, line.line])
    return _example(line, [line.gold, *line.negatives], rng)


def _example(line: RelationLine, candidates: list[int], rng: np.random.Generator) -> Example:
    shuffled = tuple(candidates[i] for i in rng.permutation(len(candidates)))
    return Example(line.sentence, line.gold, uid=line.uid, candidates=shuffled)


def sample_per_relation(
    lines: Sequence[RelationLine], size: int | None, *, seed: int
) -> list[RelationLine]:
    """At most ``size`` lines of each gold relation (all if ``None``), in file order.

    Each relation's lines are drawn without replacement by a generator derived from ``seed``
    and the relation, so a relation's sample does not depend on the others.
    """
    if size is None:
        return list(lines)
    by_relation: dict[int, list[int]] = {}
    for i, line in enumerate(lines):
        by_relation.setdefault(line.gold, []).append(i)
    keep: list[int] = []
    for rel, rows in by_relation.items():
        if len(rows) <= size:
            keep += rows
        else:
            keep += np.random.default_rng([seed, rel]).choice(rows, size, replace=False).tolist()
    return [lines[i] for i in sorted(keep)]


def _by_cluster(
    lines: Sequence[RelationLine], clusters: Sequence[Sequence[int]]
) -> list[list[RelationLine]]:
    cluster_of = {rel: c for c, rels in enumerate(clusters) for rel in rels}
    grouped: list[list[RelationLine]] = [[] for _ in clusters]
    for line in lines:
        grouped[cluster_of[line.gold]].append(line)
    return grouped


def fewrel_stream(
    *,
    data_dir: str | Path | None = None,
    n_tasks: int = PAPER_N_TASKS,
    seed: int = 0,
    order_seed: int = 0,
    embed: Embedder | None = None,
    glove: str | Path | None = None,
    train_size: int | None = None,
    test_size: int | None = None,
    cluster_seed: int = CLUSTER_SEED,
    data_source: str = "files",
) -> TaskStream:
    """Build the lifelong FewRel stream: relation clusters as tasks, in a shuffled order.

    Args:
        data_dir: Directory of ``relation_name.txt``, ``training_data.txt`` and ``val_data.txt``;
            the bundled sample if ``None``.
        n_tasks: Number of clusters, i.e. tasks (papers: 10).
        seed: Seed of the size sampling and the candidate shuffles (not of the clustering,
            which is Holla et al.'s ``random_state=0``: see ``cluster_seed``).
        order_seed: Seed of the task order (run index of ``--runs``; see `cluster_order`).
        embed: Embedding of the relation names (e.g. the key encoder's); exclusive with
            ``glove``.
        glove: A GloVe text file; names are embedded by their mean word vector.
        train_size: Training sentences per relation, at most (all if ``None``).
        test_size: Test sentences per relation, at most (all if ``None``).
        cluster_seed: K-means ``random_state`` (Holla et al.: 0), independent of ``seed``.
        data_source: ``"files"`` or ``"hf"`` (a ``datasets`` copy in ``data_dir``/fewrel:
            `HUB_SOURCE`, `read_hf_relations`).

    Returns:
        A ``kind="relation"`` `TaskStream`; task names are ``"c<i>"`` with ``i`` the cluster's
        index in `cluster_relations` order (stable across task orders), ``Task.labels`` the
        cluster's relation ids, ``label_names`` the relation names.

    Raises:
        ValueError: Neither or both of ``embed`` and ``glove``, a bad seed or ``n_tasks``, a
            cluster without training or test examples, or a size above what a task has.
        DataFormatError: A data or GloVe file is missing or malformed.

    """
    if (embed is None) == (glove is None):
        raise ValueError(
            "fewrel_stream needs exactly one of embed= (e.g. the key encoder's name embedding) "
            "or glove= (a GloVe text file) to cluster the relation names"
        )
    if data_source == "hf":
        root: Path | str = f"hf: {data_dir}" if data_dir is not None else "hf: hub"
        names, train_lines, test_lines = read_hf_relations(data_dir)
    else:
        root = _data_dir(data_dir)
        names = relation_names(root)
        train_lines = read_relation_file(root / TRAIN_FILE, len(names))
        test_lines = read_relation_file(root / TEST_FILE, len(names))
    embedder = embed if embed is not None else glove_embedder(glove)  # type: ignore[arg-type]
    order = first_appearance(train_lines, len(names))  # Holla et al.'s order for K-means
    clusters = cluster_relations(names, n_tasks, cluster_seed, embedder, order)
    log.info("relations per cluster: %s", [len(c) for c in clusters])
    train_groups = _by_cluster(sample_per_relation(train_lines, train_size, seed=seed), clusters)
    test_groups = _by_cluster(sample_per_relation(test_lines, test_size, seed=seed + 1), clusters)
    tasks = []
    seen: list[int] = []
    for c in cluster_order(n_tasks, order_seed):
        seen += clusters[c]
        where = f"cluster c{c} (relations {clusters[c]})"
        for split, group in (("training", train_groups[c]), ("test", test_groups[c])):
            if not group:
                raise ValueError(f"{root}: {where} has no {split} examples")
        train, test = train_groups[c], test_groups[c]
        tasks.append(
            Task(
                f"c{c}",
                tuple(clusters[c]),
                tuple(make_train_example(x, seen, seed=seed, order_seed=order_seed) for x in train),
                tuple(make_test_example(x, seed=seed) for x in test),
            )
        )
        log.info(
            "c%d: %d relations, %d train / %d test", c, len(clusters[c]), len(train), len(test)
        )
    source = describe_source(data_dir, data_source)
    return TaskStream(
        tuple(tasks),
        tuple(names),
        kind="relation",
        description=(
            f"lifelong FewRel ({source}): {len(names)} relations in {n_tasks} clusters "
            f"of {[len(c) for c in clusters]} relations, order {order_seed}: "
            + " -> ".join(t.name for t in tasks)
        ),
    )


@dataclass(frozen=True)
class FewRelSpec(SourceFields):
    """The lifelong-FewRel stream (config ``stream: fewrel``): relation clusters as tasks.

    Its tasks are K-means clusters of the relations, not named datasets: their number and
    shuffled order are ``fewrel_tasks`` and ``cluster_order``. Sizes count sentences per
    relation (``None``: all).

    Attributes:
        fewrel_tasks: Relation clusters, i.e. tasks (papers: 10).
        cluster_order: Seed of the shuffled cluster order (``--runs N``: 0..N-1).
        glove: GloVe file whose mean word vectors embed the relation names (default: the
            ``embed`` given to `build`, the run's key encoder).

    """

    name: ClassVar[str] = "fewrel"
    kind: ClassVar[str] = "relation"
    order_key: ClassVar[str] = "cluster_order"
    # one test set holding every cluster's relations (Holla et al., 2020, §4.1; the survey: "a
    # single test set"), not the mean of per-cluster accuracies
    headline_metric: ClassVar[str] = "pooled_accuracy"
    score_name: ClassVar[str] = "accuracy"
    title: ClassVar[str] = "lifelong FewRel"

    fewrel_tasks: PositiveInt = PAPER_N_TASKS
    cluster_order: Seed = 0
    glove: str | None = None

    def check(self) -> None:
        """Nothing to check before reading: the clusters come from the data."""

    @property
    def order_label(self) -> str:
        """``clusters<N>-o<cluster_order>``."""
        return f"clusters{self.fewrel_tasks}-o{self.cluster_order}"

    @property
    def order_id(self) -> str:
        """``clusters-<cluster_order>``: FewRel's orders are shuffles of the clusters."""
        return f"{CLUSTER_PREFIX}{self.cluster_order}"

    def build(self, seed: int = 0, embed: Embedder | None = None) -> TaskStream:
        """The stream: ``seed`` (the run's) samples the sentences, ``embed`` the names.

        Raises:
            ValueError: Neither ``glove`` nor ``embed`` to embed the relation names.

        """
        return fewrel_stream(
            data_dir=self.data_dir,
            n_tasks=self.fewrel_tasks,
            seed=seed,
            order_seed=self.cluster_order,
            embed=None if self.glove else embed,
            glove=self.glove,
            train_size=self.train_size,
            test_size=self.test_size,
            data_source=self.data_source,
        )
