"""OneFlow's op granularity where it differs from PyTorch's and decides what a rematerialisation policy
may evict: dropout and the LSTM cell.

Dropout: PyTorch's aten::native_dropout makes the mask and the output in one random op, so neither
can be recomputed; OneFlow makes the mask with the random op `random_mask_like` and the output with
the deterministic `dropout` op (x * mask * scale), so the output stays recomputable from x and the
mask (oneflow/core/functional/impl/nn_functor.cpp DropoutFunctor; its grad is `dropout_grad`).
`oneflow_dropout` records those three ops (coopsim::random_mask_like, coopsim::dropout,
coopsim::dropout_grad); `oneflow_granularity()` makes torch.nn.functional.dropout use it.

LSTM: OneFlow's fused LSTM cell as two custom ops, so that a recording sees an LSTM step at OneFlow's
granularity: two matmuls (input and hidden projections) and one fused cell, whose backward is one
fused grad op (Oneflow-Inc/oneflow: the `fused_lstm_cell` / `fused_lstm_cell_grad` user ops,
oneflow/user/kernels/fused_rnn_cell_kernel.cu; inputs input_gates, hidden_gates, cx and the two
biases; outputs hy, cy and a workspace of the activated gates, which the grad op reads instead of the
gates). PyTorch's own LSTM on a CPU (what a fake recording dispatches) runs about twelve ATen ops per
step instead, which changes what a rematerialisation policy can evict and recompute.

Needs torch >= 2.4 (torch.library.custom_op); `available()` says whether it is there. The ops compute
the real LSTM cell (PyTorch's gate order i, f, g, o), so a real recording trains the same model.
"""
import contextlib
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def available():
    return hasattr(torch, "library") and hasattr(torch.library, "custom_op")


if available():
    @torch.library.custom_op("coopsim::fused_lstm_cell", mutates_args=())
    def fused_lstm_cell(input_gates: Tensor, hidden_gates: Tensor, cx: Tensor, input_bias: Tensor,
                        hidden_bias: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        gates = input_gates + hidden_gates + input_bias + hidden_bias
        i, f, g, o = gates.chunk(4, 1)
        i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
        cy = f * cx + i * g
        return o * cy.tanh(), cy, torch.cat([i, f, g, o], 1)

    @fused_lstm_cell.register_fake
    def _fused_lstm_cell_fake(input_gates, hidden_gates, cx, input_bias, hidden_bias):
        return torch.empty_like(cx), torch.empty_like(cx), torch.empty_like(input_gates)

    @torch.library.custom_op("coopsim::fused_lstm_cell_grad", mutates_args=())
    def fused_lstm_cell_grad(grad_hy: Tensor, grad_cy: Optional[Tensor], cx: Tensor, cy: Tensor,
                             workspace: Tensor) -> tuple[Tensor, Tensor]:
        i, f, g, o = workspace.chunk(4, 1)
        tanh_cy = cy.tanh()
        dcy = grad_hy * o * (1 - tanh_cy * tanh_cy)
        if grad_cy is not None:
            dcy = dcy + grad_cy
        grads = [dcy * g * i * (1 - i), dcy * cx * f * (1 - f), dcy * i * (1 - g * g), grad_hy * tanh_cy * o * (1 - o)]
        return torch.cat(grads, 1), dcy * f

    @fused_lstm_cell_grad.register_fake
    def _fused_lstm_cell_grad_fake(grad_hy, grad_cy, cx, cy, workspace):
        return torch.empty_like(workspace), torch.empty_like(cx)

    def _setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[2], output[1], output[2])

    def _backward(ctx, grad_hy, grad_cy, grad_workspace):
        cx, cy, workspace = ctx.saved_tensors
        grad_gates, grad_cx = fused_lstm_cell_grad(grad_hy, grad_cy, cx, cy, workspace)
        grad_bias = grad_gates.sum(0)
        return grad_gates, grad_gates, grad_cx, grad_bias, grad_bias

    fused_lstm_cell.register_autograd(_backward, setup_context=_setup_context)

    @torch.library.custom_op("coopsim::random_mask_like", mutates_args=())
    def random_mask_like(x: Tensor, p: float) -> Tensor:
        return torch.empty_like(x, dtype=torch.bool).bernoulli_(1.0 - p)

    @random_mask_like.register_fake
    def _random_mask_like_fake(x, p):
        return torch.empty_like(x, dtype=torch.bool)

    @torch.library.custom_op("coopsim::dropout", mutates_args=())
    def dropout_op(x: Tensor, mask: Tensor, scale: float) -> Tensor:
        return x * mask * scale

    @dropout_op.register_fake
    def _dropout_fake(x, mask, scale):
        return torch.empty_like(x)

    @torch.library.custom_op("coopsim::dropout_grad", mutates_args=())
    def dropout_grad(dy: Tensor, mask: Tensor, scale: float) -> Tensor:
        return dy * mask * scale

    @dropout_grad.register_fake
    def _dropout_grad_fake(dy, mask, scale):
        return torch.empty_like(dy)

    def _dropout_setup(ctx, inputs, output):
        ctx.save_for_backward(inputs[1])
        ctx.scale = inputs[2]

    def _dropout_backward(ctx, dy):
        (mask,) = ctx.saved_tensors
        return dropout_grad(dy, mask, ctx.scale), None, None

    dropout_op.register_autograd(_dropout_backward, setup_context=_dropout_setup)


