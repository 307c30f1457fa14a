"""Why SEQ* stays near SEQ on the real stream: its classifier on frozen features, isolated.

    python experiments/text_classification/seq_star_probe.py --data-dir ../shared/data/text_real
        [--orders i,ii] [--seeds 0,1,2] [--features-dir /tmp/seq_star_features] [--out table.md]

SEQ* (Zheng et al., 2024; `lifelong/strategies/seq_star.py`) freezes the encoder after a warm-up
on the first task and from then on trains only the classifier rows of each new task's classes, with
the earlier tasks' rows frozen (FixC) and every class's logit in the loss (P). After the
warm-up, then, SEQ* is a sequence of classifier fits on fixed features. This script makes the
features once (the budget protocol's stream, ``real_budget.yaml``, through its encoder in eval
mode: MiniLM, mean-pooled, no warm-up) and replays only the classifier part, in milliseconds
per task, so the recipe's knobs can be told apart from the encoder:

* ``nearest class mean``: each class's row is the mean of its normalised training features;
  what the frozen features can do with no training dynamics at all (no recency bias);
* ``SEQ* as run``: the cosine head (scale 16), AdamW at 1e-3 with weight decay 0.01, batch 16,
  one pass, P and FixC, as the budget's runs do (``SeqStarOptions``);
* ``reference recipe``: the reference's unscaled ``CosineLinear``, batch 4, 5 epochs a task
  (``SEQ_pre_warm_fix.yaml`` and ``utils/config.py`` of zzz47zzz/codebase-for-incremental-
  learning-with-llm);
* one change at a time from ``SEQ* as run`` (no P, no FixC, 5 epochs, scale 1 or 32).

``--datasets ag_news,dbpedia,yahoo --class-groups 4`` keeps Topic3's three sources only (the
paper's benchmark; no rating datasets, no shared classes) and also regroups their classes into
shuffled tasks, as Topic3 does, so the stream's part in the gap can be told from the recipe's.

Evaluation is the reference's: after the last task, the argmax over the classes seen so far on
each task's test rows; the table gives the mean of that last row (the runs' average accuracy)
and each task's accuracy right after it was trained (the diagonal), mean over seeds (the
classifier's initialisation and batch order; the features are the same).
"""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import torch
import torch.nn.functional as F
from real_budget import BUDGET

from lifelong.experiment.runs import build_model
from lifelong.experiment.sweep import load_sweep
from lifelong.files import atomic_write_text
from lifelong.serialization import load_data
from lifelong.streams import batches
from lifelong.streams.registry import build_stream
from lifelong.training import seed_everything


class Features(NamedTuple):
    """Frozen pooled features of one stream order: per task, (x, y) of train and test."""

    tasks: list[str]
    train: list[tuple[torch.Tensor, torch.Tensor]]  # (n, d) float, (n,) long
    test: list[tuple[torch.Tensor, torch.Tensor]]
    labels: int


class Recipe(NamedTuple):
    """How the classifier rows are trained (one SEQ* configuration)."""

    scale: float = 16.0
    lr: float = 1e-3
    weight_decay: float = 0.01
    batch_size: int = 16
    epochs: int = 1
    preallocated: bool = True
    freeze_old: bool = True


RECIPES: dict[str, Recipe] = {
    "SEQ* as run (scale 16, batch 16, 1 pass)": Recipe(),
    "reference recipe (scale 1, batch 4, 5 epochs)": Recipe(scale=1.0, batch_size=4, epochs=5),
    "as run, 5 epochs": Recipe(epochs=5),
    "as run, no P (seen classes only in the loss)": Recipe(preallocated=False),
    "as run, no FixC (old rows train)": Recipe(freeze_old=False),
    "as run, scale 1": Recipe(scale=1.0),
    "as run, scale 32": Recipe(scale=32.0),
}


