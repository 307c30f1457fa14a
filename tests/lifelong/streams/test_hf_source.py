"""Hugging Face datasets as a data source: every stream from save_to_disk / parquet copies.

The copies are built here with ``Dataset.from_dict`` in the hub's schema (column names, label
encodings, split names of `streams.hf_datasets` sources) from the bundled sample, so a stream
read from them must hold the same examples as the stream read from the files. Nothing touches the
network.
"""

import json

import numpy as np
import pytest

from lifelong.streams import QASpec, TextSpec, fewrel, qa, text_classification
from lifelong.streams.core import DataFormatError
from lifelong.streams.registry import build_stream

datasets = pytest.importorskip("datasets")

TEXT_SAMPLE = text_classification.SAMPLE_DIR
QA_SAMPLE = qa.SAMPLE_DIR


def _text_rows(name, split):
    """One text dataset's sample split in its hub schema."""
    spec, source = text_classification.DATASETS[name], text_classification.HUB[name]
    rows = text_classification.read_csv(TEXT_SAMPLE / spec.folder / f"{split}.csv", spec)
    raw = []
    import csv

    with (TEXT_SAMPLE / spec.folder / f"{split}.csv").open(newline="", encoding="utf-8") as f:
        raw = list(csv.reader(f))
    assert len(raw) == len(rows)
    label_column, *text_columns = source.columns
    base = source.label_base
    columns = {label_column: [int(r[0]) - 1 + base for r in raw]}
    if name == "ag_news":  # the hub joins title and description into one column
        columns["text"] = [f"{r[1]} {r[2]}" for r in raw]
    else:
        for k, column in enumerate(text_columns):
            columns[column] = [r[1 + k] for r in raw]
    features = None
    if base == 0:
        features = datasets.Features(
            {
                label_column: datasets.ClassLabel(names=list(spec.label_names)),
                **{c: datasets.Value("string") for c in columns if c != label_column},
            }
        )
    return datasets.Dataset.from_dict(columns, features=features)


def save_text(root, names=tuple(text_classification.DATASETS)):
    for name in names:
        splits = {split: _text_rows(name, split) for split in ("train", "test")}
        datasets.DatasetDict(splits).save_to_disk(str(root / name))
    return root


@pytest.fixture(scope="module")
def text_dir(tmp_path_factory):
    return save_text(tmp_path_factory.mktemp("hf_text"))


def _same_examples(a, b):
    assert a.task_names == b.task_names and a.label_names == b.label_names
    for x, y in zip(a, b):
        assert x.labels == y.labels
        for split in ("train", "test"):
            left, right = getattr(x, split), getattr(y, split)
            assert [(e.text, e.label) for e in left] == [(e.text, e.label) for e in right]


def test_text_stream_from_save_to_disk_equals_the_files(text_dir):
    spec = TextSpec(order="i", train_size=40, test_size=20)
    files = build_stream(spec)
    hf = build_stream(
        TextSpec(order="i", train_size=40, test_size=20, data_source="hf", data_dir=str(text_dir))
    )
    _same_examples(files, hf)
    assert hf.tasks[0].train[0].uid.startswith("yelp/train:")
    assert "hf:" in hf.description


def test_text_dataset_from_parquet_files(tmp_path):
    for split in ("train", "test"):
        _text_rows("dbpedia", split).to_parquet(
            str(tmp_path / "dbpedia" / "data" / f"{split}-00000-of-00001.parquet")
        )
    task = text_classification.load_dataset("dbpedia", tmp_path, data_source="hf")
    files = text_classification.load_dataset("dbpedia")
    assert [(e.text, e.label) for e in task.test] == [(e.text, e.label) for e in files.test]


def test_missing_split_names_dataset_and_split(tmp_path):
    datasets.DatasetDict({"train": _text_rows("yelp", "train")}).save_to_disk(
        str(tmp_path / "yelp")
    )
    with pytest.raises(DataFormatError, match=r"yelp.*no split 'test'.*has train"):
        text_classification.load_dataset("yelp", tmp_path, data_source="hf")


def test_absent_dataset_lists_what_was_looked_for(tmp_path):
    with pytest.raises(DataFormatError, match=r"no ag_news split 'train'.*save_to_disk.*parquet"):
        text_classification.load_dataset("ag_news", tmp_path, data_source="hf")


