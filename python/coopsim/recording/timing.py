"""Per-op durations: CUDA events on a GPU, the wall clock on the CPU, or a roofline estimate.

Every timer has begin(op name) -> token and stop(token) -> sample, called right around the op: a sample is
nanoseconds, None for the estimate (which needs the op's tensors: estimate(...)), or for CUDA events a
pending pair handed to defer() and resolved by sync() after a device synchronisation (the recorder calls
it at the end of each iteration). The builder keeps all samples of an op; its duration is their median.
"""
import time

import torch


class WallClock:
    kind = "wall clock (CPU)"
    deterministic = False

    def begin(self, name=None):
        return time.perf_counter_ns()

    def stop(self, token):
        return time.perf_counter_ns() - token

    def sync(self, builder):
        pass

    def describe(self):
        return {"timing": "measured", "clock": "time.perf_counter_ns around each op on the CPU"}


class CudaEvents:
    """A torch.cuda.Event pair around each op, each pair queued behind a GPU spin (torch.cuda._sleep).

    Under the recorder the host is far slower than the GPU (Python dispatch and bookkeeping per op), so
    the GPU drains its queue between ops; a bare event pair would then time the host launching the
    op's kernels, not the kernels (measured on an H200 with torch 2.11: ResNet-50 batch 115 summed to
    93 ms per iteration against 55.6 ms for the uninstrumented step). The spin keeps the GPU busy while
    the host enqueues the start event, the op and the stop event, so the pair times only the op's GPU
    work. The spin lasts twice the host enqueue of the op name's previous call (at least 50 us, at
    most 20 ms): the previous call, not the longest, because a first call can take milliseconds
    (CUDA lazy module loading, library handles) and a spin sized by it on every later call made a
    3-iteration GPT-2 recording outlast 80 s on the H200. A sample whose enqueue outlasted its spin
    is counted as unshielded (describe()); the median over iterations leaves such outliers out.
    The spins add GPU time only where the GPU would otherwise wait for the host."""
    kind = "CUDA events"
    deterministic = False
    MIN_SPIN_NS = 50_000
    MAX_SPIN_NS = 20_000_000

    def __init__(self):
        self.pending = []  # (op id, start event, end event)
        self.host_ns = {}  # op name -> host enqueue of its previous call (ns)
        self.cycles_per_ns = None
        self.samples = 0
        self.unshielded = 0

    def _clock(self):
        """SM cycles per ns of event time, from a spin of 10^7 cycles (median of three)."""
        rates = []
        for _ in range(3):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch.cuda._sleep(10_000_000)
            stop.record()
            stop.synchronize()
            rates.append(10_000_000 / (start.elapsed_time(stop) * 1e6))
        return sorted(rates)[1]

    def begin(self, name=None):
        if self.cycles_per_ns is None:
            self.cycles_per_ns = self._clock()
        spin_ns = min(self.MAX_SPIN_NS, max(self.MIN_SPIN_NS, 2 * self.host_ns.get(name, 0)))
        torch.cuda._sleep(int(spin_ns * self.cycles_per_ns))
        start = torch.cuda.Event(enable_timing=True)
        start.record()
        return (name, spin_ns, time.perf_counter_ns(), start)

    def stop(self, token):
        name, spin_ns, host_t0, start = token
        stop = torch.cuda.Event(enable_timing=True)
        stop.record()
        host = time.perf_counter_ns() - host_t0
        self.host_ns[name] = host
        self.samples += 1
        self.unshielded += host > spin_ns
        return (start, stop)

    def defer(self, op_id, sample):
        self.pending.append((op_id, sample[0], sample[1]))

    def sync(self, builder):
        torch.cuda.synchronize()
        for op_id, start, stop in self.pending:
            builder.add_sample(op_id, start.elapsed_time(stop) * 1e6)  # ms -> ns
        self.pending = []

    def describe(self):
        return {"timing": "measured",
                "clock": "torch.cuda.Event pairs around each op on the current stream, each behind a "
                         "torch.cuda._sleep spin longer than the op's host enqueue, so a pair times the GPU work",
                "gpu": torch.cuda.get_device_name(), "samples": self.samples,
                "unshielded_samples": self.unshielded, "min_spin_ns": self.MIN_SPIN_NS}


class Estimate:
    kind = "roofline estimate"
    deterministic = True

    def __init__(self, roofline):
        self.roofline = roofline

    def begin(self, name=None):
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
