#!/usr/bin/env python3
"""Times real training steps of a bundled model on a CUDA device without the recorder, to compare with
the durations `record_pytorch.py` measured (docs/recording.md, "Checking a recording against the
allocator"): the step is the recorder's (forward under autocast when --amp, loss, backward, optimizer
step, zero_grad(set_to_none=True)), a torch.cuda.Event pair around each of --iterations steps after
--warmup untimed ones. Prints one JSON line: per-step milliseconds (mean, min, max) and the allocator's
peaks of the timed steps.

    scripts/time_pytorch_step.py --model resnet50 --batch 115
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))


def main():
    p = argparse.ArgumentParser(prog="time_pytorch_step.py")
    p.add_argument("--model", required=True)
    p.add_argument("--batch", type=int)
    p.add_argument("--amp", choices=["bf16", "fp16"])
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iterations", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    import torch
    from coopsim.recording import amp as amp_mod
    from coopsim.recording.models import MODELS
    from coopsim.recording.optim import make_optimizer
    if not torch.cuda.is_available():
        print("time_pytorch_step: error: no CUDA device", file=sys.stderr)
        return 1
    if args.model not in MODELS:
        p.error(f"--model: one of {', '.join(sorted(MODELS))}")
    spec = MODELS[args.model]
    batch = args.batch or spec.batch
    torch.manual_seed(args.seed)
    model = spec.build().to("cuda")
    model.train()
    opt = make_optimizer(spec.optimizer, model.parameters(), False)
    scaler = torch.cuda.amp.GradScaler() if args.amp == "fp16" else None
    times = []
    for it in range(args.warmup + args.iterations):
        data = spec.inputs(batch, "cuda")
        if it == args.warmup:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        with amp_mod.autocast(args.amp, "cuda") if args.amp else torch.autocast("cuda", enabled=False):
            loss = spec.loss(model, data)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        opt.zero_grad(set_to_none=True)
        stop.record()
        del loss, data
        torch.cuda.synchronize()
        if it >= args.warmup:
            times.append(start.elapsed_time(stop))
    print(json.dumps({"model": args.model, "batch": batch, "amp": args.amp, "torch": torch.__version__,
                      "gpu": torch.cuda.get_device_name(), "iterations": args.iterations,
                      "step_ms": {"mean": sum(times) / len(times), "min": min(times), "max": max(times)},
                      "max_memory_allocated": torch.cuda.max_memory_allocated(),
                      "max_memory_reserved": torch.cuda.max_memory_reserved()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
