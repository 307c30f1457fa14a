"""The inner loop of local adaptation and meta-learning: L SGD steps on a parameter dict.

Written once as a pure function over a dict of tensors, as learn2learn's ``maml.py`` writes its
adaptation step, so that MbPA, MbPA++, Meta-MbPA, OML-ER, ANML-ER and MAML-ER share it and it
runs under ``torch.func.vmap``. MbPA++ (de Masson d'Autume et al., 2019, §3.3) adapts the
weights W to a test input's K neighbours:

    W_x = argmin_W~  λ ||W~ − W||²  −  Σ_k α_k log p(y_k | x_k; W~),   α_k = 1/K,

approximated by L gradient steps from W; the meta-learners take the same steps with λ = 0
(their inner loops), differentiating through them (second order) or not (first order).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch.func import grad

Params = dict[str, torch.Tensor]
"""Named tensors: the adapted subset of a model's weights (or low-rank deltas)."""


def local_adapt(
    loss_fn: Callable[[Params], torch.Tensor],
    params: Params,
    *,
    steps: int,
    lr: float,
    l2: float,
    momentum: float = 0.0,
    anchor: Params | None = None,
    first_order: bool = False,
    gradient: Callable[[Params], Params] | None = None,
    loss_scale: float = 1.0,
    pull: Callable[[Params], Params] | None = None,
) -> Params:
    """Take ``steps`` SGD steps on ``loss_fn(W~) + l2 * ||W~ − anchor||²`` from ``params``.

    A pure function: it returns new tensors and modifies nothing. Gradients come from
    ``torch.func.grad``, so it runs inside ``vmap`` and, when ``params`` require grad, the
    result stays differentiable with respect to them: through the inner gradients too
    (second-order meta-learning), or, with ``first_order``, treating them as constants
    (FOMAML: d W_x / d W = identity).

    With ``momentum`` μ > 0 the steps are heavy-ball SGD exactly as ``torch.optim.SGD(lr,
    momentum=μ)`` takes them (no dampening, no Nesterov): b_1 = g_1, b_t = μ b_(t−1) + g_t,
    W~ ← W~ − lr · b_t, where g_t is the gradient of the whole objective, L2 term included.
    That is EM-in-LLL's local adaptation (Daikon-Sun/EM-in-LLL ``test.py``: ``optim.SGD(...,
    momentum=0.9)`` on ``CE + λ Σ (W − W~)²``). The momentum buffer is a new tensor each step,
    so the function stays pure and ``vmap``-safe. μ = 0 (the default, as in the one-step inner
    loops of Meta-MbPA, OML-ER and ANML-ER) is plain SGD.

    Args:
        loss_fn: Maps a parameter dict to the (mean, i.e. α_k = 1/K) loss on the neighbours.
        params: The starting weights W (only the adapted subset).
        steps: L, the number of gradient steps.
        lr: Step size.
        l2: λ, the weight of the pull back to the anchor.
        momentum: μ, the heavy-ball momentum (0: plain SGD).
        anchor: Weights of the L2 pull (default: ``params``, detached).
        first_order: Detach the inner gradients from the graph (first-order meta-gradient).
        gradient: Computes d loss / d W~ instead of ``torch.func.grad(loss_fn)`` (e.g.
            `summed_gradient` over chunks of a large neighbour pool); ``loss_fn`` is then unused
            and ``gradient`` does its own loss scaling.
        loss_scale: Differentiate ``loss_scale · loss`` and divide the gradient by it: the
            static scale of fp16 inner loops (`lifelong.runtime.Runtime.inner_loss_scale`);
            1 (no scaling) in fp32 and bf16.
        pull: The gradient of the whole pull term (λ included) at W~, for a parametrisation
            whose pull is not λ||W~ − anchor||² (low-rank deltas:
            `lifelong.mechanisms.lowrank.lora_pull`);
            ``l2`` and ``anchor`` are then unused.

    Returns:
        The adapted weights W_x, same keys as ``params``.

    """
    anchor = {k: v.detach() for k, v in (anchor or params).items()}
    step = gradient or _scaled_grad(loss_fn, loss_scale)
    buffer: Params | None = None  # the momentum buffer b_t (torch.optim.SGD's momentum_buffer)
    for _ in range(steps):
        grads = step(params)
        if first_order:
            grads = {k: g.detach() for k, g in grads.items()}
        # d/dW~ of λ||W~ − W||² is 2λ(W~ − W): added in closed form, not through autograd
        toward = pull(params) if pull else {k: 2 * l2 * (v - anchor[k]) for k, v in params.items()}
        direction = {k: grads[k] + toward[k] for k in params}
        if momentum:
            if buffer is not None:  # the first step's buffer is the gradient itself
                direction = {k: momentum * buffer[k] + d for k, d in direction.items()}
            buffer = direction
        params = {k: v - lr * direction[k] for k, v in params.items()}
    return params


def _scaled_grad(
    loss_fn: Callable[[Params], torch.Tensor], loss_scale: float
) -> Callable[[Params], Params]:
    """``torch.func.grad(loss_fn)``, computed on ``loss_scale · loss`` and divided back."""
    if loss_scale == 1.0:
        return grad(loss_fn)
    scaled = grad(lambda p: loss_fn(p) * loss_scale)
    return lambda p: {k: g / loss_scale for k, g in scaled(p).items()}


def summed_gradient(
    losses: Sequence[Callable[[Params], torch.Tensor]],
    weights: Sequence[float],
    loss_scale: float = 1.0,
) -> Callable[[Params], Params]:
    """The gradient of Σ_i w_i · loss_i, one loss (one chunk of examples) at a time.

    Holds only one chunk's graph in memory, so `local_adapt` can take full-batch steps on a
    neighbour pool of any size. ``loss_scale`` as in `local_adapt`.
    """

    def gradient(params: Params) -> Params:
        total = {k: torch.zeros_like(v) for k, v in params.items()}
        for loss, weight in zip(losses, weights, strict=True):
            for k, g in _scaled_grad(loss, loss_scale)(params).items():
                total[k] = total[k] + weight * g
        return total

    return gradient
