"""Optimizers for recording.

torch.optim.AdamW keeps its step count in a tensor and reads it with .item() (1.13 and 2.x, unless
capturable, which needs real CUDA tensors). FakeTensors have no values, so .item() fails under --fake.
StepCountAdamW runs the same update as torch.optim.AdamW's single-tensor path (decoupled weight decay,
Loshchilov & Hutter 2019; the op sequence of torch 1.13's _single_tensor_adamw) with the step count as
a Python int, so fake and real recordings make the same device ops: two states per parameter allocated
on the first step (exp_avg, exp_avg_sq), sqrt/div temporaries each step, in-place updates.
"""
import math

import torch


class StepCountAdamW(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] += 1
                step, exp_avg, exp_avg_sq, grad = state["step"], state["exp_avg"], state["exp_avg_sq"], p.grad
                p.mul_(1 - lr * wd)
                exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                bias_correction1 = 1 - beta1 ** step
                bias_correction2 = 1 - beta2 ** step
                denom = (exp_avg_sq.sqrt() / math.sqrt(bias_correction2)).add_(eps)
                p.addcdiv_(exp_avg, denom, value=-lr / bias_correction1)
        return None


def make_optimizer(kind, params, fake):
    """'sgd': SGD, momentum 0.9, weight decay 1e-4; 'adamw': AdamW, weight decay 0.01."""
    if kind == "sgd":
        return torch.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=1e-4)
    if kind == "adamw":
        return StepCountAdamW(params) if fake else torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01)
    raise ValueError(f"unknown optimizer {kind!r}")
