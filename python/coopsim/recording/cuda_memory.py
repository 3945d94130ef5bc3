"""The CUDA caching allocator's own view of a recorded run: a memory-history snapshot taken in the same
run as the trace, and the allocator's peak counters, so that the recorder's trace and coopsim's pytorch
model can be checked against the real allocator (docs/recording.md, "Checking a recording against the
allocator").

torch.cuda.memory._record_memory_history changed its signature in torch 2.1:
  2.1 and later:  _record_memory_history(enabled="all", context="all", stacks="all", max_entries=N)
  2.0:            _record_memory_history(enabled: bool, record_context=True, trace_alloc_max_entries=1,
                                         trace_alloc_record_context=False)
  1.13:           _record_memory_history(enabled: bool, device=None): segment stacks only, no history,
                  so a snapshot is refused there.
2.0 and later record every alloc / free / segment event into device_traces once enabled. The snapshot is
torch.cuda.memory._snapshot() pickled (what _dump_snapshot writes), gzip-compressed when the file name
ends in .gz (coopsim import torch-snapshot reads either).
"""
import gzip
import inspect
import os
import pickle

import torch

from .trace import output_file

MAX_ENTRIES = 1 << 24  # the ring buffer never wraps in a recording: the import then needs no initial state


class MemoryHistory:
    """Records the caching allocator's history from start() on; snapshot() takes it, write() pickles it."""

    def __init__(self, device):
        if not str(device).startswith("cuda") or not torch.cuda.is_available():
            raise RuntimeError("a memory snapshot needs a CUDA device (torch.cuda.is_available() is False "
                               f"or the device is {device!r})")
        self.device = torch.device(device)
        self.started = False

    def start(self):
        record = torch.cuda.memory._record_memory_history
        params = inspect.signature(record).parameters
        if "max_entries" not in params and "trace_alloc_max_entries" not in params:
            raise RuntimeError(f"a memory snapshot needs torch >= 2.0 (torch {torch.__version__} records no "
                               "allocation history)")
        torch.cuda.synchronize(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        where = {"device": self.device} if "device" in params else {}
        if "max_entries" in params:  # torch >= 2.1: Python stacks of each allocation, no C++ unwinding
            record(enabled="all", context="alloc", stacks="python", max_entries=MAX_ENTRIES, **where)
        else:  # torch 2.0
            record(True, record_context=True, trace_alloc_max_entries=MAX_ENTRIES,
                   trace_alloc_record_context=True, **where)
        self.started = True

    def stop(self):
        if not self.started:
            return
        record = torch.cuda.memory._record_memory_history
        params = inspect.signature(record).parameters
        where = {"device": self.device} if "device" in params else {}
        record(None if "max_entries" in params else False, **where)
        self.started = False

    def stats(self):
        """The allocator's counters for the recorded run (bytes; the PyTorch names)."""
        torch.cuda.synchronize(self.device)
        s = torch.cuda.memory_stats(self.device)
        return {"max_memory_allocated": torch.cuda.max_memory_allocated(self.device),
                "max_memory_reserved": torch.cuda.max_memory_reserved(self.device),
                "num_alloc_retries": s.get("num_alloc_retries", 0),
                "num_ooms": s.get("num_ooms", 0),
                "allocation_count": s.get("allocation.all.allocated", 0)}

    def snapshot(self):
        """torch.cuda.memory._snapshot(): the end state and the recorded history (plain data)."""
        torch.cuda.synchronize(self.device)
        return torch.cuda.memory._snapshot()

    @staticmethod
    def write(snapshot, path):
        """Pickles a snapshot as _dump_snapshot does, written as the recorder writes traces
        (trace.output_file: a temporary file renamed over a regular file, a FIFO written directly,
        nothing left behind on error); gzip when path ends in .gz."""
        path = os.fspath(path)
        with output_file(path) as raw:
            if path.endswith(".gz"):
                with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as out:
                    pickle.dump(snapshot, out)
            else:
                pickle.dump(snapshot, raw)
