"""Runs the coopsim binary: run, sweep, minbudget and advise, with their results as pandas DataFrames / dicts.

The binary is found, in order: the `binary` argument, $COOPSIM_BIN, the source tree's build/src/coopsim
(when this package is used from python/ in a checkout), `coopsim` on PATH. A failing command raises
CoopsimError, whose message is the binary's one-line error (`coopsim: error: ...` without the prefix).
"""
import json
import os
import shutil
import subprocess
import tempfile

_SOURCE_TREE_BINARY = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                   "build", "src", "coopsim")


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
    `answers` (advise's 3, nothing fits, is an answer)."""
    command = [find_binary(binary), *map(str, args)]
    p = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if p.returncode not in answers:
        lines = [line for line in p.stderr.splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("coopsim: error: ")]
        line = errors[0] if errors else (lines[-1] if lines else f"exit status {p.returncode}")
        raise CoopsimError(line.removeprefix("coopsim: error: "), p.returncode, p.stderr, command)
    return p.stdout


def _list(value):
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def _sets(sets):
    """{'key': value} or ['key=value', ...] -> ['--set', 'key=value', ...]."""
    if not sets:
        return []
    items = sets.items() if isinstance(sets, dict) else (s.split("=", 1) for s in sets)
    out = []
    for key, value in items:
        if isinstance(value, bool):
            value = "true" if value else "false"
        out += ["--set", f"{key}={value}"]
    return out


def _options(allocator=None, policy=None, budget=None, sets=None, config=None):
    args = []
    if config is not None:
        args += ["--config", os.fspath(config)]
    for flag, value in (("--allocator", _list(allocator)), ("--policy", _list(policy)), ("--budget", _list(budget))):
        if value is not None:
            args += [flag, value]
    return args + _sets(sets)


def _read_csv(path):
    import pandas
    return pandas.read_csv(path, keep_default_na=True)


def run(trace, allocator=None, policy=None, budget=None, sets=None, config=None, binary=None, args=(),
        initial_state=None):
    """`coopsim run TRACE ... --csv`: one DataFrame row per run (every allocator x policy x budget
    combination; the CSV columns of docs/architecture.md). allocator, policy and budget take a value
    or a list ('all' for the first two); None leaves the config's (default: pytorch, keep, no limit);
    budget: bytes, '8GiB' or '60%'; sets: {'key': value} for --set; config: a JSON config file; args:
    further command-line arguments; initial_state: 'recorded' or 'empty' for a trace imported from a
    snapshot (--initial-state). The text report is in df.attrs['report']."""
    if initial_state is not None:
        args = ["--initial-state", initial_state, *args]
    with tempfile.TemporaryDirectory(prefix="coopsim-run-") as tmp:
        csv = os.path.join(tmp, "results.csv")
        report = call(["run", os.fspath(trace), *_options(allocator, policy, budget, sets, config), *args,
                       "--csv", csv], binary)
        df = _read_csv(csv)
    df.attrs["report"] = report
    return df


def sweep(config, output_dir, jobs=None, binary=None, resume=False):
    """`coopsim sweep CONFIG -o OUTPUT_DIR`: the DataFrame of OUTPUT_DIR/results.csv. config is a JSON
    file (its trace paths relative to its folder) or a dict (trace paths relative to the current
    directory; written to OUTPUT_DIR/sweep-config.json)."""
    output_dir = os.fspath(output_dir)
    if isinstance(config, dict):
        config = dict(config)
        config["traces"] = [os.path.abspath(t) for t in config.get("traces", [])]
        os.makedirs(output_dir, exist_ok=True)
        path = os.path.join(output_dir, "sweep-config.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(config, f, indent=2)
        config = path
    args = ["sweep", os.fspath(config), "-o", output_dir]
    if jobs is not None:
        args += ["-j", str(jobs)]
    if resume:
        args.append("--resume")
    call(args, binary)
    return _read_csv(os.path.join(output_dir, "results.csv"))


def minbudget(trace, policy, allocator, max_overhead=None, sets=None, config=None, binary=None, initial_state=None):
    """`coopsim minbudget TRACE -p POLICY -a ALLOCATOR --json`: the smallest budget that completes,
    as a dict (min_budget_bytes, ratio_of_peak, compute_overhead, found, runs, ...); initial_state as
    for run()."""
    args = ["minbudget", os.fspath(trace), "--policy", policy, "--allocator", allocator, "--json"]
    if initial_state is not None:
        args += ["--initial-state", initial_state]
    if max_overhead is not None:
        args += ["--max-overhead", str(max_overhead)]
    if config is not None:
        args += ["--config", os.fspath(config)]
    return json.loads(call(args + _sets(sets), binary))


def advise(trace, capacity, sets=None, config=None, jobs=None, binary=None, reserve=None):
    """`coopsim advise TRACE --capacity CAPACITY --json`: PYTORCH_CUDA_ALLOC_CONF settings (and, when
    none fits, recompute and swap policies) ranked at the usable capacity (capacity - reserve), as a
    dict: 'verdict' (the first line of the text output), 'fits_with_settings' (some allocator
    setting fits with policy keep; 'fits' is the same), 'fits_with_policy' (only a recompute or swap
    policy fits), 'spare_bytes' (the defaults fit) or 'short_bytes' (they do not), 'reserve_bytes',
    'usable_bytes', 'min_capacity_bytes' (the smallest capacity for PyTorch's defaults, reserve
    included), 'step_ms' (the answer's simulated time per iteration), 'use' (the line to use),
    'answer' (the top entry), 'settings' and 'policies' (every replay, ranked; their 'run' holds the
    coopsim run arguments that reproduce it). Nothing fitting is an answer, not an error (exit 3);
    capacity: bytes, '80GiB' or '90%'; reserve: bytes or '1GiB' (None: the binary's default, 512 MiB
    for the CUDA context)."""
    args = ["advise", os.fspath(trace), "--capacity", str(capacity), "--json"]
    if reserve is not None:
        args += ["--reserve", str(reserve)]
    if config is not None:
        args += ["--config", os.fspath(config)]
    if jobs is not None:
        args += ["--jobs", str(jobs)]
    args += _sets(sets)
    return json.loads(call(args, binary, answers=(0, 3)))


def validate(trace, binary=None):
    """`coopsim validate TRACE`: its text output (raises CoopsimError for an invalid trace)."""
    return call(["validate", os.fspath(trace)], binary)
