"""Records N training iterations of a model into a TraceBuilder.

Before iteration 0: parameters (role parameter) and buffers (role other) are allocated. Each iteration:
`iteration` record, input batch allocated (role input), forward (new tensors: activation), mark
`backward`, loss.backward() (new tensors: gradient), mark `optimizer`, optimizer.step() (temporaries:
other; states it creates are relabelled optimizer_state, and each parameter's .grad is relabelled
gradient `<param>.grad`), then zero_grad(set_to_none=True) so gradients die at the end of the iteration
(the order of Hugging Face's Trainer: step, then zero_grad). Frees appear when the storage dies.
"""
import contextlib
import gc

import torch
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

from .compat import FakeTensorMode
from .optim import make_optimizer
from .recorder import Recorder
from .trace import TraceBuilder


@contextlib.contextmanager
def module_names(model, recorder):
    """Sets recorder.context to the qualified name of the innermost module running forward."""
    names = {id(m): (n or type(m).__name__) for n, m in model.named_modules()}
    stack = []

    def pre(module, _inputs):
        if id(module) in names:
            stack.append(names[id(module)])
            recorder.context = stack[-1]

    def post(module, _inputs, _output):
        if id(module) in names and stack:
            stack.pop()
            recorder.context = stack[-1] if stack else "forward"
    handles = [register_module_forward_pre_hook(pre), register_module_forward_hook(post)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def record(spec, batch, iterations, device, fake, timer, log=None):
    """Returns a TraceBuilder holding `iterations` training steps of spec at batch size `batch`."""
    fake_mode = FakeTensorMode() if fake else contextlib.nullcontext()
    with fake_mode:
        model = spec.build().to(device)
        model.train()
        optimizer = make_optimizer(spec.optimizer, model.parameters(), fake)
    builder = TraceBuilder()
    rec = Recorder(builder, timer, torch.device(device).type, fake)
    param_names = {}
    for name, p in model.named_parameters():
        rec.register(p, "parameter", name)
        param_names[id(p)] = name
    for name, b in model.named_buffers():
        rec.register(b, "other", name)

    gc_was_enabled = gc.isenabled()
    gc.disable()  # reference cycles are collected at iteration ends only, so frees do not depend on gc timing
    try:
        with fake_mode, rec, module_names(model, rec):
            for it in range(iterations):
                _phase(rec, "forward", iteration=True)
                data = _load_batch(rec, spec, batch, device)
                loss = spec.loss(model, data)
                _phase(rec, "backward", mark="backward")
                loss.backward()
                del loss
                _phase(rec, "optimizer", mark="optimizer")
                optimizer.step()
                _label_training_state(rec, model, optimizer, param_names)
                optimizer.zero_grad(set_to_none=True)
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


def _load_batch(rec, spec, batch, device):
    """Makes the input batch without recording its creation (it comes from the host) and allocates it."""
    rec.paused = True
    try:
        data = spec.inputs(batch, device)
    finally:
        rec.paused = False
    for name, t in data.items():
        rec.register(t, "input", name)
    return data


def _phase(rec, phase, iteration=False, mark=None):
    rec.sweep()
    if iteration:
        rec.b.iteration()
    if mark:
        rec.b.mark(mark)
    rec.b.begin_phase(phase)
    rec.context = phase


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
