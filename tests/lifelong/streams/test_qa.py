import json
import logging

import pytest

from lifelong.streams import DataFormatError, TaskStream, UnknownNameError
from lifelong.streams.core import Example
from lifelong.streams.qa import (
    QA_DATASETS,
    QA_ORDERS,
    QASpec,
    convert_quac,
    load_squad_file,
    qa_stream,
)

# ---------------------------------------------------------------------------------------------
# Loading and validation
# ---------------------------------------------------------------------------------------------

CONTEXT = "Paris is the capital of France."


def squad(*qas, context=CONTEXT):
    return {"data": [{"title": "T", "paragraphs": [{"context": context, "qas": list(qas)}]}]}


def qa(qid, answers, question="What is the capital of France?"):
    return {"answers": answers, "question": question, "id": qid}


def write(path, obj):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj), encoding="utf-8")
    return path


def test_squad_file_becomes_examples(tmp_path):
    path = write(
        tmp_path / "train-v1.1.json",
        squad(qa("q1", [{"text": "Paris", "answer_start": 0}]),
              qa("q2", [{"text": "France", "answer_start": 24}], question="Which country?")),
    )  # fmt: skip
    first, second = load_squad_file(path, "squad")
    assert first == Example(
        "What is the capital of France?", 0, CONTEXT, "squad/train-v1.1.json:q1", (("Paris", 0),)
    )
    assert second.answers == (("France", 24),) and second.uid.endswith(":q2")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"data": [\n  {"paragraphs": [}\n', r"bad.json: malformed JSON at line 2 column 19"),
        ({"version": "1.1"}, r"bad.json: missing key 'data'"),
        ({"data": [{"paragraphs": [{"qas": []}]}]},
         r"data\[0\]\.paragraphs\[0\]: missing key 'context'"),
        (squad(qa("q1", [{"text": "Paris", "answer_start": 0}]), {"question": "?", "answers": []}),
         r"bad.json: data\[0\]\.paragraphs\[0\]\.qas\[1\]: missing key 'id'"),
        (squad({"id": "q1", "answers": []}), r"question 'q1': missing key 'question'"),
        (squad(qa("q1", [{"text": "Paris"}])),
         r"question 'q1' answers\[0\]: missing key 'answer_start'"),
        (squad(qa("q1", [{"text": "Paris", "answer_start": "0"}])),
         r"question 'q1' answers\[0\]: 'answer_start' must be an integer, got '0'"),
        (squad(qa("q1", [{"text": "France.", "answer_start": 25}])),
         r"question 'q1' answers\[0\]: answer_start 25 is out of range for answer 'France\.'"),
        (squad(qa("q1", [{"text": "Lyon", "answer_start": 0}])),
         r"bad.json: question 'q1' answers\[0\]: answer 'Lyon' does not match the context at "
         r"answer_start 0, which holds 'Pari' there"),
        (squad(qa("q1", [{"text": "paris", "answer_start": 0}])), r"answer 'paris' does not match"),
        (squad(qa("q1", [{"text": "Paris", "answer_start": 0}]),
               qa("q1", [{"text": "France", "answer_start": 24}])),
         r"question 'q1': duplicate question id \(also at data\[0\]\.paragraphs\[0\]\.qas\[0\]\)"),
        (squad(qa("q7", [])), r"question 'q7': no answers \(a training question needs one\)"),
    ],
)  # fmt: skip
def test_bad_files_name_file_and_question(tmp_path, content, message):
    path = write(tmp_path / "bad.json", content)
    with pytest.raises(DataFormatError, match=message):
        load_squad_file(path, "squad")


def test_missing_file_and_unanswered_dev_questions(tmp_path, caplog):
    with pytest.raises(DataFormatError, match=r"dev-v1.1.json: file not found"):
        load_squad_file(tmp_path / "dev-v1.1.json", "squad", training=False)
    path = write(
        tmp_path / "dev.json", squad(qa("q1", []), qa("q2", [{"text": "Paris", "answer_start": 0}]))
    )
    with caplog.at_level(logging.INFO, logger="lifelong.streams.qa"):
        (example,) = load_squad_file(path, "squad", training=False)
    assert example.uid == "squad/dev.json:q2"
    assert "dropped 1 questions without answers" in caplog.text


def test_triviaqa_answers_are_matched_case_insensitively(tmp_path):
    # The converter stores lower-cased aliases at offsets of the lower-cased document; "İ"
    # lower-cases to two characters, which shifts those offsets by one.
    context = "İstanbul , not Paris , is the largest city ."
    raw = squad(
        qa("tc_1--a.txt", [{"text": "paris", "answer_start": 16}]),
        qa("tc_2--a.txt", [{"text": "i̇stanbul", "answer_start": 0}]),
        context=context,
    )
    path = write(tmp_path / "web-dev.json", raw)
    paris, istanbul = load_squad_file(path, "trivia_web", training=False)
    assert paris.answers == (("Paris", 15),)
    assert istanbul.answers == (("İstanbul", 0),)
    with pytest.raises(DataFormatError, match="does not match"):
        load_squad_file(path, "squad", training=False)


