#!/usr/bin/env python3
"""The blocks ops take inside themselves: cuDNN's convolution workspaces as the recorder's rule sizes
them (python/coopsim/recording/cudnn_workspaces.py), worked by hand from the rule and compared with
what the H200 allocator served for ResNet-50 (traces/h200/resnet50_b115, the blocks merged from its
snapshot); and the merge of a snapshot's in-op blocks into a trace (in_op_blocks.py) on a hand-made
history. TAP.

Usage: in_op_blocks_test.py PATH/TO/coopsim   (run from the project root)"""
import gzip
import json
import os
import sys
import tempfile

from tap import finish, runner

sys.path.insert(0, os.path.join(os.getcwd(), "python"))
from coopsim.recording import cudnn_workspaces, in_op_blocks  # noqa: E402

run = runner(sys.argv[1], timeout=600)
results = []
scratch = tempfile.mkdtemp(prefix="coopsim-in-op-")


def case(name, ok, detail=""):
    results.append((name, bool(ok), detail))


try:
    import torch
except ImportError:  # the rule needs tensors' shapes: run again under a Python with torch, else skip
    torch = None
    for other in (os.environ.get("COOPSIM_TORCH2_PYTHON", ""), "/usr/bin/python3"):
        if other and os.path.exists(other) and os.path.realpath(other) != os.path.realpath(sys.executable) \
                and not os.environ.get("COOPSIM_IN_OP_REEXEC"):
            os.environ["COOPSIM_IN_OP_REEXEC"] = "1"
            os.execv(other, [other] + sys.argv)
    results.append(("cuDNN workspace rule # SKIP no Python with torch", True, ""))

