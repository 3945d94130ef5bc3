"""In-memory coopsim trace v1, its records, and the output-file rules (docs/trace-format.md).

Ids are dense and given in order of first definition. An iteration that repeats the previous one
reuses its tensor and op ids: a tensor produced by the k-th execution of op NAME in a phase gets the
id it had in the previous iteration, provided that tensor is not live, has the same size, and (for a
view) the same storage root; an op execution reuses an op id when name, phase, occurrence, tensors,
views, mutations and the shapes of its arguments all match. Anything else gets a fresh id, so reuse
never changes what the trace says, only how compactly it says it.

Records: integers only (time_unit ns), definitions before events. The file itself is written by
coopsim's library (TraceBuilder.write -> coopsim.sim.write_trace: its loader checks every record,
its writer writes them, gzip chosen by a '.gz' suffix), so there is one trace writer.

output_file() is coopsim's output rules for the package's other files (docs/user-guide.md, "Output
files"): a temporary file from mkstemp in OUT's directory renamed over OUT and removed on any error;
a FIFO or character device written directly; a symbolic link written through (a link to nothing is
refused).
"""
import contextlib
import gzip
import json
import os
import stat
import tempfile

ROLES = ("parameter", "input", "activation", "gradient", "optimizer_state", "workspace", "other")
PHASE_ROLE = {"forward": "activation", "backward": "gradient", "optimizer": "other", "setup": "other"}


class Tensor:
    __slots__ = ("id", "bytes", "role", "name", "root", "explicit_role")

    def __init__(self, tid, nbytes, role, name, root):
        self.id, self.bytes, self.role, self.name, self.root = tid, nbytes, role, name, root
        self.explicit_role = False


