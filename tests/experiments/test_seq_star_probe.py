"""The SEQ* probe's classifier replays: class means and SEQ*'s head on frozen features."""

import pytest
import torch

RECIPES = [
    "SEQ* as run (scale 16, batch 16, 1 pass)",
    "as run, no P (seen classes only in the loss)",
    "as run, 5 epochs",
]


@pytest.fixture
def probe(load_script):
    return load_script("text_classification/seq_star_probe.py")


def clustered(probe, tasks=3, classes=2, d=16, n=40):
    """Each class a tight cluster around its own axis; task t holds classes 2t, 2t + 1."""
    g = torch.Generator().manual_seed(0)

    def split(t):
        y = torch.arange(classes).repeat_interleave(n) + classes * t  # (n·classes,)
        x = torch.eye(d)[y] + 0.05 * torch.randn(len(y), d, generator=g)  # (n·classes, d)
        return x, y

    names = [f"task{t}" for t in range(tasks)]
    train = [split(t) for t in range(tasks)]
    test = [split(t) for t in range(tasks)]
    return probe.Features(names, train, test, labels=tasks * classes)


def test_class_means_separate_clusters_and_score_only_seen_classes(probe):
    rows = probe.class_means(clustered(probe))
    assert rows[0] == [100.0, 0.0, 0.0]  # the unseen tasks' classes are out of the argmax
    assert rows[-1] == [100.0, 100.0, 100.0]


@pytest.mark.parametrize("name", RECIPES)
def test_the_head_learns_each_task_when_it_is_trained(probe, name):
    features = clustered(probe, n=200)
    recipe = probe.RECIPES[name]._replace(lr=0.05, epochs=3)  # the loop, not the rate
    rows = probe.seq_star_head(features, recipe, seed=0)
    assert min(rows[t][t] for t in range(3)) >= 90.0
    assert all(r[t] == 0.0 for t, r in enumerate(rows[:-1], start=1))  # nothing seen yet


@pytest.mark.parametrize("freeze_old", [True, False])
def test_fix_c_puts_back_the_rows_of_earlier_classes_only(probe, freeze_old):
    features = clustered(probe, n=20)
    weight = torch.nn.Parameter(torch.randn(6, 16, generator=torch.Generator().manual_seed(1)))
    optimizer = torch.optim.AdamW([weight], lr=0.05, weight_decay=0.01)
    recipe = probe.Recipe(freeze_old=freeze_old)
    generator = torch.Generator().manual_seed(0)
    probe.fit_task(weight, optimizer, features.train[0], recipe, {0, 1}, generator)
    before = weight.detach().clone()
    probe.fit_task(weight, optimizer, features.train[1], recipe, {0, 1, 2, 3}, generator)
    moved = (weight.detach() != before).any(dim=1).tolist()  # per class row
    assert moved[2:] == [True] * 4  # this task's rows and the future ones (P) train
    assert moved[:2] == [not freeze_old] * 2  # the earlier task's rows: frozen under FixC


def test_table_has_class_means_then_every_recipe_with_seed_means(probe):
    lines = probe.table(clustered(probe, n=10), "i", seeds=[0, 1])
    assert len(lines) == 1 + len(probe.RECIPES)
    assert lines[0].startswith("| i | nearest class mean (no training dynamics) | 100.0 |")
    average, last, diag = probe.describe([[[10.0, 0.0], [20.0, 40.0]], [[30.0, 0.0], [40.0, 60.0]]])
    assert (average, last, diag) == (40.0, [30.0, 50.0], [20.0, 50.0])


def test_regroup_keeps_the_rows_and_moves_only_task_boundaries(probe):
    features = clustered(probe, tasks=3, n=5)
    kept = probe.regroup(features, ["task0", "task2"], 0, None)
    assert kept.tasks == ["task0", "task2"] and kept.train[1][1].tolist() == [4] * 5 + [5] * 5
    shuffled = probe.regroup(features, ["task0", "task2"], 2, seed=0)
    classes = [sorted(set(y.tolist())) for _, y in shuffled.train]
    assert sorted(c for group in classes for c in group) == [0, 1, 4, 5]
    assert [len(group) for group in classes] == [2, 2]
    rows = sorted(v for x, _ in shuffled.test for v in x.sum(1).tolist())
    assert rows == sorted(v for i in (0, 2) for v in features.test[i][0].sum(1).tolist())


class FeatureLookup(torch.nn.Module):
    """A frozen 'encoder' whose input ids are row numbers of a feature table."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("table", table)

    def forward(self, input_ids, attention_mask):
        from lifelong.encoders.base import EncoderOutput

        pooled = self.table[input_ids[:, 0]]  # (b, d)
        return EncoderOutput(hidden=pooled[:, None], pooled=pooled)


def test_the_probes_classifier_phase_is_seq_stars(probe):
    """`fit_task` trains the rows exactly as `SeqStar.observe` does on the same features."""
    from types import SimpleNamespace

    from lifelong.batch import Batch
    from lifelong.heads import ClassificationHead
    from lifelong.model import Classifier
    from lifelong.strategies.seq_star import SeqStar, SeqStarOptions
    from lifelong.strategy import StrategyContext

    features = clustered(probe, n=12)
    table = torch.cat([x for x, _ in features.train])  # (rows, d)
    d, labels = table.shape[1], features.labels
    model = Classifier(FeatureLookup(table), ClassificationHead(d, labels))
    context = StrategyContext(model, SimpleNamespace(name="classification"), batch_size=8)
    strategy = SeqStar(context, SeqStarOptions(warmup_fraction=0.01))
    start = torch.randn(labels, d, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        strategy.model.head.weight.copy_(start)
    weight = torch.nn.Parameter(start.clone())
    optimizer = torch.optim.AdamW([weight], lr=1e-3, weight_decay=0.01)
    recipe = probe.Recipe(batch_size=8)
    ours, theirs = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)
    seen, offset = set(), 0
    for task, (x, y) in enumerate(features.train):
        seen |= set(y.tolist())
        probe.fit_task(weight, optimizer, (x, y), recipe, seen, ours)
        strategy.on_task_start(task)
        order = torch.randperm(len(y), generator=theirs)
        for first in range(0, len(y), 8):
            rows = order[first : first + 8]
            ids = (rows + offset)[:, None]  # (b, 1): row numbers into the table
            strategy.observe(Batch(ids, torch.ones_like(ids), y[rows]))
        offset += len(y)
    assert torch.allclose(strategy.model.head.weight, weight, atol=1e-5)
