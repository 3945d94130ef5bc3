"""coopsim.run / sweep / minbudget / advise / validate check their arguments (issue 29): paths are
passed after `--` (never read as options), empty values and malformed `sets` are ValueErrors and
wrongly typed arguments TypeErrors naming the argument, before the binary runs."""
import os

import pytest

import coopsim
from conftest import ROOT

TRACE = os.path.join(ROOT, "tests", "data", "golden", "small_step.jsonl")


def test_validate_reads_an_option_like_path_as_a_path(coopsim_bin):
    with pytest.raises(coopsim.CoopsimError, match=r"^--help:0: cannot open trace file: No such file or directory$"):
        coopsim.validate("--help", binary=coopsim_bin)
    assert "golden-small-step" in coopsim.validate(TRACE, binary=coopsim_bin)


def test_option_like_paths_elsewhere(tmp_path, coopsim_bin):
    with pytest.raises(coopsim.CoopsimError, match=r"^--version:0: cannot open trace file"):
        coopsim.minbudget("--version", "keep", "bestfit", binary=coopsim_bin)
    with pytest.raises(coopsim.CoopsimError, match=r"^--help:0: cannot open trace file"):
        coopsim.advise("--help", "1GiB", binary=coopsim_bin)
    with pytest.raises(coopsim.CoopsimError, match=r"^--json: cannot open config file"):
        coopsim.minbudget(TRACE, "keep", "bestfit", config="--json", binary=coopsim_bin)


@pytest.mark.parametrize("name, value", [("budget", []), ("budget", ""), ("allocator", ()), ("policy", ""),
                                         ("policy", ["keep", ""]), ("allocator", "pytorch,")])
def test_empty_values_are_refused(name, value, coopsim_bin):
    with pytest.raises(ValueError, match=f"^{name}: "):
        coopsim.run(TRACE, binary=coopsim_bin, **{name: value})


def test_empty_paths_and_capacity_are_refused(tmp_path, coopsim_bin):
    with pytest.raises(ValueError, match="^trace: an empty path$"):
        coopsim.validate("", binary=coopsim_bin)
    with pytest.raises(ValueError, match="^capacity: "):
        coopsim.advise(TRACE, "", binary=coopsim_bin)
    with pytest.raises(ValueError, match="^policy: "):
        coopsim.minbudget(TRACE, "", "bestfit", binary=coopsim_bin)


@pytest.mark.parametrize("sets, item", [(["k"], "'k'"), (["=v"], "'=v'"), ([3], "3")])
def test_malformed_sets_name_the_item(sets, item, coopsim_bin):
    with pytest.raises(ValueError, match=f"^sets: {item} is not a 'key=value' string$"):
        coopsim.run(TRACE, sets=sets, binary=coopsim_bin)


def test_sets_of_the_wrong_type(coopsim_bin):
    with pytest.raises(TypeError, match=r"^sets: expected a dict or a list of 'key=value' strings, got str 'a=b'$"):
        coopsim.run(TRACE, sets="a=b", binary=coopsim_bin)
    with pytest.raises(TypeError, match=r"^trace: expected a path"):
        coopsim.run(42, binary=coopsim_bin)


def test_sweep_traces_must_be_a_list(tmp_path, coopsim_bin):
    config = {"traces": "x.jsonl", "allocators": ["bestfit"], "policies": ["keep"], "budgets": ["1GiB"]}
    with pytest.raises(TypeError, match=r"^sweep config 'traces': expected a list of trace paths, got str 'x.jsonl'$"):
        coopsim.sweep(config, tmp_path / "out", binary=coopsim_bin)
    with pytest.raises(TypeError, match=r"^sweep config 'traces'\[0\]: expected a path"):
        coopsim.sweep(dict(config, traces=[None]), tmp_path / "out", binary=coopsim_bin)
    assert not (tmp_path / "out").exists()
