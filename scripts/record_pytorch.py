#!/usr/bin/env python3
"""Records a coopsim trace v1 (docs/trace-format.md) from real PyTorch training steps.

    scripts/record_pytorch.py --model resnet50 --batch 2 -o out/resnet50.jsonl.gz
    scripts/record_pytorch.py --model bert_large --fake --device-profile a100 -o bert.jsonl.gz

A TorchDispatchMode sees every ATen op of the forward pass, the backward pass and the optimizer step
with its input and output storages: new storages become tensors allocated right before the op's
compute, outputs sharing an input's storage become views, inputs written in place become "mutates",
and a storage is freed when its c10 weak reference expires. Details: docs/recording.md.

Durations: CUDA events around each op on a GPU, the wall clock on the CPU, or, with --device-profile
a100|h100 (implied by --fake), a roofline estimate max(FLOPs / peak FLOP/s, bytes / HBM bandwidth) from
the vendors' datasheets: A100 SXM4 80GB (NVIDIA A100 datasheet r4: FP32 19.5, TF32 tensor 156 dense,
FP16/BF16 tensor 312 dense TFLOP/s, 2,039 GB/s) and H100 SXM5 80GB (NVIDIA H100 datasheet: FP32 67,
TF32 tensor 494.5 dense, FP16/BF16 tensor 989.5 dense TFLOP/s, 3.35 TB/s). See python/coopsim/recording/cost.py.

--fake runs the model on FakeTensors (torch._subclasses.fake_tensor): shapes and storage sizes are exact,
no memory is used, so full-size models record on a small CPU machine.

Works with torch 1.13 (Debian's python3-torch) and 2.x. Exit status 0 on success, 1 on error (one line on
stderr; no output file is left behind), 2 on bad arguments.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))


def parse_args(argv, models):
    p = argparse.ArgumentParser(description="Record a coopsim trace from PyTorch training iterations.")
    p.add_argument("--model", required=True, choices=sorted(models), help="model to train")
    p.add_argument("--batch", type=int, help="batch size (default: the model's evaluation batch)")
    p.add_argument("--iterations", type=int, default=2, help="training iterations to record (default 2)")
    p.add_argument("-o", "--output", required=True, help="output trace (.jsonl or .jsonl.gz)")
    p.add_argument("--fake", action="store_true", help="FakeTensors: exact sizes, no memory; implies an estimate")
    p.add_argument("--device-profile", choices=["a100", "h100"],
                   help="estimate durations with this GPU's roofline instead of measuring")
    p.add_argument("--launch-overhead", type=float, default=0.0, metavar="NS",
                   help="with an estimate: ns added to every op that launches a kernel (default 0)")
    p.add_argument("--device", help="cpu or cuda[:N] (default: cuda when available, else cpu)")
    p.add_argument("--seed", type=int, default=0, help="torch.manual_seed (default 0)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = p.parse_args(argv)
    if args.batch is not None and args.batch < 1:
        p.error("--batch must be at least 1")
    if args.iterations < 1:
        p.error("--iterations must be at least 1")
    if args.launch_overhead < 0:
        p.error("--launch-overhead must be >= 0")
    if args.launch_overhead and not (args.fake or args.device_profile):
        p.error("--launch-overhead needs an estimate (--device-profile or --fake)")
    return args


def main(argv=None):
    try:
        import torch
    except ImportError as e:
        print(f"record_pytorch: error: torch is not importable ({e}); install python3-torch", file=sys.stderr)
        return 1
    from coopsim.recording import compat
    from coopsim.recording.cost import Roofline
    from coopsim.recording.models import MODELS
    from coopsim.recording.session import record
    from coopsim.recording.timing import CudaEvents, Estimate, WallClock

    args = parse_args(argv, MODELS)
    spec = MODELS[args.model]
    batch = args.batch or spec.batch
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.fake and compat.FakeTensorMode is None:
        print("record_pytorch: error: --fake needs torch >= 1.13 (FakeTensorMode)", file=sys.stderr)
        return 1
    if args.fake and device.startswith("cuda") and not torch.cuda.is_available():
        device = "cpu"
    profile = args.device_profile or ("a100" if args.fake else None)
    if profile:
        timer = Estimate(Roofline(profile, args.launch_overhead))
    elif device.startswith("cuda"):
        timer = CudaEvents()
    else:
        timer = WallClock()
    torch.manual_seed(args.seed)
    log = None if args.quiet else (lambda msg: print(f"record_pytorch: {msg}", file=sys.stderr))
    started = time.perf_counter()
    try:
        builder = record(spec, batch, args.iterations, device, args.fake, timer, log)
        header = {
            "format": "coopsim-trace", "version": 1, "model": spec.name,
            "source": {
                "tool": "scripts/record_pytorch.py", "torch": compat.version(), "model": spec.summary,
                "batch": batch, "evaluation_batch": spec.batch, "iterations": args.iterations,
                "optimizer": spec.optimizer, "dtype": "float32", "fake": args.fake, "seed": args.seed,
                "durations": timer.describe(),
            },
            "time_unit": "ns", "iterations": args.iterations,
            "device": (f"fake {device} tensors (FakeTensorMode, no storage)" if args.fake else
                       torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") else "cpu"),
        }
        builder.write(args.output, header)
    except Exception as e:  # one line, no traceback: the recorder's contract with scripts and tests
        print(f"record_pytorch: error: {args.model}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
              file=sys.stderr)
        return 1
    if log:
        events = len(builder.events)
        log(f"wrote {args.output}: {len(builder.tensors)} tensors, {len(builder.ops)} ops, {events} events, "
            f"peak live {builder.peak_live()} bytes, {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
