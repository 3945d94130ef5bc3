"""Roofline estimate of an ATen op's GPU time: max(FLOPs / peak FLOP/s, bytes / HBM bandwidth).

Peak figures are the vendors' dense (no structured sparsity) datasheet numbers:

* A100 SXM4 80 GB - NVIDIA A100 Tensor Core GPU datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4):
  FP64 9.7 TFLOP/s, FP64 Tensor Core 19.5, FP32 19.5, TF32 Tensor Core 156, BF16/FP16 Tensor Core 312
  (the sheet prints 312/624/624 "with sparsity"; halved here), HBM2e bandwidth 2,039 GB/s.
* H100 SXM5 80 GB - NVIDIA H100 Tensor Core GPU datasheet: FP64 34, FP64 Tensor Core 67, FP32 67,
  TF32 Tensor Core 989 / BF16 and FP16 Tensor Core 1,979 with sparsity, i.e. 494.5 / 989.5 dense,
  HBM3 bandwidth 3.35 TB/s.
* H200 SXM 141 GB - NVIDIA H200 Tensor Core GPU datasheet: the H100 SXM's compute (FP64 34, FP32 67,
  TF32 989 / FP16 and BF16 1,979 with sparsity: 494.5 / 989.5 dense) with HBM3e at 4.8 TB/s.

`compute_capability` (8.0 for the A100, 9.0 for Hopper) selects the cuBLAS workspace size
(workspaces.py). `link` names the coopsim link preset of the device's host link, written into the
trace header (source.durations.link), which a simulation takes unless its config names a preset: the
A100 SXM4 and the H100 SXM5 sit on PCIe 4.0 x16 and 5.0 x16 hosts (their datasheets' host interface),
`pcie4-x16` / `pcie5-x16`; the H200's is its measured in-training fit, `h200` (docs/cuda-validation.md).

Which peak an op gets follows PyTorch's defaults on CUDA: float32 matrix multiplies run on CUDA cores
(torch.backends.cuda.matmul.allow_tf32 is False since 1.12), float32 convolutions on TF32 tensor cores
(torch.backends.cudnn.allow_tf32 is True), float16/bfloat16 matmuls and convolutions on FP16/BF16 tensor
cores, everything else (element-wise, reductions, normalisation, optimizer updates) on the FP32 (or FP64)
vector units. FLOPs: 2*m*k*n per matrix product, 2 * weight elements * batch * output positions per
convolution (the same for each gradient it computes), 4*B*H*S*Sk*D for coopsim's fused attention
(llama.py; halved when causal, twice that backward), one per element otherwise. Bytes: every distinct
input tensor read once (its elements, at most its storage) plus every output written once; a mutated
input counts as read and written. Ops that only make views, and empty allocations, take 0 ns.
An optional per-kernel launch overhead (0 by default) can be added.

The fitted model (the default; model="roofline" gives the bare roofline above) divides the roofline
time by the efficiency an op's kind reaches and takes at least a per-kernel floor:
duration = max(KERNEL_FLOOR_NS, roofline / EFFICIENCY[kind]). Fitted to the CUDA-timed H200
recordings of traces/h200 of 2026-11-28, all with shielded event pairs (scripts/fit_durations.py,
docs/recording.md "Durations"): efficiencies are the time-weighted measured/roofline ratios of each
kind's ops of at least 20 us of roofline time in ResNet-50 and GPT-2 (Llama-1B is held out; the half
precision products, which only Llama has, keep the 0.78 of its earlier bare-pair timing), the floor
the median measured time of their kernels whose roofline is under 1 us (3.1 us: launch, a wave's
start-up, the memory latency). The same table serves a100 and h100 (not measured there). Traces
recorded before carry their own table in their header (the bundled ones: floor 4,500 ns).
"""
import math

import torch

from .compat import untyped_storage

TFLOPS = 1e12
PROFILES = {
    "a100": {"name": "NVIDIA A100 SXM4 80GB", "hbm_bytes_per_s": 2039e9, "compute_capability": (8, 0),
             "link": "pcie4-x16",
             "vector": {"float64": 9.7 * TFLOPS, "float32": 19.5 * TFLOPS},
             "matmul": {"float64": 19.5 * TFLOPS, "float32": 19.5 * TFLOPS, "tf32": 156 * TFLOPS,
                        "float16": 312 * TFLOPS, "bfloat16": 312 * TFLOPS}},
    "h100": {"name": "NVIDIA H100 SXM5 80GB", "hbm_bytes_per_s": 3.35e12, "compute_capability": (9, 0),
             "link": "pcie5-x16",
             "vector": {"float64": 34 * TFLOPS, "float32": 67 * TFLOPS},
             "matmul": {"float64": 67 * TFLOPS, "float32": 67 * TFLOPS, "tf32": 494.5 * TFLOPS,
                        "float16": 989.5 * TFLOPS, "bfloat16": 989.5 * TFLOPS}},
    "h200": {"name": "NVIDIA H200 SXM 141GB", "hbm_bytes_per_s": 4.8e12, "compute_capability": (9, 0),
             "link": "h200",
             "vector": {"float64": 34 * TFLOPS, "float32": 67 * TFLOPS},
             "matmul": {"float64": 67 * TFLOPS, "float32": 67 * TFLOPS, "tf32": 494.5 * TFLOPS,
                        "float16": 989.5 * TFLOPS, "bfloat16": 989.5 * TFLOPS}},
}

