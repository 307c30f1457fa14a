"""Generated inputs for the data readers: Zhang CSV, FewRel lines, SQuAD-format JSON.

Every generated file is read by the project's reader and judged by an oracle written here from
the format's rules: a file the oracle accepts must be read whole and right; a file it rejects
must raise `DataFormatError` naming the file and the line of the first fault (the JSON reader
names the question or JSON path instead). Any other exception fails the test.
"""

import csv
import io
import json
import re
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from lifelong.streams import DATASETS, DataFormatError
from lifelong.streams.fewrel import read_relation_file
from lifelong.streams.qa import load_squad_file
from lifelong.streams.text_classification import read_csv

settings.load_profile("lifelong-fuzz")

AG_NEWS = DATASETS["ag_news"]  # label, title, description; labels 1..4
TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=8)
LABEL = st.one_of(
    st.integers(-2, 6).map(str),
    st.sampled_from(["", " 3 ", "+1", "1_0", "1.0", "\u0663", "0x2", "2e0", "four", "04"]),
    TEXT,
)


# one folder per module for every generated file, removed when the session ends
SCRATCH = tempfile.TemporaryDirectory(prefix="lifelong-fuzz-")


def scratch_file(name: str, data: bytes) -> Path:
    folder = Path(tempfile.mkdtemp(dir=SCRATCH.name))
    path = folder / name
    path.write_bytes(data)
    return path


def lines_of(data: bytes, start: int, end: int) -> tuple[int, int]:
    """First and last physical line (1-based) of the bytes [start, end)."""
    first = data.count(b"\n", 0, start) + 1
    return first, data.count(b"\n", 0, max(start, end - 1)) + 1


# --- Zhang et al. CSV ------------------------------------------------------------------------


def csv_row_fault(row: list[str]) -> bool:
    """Whether one row breaks the format (the oracle; written from the rules, not the reader)."""
    if len(row) != 1 + len(AG_NEWS.columns):
        return True
    if not re.fullmatch(r"\s*[0-9]+\s*", row[0], re.ASCII) or not 1 <= int(row[0]) <= 4:
        return True
    words = [w for field in row[1:] for w in field.replace("\\n", " ").split()]
    return not words


@settings(max_examples=800)
@given(
    rows=st.lists(st.tuples(LABEL, st.lists(TEXT, max_size=4)), max_size=6),
    quoting=st.sampled_from([csv.QUOTE_ALL, csv.QUOTE_MINIMAL]),
    bom=st.booleans(),
    bad=st.one_of(st.none(), st.tuples(st.integers(0, 5), st.floats(0, 1))),
)
def test_zhang_csv(rows, quoting, bom, bad, tried):
    tried("zhang csv")
    spans, buffer = [], io.StringIO()
    writer = csv.writer(buffer, quoting=quoting)
    for label, fields in rows:
        start = len(buffer.getvalue().encode())
        writer.writerow([label, *fields])
        spans.append((start, len(buffer.getvalue().encode())))
    data = buffer.getvalue().encode()
    bad_row = None if bad is None or not rows else bad[0] % len(rows)
    if bad_row is not None:  # one byte that is not UTF-8, inside that row
        start, end = spans[bad_row]
        at = start + int(bad[1] * max(0, end - start - 2))
        data = data[:at] + b"\xff" + data[at:]
    path = scratch_file("train.csv", (b"\xef\xbb\xbf" if bom else b"") + data)

    expected = None  # (line, words in the message) of the first fault in file order
    for i, ((label, fields), (start, end)) in enumerate(zip(rows, spans)):
        if i == bad_row:
            expected = (data.count(b"\n", 0, at) + 1, "not UTF-8 text: byte 0x")
            break
        if csv_row_fault([label, *fields]):
            expected = (lines_of(data, start, end)[1], "")
            break
    try:
        examples = read_csv(path, AG_NEWS)
    except DataFormatError as err:
        message = str(err)
        assert message.startswith(str(path)), message
        if expected is None:
            assert not rows and "has no rows" in message, message
        else:
            assert message.startswith(f"{path}:{expected[0]}:"), (message, expected)
            assert expected[1] in message
        return
    assert expected is None and rows, f"accepted a malformed file: {data!r}"
    assert len(examples) == len(rows)
    for example, (label, _) in zip(examples, rows):
        assert example.label == AG_NEWS.labels[int(label) - 1]


# --- lifelong FewRel (Wang et al.'s files) ---------------------------------------------------

RELATIONS = 6
ID = st.one_of(
    st.integers(-1, RELATIONS + 1).map(str),
    st.sampled_from(["", "x", "+2", "2_0", "\u0663", "3.0", "04"]),
)


def relation_line_fault(text: str) -> bool:
    """Whether one ``gold TAB candidates TAB sentence[TAB]`` line breaks the format."""
    fields = text.split("\t")
    if len(fields) == 4 and not fields[3].strip():  # the real files end lines with a tab
        fields = fields[:3]
    if len(fields) != 3:
        return True
    gold, candidates, sentence = fields[0].strip(), fields[1].split(), fields[2]
    ids = [gold, *candidates]
    if not candidates or not all(re.fullmatch(r"[0-9]+", t, re.ASCII) for t in ids):
        return True
    if not all(1 <= int(t) <= RELATIONS for t in ids):
        return True
    return all(int(c) == int(gold) for c in candidates) or not sentence.split()


