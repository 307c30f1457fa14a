"""ERNIE-Doc: layer n caches its own output (not its input), and documents are read twice."""

import pytest
import torch

from lifelong.encoders.layers import ModuleConfig
from lifelong.encoders.memory_modules import DOCUMENT_PASSES, build_memory_module
from lifelong.encoders.segments import DocumentEncoder
from lifelong.encoders.transformer_xl import TransformerXL


def module(recurrence: str, causal: bool = True) -> TransformerXL:
    torch.manual_seed(0)
    config = ModuleConfig(vocab_size=30, d_model=16, heads=2, layers=3, ffn=32, causal=causal)
    return TransformerXL(config, memory_length=5, recurrence=recurrence).eval()


def layer_outputs(model: TransformerXL, ids: torch.Tensor) -> list[torch.Tensor]:
    """Each layer's output on a first segment, collected by hooks."""
    outputs: list[torch.Tensor] = []
    hooks = [
        layer.register_forward_hook(lambda m, i, o: outputs.append(o)) for layer in model.layers
    ]
    model(ids, torch.ones_like(ids))
    for hook in hooks:
        hook.remove()
    return outputs


def test_enhanced_recurrence_caches_layer_ns_own_output():
    model = module("same-layer")
    ids = torch.randint(0, 30, (2, 5))
    memory = model(ids, torch.ones_like(ids)).memory
    outputs = layer_outputs(model, ids)
    for n in range(3):  # the cache layer n reads next is layer n's output h^n, not h^(n-1)
        torch.testing.assert_close(memory["states"][n], outputs[n])


def test_transformer_xl_caches_layer_ns_input():
    model = module("previous-layer")
    ids = torch.randint(0, 30, (2, 5))
    memory = model(ids, torch.ones_like(ids)).memory
    outputs = layer_outputs(model, ids)
    torch.testing.assert_close(memory["states"][0], model.embed(ids))
    for n in range(1, 3):
        torch.testing.assert_close(memory["states"][n], outputs[n - 1])


def test_same_layer_recurrence_reaches_further_back_than_transformer_xl():
    """With one-segment caches, Transformer-XL's top layer sees at most `layers` segments back;
    the same-layer cache keeps carrying the first segment's content."""
    ids = [torch.randint(0, 30, (1, 5)) for _ in range(6)]
    changed = [(ids[0] + 1) % 30, *ids[1:]]
    for recurrence, reaches in (("previous-layer", False), ("same-layer", True)):
        model = module(recurrence)
        last = []
        for document in (ids, changed):
            memory = None
            for segment in document:
                out = model(segment, torch.ones_like(segment), memory=memory)
                memory = out.memory
            last.append(out.hidden)
        assert (not torch.allclose(last[0], last[1])) is reaches, recurrence


def test_retrospective_feed_reads_the_document_twice_from_the_first_reads_memory():
    model = module("same-layer", causal=False)
    ids = torch.randint(0, 30, (2, 10))
    mask = torch.ones_like(ids)
    twice = DocumentEncoder(model, 5, passes=2)(ids, mask)
    first = DocumentEncoder(model, 5)(ids, mask)
    second = DocumentEncoder(model, 5)(ids, mask, memory=first.memory)
    torch.testing.assert_close(twice.hidden, second.hidden)
    torch.testing.assert_close(twice.pooled, second.pooled)
    assert not torch.allclose(twice.hidden[:, :5], first.hidden[:, :5])  # segment 1 saw the rest
    assert DOCUMENT_PASSES["ernie-doc"] == 2


def test_built_by_name_and_bad_options_refused():
    config = ModuleConfig(vocab_size=30, d_model=16, heads=2, layers=1, ffn=32, causal=True)
    assert build_memory_module("ernie-doc", config, 8).recurrence == "same-layer"
    with pytest.raises(ValueError, match="recurrence"):
        TransformerXL(config, 4, recurrence="next-layer")
    with pytest.raises(ValueError, match="passes"):
        DocumentEncoder(build_memory_module("transformer", config, 8), 8, passes=0)


def test_a_run_reads_ernie_doc_twice_unless_told_once():
    """``document_passes`` (``--document-passes``) reaches the encoder a run builds: the design's
    two passes by default, one for the ablation without the retrospective feed."""
    from lifelong.encoders.names import EncoderOptions
    from lifelong.experiment.runs import run_encoder

    assert run_encoder(EncoderOptions("ernie-doc", segment_length=16)).passes == 2
    assert run_encoder(EncoderOptions("ernie-doc", 16, document_passes=1)).passes == 1
    assert run_encoder(EncoderOptions("transformer-xl", 16)).passes == 1
    assert run_encoder(EncoderOptions("transformer-xl", 16, document_passes=2)).passes == 2