KERNEL_FLOOR_NS = 3072
EFFICIENCY = {"conv": 0.30, "matmul_fp32": 0.71, "matmul_half": 0.78, "bmm_fp32": 0.56, "bmm_half": 0.60,
              "attention": 0.60, "norm": 0.27, "reduction": 0.55, "elementwise": 0.65}
_NORM_WORDS = ("batch_norm", "layer_norm", "group_norm", "rms_norm", "instance_norm")
_REDUCTION_PREFIXES = ("sum", "mean", "norm", "linalg_vector_norm", "amax", "amin", "max", "min", "logsumexp", "var",
                       "std", "prod", "nll_loss", "cumsum", "argmax", "argmin", "embedding_dense_backward")

MATMUL_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addbmm", "aten::_addmm_activation"}
CONV_OPS = {"aten::convolution", "aten::_convolution", "aten::cudnn_convolution", "aten::mkldnn_convolution",
            "aten::thnn_conv2d", "aten::_slow_conv2d_forward", "aten::slow_conv3d_forward",
            "aten::cudnn_convolution_transpose", "aten::slow_conv_transpose2d", "aten::_conv_depthwise2d",
            "aten::convolution_overrideable"}
CONV_BACKWARD_OPS = {"aten::convolution_backward", "aten::convolution_backward_overrideable"}
NO_KERNEL_OPS = {"aten::empty", "aten::empty_like", "aten::empty_strided", "aten::new_empty",
                 "aten::new_empty_strided", "aten::lift_fresh", "aten::_local_scalar_dense"}


def _numel(t):
    return math.prod(t.shape)


def _bytes(t):
    return _numel(t) * t.element_size()


def _base(name):
    return name.split(".", 1)[0] if "." in name.split("::", 1)[-1] else name


def _dtype_key(t):
    return {torch.float64: "float64", torch.float16: "float16", torch.bfloat16: "bfloat16"}.get(t.dtype, "float32")


def _spatial(shape):
    return math.prod(shape[2:]) if len(shape) > 2 else 1


def _conv_flops(inp, weight, transposed, out_shape):
    # Non-transposed weight is [Cout, Cin/g, k...], transposed [Cin, Cout/g, k...]: either way every
    # weight element meets every position of the non-transposed side's output once per sample.
    positions = _spatial(inp.shape) if transposed else _spatial(out_shape)
    return 2 * _numel(weight) * inp.shape[0] * positions


def matmul_flops(name, args, outputs):
    """FLOPs of the matrix-multiply, convolution and attention family, or None for other ops."""
    base = _base(name)
    try:
        if base in ("aten::mm",):
            a, b = args[0], args[1]
            return 2 * a.shape[0] * a.shape[1] * b.shape[1]
        if base in ("aten::addmm", "aten::_addmm_activation"):
            a, b = args[1], args[2]
            return 2 * a.shape[0] * a.shape[1] * b.shape[1]
        if base == "aten::bmm":
            a, b = args[0], args[1]
            return 2 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]
        if base in ("aten::baddbmm", "aten::addbmm"):
            a, b = args[1], args[2]
            return 2 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]
        if base in CONV_OPS:
            transposed = bool(args[6]) if base in ("aten::convolution", "aten::_convolution") else "transpose" in base
            inp, weight = args[0], args[1]
            return _conv_flops(inp, weight, transposed, outputs[0].shape if outputs else inp.shape)
        if base in CONV_BACKWARD_OPS:
            # (grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding,
            #  groups, output_mask): grad_input and grad_weight each cost one forward; grad_bias a reduction.
            grad_out, inp, weight = args[0], args[1], args[2]
            transposed, mask = bool(args[7]), [bool(m) for m in args[10]]
            one = _conv_flops(inp, weight, transposed, grad_out.shape)
            return one * (mask[0] + mask[1]) + (_numel(grad_out) if mask[2] else 0)
        if "scaled_dot_product" in base and "attention" in base:
            q, k, v = args[0], args[1], args[2]
            flops = 2 * _numel(q) * k.shape[-2] + 2 * math.prod(q.shape[:-1]) * k.shape[-2] * v.shape[-1]
            return 2 * flops if "backward" in base else flops
        if base in ("coopsim::flash_attention", "coopsim::flash_attention_backward"):
            # llama.py's fused attention: q [B, S, H, D], k [B, Sk, Hkv, D]; QK^T and PV, 2*B*H*S*Sk*D
            # each, halved when causal (FlashAttention's count); backward twice the forward
            backward = base.endswith("backward")
            q, k, causal = (args[1], args[2], args[6]) if backward else (args[0], args[1], args[3])
            b, s, h, d = q.shape
            flops = 4 * b * h * s * k.shape[1] * d // (2 if causal else 1)
            return 2 * flops if backward else flops
        if base in ("aten::_cudnn_rnn", "aten::_cudnn_rnn_backward", "aten::miopen_rnn"):
            inp, weights = args[0], [w for w in args[1] if w is not None and w.dim() == 2]
            tokens = inp.shape[0] * inp.shape[1] if inp.dim() == 3 else inp.shape[0]
            flops = 2 * tokens * sum(_numel(w) for w in weights)
            return 2 * flops if "backward" in base else flops
    except (IndexError, AttributeError, TypeError):
        return None
    return None


