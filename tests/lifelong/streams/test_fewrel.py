import numpy as np
import pytest

from lifelong.streams import DataFormatError, TaskStream
from lifelong.streams.fewrel import (
    RELATION_FILE,
    TEST_FILE,
    TRAIN_FILE,
    cluster_order,
    cluster_relations,
    fewrel_stream,
    glove_embedder,
    hashed_bag_of_words,
    read_glove,
    read_relation_file,
    read_relation_names,
    relation_names,
)

NAMES = [f"relation {w} of {v}" for w in "abcdefgh" for v in ("x", "y")]  # 16 names


def write_data(root, names, train_lines, test_lines):
    root.mkdir(parents=True, exist_ok=True)
    (root / RELATION_FILE).write_text("".join(f"///{n}\n" for n in names))
    (root / TRAIN_FILE).write_text("".join(line + "\n" for line in train_lines))
    (root / TEST_FILE).write_text("".join(line + "\n" for line in test_lines))


def toy_data(root, n_relations=12, per_relation=3):
    """Every relation gets `per_relation` lines per split listing all other relations."""
    names = [f"rel{r} {'alpha beta gamma delta'.split()[r % 4]}" for r in range(n_relations)]
    lines = []
    for gold in range(1, n_relations + 1):
        negs = " ".join(str(r) for r in range(1, n_relations + 1) if r != gold)
        lines += [f"{gold}\t{negs}\tsentence {i} about {gold}" for i in range(per_relation)]
    write_data(root, names, lines, lines)
    return names


@pytest.fixture(scope="module")
def sample_stream() -> TaskStream:
    return fewrel_stream(embed=hashed_bag_of_words)


# --- clustering -------------------------------------------------------------------------------


def test_clustering_is_a_deterministic_partition():
    a = cluster_relations(NAMES, 5, 0, hashed_bag_of_words)
    assert a == cluster_relations(NAMES, 5, 0, hashed_bag_of_words)
    assert len(a) == 5 and all(a)
    assert sorted(r for c in a for r in c) == list(range(len(NAMES)))
    assert all(c == sorted(c) for c in a)
    assert [c[0] for c in a] == sorted(c[0] for c in a)  # canonical order
    names = relation_names()  # the sample's: seeds 0 and 1 happen to give different clusters
    assert cluster_relations(names, 10, 0, hashed_bag_of_words) != cluster_relations(
        names, 10, 1, hashed_bag_of_words
    )


def test_clustering_follows_the_embedding():
    vectors = np.array([[0, 0], [0, 0.1], [10, 10], [10, 10.1], [-10, 5], [-10, 5.2]], float)
    clusters = cluster_relations(["n"] * 6, 3, 7, lambda names: vectors)
    assert clusters == [[0, 1], [2, 3], [4, 5]]


def test_clustering_errors():
    with pytest.raises(ValueError, match="cannot make 17 tasks out of 16 relations"):
        cluster_relations(NAMES, 17, 0, hashed_bag_of_words)
    with pytest.raises(ValueError, match="fewer than 3 distinct vectors"):
        cluster_relations(["a", "a", "b", "b"], 3, 0, hashed_bag_of_words)
    with pytest.raises(ValueError, match=r"returned shape \(3,\)"):
        cluster_relations(["a", "b", "c"], 2, 0, lambda names: np.zeros(3))


def test_order_seed_shuffles_cluster_order_deterministically(tmp_path):
    assert cluster_order(10, 3) == cluster_order(10, 3)
    assert sorted(cluster_order(10, 3)) == list(range(10))
    assert len({tuple(cluster_order(10, s)) for s in range(5)}) > 1
    # runs 0..N-1 are N different orders, even where few orders exist
    assert len({tuple(cluster_order(5, s)) for s in range(20)}) == 20
    assert len({tuple(cluster_order(3, s)) for s in range(6)}) == 6
    with pytest.raises(ValueError, match="only 6 orders"):
        cluster_order(3, 6)
    names = toy_data(tmp_path)
    streams = [
        fewrel_stream(data_dir=tmp_path, n_tasks=4, order_seed=s, embed=hashed_bag_of_words)
        for s in (0, 0, 1, 2, 3)
    ]
    assert streams[0] == streams[1]
    assert len({s.task_names for s in streams}) > 1
    for stream in streams:
        assert sorted(stream.task_names) == ["c0", "c1", "c2", "c3"]
        assert sorted(r for t in stream for r in t.labels) == list(range(len(names)))
        by_name = {t.name: t.labels for t in stream}
        assert by_name == {t.name: t.labels for t in streams[0]}  # names stable across orders


