"""coopsim.sweep like a PyTorch user expects: typed columns (nullable integers, PyTorch's names), the
minimum budgets beside the results, progress as runs finish, and shards on any executor (threads,
processes, a dask.distributed LocalCluster) merged byte-identical to the unsharded sweep."""
import filecmp
import os

import pytest

pandas = pytest.importorskip("pandas")

import coopsim  # noqa: E402
from conftest import ROOT  # noqa: E402

CONFIG = {"traces": [os.path.join(ROOT, "traces", "default.jsonl.gz"), os.path.join(ROOT, "traces", "oneflow", "unet.jsonl.gz")],
          "allocators": ["bestfit", "pytorch"], "policies": ["coop", "keep"], "budgets": {"ratios": [0.5, 1.0]},
          "minbudget": True}
FILES = ("results.csv", "results.json", "minbudget.csv")


def binary():
    try:
        return coopsim.find_binary()
    except coopsim.CoopsimError:
        pytest.skip("no coopsim binary (the shards and the streamed progress spawn it)")


def same_files(a, b):
    return all(filecmp.cmp(os.path.join(a, f), os.path.join(b, f), shallow=False) for f in FILES)


@pytest.fixture(scope="module")
def unsharded(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "one"
    return coopsim.sweep(CONFIG, out, jobs=2, progress=False), str(out)


def test_typed_columns_and_pytorch_names(unsharded):
    df, _ = unsharded
    assert str(df["oom_event"].dtype) == "Int64" and str(df["budget_bytes"].dtype) == "Int64"
    assert str(df["compute_overhead"].dtype) == "Float64" and str(df["status"].dtype) == "string"
    oom = df["status"] == "oom"
    assert oom.any() and (~oom).any()
    assert df.loc[~oom, "oom_event"].isna().all() and df.loc[oom, "oom_event"].notna().all()
    assert (df["max_memory_reserved"] == df["peak_reserved_bytes"]).all()
    assert (df["max_memory_allocated"] == df["peak_allocated_bytes"]).all()
    assert (df["num_alloc_retries"] == df["alloc_retries"]).all()
    assert (df["num_ooms"] == oom.astype("Int64")).all()
    cols = list(df.columns)
    assert cols.index("max_memory_reserved") == cols.index("peak_reserved_bytes") + 1


def test_minimum_budgets_come_with_the_results(unsharded):
    df, _ = unsharded
    mb = df.attrs["minbudget"]
    assert len(mb) == 2 * 2 * 2  # traces x allocators x policies
    assert set(mb["status"]) <= {"found", "not_found", "found_above_peak"} and str(mb["min_budget_bytes"].dtype) == "Int64"
    assert coopsim.sweep(dict(CONFIG, minbudget=False), os.path.join(df.attrs["output_dir"], "..", "nomb"),
                         progress=False).attrs["minbudget"] is None


def test_progress_as_runs_finish(tmp_path):
    binary()
    seen = []
    df = coopsim.sweep(CONFIG, tmp_path / "p", jobs=1, progress=lambda done, total, line: seen.append((done, total, line)))
    total = len(df) + len(df.attrs["minbudget"])
    assert [s[0] for s in seen] == list(range(1, total + 1)) and {s[1] for s in seen} == {total}
    assert all(line.startswith("sweep: ") for _, _, line in seen)


def test_shards_on_threads_and_processes_merge_byte_identical(tmp_path, unsharded):
    binary()
    _, one = unsharded
    seen = []
    coopsim.sweep(CONFIG, tmp_path / "threads", shards=3, progress=lambda d, t, line: seen.append((d, t)))
    assert seen == [(1, 3), (2, 3), (3, 3)]
    assert same_files(one, tmp_path / "threads")
    from concurrent.futures import ProcessPoolExecutor
    with ProcessPoolExecutor(2) as ex:
        df = coopsim.sweep(CONFIG, tmp_path / "procs", shards=2, executor=ex, progress=False)
    assert same_files(one, tmp_path / "procs") and len(df.attrs["minbudget"]) == 8


def test_shards_on_a_dask_local_cluster(tmp_path, unsharded):
    binary()
    distributed = pytest.importorskip("distributed")
    _, one = unsharded
    with distributed.LocalCluster(n_workers=3, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        coopsim.sweep(CONFIG, tmp_path / "dask", shards=3, executor=client, progress=False)
    assert same_files(one, tmp_path / "dask")


@pytest.mark.parametrize("kwargs, error", [
    ({"shards": 0}, "shards: expected a positive int"),
    ({"shards": True}, "shards: expected a positive int"),
    ({"executor": object()}, "executor: only with shards=N"),
    ({"shards": 2, "executor": object()}, "executor: expected an object with submit"),
    ({"shards": 2, "resume": True}, "resume: not with shards"),
    ({"progress": "yes"}, "progress: expected None, False or a callable"),
])
def test_bad_arguments_are_refused(tmp_path, kwargs, error):
    with pytest.raises((ValueError, TypeError), match=error):
        coopsim.sweep(CONFIG, tmp_path / "bad", **kwargs)
    assert not (tmp_path / "bad" / "results.csv").exists()
