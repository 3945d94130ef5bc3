"""Optimizers for recording.

torch.optim.AdamW keeps its step count in a tensor and reads it with .item() (1.13 and 2.x, unless
capturable, which needs real CUDA tensors). FakeTensors have no values, so .item() fails under --fake.
StepCountAdamW runs the same update as torch.optim.AdamW's single-tensor path (decoupled weight decay,
Loshchilov & Hutter 2019; the op sequence of torch 1.13's _single_tensor_adamw) with the step count as
a Python int, so fake and real recordings make the same device ops: two states per parameter allocated
on the first step (exp_avg, exp_avg_sq), sqrt/div temporaries each step, in-place updates.
StepCountAdam is the same for torch.optim.Adam (L2 weight decay: grad + wd * param, a temporary, when
the decay is not 0; torch 1.13's _single_tensor_adam).

On a CUDA device torch.optim runs the multi-tensor ("foreach") implementation by default
(torch/optim/optimizer.py `_default_to_fused_or_foreach`: foreach when every parameter is on a CUDA
device and the optimizer is not differentiable), whose requests differ: AdamW's `_foreach_sqrt`
allocates the square roots of every state at once (one parameter set of temporaries, freed at the
end of the step), SGD's weight decay `_foreach_add` copies every gradient. A recording that models a
GPU without running on one (fake=True) therefore runs the foreach path too: ForeachStepCountAdamW
makes the ops of torch 2.x's `_multi_tensor_adam` (torch/optim/adam.py, capturable=False, amsgrad
and maximize off) with a Python step count, and any other torch optimizer gets foreach=True in each
parameter group whose foreach is unset (None), as CUDA's default would.

make_optimizer also takes a callable(params) -> torch.optim.Optimizer. Under FakeTensors a
torch.optim.Adam or AdamW it returns is replaced by the step-count version with the same parameter
groups and hyper-parameters (foreach unless a group sets foreach=False; amsgrad, fused, capturable
and maximize are refused: their op sequences differ); any other optimizer runs as it is and must not
read tensor values on the host.
"""
import math

import torch

from .harness import OPTIMIZERS  # noqa: F401 (the names, re-exported)


class StepCountAdamW(torch.optim.Optimizer):
    decoupled = True

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    def _advance(self, p):
        """The parameter's state, made on its first step (the two moments, torch's order), one step on."""
        state = self.state[p]
        if not state:
            state["step"] = 0
            state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        state["step"] += 1
        return state

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self._advance(p)
                step, exp_avg, exp_avg_sq, grad = state["step"], state["exp_avg"], state["exp_avg_sq"], p.grad
                if self.decoupled:
                    p.mul_(1 - lr * wd)
                elif wd != 0:
                    grad = grad.add(p, alpha=wd)
                exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                bias_correction1 = 1 - beta1 ** step
                bias_correction2 = 1 - beta2 ** step
                denom = (exp_avg_sq.sqrt() / math.sqrt(bias_correction2)).add_(eps)
                p.addcdiv_(exp_avg, denom, value=-lr / bias_correction1)
        return None


class ForeachStepCountAdamW(StepCountAdamW):
    """torch 2.x's `_multi_tensor_adam` (Adam and AdamW, foreach=True, capturable=False): one
    `_foreach_*` op per update stage over all parameters of a group."""

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            for p in params:
                self._advance(p)
            grads = [p.grad for p in params]
            exp_avgs = [self.state[p]["exp_avg"] for p in params]
            exp_avg_sqs = [self.state[p]["exp_avg_sq"] for p in params]
            steps = [self.state[p]["step"] for p in params]
            if wd != 0:
                if self.decoupled:
                    torch._foreach_mul_(params, 1 - lr * wd)
                else:
                    grads = torch._foreach_add(grads, params, alpha=wd)
            torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)  # torch >= 2.0 only (CUDA_FOREACH_DEFAULT)
            torch._foreach_mul_(exp_avg_sqs, beta2)
            torch._foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - beta2)
            del grads
            step_size = [(lr / (1 - beta1 ** s)) * -1 for s in steps]
            bias_correction2_sqrt = [(1 - beta2 ** s) ** 0.5 for s in steps]
            exp_avg_sq_sqrt = torch._foreach_sqrt(exp_avg_sqs)
            torch._foreach_div_(exp_avg_sq_sqrt, bias_correction2_sqrt)
            torch._foreach_add_(exp_avg_sq_sqrt, eps)
            torch._foreach_addcdiv_(params, exp_avgs, exp_avg_sq_sqrt, step_size)
            del exp_avg_sq_sqrt
        return None


