import argparse
import io
import json
import logging
import math

import matplotlib.image
import numpy as np
import pandas as pd
import pytest

from lifelong.experiment.cli import add_report_arguments
from lifelong.experiment.config import from_dict
from lifelong.experiment.reports import (
    ReportError,
    command,
    find_runs,
    plot_accuracy_matrix,
    plot_task_curves,
    report_table,
    safe_name,
    to_csv,
    to_latex,
    to_markdown,
    write_plots,
    write_report,
)
from lifelong.experiment.rundir import write_results
from lifelong.learner import StreamResult
from lifelong.metrics import summary

TASKS = {"i": ("yelp", "ag_news", "dbpedia"), "ii": ("dbpedia", "yahoo", "ag_news")}
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# average accuracy per (strategy, order) and seed; the other metrics derive from it
GRID = {
    ("replay", "i"): (80.0, 84.0),  # mean 82, std 2*sqrt(2)
    ("replay", "ii"): (70.0, 72.0),  # mean 71, std sqrt(2)
    ("mbpa++_x", "i"): (90.0, 90.0),  # mean 90, std 0
    ("mbpa++_x", "ii"): (86.0, 88.0),  # mean 87, std sqrt(2)
}


def make_run(run_dir, strategy="replay", order="i", seed=0, value=None, tasks=None, **config):
    names = tasks or TASKS[order]
    rng = np.random.default_rng(seed)
    T = len(names)
    R = np.tril(rng.uniform(60, 100, (T, T))) + np.triu(rng.uniform(0, 10, (T, T)), 1)
    before = rng.uniform(0, 10, T)
    metrics = summary(R, before, np.full(T, 100))
    if value is not None:
        metrics.update(average_accuracy=value, bwt=-value / 10, fwt=1.0, forgetting=value / 10)
        metrics.update(pooled_accuracy=value)
    metrics["seconds"] = 1.5
    cfg = from_dict(dict(strategy=strategy, order=order, seed=seed, tasks=tasks, **config))
    write_results(run_dir, cfg.to_dict(), StreamResult(tuple(names), R, before), metrics)
    return run_dir


@pytest.fixture
def grid(tmp_path):
    root = tmp_path / "runs"
    for (strategy, order), values in GRID.items():
        for seed, value in enumerate(values):
            # nested like a sweep, with the clutter a run directory may hold
            run_dir = make_run(root / strategy / f"{order}_s{seed}", strategy, order, seed, value)
            (run_dir / "checkpoint.pt").write_bytes(b"\0" * 16)
            (run_dir / "log.txt").write_text("done\n")
    (root / "index.sqlite").write_bytes(b"SQLite format 3\0")
    return root


def test_table_mean_std_n_and_average(grid):
    table = report_table([grid])
    assert table.index.names == ["stream", "strategy", "metric"]
    assert table.columns.names == ["order", "stat"]
    assert list(table.columns.get_level_values("order").unique()) == ["i", "ii", "average"]
    assert list(table.columns.get_level_values("stat").unique()) == ["mean", "std", "n"]
    # strategies in order of first appearance (runs sorted by directory)
    assert list(table.index.get_level_values("strategy").unique()) == ["mbpa++_x", "replay"]
    assert len(table) == 2 * 4  # two strategies x four metrics (pooled accuracy: FewRel's only)

    row = table.loc[("text", "replay", "average_accuracy")]
    assert row[("i", "mean")] == pytest.approx(82.0)
    assert row[("i", "std")] == pytest.approx(2 * math.sqrt(2))
    assert row[("ii", "mean")] == pytest.approx(71.0)
    assert row[("ii", "std")] == pytest.approx(math.sqrt(2))
    assert row[("i", "n")] == 2 and row[("ii", "n")] == 2
    assert row[("average", "mean")] == pytest.approx((82.0 + 71.0) / 2)
    assert row[("average", "std")] == pytest.approx(11 / math.sqrt(2))  # across order means
    assert row[("average", "n")] == 2  # orders averaged

    other = table.loc[("text", "mbpa++_x", "average_accuracy")]
    assert other[("i", "std")] == 0.0
    assert other[("average", "mean")] == pytest.approx((90.0 + 87.0) / 2)
    assert table.loc[("text", "replay", "bwt"), ("i", "mean")] == pytest.approx(-8.2)
    assert table[("i", "n")].dtype == np.int64


