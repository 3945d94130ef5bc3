"""Mixed precision for recording: CUDA autocast's cast policy, and a loss scaler for float16.

A trace models a GPU, so a recording with amp='bf16' or 'fp16' must make the tensors CUDA autocast
makes. On a CUDA device that is torch.autocast('cuda', dtype) itself. Everywhere else (the CPU, and
FakeTensors, which are CPU tensors in a CPU-only torch) CPU autocast is no substitute: its op lists
differ (torch 1.13 keeps softmax, layer_norm and the losses in bfloat16 where CUDA computes them in
float32) and torch 1.13's CPU autocast refuses float16. A fake CUDA device does not work either: a
CPU-only torch aborts in the CUDA device guard of autocast's first cast. So CudaAutocast applies
CUDA autocast's policy (aten/src/ATen/autocast_mode.cpp, the CUDA kernels of 1.13 and 2.x) from
Python: a TorchFunctionMode, which runs above autograd like the Autocast dispatch key, so the casts
are differentiable and recorded as the aten::_to_copy ops real autocast makes:

* lower precision (the float32 inputs cast to the autocast dtype): matrix products, linear,
  convolutions, einsum, prelu, the RNN cells, scaled_dot_product_attention;
* float32 (half inputs cast to float32): pointwise transcendental functions, pow, the norms, the
  losses, cosine similarity, distances, logsumexp;
* float32 output ("fp32_set_opt_dtype": dtype=float32 unless one is given): softmax, log_softmax,
  sum, prod, cumsum, cumprod, vector and matrix norms;
* promote (the widest floating type of the inputs): addcdiv, addcmul, atan2, bilinear, cross, dot,
  grid_sample, index_put, scatter_add, tensordot.

CUDA autocast is a dispatch key: it applies to every ATen op, whatever Python function calls it. A
TorchFunctionMode sees a Python composite of torch.nn.functional (multi_head_attention_forward, which
nn.MultiheadAttention and nn.TransformerEncoderLayer call) as one call, and the ops inside it would
run with the mode switched off, in float32. Such composites run with the policy re-entered, so the
linears and matrix products inside get their casts as on CUDA (test_amp_inside_multihead_attention).

As in autocast, the lower-precision copy of a leaf float32 tensor that requires grad (a parameter)
is cached for the region, so each weight is cast once per forward; the cache is dropped when the
outermost region ends. Ops called as Tensor methods or torch functions are covered; ATen ops reached
only from inside other kernels are not (autocast sees those only when they are dispatched from the
top, which for the listed ops is the common case).
"""
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

from .compat import python_composite as _python_composite, run_composite_inside

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}

LOWER = {"linear", "matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "addmm", "baddbmm", "addbmm", "addmv",
         "addr", "mv", "einsum", "chain_matmul", "multi_dot", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
         "conv_transpose2d", "conv_transpose3d", "conv_tbc", "convolution", "_convolution", "prelu",
         "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell", "scaled_dot_product_attention"}
FP32 = {"acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal", "rsqrt",
        "sinh", "tan", "pow", "__pow__", "__rpow__", "softplus", "layer_norm", "group_norm", "norm",
        "frobenius_norm", "nuclear_norm", "cosine_similarity", "poisson_nll_loss", "cosine_embedding_loss",
        "nll_loss", "hinge_embedding_loss", "kl_div", "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss",
        "margin_ranking_loss", "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss",
        "multi_margin_loss", "binary_cross_entropy_with_logits", "cross_entropy", "dist", "pdist", "cdist",
        "renorm", "logsumexp"}
FP32_OUTPUT = {"softmax", "log_softmax", "sum", "prod", "cumsum", "cumprod", "vector_norm", "matrix_norm"}
PROMOTE = {"addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "grid_sample", "index_put", "index_put_",
           "scatter_add", "tensordot"}
HALF = (torch.float16, torch.bfloat16)


def _cast_right_to_left(cast, tree):
    """`cast` applied to every leaf of (args, kwargs), the last argument first: CUDA autocast's wrappers
    cast an op's arguments in one call's argument list (aten/src/ATen/autocast_mode.h,
    WrapFunction_::call: `redispatch(cached_cast(to_type, args, device_type)...)`), whose order of
    evaluation C++ leaves open and GCC builds right to left. The H200 recordings show it: linear's
    weight is cast before its input, matmul's second operand before its first; cast left to right, a
    fake Llama-1B recording peaked 3.9 % below max_memory_reserved (the blocks land in other holes)."""
    leaves, spec = tree_flatten(tree)
    out = list(leaves)
    for i in reversed(range(len(leaves))):
        out[i] = cast(leaves[i])
    return tree_unflatten(out, spec)


