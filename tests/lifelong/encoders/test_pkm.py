"""Product-key memory: the two-stage top-k is the exhaustive top-k over all |C|² product keys."""

import pytest
import torch

from lifelong.encoders.layers import ModuleConfig
from lifelong.encoders.pkm import PKMTransformer, ProductKeyMemory, sparse_parameters


def exhaustive(memory: ProductKeyMemory, queries: torch.Tensor):
    """Score every product key (c_i, c'_j) = concatenation, then top-k: (n, H, k) each."""
    half = memory.key_dim // 2
    c, c2 = memory.keys[:, 0], memory.keys[:, 1]  # (H, |C|, d/2)
    full = torch.cat(  # (H, |C|², d): key i * |C| + j is (c_i, c'_j)
        [c[:, :, None].expand(-1, -1, memory.sub_keys, -1),
         c2[:, None].expand(-1, memory.sub_keys, -1, -1)], dim=-1,
    ).flatten(1, 2)  # fmt: skip
    assert full.shape[-1] == 2 * half
    scores = torch.einsum("nhd,hkd->nhk", queries, full)
    return scores.topk(memory.k, dim=-1)


@pytest.mark.parametrize("sub_keys, k", [(6, 3), (10, 10), (16, 5)])
def test_product_key_top_k_equals_the_exhaustive_top_k(sub_keys, k):
    torch.manual_seed(sub_keys)
    memory = ProductKeyMemory(12, sub_keys=sub_keys, k=k, heads=3, key_dim=8)
    queries = torch.randn(20, 3, 8, dtype=torch.float64)
    memory.keys.data = memory.keys.data.double()
    scores, ids = memory.search(queries)
    best, best_ids = exhaustive(memory, queries)
    torch.testing.assert_close(scores, best)
    assert torch.equal(ids.sort(-1).values, best_ids.sort(-1).values)


def test_output_is_the_softmax_weighted_sum_of_the_selected_values_over_heads():
    torch.manual_seed(0)
    memory = ProductKeyMemory(8, sub_keys=5, k=2, heads=2, key_dim=4).eval()
    x = torch.randn(3, 8)
    scores, ids = memory.search(memory.queries(x))
    weights = torch.softmax(scores, -1)  # (n, H, k)
    expected = (weights[..., None] * memory.values.weight[ids]).sum((1, 2))
    torch.testing.assert_close(memory(x), expected)


def test_sparse_values_get_sparse_gradients_on_the_rows_read():
    torch.manual_seed(0)
    memory = ProductKeyMemory(8, sub_keys=8, k=2, heads=2, key_dim=4, sparse=True)
    memory(torch.randn(5, 8)).sum().backward()
    grad = memory.values.weight.grad
    assert grad.is_sparse and grad.coalesce().indices().shape[1] <= 5 * 2 * 2
    model = PKMTransformer(ModuleConfig(vocab_size=30, d_model=8, heads=2, layers=2, ffn=16),
                           sub_keys=4, k=2, heads=2, key_dim=4, sparse=True)  # fmt: skip
    assert sparse_parameters(model) == [next(model.memories()).values.weight]
    optimiser = torch.optim.SparseAdam(sparse_parameters(model), lr=1e-3)  # the paper's split
    out = model(torch.randint(0, 30, (2, 5)), torch.ones(2, 5))
    out.hidden.sum().backward()
    optimiser.step()


def test_memory_replaces_the_ffn_of_the_chosen_layers_and_ignores_padding():
    torch.manual_seed(0)
    config = ModuleConfig(vocab_size=30, d_model=8, heads=2, layers=3, ffn=16)
    model = PKMTransformer(config, memory_layers=[0, 2], sub_keys=4, k=2, heads=1, key_dim=4)
    assert [layer.memory is not None for layer in model.layers] == [True, False, True]
    assert [layer.ffn is None for layer in model.layers] == [True, False, True]
    model.eval()
    ids = torch.randint(0, 30, (1, 4))
    alone = model(ids, torch.ones(1, 4)).hidden
    padded = model(torch.cat([ids, ids[:, :2]], 1), torch.tensor([[1, 1, 1, 1, 0, 0]])).hidden
    torch.testing.assert_close(padded[:, :4], alone)
    with pytest.raises(ValueError, match="memory_layers must be in 0..2"):
        PKMTransformer(config, memory_layers=[3])
