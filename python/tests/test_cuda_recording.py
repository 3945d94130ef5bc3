"""The recorder's CUDA side (docs/recording.md, "Checking a recording against the allocator"):
--memory-snapshot and the CUDA-event timer. Without CUDA (Debian's torch 1.13 on the CPU) the
refusals are checked and the GPU cases skip; with CUDA (torch >= 2.0) a small model is recorded with
its snapshot, and the snapshot replays at every recorded address with the allocator's own peaks."""
import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from conftest import ROOT, load_trace  # noqa: E402

RECORDER = os.path.join(ROOT, "scripts", "record_pytorch.py")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def recorder(*args):
    return subprocess.run([sys.executable, RECORDER, *args], capture_output=True, text=True, timeout=300)


def test_memory_snapshot_needs_a_real_run(tmp_path):
    p = recorder("--model", "mlp-tiny", "--fake", "--memory-snapshot", str(tmp_path / "s.pickle"),
                 "-o", str(tmp_path / "t.jsonl"))
    assert p.returncode == 2
    assert "--memory-snapshot needs a real run" in p.stderr
    assert os.listdir(tmp_path) == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without CUDA")
def test_memory_snapshot_without_cuda_is_one_line_and_no_file(tmp_path):
    p = recorder("--model", "mlp-tiny", "--device", "cpu", "--memory-snapshot", str(tmp_path / "s.pickle"),
                 "-o", str(tmp_path / "t.jsonl"))
    assert p.returncode == 1
    errors = [line for line in p.stderr.splitlines() if "error" in line]
    assert errors == ["record_pytorch: error: mlp-tiny: RuntimeError: a memory snapshot needs a CUDA device "
                      "(torch.cuda.is_available() is False or the device is 'cpu')"]
    assert os.listdir(tmp_path) == []


@needs_cuda
def test_cuda_recording_with_snapshot_replays_at_the_recorded_addresses(tmp_path, coopsim_exe):
    trace, snap = tmp_path / "t.jsonl.gz", tmp_path / "s.pickle.gz"
    p = recorder("--model", "mlp-tiny", "--device", "cuda", "--iterations", "3", "--memory-snapshot", str(snap),
                 "-o", str(trace))
    assert p.returncode == 0, p.stderr
    header, _ = load_trace(trace)
    durations, stats = header["source"]["durations"], header["source"]["cuda_memory"]
    assert durations["timing"] == "measured" and durations["samples"] > 0
    imported = tmp_path / "s.jsonl.gz"
    subprocess.run([coopsim_exe, "import", "torch-snapshot", str(snap), "-o", str(imported)], check=True,
                   capture_output=True)
    report = tmp_path / "r.json"
    subprocess.run([coopsim_exe, "run", str(imported), "-a", "pytorch", "-p", "keep", "--check-addresses", "-q",
                    "-o", str(report)], check=True, capture_output=True)
    r = json.loads(report.read_text())
    assert r["address_check"]["mismatches"] == 0 and r["address_check"]["checked"] == r["counters"]["allocs"]
    assert r["memory"]["peak_allocated_bytes"] == stats["max_memory_allocated"]
    assert r["memory"]["peak_reserved_bytes"] == stats["max_memory_reserved"]


@needs_cuda
def test_cuda_event_pairs_time_the_gpu_work_not_the_launch():
    from coopsim.recording.timing import CudaEvents
    timer = CudaEvents()
    x = torch.randn(1 << 20, device="cuda")
    samples = []
    for _ in range(5):
        token = timer.begin("aten::mul")
        y = x * 2
        timer.defer(0, timer.stop(token))
    torch.cuda.synchronize()

    class Builder:
        def add_sample(self, op_id, ns):
            samples.append(ns)
    timer.sync(Builder())
    del y
    # A 4 MiB elementwise kernel takes microseconds on any current GPU; the spin before each pair
    # (at least 50 us) must not be in it.
    assert len(samples) == 5 and max(samples[1:]) < timer.MIN_SPIN_NS
