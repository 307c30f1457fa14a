import torch

from lifelong.memory import KeyEncoder


def test_keys_are_the_cls_vector_or_a_chosen_token_and_the_copy_is_frozen(context, task):
    from streams import Example

    batch = task([Example("who wrote it ?", 0, "Ada wrote it .")])
    encoder = context.model.encoder
    with torch.no_grad():
        encoded = encoder(batch.input_ids, batch.attention_mask)
    keys = KeyEncoder(encoder)
    cls_keys = keys(batch)
    question_keys = KeyEncoder(encoder, position=1)(batch)  # QA: the first question token
    assert torch.allclose(torch.from_numpy(cls_keys), encoded.pooled, atol=1e-6)
    assert torch.allclose(torch.from_numpy(question_keys), encoded.hidden[:, 1], atol=1e-6)
    with torch.no_grad():
        next(encoder.parameters()).add_(1.0)  # training the encoder leaves the keys alone
    assert (keys(batch) == cls_keys).all()
    assert all(not p.requires_grad for p in keys.encoder.parameters())