def test_wrong_column_names_the_split_and_the_columns(tmp_path):
    bad = _text_rows("yelp", "train").rename_column("text", "review")
    datasets.DatasetDict({"train": bad, "test": bad}).save_to_disk(str(tmp_path / "yelp"))
    with pytest.raises(
        DataFormatError, match=r"split 'train': missing column text.*found label, review"
    ):
        text_classification.load_dataset("yelp", tmp_path, data_source="hf")


def test_label_out_of_range_names_the_row(tmp_path):
    good = _text_rows("amazon", "train")
    labels = list(good["label"])
    labels[3] = 6  # the CSV copy's labels are 1..5
    bad = good.remove_columns("label").add_column("label", labels)
    datasets.DatasetDict({"train": bad, "test": good}).save_to_disk(str(tmp_path / "amazon"))
    with pytest.raises(
        DataFormatError, match=r"amazon split 'train' row 3: label 6 is out of range 1..5"
    ):
        text_classification.load_dataset("amazon", tmp_path, data_source="hf")


def test_class_label_with_other_classes_is_an_error(tmp_path):
    rows = _text_rows("ag_news", "train")
    features = rows.features.copy()
    features["label"] = datasets.ClassLabel(names=["a", "b", "c", "d", "e"])
    bad = rows.cast(features)
    datasets.DatasetDict({"train": bad, "test": bad}).save_to_disk(str(tmp_path / "ag_news"))
    with pytest.raises(DataFormatError, match=r"column 'label' has 5 classes.*expected 4"):
        text_classification.load_dataset("ag_news", tmp_path, data_source="hf")


def test_empty_text_names_the_row(tmp_path):
    rows = _text_rows("yelp", "test")
    texts = list(rows["text"])
    texts[1] = "  "
    bad = rows.remove_columns("text").add_column("text", texts)
    datasets.DatasetDict({"train": _text_rows("yelp", "train"), "test": bad}).save_to_disk(
        str(tmp_path / "yelp")
    )
    with pytest.raises(DataFormatError, match=r"split 'test' row 1: empty text"):
        text_classification.load_dataset("yelp", tmp_path, data_source="hf")


# --- QA ---------------------------------------------------------------------------------------


def _squad_rows(path):
    raw = json.loads(path.read_text())
    columns = {"id": [], "title": [], "context": [], "question": [], "answers": []}
    for article in raw["data"]:
        for paragraph in article["paragraphs"]:
            for q in paragraph["qas"]:
                columns["id"].append(q["id"])
                columns["title"].append(article.get("title", ""))
                columns["context"].append(paragraph["context"])
                columns["question"].append(q["question"])
                columns["answers"].append(
                    {
                        "text": [a["text"] for a in q["answers"]],
                        "answer_start": [a["answer_start"] for a in q["answers"]],
                    }
                )
    return datasets.Dataset.from_dict(columns)


def _quac_rows(path):
    raw = json.loads(path.read_text())
    columns = {
        k: []
        for k in (
            "dialogue_id",
            "wikipedia_page_title",
            "context",
            "questions",
            "turn_ids",
            "answers",
            "orig_answers",
        )
    }
    for article in raw["data"]:
        for j, paragraph in enumerate(article["paragraphs"]):
            qas = paragraph["qas"]
            columns["dialogue_id"].append(f"{article.get('title', '')}_{j}")
            columns["wikipedia_page_title"].append(article.get("title", ""))
            columns["context"].append(paragraph["context"])
            columns["questions"].append([q["question"] for q in qas])
            columns["turn_ids"].append([q["id"] for q in qas])
            columns["answers"].append(
                {
                    "texts": [[a["text"] for a in q["answers"]] for q in qas],
                    "answer_starts": [[a["answer_start"] for a in q["answers"]] for q in qas],
                }
            )
            columns["orig_answers"].append(
                {
                    "texts": [q["orig_answer"]["text"] for q in qas],
                    "answer_starts": [q["orig_answer"]["answer_start"] for q in qas],
                }
            )
    return datasets.Dataset.from_dict(columns)


