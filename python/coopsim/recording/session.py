"""Records N training iterations of a model into a TraceBuilder.

Before iteration 0: parameters (role parameter) and buffers (role other) are allocated. Each iteration
(one optimizer step): `iteration` record, then per micro-batch (`accumulation` of them; with more than
one, each starts with a mark `forward`): input batch allocated (role input), forward under autocast when
amp is set (new tensors: activation), mark `backward`, loss.backward() (new tensors: gradient; the
recomputation of checkpointed modules: activation); then mark `optimizer`, optimizer.step()
(temporaries: other; states it creates are relabelled optimizer_state, and each parameter's .grad is
relabelled gradient `<param>.grad`), then zero_grad(set_to_none) so gradients die at the end of the
iteration, or are zeroed in place and stay (the order of Hugging Face's Trainer: step, then zero_grad).
Frees appear when the storage dies.
"""
import contextlib
import copy
import gc

import torch
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

from . import amp as amp_mod
from . import llama
from .cuda_dispatch import CudaDispatch
from .fused import oneflow_granularity
from .compat import FakeTensorMode, is_fake, no_python_dispatch
from .optim import make_optimizer
from .recorder import Recorder
from .trace import TraceBuilder


class ModuleNames:
    """Sets recorder.context to the qualified name of the innermost module running forward; inside
    a checkpointed module's recomputation (during backward) its outputs are activations."""

    def __init__(self, model, recorder):
        self.names = {id(m): (n or type(m).__name__) for n, m in model.named_modules()}
        self.rec = recorder
        self.stack = []
        self.handles = []

    def push(self, name):
        self.stack.append(name)
        self.rec.context = name

    def pop(self):
        if self.stack:
            self.stack.pop()
        self.rec.context = self.stack[-1] if self.stack else self.rec.phase_context

    def __enter__(self):
        def pre(module, _inputs):
            if id(module) in self.names:
                self.push(self.names[id(module)])

        def post(module, _inputs, _output):
            if id(module) in self.names and self.stack:
                self.pop()
        self.handles = [register_module_forward_pre_hook(pre), register_module_forward_hook(post)]
        return self

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()
        return False

    @contextlib.contextmanager
    def recompute(self, name):
        """Around a checkpointed module's forward when checkpoint runs it again in backward."""
        self.push(name)
        self.rec.recomputing += 1
        try:
            yield
        finally:
            self.rec.recomputing -= 1
            self.pop()


def fake_module(model, fake_mode):
    """A copy of an already-built module whose parameters and buffers are FakeTensors of fake_mode with
    the same shapes, dtypes and requires_grad (the module itself is untouched and nothing is copied: deepcopy
    finds every tensor in its memo already converted)."""
    memo = {}
    for t in list(model.parameters()) + list(model.buffers()):
        if id(t) in memo:
            continue
        if is_fake(t) and t.fake_mode is fake_mode:
            f = t
        elif is_fake(t):
            # a FakeTensor of another mode (copy.deepcopy of a fake module makes one, as
            # nn.TransformerEncoder does with its layer): a new one of ours, same layout
            with fake_mode, torch.no_grad():
                f = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.fake_device)
        else:
            f = fake_mode.from_tensor(t)
        memo[id(t)] = (torch.nn.Parameter(f, requires_grad=t.requires_grad)
                       if isinstance(t, torch.nn.Parameter) and f is not t else f)
    return copy.deepcopy(model, memo)


def _build(build, fake_mode):
    """build() inside fake_mode; where construction reads a tensor's value (torch >= 2.x's
    nn.init.trunc_normal_ calls .item(), which FakeTensors refuse: torchvision's Swin and
    Inception-v3), build() again on the meta device, whose initialisers skip value reads, and make
    FakeTensors of its parameters and buffers (fake_module)."""
    data_dependent = getattr(getattr(torch._subclasses, "fake_tensor", None), "DataDependentOutputException", None)
    if data_dependent is None:
        return build()
    try:
        return build()
    except data_dependent:
        pass
    with no_python_dispatch(), torch.device("meta"):
        model = build()
    return fake_module(model, fake_mode) if isinstance(model, torch.nn.Module) else model


def move_fake_module(model, device):
    """Puts a FakeTensor module's parameters and buffers on `device` in place, keeping tied tensors
    tied. Not nn.Module.to: in torch 2.x _apply swaps a FakeTensor parameter with
    torch.utils.swap_tensors, which FakeTensorMode's own weak references refuse
    ("_apply(): Couldn't swap Conv2d.weight"). Tensors already on the device are left as they are."""
    target = torch.device(device)
    moved = {}

    def to_device(t):
        if t is None or t.device.type == target.type:
            return t
        if id(t) not in moved:
            with torch.no_grad():
                new = t.to(target)
            if isinstance(t, torch.nn.Parameter):
                new = torch.nn.Parameter(new, requires_grad=t.requires_grad)
            moved[id(t)] = new
        return moved[id(t)]

    for module in model.modules():
        for key, p in list(module._parameters.items()):
            module._parameters[key] = to_device(p)
        for key, b in list(module._buffers.items()):
            module._buffers[key] = to_device(b)