def encode(data_dir: Path, order: str, cache: Path | None) -> Features:
    """The budget stream of ``order`` through its encoder (eval mode).

    Features are cached in ``cache`` per split of a dataset, keyed by the rows' ids and texts,
    so the other orders (the same rows in another order) reuse them; labels are always made
    afresh from the order's label space.
    """
    config = load_sweep(BUDGET).base.replace("probe", data_dir=str(data_dir), order=order)
    spec, settings, encoder, training = config.stream, config.task, config.encoder, config.training
    seed_everything(training.seed)
    stream = build_stream(spec, seed=training.seed)
    model, task = build_model(encoder, settings, stream, seed=training.seed)
    model.eval()
    splits: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = {"train": [], "test": []}
    for part in stream:
        for split, rows in (("train", part.train), ("test", part.test)):
            key = hashlib.sha1("\n".join(f"{e.uid}\t{e.text}" for e in rows).encode()).hexdigest()
            path = cache / f"{part.name}_{split}_{key[:16]}.pt" if cache else None
            xs, ys = [], []
            for chunk in batches(rows, 64, shuffle=False, seed=0):
                batch = task(chunk)
                ys.append(batch.labels)
                if path is None or not path.is_file():
                    with torch.no_grad():
                        xs.append(model.encoder(*batch.inputs()).pooled.float())  # (b, d)
            if path is not None and path.is_file():
                x = load_data(path, what="feature cache")  # data only, never code
            else:
                x = torch.cat(xs)
                if path is not None:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    torch.save(x, path)
            splits[split].append((x, torch.cat(ys)))
        print(f"  features of {part.name} ({order})", flush=True)
    return Features(list(stream.task_names), splits["train"], splits["test"], task.num_labels)


def accuracies(features: Features, score: Callable[[torch.Tensor], torch.Tensor], seen: set[int]):
    """Accuracy (%) on every task's test rows, argmax over the ``seen`` classes."""
    keep = torch.zeros(features.labels, dtype=torch.bool)
    keep[sorted(seen)] = True
    out = []
    for x, y in features.test:
        scores = score(x).masked_fill(~keep, float("-inf"))  # (n, labels)
        out.append(100.0 * (scores.argmax(1) == y).float().mean().item())
    return out


def class_means(features: Features) -> list[list[float]]:
    """Accuracy matrix of the nearest-class-mean classifier (cosine) learnt task by task."""
    means = torch.zeros(features.labels, features.train[0][0].shape[1])
    seen: set[int] = set()
    rows = []
    for x, y in features.train:
        x = F.normalize(x, dim=-1)
        for c in y.unique().tolist():
            means[c] = x[y == c].mean(0)
            seen.add(c)
        protos = F.normalize(means, dim=-1)
        rows.append(accuracies(features, lambda z, p=protos: F.normalize(z, dim=-1) @ p.T, seen))
    return rows


def fit_task(
    weight: torch.nn.Parameter,
    optimizer: torch.optim.Optimizer,
    data: tuple[torch.Tensor, torch.Tensor],
    recipe: Recipe,
    seen: set[int],
    generator: torch.Generator,
) -> None:
    """Train the rows on one task's features (``seen`` already holds its classes).

    With ``recipe.freeze_old`` the rows of classes seen before this task and not in it are put
    back after every step (AdamW's momentum and weight decay move rows with no gradient), as
    `SeqStar` does: on the same features, initial rows and batches, the two give the same rows
    (`tests/experiments/test_seq_star_probe.py`), so the probe measures the strategy's own update.
    """
    x, y = data
    old = sorted(seen - set(y.tolist()))
    frozen = weight.detach().clone()
    keep = torch.zeros(weight.shape[0], dtype=torch.bool)
    keep[sorted(seen)] = True
    for _ in range(recipe.epochs):
        order = torch.randperm(len(y), generator=generator)
        for start in range(0, len(y), recipe.batch_size):
            rows = order[start : start + recipe.batch_size]
            logits = scores(weight, x[rows], recipe.scale)  # (b, L)
            if not recipe.preallocated:
                logits = logits.masked_fill(~keep, float("-inf"))
            loss = F.cross_entropy(logits, y[rows])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if recipe.freeze_old and old:
                with torch.no_grad():
                    weight[old] = frozen[old]


def scores(weight: torch.Tensor, x: torch.Tensor, scale: float) -> torch.Tensor:
    """The cosine head: ``scale · normalize(x) · normalize(W)ᵀ``, (n, d) -> (n, L)."""
    return scale * F.normalize(x, dim=-1) @ F.normalize(weight, dim=-1).T


def seq_star_head(features: Features, recipe: Recipe, seed: int) -> list[list[float]]:
    """Accuracy matrix of SEQ*'s classifier phase on frozen features (see the module)."""
    generator = torch.Generator().manual_seed(seed)
    d = features.train[0][0].shape[1]
    weight = torch.nn.Parameter(torch.randn(features.labels, d, generator=generator) * d**-0.5)
    optimizer = torch.optim.AdamW([weight], lr=recipe.lr, weight_decay=recipe.weight_decay)
    seen: set[int] = set()
    rows = []
    for data in features.train:
        seen |= set(data[1].tolist())
        fit_task(weight, optimizer, data, recipe, seen, generator)
        with torch.no_grad():
            rows.append(accuracies(features, lambda z: scores(weight, z, recipe.scale), seen))
    return rows


