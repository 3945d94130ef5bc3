"""coopsim.fit(): "will my training step fit on this GPU, and what would make it fit?" before launch.

Records the variants of a training step a PyTorch user can switch on (activation checkpointing of
the model's blocks, micro-batches through gradient accumulation, bf16 autocast, a smaller batch) in
fake mode (no GPU, no memory), simulates each on the `pytorch` allocator model at the usable capacity
(capacity - reserve: the CUDA context is outside the caching allocator) and returns a ranked
pandas.DataFrame: what to change, peak reserved and allocated bytes, simulated milliseconds per
optimizer step (the device profile's fitted duration model), fits or not. docs/python.md.
"""
import numbers
import os
import tempfile

from .sim import run

UNLIMITED = 1 << 50  # a budget no step reaches: what a variant that does not fit would need
DEFAULT_RESERVE = 512 << 20  # the CUDA context (docs/user-guide.md, advise --reserve)
_UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "KB": 10 ** 3, "MB": 10 ** 6,
          "GB": 10 ** 9, "TB": 10 ** 12, "B": 1}


def parse_bytes(value, what):
    """An int of bytes, or a string like '80GiB' / '1.5 GB'."""
    if isinstance(value, bool):
        raise TypeError(f"{what} must be bytes (an int) or a string like '80GiB', not a bool")
    if isinstance(value, numbers.Integral):  # int, numpy integers
        if value < 0:
            raise ValueError(f"{what} must not be negative (got {value})")
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        for unit in sorted(_UNITS, key=len, reverse=True):
            if text.endswith(unit):
                number = text[: -len(unit)].strip()
                try:
                    amount = float(number)
                except ValueError:
                    break
                if amount < 0 or amount != amount or amount == float("inf"):
                    break
                return int(amount * _UNITS[unit])
        if text.isdigit():
            return int(text)
        raise ValueError(f"{what}: cannot read {value!r} as bytes (e.g. 80GiB, 24GB, 1073741824)")
    raise TypeError(f"{what} must be bytes (an int) or a string like '80GiB', not {type(value).__name__}")


def block_names(model):
    """Qualified names of the model's repeated blocks, as one checkpoints them in PyTorch: the entries
    of its longest nn.ModuleList (Hugging Face: model.layers.N), else of its longest nn.Sequential, the
    model itself included (the shallowest on a tie)."""
    import torch

    def longest(kind):
        best_name, best = None, None
        for name, module in model.named_modules():
            if isinstance(module, kind) and len(module) >= 2 and (best is None or len(module) > len(best)):
                best_name, best = name, module
        if best is None:
            return []
        return [f"{best_name}.{child}" if best_name else child for child, _ in best.named_children()]
    return longest(torch.nn.ModuleList) or longest(torch.nn.Sequential)


def _inspect(model):
    """The model itself, or one built on FakeTensors (no memory) to read its module names."""
    import torch
    if isinstance(model, torch.nn.Module):
        return model
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        built = model()
    if not isinstance(built, torch.nn.Module):
        raise TypeError(f"the model callable returned {type(built).__name__}, not a torch.nn.Module")
    return built


def _batch_size(batch):
    import torch
    sizes = {v.shape[0] for v in batch.values() if isinstance(v, torch.Tensor) and v.dim() > 0}
    if len(sizes) != 1:
        raise ValueError("batch: every tensor must share its first (batch) dimension to try micro-batches "
                         f"and smaller batches (first dimensions: {sorted(sizes)})")
    return sizes.pop()


def _slice(batch, n):
    import torch
    return {k: (v[:n] if isinstance(v, torch.Tensor) and v.dim() > 0 else v) for k, v in batch.items()}


