"""The command line of scripts/record_pytorch.py (docs/recording.md)."""
import argparse
import importlib
import importlib.util
import os
import sys
import time

from .harness import GRANULARITIES, HARNESSES, OPTIMIZERS, apply_harness

TOOL = "scripts/record_pytorch.py"


def parse_args(argv, models):
    p = argparse.ArgumentParser(prog="record_pytorch.py",
                                description="Record a coopsim trace from PyTorch training iterations.")
    p.add_argument("--model", required=True, metavar="NAME|MODULE:FUNCTION",
                   help=f"a bundled model ({', '.join(sorted(models))}) or MODULE:FUNCTION, a function returning "
                        "an nn.Module or a Spec (MODULE: a dotted module name or a .py file)")
    p.add_argument("--batch", type=int, help="batch size (default: the model's evaluation batch)")
    p.add_argument("--iterations", type=int, help="training iterations to record (default 2; --harness oneflow: 1)")
    p.add_argument("-o", "--output", required=True, help="output trace (.jsonl or .jsonl.gz)")
    p.add_argument("--fake", action="store_true", help="FakeTensors: exact sizes, no memory; implies an estimate")
    p.add_argument("--device-profile", choices=["a100", "h100", "h200"],
                   help="estimate durations with this GPU's roofline instead of measuring")
    p.add_argument("--duration-model", choices=["fitted", "roofline"], default="fitted",
                   help="with a device profile: 'fitted' (default; per-kind efficiencies and a per-kernel floor "
                        "fitted to H200 measurements) or the bare 'roofline'")
    p.add_argument("--launch-overhead", type=float, default=0.0, metavar="NS",
                   help="with an estimate: ns added to every op that launches a kernel (default 0)")
    p.add_argument("--device", help="cpu or cuda[:N] (default: cuda when available, else cpu)")
    p.add_argument("--amp", choices=["bf16", "fp16"],
                   help="mixed precision: forward and loss under CUDA autocast's policy (fp16 adds a loss scaler)")
    p.add_argument("--checkpoint", metavar="NAMES|all-blocks",
                   help="activation checkpointing of these modules (comma list of qualified names), or of every "
                        "block the model defines (all-blocks)")
    p.add_argument("--accumulation", type=int, default=1, metavar="N",
                   help="micro-batches (forward + backward) per optimizer step (default 1)")
    p.add_argument("--optimizer", choices=list(OPTIMIZERS),
                   help="override the model's optimizer (sgd-plain: lr 0.001, no momentum, no weight decay)")
    p.add_argument("--keep-grads", action="store_true",
                   help="zero_grad(set_to_none=False): gradients are zeroed in place and stay allocated")
    p.add_argument("--preallocate-grads", action=argparse.BooleanOptionalAction,
                   help="a zeroed gradient per parameter before the first forward, kept (implies --keep-grads; "
                        "--no-preallocate-grads undoes a harness's)")
    p.add_argument("--granularity", choices=list(GRANULARITIES),
                   help="op granularity: pytorch (default: the ATen ops) or oneflow (dropout as OneFlow's random "
                        "mask + deterministic dropout op; torch >= 2.4)")
    p.add_argument("--harness", choices=list(HARNESSES),
                   help="record as a paper's harness ran: oneflow = Coop's sweeps (1 iteration, sgd-plain, "
                        "preallocated kept gradients, oneflow granularity); explicit options still apply")
    p.add_argument("--seed", type=int, default=0, help="torch.manual_seed (default 0)")
    p.add_argument("--quiet", action="store_true", help="no progress or warnings on stderr")
    p.add_argument("--memory-snapshot", metavar="FILE",
                   help="CUDA, torch >= 2.0: record the caching allocator's history in the same run and write "
                        "its snapshot (torch.cuda.memory._snapshot(), pickled; gzip when FILE ends in .gz); the "
                        "allocator's peaks go into the header (source.cuda_memory), and the blocks ops allocate inside "
                        "themselves go from it into the trace (in_op_blocks.py)")
    args = p.parse_args(argv)
    apply_harness(args)
    if ":" not in args.model and args.model not in models:
        p.error(f"argument --model: invalid choice: {args.model!r} (choose from {', '.join(sorted(models))}, "
                "or MODULE:FUNCTION)")
    if args.batch is not None and args.batch < 1:
        p.error("--batch must be at least 1")
    if args.iterations < 1:
        p.error("--iterations must be at least 1")
    if args.accumulation < 1:
        p.error("--accumulation must be at least 1")
    if args.launch_overhead < 0:
        p.error("--launch-overhead must be >= 0")
    if args.launch_overhead and not (args.fake or args.device_profile):
        p.error("--launch-overhead needs an estimate (--device-profile or --fake)")
    if args.memory_snapshot and args.fake:
        p.error("--memory-snapshot needs a real run: FakeTensors allocate no device memory (drop --fake)")
    return args


