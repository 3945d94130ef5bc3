"""coopsim.sweep: a sweep config run in-process or by the binary, with progress, and in shards on any
executor (docs/python.md "Sweeps").

    df = coopsim.sweep(config, output_dir, jobs=None, progress=None, shards=None, executor=None)
    df                       # results.csv, typed (coopsim.frames)
    df.attrs["minbudget"]    # minbudget.csv as a DataFrame (None when the config asks for no searches)

progress: None (a tqdm bar on a terminal when tqdm is installed, else nothing), False (nothing), or a
callable(done, total, line) called as runs finish (`line`: the binary's progress line). Progress needs
the binary (it streams its stderr); without one the sweep runs in-process and the callable is called
once, at the end.

shards=N runs `coopsim sweep --shard K/N` for K = 1..N, each in its own process, submitted to
`executor` (any object whose submit(fn, *args) returns a future with .result(): a
concurrent.futures executor, a dask.distributed Client, ...; default: a thread pool of N), then merges
them with `coopsim merge` into output_dir: the same files as one unsharded sweep (docs/cluster.md).
The workers run the binary found here (its absolute path), so they must share this machine's file
system.
"""
import json
import os
import re
import subprocess
import sys
import threading

from .frames import read_csv

_PROGRESS = re.compile(r"^sweep: (\d+)/(\d+) ")


def _config_path(config, output_dir, path_of):
    """A config file path; a dict is written to OUTPUT_DIR/sweep-config.json (trace paths made absolute)."""
    if isinstance(config, dict):
        config = dict(config)
        traces = config.get("traces", [])
        if not isinstance(traces, (list, tuple)):
            raise TypeError(f"sweep config 'traces': expected a list of trace paths, got {type(traces).__name__} "
                            f"{traces!r}")
        config["traces"] = [os.path.abspath(path_of(t, f"sweep config 'traces'[{i}]")) for i, t in enumerate(traces)]
        os.makedirs(output_dir, exist_ok=True)
        path = os.path.join(output_dir, "sweep-config.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(config, f, indent=2)
        config = path
    return os.path.abspath(path_of(config, "config"))


def _reporter(progress):
    """(callback or None, close): progress=None gives a tqdm bar when stderr is a terminal and tqdm
    is installed."""
    if progress is False:
        return None, lambda: None
    if progress is not None:
        if not callable(progress):
            raise TypeError(f"progress: expected None, False or a callable(done, total, line), got "
                            f"{type(progress).__name__} {progress!r}")
        return progress, lambda: None
    if not (hasattr(sys.stderr, "isatty") and sys.stderr.isatty()):
        return None, lambda: None
    try:
        from tqdm import tqdm
    except ImportError:
        return None, lambda: None
    bar = tqdm(total=0, unit="run", desc="coopsim sweep")

    def update(done, total, _line):
        bar.total = total
        bar.n = done
        bar.refresh()
    return update, bar.close


def _stream(command, on_line):
    """Runs command; on_line(line) for each stderr line as it comes. -> (status, stdout, stderr)."""
    p = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = []
    reader = threading.Thread(target=lambda: out.append(p.stdout.read()))
    reader.start()
    err = []
    for line in p.stderr:
        err.append(line)
        on_line(line)
    reader.join()
    return p.wait(), "".join(out), "".join(err)


def run_shard(binary, config, output_dir, k, n, jobs):
    """One shard, `coopsim sweep --shard K/N` (module level: executors pickle it). -> (status, stderr)."""
    command = [binary, "sweep", f"--output={output_dir}", f"--shard={k}/{n}"]
    if jobs is not None:
        command.append(f"--jobs={jobs}")
    p = subprocess.run(command + ["--", config], capture_output=True, text=True)
    return p.returncode, p.stderr


def sweep(config, output_dir, jobs=None, binary=None, resume=False, progress=None, shards=None, executor=None):
    from .sim import CoopsimError, _answer, _option, _path, call, find_binary, native_module
    output_dir = os.path.abspath(_path(output_dir, "output_dir"))
    if shards is not None and (isinstance(shards, bool) or not isinstance(shards, int) or shards < 1):
        raise ValueError(f"shards: expected a positive int, got {shards!r}")
    if executor is not None and shards is None:
        raise ValueError("executor: only with shards=N")
    if executor is not None and not callable(getattr(executor, "submit", None)):
        raise TypeError(f"executor: expected an object with submit(fn, *args) (a concurrent.futures executor, a "
                        f"dask.distributed Client), got {type(executor).__name__}")
    if shards is not None and resume:
        raise ValueError("resume: not with shards (resume each shard directory with coopsim sweep --resume)")
    config = _config_path(config, output_dir, _path)
    callback, close = _reporter(progress)
    streamed = shards is not None
    try:
        if shards is not None:
            _sharded(find_binary(binary), config, output_dir, shards, jobs, executor, callback)
        else:
            args = ["sweep", _option("--output", output_dir)]
            if jobs is not None:
                args.append(_option("--jobs", jobs))
            if resume:
                args.append("--resume")
            args += ["--", config]
            streamed = False
            if callback is not None:
                try:
                    command = [find_binary(binary), *args]
                except CoopsimError:
                    command = None  # in-process only: one report at the end
                if command is not None:
                    def on_line(line):
                        m = _PROGRESS.match(line)
                        if m:
                            callback(int(m.group(1)), int(m.group(2)), line.rstrip("\n"))
                    status, out, err = _stream(command, on_line)
                    _answer(command, status, out, err, (0,))
                    streamed = True
            if not streamed:
                call(args, binary)
    finally:
        close()
    df = read_csv(os.path.join(output_dir, "results.csv"))
    minbudget = os.path.join(output_dir, "minbudget.csv")
    df.attrs["minbudget"] = read_csv(minbudget) if os.path.exists(minbudget) else None
    df.attrs["output_dir"] = output_dir
    if callback is not None and not streamed:
        callback(len(df), len(df), f"sweep: {len(df)}/{len(df)} runs (in-process)")
    return df


def _sharded(binary, config, output_dir, n, jobs, executor, callback):
    from .sim import _answer, call
    owned = executor is None
    if owned:
        from concurrent.futures import ThreadPoolExecutor
        executor = ThreadPoolExecutor(max_workers=n)
    try:
        dirs = [os.path.join(output_dir, f"shard-{k}-of-{n}") for k in range(1, n + 1)]
        futures = [executor.submit(run_shard, binary, config, d, k, n, jobs) for k, d in enumerate(dirs, 1)]
        for done, (k, future) in enumerate(zip(range(1, n + 1), futures), 1):
            status, err = future.result()
            _answer([binary, "sweep", f"--shard={k}/{n}"], status, "", err, (0,))
            if callback is not None:
                callback(done, n, f"shard {k}/{n} done")
    finally:
        if owned:
            executor.shutdown()
    call(["merge", f"--output={output_dir}", "--", *dirs], binary)
