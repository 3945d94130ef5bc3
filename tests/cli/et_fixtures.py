"""Test fixtures shared by the CLI tests that need an execution trace's own Kineto trace."""
import gzip
import json


def kineto_from_et(et_path, out_path, dur_us):
    """Writes a Kineto trace made from an ET's own op nodes (same pid, one Kineto thread per ET
    thread, start order, `dur_us` each) and returns its path. The public resnet ET has no Kineto
    trace of its own run; linked with this one it gives a ResNet-50 training trace with dataflow."""
    with gzip.open(et_path, "rt") as f:
        et = json.load(f)
    events = []
    for i, node in enumerate(sorted(et["nodes"], key=lambda n: n["id"])):
        attrs = {a["name"]: a["value"] for a in node["attrs"]}
        name = node["name"]
        if attrs.get("scope") == 7 or name.startswith(("[pytorch|profiler|", "## ")) or "#" in name:
            continue
        events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": et["pid"], "tid": 1000 + attrs["tid"],
                       "ts": i, "dur": dur_us})
    with open(out_path, "w") as f:
        json.dump({"traceEvents": events}, f)
    return out_path