def load_function(ref):
    """MODULE:FUNCTION -> (python module, function); MODULE is a .py path or a dotted name importable
    from the current directory or sys.path."""
    module_ref, _, attr = ref.rpartition(":")
    if module_ref.endswith(".py") or os.sep in module_ref:
        spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(module_ref))[0], module_ref)
        if spec is None or not os.path.exists(module_ref):
            raise ImportError(f"{module_ref}: no such file")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        module = importlib.import_module(module_ref)
    if not hasattr(module, attr):
        raise AttributeError(f"{module_ref} has no attribute {attr!r}")
    return module, getattr(module, attr)


def user_spec(ref, fake):
    """The Spec of --model MODULE:FUNCTION. FUNCTION returns a Spec, or an nn.Module: then MODULE must
    define inputs(batch, device) and loss(model, batch), and may define BATCH (default 1) and OPTIMIZER
    (default adamw). Under --fake FUNCTION runs in a FakeTensorMode (and again when recording)."""
    import torch

    from .compat import FakeTensorMode
    from .models import Spec
    module, fn = load_function(ref)
    if isinstance(fn, Spec):
        return fn
    with FakeTensorMode() if fake else torch.no_grad():
        result = fn()
    if isinstance(result, Spec):
        return result
    if not isinstance(result, torch.nn.Module):
        raise TypeError(f"{ref} returned {type(result).__name__}, not an nn.Module or a Spec")
    missing = [f for f in ("inputs", "loss") if not callable(getattr(module, f, None))]
    if missing:
        raise TypeError(f"{ref} returned an nn.Module, so {module.__name__} must define inputs(batch, device) and "
                        f"loss(model, batch) (missing: {', '.join(missing)}), or {fn.__name__} must return a Spec")
    built = result

    def build():
        return fn() if fake else built
    return Spec(ref, getattr(module, "BATCH", 1), build, module.inputs, module.loss, getattr(module, "OPTIMIZER", "adamw"),
                f"{type(result).__name__} from {ref}")