def oneflow_dropout(x, p=0.5, training=True, inplace=False):
    """F.dropout as OneFlow runs it: random_mask_like, then the deterministic dropout op."""
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    return dropout_op(x, random_mask_like(x, p), 1.0 / (1.0 - p))


@contextlib.contextmanager
def oneflow_granularity():
    """Within: torch.nn.functional.dropout (and so nn.Dropout) runs as OneFlow's two ops."""
    if not available():
        raise RuntimeError(f"OneFlow's op granularity needs torch >= 2.4 (torch.library.custom_op); this is "
                           f"torch {torch.__version__}")
    original = F.dropout
    F.dropout = oneflow_dropout
    try:
        yield
    finally:
        F.dropout = original


class FusedBiLSTM(nn.Module):
    """BiLSTM (models.BiLSTM's shapes: input 100, 256 units per direction, a linear classifier on the
    last step) with each step run as OneFlow runs it: x_t @ W_ih^T, h @ W_hh^T, one fused cell."""

    def __init__(self, features=100, hidden=256, classes=10):
        super().__init__()
        if not available():
            raise RuntimeError(f"the fused LSTM cell needs torch >= 2.4 (torch.library.custom_op); this is "
                               f"torch {torch.__version__}")
        self.hidden = hidden
        for d in ("", "_reverse"):
            self.register_parameter(f"weight_ih{d}", nn.Parameter(torch.empty(4 * hidden, features)))
            self.register_parameter(f"weight_hh{d}", nn.Parameter(torch.empty(4 * hidden, hidden)))
            self.register_parameter(f"bias_ih{d}", nn.Parameter(torch.empty(4 * hidden)))
            self.register_parameter(f"bias_hh{d}", nn.Parameter(torch.empty(4 * hidden)))
        bound = hidden ** -0.5  # nn.LSTM's initialisation
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)
        self.fc = nn.Linear(2 * hidden, classes)

    def _direction(self, x, suffix, reverse):
        w_ih, w_hh = getattr(self, f"weight_ih{suffix}"), getattr(self, f"weight_hh{suffix}")
        b_ih, b_hh = getattr(self, f"bias_ih{suffix}"), getattr(self, f"bias_hh{suffix}")
        h = x.new_zeros(x.shape[1], self.hidden)
        c = x.new_zeros(x.shape[1], self.hidden)
        outs = [None] * x.shape[0]
        for t in (reversed(range(x.shape[0])) if reverse else range(x.shape[0])):
            h, c, _ = fused_lstm_cell(torch.mm(x[t], w_ih.t()), torch.mm(h, w_hh.t()), c, b_ih, b_hh)
            outs[t] = h
        return torch.stack(outs)

    def forward(self, x):
        out = torch.cat([self._direction(x, "", False), self._direction(x, "_reverse", True)], 2)
        return self.fc(out[-1])
