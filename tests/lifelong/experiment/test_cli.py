import csv
import json

import numpy as np
import pandas as pd
import pytest
import yaml

from lifelong import registry
from lifelong.experiment.cli import build_parser, config_from_args, main
from lifelong.experiment.config import ConfigError, from_dict, load_yaml
from lifelong.strategy import supports


def run_cli(*args):
    return main(["run", "--encoder", "tiny", "--no-progress", *args])


def write_ag_news(root, n_train=24, n_test=8):
    words = ["election", "football", "stocks", "software"]
    for split, n in (("train", n_train), ("test", n_test)):
        path = root / "ag_news_csv" / f"{split}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="") as f:
            w = csv.writer(f, quoting=csv.QUOTE_ALL)
            for i in range(n):
                w.writerow([str(1 + i % 4), f"{words[i % 4]} news {i}", f"about {words[i % 4]}"])


def test_run_on_real_format_data_dir(tmp_path, capsys):
    write_ag_news(tmp_path / "data")
    out = tmp_path / "runs"
    code = run_cli(
        "--strategy",
        "seq",
        "--tasks",
        "ag_news",
        "--data-dir",
        str(tmp_path / "data"),
        "--train-size",
        "24",
        "--test-size",
        "8",
        "--output-dir",
        str(out),
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "Accuracy matrix" in printed and "BWT" in printed
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    assert (out / "index.sqlite").is_file()  # every run is indexed
    assert sorted(p.name for p in run_dir.iterdir()) == [
        "accuracy.csv",
        "config.yaml",
        "log.txt",
        "metrics.json",
    ]
    matrix = pd.read_csv(run_dir / "accuracy.csv", index_col=0)
    assert list(matrix.index) == ["before", "after ag_news"]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert set(metrics) >= {"average_accuracy", "bwt", "fwt", "forgetting"}
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())  # by section
    assert saved["stream"]["name"] == "text"
    assert saved["stream"]["data_dir"] == str(tmp_path / "data")
    assert saved["stream"]["tasks"] == ["ag_news"] and "cluster_order" not in saved["stream"]
    assert saved["training"]["seed"] == 0 and saved["strategy"]["name"] == "seq"
    assert load_yaml(run_dir / "config.yaml").strategy.name == "seq"  # resolved config reloads


def test_real_data_dir_defaults_to_paper_sizes(tmp_path, capsys):
    write_ag_news(tmp_path / "data")
    code = run_cli(
        "--tasks",
        "ag_news",
        "--data-dir",
        str(tmp_path / "data"),
        "--output-dir",
        str(tmp_path / "runs"),
    )
    assert code == 2
    assert "asked for 115000 examples but the file has 24" in capsys.readouterr().err


def test_flags_and_options_override_the_demo_config():
    args = build_parser().parse_args(
        [
            "run",
            "--strategy",
            "replay",
            "--order",
            "iii",
            "--tasks",
            "yelp,ag_news",
            "--lr",
            "1e-3",
            "-o",
            "replay_every=50",
            "-o",
            "replay_ratio=0.1",
        ]
    )
    config = config_from_args(args)
    assert (
        config.strategy.name == "replay"
        and config.stream.order == "iii"
        and config.training.lr == 1e-3
    )
    assert config.stream.tasks == ("yelp", "ag_news")
    assert config.options_for() == {
        "replay_every": "50",
        "replay_ratio": "0.1",
        "max_grad_norm": 1.0,  # the demo's, kept
        "replay_grad_norm": 1.0,
    }


