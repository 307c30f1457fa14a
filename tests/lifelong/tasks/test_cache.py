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
    CachedKind,
    TokenCache,
    kind_identity,
    records_from_bytes,
    records_to_bytes,
    resolve_cache_dir,
)
from lifelong.tasks.settings import TaskSettings
from tests.conftest import records

SAMPLE = Path(__file__).parents[3] / "streams" / "samples" / "text_classification"


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
    kind = CachedKind(task, cache)
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