FIELD = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\t\n\r"), max_size=8
)


@settings(max_examples=800)
@given(
    lines=st.lists(
        st.tuples(ID, st.lists(ID, max_size=4), FIELD, st.sampled_from(["", "\t", "\tx", "\t\t"])),
        max_size=6,
    ),
    blank=st.integers(0, 7),
    bad=st.one_of(st.none(), st.integers(0, 5)),
)
def test_fewrel_lines(lines, blank, bad, tried):
    tried("fewrel lines")
    texts = [f"{g}\t{' '.join(c)}\t{s}{x}" for g, c, s, x in lines]
    texts.insert(min(blank, len(texts)), "   ")  # blank lines are skipped
    encoded = [t.encode() for t in texts]
    bad_line = None
    if bad is not None and texts:
        bad_line = bad % len(texts)
        encoded[bad_line] = encoded[bad_line][:1] + b"\xe9" + encoded[bad_line][1:]
    path = scratch_file("training_data.txt", b"\n".join(encoded) + b"\n")

    expected = None  # (1-based line, words in the message)
    for number, text in enumerate(texts, start=1):
        if number - 1 == bad_line:
            expected = (number, "not UTF-8 text")
            break
        if not text.strip():
            continue
        if relation_line_fault(text):
            expected = (number, "")
            break
    try:
        read = read_relation_file(path, RELATIONS)
    except DataFormatError as err:
        message = str(err)
        if expected is None:
            assert message == f"{path}: the file has no examples", message
            assert all(not text.strip() for text in texts)
        else:
            assert message.startswith(f"{path}:{expected[0]}:"), (message, expected)
            assert expected[1] in message
        return
    assert expected is None, f"accepted a malformed file: {texts!r}"
    kept = [line for line, text in zip(lines, texts[:blank] + texts[blank + 1 :]) if text.strip()]
    assert [line.gold for line in read] == [int(g) - 1 for g, *_ in kept]
    for line, (gold, candidates, sentence, _) in zip(read, kept):
        assert set(line.negatives) == {int(c) - 1 for c in candidates} - {int(gold) - 1}
        assert line.sentence == " ".join(sentence.split())


# --- SQuAD-format JSON -----------------------------------------------------------------------

WORDS = st.lists(
    st.sampled_from(["Paris", "is", "the", "capital", "of", "France", "é"]), min_size=1
)
JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 300), st.floats(allow_nan=False), TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(TEXT, inner, max_size=3)),
    max_leaves=6,
)


@st.composite
def squad_file(draw):
    """A valid SQuAD-format document: every answer is found at its answer_start."""
    data, qid = [], 0
    for _ in range(draw(st.integers(1, 2))):
        paragraphs = []
        for _ in range(draw(st.integers(1, 2))):
            words = draw(WORDS)
            context = " ".join(words)
            qas = []
            for _ in range(draw(st.integers(1, 2))):
                i = draw(st.integers(0, len(words) - 1))
                j = draw(st.integers(i + 1, len(words)))
                text, start = " ".join(words[i:j]), len(" ".join(words[:i])) + (i > 0)
                qas.append({"id": f"q{qid}", "question": "Where?", "answers": [
                    {"text": text, "answer_start": start}]})  # fmt: skip
                qid += 1
            paragraphs.append({"context": context, "qas": qas})
        data.append({"title": "T", "paragraphs": paragraphs})
    return {"version": "1.1", "data": data}


def containers(node, path=()):
    """Every (path, container) pair of a JSON tree, the root first."""
    yield path, node
    children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(
        node, list) else ()  # fmt: skip
    for key, child in children:
        if isinstance(child, dict | list):
            yield from containers(child, (*path, key))


@settings(max_examples=800)
@given(document=squad_file(), data=st.data())
def test_squad_json(document, data, tried):
    tried("squad json")
    how = data.draw(st.sampled_from(["replace", "delete", "text", "none"]))
    places = list(containers(document))
    _, node = places[data.draw(st.integers(0, len(places) - 1))]
    keys = list(node) if isinstance(node, dict) else list(range(len(node)))
    if how == "replace" and keys:
        node[data.draw(st.sampled_from(keys))] = data.draw(JSON)
    elif how == "delete" and keys:
        del node[data.draw(st.sampled_from(keys))]
    raw = json.dumps(document, ensure_ascii=False).encode()
    if how == "text":  # cut short, or a byte that is not UTF-8
        cut = data.draw(st.integers(0, len(raw)))
        raw = raw[:cut] + data.draw(st.sampled_from([b"", b"\xff", b"}"]))
    path = scratch_file("train-v1.1.json", raw)
    try:
        examples = load_squad_file(path, "squad")
    except DataFormatError as err:
        assert str(err).startswith(f"{path}:"), str(err)
        return
    # accepted: then every answer must be where it says, every question real and unique
    document = json.loads(raw)
    contexts = {p["context"] for a in document["data"] for p in a["paragraphs"]}
    assert examples and len({e.uid for e in examples}) == len(examples)
    for example in examples:
        assert example.text_pair in contexts and example.text.strip() and example.answers
        for text, start in example.answers:
            assert text and example.text_pair[start : start + len(text)] == text
