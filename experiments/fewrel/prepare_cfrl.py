"""Write a lifelong-FewRel data directory from the real FewRel sentences of the CFRL split.

``../shared/data/fewrel_cfrl/`` (see its README) holds real FewRel 1.0 sentences in the continual
few-shot split of Qin & Joty (2022): ``test_0.txt`` has 100 sentences for each of the 80
relations, each line listing the gold and 10 negative candidates. This script splits every
relation's sentences into a training and a test part with a fixed seed and writes them in the
layout the FewRel loader reads (Wang et al.'s ``relation_name.txt``, ``training_data.txt`` and
``val_data.txt``: ``gold <TAB> candidates <TAB> sentence``), so that
``lifelong run --stream fewrel --data-dir OUT`` runs on real text:

    python experiments/fewrel/prepare_cfrl.py --out data/fewrel_cfrl

This is not the lifelong FewRel benchmark file of Wang et al. (2019), only the same relations,
sentences and candidate layout: see the README's real-sentence table.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from lifelong.files import atomic_write_text

SOURCE = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "fewrel_cfrl"


def read_lines(path: Path) -> list[list[str]]:
    """The tab-separated fields of every line; the first three are gold, candidates, sentence."""
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        fields = line.split("\t")
        if len(fields) < 3 or not fields[0].strip().isdigit():
            raise ValueError(f"{path}:{number}: expected 'gold<TAB>candidates<TAB>sentence...'")
        rows.append(fields[:3])
    return rows


def split(rows: list[list[str]], train_per_relation: int, seed: int) -> tuple[list, list]:
    """Every relation's lines cut into ``train_per_relation`` training lines and the rest."""
    by_relation: dict[str, list[list[str]]] = {}
    for row in rows:
        by_relation.setdefault(row[0], []).append(row)
    train, test = [], []
    for relation in sorted(by_relation, key=int):
        lines = by_relation[relation]
        if len(lines) <= train_per_relation:
            raise ValueError(
                f"relation {relation} has {len(lines)} sentences; need more than "
                f"{train_per_relation} to leave some for testing"
            )
        order = np.random.default_rng([seed, int(relation)]).permutation(len(lines))
        train += [lines[i] for i in order[:train_per_relation]]
        test += [lines[i] for i in order[train_per_relation:]]
    return train, test


def main(argv: list[str] | None = None) -> None:
    """Parse the arguments and write the three files."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=SOURCE, help="the fewrel_cfrl directory")
    parser.add_argument("--out", type=Path, required=True, help="directory to write")
    parser.add_argument("--train-per-relation", type=int, default=70, help="default 70 of 100")
    parser.add_argument("--seed", type=int, default=0, help="seed of the per-relation split")
    args = parser.parse_args(argv)
    names = (args.source / "relation_name.txt").read_text(encoding="utf-8").splitlines()
    train, test = split(read_lines(args.source / "test_0.txt"), args.train_per_relation, args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out / "relation_name.txt", "".join(f"{n}\n" for n in names))
    for name, rows in (("training_data.txt", train), ("val_data.txt", test)):
        atomic_write_text(args.out / name, "".join("\t".join(r) + "\n" for r in rows))
    print(f"{args.out}: {len(names)} relations, {len(train)} training / {len(test)} test lines")


if __name__ == "__main__":
    main()
