"""Blocks ops allocate inside themselves, taken from the allocator's own history into the trace.

A recording on a real GPU with --memory-snapshot has, beside the trace, the caching allocator's
history of the same run (torch.cuda.memory._snapshot(): every alloc and free the allocator served, in
order, with its requested size). The trace holds the tensors ATen ops return; the history also holds
what ops took for themselves and the recorder cannot see (cuDNN's convolution workspaces, a block a
library keeps). This module finds those blocks and writes them into the trace, where the op that took
them runs, so that the trace drives coopsim's pytorch model to the allocator's peaks.

Matching: the history's allocations are walked in order; each is matched to the earliest unmatched
trace allocation of the same byte count up to WINDOW past the latest matched one (the trace and the allocator see
the same requests, in nearly the same order: a recorder numbers some tensors when it first sees them
as inputs). An allocation with no match is an in-op block of the op whose compute event follows the
last matched allocation. A block freed before the next matched allocation lived inside its op
(a workspace): it is allocated before the compute event and freed after it, and the several
workspaces of one op (convolution_backward: backward-data's, then backward-filter's) one after the
other, the last around the compute event. Any other block is freed after the compute event that
follows the last matched allocation before its free, or stays allocated.

The blocks a rule put there (cudnn_workspaces.py, tensors named *.cudnn_workspaceN) are replaced.
"""
import bisect
import gzip
import json
import pickle

WINDOW = 400
RULE_SUFFIX = ".cudnn_workspace"


def _open(path, mode):
    return gzip.open(path, mode) if str(path).endswith(".gz") else open(path, mode)


def read_trace(path):
    with _open(path, "rt") as f:
        lines = [line for line in f if line.strip()]
    return json.loads(lines[0]), [json.loads(line) for line in lines[1:]]


def read_history(path):
    """The device's alloc / free_requested events of a pickled snapshot (the device with the most)."""
    with _open(path, "rb") as f:
        snapshot = pickle.load(f)
    traces = snapshot.get("device_traces") if isinstance(snapshot, dict) else None
    if not traces:
        raise ValueError(f"{path}: not a memory snapshot with allocation history (no device_traces)")
    events = max(traces, key=len)
    return [e for e in events if e.get("action") in ("alloc", "free_requested")]


def _drop_rule_blocks(records):
    rule = {r["id"] for r in records if r.get("kind") == "tensor" and r.get("role") == "workspace"
            and RULE_SUFFIX in str(r.get("name", ""))}
    kept = [r for r in records if not ((r.get("kind") == "tensor" and r["id"] in rule)
                                       or (r.get("kind") in ("alloc", "free") and r.get("tensor") in rule))]
    return kept, len(rule)


def _match(records, history):
    """Per in-op block: (bytes, compute position, "inside" | free position | None); the count of trace
    allocations left unmatched; the count of tensor-sized blocks left out."""
    size = {r["id"]: r["bytes"] for r in records if r.get("kind") == "tensor"}
    events = [i for i, r in enumerate(records) if r.get("kind") in ("alloc", "compute", "free")]
    allocs = [i for i in events if records[i]["kind"] == "alloc"]
    computes = [i for i in events if records[i]["kind"] == "compute"]
    free_of, open_alloc = {}, {}  # trace alloc position -> its free's position
    for i in events:
        r = records[i]
        if r["kind"] == "alloc":
            open_alloc[r["tensor"]] = i
        elif r["kind"] == "free" and r["tensor"] in open_alloc:
            free_of[open_alloc.pop(r["tensor"])] = i
    used = [False] * len(allocs)
    first_free = reached = 0  # the first unmatched trace allocation; the latest matched one
    pos = -1  # the latest trace position a matched alloc or free has reached
    serial = 0  # matched allocs and frees so far: a block with none between its alloc and free lived inside its op
    blocks, matched_at, live = [], {}, {}

    def next_compute(after):
        k = bisect.bisect_right(computes, after)
        return computes[k] if k < len(computes) else None

    for e in history:
        addr = e["addr"]
        if e["action"] == "alloc":
            hit = None
            for k in range(first_free, min(max(first_free, reached) + WINDOW, len(allocs))):
                if not used[k] and size[records[allocs[k]]["tensor"]] == e["size"]:
                    hit = k
                    break
            if hit is not None:
                used[hit] = True
                reached = max(reached, hit)
                while first_free < len(allocs) and used[first_free]:
                    first_free += 1
                matched_at[addr] = allocs[hit]
                pos = max(pos, allocs[hit])
                serial += 1
                continue
            at = next_compute(pos)
            if at is None:
                continue  # after the trace's last op (the recorder's own teardown)
            live[addr] = len(blocks)
            blocks.append([e["size"], at, None, serial])
        elif addr in matched_at:
            free = free_of.get(matched_at.pop(addr))
            if free is not None:
                pos = max(pos, free)
            serial += 1
        elif addr in live:
            block = blocks[live.pop(addr)]
            block[2] = "inside" if serial == block[3] else next_compute(pos)
    unmatched = used.count(False)
    # An unmatched allocation of a byte count some traced tensor has is taken for a tensor of the
    # recorder's own work (an op it ran again to time it), not a library's block: left out.
    tensor_sizes = set(size.values())
    kept = [(b[0], b[1], b[2]) for b in blocks if b[0] not in tensor_sizes]
    return kept, unmatched, len(blocks) - len(kept)


