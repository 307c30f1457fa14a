import csv
from dataclasses import replace

import pytest

from lifelong.streams import (
    DATASETS,
    ORDERS,
    DataFormatError,
    TaskStream,
    TextSpec,
    UnknownNameError,
    build_stream,
    text_classification_stream,
)
from lifelong.streams.text_classification import (
    SAMPLE_DIR,
    holla_clean,
    load_dataset,
    merged_label_names,
    read_csv,
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
    assert TextSpec(order="iii").task_names() == ORDERS["iii"]
    assert TextSpec(tasks=("ag_news", "yelp")).task_names() == ("ag_news", "yelp")


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


def write_ag_news(tmp_path, n_train=200, n_test=50):
    rows = [[str(1 + i % 4), f"title {i}", f"text {i}"] for i in range(max(n_train, n_test))]
    write_csv(tmp_path / "ag_news_csv/train.csv", rows[:n_train])
    write_csv(tmp_path / "ag_news_csv/test.csv", rows[:n_test])


def test_sampling_is_seeded_and_sized(tmp_path):
    write_ag_news(tmp_path)
    a = load_dataset("ag_news", tmp_path, train_size=30, test_size=10, sample_seed=1)
    b = load_dataset("ag_news", tmp_path, train_size=30, test_size=10, sample_seed=1)
    c = load_dataset("ag_news", tmp_path, train_size=30, test_size=10, sample_seed=2)
    assert len(a.train) == 30 and len(a.test) == 10
    assert a == b and a.train != c.train
    assert len({e.uid for e in a.train}) == 30
    with pytest.raises(ValueError, match="asked for 60 examples but the file has 50"):
        load_dataset("ag_news", tmp_path, test_size=60)


def test_sample_does_not_depend_on_the_run_seed(tmp_path):
    write_ag_news(tmp_path)
    # Holla et al. (2020) sample with random_state=42 whatever the run's seed
    spec = TextSpec(tasks=("ag_news",), data_dir=str(tmp_path), train_size=30, test_size=10)
    first, second = (build_stream(spec, seed=seed) for seed in (0, 7))
    assert first.tasks == second.tasks
    assert first.tasks[0].validation  # held out too, and just as fixed
    assert first.tasks[0] == load_dataset(
        "ag_news", tmp_path, train_size=30, test_size=10, sample_seed=42
    )


def test_validation_is_held_out_of_training(tmp_path):
    write_ag_news(tmp_path)
    # default: the paper's 5,000 capped to the 200 - 30 rows training leaves
    task = load_dataset("ag_news", tmp_path, train_size=30, test_size=10)
    assert len(task.train) == 30 and len(task.validation) == 170
    assert not {e.uid for e in task.train} & {e.uid for e in task.validation}
    # explicit size: one draw of 30 + 20 rows split in two, disjoint
    task = load_dataset("ag_news", tmp_path, train_size=30, validation_size=20)
    assert len(task.train) == 30 and len(task.validation) == 20
    assert len({e.uid for e in task.train + task.validation}) == 50
    # without a train size every row trains; a validation size takes its rows out of training
    assert load_dataset("ag_news", tmp_path).validation is None
    task = load_dataset("ag_news", tmp_path, validation_size=20)
    assert len(task.train) == 180 and len(task.validation) == 20
    with pytest.raises(ValueError, match="asked for 190 training \\+ 20 validation examples"):
        load_dataset("ag_news", tmp_path, train_size=190, validation_size=20)


def test_paper_sizes_hold_out_5000_validation_examples(tmp_path):
    # AG News's training file has exactly 115,000 + 5,000 rows: all are drawn
    write_ag_news(tmp_path, n_train=120_000, n_test=7_600)
    task = load_dataset("ag_news", tmp_path, train_size=115_000, test_size=7_600)
    assert (len(task.train), len(task.validation), len(task.test)) == (115_000, 5_000, 7_600)
    assert not {e.uid for e in task.train} & {e.uid for e in task.validation}


def test_holla_preprocessing_on_a_hand_example(tmp_path):
    body = "Short-sellers\\n\\nare  back ($5 bn): see http://example.com/x now..."
    write_csv(tmp_path / "ag_news_csv/train.csv", [["3", "Wall St. Bears Claw Back!!!", body]])
    write_csv(tmp_path / "ag_news_csv/test.csv", [["1", "Fears", "Unions say..."]])
    default = load_dataset("ag_news", tmp_path)
    assert default.train[0].text == (
        "Wall St. Bears Claw Back!!! Short-sellers are back ($5 bn): see "
        "http://example.com/x now..."
    )
    holla = load_dataset("ag_news", tmp_path, preprocess="holla")
    # lower-cased, title ". " body, escaped newlines and runs of spaces and marks collapsed,
    # "$ " split, the link removed (leaving its two spaces, as the reference does)
    assert (
        holla.train[0].text
        == "wall st. bears claw back. short-sellers are back ($ 5 bn): see  now."
    )
    assert holla.test[0].text == "fears. unions say."
    assert holla.train[0].uid == default.train[0].uid


def test_holla_joins_yahoo_columns_without_separator(tmp_path):
    write_csv(
        tmp_path / "yahoo_answers_csv/train.csv",
        [["2", "Why is the sky blue?", "", "Rayleigh scattering."]],
    )
    write_csv(tmp_path / "yahoo_answers_csv/test.csv", [["1", "Who?", "Me", "You"]])
    yahoo = load_dataset("yahoo", tmp_path, preprocess="holla")
    assert yahoo.train[0].text == "why is the sky blue?rayleigh scattering."
    assert holla_clean("What???  Fine!?") == "what? fine?"


def test_preprocess_option_reaches_the_stream(tmp_path):
    write_ag_news(tmp_path, n_train=5, n_test=5)
    spec = TextSpec(tasks=("ag_news",), data_dir=str(tmp_path), train_size=5, test_size=5)
    assert build_stream(spec).tasks[0].train[0].text == "title 0 text 0"  # default
    holla = build_stream(replace(spec, preprocess="holla"))
    assert holla.tasks[0].train[0].text == "title 0. text 0"
    with pytest.raises(ValueError, match="preprocess must be 'none' or 'holla'"):
        load_dataset("ag_news", tmp_path, preprocess="lower")


def test_unknown_names_are_errors():
    with pytest.raises(UnknownNameError, match="unknown dataset imdb; expected names from ag_news"):
        TextSpec(tasks=("imdb",)).check()
    with pytest.raises(
        UnknownNameError, match=r"unknown order 'v' \(did you mean 'iv'\?\); expected one of i, ii"
    ):
        TextSpec(order="v").check()
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
        assert task.validation is None  # read whole: every row trains, as before


def test_a_non_utf8_byte_names_file_line_and_byte(tmp_path):
    """Failure 6: a Latin-1 byte gave "can't decode byte 0xe9 in position 3558", no file/line."""
    path = tmp_path / "train.csv"
    path.write_bytes(b'"1","fine","row"\n"2","also","fine"\n"3","caf\xe9","latin-1"\n')
    with pytest.raises(DataFormatError, match=r"train.csv:3: not UTF-8 text: byte 0xe9 at column"):
        read_csv(path, DATASETS["ag_news"])


def test_a_utf8_byte_order_mark_is_accepted(tmp_path):
    """Failure 6: a BOM made the first label '\\ufeff"4"'."""
    path = tmp_path / "train.csv"
    path.write_bytes('"4","caf\u00e9","r\u00e9sum\u00e9"\n"1","a","b"\n'.encode("utf-8-sig"))
    first, second = read_csv(path, DATASETS["ag_news"])
    assert first.label == DATASETS["ag_news"].labels[3] and first.text.startswith("café")
    assert second.label == DATASETS["ag_news"].labels[0]


def test_a_broken_csv_row_names_file_and_line(tmp_path):
    path = tmp_path / "train.csv"
    path.write_bytes(b'"1","a","b"\n"2","' + b"x" * 200_000 + b'","c"\n')  # over csv's limit
    with pytest.raises(DataFormatError, match=r"train.csv:2: not a CSV row"):
        read_csv(path, DATASETS["ag_news"])


def test_too_few_rows_says_how_to_ask_for_fewer(tmp_path):
    """Failure 8: "asked for 115000 examples but the file has 400" said no way out."""
    for split in ("train", "test"):
        write_csv(tmp_path / "ag_news_csv" / f"{split}.csv", [["1", "a", "b"]] * 3)
    with pytest.raises(ValueError, match="has 3; set --train-size .*train_size.* to 3 or fewer"):
        load_dataset("ag_news", data_dir=tmp_path, train_size=115_000, test_size=1)
    with pytest.raises(ValueError, match="has 3; set --test-size .*test_size.* to 3 or fewer"):
        load_dataset("ag_news", data_dir=tmp_path, train_size=1, test_size=7_600)