def test_one_seed_has_nan_std_and_missing_order_is_empty(tmp_path):
    make_run(tmp_path / "a", "seq", "i", 0, 50.0)
    make_run(tmp_path / "b", "seq", "ii", 0, 60.0)
    make_run(tmp_path / "c", "ewc", "i", 0, 70.0)
    table = report_table(tmp_path, metrics=("average_accuracy", "seconds"))
    seq = table.loc[("text", "seq", "average_accuracy")]
    assert seq[("i", "mean")] == 50.0 and math.isnan(seq[("i", "std")]) and seq[("i", "n")] == 1
    ewc = table.loc[("text", "ewc", "average_accuracy")]
    assert ewc[("ii", "n")] == 0 and math.isnan(ewc[("ii", "mean")])
    assert ewc[("average", "mean")] == 70.0 and ewc[("average", "n")] == 1
    assert table.loc[("text", "seq", "seconds"), ("i", "mean")] == 1.5
    markdown = to_markdown(table)
    assert "| seq | average accuracy | 50.0 | 60.0 | 55.0 ± 7.1 |" in markdown
    assert "| ewc | average accuracy | 70.0 | – | 70.0 |" in markdown
    with pytest.raises(ReportError, match="metric 'nope': no run's metrics.json has it"):
        report_table(tmp_path, metrics=("nope",))


def test_cpu_minutes_come_from_cpu_seconds_and_are_missing_where_not_counted(tmp_path):
    make_run(tmp_path / "a", "seq", "i", 0, 50.0)
    metrics = json.loads((tmp_path / "a" / "metrics.json").read_text())
    metrics["cpu_seconds"] = 90.0
    (tmp_path / "a" / "metrics.json").write_text(json.dumps(metrics))
    make_run(tmp_path / "b", "seq", "i", 1, 60.0)  # written before CPU seconds were counted
    table = report_table(tmp_path, metrics=("minutes", "cpu_minutes"))
    assert table.loc[("text", "seq", "minutes"), ("i", "n")] == 2
    cpu = table.loc[("text", "seq", "cpu_minutes")]
    assert cpu[("i", "mean")] == 1.5 and cpu[("i", "n")] == 1
    assert "|  | CPU minutes per run | 1.5 | 1.5 |" in to_markdown(table)


def test_custom_task_order_label(tmp_path):
    make_run(tmp_path / "r", "seq", tasks=("ag_news", "yelp"))
    (record,) = find_runs([tmp_path])
    assert record.order == "custom:ag_news,yelp"
    assert record.task_names == ("ag_news", "yelp")
    assert "custom:ag\\_news,yelp" in to_latex(report_table([record]))


def test_fewrel_runs_are_labelled_by_cluster_order_and_averaged_over_them(tmp_path):
    for order, value in ((0, 40.0), (1, 60.0)):
        make_run(tmp_path / f"o{order}", "seq", value=value, stream="fewrel", cluster_order=order)
    table = report_table([tmp_path])
    row = ("fewrel", "seq", "average_accuracy")
    assert table.at[row, ("clusters-0", "mean")] == 40.0
    assert table.at[row, ("average", "mean")] == 50.0 and table.at[row, ("average", "n")] == 2


def test_find_runs_skips_unfinished_and_dedupes(grid, caplog):
    unfinished = make_run(grid / "late" / "x", "replay", "i", 7, 10.0)
    (unfinished / "metrics.json").unlink()
    with caplog.at_level(logging.DEBUG, logger="lifelong.experiment.rundir"):
        records = find_runs([grid, grid / "replay"])
    assert len(records) == 8
    assert all(r.run_dir != unfinished for r in records)
    assert "unfinished" in caplog.text and "late" in caplog.text
    assert [r.run_dir for r in records] == sorted(r.run_dir for r in records)
    # a path may be a run directory itself
    (single,) = find_runs([grid / "replay" / "i_s1"])
    assert (single.strategy, single.order, single.seed) == ("replay", "i", 1)


