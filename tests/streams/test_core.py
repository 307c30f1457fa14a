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
