"""coopsim.run / sweep / minbudget over the built binary, and its errors as CoopsimError."""
import json
import os

import pytest

pandas = pytest.importorskip("pandas")

import coopsim  # noqa: E402
from conftest import ROOT  # noqa: E402

TRACE = os.path.join(ROOT, "traces", "default.jsonl.gz")
COLUMNS = {"trace", "model", "allocator", "policy", "budget_bytes", "status", "peak_allocated_bytes",
           "peak_reserved_bytes", "compute_overhead", "memory_ratio_of_peak"}


def test_run_returns_one_row_per_combination(coopsim_bin):
    df = coopsim.run(TRACE, allocator=["pytorch", "bestfit"], policy="dtr", budget=["60%", "100%"],
                     binary=coopsim_bin)
    assert isinstance(df, pandas.DataFrame)
    assert COLUMNS <= set(df.columns)
    assert sorted(zip(df["allocator"], df["memory_ratio_of_peak"])) == [
        ("bestfit", 0.6), ("bestfit", 1.0), ("pytorch", 0.6), ("pytorch", 1.0)]
    assert set(df["policy"]) == {"dtr"} and set(df["status"]) <= {"completed", "oom", "thrash"}
    assert "dtr" in df.attrs["report"]


def test_run_defaults_and_sets(coopsim_bin):
    default = coopsim.run(TRACE, binary=coopsim_bin)
    assert list(zip(default["allocator"], default["policy"], default["status"])) == [("pytorch", "keep", "completed")]
    chosen = coopsim.run(TRACE, budget="100%", sets={"allocator": "bestfit", "policy": "dtr"}, binary=coopsim_bin)
    assert list(zip(chosen["allocator"], chosen["policy"])) == [("bestfit", "dtr")]


def test_sweep_returns_results_csv(tmp_path, coopsim_bin):
    config = {"traces": [os.path.relpath(TRACE)], "allocators": ["bestfit"], "policies": ["keep", "coop"],
              "budgets": {"ratios": [0.8, 1.0]}}
    df = coopsim.sweep(config, tmp_path / "out", jobs=2, binary=coopsim_bin)
    assert COLUMNS <= set(df.columns) and len(df) == 4
    assert sorted(zip(df["policy"], df["memory_ratio_of_peak"])) == [
        ("coop", 0.8), ("coop", 1.0), ("keep", 0.8), ("keep", 1.0)]
    with open(tmp_path / "out" / "sweep-config.json") as f:
        assert json.load(f)["traces"] == [TRACE]


def test_minbudget_returns_a_dict(coopsim_bin):
    found = coopsim.minbudget(TRACE, "dtr", "bestfit", binary=coopsim_bin)
    assert found["found"] is True and found["policy"] == "dtr"
    assert 0 < found["min_budget_bytes"] <= found["peak_live_bytes"]
    assert found["failing_budget_bytes"] < found["min_budget_bytes"]


def test_errors_carry_the_binary_message(tmp_path, coopsim_bin):
    with pytest.raises(coopsim.CoopsimError) as e:
        coopsim.run(TRACE, allocator="nosuch", binary=coopsim_bin)
    assert str(e.value).startswith("allocator: unknown allocator 'nosuch' (valid: pytorch,")
    assert e.value.returncode == 1 and "\n" not in str(e.value)
    missing = tmp_path / "missing.jsonl"
    with pytest.raises(coopsim.CoopsimError, match=r"missing\.jsonl:0: cannot open trace file"):
        coopsim.run(missing, binary=coopsim_bin)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format":"coopsim-trace","version":7}\n')
    with pytest.raises(coopsim.CoopsimError, match="version"):
        coopsim.validate(bad, binary=coopsim_bin)


def test_binary_lookup(monkeypatch, tmp_path, coopsim_exe):
    monkeypatch.setenv("COOPSIM_BIN", coopsim_exe)
    assert coopsim.find_binary() == coopsim_exe
    monkeypatch.setenv("COOPSIM_BIN", str(tmp_path / "nothing"))
    with pytest.raises(coopsim.CoopsimError, match=r"nothing: no executable coopsim binary there \(\$COOPSIM_BIN\)"):
        coopsim.find_binary()
    assert coopsim.find_binary(coopsim_exe) == coopsim_exe  # the argument comes first


