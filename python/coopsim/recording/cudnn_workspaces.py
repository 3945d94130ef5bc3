"""The workspaces cuDNN convolutions take from the caching allocator and give back inside the op.

PyTorch's cuDNN convolutions (aten/src/ATen/native/cudnn/Conv_v8.cpp, torch 2.11) ask cuDNN's
heuristics for engine configurations (torch.backends.cudnn.benchmark off, the default), allocate the
first plan's workspace through the caching allocator, run it and free the workspace before the op
returns. convolution_backward runs backward-data, then backward-filter, each with its own workspace,
each freed before the next is taken. A recorder above the library never sees these blocks, yet the
largest of them (a few hundred MiB in a ResNet-50 at batch 115) make the allocator reserve new
segments: without them the reserved peak of traces/h200/resnet50_b115 is 0.59 % low.

cuDNN does not document its plans' workspaces, so the sizes below are a rule fitted to what the
allocator saw: the snapshot recorded in the same H200 run as traces/h200/resnet50_b115 (torch 2.11,
cuDNN 9, float32, NCHW), its 459 in-op blocks assigned to their convolutions (scripts/cudnn_workspaces.py
prints the table of rule against measurement). What it shows:

* Plans that run on NHWC transform every operand they touch: the workspace is the bytes of those
  operands plus a few hundred bytes. Forward: input + output (+ weight unless the kernel is 1x1).
  Backward-data: grad_output + grad_input (+ weight unless 1x1). Backward-filter: grad_output +
  input + weight + 8 MiB (the filter gradient is reduced over split-K partials).
* Stride-1 1x1 convolutions over at least 196 output positions (14 x 14) run natively on NCHW
  (an implicit GEMM): 400 bytes forward and backward-data; their backward-filter over at least 784
  positions (28 x 28) keeps one weight-sized partial per sample: batch x weight + 400 bytes.
* Transposed convolutions were not measured and are recorded without one.
* Depthwise convolutions (groups = channels) in float32 do not go through cuDNN
  (aten/src/ATen/native/Convolution.cpp, use_cudnn_depthwise wants half precision): no workspace.

The fit is of one network in float32 on one device; other dtypes and devices get the same rule
(sizes scale with the operands) and are not measured.
"""

NATIVE_MIN_POSITIONS = 196
NATIVE_FILTER_MIN_POSITIONS = 784
NATIVE_BYTES = 400
TRANSFORM_SLACK = 147
SPLIT_K_BYTES = 8 << 20

FORWARD_OPS = {"aten::convolution", "aten::_convolution"}
BACKWARD_OPS = {"aten::convolution_backward"}


def _numel(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _bytes(shape, itemsize):
    return _numel(shape) * itemsize


def _geometry(x_shape, w_shape, stride, padding, dilation, transposed, groups):
    """(kernel is 1x1, stride 1, output positions, output shape) of a convolution, or None."""
    if len(x_shape) < 3 or len(w_shape) != len(x_shape):
        return None
    spatial = len(x_shape) - 2

    def per_dim(v):
        v = list(v) if isinstance(v, (list, tuple)) else [v]
        return v * spatial if len(v) == 1 else v

    stride, padding, dilation = per_dim(stride), per_dim(padding), per_dim(dilation)
    kernel = [int(k) for k in w_shape[2:]]
    if transposed:
        return None  # the forward of a transposed convolution is a backward-data: handled by the caller
    out = []
    for i in range(spatial):
        o = (int(x_shape[2 + i]) + 2 * int(padding[i]) - int(dilation[i]) * (kernel[i] - 1) - 1) // int(stride[i]) + 1
        out.append(max(o, 0))
    out_shape = [int(x_shape[0]), int(w_shape[0])] + out
    pointwise = all(k == 1 for k in kernel)
    unit_stride = all(int(s) == 1 for s in stride)
    return pointwise, unit_stride, _numel(out), out_shape


def _depthwise(x_shape, w_shape, groups, itemsize):
    return groups > 1 and groups == int(x_shape[1]) and int(w_shape[1]) == 1 and itemsize == 4


def forward_bytes(x_shape, w_shape, y_shape, pointwise, unit_stride, positions, itemsize):
    if pointwise and unit_stride and positions >= NATIVE_MIN_POSITIONS:
        return NATIVE_BYTES
    total = _bytes(x_shape, itemsize) + _bytes(y_shape, itemsize)
    if not pointwise:
        total += _bytes(w_shape, itemsize)
    return total + TRANSFORM_SLACK


def filter_bytes(x_shape, w_shape, y_shape, pointwise, unit_stride, positions, itemsize):
    if pointwise and unit_stride and positions >= NATIVE_FILTER_MIN_POSITIONS:
        return int(x_shape[0]) * _bytes(w_shape, itemsize) + NATIVE_BYTES
    return _bytes(y_shape, itemsize) + _bytes(x_shape, itemsize) + _bytes(w_shape, itemsize) + SPLIT_K_BYTES


def transient(name, args):
    """Byte sizes, in the order cuDNN takes them, of the workspaces a convolution op allocates and
    frees inside itself; [] for other ops and for convolutions cuDNN does not run."""
    import torch

    if name not in FORWARD_OPS and name not in BACKWARD_OPS:
        return []
    if name in FORWARD_OPS:
        if len(args) < 9:
            return []
        x, w = args[0], args[1]
        stride, padding, dilation, transposed, groups = args[3], args[4], args[5], bool(args[6]), int(args[8])
        mask = None
    else:
        if len(args) < 11:
            return []
        gy, x, w = args[0], args[1], args[2]
        stride, padding, dilation, transposed, groups = args[4], args[5], args[6], bool(args[7]), int(args[9])
        mask = list(args[10])
    if not all(isinstance(t, torch.Tensor) for t in (x, w)) or x.dim() not in (4, 5):
        return []
    itemsize = x.element_size()
    if _depthwise(x.shape, w.shape, groups, itemsize):
        return []
    if transposed:
        return []  # no transposed convolution was measured: recorded without a workspace
    geometry = _geometry(x.shape, w.shape, stride, padding, dilation, transposed, groups)
    if geometry is None:
        return []
    pointwise, unit_stride, positions, y_shape = geometry
    if mask is None:
        return [forward_bytes(x.shape, w.shape, y_shape, pointwise, unit_stride, positions, itemsize)]
    sizes = []
    if mask[0]:
        sizes.append(forward_bytes(x.shape, w.shape, y_shape, pointwise, unit_stride, positions, itemsize))
    if len(mask) > 1 and mask[1]:
        sizes.append(filter_bytes(x.shape, w.shape, y_shape, pointwise, unit_stride, positions, itemsize))
    return sizes
