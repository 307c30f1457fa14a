"""Each stream family owns its spec: its keys, its checks, its builder, its order's name."""

import dataclasses

import pytest

from lifelong.experiment.config import ConfigError, RunConfig, from_dict
from lifelong.experiment.rundir import order_label
from lifelong.streams import STREAMS, FewRelSpec, QASpec, TextSpec, UnknownNameError
from lifelong.streams.registry import spec_from_mapping, stream_keys, stream_spec


def test_every_family_is_registered_by_its_own_name():
    assert STREAMS == {"text": TextSpec, "qa": QASpec, "fewrel": FewRelSpec}
    with pytest.raises(UnknownNameError, match="expected one of text, qa, fewrel"):
        stream_spec("squad")


def test_a_spec_holds_only_the_keys_its_stream_reads():
    assert {f.name for f in dataclasses.fields(FewRelSpec)} >= {"fewrel_tasks", "cluster_order"}
    assert "tasks" not in {f.name for f in dataclasses.fields(FewRelSpec)}
    assert "preprocess" not in {f.name for f in dataclasses.fields(QASpec)}
    assert stream_keys()["preprocess"] == ("text",)
    with pytest.raises(TypeError):
        stream_spec("qa", preprocess="holla")


@pytest.mark.parametrize(
    ("keys", "key", "readers"),
    [
        ({"stream": "fewrel", "tasks": ["ag_news"]}, "tasks", "text and qa"),
        ({"stream": "qa", "preprocess": "holla"}, "preprocess", "text"),
        ({"stream": "text", "cluster_order": 2}, "cluster_order", "fewrel"),
    ],
)
def test_a_key_only_another_stream_reads_is_refused_by_name(keys, key, readers):
    """It used to be ignored silently (a FewRel run given tasks trained on the clusters)."""
    with pytest.raises(ConfigError, match=f"key '{key}': read by the {readers} stream"):
        from_dict(keys)


def test_the_order_key_and_labels_come_from_the_stream():
    text, fewrel = RunConfig(), from_dict(dict(stream="fewrel", cluster_order=3))
    assert (text.order_key, text.order_label) == ("order", "orderi")
    assert (fewrel.order_key, fewrel.order_label) == ("cluster_order", "clusters10-o3")
    custom = from_dict(dict(tasks=("yelp", "ag_news")))
    assert custom.order_label == "yelp-ag_news"
    assert order_label(custom.to_dict()) == "custom:yelp,ag_news"
    assert order_label(fewrel.to_dict()) == "clusters-3"
    assert order_label(from_dict(dict(order="iii")).to_dict()) == "iii"


def test_a_saved_config_gives_its_streams_spec_ignoring_other_streams_keys():
    saved = from_dict(dict(stream="qa", order="ii", doc_stride=32)).to_dict()
    saved |= {"cluster_order": 0, "fewrel_tasks": 10}  # older runs kept every stream's keys
    assert spec_from_mapping(saved) == QASpec(order="ii")