def test_advise_returns_the_ranking(coopsim_bin):
    gpt2 = os.path.join(ROOT, "traces", "gpt2.jsonl.gz")
    fits = coopsim.advise(gpt2, "40GiB", jobs=2, binary=coopsim_bin)
    assert fits["fits"] and fits["fits_with_settings"] and not fits["fits_with_policy"]
    assert fits["answer"] == fits["settings"][0]
    # The defaults fit at 40 GiB: they are the answer, with the bytes to spare.
    assert fits["use"] == "the defaults (no PYTORCH_CUDA_ALLOC_CONF)" and fits["answer"]["conf"] == ""
    assert fits["reserve_bytes"] == 512 << 20 and fits["usable_bytes"] == (40 << 30) - (512 << 20)
    assert fits["spare_bytes"] == fits["usable_bytes"] - fits["answer"]["peak_reserved_bytes"]
    assert fits["short_bytes"] is None and fits["verdict"].startswith("fits with ")
    assert fits["step_ms"] == fits["answer"]["step_ms"] > 0
    assert [s["rank"] for s in fits["settings"]] == list(range(1, len(fits["settings"]) + 1))
    # reserve= is taken off the capacity.
    tight = coopsim.advise(gpt2, "40GiB", reserve="20GiB", jobs=2, binary=coopsim_bin)
    assert tight["usable_bytes"] == 20 << 30 and not tight["fits_with_settings"] and tight["short_bytes"] > 0
    assert tight["min_capacity_bytes"] == tight["short_bytes"] + (40 << 30)
    # Nothing fits at half the peak without a policy; keep-only settings all fail (exit 3 is an answer).
    half = coopsim.advise(TRACE, "50%", reserve=0, jobs=2, binary=coopsim_bin)
    assert not any(s["fits"] for s in half["settings"]) and half["fits"] is False
    with pytest.raises(coopsim.CoopsimError, match="capacity"):
        coopsim.advise(TRACE, "0", binary=coopsim_bin)
    with pytest.raises(coopsim.CoopsimError, match="--reserve") as e:
        coopsim.advise(TRACE, "1GiB", reserve="1GiB", binary=coopsim_bin)
    assert e.value.returncode == 2


def test_initial_state_reaches_the_binary(coopsim_bin):
    # A trace without a recorded state runs the same from an empty allocator.
    empty = coopsim.run(TRACE, budget="200%", initial_state="empty", binary=coopsim_bin)
    recorded = coopsim.run(TRACE, budget="200%", binary=coopsim_bin)
    assert list(empty["status"]) == ["completed"]
    assert list(empty["peak_reserved_bytes"]) == list(recorded["peak_reserved_bytes"])
    res = coopsim.minbudget(TRACE, "keep", "pytorch", initial_state="empty", binary=coopsim_bin)
    assert res["found"]
    with pytest.raises(coopsim.CoopsimError, match="initial-state"):
        coopsim.run(TRACE, initial_state="blank", binary=coopsim_bin)
    with pytest.raises(coopsim.CoopsimError, match="initial-state"):
        coopsim.minbudget(TRACE, "keep", "pytorch", initial_state="blank", binary=coopsim_bin)


def test_calls_run_in_process_and_agree_with_the_executable(monkeypatch, tmp_path, coopsim_exe):
    """With the native module (built by Meson into build/python/) coopsim.run / minbudget / advise /
    validate / sweep spawn no process, and answer as the executable does."""
    from coopsim.sim import native_module
    if native_module() is None:
        pytest.skip("no native module coopsim._native (python/meson.build)")
    spawned = []

    def refuse(*args, **kwargs):
        spawned.append(args)
        raise AssertionError(f"a process was spawned: {args}")

    expected = coopsim.run(TRACE, allocator="bestfit", policy="dtr", budget="60%", binary=coopsim_exe)
    expected_min = coopsim.minbudget(TRACE, "dtr", "bestfit", binary=coopsim_exe)
    import subprocess
    monkeypatch.setattr(subprocess, "run", refuse)
    monkeypatch.setattr(subprocess, "Popen", refuse)
    df = coopsim.run(TRACE, allocator="bestfit", policy="dtr", budget="60%")
    assert df.equals(expected) and df.attrs["report"] == expected.attrs["report"]
    assert coopsim.minbudget(TRACE, "dtr", "bestfit") == expected_min
    assert "valid coopsim trace v1" in coopsim.validate(TRACE)
    assert "verdict" in coopsim.advise(TRACE, "90%", jobs=1)
    config = {"traces": [TRACE], "allocators": ["bestfit"], "policies": ["dtr"], "budgets": {"ratios": [0.6, 1.0]}}
    assert len(coopsim.sweep(config, tmp_path / "out", jobs=1)) == 2
    with pytest.raises(coopsim.CoopsimError, match=r"^allocator: unknown allocator 'nosuch'") as e:
        coopsim.run(TRACE, allocator="nosuch")
    assert e.value.returncode == 1 and e.value.command[0] == "coopsim"
    assert spawned == []


def test_one_version_everywhere(coopsim_exe):
    """The package, its native module, the executable, meson.build and CITATION.cff say the same."""
    import re
    from coopsim.sim import native_module
    with open(os.path.join(ROOT, "meson.build"), encoding="utf-8") as f:
        meson = re.search(r"version: '([^']+)'", f.read()).group(1)
    with open(os.path.join(ROOT, "CITATION.cff"), encoding="utf-8") as f:
        citation = re.search(r"^version: (\S+)$", f.read(), re.M).group(1)
    import subprocess
    lines = subprocess.run([coopsim_exe, "--version"], capture_output=True, text=True).stdout.splitlines()
    # coopsim VERSION / commit DESCRIBE / BUILDTYPE build, COMPILER, C++20, CUDA backend on|off
    assert lines[0] == f"coopsim {meson}" and lines[1].startswith("commit ") and " build, " in lines[2]
    binary = lines[0].split()[1]
    assert coopsim.__version__ == meson == citation == binary
    if native_module() is not None:
        assert native_module().__version__ == meson


