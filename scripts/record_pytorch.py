#!/usr/bin/env python3
"""Records a coopsim trace v1 (docs/trace-format.md) from real PyTorch training steps.

    scripts/record_pytorch.py --model resnet50 --batch 2 -o out/resnet50.jsonl.gz
    scripts/record_pytorch.py --model bert_large --fake --device-profile a100 -o bert.jsonl.gz
    scripts/record_pytorch.py --model llama_1b --fake --amp bf16 --checkpoint all-blocks -o llama.jsonl.gz
    scripts/record_pytorch.py --model mymodels.py:build --fake -o mine.jsonl.gz

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

This script is a thin command line over the coopsim Python package (python/coopsim, docs/python.md):
the recorder lives in python/coopsim/recording, the options in python/coopsim/recording/cli.py.

Works with torch 1.13 (Debian's python3-torch) and 2.x. Exit status 0 on success, 1 on error (one line on
stderr; no output file is left behind), 2 on bad arguments.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))

from coopsim.recording.cli import main  # noqa: E402  (imports no torch: main reports a missing torch)

if __name__ == "__main__":
    sys.exit(main())