def _trivia_rows(path):
    """The sample's converted TriviaQA file back in the hub's raw form: one document each."""
    raw = json.loads(path.read_text())
    columns = {
        k: []
        for k in (
            "question",
            "question_id",
            "question_source",
            "entity_pages",
            "search_results",
            "answer",
        )
    }
    for article in raw["data"]:
        for paragraph in article["paragraphs"]:
            for q in paragraph["qas"]:
                qid, _, filename = q["id"].partition("--")
                columns["question"].append(q["question"])
                columns["question_id"].append(qid)
                columns["question_source"].append("")
                columns["entity_pages"].append(
                    {
                        "doc_source": ["x"],
                        "filename": [filename or "doc.txt"],
                        "title": ["t"],
                        "wiki_context": [paragraph["context"]],
                    }
                )
                columns["search_results"].append({"filename": [], "search_context": []})
                aliases = [a["text"].lower() for a in q["answers"]]
                columns["answer"].append(
                    {"normalized_aliases": aliases, "value": aliases[0] if aliases else ""}
                )
    return datasets.Dataset.from_dict(columns)


@pytest.fixture(scope="module")
def qa_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf_qa")
    for name, spec in qa.QA_DATASETS.items():
        folder = QA_SAMPLE / spec.folder
        make = _squad_rows if name == "squad" else _quac_rows if name == "quac" else _trivia_rows
        splits = {
            "train": make(folder / spec.train_file),
            "validation": make(folder / spec.dev_file),
        }
        datasets.DatasetDict(splits).save_to_disk(str(root / name))
    return root


def test_qa_stream_from_save_to_disk_matches_the_files(qa_dir):
    files = build_stream(QASpec(order="i"))
    hf = build_stream(QASpec(order="i", data_source="hf", data_dir=str(qa_dir)))
    assert hf.kind == "qa" and hf.task_names == files.task_names
    for x, y in zip(files, hf):
        for split in ("train", "test"):
            left = [(e.text, e.text_pair, e.answers) for e in getattr(x, split)]
            right = [(e.text, e.text_pair, e.answers) for e in getattr(y, split)]
            if x.name.startswith("trivia"):  # answers re-found as the converter finds them
                assert [r[:2] for r in right] == [r[:2] for r in left]
                for (_, context, found), (_, _, gold) in zip(right, left):
                    ((text, start),) = found  # the first alias found, the context's own text
                    assert context[start : start + len(text)] == text
                    assert text.lower() in {a.lower() for a, _ in gold}
            else:
                assert right == left


def test_trivia_conversion_follows_the_official_converter(tmp_path):
    context = "Paris is the capital. In PARIS the Seine flows. " + "word " * 900
    rows = datasets.Dataset.from_dict(
        {
            "question": ["Capital of France?", "Unknown?"],
            "question_id": ["q1", "q2"],
            "entity_pages": [
                {"filename": ["France.txt", "France.txt"], "wiki_context": [context, context]},
                {"filename": ["Other.txt"], "wiki_context": ["nothing here"]},
            ],
            "search_results": [
                {"filename": ["web1.txt"], "search_context": ["the seine and paris"]},
                {"filename": [], "search_context": []},
            ],
            "answer": [
                {"normalized_aliases": ["city of light", "paris"]},
                {"normalized_aliases": ["zzz"]},
            ],
        }
    )
    datasets.DatasetDict({"train": rows, "validation": rows}).save_to_disk(
        str(tmp_path / "trivia_web")
    )
    train = qa.read_hf_qa("trivia_web", "train", tmp_path)
    # one question per (question, document); the repeated France.txt once; q2 has no answer: dropped
    assert [e.uid for e in train] == [
        "trivia_web/train:q1--France.txt",
        "trivia_web/train:q1--web1.txt",
    ]
    first = train[0]
    assert first.answers == (("Paris", 0),)  # the context's own text at the alias's position
    assert len(first.text_pair.split()) == qa.TRIVIA_MAX_TOKENS
    assert train[1].answers == (("paris", 14),)


def test_qa_errors_name_split_and_question(tmp_path):
    rows = _squad_rows(QA_SAMPLE / "squad" / "train-v1.1.json")
    answers = list(rows["answers"])
    answers[0] = {"text": ["not in the context"], "answer_start": [0]}
    bad = rows.remove_columns("answers").add_column("answers", answers)
    datasets.DatasetDict({"train": bad, "validation": rows}).save_to_disk(str(tmp_path / "squad"))
    with pytest.raises(DataFormatError, match=r"squad split 'train': question .*does not match"):
        qa.load_qa_task("squad", tmp_path, data_source="hf")


# --- FewRel -----------------------------------------------------------------------------------


def _embed(names):
    return fewrel.hashed_bag_of_words(names)