def variants(batch_size, blocks, amp, accumulation_choices=(2, 4), smaller=(2, 4)):
    """(label, change, options) for each variant tried, the unchanged step first."""
    out = [("as is", "nothing", {"amp": amp})]
    if amp is None:
        out.append(("bf16", "train under torch.autocast('cuda', dtype=torch.bfloat16)", {"amp": "bf16"}))
    if blocks:
        what = f"torch.utils.checkpoint on each of {len(blocks)} blocks ({blocks[0]} ... {blocks[-1]})"
        out.append(("checkpoint", what, {"amp": amp, "checkpoint": blocks}))
        if amp is None:
            out.append(("checkpoint + bf16", what + " and bf16 autocast", {"amp": "bf16", "checkpoint": blocks}))
    if batch_size is not None:
        for k in accumulation_choices:
            if batch_size % k == 0 and batch_size // k >= 1:
                out.append((f"{k} micro-batches", f"gradient accumulation: {k} micro-batches of {batch_size // k}",
                            {"amp": amp, "accumulation": k, "batch": batch_size // k}))
        for k in smaller:
            if batch_size % k == 0 and batch_size // k >= 1:
                out.append((f"batch {batch_size // k}", f"a smaller batch: {batch_size // k} instead of {batch_size} "
                            "(changes the optimisation)", {"amp": amp, "batch": batch_size // k}))
        # both memory levers at once: checkpointing and the most micro-batches (the same samples per step)
        most = max([k for k in accumulation_choices if batch_size % k == 0], default=None)
        if blocks and most:
            out.append((f"checkpoint + {most} micro-batches", f"checkpointing of the {len(blocks)} blocks and "
                        f"{most} micro-batches of {batch_size // most}",
                        {"amp": amp, "checkpoint": blocks, "accumulation": most, "batch": batch_size // most}))
    return out


def fit(model, batch, loss_fn, optimizer="adamw", *, capacity, reserve=DEFAULT_RESERVE, device_profile="h200",
        amp=None, blocks=None, iterations=2, binary=None, keep=None, log=None):
    """Ranks what a PyTorch user can change so that a training step fits `capacity` bytes of GPU memory.

    model, batch, loss_fn, optimizer: as coopsim.record (batch: a dict of tensors sharing their first
        dimension, for the micro-batch and smaller-batch variants; a callable(device) gives only the
        bf16 and checkpointing variants).
    capacity: the GPU's memory (bytes or '80GiB'), or a list of them (each variant is recorded once and
        ranked at each capacity); reserve: taken off it first (default 512 MiB, the
        CUDA context; cuBLAS workspaces are in the recordings).
    blocks: module names to checkpoint (default: block_names(model)); [] tries no checkpointing.
    device_profile: durations ('a100', 'h100', 'h200'); amp: the step's own precision (None or 'bf16').
    keep: a directory to keep the recorded traces in (default: a temporary one, removed).
    Returns a DataFrame, per capacity best first: fitting variants by samples per second (by step time
    for a callable batch), then the others by peak reserved; columns capacity_bytes, variant, change, batch, micro_batches, amp, checkpoint (blocks checkpointed), fits,
    short_bytes (0, or how much more the variant needs), peak_reserved_bytes and peak_allocated_bytes
    (at the usable capacity when it fits, else without a limit: what it needs), step_ms (simulated,
    per optimizer step), samples_per_s, trace (None unless keep). df.attrs: reserve_bytes,
    device_profile."""
    import pandas
    from .recording.api import record
    capacities = [parse_bytes(c, "capacity") for c in (capacity if isinstance(capacity, (list, tuple)) else [capacity])]
    if not capacities:
        raise ValueError("capacity: give at least one")
    reserve_bytes = parse_bytes(reserve, "reserve")
    for c in capacities:
        if reserve_bytes >= c:
            raise ValueError(f"reserve ({reserve_bytes} bytes) must be below the capacity ({c} bytes)")
    if not (isinstance(iterations, int) and not isinstance(iterations, bool) and iterations >= 1):
        raise ValueError(f"iterations must be an int >= 1 (got {iterations!r})")
    batch_size = _batch_size(batch) if isinstance(batch, dict) else None
    if blocks is None:
        blocks = block_names(_inspect(model))
    rows = []
    work = keep or tempfile.mkdtemp(prefix="coopsim-fit-")
    os.makedirs(work, exist_ok=True)
    try:
        for index, (label, change, options) in enumerate(variants(batch_size, list(blocks), amp)):
            options = dict(options)
            size = options.pop("batch", batch_size)
            data = _slice(batch, size) if batch_size is not None else batch
            trace = os.path.join(work, f"variant{index}.jsonl.gz")
            if log:
                log(f"recording {label}")
            record(model, data, loss_fn, optimizer, iterations=iterations, fake=True, device_profile=device_profile,
                   output=trace, **options)
            need = run(trace, allocator="pytorch", policy="keep", budget=UNLIMITED, binary=binary).iloc[0]
            samples = (size or 0) * options.get("accumulation", 1)
            for capacity_bytes in capacities:
                usable = capacity_bytes - reserve_bytes
                r = need
                fits = int(need["peak_reserved_bytes"]) <= usable
                if not fits:  # a limit makes the caching allocator free its cache and retry: it may still fit
                    at = run(trace, allocator="pytorch", policy="keep", budget=usable, binary=binary).iloc[0]
                    if at["status"] == "completed":
                        r, fits = at, True
                step_ms = float(r["simulated_ns"]) / 1e6 / iterations
                rows.append({"capacity_bytes": capacity_bytes, "variant": label, "change": change, "batch": size,
                             "micro_batches": options.get("accumulation", 1), "amp": options.get("amp"),
                             "checkpoint": len(options.get("checkpoint") or []), "fits": fits,
                             "short_bytes": 0 if fits else int(need["peak_reserved_bytes"]) - usable,
                             "peak_reserved_bytes": int(r["peak_reserved_bytes"]),
                             "peak_allocated_bytes": int(r["peak_allocated_bytes"]), "step_ms": step_ms,
                             "samples_per_s": samples / step_ms * 1e3 if samples and step_ms > 0 else None,
                             "trace": trace if keep else None, "_order": index})
    finally:
        if not keep:
            for name in os.listdir(work):
                os.unlink(os.path.join(work, name))
            os.rmdir(work)
    df = pandas.DataFrame(rows)
    # fitting variants by throughput (a smaller batch takes less time per step but does less), or by
    # step time when the batch size is unknown; the others by what they need
    speed = -df["samples_per_s"] if df["samples_per_s"].notna().all() else df["step_ms"]
    df["_rank_time"] = speed.where(df["fits"], float("inf"))
    df = df.sort_values(["capacity_bytes", "fits", "_rank_time", "peak_reserved_bytes", "_order"],
                        ascending=[True, False, True, True, True], kind="stable")
    df = df.drop(columns=["_rank_time", "_order"]).reset_index(drop=True)
    for col in ("capacity_bytes", "batch", "micro_batches", "checkpoint", "short_bytes", "peak_reserved_bytes",
                "peak_allocated_bytes"):
        df[col] = df[col].astype("Int64")
    df.attrs.update({"reserve_bytes": reserve_bytes, "device_profile": device_profile})
    return df