def describe(matrices: list[list[list[float]]]) -> tuple[float, list[float], list[float]]:
    """Mean over seeds: the last row's mean, the last row, the diagonal."""
    last = torch.tensor([m[-1] for m in matrices]).mean(0)
    diag = torch.tensor([[m[i][i] for i in range(len(m))] for m in matrices]).mean(0)
    return last.mean().item(), last.tolist(), diag.tolist()


def table(features: Features, order: str, seeds: list[int]) -> list[str]:
    """Markdown rows for one order: one per recipe, nearest class mean first."""
    lines = []
    rows = {"nearest class mean (no training dynamics)": [class_means(features)]}
    for name, recipe in RECIPES.items():
        rows[name] = [seq_star_head(features, recipe, seed) for seed in seeds]
    for name, matrices in rows.items():
        average, last, diag = describe(matrices)
        cells = " / ".join(f"{v:.1f}" for v in last), " / ".join(f"{v:.1f}" for v in diag)
        lines.append(f"| {order} | {name} | {average:.1f} | {cells[0]} | {cells[1]} |")
    return lines


def regroup(features: Features, datasets: list[str], groups: int, seed: int | None) -> Features:
    """The rows of ``datasets`` only, as one task each (``seed`` None) or as ``groups`` tasks.

    With a ``seed``, their classes are shuffled and split into ``groups`` tasks of nearly equal
    size, as Zheng et al.'s Topic3 (AG News, DBpedia, Yahoo) splits its classes; the rows are
    the same, only the task boundaries change.
    """
    picked = [features.tasks.index(name) for name in datasets]
    if seed is None:
        return Features(
            datasets,
            [features.train[i] for i in picked],
            [features.test[i] for i in picked],
            features.labels,
        )
    classes = sorted({c for i in picked for c in features.train[i][1].tolist()})
    order = torch.randperm(len(classes), generator=torch.Generator().manual_seed(seed))
    chunks = [sorted(classes[j] for j in part.tolist()) for part in order.chunk(groups)]

    def split(which: list[tuple[torch.Tensor, torch.Tensor]]):
        x = torch.cat([which[i][0] for i in picked])  # (n, d)
        y = torch.cat([which[i][1] for i in picked])  # (n,)
        return [
            (x[torch.isin(y, torch.tensor(c))], y[torch.isin(y, torch.tensor(c))]) for c in chunks
        ]

    names = [f"classes {','.join(map(str, c))}" for c in chunks]
    return Features(names, split(features.train), split(features.test), features.labels)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--orders", default="i,ii")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--features-dir", type=Path, help="cache of the encoded features")
    parser.add_argument("--out", type=Path, help="also write the table here (markdown)")
    parser.add_argument(
        "--datasets", help="keep only these datasets (e.g. ag_news,dbpedia,yahoo: Topic3's)"
    )
    parser.add_argument(
        "--class-groups",
        type=int,
        default=0,
        help="with --datasets: also shuffle their classes into this many tasks (Topic3: 5)",
    )
    parser.add_argument("--group-seeds", default="0,1,2", help="class shuffles to try")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    lines = [
        "| order | classifier | average accuracy | last row | diagonal |",
        "|---|---|---:|---|---|",
    ]
    for order in args.orders.split(","):
        features = encode(args.data_dir, order, args.features_dir)
        print(f"order {order}: tasks {', '.join(features.tasks)}", flush=True)
        if not args.datasets:
            lines += table(features, order, seeds)
            continue
        kept = [name for name in features.tasks if name in args.datasets.split(",")]
        lines += table(regroup(features, kept, 0, None), f"{order}, {'+'.join(kept)}", seeds)
        if args.class_groups:
            for group_seed in (int(g) for g in args.group_seeds.split(",")):
                shuffled = regroup(features, kept, args.class_groups, group_seed)
                label = (
                    f"{order}, their classes in {args.class_groups} tasks (shuffle {group_seed})"
                )
                lines += table(shuffled, label, seeds)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        atomic_write_text(args.out, text)


if __name__ == "__main__":
    main()
