"""Recording harnesses: the option sets under which a paper's experiments ran, so that a trace can be
recorded the way that harness trained (scripts/record_pytorch.py --harness NAME). Torch-free: the
command line reads it before importing torch.

oneflow: Coop's sweeps as OneFlow ran them (Oneflow-Inc/oneflow branch dtr2 @ 6836f998,
run_full.sh:32 `ITERS=1`; run_dtr.py:265-266 `flow.optim.SGD(lr=0.001, momentum=0.0)`,
run_dtr.py:289-290 `flow.nn.ContiguousGrad(model)` and :292 `zero_grad(set_to_none=False)` for Coop):
one training iteration, plain SGD (no optimizer state), one zeroed gradient per parameter allocated
before the first forward and kept, and OneFlow's op granularity where it decides what can be
recomputed (dropout as a random mask and a deterministic op: fused.py).
"""

# optim.make_optimizer's names; the op granularities of session.record
GRANULARITIES = ("pytorch", "oneflow")
OPTIMIZERS = ("sgd", "sgd-plain", "adam", "adamw")

HARNESSES = {
    "oneflow": {"iterations": 1, "optimizer": "sgd-plain", "preallocate_grads": True, "granularity": "oneflow"},
}


def apply_harness(args):
    """Fills the options a harness sets where the command line left them unset, then the defaults."""
    for key, value in HARNESSES.get(args.harness or "", {}).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.iterations is None:
        args.iterations = 2
    args.preallocate_grads = bool(args.preallocate_grads)
    if args.granularity is None:
        args.granularity = "pytorch"
    if args.preallocate_grads:
        args.keep_grads = True
