"""The blocks cuBLAS ops allocate inside an op and keep: what the trace must hold beside the tensors.

A recorder below autograd sees the tensors ATen ops return, not the blocks an op takes from the
caching allocator for itself. Two of those stay allocated for the whole run and so raise both
peaks (measured: traces/h200's snapshots, torch 2.11 on an H200, 64-65 MiB below
max_memory_allocated without them). The rules, from PyTorch's aten/src/ATen/cuda/CublasHandlePool.cpp
and CUDABlas.cpp (torch 2.11 development branch, commit 26a39059):

* cuBLAS workspace: allocated through the caching allocator at the first
  getCurrentCUDABlasHandle() of each (handle, stream) pair and never freed (only
  torch._C._cuda_clearCublasWorkspaces() releases it). Handles are per thread: the forward and the
  optimizer run on the Python thread, backward on the autograd engine's device thread, so a training
  step holds two. Size: CUBLAS_WORKSPACE_CONFIG (":SIZE_KiB:COUNT" repeated, the sum of SIZE * 1024 *
  COUNT) or the default, 4096 KiB * 8 = 32 MiB on compute capability 9.x (Hopper) and
  4096 KiB * 2 + 16 KiB * 8 = 8,519,680 bytes elsewhere (getChosenWorkspaceSize).
* cuBLASLt workspace: CUBLASLT_WORKSPACE_SIZE KiB, default 1024 (1 MiB), at most the cuBLAS
  workspace, one per (handle, stream), never freed, allocated after the cuBLAS workspace. Only
  addmm's bias epilogue goes through cuBLASLt by default (at::cuda::blas::gemm_and_bias: beta 1, a
  contiguous 1-D bias of the output's width, a 2-D result, every dimension above 1, float64 /
  float32 / float16 / bfloat16); mm, bmm and the backward of linear run cublasGemmEx (mm is addmm
  with beta 0). The snapshots show it: a 1 MiB block at the first nn.Linear with a bias (ResNet-50's
  fc, GPT-2), none in a Llama without biases.

In the trace each workspace is a tensor of role `workspace` allocated right after the outputs of
the op that first needs it (the snapshots' order) and never freed.
"""
import os

import torch

from .cost import PROFILES

MIB = 1 << 20
CUBLAS_OPS = {"aten::mm", "aten::addmm", "aten::_addmm_activation", "aten::bmm", "aten::baddbmm", "aten::addbmm",
              "aten::addmv", "aten::mv", "aten::dot", "aten::vdot"}
LT_DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16)


def parse_cublas_workspace_config(text):
    """Bytes of a CUBLAS_WORKSPACE_CONFIG value (":4096:8" -> 33554432), or None when malformed."""
    parts = text.split(":")
    if len(parts) < 3 or parts[0] != "" or (len(parts) - 1) % 2:
        return None
    total = 0
    for size, count in zip(parts[1::2], parts[2::2]):
        if not (size.isdigit() and count.isdigit()):
            return None
        total += int(size) * 1024 * int(count)
    return total


def default_cublas_workspace(compute_capability_major):
    return 4096 * 1024 * 8 if compute_capability_major == 9 else 4096 * 1024 * 2 + 16 * 1024 * 8


def sizes(compute_capability_major, env=None):
    """(cuBLAS, cuBLASLt) workspace bytes for a device, honouring the two environment variables."""
    env = os.environ if env is None else env
    cublas = None
    if env.get("CUBLAS_WORKSPACE_CONFIG"):
        cublas = parse_cublas_workspace_config(env["CUBLAS_WORKSPACE_CONFIG"])
    if cublas is None:
        cublas = default_cublas_workspace(compute_capability_major)
    lt = 1024 * 1024
    value = env.get("CUBLASLT_WORKSPACE_SIZE", "")
    if value.isdigit():
        lt = int(value) * 1024
    return cublas, min(lt, cublas)


def _uses_lt(name, args):
    """addmm's cuBLASLt bias epilogue (CUDABlas.cpp gemm_and_bias, as Blas.cpp's addmm_out_cuda_impl
    chooses it by default)."""
    if name not in ("aten::addmm", "aten::_addmm_activation") or len(args) < 3:
        return False
    bias, m1, m2 = args[0], args[1], args[2]
    if not all(isinstance(t, torch.Tensor) for t in (bias, m1, m2)):
        return False
    beta = args[3] if len(args) > 3 and not isinstance(args[3], torch.Tensor) else 1
    return (beta == 1 and bias.dim() == 1 and bias.is_contiguous() and m1.dim() == 2 and m2.dim() == 2
            and bias.shape[0] == m2.shape[1] and m1.shape[0] > 1 and m1.shape[1] > 1 and m2.shape[1] > 1
            and m1.dtype in LT_DTYPES)


class Workspaces:
    """Decides, op by op, which workspaces an op allocates: [(key, bytes, name)]."""

    def __init__(self, cublas_bytes, lt_bytes, device_label):
        self.cublas_bytes, self.lt_bytes, self.device_label = cublas_bytes, lt_bytes, device_label
        self.held = set()  # (thread, kind)

    @classmethod
    def for_recording(cls, device, fake, profile):
        """The GPU's workspaces: from the device profile (fake, or an estimate on the CPU), from the
        CUDA device itself, or None when the recording models no GPU (CPU wall clock)."""
        if profile is not None:
            return cls(*sizes(PROFILES[profile]["compute_capability"][0]), PROFILES[profile]["name"])
        if device.startswith("cuda") and not fake:
            major = torch.cuda.get_device_capability(torch.device(device))[0]
            return cls(*sizes(major), torch.cuda.get_device_name(torch.device(device)))
        return None

    def describe(self):
        return {"cublas_bytes": self.cublas_bytes, "cublaslt_bytes": self.lt_bytes,
                "rule": "one cuBLAS workspace per thread at its first cuBLAS op (forward/optimizer: the "
                        "Python thread; backward: the autograd thread), a cuBLASLt workspace at its first "
                        "addmm with a 1-D bias; both kept (python/coopsim/recording/workspaces.py)"}

    def needed(self, name, args, phase):
        if name not in CUBLAS_OPS:
            return []
        thread = "autograd" if phase == "backward" else "main"
        out = []
        if (thread, "cublas") not in self.held:
            self.held.add((thread, "cublas"))
            out.append((("workspace", thread, "cublas"), self.cublas_bytes, f"cublas_workspace[{thread}]"))
        if self.lt_bytes > 0 and (thread, "lt") not in self.held and _uses_lt(name, args):
            self.held.add((thread, "lt"))
            out.append((("workspace", thread, "cublaslt"), self.lt_bytes, f"cublaslt_workspace[{thread}]"))
        return out