def main(argv=None, tool=TOOL):
    try:
        import torch
    except ImportError as e:
        print(f"record_pytorch: error: torch is not importable ({e}); install python3-torch", file=sys.stderr)
        return 1
    from . import api
    from .models import MODELS
    from .session import record

    args = parse_args(argv, MODELS)
    label = args.model
    log = None if args.quiet else (lambda msg: print(f"record_pytorch: {msg}", file=sys.stderr))
    started = time.perf_counter()
    try:
        api.check_options(args.iterations, args.accumulation, args.amp, args.fake)
        spec = MODELS[args.model] if args.model in MODELS else user_spec(args.model, args.fake)
        batch = args.batch or spec.batch
        device = api.default_device(args.device, args.fake)
        timer, profile = api.make_timer(device, args.fake, args.device_profile, args.launch_overhead,
                                        args.duration_model)
        if profile is None and not device.startswith("cuda") and log:
            print(f"record_pytorch: warning: {api.WALL_CLOCK_WARNING.replace('a device profile', '--device-profile')}",
                  file=sys.stderr)
        checkpoint = None
        if args.checkpoint == "all-blocks":
            checkpoint = spec.checkpoint_blocks()
        elif args.checkpoint:
            checkpoint = [n.strip() for n in args.checkpoint.split(",") if n.strip()]
        optimizer = args.optimizer or spec.optimizer
        history = None
        if args.memory_snapshot:
            from .cuda_memory import MemoryHistory
            history = MemoryHistory(device)
            history.start()  # before the model exists: the snapshot's history covers the whole run
        workspaces = api.Workspaces.for_recording(device, args.fake, profile)
        torch.manual_seed(args.seed)
        try:
            builder = record(spec.build, lambda dev: spec.inputs(batch, dev), spec.loss, optimizer,
                             iterations=args.iterations, device=device, fake=args.fake, timer=timer, log=log,
                             amp=args.amp, checkpoint=checkpoint, accumulation=args.accumulation,
                             set_to_none=not args.keep_grads, workspaces=workspaces,
                             preallocate_grads=args.preallocate_grads,
                             granularity=None if args.granularity == "pytorch" else args.granularity,
                             cuda_like=args.fake or (profile is not None and not device.startswith("cuda")))
            if history is not None:
                cuda_memory = history.stats()
                cuda_memory["snapshot"] = os.path.basename(args.memory_snapshot)
                snapshot = history.snapshot()
        finally:
            if history is not None:
                history.stop()
        source = {"tool": tool, "torch": api.compat.version(), "model": spec.summary, "batch": batch,
                  "evaluation_batch": spec.batch, "iterations": args.iterations,
                  "optimizer": optimizer if isinstance(optimizer, str) else getattr(optimizer, "__qualname__", "callable"),
                  "fake": args.fake, "seed": args.seed}
        source.update(api.source_fields(model_dtype=builder.model_dtype, amp=args.amp,
                                        checkpoint=api.describe_checkpoint(checkpoint, builder),
                                        accumulation=args.accumulation, set_to_none=not args.keep_grads,
                                        preallocate_grads=args.preallocate_grads, harness=args.harness,
                                        granularity=args.granularity))
        source["durations"] = timer.describe()
        source["workspaces"] = workspaces.describe() if workspaces is not None else None
        if history is not None:
            source["cuda_memory"] = cuda_memory
        header = {"format": "coopsim-trace", "version": 1, "model": spec.name, "source": source, "time_unit": "ns",
                  "iterations": args.iterations, "device": api.device_name(device, args.fake)}
        builder.write(args.output, header)
        if history is not None:
            history.write(snapshot, args.memory_snapshot)
            # The blocks ops took inside themselves (cuDNN's workspaces) from the allocator's history:
            # measured, they replace the rule's estimate.
            from . import in_op_blocks
            in_op_blocks.merge_files(args.output, args.memory_snapshot, args.output)
    except Exception as e:  # one line, no traceback: the recorder's contract with scripts and tests
        if os.environ.get("COOPSIM_RECORD_TRACEBACK"):
            import traceback
            traceback.print_exc()
        print(f"record_pytorch: error: {label}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
              file=sys.stderr)
        return 1
    if log:
        log(f"wrote {args.output}: {len(builder.tensors)} tensors, {len(builder.ops)} ops, {len(builder.events)} "
            f"events, peak live {builder.peak_live()} bytes, {time.perf_counter() - started:.1f} s")
        if args.memory_snapshot:
            log(f"wrote {args.memory_snapshot}: max_memory_allocated {cuda_memory['max_memory_allocated']} bytes, "
                f"max_memory_reserved {cuda_memory['max_memory_reserved']} bytes")
    return 0


def console_main():
    """The `coopsim-record` entry point of an installed package (same options as record_pytorch.py)."""
    sys.exit(main(tool="coopsim-record"))
