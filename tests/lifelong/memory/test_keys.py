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