def test_find_runs_keeps_only_the_named_run_directories(grid):
    (broken := grid / "replay" / "zz_broken").mkdir()  # a run of another name: never read
    (broken / "metrics.json").write_text("{not json")
    records = find_runs(grid, names={"i_s1", "ii_s0"})
    found = sorted((r.strategy, r.order, r.seed) for r in records)
    assert found == [("mbpa++_x", "i", 1), ("mbpa++_x", "ii", 0), ("replay", "i", 1),
                     ("replay", "ii", 0)]  # fmt: skip
    assert find_runs(grid, names=set()) == []
    with pytest.raises(ReportError, match="zz_broken"):
        find_runs(grid)  # unfiltered, the broken run is read and named


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("metrics.json", "{not json", "invalid JSON"),
        ("metrics.json", '{"average_accuracy": 1}', "missing metric 'bwt'"),
        (
            "metrics.json",
            '{"average_accuracy": "x", "bwt": 0, "fwt": 0, "forgetting": 0}',
            "must be a number",
        ),
        ("config.yaml", "stream: [unclosed", "invalid YAML"),
        ("config.yaml", "stream: text\norder: i\nstrategy: seq\n", "missing key 'seed'"),
        ("accuracy.csv", "row,a\nbefore,1.0\nafter a,oops\n", "expected an accuracy"),
        ("accuracy.csv", "row,a\nbefore,1.0\n", "expected a 'before' row"),
    ],
)
def test_malformed_run_raises_naming_the_file(tmp_path, name, content, message):
    run_dir = make_run(tmp_path / "bad", "seq")
    (run_dir / name).write_text(content)
    with pytest.raises(ReportError, match=message) as err:
        find_runs([tmp_path])
    assert str(run_dir / name) in str(err.value)


def test_no_runs_or_missing_path(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportError, match="no finished run.*empty"):
        write_report([tmp_path / "empty"], tmp_path / "out")
    with pytest.raises(ReportError, match="not a directory"):
        find_runs([tmp_path / "nowhere"])


def test_runs_of_other_settings_are_named_apart_not_pooled(tmp_path, caplog):
    make_run(tmp_path / "a", "replay", "i", 0, lr=1e-4)
    make_run(tmp_path / "b", "replay", "i", 1, lr=3e-5)
    with caplog.at_level(logging.WARNING, logger="lifelong.experiment.reports"):
        table = report_table([tmp_path])
    assert caplog.text == ""  # not pooled, so nothing to warn about
    strategies = set(table.index.get_level_values("strategy"))
    assert strategies == {"replay (lr=0.0001)", "replay (lr=3e-05)"}
    caplog.clear()
    make_run(tmp_path / "c", "seq", "i", 0, output_dir="sweep_a", eval_batch_size=8)
    make_run(tmp_path / "d", "seq", "i", 1, output_dir="sweep_b")
    with caplog.at_level(logging.WARNING, logger="lifelong.experiment.reports"):
        report_table([tmp_path / "c", tmp_path / "d"])
    assert caplog.text == ""  # where runs were written does not change their numbers


def test_only_the_differing_options_name_a_variant(tmp_path):
    head = {"mbpa++": {"adapt_scope": "head", "replay_ratio": 0.1}}
    top1 = {"mbpa++": {"adapt_scope": "top1", "replay_ratio": 0.1}}
    make_run(tmp_path / "h0", "mbpa++", "i", 0, 50.0, strategy_options=head)
    make_run(tmp_path / "h1", "mbpa++", "ii", 0, 52.0, strategy_options=head)
    make_run(tmp_path / "t0", "mbpa++", "i", 0, 55.0, strategy_options=top1)
    make_run(tmp_path / "t1", "mbpa++", "i", 1, 57.0, strategy_options={"mbpa++": {}})
    make_run(tmp_path / "s0", "seq", "i", 0, 20.0, strategy_options=top1)  # not its options
    names = {r.run_dir.name: r.strategy for r in find_runs(tmp_path)}
    assert names == {
        "h0": "mbpa++ (adapt_scope=head, replay_ratio=0.1)",
        "h1": "mbpa++ (adapt_scope=head, replay_ratio=0.1)",
        "t0": "mbpa++ (adapt_scope=top1, replay_ratio=0.1)",
        "t1": "mbpa++ (adapt_scope=all, replay_ratio=0.01)",  # MbPAPPOptions' defaults
        "s0": "seq",
    }
    same = find_runs([tmp_path / "h0", tmp_path / "h1"])  # one configuration: its plain name
    assert {r.strategy for r in same} == {"mbpa++"}


