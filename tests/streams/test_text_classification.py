import csv

import pytest

from streams import (
    DATASETS,
    ORDERS,
    DataFormatError,
    TaskStream,
    UnknownNameError,
    text_classification_stream,
)
from streams.text_classification import (
    SAMPLE_DIR,
    load_dataset,
    merged_label_names,
    read_csv,
    resolve_tasks,
)


def write_csv(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        csv.writer(f, quoting=csv.QUOTE_ALL).writerows(rows)


def test_merged_label_space_has_33_classes_with_shared_ratings():
    names = merged_label_names()
    assert len(names) == 33
    assert DATASETS["yelp"].labels == DATASETS["amazon"].labels == (4, 5, 6, 7, 8)
    all_labels = set()
    for spec in DATASETS.values():
        all_labels |= set(spec.labels)
    assert all_labels == set(range(33))


def test_paper_orders():
    assert ORDERS["i"] == ("yelp", "ag_news", "dbpedia", "amazon", "yahoo")
    assert ORDERS["ii"] == ("dbpedia", "yahoo", "ag_news", "amazon", "yelp")
    assert ORDERS["iii"] == ("yelp", "yahoo", "amazon", "dbpedia", "ag_news")
    assert ORDERS["iv"] == ("ag_news", "yelp", "amazon", "yahoo", "dbpedia")
    assert resolve_tasks("iii") == ORDERS["iii"]
    assert resolve_tasks("i", ["ag_news", "yelp"]) == ("ag_news", "yelp")


def test_real_layouts_are_read(tmp_path):
    write_csv(
        tmp_path / "ag_news_csv/train.csv", [["3", "Wall St. Bears", "Short-sellers \\n are back."]]
    )
    write_csv(tmp_path / "ag_news_csv/test.csv", [["1", "Fears for pension", "Unions say..."]])
    write_csv(
        tmp_path / "yahoo_answers_csv/train.csv",
        [["2", "Why is the sky blue?", "", "Rayleigh scattering."]],
    )
    write_csv(
        tmp_path / "yahoo_answers_csv/test.csv", [["10", "Who votes?", "Curious.", "Citizens."]]
    )
    ag = load_dataset("ag_news", tmp_path)
    assert ag.train[0].label == 2 and ag.test[0].label == 0
    assert ag.train[0].text == "Wall St. Bears Short-sellers are back."
    assert ag.train[0].uid.endswith("ag_news_csv/train.csv:1")
    yahoo = load_dataset("yahoo", tmp_path)
    assert yahoo.train[0].label == 23 + 1 and yahoo.test[0].label == 32
    assert yahoo.train[0].text == "Why is the sky blue? Rayleigh scattering."


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            ["1", "only title"],
            r"train.csv:2: expected 3 columns \(label,title,description\), got 2",
        ),
        (["5", "title", "text"], r"train.csv:2: label 5 is out of range 1..4"),
        (["x", "title", "text"], r"train.csv:2: label 'x' is not an integer in 1..4"),
        (["0", "title", "text"], r"train.csv:2: label 0 is out of range"),
        (["2", " ", ""], r"train.csv:2: empty text"),
    ],
)
def test_bad_rows_name_file_and_line(tmp_path, row, message):
    path = tmp_path / "ag_news_csv/train.csv"
    write_csv(path, [["1", "ok", "fine"], row])
    with pytest.raises(DataFormatError, match=message):
        read_csv(path, DATASETS["ag_news"])


def test_missing_file_names_path_and_layout(tmp_path):
    with pytest.raises(
        DataFormatError, match=r"ag_news_csv/train.csv: file not found .*label,title"
    ):
        load_dataset("ag_news", tmp_path)


def test_sampling_is_seeded_and_sized(tmp_path):
    rows = [[str(1 + i % 4), f"title {i}", f"text {i}"] for i in range(200)]
    write_csv(tmp_path / "ag_news_csv/train.csv", rows)
    write_csv(tmp_path / "ag_news_csv/test.csv", rows[:50])
    a = load_dataset("ag_news", tmp_path, train_size=30, test_size=10, seed=1)
    b = load_dataset("ag_news", tmp_path, train_size=30, test_size=10, seed=1)
    c = load_dataset("ag_news", tmp_path, train_size=30, test_size=10, seed=2)
    assert len(a.train) == 30 and len(a.test) == 10
    assert a == b and a.train != c.train
    assert len({e.uid for e in a.train}) == 30
    with pytest.raises(ValueError, match="asked for 60 examples but the file has 50"):
        load_dataset("ag_news", tmp_path, test_size=60)


def test_unknown_names_are_errors():
    with pytest.raises(UnknownNameError, match="unknown dataset imdb; expected names from ag_news"):
        resolve_tasks(tasks=["imdb"])
    with pytest.raises(UnknownNameError, match="unknown order 'v'; expected one of i, ii"):
        resolve_tasks("v")
    assert "'" not in str(UnknownNameError("x"))  # a ValueError: no KeyError quoting


def test_bundled_sample_is_read_by_the_same_loader():
    stream = text_classification_stream("i")
    assert isinstance(stream, TaskStream)
    assert stream.task_names == ORDERS["i"]
    assert stream.num_labels == 33
    for task in stream:
        assert (SAMPLE_DIR / DATASETS[task.name].folder / "train.csv").is_file()
        assert 200 <= len(task.train) and 50 <= len(task.test)
        # every class of the dataset is present, roughly balanced
        seen = {e.label for e in task.train}
        assert seen == set(task.labels)
