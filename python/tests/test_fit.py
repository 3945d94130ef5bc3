"""coopsim.fit(): the PyTorch changes that make a training step fit, recorded in fake mode and ranked."""
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("pandas")
nn = torch.nn

import coopsim  # noqa: E402
from coopsim.fit_step import block_names, parse_bytes, variants  # noqa: E402

BATCH = 512


def build():
    return nn.Sequential(*[nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64)) for _ in range(4)],
                         nn.Linear(64, 10))


def batch():
    return {"x": torch.randn(BATCH, 64), "y": torch.randint(0, 10, (BATCH,))}


def loss(model, b):
    return nn.functional.cross_entropy(model(b["x"]), b["y"])


def test_block_names():
    assert block_names(build()) == ["0", "1", "2", "3", "4"]

    class WithList(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 2))
            self.layers = nn.ModuleList(nn.Linear(2, 2) for _ in range(2))
    assert block_names(WithList()) == ["layers.0", "layers.1"]  # a ModuleList first, even a shorter one


def test_variants_and_bytes():
    labels = [v[0] for v in variants(512, ["0", "1"], None)]
    assert labels == ["as is", "bf16", "checkpoint", "checkpoint + bf16", "2 micro-batches", "4 micro-batches",
                      "batch 256", "batch 128", "checkpoint + 4 micro-batches"]
    assert [v[0] for v in variants(None, [], "bf16")] == ["as is"]
    assert parse_bytes("80GiB", "c") == 80 << 30 and parse_bytes("1.5 GB", "c") == 1_500_000_000
    assert parse_bytes(1024, "c") == 1024
    for bad in ("eighty", "-1GiB", "nanGiB", ""):
        with pytest.raises(ValueError, match="c: cannot read"):
            parse_bytes(bad, "c")
    with pytest.raises(TypeError):
        parse_bytes(1.5, "c")


def test_fit_ranks_what_fits(coopsim_bin):
    everything = coopsim.fit(build, batch(), loss, "adamw", capacity="1GiB", reserve=0, binary=coopsim_bin)
    assert len(everything) == 9 and everything["fits"].all()
    need = dict(zip(everything["variant"], everything["peak_reserved_bytes"]))
    smallest = min(need.values())
    assert need["as is"] > smallest  # some change helps
    # a capacity between the smallest need and the step as it is: the unchanged step does not fit
    capacity = (need["as is"] + smallest) // 2
    df = coopsim.fit(build, batch(), loss, "adamw", capacity=capacity, reserve=0, binary=coopsim_bin)
    fits = dict(zip(df["variant"], df["fits"]))
    assert not fits["as is"] and any(fits.values())
    assert list(df["fits"]) == sorted(df["fits"], reverse=True)  # fitting variants first
    fitting = df[df["fits"]]
    assert list(fitting["samples_per_s"]) == sorted(fitting["samples_per_s"], reverse=True)  # by throughput
    for _, row in df.iterrows():
        assert row["fits"] == (row["short_bytes"] == 0)
        if not row["fits"]:
            assert row["short_bytes"] == row["peak_reserved_bytes"] - capacity
    micro = df[df["variant"] == "2 micro-batches"].iloc[0]
    assert micro["batch"] == BATCH // 2 and micro["micro_batches"] == 2
    assert micro["samples_per_s"] == pytest.approx(BATCH / micro["step_ms"] * 1e3)


def test_fit_bad_arguments(coopsim_bin):
    with pytest.raises(ValueError, match="reserve"):
        coopsim.fit(build, batch(), loss, capacity="1GiB", reserve="2GiB", binary=coopsim_bin)
    with pytest.raises(ValueError, match="capacity: cannot read"):
        coopsim.fit(build, batch(), loss, capacity="lots", binary=coopsim_bin)
    with pytest.raises(ValueError, match="first"):
        coopsim.fit(build, {"x": torch.randn(4, 64), "y": torch.zeros(3)}, loss, capacity="1GiB", binary=coopsim_bin)
