import torch

from lifelong.memory import KeyEncoder


def test_keys_are_the_cls_vector_or_a_chosen_token_and_the_copy_is_frozen(context, task):
    from lifelong.encoders import load_encoder
    from lifelong.streams import Example

    batch = task([Example("who wrote it ?", 0, "Ada wrote it .")])
    encoder = load_encoder("tiny", pooling="pooler")  # its pooled vector is not the [CLS] state
    with torch.no_grad():
        encoded = encoder(batch.input_ids, batch.attention_mask)
    keys = KeyEncoder(encoder)
    cls_keys = keys(batch)
    question_keys = KeyEncoder(encoder, position=1)(batch)  # QA: the first question token
    # the raw [CLS] state (EM-in-LLL's key), not the pooler output the head reads
    assert torch.allclose(torch.from_numpy(cls_keys), encoded.hidden[:, 0], atol=1e-6)
    assert not torch.allclose(encoded.pooled, encoded.hidden[:, 0], atol=1e-3)
    assert torch.allclose(torch.from_numpy(question_keys), encoded.hidden[:, 1], atol=1e-6)
    with torch.no_grad():
        next(encoder.parameters()).add_(1.0)  # training the encoder leaves the keys alone
    assert (keys(batch) == cls_keys).all()
    assert all(not p.requires_grad for p in keys.encoder.parameters())


def _texts(task):
    from lifelong.streams import Example

    texts = ["a short one", "a much longer text with many more word pieces in it than that", "mid"]
    return task([Example(t, i % 2) for i, t in enumerate(texts)])  # padded rows


def test_packed_keys_equal_the_padded_forward_pass(task):
    from lifelong.encoders import load_encoder

    batch = _texts(task)
    assert not batch.attention_mask.bool().all()  # padding to skip
    encoder = load_encoder("tiny", pooling="cls")
    with torch.no_grad():
        hidden = encoder(batch.input_ids, batch.attention_mask).hidden  # the padded pass
    for position in (0, 1):  # [CLS] (last layer at [CLS] alone), QA's first question token
        keys = KeyEncoder(encoder, position=position)
        assert keys.encoder.packs
        packed = torch.from_numpy(keys(batch))
        torch.testing.assert_close(packed, hidden[:, position], rtol=0, atol=1e-5)


def test_an_encoder_that_cannot_pack_is_keyed_by_its_forward_pass(task, monkeypatch):
    from lifelong.encoders import load_encoder
    from lifelong.encoders.hf import HFEncoder

    batch = _texts(task)
    encoder = load_encoder("tiny", pooling="cls")
    keys = KeyEncoder(encoder)
    monkeypatch.setattr(HFEncoder, "packs", property(lambda self: False))  # as a module's
    with torch.no_grad():
        hidden = keys.encoder(batch.input_ids, batch.attention_mask).hidden
    assert (torch.from_numpy(keys(batch)) == hidden[:, 0]).all()


def test_query_keys_key_each_batch_once_and_return_what_a_new_pass_gives(task):
    from lifelong.encoders import load_encoder
    from lifelong.memory.keys import QueryKeys
    from lifelong.streams import Example

    keys = KeyEncoder(load_encoder("tiny", pooling="cls"))
    passes = []
    keys.encoder.register_forward_pre_hook(lambda *_: passes.append(1))
    keys.encoder.model.embeddings.register_forward_pre_hook(lambda *_: passes.append(1))
    queries = QueryKeys(keys)
    first, second = _texts(task), task([Example("another batch", 1)])
    a = queries(first)
    counted = len(passes)
    assert counted > 0
    b = queries(first)  # the same batch again (the next evaluation)
    assert len(passes) == counted and queries.hits == 1
    assert (a == b).all() and (b == keys(first)).all()  # what a new pass gives, bit for bit
    b[:] = 0  # a copy: the cache is not changed through it
    assert (queries(first) == a).all()
    assert queries(second).shape == (1, keys.dim) and queries.hits == 2
    small = QueryKeys(keys, limit_bytes=a.nbytes - 1)  # over the limit: keyed each time
    small(first)
    small(first)
    assert small.hits == 0 and small.held == 0


def test_keys_are_packed_on_the_cpu_only():
    from lifelong.memory.keys import packs_keys

    assert packs_keys(torch.device("cpu")) and not packs_keys(torch.device("cuda", 0))
