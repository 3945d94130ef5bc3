"""coopsim's Python package (docs/python.md).

    coopsim.record(model, batch, loss_fn, optimizer, ...)   # a PyTorch training step -> trace v1 (needs torch)
    coopsim.run(trace, allocator=..., policy=..., budget=...)  # -> pandas.DataFrame, one row per run
    coopsim.sweep(config, output_dir)                        # -> typed DataFrame of results.csv (.attrs["minbudget"]); shards=, executor=, progress=
    coopsim.minbudget(trace, policy, allocator)              # -> dict
    coopsim.advise(trace, capacity)                          # -> dict: which PYTORCH_CUDA_ALLOC_CONF (or policy) fits
    coopsim.fit(model, batch, loss_fn, optimizer, capacity=)  # -> DataFrame: what to change so the step fits (needs torch)
    coopsim.plot.figures(sweep_dir)                          # figures of a sweep (needs matplotlib)

Importing coopsim imports neither torch nor pandas nor matplotlib: each is imported by what needs it.
"""
from .recording.trace import read_trace
from .sim import CoopsimError, advise, find_binary, installed_torch_snapshot_format, minbudget, run, sweep, validate


def _project_version():
    """meson.build's project version, the one source of the version: meson.build's in a source tree
    (this package used from python/), else the installed distribution's (python/setup.py copied it
    from meson.build)."""
    import os
    import re
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if os.path.isfile(os.path.join(package_dir, "setup.py")):
        try:
            with open(os.path.join(os.path.dirname(package_dir), "meson.build"), encoding="utf-8") as f:
                found = re.search(r"^\s*version: '([^']+)'", f.read(), re.M)
            if found:
                return found.group(1)
        except OSError:
            pass
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("coopsim")
    except PackageNotFoundError:
        return "unknown"


__version__ = _project_version()  # tests: test_one_version_everywhere
__all__ = ["record", "fit", "run", "installed_torch_snapshot_format", "sweep", "minbudget", "advise", "validate", "find_binary", "read_trace", "CoopsimError", "Spec",
           "MODELS"]


def record(model, batch, loss_fn, optimizer="adamw", **options):
    """Records training steps of a PyTorch model as a coopsim trace; returns its path.
    See coopsim.recording.api.record for the options."""
    from .recording.api import record as _record
    return _record(model, batch, loss_fn, optimizer, **options)


def fit(model, batch, loss_fn, optimizer="adamw", **options):
    """Ranks the PyTorch changes (checkpointing, micro-batches, bf16, smaller batch) that make a training
    step fit a GPU, recorded in fake mode. See coopsim.fit_step.fit for the options."""
    from .fit_step import fit as _fit
    return _fit(model, batch, loss_fn, optimizer, **options)


def __getattr__(name):
    if name == "Spec":
        from .recording.models import Spec
        return Spec
    if name == "MODELS":
        from .recording.models import MODELS
        return MODELS
    if name == "plot":
        import importlib
        return importlib.import_module(".plot", __name__)
    raise AttributeError(f"module 'coopsim' has no attribute {name!r}")