class Op:
    __slots__ = ("id", "name", "inputs", "outputs", "views", "mutates", "random", "samples")

    def __init__(self, oid, name, inputs, outputs, views, mutates, random):
        self.id, self.name, self.inputs, self.outputs = oid, name, inputs, outputs
        self.views, self.mutates, self.random, self.samples = views, mutates, random, []

    def duration(self):
        """Median (the lower one for an even count) of the measured or estimated samples, in ns."""
        if not self.samples:
            return 0
        ordered = sorted(self.samples)
        return int(round(ordered[(len(ordered) - 1) // 2]))


class TraceBuilder:
    def __init__(self):
        self.tensors = []
        self.ops = []
        self.events = []  # (kind, target) with kind alloc / free / compute / iteration / mark
        self.live = set()
        self.phase = "setup"
        self.iterations = 0
        self._occurrence = {}
        self._tensor_by_key = {}
        self._op_by_key = {}

    # --- phases ------------------------------------------------------------------------------
    def begin_phase(self, phase):
        self.phase = phase
        self._occurrence = {}

    def next_occurrence(self, name):
        n = self._occurrence.get(name, 0)
        self._occurrence[name] = n + 1
        return n

    # --- definitions ---------------------------------------------------------------------------
    def storage_tensor(self, key, nbytes, name, role=None):
        """Id for a storage-owning tensor of nbytes, reusing the one defined under key when possible."""
        old = self._tensor_by_key.get(key) if key is not None else None
        if old is not None and old.root is None and old.bytes == nbytes and old.id not in self.live:
            return old.id
        t = Tensor(len(self.tensors), nbytes, role or PHASE_ROLE.get(self.phase, "other"), name, None)
        t.explicit_role = role is not None
        self.tensors.append(t)
        if key is not None:
            self._tensor_by_key[key] = t
        return t.id

    def view_tensor(self, key, base, name):
        """Id for a view of tensor base (its storage root is resolved here)."""
        root = self.root_of(base)
        old = self._tensor_by_key.get(key)
        if old is not None and old.root == root:
            return old.id
        t = Tensor(len(self.tensors), 0, self.tensors[root].role, name, root)
        self.tensors.append(t)
        self._tensor_by_key[key] = t
        return t.id

    def root_of(self, tid):
        root = self.tensors[tid].root
        return tid if root is None else root

    def set_role(self, tid, role, name=None):
        assert role in ROLES, role
        t = self.tensors[self.root_of(tid)]
        t.role, t.explicit_role = role, True
        if name:
            t.name = name

    def op(self, name, occurrence, inputs, outputs, views, mutates, random, signature):
        key = (self.phase, name, occurrence, tuple(inputs), tuple(outputs), tuple(views), tuple(mutates),
               random, signature)
        found = self._op_by_key.get(key)
        if found is not None:
            return found.id
        o = Op(len(self.ops), name, list(inputs), list(outputs), [list(p) for p in views], list(mutates), random)
        self.ops.append(o)
        self._op_by_key[key] = o
        return o.id

    def add_sample(self, op_id, ns):
        self.ops[op_id].samples.append(ns)

    # --- events --------------------------------------------------------------------------------
    def alloc(self, tid):
        assert tid not in self.live and self.tensors[tid].root is None and self.tensors[tid].bytes > 0
        self.live.add(tid)
        self.events.append(("alloc", tid))

    def free(self, tid):
        assert tid in self.live
        self.live.discard(tid)
        self.events.append(("free", tid))

    def compute(self, op_id):
        self.events.append(("compute", op_id))

    def iteration(self):
        self.events.append(("iteration", self.iterations))
        self.iterations += 1

    def mark(self, label):
        self.events.append(("mark", label))

    # --- summary and output ----------------------------------------------------------------------
    def peak_live(self):
        live = peak = 0
        for kind, target in self.events:
            if kind == "alloc":
                live += self.tensors[target].bytes
                peak = max(peak, live)
            elif kind == "free":
                live -= self.tensors[target].bytes
        return peak

    def lines(self, header):
        yield _dump(header)
        for t in self.tensors:
            role = t.role if t.root is None else self.tensors[t.root].role  # a view takes its storage's role
            rec = {"kind": "tensor", "id": t.id, "bytes": t.bytes, "role": role}
            if t.name:
                rec["name"] = t.name
            yield _dump(rec)
        durations = []
        for o in self.ops:
            d = o.duration()
            durations.append(d)
            rec = {"kind": "op", "id": o.id, "name": o.name}
            if d:
                rec["duration"] = d
            if o.inputs:
                rec["inputs"] = o.inputs
            if o.outputs:
                rec["outputs"] = o.outputs
            if o.views:
                rec["views"] = o.views
            if o.mutates:
                rec["mutates"] = o.mutates
            if o.random:
                rec["random"] = True
            yield _dump(rec)
        clock = 0
        for kind, target in self.events:
            if kind in ("alloc", "free"):
                yield _dump({"kind": kind, "tensor": target, "t": clock})
            elif kind == "compute":
                yield _dump({"kind": "compute", "op": target, "t": clock})
                clock += durations[target]
            elif kind == "iteration":
                yield _dump({"kind": "iteration", "index": target, "t": clock})
            else:
                yield _dump({"kind": "mark", "label": target, "t": clock})

    def write(self, path, header):
        """Writes header + records to path through coopsim's own loader and writer (sim.write_trace):
        one trace writer, the library's, checks and writes every trace."""
        from ..sim import write_trace
        write_trace("".join(line + "\n" for line in self.lines(header)), path)


@contextlib.contextmanager
def output_file(path):
    """A binary file object for path, committed when the block ends without an exception."""
    try:
        st = os.stat(path)  # follows links: a link is written through to its file
    except FileNotFoundError:
        if os.path.islink(path):
            raise OSError(f"{path}: cannot write output file: it is a symbolic link to a missing file") from None
        st = None
    if st is not None and (stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode)):
        with open(path, "wb") as f:  # a pipe or /dev/null: never replaced by a regular file
            yield f
        return
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise OSError(f"{path}: cannot write output file: it is not a regular file, FIFO or character device")
    target = os.path.realpath(path)
    # mkstemp: O_CREAT|O_EXCL under a random name, so nothing planted can be followed.
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target), prefix=os.path.basename(target)[:200] + ".",
                               suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
        if st is not None:
            mode = st.st_mode & 0o7777
        else:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_trace(path):
    """(header, records) of a trace v1 file, gzip or not (detected from the content, as coopsim does)."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    lines = [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]
    return lines[0], lines[1:]


def _dump(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