def test_an_option_left_unset_is_its_default_and_set_to_it_the_same_configuration(tmp_path):
    """A run that sets warmup_fraction to NCM's default (0) is the configuration of one that
    leaves it unset; a strategy not registered here shows ``default`` for what a run left out."""
    from lifelong import registry
    from lifelong.experiment.rundir import option_defaults

    assert option_defaults("ncm")["warmup_fraction"] == 0.0
    assert option_defaults("not-registered-here") == {}
    make_run(tmp_path / "unset", "ncm", "i", 0, 44.0, strategy_options={"ncm": {}})
    zero = {"ncm": {"warmup_fraction": 0.0}}
    make_run(tmp_path / "zero", "ncm", "ii", 0, 44.0, strategy_options=zero)
    warm = {"ncm": {"warmup_fraction": 0.375}}
    make_run(tmp_path / "warm", "ncm", "i", 0, 50.0, strategy_options=warm)
    names = {r.run_dir.name: r.strategy for r in find_runs(tmp_path)}
    assert names == {
        "unset": "ncm (warmup_fraction=0.0)",
        "zero": "ncm (warmup_fraction=0.0)",
        "warm": "ncm (warmup_fraction=0.375)",
    }
    assert "plug" not in registry.names()
    make_run(tmp_path / "p0", "plug", "i", 0, 1.0, strategy_options={"plug": {"k": 1}})
    make_run(tmp_path / "p1", "plug", "i", 1, 1.0, strategy_options={"plug": {}})
    plug = {r.run_dir.name: r.strategy for r in find_runs(tmp_path) if r.run_dir.name[0] == "p"}
    assert plug == {"p0": "plug (k=1)", "p1": "plug (k=default)"}


def test_markdown(grid):
    text = to_markdown(report_table([grid]))
    assert text.startswith("## text\n")
    assert "| strategy | metric | i | ii | average |" in text
    assert "pooled accuracy" not in text  # it repeats the average on text (issue 64)
    assert "| replay | average accuracy | 82.0 ± 2.8 | 71.0 ± 1.4 | 76.5 ± 7.8 |" in text
    assert "|  | BWT | -8.2 ± 0.3 |" in text  # strategy shown once per block
    assert "(2 per cell)" in text


def test_latex(grid):
    text = to_latex(report_table([grid]))
    for needle in (r"\begin{tabular}{llrrr}", r"\toprule", r"\midrule", r"\bottomrule"):
        assert needle in text
    assert r"mbpa++\_x & average accuracy & 90.0 $\pm$ 0.0 & 87.0 $\pm$ 1.4" in text
    assert "$-$8.2 $\\pm$ 0.3" in text
    assert "mbpa++_x" not in text
    assert text.count(r"\begin{tabular}") == 1


def test_one_table_per_stream(tmp_path):
    make_run(tmp_path / "a", "seq", "i", 0, 50.0)
    make_run(tmp_path / "b", "seq", "i", 0, 40.0, stream="text")
    records = find_runs([tmp_path])
    other = records[1].__class__(**{**records[1].__dict__, "stream": "prompts_#1"})
    table = report_table([records[0], other])
    assert list(table.index.get_level_values("stream").unique()) == ["text", "prompts_#1"]
    markdown = to_markdown(table)
    assert "## text" in markdown and "## prompts_#1" in markdown
    latex = to_latex(table)
    assert latex.count(r"\begin{tabular}") == 2 and r"prompts\_\#1" in latex


def test_csv_parses_back(grid):
    frame = pd.read_csv(io.StringIO(to_csv(report_table([grid]))))
    assert list(frame.columns) == ["stream", "strategy", "metric", "i", "ii", "average"]
    assert len(frame) == 8
    replay = frame[(frame.strategy == "replay") & (frame.metric == "average accuracy")]
    assert replay["i"].item() == "82.0 ± 2.8"


def assert_png(path):
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE)
    image = matplotlib.image.imread(path)
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100
    pixels = image[..., :3].reshape(-1, 3)
    assert (pixels.max(axis=0) - pixels.min(axis=0)).max() > 0.5  # not one colour
    assert (pixels < 0.95).any(axis=1).mean() > 0.05  # more than a blank canvas


def test_plots(grid, tmp_path):
    records = find_runs([grid])
    replay_i = [r for r in records if r.key == ("text", "replay", "i")]
    assert_png(plot_accuracy_matrix(replay_i, tmp_path / "m.png"))
    assert_png(plot_task_curves(replay_i[0], tmp_path / "c.png"))
    with pytest.raises(ReportError, match="one \\(stream, strategy, order\\)"):
        plot_accuracy_matrix(records, tmp_path / "x.png")

    written = write_plots(records, tmp_path / "plots")
    assert [p.name for p in written[:2]] == [
        "mbpa++_x_text_i_matrix.png",
        "mbpa++_x_text_i_curves.png",
    ]
    assert len(written) == 8 + 1 and written[-1].name == "summary_text_average_accuracy.png"
    for path in written:
        assert_png(path)
    assert not list((tmp_path / "plots").glob(".*"))  # no temporary files left


def test_safe_name():
    assert safe_name("mbpa++") == "mbpa++"
    assert safe_name("custom:yelp,ag_news") == "custom-yelp-ag_news"
    assert safe_name("../x") == "x"
    long = safe_name("t" * 200)
    assert len(long) == 60 and long != safe_name("t" * 201)