def merge(header, records, history, snapshot_name):
    """(header, records) with the history's in-op blocks; header's source gains `in_op_blocks`."""
    records, replaced = _drop_rule_blocks(records)
    blocks, unmatched, skipped = _match(records, history)
    next_id = max((r["id"] for r in records if r.get("kind") == "tensor"), default=-1) + 1
    by_compute, frees_after = {}, {}
    new_tensors = []
    for nbytes, at, free in blocks:
        tid = next_id
        next_id += 1
        op = records[at]["op"]
        new_tensors.append({"kind": "tensor", "id": tid, "bytes": nbytes, "role": "workspace",
                            "name": f"in_op_block[op {op}]"})
        by_compute.setdefault(at, []).append((tid, free))
        if free not in (None, "inside"):
            frees_after.setdefault(free, []).append(tid)
    out = []
    last_tensor = max((i for i, r in enumerate(records) if r.get("kind") == "tensor"), default=-1)
    for i, r in enumerate(records):
        t = r.get("t")
        stamp = {"t": t} if t is not None else {}
        if i in by_compute:
            inside = [tid for tid, free in by_compute[i] if free == "inside"]
            kept = [tid for tid, free in by_compute[i] if free != "inside"]
            for tid in kept:
                out.append({"kind": "alloc", "tensor": tid, **stamp})
            for tid in inside[:-1]:
                out.append({"kind": "alloc", "tensor": tid, **stamp})
                out.append({"kind": "free", "tensor": tid, **stamp})
            for tid in inside[-1:]:
                out.append({"kind": "alloc", "tensor": tid, **stamp})
            out.append(r)
            for tid in inside[-1:]:
                out.append({"kind": "free", "tensor": tid, **stamp})
        else:
            out.append(r)
        for tid in frees_after.get(i, []):
            out.append({"kind": "free", "tensor": tid, **stamp})
        if i == last_tensor:
            out.extend(new_tensors)
    header = dict(header)
    source = dict(header.get("source") or {})
    source["in_op_blocks"] = {
        "from": snapshot_name, "blocks": len(blocks),
        "freed_inside": sum(1 for b in blocks if b[2] == "inside"),
        "largest_bytes": max((b[0] for b in blocks), default=0),
        "replaced_rule_blocks": replaced, "left_out_tensor_sized": skipped, "unmatched_trace_allocations": unmatched,
        "rule": "allocations of the allocator's history with no trace tensor of that size among the next "
                f"{WINDOW} trace allocations, placed at the op that follows (python/coopsim/recording/in_op_blocks.py)"}
    header["source"] = source
    return header, out


def write_trace(path, header, records):
    """Through coopsim's own loader and writer, as the recorder writes every trace."""
    from ..sim import write_trace as library_write

    lines = [json.dumps(header, separators=(",", ":"))] + [json.dumps(r, separators=(",", ":")) for r in records]
    library_write("".join(line + "\n" for line in lines), path)


def merge_files(trace_path, snapshot_path, output_path, snapshot_name=None):
    """Reads a trace and the snapshot of the same run, writes the trace with its in-op blocks; returns
    the header's `in_op_blocks` summary."""
    import os

    header, records = read_trace(trace_path)
    history = read_history(snapshot_path)
    header, records = merge(header, records, history, snapshot_name or os.path.basename(str(snapshot_path)))
    write_trace(output_path, header, records)
    return header["source"]["in_op_blocks"]
