"""The kernels CUDA would pick, for recordings that model a GPU without running on one.

A fake (or CPU) recording runs ATen's CPU dispatch, and a few composite functions choose different
ops by device: what the trace then holds is not what the caching allocator sees on a GPU. Measured
on an H200 with torch 2.11 (traces/h200) against a fake recording of the same model on torch 2.x:
GPT-2's dropout kept a float32 mask per call (CPU's bernoulli_ / div_ / mul path) where CUDA keeps
a bool mask (aten::native_dropout), 18 % more peak memory. CudaDispatch is a TorchFunctionMode (it
runs above autograd, so the ops it picks are differentiated as usual) that makes the CUDA choice:

* dropout: aten/src/ATen/native/Dropout.cpp `dropout()` calls the fused `at::native_dropout` when
  `train && is_fused_kernel_acceptable(input, p)` (input on CUDA, 0 < p < 1, numel > 0), which
  returns the output and a bool mask; the in-place `dropout_` never takes the fused path.
* scaled_dot_product_attention: aten/src/ATen/native/transformers/cuda/sdp_utils.cpp
  `select_sdp_backend` tries flash, then memory-efficient, then math (cuDNN attention is last in
  the default order since torch 2.5). Flash needs float16/bfloat16, no attn_mask, a head dimension
  that is a multiple of 8 and at most 256, and equal query / key-value heads (or enable_gqa);
  memory-efficient takes float32 too and a mask (a boolean one is first converted to an additive
  mask in the query's dtype, a new tensor), head dimension a multiple of 8 (4 for
  float32 inputs is also accepted; we use 8 to stay on the side PyTorch documents). Their ops,
  `aten::_scaled_dot_product_flash_attention` (output, float32 log-sum-exp [B, H, S]) and
  `aten::_scaled_dot_product_efficient_attention` (output, log-sum-exp padded to a multiple of 32
  queries), and their backward ops are what the trace then holds; the math path (the S x S
  attention matrix) is recorded only where CUDA would take it too.

Optimizers (foreach, CUDA's default) are in optim.py; library workspaces in workspaces.py.
"""
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from .compat import is_fake, python_composite, run_composite_inside

_DROPOUT = {F.dropout, torch.dropout, torch.nn.functional.dropout}
_SDPA = {f for f in (getattr(F, "scaled_dot_product_attention", None),) if f is not None}  # torch >= 2.0


# torch 1.13 has aten::native_dropout too (CUDA's fused path since 1.10); checked, not assumed
_HAS_NATIVE_DROPOUT = hasattr(torch.ops.aten, "native_dropout")


def _fused_dropout_ok(x, p, training):
    return training and 0.0 < p < 1.0 and x.numel() > 0 and x.is_floating_point()


def _arg(args, kwargs, i, name, default):
    if len(args) > i:
        return args[i]
    return kwargs.get(name, default)


def sdpa_backend(q, k, v, attn_mask, dropout_p, enable_gqa):
    """'flash', 'efficient' or 'math': the backend torch 2.x on an sm80+ GPU selects by default."""
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        return "math"
    head_dim = q.shape[-1]
    if v.shape[-1] != head_dim or head_dim % 8 != 0:
        return "math"
    same_heads = q.shape[1] == k.shape[1] == v.shape[1]
    if not same_heads and not enable_gqa:
        return "math"
    if q.dtype in (torch.float16, torch.bfloat16) and attn_mask is None and head_dim <= 256:
        return "flash"  # grouped heads (enable_gqa) included: the flash kernel reads them directly
    if not same_heads:
        return "math"  # the memory-efficient kernel does not take grouped heads
    if q.dtype in (torch.float32, torch.float16, torch.bfloat16) and head_dim <= 512:
        return "efficient"
    return "math"


class CudaDispatch(TorchFunctionMode):
    """Routes dropout and scaled_dot_product_attention to the ops CUDA would run, also where a Python
    composite of torch.nn.functional calls them (nn.MultiheadAttention). `recording` counts the
    recordings in progress: a checkpointed module's recomputation runs inside backward, where the
    function modes of the forward are not active, and enters a CudaDispatch again when it is set."""

    recording = 0

    def __enter__(self):
        CudaDispatch.recording += 1
        return super().__enter__()

    def __exit__(self, *exc):
        CudaDispatch.recording -= 1
        return super().__exit__(*exc)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _DROPOUT:
            x = args[0]
            p = float(_arg(args, kwargs, 1, "p", 0.5))
            training = bool(_arg(args, kwargs, 2, "training" if func is not torch.dropout else "train", True))
            inplace = bool(_arg(args, kwargs, 3, "inplace", False)) if func is not torch.dropout else False
            if not inplace and isinstance(x, torch.Tensor) and _fused_dropout_ok(x, p, training) and _HAS_NATIVE_DROPOUT:
                return torch.ops.aten.native_dropout(x, p, True)[0]
        elif func in _SDPA and is_fake(args[0]):  # real CPU tensors have no CUDA kernels to call
            q, k, v = args[0], args[1], args[2]
            attn_mask = _arg(args, kwargs, 3, "attn_mask", None)
            dropout_p = float(_arg(args, kwargs, 4, "dropout_p", 0.0))
            is_causal = bool(_arg(args, kwargs, 5, "is_causal", False))
            scale = _arg(args, kwargs, 6, "scale", None)
            enable_gqa = bool(kwargs.get("enable_gqa", False))
            backend = sdpa_backend(q, k, v, attn_mask, dropout_p, enable_gqa)
            if backend == "flash":
                return torch.ops.aten._scaled_dot_product_flash_attention(
                    q, k, v, dropout_p, is_causal, False, scale=scale)[0]
            if backend == "efficient":
                if attn_mask is not None and attn_mask.dtype == torch.bool:
                    # sdp_utils convert_boolean_attn_mask: zeros in the query's dtype, -inf where masked
                    attn_mask = torch.zeros_like(attn_mask, dtype=q.dtype).masked_fill_(
                        attn_mask.logical_not(), float("-inf"))
                needs_lse = any(t.requires_grad for t in (q, k, v)) and torch.is_grad_enabled()
                return torch.ops.aten._scaled_dot_product_efficient_attention(
                    q, k, v, attn_mask, needs_lse, dropout_p, is_causal, scale=scale)[0]
            return torch.ops.aten._scaled_dot_product_attention_math(
                q, k, v, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)[0]
        elif python_composite(func):  # e.g. multi_head_attention_forward, which calls SDPA
            return run_composite_inside(self, func, args, kwargs)
        return func(*args, **kwargs)