def test_unknown_config_key_is_an_error_naming_it(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("strategy: seq\nlearning_rate: 0.1\n")
    unknown = r"c.yaml: unknown key 'learning_rate'; sections: stream, task"
    with pytest.raises(ConfigError, match=unknown):
        load_yaml(path)
    with pytest.raises(ConfigError, match="key 'batch_size': expected int"):
        from_dict({"batch_size": "big"})


def test_bad_strategy_and_option_are_clear_cli_errors(tmp_path, capsys):
    assert run_cli("--strategy", "nope", "--output-dir", str(tmp_path)) == 2
    assert "unknown strategy 'nope'; registered strategies:" in capsys.readouterr().err
    assert run_cli("--strategy", "replay", "-o", "every=3", "--output-dir", str(tmp_path)) == 2
    assert "unknown option 'every'" in capsys.readouterr().err


def test_strategies_command_lists_builtins(capsys):
    assert main(["strategies"]) == 0
    out = capsys.readouterr().out
    assert "seq" in out and "replay" in out
    assert "avalanche:replay" in out and "avalanche:der" in out


def test_encoders_command_lists_every_builtin_name_with_family_and_memory(capsys):
    from lifelong.encoders.names import CATALOGUE, MEMORY_FAMILIES, OFFLINE_NAMES, ON_BERT

    assert set(CATALOGUE) == set(OFFLINE_NAMES) == {"minilm", "tiny", *ON_BERT, *MEMORY_FAMILIES}
    assert main(["encoders"]) == 0
    lines = capsys.readouterr().out.splitlines()
    pkm = next(line for line in lines if line.startswith("pkm "))
    assert "Lample et al. 2019" in pkm and "product keys" in pkm
    assert len([line for line in lines if line.split(" ")[0] in CATALOGUE]) == len(CATALOGUE)


def test_demo_config_is_valid():
    from lifelong.experiment.config import DEMO_CONFIG, strategy_options

    config = load_yaml(DEMO_CONFIG)
    strategy_options(config.strategy)
    assert (
        config.encoder.name == "minilm"
        and config.stream.order == "i"
        and config.stream.data_dir is None
    )


def test_run_on_bundled_sample_subset(tmp_path, capsys):
    code = run_cli(
        "--strategy",
        "replay",
        "--tasks",
        "ag_news,yelp",
        "--train-size",
        "16",
        "--test-size",
        "8",
        "--output-dir",
        str(tmp_path),
        "-o",
        "replay_every=8",
    )
    assert code == 0
    assert "after yelp" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["meta-mbpa", "oml-er", "anml-er"])
