"""The few PyTorch internals the recorder relies on, with the spellings of torch 1.13 and 2.x.

* TorchDispatchMode lives in torch.utils._python_dispatch in both; FakeTensorMode and FakeTensor in
  torch._subclasses.fake_tensor (1.13 and 2.x).
* Storage: 2.x has Tensor.untyped_storage(); 1.13 has Tensor.storage() (a TypedStorage) whose
  .untyped() gives the UntypedStorage. Both wrap one c10::StorageImpl, whose address (_cdata) is the
  storage's identity. 1.13 builds a new Python wrapper on every call, so weakref.finalize on a wrapper
  fires when the wrapper dies, not the storage: liveness is tracked with a c10 weak reference instead.
* StorageRef holds a c10::weak_intrusive_ptr<StorageImpl> (StorageBase._weak_ref / _expired /
  _free_weak_ref, the same calls torch.multiprocessing.reductions.StorageWeakRef makes). It does not keep
  the memory alive, but keeps the StorageImpl object itself allocated, so a storage's address cannot be
  reused while it is tracked: the address is a safe key until the reference is released.
"""
import contextlib
import inspect

import torch

try:
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
except ImportError:  # pragma: no cover - torch older than 1.13
    FakeTensor = FakeTensorMode = None

# torch._C.StorageBase is the C base of UntypedStorage in 1.13 and 2.x; UntypedStorage inherits its methods.
_StorageBase = getattr(torch._C, "StorageBase", None) or torch.UntypedStorage
_weak_ref = _StorageBase._weak_ref
_expired = _StorageBase._expired
_free_weak_ref = _StorageBase._free_weak_ref


def untyped_storage(t):
    """The UntypedStorage of a tensor, or None for tensors without storage (sparse, nested...)."""
    try:
        if hasattr(t, "untyped_storage"):
            return t.untyped_storage()
        return t.storage().untyped()
    except (RuntimeError, NotImplementedError, TypeError):
        return None


class StorageRef:
    """A weak reference to a c10::StorageImpl: expired() turns true when the storage is freed."""

    __slots__ = ("handle",)

    def __init__(self, storage):
        self.handle = _weak_ref(storage)

    def expired(self):
        return _expired(self.handle)

    def release(self):
        if self.handle is not None:
            _free_weak_ref(self.handle)
            self.handle = None

    def __del__(self):
        self.release()


@contextlib.contextmanager
def no_python_dispatch():
    """No TorchDispatchMode and no tensor subclass __torch_dispatch__ (an RAII guard in 1.13 and 2.x)."""
    guard = torch._C._DisableTorchDispatch()
    try:
        yield
    finally:
        del guard


def op_name(func):
    """'aten::convolution' or 'aten::add_.Tensor' (overload shown unless it is 'default')."""
    schema = func._schema
    overload = getattr(func, "_overloadname", "") or schema.overload_name
    return schema.name if overload in ("", "default") else f"{schema.name}.{overload}"


def _convolution_backward_outputs(args, kwargs):
    # (grad_output, input, weight, bias_sizes, ..., output_mask): grad_input and grad_weight have the shapes
    # (and memory format) of input and weight, grad_bias the bias sizes; masked-off results are undefined.
    grad_out, inp, weight, bias_sizes = args[:4]
    mask = args[10] if len(args) > 10 else kwargs["output_mask"]
    return (torch.empty_like(inp) if mask[0] else None,
            torch.empty_like(weight) if mask[1] else None,
            grad_out.new_empty(list(bias_sizes)) if mask[2] else None)


def _nll_loss2d_forward_outputs(args, kwargs):
    # (self [N, C, H, W], target [N, H, W], weight, reduction, ignore_index) -> (output, total_weight):
    # output is [N, H, W] for reduction 'none' (0), a scalar otherwise; total_weight a scalar.
    scores, target, reduction = args[0], args[1], args[3]
    return (scores.new_empty(target.shape if reduction == 0 else ()), scores.new_empty(()))


_SHAPE_RULES = {"aten::convolution_backward": _convolution_backward_outputs,
                "aten::nll_loss2d_forward": _nll_loss2d_forward_outputs}


def fake_shape_rule(name):
    """A shape-only stand-in for an op that has no Meta kernel in this torch (1.13 lacks one for
    convolution_backward and nll_loss2d_forward), or None. Without it FakeTensorMode falls back to running the real CPU kernel
    on zero-filled inputs of full size, which is exact but slow and uses the memory --fake avoids."""
    rule = _SHAPE_RULES.get(name)
    if rule is None or torch._C._dispatch_has_kernel_for_dispatch_key(name, "Meta"):
        return None
    return rule


def is_fake(t):
    return FakeTensor is not None and isinstance(t, FakeTensor)


def version():
    return torch.__version__


# Python composites of torch.nn.functional whose inner calls (linear, bmm, softmax, dropout,
# scaled_dot_product_attention) a mode must see: nn.MultiheadAttention and nn.TransformerEncoderLayer
# reach their matrix products only through this one. The others of torch.nn.functional (relu,
# batch_norm, cross_entropy...) call one C function each, which the modes see anyway.
_COMPOSITES = {("torch.nn.functional", "multi_head_attention_forward")}


def python_composite(func):
    """A Python composite whose inner calls a TorchFunctionMode must see (_COMPOSITES)."""
    return inspect.isfunction(func) and (getattr(func, "__module__", ""), func.__name__) in _COMPOSITES


def run_composite_inside(mode, func, args, kwargs):
    """Runs a Python composite from inside `mode`'s __torch_function__ with the mode active again, so
    the ops it calls reach the mode too (a dispatch key such as Autocast sees them all). The
    composite's first statement asks has_torch_function* whether to hand itself to the modes: that one
    question is answered False (else it would come straight back); every later one, from the ops and
    composites it calls, goes to torch as usual. (torch 1.13 and 2.x spell the check the same way.)"""
    namespace = func.__globals__
    names = [n for n in ("has_torch_function", "has_torch_function_unary", "has_torch_function_variadic")
             if n in namespace]
    saved = {n: namespace[n] for n in names}
    first = [True]

    def answer(original):
        def check(*a):
            if first[0]:
                first[0] = False
                return False
            return original(*a)
        return check
    for n in names:
        namespace[n] = answer(saved[n])
    try:
        with mode:
            return func(*args, **kwargs)
    finally:
        namespace.update(saved)
