"""The library and the model a run keeps, as a new user meets them (issue 64's frictions)."""

import csv
import json
import subprocess
import sys
import textwrap

import pandas as pd
import pytest

import lifelong
from lifelong.experiment.cli import build_parser, config_from_args, main
from tests.conftest import tiny_demo


def small(tmp_path, **changes):
    """The demo config, on the tiny encoder and two small tasks."""
    return tiny_demo(tmp_path / "runs", **{"train_size": 32, "test_size": 16, **changes})


def test_python_and_the_command_line_start_from_one_config():
    """Friction 3: RunConfig() was SEQ at 3e-5 unclipped; `lifelong run` the demo (REPLAY)."""
    from_the_command = config_from_args(build_parser().parse_args(["run"]))
    assert lifelong.RunConfig.demo() == from_the_command
    assert from_the_command.strategy.name == "replay"
    assert lifelong.RunConfig.demo(order="ii", lr=3e-5) == config_from_args(
        build_parser().parse_args(["run", "--order", "ii", "--lr", "3e-5"])
    )


def test_dir_lists_the_public_api_only():
    """Friction 5: dir(lifelong) listed Any, annotations and importlib."""
    names = dir(lifelong)
    assert not {"Any", "annotations", "importlib", "_API"} & set(names)
    assert {"run", "RunConfig", "load_run", "load_model", "grid", "__version__"} <= set(names)


def test_a_stream_prints_in_a_few_lines():
    """Friction 5: print(stream) printed about 480 KB (every example)."""
    stream = lifelong.text_classification_stream("ii", train_size=None)
    text = repr(stream)
    assert len(text.splitlines()) == 1 + len(stream) and len(text) < 1000
    assert "Task('dbpedia', labels=14, train=300, test=100)" in text


def test_a_run_has_a_table_a_summary_and_loads_back(tmp_path):
    """Friction 5: no table view of results; format_report hid in lifelong.experiment.runs."""
    outcome = lifelong.run(small(tmp_path, strategy="seq"))
    frame = outcome.to_frame()
    assert isinstance(frame, pd.DataFrame) and list(frame.index) == [
        "before",
        "after ag_news",
        "after yelp",
    ]
    assert "Accuracy matrix" in outcome.summary() and "average accuracy" in outcome.summary()
    assert len(repr(outcome).splitlines()) == 1 and len(repr(outcome.result)) < 200
    record = lifelong.load_run(outcome.run_dir)
    assert record.summary() == outcome.summary()
    assert record.to_frame().round(4).equals(frame.round(4))
    assert len(repr(record).splitlines()) == 1


def test_a_grid_from_python_returns_the_report_table(tmp_path):
    """Friction 5: no one call for strategies x orders x seeds."""
    config = small(tmp_path, tasks=None, order="i", train_size=16, test_size=8)
    table = lifelong.grid(config, strategies=["seq", "replay"], orders=["i"], seeds=[0], jobs=1)
    assert isinstance(table, pd.DataFrame)
    assert set(table.index.get_level_values("strategy")) == {"seq", "replay"}
    assert ("i", "mean") in table.columns
    assert "pooled_accuracy" not in set(table.index.get_level_values("metric"))  # text


def test_a_grid_refuses_orders_a_task_list_overrides(tmp_path):
    with pytest.raises(lifelong.experiment.config.ConfigError, match="a task list is set"):
        lifelong.grid(small(tmp_path), strategies=["seq"], orders=["i", "ii"])


def test_the_tiny_encoder_says_it_is_for_plumbing(tmp_path, caplog):
    """Friction 4: --encoder tiny learnt nothing and nothing said so."""
    from lifelong.experiment.config import plan_run

    with caplog.at_level("INFO"):
        plan_run(small(tmp_path))
    assert "is random (for testing the plumbing)" in caplog.text


SAVED = textwrap.dedent(
    """
    import csv, json, sys
    import lifelong

    model = lifelong.load_model(sys.argv[1])
    texts = json.loads(sys.argv[2])
    print(json.dumps(model.predict(texts)))
    """
)


def test_a_saved_model_reloads_and_predicts_the_runs_own_test_predictions(tmp_path):
    """Friction 6: a run left no model. Now --save-model keeps one that a fresh process loads."""
    config = small(tmp_path, strategy="mbpa++", save_model=True, lr=1e-3)
    outcome = lifelong.run(config)
    folder = outcome.run_dir / "model"
    assert {"strategy.pt", "encoder", "head.safetensors", "README.md", "lifelong.json"} <= {
        p.name for p in folder.iterdir()
    }
    card = (folder / "README.md").read_text()
    assert "mbpa++ on text" in card and "seed 0" in card and "average accuracy" in card
    rows = list(csv.DictReader((folder / "predictions.csv").open()))
    final = outcome.result.accuracy[-1]
    for j, task in enumerate(outcome.result.task_names):  # the saved predictions are the run's
        mine = [r for r in rows if r["task"] == task]
        assert 100 * sum(r["label"] == r["predicted"] for r in mine) / len(mine) == final[j]
    stream = lifelong.text_classification_stream(
        None, tasks=["ag_news", "yelp"], train_size=32, test_size=16
    )
    texts = {e.uid: e.text for t in stream for e in t.test}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            SAVED,
            str(outcome.run_dir),
            json.dumps([texts[r["uid"]] for r in rows]),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout.splitlines()[-1]) == [r["predicted"] for r in rows]


def test_predict_command_labels_texts_and_refuses_a_run_without_a_model(tmp_path, capsys):
    outcome = lifelong.run(small(tmp_path, strategy="seq", save_model=True))
    assert (
        main(["predict", str(outcome.run_dir), "--text", "oil prices rose", "--text", "tasty"]) == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[1] for line in lines] == ["oil prices rose", "tasty"]
    assert all(line.split("\t")[0] in outcome_labels(outcome) for line in lines)
    plain = lifelong.run(small(tmp_path, strategy="seq"))
    assert main(["predict", str(plain.run_dir), "--text", "x"]) == 2
    assert "no saved model" in capsys.readouterr().err


def outcome_labels(outcome):
    return json.loads((outcome.run_dir / "model" / "lifelong.json").read_text())["label_names"]


def test_a_fewrel_cluster_too_small_for_an_outer_update_is_said_so(tmp_path):
    """Friction 8: an OML-ER FewRel run printed identical rows with nothing saying a task
    caused no outer update (b·m = 96 examples an update; the sample's clusters hold 16-64)."""
    config = lifelong.RunConfig.demo(
        stream="fewrel", strategy="oml-er", encoder="tiny", progress=False
    ).replace(output_dir=str(tmp_path))
    outcome = lifelong.run(config)
    updates = outcome.metrics["updates"]
    sizes = [t["train"] for t in outcome.metrics["tasks"]]
    assert len(updates) == len(sizes) and 0 in updates
    quiet = [t for t, n in zip(outcome.result.task_names, updates) if n == 0]
    text = outcome.summary()
    for name in quiet:
        assert f"({name} caused no update" in text
    assert "pooled accuracy" in text  # FewRel's headline
    assert lifelong.load_run(outcome.run_dir).summary() == text  # the counts are in metrics.json