def _eligible(t):
    return isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != torch.float64


class _Policy(TorchFunctionMode):
    def __init__(self, dtype):
        super().__init__()
        self.dtype = dtype
        self.cache = {}  # id(leaf parameter) -> (parameter, its lower-precision copy)

    def _lower(self, t):
        if not _eligible(t) or t.dtype == self.dtype:
            return t
        cacheable = t.dtype == torch.float32 and t.requires_grad and t.is_leaf and not t._is_view()
        if cacheable:
            hit = self.cache.get(id(t))
            if hit is not None and hit[0] is t:
                return hit[1]
        out = t.to(self.dtype)
        if cacheable:
            self.cache[id(t)] = (t, out)
        return out

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in LOWER:
            args, kwargs = _cast_right_to_left(self._lower, (args, kwargs))
        elif name in FP32:
            args, kwargs = _cast_right_to_left(lambda t: t.float() if _eligible(t) and t.dtype in HALF else t,
                                               (args, kwargs))
        elif name in FP32_OUTPUT:
            first = args[0] if args else None
            if _eligible(first) and kwargs.get("dtype") is None:
                kwargs = dict(kwargs, dtype=torch.float32)
        elif name in PROMOTE:
            floats = [t for t in _tensors((args, kwargs)) if _eligible(t)]
            if floats and len({t.dtype for t in floats}) > 1:
                widest = torch.float32 if any(t.dtype == torch.float32 for t in floats) else floats[0].dtype
                args, kwargs = _cast_right_to_left(lambda t: t.to(widest) if _eligible(t) else t, (args, kwargs))
        elif _python_composite(func):
            return self._inside(func, args, kwargs)
        return func(*args, **kwargs)

    def _inside(self, func, args, kwargs):
        return run_composite_inside(self, func, args, kwargs)


def _tensors(tree):
    found = []
    tree_map(lambda t: found.append(t) if isinstance(t, torch.Tensor) else None, tree)
    return found


class CudaAutocast:
    """`with CudaAutocast(torch.bfloat16):` applies CUDA autocast's policy; nested regions share the
    outermost one (and its cast cache), as autocast's do."""

    _active = []

    def __init__(self, dtype):
        self.dtype = dtype
        self.mode = None

    def __enter__(self):
        if not CudaAutocast._active:
            self.mode = _Policy(self.dtype)
            self.mode.__enter__()
        CudaAutocast._active.append(self)
        return self

    def __exit__(self, *exc):
        CudaAutocast._active.pop()
        if self.mode is not None:
            mode, self.mode = self.mode, None
            mode.cache.clear()
            return mode.__exit__(*exc)
        return False

    @staticmethod
    def current_dtype():
        """The dtype of the region the caller is in, or None."""
        return CudaAutocast._active[0].dtype if CudaAutocast._active else None


def autocast(amp, device_type):
    """The autocast context for amp ('bf16' / 'fp16') on device_type: CUDA's own on a CUDA device,
    CudaAutocast elsewhere."""
    dtype = DTYPES[amp]
    if device_type == "cuda":
        return torch.autocast("cuda", dtype=dtype)
    return CudaAutocast(dtype)


class LossScaler:
    """torch.cuda.amp.GradScaler's device work for float16, without its host reads: a float32 scale
    (65536) and an int32 growth tracker allocated once; per step the loss is multiplied by the scale,
    the gradients are unscaled in place by 1/scale before the optimizer step, and the scale is
    updated in place (torch._amp_update_scale_). GradScaler unscales with one fused
    _amp_foreach_non_finite_check_and_unscale_ kernel (CUDA only; no CPU or Meta kernel in 1.13):
    here one in-place mul_ per gradient, the same memory effect (no allocation) as separate ops. The
    found-inf flag is never read back (FakeTensors have no values): every step is taken."""

    def __init__(self, device):
        self.scale = torch.full((1,), 65536.0, dtype=torch.float32, device=device)
        self.growth_tracker = torch.zeros((1,), dtype=torch.int32, device=device)

    def scaled(self, loss):
        return loss * self.scale

    def unscale_(self, params):
        inv = self.scale.double().reciprocal().float()
        found_inf = torch.zeros((1,), dtype=torch.float32, device=self.scale.device)
        for p in params:
            if p.grad is not None:
                p.grad.mul_(inv)
        return found_inf

    def update(self, found_inf):
        torch._amp_update_scale_(self.scale, self.growth_tracker, found_inf, 2.0, 0.5, 2000)