def test_command_writes_everything(grid, tmp_path, capsys):
    parser = argparse.ArgumentParser()
    add_report_arguments(parser)
    assert parser.parse_args([]).runs == ["runs"]
    out = tmp_path / "report"
    args = parser.parse_args([str(grid), "--out", str(out), "--format", "latex"])
    assert command(args) == 0
    printed = capsys.readouterr()
    assert r"\begin{tabular}" in printed.out and str(out / "report.md") in printed.err
    for name in ("report.md", "report.tex", "report.csv"):
        assert (out / name).is_file()
    assert len(list((out / "plots").glob("*.png"))) == 8 + 1  # + the stream summary
    assert (
        "![mbpa++_x_text_i_matrix](plots/mbpa++_x_text_i_matrix.png)"
        in (out / "report.md").read_text()
    )

    args = parser.parse_args([str(grid), "--no-plots"])
    assert command(args) == 0
    assert "| replay |" in capsys.readouterr().out
    assert (grid / "report" / "report.csv").is_file() and not (grid / "report" / "plots").exists()
    assert len(find_runs([grid])) == 8  # the report folder is not taken for a run


def test_single_task_runs_report_no_transfer(tmp_path):
    for seed in (0, 1):
        make_run(tmp_path / f"s{seed}", seed=seed, tasks=("ag_news",))
    table = report_table([tmp_path])
    row = ("text", "replay", "bwt")
    assert table.loc[row, ("custom:ag_news", "n")] == 0  # null in metrics.json: not a seed
    assert table.loc[("text", "replay", "average_accuracy"), ("custom:ag_news", "n")] == 2
    assert "| BWT | – |" in to_markdown(table)


def test_each_stream_names_its_metric_and_counts_print_as_counts(tmp_path):
    """Friction 8: pooled accuracy on every stream, F1 captioned "Accuracy", 300.0 [300, 300]."""
    from lifelong.experiment.reports.stats import summary_markdown, summary_table

    for seed in (0, 1):
        make_run(tmp_path / f"t{seed}", seed=seed, value=80.0 + seed)
        make_run(
            tmp_path / f"q{seed}",
            order="i",
            seed=seed,
            value=60.0 + seed,
            tasks=("squad", "quac"),
            stream="qa",
            max_length=384,
        )
        make_run(tmp_path / f"f{seed}", seed=seed, value=40.0 + seed, stream="fewrel", tasks=None)
    records = find_runs([tmp_path])
    for record in records:
        record.metrics["memory_examples"] = 10000
    text = to_markdown(report_table(records))
    qa = text[text.index("## qa") :].split("## ")[1]
    fewrel = text[text.index("## fewrel") :].split("## ")[1]
    plain = text[text.index("## text") :].split("## ")[1]
    assert "average F1" in qa and "F1 in %" in qa and "average accuracy" not in qa
    assert "pooled accuracy" in fewrel and "pooled accuracy" not in plain + qa
    summary = summary_markdown(summary_table(records, ("average_accuracy", "memory_examples")))
    assert "| 10000 |" in summary and "10000.0" not in summary


def test_an_option_whose_default_stands_for_a_run_setting_is_named_by_that_setting(tmp_path):
    """OML-ER's outer_lr of 0 means the run's lr: a run that leaves it unset, or sets it to 0,
    is named by the lr it ran with, not ``outer_lr=0.0`` (which would read as no outer step)."""
    from lifelong import registry
    from lifelong.options import StandsFor, stands_for

    assert stands_for(registry.options_class("oml-er")) == {"outer_lr": StandsFor("lr", 0.0)}
    assert stands_for(registry.options_class("er"))["memory_batch_size"].key == "batch_size"
    make_run(tmp_path / "unset", "oml-er", "i", 0, 31.5, strategy_options={"oml-er": {}}, lr=3e-5)
    zero = {"oml-er": {"outer_lr": 0.0}}
    make_run(tmp_path / "zero", "oml-er", "ii", 0, 37.1, strategy_options=zero, lr=3e-5)
    set_ = {"oml-er": {"outer_lr": 1e-4}}
    make_run(tmp_path / "set", "oml-er", "i", 0, 37.7, strategy_options=set_, lr=3e-5)
    names = {r.run_dir.name: r.strategy for r in find_runs(tmp_path)}
    assert names == {
        "unset": "oml-er (outer_lr=3e-05)",
        "zero": "oml-er (outer_lr=3e-05)",
        "set": "oml-er (outer_lr=0.0001)",
    }