def checkpoint_names(model, checkpoint):
    """Qualified names of the modules to checkpoint: a list of names (each must exist) or a predicate
    (name, module) -> bool."""
    if checkpoint is None:
        return []
    modules = dict(model.named_modules())
    if callable(checkpoint):
        return [n for n, m in modules.items() if n and checkpoint(n, m)]
    names = [checkpoint] if isinstance(checkpoint, str) else list(checkpoint)
    missing = [n for n in names if n not in modules or not n]
    if missing:
        sample = ", ".join(n for n in list(modules)[1:9])
        raise ValueError(f"checkpoint: no module named {', '.join(map(repr, missing))} (modules: {sample}, ...)")
    return names


@contextlib.contextmanager
def checkpointed(model, names, module_names):
    """Wraps the forward of each named module in torch.utils.checkpoint.checkpoint, restoring the
    forwards afterwards: the forward keeps only the module's inputs, backward runs the module's forward
    again. The recomputation runs under the autocast region the forward ran in, as
    torch.utils.checkpoint does for torch.autocast.

    Reentrant checkpointing (use_reentrant=True: torch's default before 2.4, and Hugging Face's): the
    non-reentrant kind fails on FakeTensors in torch 1.13 as soon as the module divides by a Python
    number (its saved-tensor hook is handed the wrapped number as a float). Reentrant checkpointing
    takes no keyword arguments, so a module called with some is checkpointed non-reentrantly. It also
    gives the module's parameters no gradients unless an input requires grad; when none does, the first
    floating input is passed as a detached copy that requires grad (what Hugging Face's
    enable_input_require_grads achieves), so backward also computes that input's gradient."""
    from torch.utils.checkpoint import checkpoint
    modules = dict(model.named_modules())
    patched = []
    for name in names:
        module = modules[name]
        original = module.forward

        def forward(*args, _original=original, _name=name, **kwargs):
            dtype = amp_mod.CudaAutocast.current_dtype()

            def run(*a, **k):
                if torch.is_grad_enabled() and module_names.rec.b.phase == "backward":
                    cast = amp_mod.CudaAutocast(dtype) if dtype is not None else contextlib.nullcontext()
                    kernels = CudaDispatch() if CudaDispatch.recording else contextlib.nullcontext()
                    with module_names.recompute(_name), kernels, cast:
                        return _original(*a, **k)
                return _original(*a, **k)
            if kwargs:
                return checkpoint(run, *args, use_reentrant=False, **kwargs)
            args = _one_input_requires_grad(args)
            return checkpoint(run, *args, use_reentrant=True)
        module.forward = forward
        patched.append(module)
    try:
        yield
    finally:
        for module in patched:
            del module.forward  # the instance attribute: the class's forward shows through again


def _one_input_requires_grad(args):
    if any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
        return args
    args = list(args)
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor) and a.is_floating_point():
            args[i] = a.detach().requires_grad_()
            break
    return args