def test_fewrel_from_a_converted_copy_equals_the_files(tmp_path):
    fewrel.fewrel_dataset().save_to_disk(str(tmp_path / "fewrel"))
    files = fewrel.fewrel_stream(n_tasks=3, embed=_embed, seed=1)
    hf = fewrel.fewrel_stream(n_tasks=3, embed=_embed, seed=1, data_dir=tmp_path, data_source="hf")
    assert hf.label_names == files.label_names and hf.task_names == files.task_names
    for x, y in zip(files, hf):
        for split in ("train", "test"):
            left = [(e.text, e.label, e.candidates) for e in getattr(x, split)]
            assert left == [(e.text, e.label, e.candidates) for e in getattr(y, split)]


def test_fewrel_has_no_hub_copy_and_says_how_to_make_one():
    with pytest.raises(DataFormatError, match=r"not on the hub.*fewrel_dataset"):
        fewrel.fewrel_stream(n_tasks=3, embed=_embed, data_source="hf")


def test_fewrel_bad_candidate_names_the_row(tmp_path):
    data = fewrel.fewrel_dataset()
    rows = data["test"].to_dict()
    rows["candidates"][2] = [rows["relation"][2], 99]
    data["test"] = datasets.Dataset.from_dict(rows, features=data["test"].features)
    data.save_to_disk(str(tmp_path / "fewrel"))
    with pytest.raises(
        DataFormatError, match=r"split 'test' row 2: candidate id 99 is not a relation id"
    ):
        fewrel.read_hf_relations(tmp_path)


def test_sizes_sample_hf_rows_like_file_rows(text_dir):
    a = text_classification.load_dataset(
        "yelp", text_dir, train_size=10, test_size=5, data_source="hf"
    )
    b = text_classification.load_dataset("yelp", None, train_size=10, test_size=5)
    assert [e.text for e in a.train] == [e.text for e in b.train]
    assert np.array_equal([e.label for e in a.test], [e.label for e in b.test])


# --- `lifelong run --data-source hf` (acceptance: every stream, offline) -----------------------


def _run(*args):
    from lifelong.experiment.cli import main

    return main(["run", "--encoder", "tiny", "--no-progress", "--strategy", "seq", *args])


@pytest.mark.parametrize("stream", ["text", "qa", "fewrel"])
def test_lifelong_run_reads_every_stream_from_hf_copies(stream, text_dir, qa_dir, tmp_path, capsys):
    data = {"text": text_dir, "qa": qa_dir, "fewrel": tmp_path / "data"}[stream]
    if stream == "fewrel":
        fewrel.fewrel_dataset().save_to_disk(str(data / "fewrel"))
    sizes = {
        "text": ["--train-size", "8", "--test-size", "4"],
        "qa": ["--train-size", "4", "--test-size", "2"],
        "fewrel": ["--fewrel-tasks", "3", "--max-length", "48"],
    }[stream]
    out_dir = tmp_path / "runs"
    code = _run(
        "--stream",
        stream,
        "--data-source",
        "hf",
        "--data-dir",
        str(data),
        *sizes,
        "--output-dir",
        str(out_dir),
    )
    assert code == 0
    assert "forgetting" in capsys.readouterr().out
    (run_dir,) = [p for p in out_dir.iterdir() if p.is_dir()]
    assert "data_source: hf" in (run_dir / "config.yaml").read_text()


@pytest.mark.parametrize("layout", ["dataset_dict", "per_split", "parquet"])
def test_a_truncated_file_names_the_dataset_folder(tmp_path, layout):
    """Failure 7: a truncated .arrow file gave a bare pyarrow traceback, naming no file."""
    splits = {split: _text_rows("yelp", split) for split in ("train", "test")}
    folder = tmp_path / "yelp"
    if layout == "dataset_dict":
        datasets.DatasetDict(splits).save_to_disk(str(folder))
    elif layout == "per_split":
        for split, rows in splits.items():
            rows.save_to_disk(str(folder / split))
    else:
        for split, rows in splits.items():
            rows.to_parquet(str(folder / f"{split}.parquet"))
    (data,) = sorted(folder.rglob("train*.parquet")) or sorted(folder.rglob("train/*.arrow"))
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    with pytest.raises(DataFormatError, match=rf"{folder}.*cannot read .*whole"):
        text_classification.load_dataset("yelp", tmp_path, data_source="hf")


def test_an_unreachable_hub_is_one_line(monkeypatch):
    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'Yelp/yelp_review_full' on the Hub (offline)")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(DataFormatError, match=r"Yelp/yelp_review_full \(yelp\): could not load"):
        text_classification.load_dataset("yelp", None, data_source="hf")
