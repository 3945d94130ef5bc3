"""Runs coopsim's commands: run, sweep, minbudget and advise, with their results as pandas DataFrames / dicts.

In-process when the native module coopsim._native is there (python/native: the library's command
line, same arguments, errors and exit statuses as the executable): installed beside this package,
at $COOPSIM_NATIVE (the module's file), or in the source tree's build/python/ (when this package is
used from python/ in a checkout). Otherwise, or when a `binary` is passed, the coopsim executable
runs, found in order: the `binary` argument, $COOPSIM_BIN, the source tree's build/src/coopsim,
`coopsim` on PATH. A failing command raises CoopsimError, whose message is coopsim's one-line error
(`coopsim: error: ...` without the prefix).
"""
import glob
import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import tempfile

_SOURCE_TREE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SOURCE_TREE_BINARY = os.path.join(_SOURCE_TREE, "build", "src", "coopsim")
_native = None  # the loaded module, once found


def native_module():
    """coopsim._native, or None when it is nowhere to be found (see the module's docstring)."""
    global _native
    if _native is not None:
        return _native
    try:
        from . import _native as module  # installed beside the package
        _native = module
        return module
    except ImportError:
        pass
    suffixes = importlib.machinery.EXTENSION_SUFFIXES
    candidates = [os.environ.get("COOPSIM_NATIVE")] + [
        p for suffix in suffixes for p in sorted(glob.glob(os.path.join(_SOURCE_TREE, "build", "python", "_native" + suffix)))]
    for path in candidates:
        if not path:
            continue
        if not os.path.isfile(path):
            raise CoopsimError(f"{path}: no native module there ($COOPSIM_NATIVE)")
        spec = importlib.util.spec_from_file_location("coopsim._native", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _native = module
        return module
    return None


class CoopsimError(RuntimeError):
    """A coopsim command failed: str(e) is its one-line message; .returncode, .stderr and .command
    hold the rest."""

    def __init__(self, message, returncode=None, stderr="", command=()):
        super().__init__(message)
        self.message, self.returncode, self.stderr, self.command = message, returncode, stderr, list(command)


def find_binary(binary=None):
    """The path of the coopsim binary to run (see the module's docstring for the search order)."""
    candidates = [("the binary argument", binary), ("$COOPSIM_BIN", os.environ.get("COOPSIM_BIN")),
                  ("the source tree", _SOURCE_TREE_BINARY), ("PATH", shutil.which("coopsim"))]
    for where, path in candidates:
        if not path:
            continue
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
        if where != "the source tree":
            raise CoopsimError(f"{path}: no executable coopsim binary there ({where})")
    raise CoopsimError("no coopsim binary: pass binary=, set $COOPSIM_BIN, build the source tree "
                       "(scripts/test.sh or meson setup build && ninja -C build) or put coopsim on PATH")


def call(args, binary=None, timeout=None, answers=(0,)):
    """Runs `coopsim ARGS...` and returns its stdout; raises CoopsimError on an exit status not in
    `answers` (advise's 3, nothing fits, is an answer). In-process through the native module unless
    a binary is passed or no module is found; `timeout` applies to a spawned binary only."""
    args = [str(a) for a in args]
    native = native_module() if binary is None else None
    if native is not None:
        command = ["coopsim", *args]
        status, out, err = native.command_line(args)
        out, err = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    else:
        command = [find_binary(binary), *args]
        p = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        status, out, err = p.returncode, p.stdout, p.stderr
    return _answer(command, status, out, err, answers)


def write_trace(text, path, binary=None):
    """Writes trace v1 text (JSON lines, e.g. the recorder's records) to path through coopsim's own
    loader and writer: every record is checked, the file is written in coopsim's canonical form
    (gzip when path ends in .gz) by its output-file rules. In-process through the native module;
    otherwise `coopsim validate --write PATH -` reads the text on its standard input."""
    path = os.fsdecode(_path(path, "path"))
    data = text.encode("utf-8")
    native = native_module() if binary is None else None
    if native is not None:
        problem = native.write_trace(data, path, "<recorded trace>")
        if problem:
            raise CoopsimError(problem, 1, "coopsim: error: " + problem + "\n", ["write_trace", path])
        return
    command = [find_binary(binary), "validate", "--write", path, "--", "-"]
    p = subprocess.run(command, input=data, capture_output=True)
    _answer(command, p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace"), (0,))


def _answer(command, status, out, err, answers):
    if status not in answers:
        lines = [line for line in err.splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("coopsim: error: ")]
        line = errors[0] if errors else (lines[-1] if lines else f"exit status {status}")
        raise CoopsimError(line.removeprefix("coopsim: error: "), status, err, command)
    return out


def _path(value, name):
    """A path argument as text (str or os.PathLike); TypeError for anything else, ValueError when empty."""
    if not isinstance(value, (str, bytes, os.PathLike)):
        raise TypeError(f"{name}: expected a path (str or os.PathLike), got {type(value).__name__} {value!r}")
    text = os.fsdecode(os.fspath(value))
    if not text:
        raise ValueError(f"{name}: an empty path")
    return text


def _option(flag, value):
    """'--flag=VALUE': one argument, so a value that begins with '-' is never read as an option."""
    return f"{flag}={value}"


def _value(value, name):
    """An option value as text; ValueError when it, or an entry of its comma list, is empty (the binary
    would refuse it, or drop the entry)."""
    text = str(value)
    if not all(text.split(",")):
        raise ValueError(f"{name}: {text!r} holds an empty value")
    return text


def _list(value, name):
    """None, a value or a list of values -> None or 'a,b'; an empty list or value is a ValueError
    (the binary would take it as the config's default)."""
    if value is None:
        return None
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if not items:
        raise ValueError(f"{name}: an empty list (give at least one value, or None for the config's)")
    return ",".join(_value(v, name) for v in items)


def _sets(sets):
    """{'key': value} or ['key=value', ...] -> ['--set=key=value', ...]."""
    if not sets:
        return []
    if isinstance(sets, dict):
        items = list(sets.items())
    elif isinstance(sets, (list, tuple)):
        items = []
        for s in sets:
            if not isinstance(s, str) or "=" not in s or s.startswith("="):
                raise ValueError(f"sets: {s!r} is not a 'key=value' string")
            items.append(tuple(s.split("=", 1)))
    else:
        raise TypeError(f"sets: expected a dict or a list of 'key=value' strings, got {type(sets).__name__} {sets!r}")
    out = []
    for key, value in items:
        if not isinstance(key, str) or not key:
            raise ValueError(f"sets: {key!r} is not a key")
        if isinstance(value, bool):
            value = "true" if value else "false"
        out.append(_option("--set", f"{key}={value}"))
    return out


def _options(allocator=None, policy=None, budget=None, sets=None, config=None):
    args = []
    if config is not None:
        args.append(_option("--config", _path(config, "config")))
    for flag, name, value in (("--allocator", "allocator", allocator), ("--policy", "policy", policy),
                              ("--budget", "budget", budget)):
        value = _list(value, name)
        if value is not None:
            args.append(_option(flag, value))
    return args + _sets(sets)


def _read_csv(path):
    from .frames import read_csv
    return read_csv(path)


def installed_torch_snapshot_format():
    """The --torch-snapshot-format this Python's torch reads: "1.13" for a torch 1.x, "2.x" for a
    torch 2.x or none (pytorch.org/memory_viz reads 2.x). From the installed package's metadata:
    torch is not imported."""
    from importlib import metadata
    try:
        version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "2.x"
    return "1.13" if version.startswith("1.") else "2.x"


def run(trace, allocator=None, policy=None, budget=None, sets=None, config=None, binary=None, args=(),
        initial_state=None, torch_snapshot=None, torch_snapshot_format=None):
    """`coopsim run TRACE ... --csv`: one DataFrame row per run (every allocator x policy x budget
    combination; the CSV columns of docs/architecture.md). allocator, policy and budget take a value
    or a list ('all' for the first two); None leaves the config's (default: pytorch, keep, 80GiB);
    budget: bytes, '8GiB' or '60%'; sets: {'key': value} for --set; config: a JSON config file; args:
    further command-line arguments; initial_state: 'recorded' or 'empty' for a trace imported from a
    snapshot (--initial-state); torch_snapshot: write the run as a PyTorch memory snapshot there, in
    the layout torch_snapshot_format ('2.x' or '1.13'; default: the one this Python's torch reads,
    installed_torch_snapshot_format()). The text report is in df.attrs['report']."""
    trace = _path(trace, "trace")
    options = _options(allocator, policy, budget, sets, config)
    if initial_state is not None:
        args = [_option("--initial-state", initial_state), *args]
    if torch_snapshot is not None:
        layout = installed_torch_snapshot_format() if torch_snapshot_format is None else torch_snapshot_format
        args = [_option("--torch-snapshot", _path(torch_snapshot, "torch_snapshot")),
                _option("--torch-snapshot-format", _value(layout, "torch_snapshot_format")), *args]
    elif torch_snapshot_format is not None:
        raise ValueError("torch_snapshot_format: only with torch_snapshot (the file to write)")
    with tempfile.TemporaryDirectory(prefix="coopsim-run-") as tmp:
        csv = os.path.join(tmp, "results.csv")
        report = call(["run", *options, *args, _option("--csv", csv), "--", trace], binary)
        df = _read_csv(csv)
    df.attrs["report"] = report
    return df


def sweep(config, output_dir, jobs=None, binary=None, resume=False, progress=None, shards=None, executor=None):
    """`coopsim sweep CONFIG -o OUTPUT_DIR`: the DataFrame of OUTPUT_DIR/results.csv, with
    df.attrs["minbudget"] (minbudget.csv, or None) and df.attrs["output_dir"]. config is a JSON file
    (its trace paths relative to its folder) or a dict (trace paths relative to the current
    directory; written to OUTPUT_DIR/sweep-config.json). progress, shards and executor:
    coopsim.sweeps (docs/python.md)."""
    from .sweeps import sweep as run_sweep
    return run_sweep(config, output_dir, jobs=jobs, binary=binary, resume=resume, progress=progress, shards=shards,
                     executor=executor)


def minbudget(trace, policy, allocator, max_overhead=None, sets=None, config=None, binary=None, initial_state=None):
    """`coopsim minbudget TRACE -p POLICY -a ALLOCATOR --json`: the smallest budget that completes,
    as a dict (min_budget_bytes, ratio_of_peak, compute_overhead, found, runs, ...); initial_state as
    for run()."""
    trace = _path(trace, "trace")
    args = ["minbudget", _option("--policy", _value(policy, "policy")), _option("--allocator", _value(allocator, "allocator")),
            "--json"]
    if initial_state is not None:
        args.append(_option("--initial-state", initial_state))
    if max_overhead is not None:
        args.append(_option("--max-overhead", max_overhead))
    if config is not None:
        args.append(_option("--config", _path(config, "config")))
    return json.loads(call(args + _sets(sets) + ["--", trace], binary))


def advise(trace, capacity, sets=None, config=None, jobs=None, binary=None, reserve=None):
    """`coopsim advise TRACE --capacity CAPACITY --json`: PYTORCH_CUDA_ALLOC_CONF settings (and, when
    none fits, recompute and swap policies) ranked at the usable capacity (capacity - reserve), as a
    dict: 'verdict' (the first line of the text output), 'fits_with_settings' (some allocator
    setting fits with policy keep; 'fits' is the same), 'fits_with_policy' (only a recompute or swap
    policy fits), 'spare_bytes' (the defaults fit) or 'short_bytes' (they do not), 'reserve_bytes',
    'usable_bytes', 'min_capacity_bytes' (the smallest capacity for PyTorch's defaults, reserve
    included), 'step_ms' (the answer's simulated time per iteration), 'use' (the line to use),
    'answer' (the top entry), 'settings' and 'policies' (every simulation, ranked; their 'run' holds the
    coopsim run arguments that reproduce it). Nothing fitting is an answer, not an error (exit 3);
    capacity: bytes, '80GiB' or '90%'; reserve: bytes or '1GiB' (None: the binary's default, 512 MiB
    for the CUDA context)."""
    trace = _path(trace, "trace")
    args = ["advise", _option("--capacity", _value(capacity, "capacity")), "--json"]
    if reserve is not None:
        args.append(_option("--reserve", _value(reserve, "reserve")))
    if config is not None:
        args.append(_option("--config", _path(config, "config")))
    if jobs is not None:
        args.append(_option("--jobs", jobs))
    args += _sets(sets)
    return json.loads(call(args + ["--", trace], binary, answers=(0, 3)))


def validate(trace, binary=None):
    """`coopsim validate TRACE`: its text output (raises CoopsimError for an invalid trace)."""
    return call(["validate", "--", _path(trace, "trace")], binary)