def quac_raw():
    context = "Ada Quist was born in Fenmoor in 1950. She played the oboe. CANNOTANSWER"
    cannot = {"text": "CANNOTANSWER", "answer_start": context.index("CANNOTANSWER")}
    born = {"text": "born in Fenmoor", "answer_start": 14}
    oboe = {"text": "the oboe", "answer_start": 50}
    turns = [
        {"question": "Where was she born?", "answers": [born, cannot, born], "orig_answer": born},
        {"question": "Did she have pets?", "answers": [cannot], "orig_answer": cannot},
        {"question": "What did she play?", "answers": [oboe], "orig_answer": oboe},
    ]
    for k, turn in enumerate(turns):
        turn.update(id=f"C_1_q#{k}", followup="y", yesno="x")
    paragraph = {"context": context, "id": "C_1", "qas": turns}
    return {"data": [{"paragraphs": [paragraph], "title": "Ada Quist", "background": "B."}]}


def test_quac_conversion_drops_cannotanswer_and_keeps_offsets(tmp_path, caplog):
    converted = convert_quac(quac_raw())
    paragraph = converted["data"][0]["paragraphs"][0]
    assert paragraph["context"] == "Ada Quist was born in Fenmoor in 1950. She played the oboe."
    assert [q["id"] for q in paragraph["qas"]] == ["C_1_q#0", "C_1_q#2"]
    assert paragraph["qas"][0]["answers"] == [{"text": "born in Fenmoor", "answer_start": 14}]
    path = write(tmp_path / "quac" / "val_v0.2.json", quac_raw())
    with caplog.at_level(logging.INFO, logger="lifelong.streams.qa"):
        born, oboe = load_squad_file(path, "quac", training=False)
    assert "kept 2 QuAC turns, dropped 1 unanswerable" in caplog.text
    for example in (born, oboe):
        for text, start in example.answers:
            assert example.text_pair[start : start + len(text)] == text
    assert oboe.uid == "quac/val_v0.2.json:C_1_q#2" and oboe.text == "What did she play?"


# ---------------------------------------------------------------------------------------------
# Streams and the bundled sample
# ---------------------------------------------------------------------------------------------


def test_qa_orders():
    assert QA_ORDERS["i"] == ("quac", "trivia_web", "trivia_wiki", "squad")
    assert QA_ORDERS["ii"] == ("squad", "trivia_wiki", "quac", "trivia_web")
    assert QA_ORDERS["iii"] == ("trivia_web", "trivia_wiki", "squad", "quac")
    assert QA_ORDERS["iv"] == ("trivia_wiki", "quac", "trivia_web", "squad")
    assert QASpec(order="iv", tasks=("squad",)).task_names() == ("squad",)
    with pytest.raises(UnknownNameError, match="unknown QA dataset newsqa; expected names"):
        QASpec(tasks=("newsqa",)).check()
    with pytest.raises(UnknownNameError, match="unknown QA order 'v'"):
        QASpec(order="v").check()


@pytest.mark.parametrize("order", sorted(QA_ORDERS))
def test_bundled_sample_loads_in_every_order(order):
    stream = qa_stream(order)
    assert isinstance(stream, TaskStream) and stream.kind == "qa" and stream.num_labels == 0
    assert stream.task_names == QA_ORDERS[order]
    for task in stream:
        spec = QA_DATASETS[task.name]
        assert task.labels == () and len(task.train) == 60 and len(task.test) == 20
        assert task.train[0].uid.startswith(f"{task.name}/{spec.train_file}:")
        for example in task.train + task.test:
            assert example.answers
            for text, start in example.answers:
                assert example.text_pair[start : start + len(text)] == text


def test_sampling_is_seeded_and_independent_of_order():
    a = qa_stream(tasks=["squad", "quac"], train_size=10, test_size=5, seed=1)
    b = qa_stream(tasks=["quac", "squad"], train_size=10, test_size=5, seed=1)
    c = qa_stream(tasks=["squad", "quac"], train_size=10, test_size=5, seed=2)
    assert [len(t.train) for t in a] == [10, 10] and [len(t.test) for t in a] == [5, 5]
    assert a.tasks[0] == b.tasks[1] and a.tasks[1] == b.tasks[0]
    assert a.tasks[0].train != c.tasks[0].train
    assert len({e.uid for e in a.tasks[0].train}) == 10
    with pytest.raises(
        ValueError, match=r"train-v1.1.json: asked for 61 examples but the file has 60"
    ):
        qa_stream(tasks=["squad"], train_size=61)
    with pytest.raises(
        ValueError, match=r"val_v0.2.json: asked for 21 examples but the file has 20"
    ):
        qa_stream(tasks=["quac"], test_size=21)


def test_non_utf8_json_names_the_line_and_a_bom_is_accepted(tmp_path):
    text = json.dumps(squad(qa("q1", [{"text": "Paris", "answer_start": 0}])), indent=1)
    path = tmp_path / "train-v1.1.json"
    path.write_bytes(text.encode("utf-8-sig"))
    (example,) = load_squad_file(path, "squad")
    assert example.answers == (("Paris", 0),)
    path.write_bytes(text.replace("France?", "Fran\xe7e?").encode("latin-1"))
    line = text[: text.index("France?")].count("\n") + 1
    with pytest.raises(
        DataFormatError, match=rf"train-v1.1.json:{line}: not UTF-8 text: byte 0xe7"
    ):
        load_squad_file(path, "squad")