def test_recorded_traces_are_written_by_the_library(tmp_path, coopsim_exe):
    """One trace writer (issue 30): the recorder's records go through coopsim's loader and writer,
    in-process when the native module is there, else through `coopsim validate --write OUT -`;
    both write the same bytes, and a bad record is one line naming its line, with no file left."""
    from coopsim.recording.trace import TraceBuilder
    from coopsim.sim import native_module, write_trace
    b = TraceBuilder()
    t = b.storage_tensor("x", 4096, "x")
    b.alloc(t)
    b.compute(b.op("relu", 0, [t], [t], [], [t], False, ()))
    b.free(t)
    header = {"format": "coopsim-trace", "version": 1, "model": "one-writer", "time_unit": "ns", "iterations": 1}
    text = "".join(line + "\n" for line in b.lines(header))
    spawned = tmp_path / "spawned.jsonl.gz"
    write_trace(text, spawned, binary=coopsim_exe)
    assert coopsim.validate(spawned, binary=coopsim_exe).startswith(f"{spawned}: valid coopsim trace v1 (one-writer)")
    bad = text.replace('"kind":"free"', '"kind":"frees"')
    with pytest.raises(coopsim.CoopsimError, match=r"^<stdin>:6: unknown record kind 'frees'"):
        write_trace(bad, tmp_path / "bad.jsonl", binary=coopsim_exe)
    assert not (tmp_path / "bad.jsonl").exists()
    if native_module() is None:
        return
    in_process = tmp_path / "in_process.jsonl.gz"
    b.write(str(in_process), header)  # the recorder's own call
    assert in_process.read_bytes() == spawned.read_bytes()
    with pytest.raises(coopsim.CoopsimError, match=r"^<recorded trace>:6: unknown record kind 'frees'"):
        write_trace(bad, tmp_path / "bad.jsonl")
    assert not (tmp_path / "bad.jsonl").exists()


def test_docs_running_the_simulator_block_as_written(tmp_path, monkeypatch):
    """docs/python.md "Running the simulator", run from the project root, and the values its comments show."""
    import re
    with open(os.path.join(ROOT, "docs", "python.md"), encoding="utf-8") as f:
        doc = f.read()
    code = re.search(r"<!-- example: running the simulator -->\n```python\n(.*?)```", doc, re.S).group(1)
    monkeypatch.chdir(ROOT)
    scope = {"coopsim": coopsim}
    exec(code.replace('"out/unet"', repr(str(tmp_path / "unet"))), scope)
    assert len(scope["df"]) == 3 and set(scope["df"]["policy"]) == {"coop"}
    assert scope["found"]["found"] and scope["found"]["min_budget_bytes"] > 0
    shown = re.search(r'advice\["verdict"\]: "(.*?) \.\.\."', code).group(1)
    assert scope["advice"]["verdict"].startswith(shown), scope["advice"]["verdict"]


def test_run_torch_snapshot_follows_the_installed_torch(tmp_path, coopsim_bin):
    import pickle
    layout = coopsim.installed_torch_snapshot_format()
    default = tmp_path / "default.pickle"
    coopsim.run(TRACE, budget="60%", binary=coopsim_bin, torch_snapshot=default)
    with open(default, "rb") as f:
        snap = pickle.load(f)
    # torch 1.13's viewer reads the list of segments; 2.x's the dict with the history.
    assert isinstance(snap, list if layout == "1.13" else dict)
    for chosen, kind in (("1.13", list), ("2.x", dict)):
        path = tmp_path / f"{chosen}.pickle"
        coopsim.run(TRACE, budget="60%", binary=coopsim_bin, torch_snapshot=path, torch_snapshot_format=chosen)
        with open(path, "rb") as f:
            assert isinstance(pickle.load(f), kind)
    with pytest.raises(ValueError, match="only with torch_snapshot"):
        coopsim.run(TRACE, binary=coopsim_bin, torch_snapshot_format="2.x")
    with pytest.raises(coopsim.CoopsimError, match="expected 2.x, 1.13 or auto"):
        coopsim.run(TRACE, binary=coopsim_bin, torch_snapshot=tmp_path / "bad.pickle", torch_snapshot_format="3")
    assert not (tmp_path / "bad.pickle").exists()


def test_installed_torch_snapshot_format_reads_the_package_version(monkeypatch):
    from importlib import metadata

    def version(answer):
        def fake(name):
            assert name == "torch"
            if answer is None:
                raise metadata.PackageNotFoundError(name)
            return answer
        return fake
    for answer, layout in (("1.13.1", "1.13"), ("2.15.0+cpu", "2.x"), (None, "2.x")):
        monkeypatch.setattr(metadata, "version", version(answer))
        assert coopsim.installed_torch_snapshot_format() == layout
