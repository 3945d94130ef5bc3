"""Per-op durations: CUDA events on a GPU, the wall clock on the CPU, or a roofline estimate.

Every timer has begin() -> token and stop(token) -> sample, called right around the op: a sample is
nanoseconds, None for the estimate (which needs the op's tensors: estimate(...)), or for CUDA events a
pending pair handed to defer() and resolved by sync() after a device synchronisation (the recorder calls
it at the end of each iteration). The builder keeps all samples of an op; its duration is their median.
"""
import time

import torch


class WallClock:
    kind = "wall clock (CPU)"
    deterministic = False

    def begin(self):
        return time.perf_counter_ns()

    def stop(self, token):
        return time.perf_counter_ns() - token

    def sync(self, builder):
        pass

    def describe(self):
        return {"timing": "measured", "clock": "time.perf_counter_ns around each op on the CPU"}


class CudaEvents:
    kind = "CUDA events"
    deterministic = False

    def __init__(self):
        self.pending = []  # (op id, start event, end event)

    def begin(self):
        start = torch.cuda.Event(enable_timing=True)
        start.record()
        return start

    def stop(self, token):
        stop = torch.cuda.Event(enable_timing=True)
        stop.record()
        return (token, stop)

    def defer(self, op_id, sample):
        self.pending.append((op_id, sample[0], sample[1]))

    def sync(self, builder):
        torch.cuda.synchronize()
        for op_id, start, stop in self.pending:
            builder.add_sample(op_id, start.elapsed_time(stop) * 1e6)  # ms -> ns
        self.pending = []

    def describe(self):
        return {"timing": "measured", "clock": "torch.cuda.Event pairs around each op on the current stream",
                "gpu": torch.cuda.get_device_name()}


class Estimate:
    kind = "roofline estimate"
    deterministic = True

    def __init__(self, roofline):
        self.roofline = roofline

    def begin(self):
        return None

    def stop(self, token):
        return None

    def estimate(self, name, args, inputs, outputs, mutated, views_only):
        return self.roofline.estimate(name, args, inputs, outputs, mutated, views_only)

    def sync(self, builder):
        pass

    def describe(self):
        d = {"timing": "estimated"}
        d.update(self.roofline.describe())
        return d
