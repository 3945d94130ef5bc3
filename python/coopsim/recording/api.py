"""coopsim.record(): one call from a PyTorch model to a coopsim trace v1 (docs/python.md)."""
import os
import tempfile
import warnings

import torch

from . import compat
from .amp import DTYPES
from .cost import PROFILES, Roofline
from .optim import OPTIMIZERS
from .session import record as record_session
from .timing import CudaEvents, Estimate, WallClock
from .workspaces import Workspaces

WALL_CLOCK_WARNING = ("durations are CPU wall-clock times (CPU kernels, not a GPU's); "
                      "use a device profile (a100, h100 or h200) for GPU roofline estimates")


def make_timer(device, fake, device_profile, launch_overhead=0.0, duration_model="fitted"):
    """(timer, profile used): the duration model of a profile (a100 implied under fake; 'fitted' or
    the bare 'roofline', cost.py), CUDA events on a CUDA device, else the CPU wall clock."""
    profile = device_profile or ("a100" if fake else None)
    if profile:
        if profile not in PROFILES:
            raise ValueError(f"unknown device profile {profile!r} (valid: {', '.join(PROFILES)})")
        return Estimate(Roofline(profile, launch_overhead, duration_model)), profile
    if launch_overhead:
        raise ValueError("a launch overhead needs an estimate (a device profile, or fake=True)")
    if device.startswith("cuda"):
        return CudaEvents(), None
    return WallClock(), None


def default_device(device, fake):
    """cuda when available, else cpu; under fake, CPU FakeTensors when this torch has no CUDA."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if fake and device.startswith("cuda") and not torch.cuda.is_available():
        device = "cpu"
    return device


def check_options(iterations, accumulation, amp, fake):
    if iterations < 1:
        raise ValueError("iterations must be at least 1")
    if accumulation < 1:
        raise ValueError("accumulation must be at least 1")
    if amp is not None and amp not in DTYPES:
        raise ValueError(f"unknown amp {amp!r} (valid: None, {', '.join(map(repr, DTYPES))})")
    if fake and compat.FakeTensorMode is None:
        raise RuntimeError("fake=True needs torch >= 1.13 (FakeTensorMode)")


def source_fields(*, model_dtype, amp, checkpoint, accumulation, set_to_none, preallocate_grads=False, harness=None,
                  granularity=None):
    """The header's source keys that describe precision and the training loop."""
    return {"dtype": model_dtype, "amp": amp, "checkpoint": checkpoint, "accumulation": accumulation,
            "set_to_none": set_to_none, "preallocate_grads": preallocate_grads, "harness": harness,
            "granularity": granularity or "pytorch"}


def describe_checkpoint(checkpoint, builder):
    """None, or the qualified names of the checkpointed modules (a predicate's choice resolved)."""
    return None if checkpoint is None else list(builder.checkpointed)


def device_name(device, fake):
    if fake:
        return f"fake {device} tensors (FakeTensorMode, no storage)"
    return torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") else "cpu"


def record(model, batch, loss_fn, optimizer="adamw", *, iterations=2, fake=True, amp=None, checkpoint=None,
           device_profile=None, set_to_none=True, accumulation=1, output=None, name=None, device=None, seed=0,
           launch_overhead=0.0, log=None, duration_model="fitted", preallocate_grads=False):
    """Records `iterations` optimizer steps of a model and writes them as a coopsim trace v1.

    model: an nn.Module, or a zero-argument callable that builds one (under fake=True it is built
        on FakeTensors: no memory; an nn.Module is copied with FakeTensor parameters and buffers).
    batch: a dict of tensors (copied to the device for each micro-batch) or a callable(device) -> dict.
    loss_fn(model, batch) -> scalar loss tensor.
    optimizer: 'adamw' | 'adam' | 'sgd' | a callable(params) -> torch.optim.Optimizer.
    amp: None | 'bf16' | 'fp16': forward and loss under CUDA autocast's policy (float32 parameters,
        gradients and optimizer states; fp16 adds a loss scaler).
    checkpoint: qualified module names, or a predicate (name, module) -> bool: those modules run under
        torch.utils.checkpoint (reentrant; see session.checkpointed) and are recomputed in backward.
    device_profile: 'a100' | 'h100' | 'h200': durations from that GPU's roofline (default under fake: a100);
        without one and without fake, durations are measured (CPU wall clock, with a warning, or CUDA
        events).
    duration_model: 'fitted' (default: the profile's roofline divided by per-kind efficiencies fitted
        to H200 measurements, at least a per-kernel floor) or 'roofline' (the bare roofline).
    set_to_none: zero_grad(set_to_none); False zeroes the gradients in place and keeps them.
    preallocate_grads: a zeroed gradient per parameter before the first forward, accumulated into and
        kept (OneFlow's ContiguousGrad, as Coop's sweeps ran); implies set_to_none=False.
    accumulation: micro-batches (forward + backward) per optimizer step.
    output: the trace path (gzip when it ends in .gz); default a new file in the temporary directory.
    Returns the path written.
    """
    check_options(iterations, accumulation, amp, fake)
    device = default_device(device, fake)
    timer, profile = make_timer(device, fake, device_profile, launch_overhead, duration_model)
    if profile is None and not device.startswith("cuda"):
        warnings.warn(WALL_CLOCK_WARNING, stacklevel=3)  # the caller of coopsim.record
    if optimizer not in OPTIMIZERS and not callable(optimizer):
        raise ValueError(f"unknown optimizer {optimizer!r} (valid: {', '.join(OPTIMIZERS)}, or a callable(params))")
    if callable(batch):
        make_batch = batch
    elif isinstance(batch, dict):
        def make_batch(dev):
            # a fresh copy per micro-batch; under fake, session converts them to FakeTensors
            return {k: (v if fake else v.to(dev, copy=True)) if isinstance(v, torch.Tensor) else v
                    for k, v in batch.items()}
    else:
        raise TypeError(f"batch must be a dict of tensors or a callable(device) -> dict, not {type(batch).__name__}")
    workspaces = Workspaces.for_recording(device, fake, profile)
    torch.manual_seed(seed)
    builder = record_session(model, make_batch, loss_fn, optimizer, iterations=iterations, device=device,
                             fake=fake, timer=timer, log=log, amp=amp, checkpoint=checkpoint,
                             accumulation=accumulation, set_to_none=set_to_none, workspaces=workspaces,
                             cuda_like=fake or (profile is not None and not device.startswith("cuda")),
                             preallocate_grads=preallocate_grads)
    name = name or builder.model_name
    if output is None:
        fd, output = tempfile.mkstemp(prefix=f"coopsim-{name}-", suffix=".jsonl.gz")
        os.close(fd)
    source = {"tool": "coopsim.record (python/coopsim)", "torch": compat.version(), "model": name,
              "iterations": iterations,
              "optimizer": optimizer if isinstance(optimizer, str) else getattr(optimizer, "__qualname__", "callable"),
              "fake": fake, "seed": seed}
    source.update(source_fields(model_dtype=builder.model_dtype, amp=amp, checkpoint=describe_checkpoint(checkpoint, builder),
                                accumulation=accumulation, set_to_none=set_to_none and not preallocate_grads,
                                preallocate_grads=preallocate_grads))
    source["durations"] = timer.describe()
    source["workspaces"] = workspaces.describe() if workspaces is not None else None
    header = {"format": "coopsim-trace", "version": 1, "model": name, "source": source, "time_unit": "ns",
              "iterations": iterations, "device": device_name(device, fake)}
    builder.write(os.fspath(output), header)
    return os.fspath(output)
