import pytest

from lifelong.streams import Example, Task, TaskStream, batches


def test_batches_cover_every_example_once():
    examples = [Example(str(i), 0) for i in range(10)]
    chunks = list(batches(examples, 3, shuffle=True, seed=4))
    assert [len(c) for c in chunks] == [3, 3, 3, 1]
    assert sorted(e.text for c in chunks for e in c) == sorted(e.text for e in examples)
    again = list(batches(examples, 3, shuffle=True, seed=4))
    assert chunks == again


def test_stream_rejects_labels_outside_space_and_duplicate_names():
    task = Task("a", (0, 5), (), ())
    with pytest.raises(ValueError, match="outside the stream's 2-label space"):
        TaskStream((task,), ("x", "y"))
    ok = Task("a", (0,), (), ())
    with pytest.raises(ValueError, match="unique"):
        TaskStream((ok, ok), ("x",))


def test_an_ordered_familys_stream_is_its_datasets_in_order_named_by_title_and_source():
    from lifelong.streams.qa import QASpec
    from lifelong.streams.text_classification import TextSpec

    read = []

    def load(name, labels=(0,)):
        read.append(name)
        return Task(name, labels, (Example(name, 0),), (Example(name, 0),))

    stream = TextSpec(order="i").load_stream(load, "bundled sample", ("x",))
    assert read == list(TextSpec(order="i").task_names()) == list(stream.task_names)
    assert stream.kind == "classification" and stream.label_names == ("x",)
    assert stream.description == "text classification (bundled sample): " + " -> ".join(read)

    qa = QASpec(tasks=("quac", "squad")).load_stream(lambda n: load(n, ()), "data/qa")
    assert qa.kind == "qa" and qa.label_names == ()
    assert qa.description == "question answering (data/qa): quac -> squad"


def test_an_unknown_dataset_is_refused_before_any_is_read():
    from lifelong.streams import UnknownNameError
    from lifelong.streams.qa import QASpec

    def load(name):
        raise AssertionError(f"read {name} before the names were checked")

    with pytest.raises(UnknownNameError, match="nope"):
        QASpec(tasks=("squad", "nope")).load_stream(load, "bundled sample")