def test_meta_strategies_run_from_the_cli_with_demo_options(name, tmp_path, capsys):
    code = run_cli(
        "--strategy",
        name,
        "--tasks",
        "ag_news,yelp",
        "--train-size",
        "48",
        "--test-size",
        "8",
        "--output-dir",
        str(tmp_path),
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "after yelp" in out
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    report = json.loads((run_dir / "metrics.json").read_text())["strategy"]
    counter = "coarse_adaptations" if name == "meta-mbpa" else "meta_tests"
    # 2 evaluations with memory (none before training): Meta-MbPA adapts once per evaluation
    # (coarse_scope test_set, the paper's), OML-ER / ANML-ER once per test set (2 sets)
    assert report[counter] == (2 if name == "meta-mbpa" else 2 * 2)
    assert counter in out


# sizes count sentences per relation: the sample's 20 relations give 40 / 20 sentences in all
FEWREL = ["--stream", "fewrel", "--fewrel-tasks", "3", "--train-size", "2", "--test-size", "1"]


SMALL = {  # keep the costly parts small: the test is that each strategy runs on pairs
    "ewc": ["-o", "fisher_samples=8"],
    "mtl": ["-o", "epochs=1"],
    "ranpac": ["-o", "projection=64"],
    **{n: ["-o", "k=4", "-o", "steps=3"] for n in ("mbpa", "mbpa++", "mbpa++-rand", "meta-mbpa")},
}


def refused_for_its_kind(name, kind, code, capsys, tmp_path):
    """A strategy that does not run on ``kind`` (ncm, ranpac: classification only) is refused
    in one line before anything is written; True when it was."""
    if supports(registry.get(name), kind):
        return False
    assert code == 2
    assert f"strategy {name!r} runs on classification streams" in capsys.readouterr().err
    assert not [p for p in tmp_path.iterdir() if p.is_dir()]
    return True


@pytest.mark.parametrize("name", registry.available())
def test_every_strategy_runs_on_the_fewrel_sample(name, tmp_path, capsys):
    code = run_cli(
        *FEWREL,
        *SMALL.get(name, []),
        "--max-length",
        "48",
        "--strategy",
        name,
        "--output-dir",
        str(tmp_path),
    )
    if refused_for_its_kind(name, "relation", code, capsys, tmp_path):
        return
    assert code == 0
    out = capsys.readouterr().out
    assert "Accuracy matrix" in out and "forgetting" in out
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert "fewrel-clusters3" in run_dir.name
    frame = pd.read_csv(run_dir / "accuracy.csv", index_col="row")
    assert len(frame.columns) == 3 and frame.index[0] == "before"
    values = frame.to_numpy()
    assert ((values >= 0) & (values <= 100)).all()
    # accuracy is per sentence (one per relation of the task), not per candidate pair
    metrics = json.loads((run_dir / "metrics.json").read_text())
    sizes = np.array([t["test"] for t in metrics["tasks"]])
    assert sizes.tolist() == [t["labels"] for t in metrics["tasks"]] and sizes.sum() == 20
    correct = values * sizes / 100
    assert np.allclose(correct, np.round(correct), atol=1e-3)


def test_fewrel_runs_average_over_cluster_orders(tmp_path, capsys):
    code = run_cli(*FEWREL, "--strategy", "seq", "--runs", "2", "--output-dir", str(tmp_path))
    assert code == 0
    out = capsys.readouterr().out
    assert "== cluster order 0" in out and "== cluster order 1" in out
    assert "average accuracy over 2 cluster orders" in out
    assert len([p for p in tmp_path.iterdir() if p.is_dir()]) == 2
    assert run_cli("--strategy", "seq", "--runs", "2") == 2  # text streams: use sweeps


QA = ["--stream", "qa", "--tasks", "squad,quac", "--train-size", "8", "--test-size", "4"]


@pytest.mark.parametrize("name", registry.available())
def test_every_strategy_runs_on_the_qa_sample(name, tmp_path, capsys):
    code = run_cli(*QA, *SMALL.get(name, []), "--strategy", name, "--output-dir", str(tmp_path))
    if refused_for_its_kind(name, "qa", code, capsys, tmp_path):
        return
    assert code == 0
    out = capsys.readouterr().out
    assert "F1 matrix" in out and "Exact match matrix" in out and "forgetting" in out
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    f1 = pd.read_csv(run_dir / "accuracy.csv", index_col="row")
    em = pd.read_csv(run_dir / "exact_match.csv", index_col="row")
    assert list(f1.columns) == ["squad", "quac"] and f1.shape == em.shape == (3, 2)
    assert ((em.to_numpy() <= f1.to_numpy() + 1e-9) & (f1.to_numpy() <= 100)).all()
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["metric"] == "f1" and 0 <= metrics["average_exact_match"] <= 100


def test_fewrel_softmax_pair_loss_from_the_cli(tmp_path, capsys):
    code = run_cli(
        *FEWREL, "--pair-loss", "softmax", "--strategy", "seq", "--output-dir", str(tmp_path)
    )
    assert code == 0 and "Accuracy matrix" in capsys.readouterr().out
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["task"]["pair_loss"] == "softmax"


def test_fewrel_segment_ids_from_a_config_file(tmp_path, capsys):
    path = tmp_path / "fewrel.yaml"
    keys = {"stream": "fewrel", "fewrel_tasks": 3, "train_size": 2, "test_size": 1}
    path.write_text(yaml.safe_dump({**keys, "segment_ids": True, "max_length": 48}))
    code = main(
        ["run", "--config", str(path), "--encoder", "tiny", "--no-progress"]
        + ["--strategy", "seq", "--output-dir", str(tmp_path / "runs")]
    )
    assert code == 0 and "Accuracy matrix" in capsys.readouterr().out
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["task"]["segment_ids"] is True


@pytest.mark.parametrize(
    ("keys", "token_types"),
    [
        ({"stream": "qa"}, True),  # BERT's SQuAD inputs: always
        ({"stream": "qa", "encoder": "transformer"}, False),  # no segment embeddings
        ({"stream": "fewrel"}, False),  # Holla et al.: return_token_type_ids=False
        ({"stream": "fewrel", "segment_ids": True}, True),
        ({"stream": "text"}, False),  # single segments
    ],
)
def test_qa_and_fewrel_rows_get_segment_ids_as_configured(keys, token_types, tokenizer):
    from types import SimpleNamespace

    from lifelong.experiment.runs import build_model

    sizes = {"max_length": 48, "max_query_length": 16, "doc_stride": 16}
    config = from_dict({"encoder": "tiny", **sizes} | keys)
    kind = {"qa": "qa", "fewrel": "relation", "text": "classification"}[config.stream.name]
    stream = SimpleNamespace(kind=kind, label_names=("a", "b"))
    model, task = build_model(
        config.encoder, config.task_settings(), stream, seed=config.training.seed
    )
    assert task.token_types is token_types and config.task_settings().segment_ids is (
        keys.get("segment_ids", False)
    )
    assert model.kind is task


def test_segment_ids_is_a_fewrel_key_for_bert_style_encoders():
    with pytest.raises(ConfigError, match="segment_ids.*fewrel stream only"):
        from_dict({"stream": "qa", "segment_ids": True})
    with pytest.raises(ConfigError, match="segment_ids.*no segment embeddings"):
        from_dict({"stream": "fewrel", "segment_ids": True, "encoder": "transformer-xl"})


def test_a_run_refused_for_bad_data_says_why_and_leaves_no_directory(tmp_path, capsys):
    data = tmp_path / "data"
    write_ag_news(data)
    with (data / "ag_news_csv" / "train.csv").open("a") as f:
        f.write('"7","a title","a label out of range"\n')
    out = tmp_path / "runs"
    code = run_cli("--tasks", "ag_news", "--data-dir", str(data), "--output-dir", str(out))
    err = capsys.readouterr().err
    assert code == 2 and "train.csv:25: label 7 is out of range 1..4" in err
    assert not [p for p in out.iterdir() if p.is_dir()]  # the data is read before the run dir


def test_an_unknown_dataset_is_a_plain_message(tmp_path, capsys):
    assert run_cli("--tasks", "ag_news,imdb", "--output-dir", str(tmp_path)) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(
        "unknown dataset imdb; expected names from ag_news, amazon, dbpedia, yahoo, yelp"
    )
    assert '"' not in err and not list(tmp_path.iterdir())


def test_a_single_task_has_no_transfer_to_report(tmp_path, capsys):
    code = run_cli(
        "--strategy",
        "seq",
        "--tasks",
        "ag_news",
        "--train-size",
        "8",
        "--test-size",
        "4",
        "--output-dir",
        str(tmp_path),
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "BWT                  n/a" in out and "forgetting           n/a" in out
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["bwt"] is None and metrics["fwt"] is None and metrics["forgetting"] is None


@pytest.mark.parametrize("stream", [FEWREL, QA])
def test_metrics_report_the_examples_memory_holds_and_the_write_rate(stream, tmp_path, capsys):
    code = run_cli(*stream, "--strategy", "replay", "--output-dir", str(tmp_path))
    assert code == 0
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    trained = 2 * 20 if stream is FEWREL else 2 * 8  # examples (sentences, questions), not rows
    assert metrics["memory_examples"] == trained and metrics["write_rate"] == 1.0
    assert "memory_examples" in capsys.readouterr().out