# --- candidates -------------------------------------------------------------------------------


def test_train_negatives_are_the_line_s_seen_ones_without_top_up(tmp_path):
    toy_data(tmp_path)
    stream = fewrel_stream(data_dir=tmp_path, n_tasks=4, order_seed=1, embed=hashed_bag_of_words)
    seen: set[int] = set()
    for k, task in enumerate(stream):
        seen |= set(task.labels)
        for ex in task.train:
            assert ex.label in task.labels and ex.label in ex.candidates
            assert len(set(ex.candidates)) == len(ex.candidates)
            if k == 0 and len(task.labels) == 1:  # no seen negative: the line's last two
                negatives = [r for r in range(12) if r != ex.label]
                assert set(ex.candidates) == {ex.label, *negatives[-2:]}
            else:  # every line lists every relation, so the candidates are exactly the seen ones
                assert set(ex.candidates) == seen
        for ex in task.test:  # test examples keep every candidate of their line
            assert set(ex.candidates) == set(range(12))
    assert seen == set(range(12))


def test_holla_s_rule_keeps_seen_negatives_and_falls_back_to_the_last_two(tmp_path):
    names = [f"name{r}" for r in range(5)]
    lines = ["1\t2 3 4 5\tfirst", "2\t1\tsecond", "3\t4\tthird", "4\t3\tfourth", "5\t1\tfifth"]
    write_data(tmp_path, names, lines, lines)
    vectors = np.eye(5)
    for order_seed in range(6):
        stream = fewrel_stream(
            data_dir=tmp_path, n_tasks=5, embed=lambda n: vectors, order_seed=order_seed
        )
        order = [t.labels[0] for t in stream]
        line_one = next(t for t in stream if t.labels == (0,)).train[0]
        seen = set(order[: order.index(0) + 1])
        kept = {1, 2, 3, 4} & seen
        # line 1 lists 2..5 (0-based 1..4): the seen ones, no top-up; none seen: the last two
        assert set(line_one.candidates) == {0} | (kept or {3, 4})


def test_sample_candidates_do_not_reveal_the_gold(sample_stream):
    train = [ex for task in sample_stream for ex in task.train if len(ex.candidates) > 1]
    test = [ex for task in sample_stream for ex in task.test]
    for examples in (train, test):
        positions = {ex.candidates.index(ex.label) for ex in examples}
        assert len(positions) > 3
    assert all(len(ex.candidates) == 11 for ex in test)
    assert all(ex.label in ex.candidates for ex in train + test)
    seen: set[int] = set()
    for task in sample_stream:
        seen |= set(task.labels)
        for ex in task.train:  # seen negatives, or (none seen) the line's last two
            assert set(ex.candidates) <= seen or len(ex.candidates) == 3


def test_candidates_do_not_depend_on_what_else_is_loaded(tmp_path):
    toy_data(tmp_path)
    full = fewrel_stream(data_dir=tmp_path, n_tasks=3, embed=hashed_bag_of_words)
    small = fewrel_stream(data_dir=tmp_path, n_tasks=3, embed=hashed_bag_of_words, train_size=2)
    by_uid = {ex.uid: ex for task in full for ex in task.train}
    for task in small:
        assert len(task.test) == len(by_uid) // 12 * len(task.labels)
        for ex in task.train:
            assert by_uid[ex.uid] == ex


def test_sizes_count_sentences_per_relation(tmp_path):
    toy_data(tmp_path, per_relation=5)
    stream = fewrel_stream(
        data_dir=tmp_path, n_tasks=3, embed=hashed_bag_of_words, train_size=2, test_size=999
    )
    for task in stream:
        per_relation = {r: sum(ex.label == r for ex in task.train) for r in task.labels}
        assert set(per_relation.values()) == {2}  # a large cluster gets more sentences
        assert len(task.test) == 5 * len(task.labels)  # at most 999 each: all 5
    assert len({len(t.labels) for t in stream}) > 1