F32 = 4
if torch is not None:
    def conv(n, c, h, k, r, stride=1, pad=0, groups=1, dtype=None):
        x = torch.empty(n, c, h, h, device="meta", dtype=dtype or torch.float32)
        w = torch.empty(k, c // groups, r, r, device="meta", dtype=dtype or torch.float32)
        return x, w, [stride, stride], [pad, pad], [1, 1], False, [0, 0], groups

    def forward(*geometry):
        x, w, stride, pad, dil, transposed, outpad, groups = geometry
        return cudnn_workspaces.transient("aten::convolution", (x, w, None, stride, pad, dil, transposed, outpad, groups))

    def backward(gy_shape, *geometry, mask=(True, True, False)):
        x, w, stride, pad, dil, transposed, outpad, groups = geometry
        gy = torch.empty(gy_shape, device="meta", dtype=x.dtype)
        return cudnn_workspaces.transient("aten::convolution_backward",
                                          (gy, x, w, None, stride, pad, dil, transposed, outpad, groups, list(mask)))

    # ResNet-50 at batch 115 (float32): hand-worked from the rule; where the rule is exact the figure is
    # also the block the H200 allocator served for that convolution (traces/h200/resnet50_b115).
    x56, y56, w33 = 115 * 64 * 56 * 56 * F32, 115 * 64 * 56 * 56 * F32, 64 * 64 * 9 * F32
    g = conv(115, 64, 56, 64, 3, pad=1)  # layer1.x.conv2: NHWC transforms of input, output and weight
    case("3x3 forward: input + output + weight + 147 (184,795,283, as served)",
         forward(*g) == [x56 + y56 + w33 + 147] == [184795283], forward(*g))
    case("3x3 backward: data like the forward, filter = grad_output + input + weight + 8 MiB",
         backward((115, 64, 56, 56), *g) == [x56 + y56 + w33 + 147, y56 + x56 + w33 + (8 << 20)],
         backward((115, 64, 56, 56), *g))
    g = conv(115, 256, 56, 64, 1)  # layer1.1.conv1: 1x1 over 3,136 positions runs on NCHW
    case("1x1 stride 1, >= 784 positions: 400 bytes forward, batch x weight + 400 for the filter (7,537,040, as served)",
         forward(*g) == [400] and backward((115, 64, 56, 56), *g) == [400, 115 * 64 * 256 * F32 + 400] == [400, 7537040],
         (forward(*g), backward((115, 64, 56, 56), *g)))
    g = conv(115, 1024, 14, 256, 1)  # layer3.x.conv1: natively forward, transformed for the filter
    gy = 115 * 256 * 14 * 14 * F32
    case("1x1 stride 1 over 196 positions: native forward and data, transformed filter",
         forward(*g) == [400] and backward((115, 256, 14, 14), *g)
         == [400, gy + 115 * 1024 * 196 * F32 + 1024 * 256 * F32 + (8 << 20)], backward((115, 256, 14, 14), *g))
    g = conv(115, 2048, 7, 512, 1)  # layer4.x.conv1: too few positions to run natively, 1x1: no weight copy
    case("1x1 over 49 positions: input + output + 147",
         forward(*g) == [115 * 2048 * 49 * F32 + 115 * 512 * 49 * F32 + 147], forward(*g))
    g = conv(115, 3, 224, 64, 7, stride=2, pad=3)  # conv1: the output is 112 x 112
    case("7x7 stride 2 pad 3: output shape from the geometry (input + output + weight + 147)",
         forward(*g) == [115 * 3 * 224 * 224 * F32 + 115 * 64 * 112 * 112 * F32 + 64 * 3 * 49 * F32 + 147], forward(*g))
    case("backward without grad_input (conv1): only the filter's workspace",
         len(backward((115, 64, 112, 112), *g, mask=(False, True, False))) == 1)
    g = conv(8, 32, 56, 32, 3, pad=1, groups=32)
    case("depthwise float32: no cuDNN workspace (native kernel)", forward(*g) == [], forward(*g))
    g = conv(8, 32, 56, 32, 3, pad=1, dtype=torch.bfloat16)
    case("bfloat16: the rule scales with the operands' bytes",
         forward(*g) == [2 * (8 * 32 * 56 * 56 * 2) + 32 * 32 * 9 * 2 + 147], forward(*g))
    x = torch.empty(8, 4, device="meta")
    case("other ops and 1-D inputs: nothing",
         cudnn_workspaces.transient("aten::mm", (x, x)) == [] and cudnn_workspaces.transient(
             "aten::convolution", (x, x, None, [1], [0], [1], False, [0], 1)) == [])

# The merge on a hand-made trace and history: tensors a (1,000 B) and b (2,000 B); op 0 makes a,
# op 1 makes b and takes two workspaces (333 B, then 444 B) one after the other, and a 555 B block it
# keeps until after op 2.
header = {"format": "coopsim-trace", "version": 1, "model": "m", "source": {}, "time_unit": "ns", "iterations": 1}
records = [{"kind": "tensor", "id": 0, "bytes": 1000, "role": "activation", "name": "a"},
           {"kind": "tensor", "id": 1, "bytes": 2000, "role": "activation", "name": "b"},
           {"kind": "op", "id": 0, "name": "x", "duration": 10, "outputs": [0]},
           {"kind": "op", "id": 1, "name": "y", "duration": 10, "inputs": [0], "outputs": [1]},
           {"kind": "op", "id": 2, "name": "z", "duration": 10, "inputs": [1]},
           {"kind": "iteration", "index": 0, "t": 0},
           {"kind": "alloc", "tensor": 0, "t": 0}, {"kind": "compute", "op": 0, "t": 0},
           {"kind": "alloc", "tensor": 1, "t": 10}, {"kind": "compute", "op": 1, "t": 10},
           {"kind": "free", "tensor": 0, "t": 20}, {"kind": "compute", "op": 2, "t": 20},
           {"kind": "free", "tensor": 1, "t": 30}]
history = [{"action": "alloc", "addr": 1, "size": 1000}, {"action": "alloc", "addr": 2, "size": 2000},
           {"action": "alloc", "addr": 3, "size": 333}, {"action": "free_requested", "addr": 3, "size": 333},
           {"action": "alloc", "addr": 4, "size": 444}, {"action": "free_requested", "addr": 4, "size": 444},
           {"action": "alloc", "addr": 5, "size": 555}, {"action": "free_requested", "addr": 1, "size": 1000},
           {"action": "free_requested", "addr": 5, "size": 555}, {"action": "free_requested", "addr": 2, "size": 2000}]
h, out = in_op_blocks.merge(header, records, history, "s.pickle")
events = [(r["kind"], r.get("tensor", r.get("op"))) for r in out if r["kind"] in ("alloc", "free", "compute")]
case("merge: workspaces one after the other, the last around the compute event; a kept block freed after "
     "the op that follows its free",
     events == [("alloc", 0), ("compute", 0), ("alloc", 1), ("alloc", 4), ("alloc", 2), ("free", 2), ("alloc", 3),
                ("compute", 1), ("free", 3), ("free", 0), ("compute", 2), ("free", 4), ("free", 1)], events)
new = {r["id"]: r["bytes"] for r in out if r["kind"] == "tensor" and r["id"] > 1}
case("merge: the blocks are workspace tensors of the served sizes", new == {2: 333, 3: 444, 4: 555}, new)
case("merge: the header says what came in",
     h["source"]["in_op_blocks"]["blocks"] == 3 and h["source"]["in_op_blocks"]["freed_inside"] == 2
     and h["source"]["in_op_blocks"]["unmatched_trace_allocations"] == 0, h["source"]["in_op_blocks"])
path = os.path.join(scratch, "merged.jsonl")
with open(path, "w") as f:
    f.write("".join(json.dumps(r) + "\n" for r in [h] + out))
status, _, err = run("validate", path)
case("merge: the merged trace validates", status == 0, err[-300:])
rule = [dict(records[0], id=0), {"kind": "tensor", "id": 5, "bytes": 77, "role": "workspace", "name": "m:y.cudnn_workspace0"}]
with_rule = rule + records[1:] + [{"kind": "alloc", "tensor": 5, "t": 10}, {"kind": "free", "tensor": 5, "t": 10}]
h2, out2 = in_op_blocks.merge(header, with_rule, history, "s.pickle")
case("merge: the rule's workspaces are replaced by the measured ones",
     h2["source"]["in_op_blocks"]["replaced_rule_blocks"] == 1 and all(r.get("tensor") != 5 and r.get("id") != 5 for r in out2)
     and h2["source"]["in_op_blocks"]["blocks"] == 3, h2["source"]["in_op_blocks"])
same_size = history[:2] + [{"action": "alloc", "addr": 9, "size": 2000}, {"action": "free_requested", "addr": 9, "size": 2000}]
h3, _ = in_op_blocks.merge(header, records, same_size, "s.pickle")
case("merge: an extra block of a traced tensor's size is the recorder's, left out",
     h3["source"]["in_op_blocks"]["blocks"] == 0 and h3["source"]["in_op_blocks"]["left_out_tensor_sized"] == 1,
     h3["source"]["in_op_blocks"])
try:
    in_op_blocks.read_history(path)
    case("merge: a file that is not a snapshot is refused", False, "no error")
except Exception as e:  # a JSON-lines file is no pickle
    case("merge: a file that is not a snapshot is refused", type(e).__name__ in ("UnpicklingError", "ValueError"), repr(e))

finish(results, scratch)
