"""A TorchDispatchMode that turns every ATen op on the recorded device into trace records.

Per op (in __torch_dispatch__, below autograd, so forward, backward and optimizer ops all pass here):

1. storages that died since the last op are freed (their c10 weak references expired);
2. inputs are resolved to trace tensors; a storage never seen before (created before recording, or
   outside any recorded op) is defined and allocated on the spot;
3. the op runs, timed by the timer;
4. each output is classified by its storage: the very input object (in-place or out= result: nothing new),
   a new storage (a new tensor, allocated right before the compute), or an input's storage (a view:
   a view tensor declared in the op's "views" against that input);
5. inputs written in place (schema alias info with is_write, a trailing '_' on the op name, or the known
   unannotated batch-norm running statistics) go to "mutates"; a storage whose size changed (resize_) is
   re-allocated as a new tensor and the old one freed after the compute.

Ops of the prim:: and profiler:: namespaces (metadata queries, record_function handles) are not traced.
Only tensors on the recorded device are traced (FakeTensors under --fake), so CPU scalars of a GPU run
(e.g. Adam's step counter) do not appear. Zero-byte storages are not traced: they take no memory.
"""
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from . import cudnn_workspaces
from .compat import StorageRef, fake_shape_rule, is_fake, no_python_dispatch, op_name, untyped_storage

RANDOM_OPS = {"bernoulli", "bernoulli_", "native_dropout", "_fused_dropout", "rand", "rand_like", "randn",
              "randn_like", "randint", "randint_like", "randperm", "normal", "normal_", "uniform_",
              "exponential_", "geometric_", "log_normal_", "cauchy_", "random_", "multinomial",
              "rrelu_with_noise", "rrelu_with_noise_", "_standard_gamma", "poisson",
              "random_mask_like"}  # coopsim::random_mask_like (fused.py: OneFlow's dropout mask)
# Ops whose schema omits the in-place update of the running statistics (arguments 3 and 4) in training.
BATCH_NORM_RUNNING_STATS = {"aten::native_batch_norm", "aten::cudnn_batch_norm", "aten::miopen_batch_norm"}


class Slot:
    __slots__ = ("ref", "tid", "nbytes")

    def __init__(self, ref, tid, nbytes):
        self.ref, self.tid, self.nbytes = ref, tid, nbytes


