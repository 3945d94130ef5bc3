#!/usr/bin/env python3
"""The recordings made on an NVIDIA H200 with PyTorch 2.11 (traces/h200/, traces/h200/README.md):
each memory snapshot, taken by the caching allocator in the same run as the trace, imports and
replays on the pytorch model at every recorded address with the recorded end state, and its peaks
are the allocator's own max_memory_allocated / max_memory_reserved of that run, to the byte. The
traces validate and say how they were timed. This pins the pytorch model and the snapshot importer
on a current PyTorch's real output, without a GPU. TAP.

Usage: gpu_recordings_test.py PATH/TO/coopsim   (run from the project root)"""
import glob
import gzip
import json
import os
import sys
import tempfile

from tap import finish, runner

sys.path.insert(0, os.path.join(os.getcwd(), "python"))
from coopsim.recording import in_op_blocks  # noqa: E402

run = runner(sys.argv[1], timeout=600)
results = []


def case(name, ok, detail=""):
    results.append((name, bool(ok), detail))


scratch = tempfile.mkdtemp(prefix="coopsim-h200-")
snapshots = sorted(glob.glob("traces/h200/*.snapshot.pickle.gz"))
case("the H200 recordings are present (traces/h200)", len(snapshots) >= 3, f"found {snapshots}")
for snap in snapshots:
    name = os.path.basename(snap)[:-len(".snapshot.pickle.gz")]
    trace = f"traces/h200/{name}.jsonl.gz"
    with gzip.open(trace, "rt") as f:
        header = json.loads(f.readline())
    source = header["source"]
    stats = source.get("cuda_memory", {})
    case(f"{name}: recorded with torch 2.x on a GPU, durations measured by CUDA events",
         source["torch"].startswith("2.") and source["durations"]["timing"] == "measured"
         and "torch.cuda.Event" in source["durations"]["clock"] and not source["fake"]
         and header["device"] == "NVIDIA H200", json.dumps(source)[:400])
    status, out, err = run("validate", trace)
    case(f"{name}: the trace validates", status == 0, err[-400:])

    blocks = source.get("in_op_blocks") or {}
    records = [json.loads(line) for line in gzip.open(trace, "rt") if line.strip()][1:]
    history = in_op_blocks.read_history(snap)
    again = in_op_blocks.merge(header, records, history, os.path.basename(snap))[0]["source"]["in_op_blocks"]
    case(f"{name}: the trace holds its snapshot's in-op blocks ({blocks.get('blocks')}), every trace allocation "
         "matched; merged again, nothing is added",
         blocks.get("from") == os.path.basename(snap) and blocks.get("unmatched_trace_allocations") == 0
         and again["blocks"] == 0 and again["unmatched_trace_allocations"] == 0, json.dumps([blocks, again])[:400])
    trace_report = os.path.join(scratch, f"{name}.trace.json")
    status, out, err = run("run", trace, "-a", "pytorch", "-p", "keep", "-b", "140GiB", "-q", "-o", trace_report)
    if status == 0:
        with open(trace_report) as f:
            tm = json.load(f)["memory"]
        for key, stat in (("peak_allocated_bytes", "max_memory_allocated"), ("peak_reserved_bytes", "max_memory_reserved")):
            error = 100.0 * (tm[key] - stats[stat]) / stats[stat]
            case(f"{name}: the CUDA-timed trace on the pytorch model reproduces {stat}() within 0.5 % ({error:+.4f} %)",
                 abs(error) <= 0.5, f"{tm[key]} vs {stats[stat]}")
    else:
        case(f"{name}: the CUDA-timed trace runs on the pytorch model", False, err[-400:])

    imported = os.path.join(scratch, f"{name}.snapshot.jsonl.gz")
    status, out, err = run("import", "torch-snapshot", snap, "-o", imported)
    case(f"{name}: the snapshot imports", status == 0 and "--check-addresses" in out, (out + err)[-400:])
    if status != 0:
        continue
    report = os.path.join(scratch, f"{name}.run.json")
    status, out, err = run("run", imported, "-a", "pytorch", "-p", "keep", "--check-addresses", "-q", "-o", report)
    ok = status == 0 and os.path.exists(report)
    case(f"{name}: the snapshot replays on the pytorch model (exit 0)", ok, (out + err)[-400:])
    if not ok:
        continue
    with open(report) as f:
        r = json.load(f)
    check = r["address_check"]
    allocs = r["counters"]["allocs"]
    case(f"{name}: every allocation at its recorded address ({check['checked']} of {allocs})",
         check["mismatches"] == 0 and check["checked"] == allocs and allocs > 1000, json.dumps(check))
    end = r["end_state"]
    case(f"{name}: the recorded end state (segments, reserved) is the modelled one",
         end.get("segments_match") is True and end.get("reserved_match") is True
         and end.get("first_difference") is None, json.dumps(end)[:400])
    m = r["memory"]
    case(f"{name}: peak allocated = the run's torch.cuda.max_memory_allocated()",
         m["peak_allocated_bytes"] == stats.get("max_memory_allocated"),
         f"{m['peak_allocated_bytes']} vs {stats.get('max_memory_allocated')}")
    case(f"{name}: peak reserved = the run's torch.cuda.max_memory_reserved()",
         m["peak_reserved_bytes"] == stats.get("max_memory_reserved"),
         f"{m['peak_reserved_bytes']} vs {stats.get('max_memory_reserved')}")

finish(results, scratch)