def record(model, make_batch, loss_fn, optimizer, *, iterations, device, fake, timer, log=None, amp=None,
           checkpoint=None, accumulation=1, set_to_none=True, workspaces=None, cuda_like=None,
           preallocate_grads=False, granularity=None):
    """Returns a TraceBuilder holding `iterations` optimizer steps.

    model: an nn.Module or a zero-argument callable building one (under fake, built inside the fake
    mode); make_batch(device) -> dict of tensors, called once per micro-batch; loss_fn(model, batch) ->
    scalar loss; optimizer: a name of optim.make_optimizer or a callable(params). cuda_like (default:
    fake): the recording models a GPU it does not run on, so it makes the choices CUDA would
    (cuda_dispatch.py, the foreach optimizers of optim.py). preallocate_grads: before the first forward,
    a zeroed gradient per parameter (zeros_like, parameter order), which backward accumulates into
    and which stays allocated (OneFlow's flow.nn.ContiguousGrad as its Coop sweeps ran it: dtr2
    run_dtr.py:289-290, python/oneflow/nn/modules/contiguous.py); implies set_to_none=False.
    granularity: None (PyTorch's ops) or 'oneflow': dropout as OneFlow's random mask + deterministic
    dropout op (fused.oneflow_granularity)."""
    if preallocate_grads:
        set_to_none = False
    cuda_like = fake if cuda_like is None else cuda_like
    fake_mode = FakeTensorMode() if fake else contextlib.nullcontext()
    with fake_mode:
        if not isinstance(model, torch.nn.Module):
            model = _build(model, fake_mode) if fake else model()
            if not isinstance(model, torch.nn.Module):
                raise TypeError(f"the model callable returned {type(model).__name__}, not a torch.nn.Module")
        if fake and not all(is_fake(t) and t.fake_mode is fake_mode for t in list(model.parameters()) + list(model.buffers())):
            model = fake_module(model, fake_mode)
        if fake:
            move_fake_module(model, device)
        else:
            model = model.to(device)
        model.train()
        opt = make_optimizer(optimizer, model.parameters(), fake, cuda_like)
        scaler = amp_mod.LossScaler(device) if amp == "fp16" else None
    names = checkpoint_names(model, checkpoint)
    builder = TraceBuilder()
    builder.model_name, builder.model_dtype, builder.checkpointed = type(model).__name__, _dtype(model), names
    device_type = torch.device(device).type
    rec = Recorder(builder, timer, device_type, fake)
    rec.workspaces = workspaces
    param_names = {}
    for name, p in model.named_parameters():
        rec.register(p, "parameter", name)
        param_names[id(p)] = name
    for name, b in model.named_buffers():
        rec.register(b, "other", name)
    if scaler is not None:
        rec.register(scaler.scale, "other", "grad_scaler.scale")
        rec.register(scaler.growth_tracker, "other", "grad_scaler.growth_tracker")
    params = list(model.parameters())

    gc_was_enabled = gc.isenabled()
    gc.disable()  # reference cycles are collected at iteration ends only, so frees do not depend on gc timing
    try:
        # a recording that models a GPU it does not run on: the kernels CUDA would pick (cuda_dispatch.py)
        dispatch = CudaDispatch() if cuda_like else contextlib.nullcontext()
        ops = oneflow_granularity() if granularity == "oneflow" else contextlib.nullcontext()
        # on a real device, composite custom ops run their kernels as ops the recorder sees (llama.py)
        kernels = contextlib.nullcontext() if fake else llama.decomposed()
        with ops, kernels, fake_mode, dispatch, rec, ModuleNames(model, rec) as module_names, \
                checkpointed(model, names, module_names):
            for it in range(iterations):
                data = None
                for micro in range(accumulation):
                    _phase(rec, "forward", iteration=micro == 0, mark="forward" if accumulation > 1 else None)
                    if preallocate_grads and it == 0 and micro == 0:
                        for p in params:
                            if p.requires_grad:
                                p.grad = torch.zeros_like(p)
                    # a loop's `data = next(batches)`: the previous micro-batch dies once the next exists
                    data = _load_batch(rec, make_batch, device, fake_mode if fake else None)
                    with amp_mod.autocast(amp, device_type) if amp else contextlib.nullcontext():
                        loss = loss_fn(model, data)
                    if accumulation > 1:
                        loss = loss / accumulation
                    if scaler is not None:
                        loss = scaler.scaled(loss)
                    _phase(rec, "backward", mark="backward")
                    loss.backward()
                    del loss
                _phase(rec, "optimizer", mark="optimizer")
                found_inf = scaler.unscale_(params) if scaler is not None else None
                opt.step()
                if scaler is not None:
                    scaler.update(found_inf)
                    del found_inf
                _label_training_state(rec, model, opt, param_names)
                opt.zero_grad(set_to_none=set_to_none)
                del data
                gc.collect()
                timer.sync(builder)
                rec.sweep()
                if log:
                    log(f"iteration {it}: {rec.ops_seen} ops so far, {len(builder.tensors)} tensors")
    finally:
        if gc_was_enabled:
            gc.enable()
    return builder


def _load_batch(rec, make_batch, device, fake_mode):
    """Makes the input batch without recording its creation (it comes from the host) and allocates it.
    Under fake, real tensors in it become new FakeTensors (a fresh storage per micro-batch)."""
    rec.paused = True
    try:
        data = make_batch(device)
        if not isinstance(data, dict):
            raise TypeError(f"the batch must be a dict of tensors, not {type(data).__name__}")
        if fake_mode is not None:
            data = {k: fake_mode.from_tensor(v).to(device).clone() if isinstance(v, torch.Tensor) and not is_fake(v)
                    else v for k, v in data.items()}
    finally:
        rec.paused = False
    for name, t in data.items():
        if isinstance(t, torch.Tensor) and rec.traced(t):
            rec.register(t, "input", name)
    return data


def _dtype(model):
    """The dtype of the first floating parameter ('float32' when there is none)."""
    return next((str(p.dtype).replace("torch.", "") for p in model.parameters() if p.is_floating_point()), "float32")


def _phase(rec, phase, iteration=False, mark=None):
    rec.sweep()
    if iteration:
        rec.b.iteration()
    if mark:
        rec.b.mark(mark)
    rec.b.begin_phase(phase)
    rec.context = rec.phase_context = phase


def _label_training_state(rec, model, optimizer, param_names):
    for p in model.parameters():
        name = param_names[id(p)]
        if p.grad is not None:
            tid = rec.tensor_id(p.grad)
            if tid is not None:
                rec.b.set_role(tid, "gradient", f"{name}.grad")
        for key, value in optimizer.state.get(p, {}).items():
            if isinstance(value, torch.Tensor):
                tid = rec.tensor_id(value)
                if tid is not None:
                    rec.b.set_role(tid, "optimizer_state", f"{name}.{key}")