class Recorder(TorchDispatchMode):
    def __init__(self, builder, timer, device_type, fake):
        super().__init__()
        self.b = builder
        self.timer = timer
        self.device_type = device_type
        self.fake = fake
        self.storages = {}  # StorageImpl address -> Slot (insertion order = allocation order)
        self.objects = {}   # id(tensor object) -> (weakref, trace tensor id)
        self.paused = False
        self.context = "setup"
        self.phase_context = "setup"  # the context outside any module: the phase's name
        self.recomputing = 0  # > 0 while a checkpointed module's forward runs again in backward
        self.ops_seen = 0
        self.workspaces = None  # workspaces.Workspaces: the library blocks ops allocate and keep

    # --- helpers ---------------------------------------------------------------------------------
    def traced(self, t):
        if not isinstance(t, torch.Tensor):
            return False
        if self.fake:  # fake_device: FakeTensor.device would dispatch prim::device in 1.13
            return is_fake(t) and t.fake_device.type == self.device_type
        return t.device.type == self.device_type

    def _remember(self, t, tid):
        key = id(t)

        def forget(ref, key=key):
            entry = self.objects.get(key)
            if entry is not None and entry[0] is ref:
                del self.objects[key]
        self.objects[key] = (weakref.ref(t, forget), tid)

    def _known_id(self, t, slot):
        entry = self.objects.get(id(t))
        if entry is not None and entry[0]() is t and self.b.root_of(entry[1]) == slot.tid:
            return entry[1]
        return slot.tid

    def _track(self, storage, tid, nbytes):
        self.storages[storage._cdata] = Slot(StorageRef(storage), tid, nbytes)

    def sweep(self):
        """Frees every traced storage whose StorageImpl has died, in allocation order."""
        dead = [k for k, slot in self.storages.items() if slot.ref.expired()]
        for key in dead:
            slot = self.storages.pop(key)
            slot.ref.release()
            self.b.free(slot.tid)

    def register(self, t, role, name):
        """Declares a tensor made outside recorded ops (parameter, buffer, input batch) with a role."""
        s = untyped_storage(t)
        if s is None or s.nbytes() == 0:
            return None
        slot = self.storages.get(s._cdata)
        if slot is not None:
            self.b.set_role(slot.tid, role, name)
            return slot.tid
        tid = self.b.storage_tensor(("register", name), s.nbytes(), name, role)
        self.b.alloc(tid)
        self._track(s, tid, s.nbytes())
        self._remember(t, tid)
        return tid

    def tensor_id(self, t):
        s = untyped_storage(t) if isinstance(t, torch.Tensor) else None
        slot = self.storages.get(s._cdata) if s is not None else None
        return None if slot is None else slot.tid

    # --- the dispatch hook -------------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = op_name(func)
        if name.startswith("profiler::"):
            # record_function handles are host objects; FakeTensorMode 1.13 mistakes the op for a tensor
            # constructor and fails, so it runs with Python dispatch (all modes) disabled.
            with no_python_dispatch():
                return func(*args, **kwargs)
        if self.paused or name.startswith("prim::"):
            return func(*args, **kwargs)
        self.sweep()
        inputs = _distinct(t for t in tree_flatten((args, kwargs))[0] if self.traced(t))
        storages_in = [untyped_storage(t) for t in inputs]
        written = self._written(func, name, args, kwargs)

        shape_rule = fake_shape_rule(name) if self.fake else None
        token = self.timer.begin(name)
        out = shape_rule(args, kwargs) if shape_rule else func(*args, **kwargs)
        sample = self.timer.stop(token)

        outputs = _distinct(t for t in tree_flatten(out)[0] if self.traced(t))
        if not outputs and not (written & {id(t) for t in inputs}):
            return out  # metadata queries, .item(), ...: no memory effect
        self.ops_seen += 1
        occurrence = self.b.next_occurrence(name)
        short = name.split("::", 1)[-1]
        allocs, frees_after, input_ids, mutates, mutated_tensors = [], [], [], [], []
        by_storage = {}
        for pos, (t, s) in enumerate(zip(inputs, storages_in)):
            if s is None or s.nbytes() == 0:
                continue
            tid = self._input_id(t, s, id(t) in written, (occurrence, pos), short, allocs, frees_after)
            by_storage.setdefault(s._cdata, tid)
            if tid not in input_ids:
                input_ids.append(tid)
            if id(t) in written and tid not in mutates:
                mutates.append(tid)
                mutated_tensors.append(t)

        output_ids, views, new_outputs = [], [], []
        input_objects = {id(t) for t in inputs}
        for idx, t in enumerate(outputs):
            s = untyped_storage(t)
            if id(t) in input_objects or s is None:
                continue
            key = s._cdata
            label = f"{self.context}:{short}" + (f".{idx}" if idx else "")
            if key in by_storage:
                base = by_storage[key]
                vid = self.b.view_tensor(("view", self.b.phase, name, occurrence, idx), base, label)
                self._remember(t, vid)
                if vid not in output_ids:
                    output_ids.append(vid)
                    views.append((vid, base))
            elif key in self.storages:
                self._remember(t, self.storages[key].tid)
            elif s.nbytes() > 0:
                role = "activation" if self.recomputing else None  # a recomputed forward tensor
                tid = self.b.storage_tensor(("out", self.b.phase, name, occurrence, idx), s.nbytes(), label, role)
                allocs.append(tid)
                self._track(s, tid, s.nbytes())
                self._remember(t, tid)
                output_ids.append(tid)
                new_outputs.append(t)

        views_only = not new_outputs and not mutates  # only metadata: no kernel runs
        if sample is None:
            sample = self.timer.estimate(name, args, inputs, new_outputs, mutated_tensors, views_only)
        signature = tuple((tuple(t.shape), str(t.dtype)) for t in inputs + outputs)
        if self.timer.deterministic:
            signature += (round(sample),)
        base_name = name.split(".", 1)[0].split("::", 1)[-1]
        if self.workspaces is not None:
            for key, nbytes, label in self.workspaces.needed(name, args, self.b.phase):
                allocs.append(self.b.storage_tensor(key, nbytes, label, "workspace"))
        for tid in allocs:
            self.b.alloc(tid)
        scratch = self._scratch(name, args, occurrence, short)
        for tid in scratch[:-1]:  # taken and given back one after the other inside the op
            self.b.alloc(tid)
            self.b.free(tid)
        for tid in scratch[-1:]:
            self.b.alloc(tid)
        op_id = self.b.op(name, occurrence, input_ids, output_ids, views, mutates, base_name in RANDOM_OPS, signature)
        self.b.compute(op_id)
        for tid in scratch[-1:]:
            self.b.free(tid)
        for tid in frees_after:
            self.b.free(tid)
        if isinstance(sample, tuple):
            self.timer.defer(op_id, sample)
        else:
            self.b.add_sample(op_id, sample)
        return out

    def _scratch(self, name, args, occurrence, short):
        """Tensor ids of the workspaces the op takes and frees inside itself (cuDNN's), in order."""
        if self.workspaces is None:
            return []
        return [self.b.storage_tensor(("scratch", self.b.phase, name, occurrence, i), nbytes,
                                      f"{self.context}:{short}.cudnn_workspace{i}", "workspace")
                for i, nbytes in enumerate(cudnn_workspaces.transient(name, args))]

    def _input_id(self, t, s, is_written, where, short, allocs, frees_after):
        key, nbytes = s._cdata, s.nbytes()
        slot = self.storages.get(key)
        if slot is None:
            # First seen as an input: made before recording or outside recorded ops. An out= argument
            # created empty and grown by this op counts as produced here.
            role = None if is_written else "other"
            tid = self.b.storage_tensor(("first-seen", self.b.phase, short) + where, nbytes,
                                        f"{self.context}:{short}.in{where[1]}", role)
            allocs.append(tid)
            self._track(s, tid, nbytes)
            self._remember(t, tid)
            return tid
        if slot.nbytes != nbytes:  # resized in place: a new allocation replaces the old one
            old = slot.tid
            tid = self.b.storage_tensor(("resized", self.b.phase, short) + where, nbytes,
                                        f"{self.context}:{short}.resized", None)
            allocs.append(tid)
            frees_after.append(old)
            slot.tid, slot.nbytes = tid, nbytes
            self._remember(t, tid)
            return tid
        return self._known_id(t, slot)

    @staticmethod
    def _written(func, name, args, kwargs):
        """ids of the tensor objects the op writes in place."""
        written = set()
        schema = func._schema
        for i, arg in enumerate(schema.arguments):
            info = arg.alias_info
            if info is None or not info.is_write:
                continue
            value = args[i] if i < len(args) else kwargs.get(arg.name)
            for t in tree_flatten(value)[0]:
                if isinstance(t, torch.Tensor):
                    written.add(id(t))
        base = name.split(".", 1)[0]
        if not written and base.endswith("_") and not base.endswith("__") and args:
            for t in tree_flatten(args[0])[0]:
                if isinstance(t, torch.Tensor):
                    written.add(id(t))
        if base in BATCH_NORM_RUNNING_STATS and len(args) > 5 and args[5]:
            written.update(id(a) for a in args[3:5] if isinstance(a, torch.Tensor))
        return written


def _distinct(tensors):
    seen, result = set(), []
    for t in tensors:
        if id(t) not in seen:
            seen.add(id(t))
            result.append(t)
    return result