class ForeachStepCountAdam(ForeachStepCountAdamW):
    decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)


class StepCountAdam(StepCountAdamW):
    decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)


# torch 1.13 resolved foreach=None to the single-tensor path on every device; 2.0 made foreach the
# default on CUDA (torch/optim/optimizer.py, _default_to_fused_or_foreach).
CUDA_FOREACH_DEFAULT = int(torch.__version__.split(".")[0]) >= 2
_UNSUPPORTED_UNDER_FAKE = ("amsgrad", "fused", "capturable", "maximize", "differentiable")


def make_optimizer(kind, params, fake, cuda_like=None):
    """'sgd': SGD, momentum 0.9, weight decay 1e-4; 'sgd-plain': SGD, lr 0.001, no momentum, no weight
    decay (no optimizer state: OneFlow's Coop sweeps, dtr2 run_dtr.py:265-266); 'adamw': AdamW, weight
    decay 0.01; 'adam': Adam, no weight decay; or a callable(params) -> torch.optim.Optimizer. cuda_like (default: fake): the
    recording models a GPU, so the optimizer runs CUDA's default (foreach) path."""
    cuda_like = fake if cuda_like is None else cuda_like
    params = list(params)
    if callable(kind):
        opt = kind(params)
        if not isinstance(opt, torch.optim.Optimizer):
            raise TypeError(f"the optimizer callable returned {type(opt).__name__}, not a torch.optim.Optimizer")
        if fake and type(opt) in (torch.optim.Adam, torch.optim.AdamW):
            return _step_count_copy(opt)  # (fake implies cuda_like)
        return _foreach_as_on_cuda(opt) if cuda_like and CUDA_FOREACH_DEFAULT else opt
    foreach = cuda_like and CUDA_FOREACH_DEFAULT
    if kind == "sgd":
        return torch.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=1e-4, **({"foreach": True} if foreach else {}))
    if kind == "sgd-plain":
        return torch.optim.SGD(params, lr=0.001, momentum=0.0, **({"foreach": True} if foreach else {}))
    if kind == "adamw":
        if fake:
            return ForeachStepCountAdamW(params) if foreach else StepCountAdamW(params)
        return torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01, **({"foreach": True} if foreach else {}))
    if kind == "adam":
        if fake:
            return ForeachStepCountAdam(params) if foreach else StepCountAdam(params)
        return torch.optim.Adam(params, lr=1e-3, **({"foreach": True} if foreach else {}))
    raise ValueError(f"unknown optimizer {kind!r} (valid: {', '.join(OPTIMIZERS)}, or a callable(params))")


def _foreach_as_on_cuda(opt):
    """foreach=True in every group that leaves it unset, where the optimizer has the option."""
    if "foreach" in getattr(opt, "defaults", {}):
        for g in opt.param_groups:
            if g.get("foreach") is None and not g.get("fused") and not g.get("differentiable"):
                g["foreach"] = True
    return opt


def _step_count_copy(opt):
    foreach = CUDA_FOREACH_DEFAULT and all(g.get("foreach") is not False for g in opt.param_groups)
    if type(opt) is torch.optim.AdamW:
        cls = ForeachStepCountAdamW if foreach else StepCountAdamW
    else:
        cls = ForeachStepCountAdam if foreach else StepCountAdam
    groups = []
    for g in opt.param_groups:
        bad = [k for k in _UNSUPPORTED_UNDER_FAKE if g.get(k)]
        if bad:
            raise ValueError(f"{type(opt).__name__} with {', '.join(bad)} cannot be recorded under fake=True "
                             "(its update reads tensor values or differs in ops); use fake=False")
        groups.append({k: g[k] for k in ("params", "lr", "betas", "eps", "weight_decay")})
    return cls(groups)