def test_clusters_do_not_depend_on_the_run_seed(tmp_path):
    toy_data(tmp_path)
    labels = {
        seed: [
            t.labels
            for t in fewrel_stream(
                data_dir=tmp_path, n_tasks=4, seed=seed, embed=hashed_bag_of_words
            )
        ]
        for seed in (0, 1, 7)
    }
    assert labels[0] == labels[1] == labels[7]


# --- reading the files ------------------------------------------------------------------------


def test_real_layout_is_read(tmp_path):
    # as in the real files: gold listed among the candidates, trailing space and tab
    names = ["///place of birth", "///employer", "///spouse"]
    (tmp_path / RELATION_FILE).write_text("\n".join(names) + "\n\n")
    path = tmp_path / TRAIN_FILE
    path.write_text("2\t3 1 2 \the  works   there . \t\n\n3\t1 1\tshe married him\n")
    assert read_relation_names(tmp_path / RELATION_FILE) == ["place of birth", "employer", "spouse"]
    lines = read_relation_file(path, 3)
    assert [(x.gold, x.negatives, x.sentence) for x in lines] == [
        (1, (2, 0), "he works there ."),
        (2, (0,), "she married him"),
    ]
    assert [x.uid for x in lines] == ["training_data.txt:1", "training_data.txt:3"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("1\t2 3", r"training_data.txt:2: expected 3 tab-separated fields .* got 2"),
        ("1\t2\tx\ty", r"training_data.txt:2: expected 3 tab-separated fields .* got 4"),
        ("one\t2 3\tx", r"training_data.txt:2: gold id 'one' is not an integer"),
        ("1\t2 b\tx", r"training_data.txt:2: candidate id 'b' is not an integer"),
        ("4\t2 3\tx", r"training_data.txt:2: gold id 4 is not in relation_name.txt \(ids 1..3\)"),
        ("1\t2 0\tx", r"training_data.txt:2: candidate id 0 is not in relation_name.txt"),
        ("1\t \tx", r"training_data.txt:2: empty candidate list"),
        ("1\t1\tx", r"training_data.txt:2: the candidate list holds no negative"),
        ("1\t2 3\t  ", r"training_data.txt:2: empty sentence"),
    ],
)
def test_bad_lines_name_file_and_line(tmp_path, line, message):
    path = tmp_path / TRAIN_FILE
    path.write_text(f"1\t2 3\tfine\n{line}\n")
    with pytest.raises(DataFormatError, match=message):
        read_relation_file(path, 3)


def test_bad_relation_names_and_missing_files(tmp_path):
    (tmp_path / RELATION_FILE).write_text("///a\n///\n///c\n")
    with pytest.raises(DataFormatError, match=r"relation_name.txt:2: blank relation name"):
        relation_names(tmp_path)
    with pytest.raises(DataFormatError, match=r"val_data.txt: file not found"):
        read_relation_file(tmp_path / TEST_FILE, 3)
    with pytest.raises(DataFormatError, match=r"relation_name.txt: file not found"):
        relation_names(tmp_path / "nowhere")
    (tmp_path / TEST_FILE).write_text("\n")
    with pytest.raises(DataFormatError, match=r"val_data.txt: the file has no examples"):
        read_relation_file(tmp_path / TEST_FILE, 3)


def test_stream_needs_one_embedding():
    with pytest.raises(ValueError, match="exactly one of embed="):
        fewrel_stream()
    with pytest.raises(ValueError, match="exactly one of embed="):
        fewrel_stream(embed=hashed_bag_of_words, glove="glove.txt")


# --- GloVe ------------------------------------------------------------------------------------


def test_glove_names_are_mean_word_vectors(tmp_path):
    glove = tmp_path / "glove.txt"
    glove.write_text("Place 9 9\nplace 1 0\nbirth 0 1\nof 0.5 0.5\nspouse 3 3\n")
    vectors = glove_embedder(glove)(["place of birth", "spouse", "Place_Of-Birth!"])
    np.testing.assert_allclose(vectors, [[0.5, 0.5], [3, 3], [0.5, 0.5]])
    assert set(read_glove(glove, ["SPOUSE"])) == {"spouse"}
    with pytest.raises(DataFormatError, match=r"glove.txt: relation 1 'zyzzyva river' has no word"):
        glove_embedder(glove)(["spouse", "zyzzyva river"])