def op_kind(name, dtype):
    """The kind of an op for the fitted efficiencies (EFFICIENCY's keys)."""
    base = _base(name)
    short = base.split("::", 1)[-1]
    half = dtype in ("float16", "bfloat16")
    if base in ("aten::mm", "aten::addmm", "aten::_addmm_activation", "aten::addmv", "aten::mv"):
        return "matmul_half" if half else "matmul_fp32"
    if base in ("aten::bmm", "aten::baddbmm", "aten::addbmm"):
        return "bmm_half" if half else "bmm_fp32"
    if base in CONV_OPS or base in CONV_BACKWARD_OPS:
        return "conv"
    if "attention" in short:
        return "attention"
    if any(w in short for w in _NORM_WORDS):
        return "norm"
    if "softmax" in short or "pool" in short or short.startswith(_REDUCTION_PREFIXES):
        return "reduction"
    return "elementwise"


class Roofline:
    """Estimates op durations in ns for one device profile: model 'fitted' (default) or 'roofline'."""

    MODELS = ("fitted", "roofline")

    def __init__(self, profile, launch_overhead_ns=0, model="fitted"):
        if model not in self.MODELS:
            raise ValueError(f"unknown duration model {model!r} (valid: {', '.join(self.MODELS)})")
        self.key = profile
        self.profile = PROFILES[profile]
        self.launch_overhead_ns = launch_overhead_ns
        self.model = model

    def describe(self):
        p = self.profile
        out = {"profile": self.key, "gpu": p["name"], "hbm_bytes_per_s": p["hbm_bytes_per_s"],
               "peak_flops": {"vector": p["vector"], "matmul": p["matmul"]},
               "launch_overhead_ns": self.launch_overhead_ns, "model": self.model, "link": p["link"]}
        if self.model == "fitted":
            out["kernel_floor_ns"] = KERNEL_FLOOR_NS
            out["efficiency"] = dict(EFFICIENCY)
        return out

    def estimate(self, name, args, inputs, outputs, mutated, views_only):
        """inputs / outputs: distinct device tensors; mutated: those inputs written in place."""
        if views_only or _base(name) in NO_KERNEL_OPS:
            return 0
        moved = sum(min(_bytes(t), _storage_bytes(t)) for t in inputs)
        moved += sum(_bytes(t) for t in outputs) + sum(_bytes(t) for t in mutated)
        p = self.profile
        ref = outputs[0] if outputs else (inputs[0] if inputs else None)
        dtype = _dtype_key(ref) if ref is not None else "float32"
        mm = matmul_flops(name, args, outputs)
        if mm is not None:
            base = _base(name)
            conv = base in CONV_OPS or base in CONV_BACKWARD_OPS
            peak = p["matmul"]["tf32" if conv and dtype == "float32" else dtype]
            flops = mm
        else:
            peak = p["vector"]["float64" if dtype == "float64" else "float32"]
            flops = max([_numel(t) for t in outputs + inputs] or [0])
        ns = max(flops / peak, moved / p["hbm_bytes_per_s"]) * 1e9
        if self.model == "fitted":
            ns = max(KERNEL_FLOOR_NS, ns / EFFICIENCY[op_kind(name, dtype)])
        return ns + self.launch_overhead_ns


def _storage_bytes(t):
    s = untyped_storage(t)
    return s.nbytes() if s is not None else _bytes(t)
