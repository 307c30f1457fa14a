"""Token ids are computed once per split: in memory for a run, on disk across runs."""

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import PreTrainedTokenizerBase

from lifelong.experiment.config import DEMO_CONFIG, load_yaml
from lifelong.experiment.runs import run
from lifelong.tasks.cache import (
    TokenCache,
    kind_identity,
    records_from_bytes,
    records_to_bytes,
    resolve_cache_dir,
)
from lifelong.tasks.prepared import prepare
from lifelong.tasks.settings import TaskSettings
from tests.conftest import records

SAMPLE = Path(__file__).parents[3] / "lifelong" / "streams" / "samples" / "text_classification"


def test_records_round_trip_through_their_file_bytes():
    original = records([np.array([5, 6, 7]), np.array([], dtype=np.int32)], [1, 3])
    again = records_from_bytes(records_to_bytes(original), "x.npz")
    assert again.names == original.names
    for name in original.names:
        assert [r.tolist() for r in again[name]] == [r.tolist() for r in original[name]]
    with pytest.raises(ValueError, match="bad.npz: unreadable"):
        records_from_bytes(b"junk", "bad.npz")


def test_cached_batches_equal_the_kind_s_own_and_unprepared_examples_still_encode(
    task, stream, tokenizer
):
    cache = TokenCache(task, kind_identity(task, tokenizer, TaskSettings()), None)
    cache.prepare_stream(stream)
    kind = prepare(task, cache=cache)
    chunk = stream.tasks[1].train[2:7]
    cached, plain = kind(chunk), task(chunk)
    assert torch.equal(cached.input_ids, plain.input_ids)
    assert torch.equal(cached.labels, plain.labels)
    assert cache.misses == 4 and cache.hits == 0  # 2 tasks x (train, test), memory only
    other = type(chunk[0])("a sentence no split holds", 1)
    assert cache.lookup([other]) is None
    assert torch.equal(kind([other]).input_ids, task([other]).input_ids)


def test_the_cache_directory_follows_the_config_key(tmp_path, monkeypatch):
    monkeypatch.setenv("LIFELONG_CACHE_DIR", str(tmp_path))
    assert resolve_cache_dir("auto") == tmp_path / "tokens"
    assert resolve_cache_dir("off") is None
    assert resolve_cache_dir(str(tmp_path / "mine")) == tmp_path / "mine"


@pytest.fixture
def tokenizer_calls(monkeypatch):
    calls = []
    original = PreTrainedTokenizerBase.__call__

    def counting(self, *args, **kwargs):
        calls.append(args[0] if args else kwargs.get("text"))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(PreTrainedTokenizerBase, "__call__", counting)
    return calls


def small_run(tmp_path, data_dir, output):
    config = load_yaml(DEMO_CONFIG).replace(
        strategy="seq",
        encoder="tiny",
        device="cpu",
        data_dir=str(data_dir),
        tasks=["ag_news", "yelp"],
        train_size=24,
        test_size=8,
        batch_size=8,
        progress=False,
        output_dir=str(tmp_path / output),
        token_cache=str(tmp_path / "tokens"),
    )
    return run(config)


def test_a_second_run_on_the_same_data_does_not_tokenise_and_an_edited_file_does(
    tmp_path, tokenizer_calls
):
    data = tmp_path / "data"
    shutil.copytree(SAMPLE, data)
    first = small_run(tmp_path, data, "first")
    assert len(tokenizer_calls) == 4  # once per split: 2 tasks x (train, test)
    files = sorted((tmp_path / "tokens").glob("*.npz"))
    assert len(files) == 4

    tokenizer_calls.clear()
    second = small_run(tmp_path, data, "second")
    assert tokenizer_calls == []  # every batch, every evaluation: from the cache
    np.testing.assert_array_equal(second.result.accuracy, first.result.accuracy)

    test_csv = data / "ag_news_csv" / "test.csv"
    test_csv.write_text(test_csv.read_text().replace("a", "e"))  # edit the test file
    tokenizer_calls.clear()
    small_run(tmp_path, data, "third")
    assert len(tokenizer_calls) == 1  # the edited split only
    assert len(list((tmp_path / "tokens").glob("*.npz"))) == 5


def test_a_corrupt_cache_file_is_rebuilt_with_a_warning(tmp_path, tokenizer_calls, caplog):
    """Failure 7: a corrupt file blocked every later run on that data until deleted by hand."""
    data = tmp_path / "data"
    shutil.copytree(SAMPLE, data)
    first = small_run(tmp_path, data, "first")
    broken = sorted((tmp_path / "tokens").glob("*.npz"))[0]
    broken.write_bytes(broken.read_bytes()[:100])  # truncated
    tokenizer_calls.clear()
    again = small_run(tmp_path, data, "second")
    assert len(tokenizer_calls) == 1  # the broken split only
    assert "unreadable token cache file" in caplog.text and broken.name in caplog.text
    np.testing.assert_array_equal(again.result.accuracy, first.result.accuracy)
    records_from_bytes(broken.read_bytes(), str(broken))  # rewritten whole


def test_an_unwritable_cache_leaves_the_ids_in_memory_with_a_warning(tmp_path, caplog):
    """Failure 7: a read-only token cache stopped the run with a traceback."""
    in_the_way = tmp_path / "a-file"
    in_the_way.write_text("not a directory")
    config = load_yaml(DEMO_CONFIG).replace(
        strategy="seq",
        encoder="tiny",
        tasks=["ag_news"],
        train_size=8,
        test_size=4,
        progress=False,
        output_dir=str(tmp_path / "runs"),
        token_cache=str(in_the_way / "tokens"),
    )
    outcome = run(config)
    assert outcome.metrics["average_accuracy"] is not None
    assert "cannot write" in caplog.text and "keeps its token ids in memory" in caplog.text


def test_a_read_only_cache_directory_falls_back_to_memory(tmp_path, task, stream, monkeypatch):
    from lifelong.tasks import cache as cache_module

    def refuse(path, data):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(cache_module, "atomic_write_bytes", refuse)
    cache = TokenCache(task, "id", tmp_path / "tokens")
    cache.prepare_stream(stream)
    assert cache.directory is None and cache.misses == 4