def test_glove_malformed_lines_name_file_and_line(tmp_path):
    glove = tmp_path / "glove.txt"
    glove.write_text("place 1 0\nbirth 0\n")
    with pytest.raises(DataFormatError, match=r"glove.txt:2: expected a word and 2 numbers"):
        read_glove(glove)
    glove.write_text("place 1 0\nbirth 0 x\n")
    with pytest.raises(
        DataFormatError, match=r"glove.txt:2: the vector of 'birth' has a non-number"
    ):
        read_glove(glove, ["birth"])
    with pytest.raises(DataFormatError, match=r"missing.txt: file not found"):
        read_glove(tmp_path / "missing.txt")


def test_stream_with_glove(tmp_path):
    names = toy_data(tmp_path)
    glove = tmp_path / "glove.txt"
    words = [w for n in names for w in n.split()]
    glove.write_text("".join(f"{w} {i % 3} {i % 5}\n" for i, w in enumerate(dict.fromkeys(words))))
    stream = fewrel_stream(data_dir=tmp_path, n_tasks=3, glove=glove)
    assert stream.kind == "relation" and len(stream) == 3


# --- the bundled sample -----------------------------------------------------------------------


def test_shipped_sample_loads(sample_stream):
    names = relation_names()
    assert len(names) == 20 and "place of birth" in names
    assert sample_stream.kind == "relation" and sample_stream.label_names == tuple(names)
    assert len(sample_stream) == 10 and all(t.labels for t in sample_stream)
    assert sorted(r for t in sample_stream for r in t.labels) == list(range(20))
    n_train = sum(len(t.train) for t in sample_stream)
    n_test = sum(len(t.test) for t in sample_stream)
    assert (n_train, n_test) == (20 * 16, 20 * 6)
    for task in sample_stream:
        assert {ex.label for ex in task.train} == set(task.labels)
        assert {ex.label for ex in task.test} == set(task.labels)


def test_non_utf8_bytes_name_file_and_line_and_a_bom_is_accepted(tmp_path):
    """Failure 6: FewRel files with a Latin-1 byte, or written with a byte-order mark."""
    toy_data(tmp_path, n_relations=4)
    names = tmp_path / RELATION_FILE
    names.write_bytes(names.read_text().encode("utf-8-sig"))
    assert read_relation_names(names)[0] == "rel0 alpha"
    train = tmp_path / TRAIN_FILE
    lines = train.read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b"sentence", b"s\xe9ntence")
    train.write_bytes(b"\n".join(lines))
    with pytest.raises(DataFormatError, match=rf"{TRAIN_FILE}:2: not UTF-8 text: byte 0xe9"):
        read_relation_file(train, 4)
    train.write_bytes("1\t2 3\tbom line\n".encode("utf-8-sig"))
    (line,) = read_relation_file(train, 4)
    assert line.gold == 0


def test_lines_without_a_negative_answer_are_skipped_as_holla_does(tmp_path, caplog):
    """Holla et al.'s read_rel_data skips lines whose candidates read noNegativeAnswer."""
    path = tmp_path / TRAIN_FILE
    path.write_text("1\t2 3\tfirst sentence\n2\tnoNegativeAnswer\tsecond\n3\t1\tthird one\n")
    with caplog.at_level("INFO", logger="lifelong.streams"):
        lines = read_relation_file(path, 4)
    assert [line.gold for line in lines] == [0, 2] and [line.line for line in lines] == [1, 3]
    assert "skipped 1 line(s) marked noNegativeAnswer" in caplog.text


def test_names_go_to_k_means_in_first_appearance_order_of_the_training_file(tmp_path):
    """Holla et al. feed K-means the relations in the order they first appear as gold."""
    names = toy_data(tmp_path, n_relations=6)
    lines = (tmp_path / TRAIN_FILE).read_text().splitlines()
    (tmp_path / TRAIN_FILE).write_text("\n".join(lines[::-1]) + "\n")  # relation 6 first
    seen = []

    def embed(batch):
        seen.extend(batch)
        return hashed_bag_of_words(batch)

    fewrel_stream(data_dir=tmp_path, n_tasks=2, embed=embed)
    assert seen == [names[i] for i in (5, 4, 3, 2, 1, 0)]
