"""scripts/record_pytorch.py with a user's model (--model MODULE:FUNCTION), and the "bring your own
model" example of docs/python.md, run as written."""
import os
import re
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")

import coopsim  # noqa: E402
from conftest import ROOT, load_trace  # noqa: E402

RECORDER = os.path.join(ROOT, "scripts", "record_pytorch.py")

USER_MODULE = '''
import torch
from torch import nn
import torch.nn.functional as F
from coopsim import Spec

BATCH = 4

def build():
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))

def inputs(batch, device):
    return {"x": torch.randn(batch, 16, device=device), "y": torch.randint(0, 4, (batch,), device=device)}

def loss(model, batch):
    return F.cross_entropy(model(batch["x"]), batch["y"])

def spec():
    blocks = lambda: nn.Sequential(*(nn.Sequential(nn.Linear(16, 16), nn.ReLU()) for _ in range(3)))
    return Spec("three-blocks", 2, blocks, lambda b, d: {"x": torch.randn(b, 16, device=d)},
                lambda m, b: m(b["x"]).sum(), "sgd", blocks=["0", "1", "2"])

def nothing():
    return 42
'''


def recorder(*args, cwd=None):
    return subprocess.run([sys.executable, RECORDER, *args], capture_output=True, text=True, timeout=300, cwd=cwd)


@pytest.fixture
def user_module(tmp_path):
    path = tmp_path / "mymodels.py"
    path.write_text(USER_MODULE)
    return path


def test_model_function_returning_a_module(tmp_path, user_module, coopsim_bin):
    out = tmp_path / "mine.jsonl"
    p = recorder("--model", f"{user_module}:build", "--fake", "--amp", "bf16", "--accumulation", "2", "-o", str(out))
    assert p.returncode == 0, p.stderr
    header, records = load_trace(out)
    source = header["source"]
    assert header["model"] == f"{user_module}:build"
    assert (source["batch"], source["amp"], source["accumulation"], source["optimizer"]) == (4, "bf16", 2, "adamw")
    sizes = {r["id"]: r["bytes"] for r in records if r["kind"] == "tensor" and r["role"] == "input"}
    per_iteration = []
    for r in records:
        if r["kind"] == "iteration":
            per_iteration.append([])
        elif r["kind"] == "alloc" and r["tensor"] in sizes:
            per_iteration[-1].append(sizes[r["tensor"]])
    # y (int64) and x (float32) of each of the two micro-batches
    assert [sorted(x) for x in per_iteration] == [[4 * 8, 4 * 8, 4 * 16 * 4, 4 * 16 * 4]] * 2
    coopsim.validate(out, binary=coopsim_bin)


def test_dotted_module_returning_a_spec_with_blocks(tmp_path, user_module, coopsim_bin):
    out = tmp_path / "spec.jsonl.gz"
    p = recorder("--model", "mymodels:spec", "--fake", "--checkpoint", "all-blocks", "-o", str(out), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    header, _ = load_trace(out)
    assert header["model"] == "three-blocks" and header["source"]["checkpoint"] == ["0", "1", "2"]
    p = recorder("--model", "mymodels:spec", "--fake", "--checkpoint", "1,9", "-o", str(out), cwd=tmp_path)
    assert p.returncode == 1 and p.stderr.startswith("record_pytorch: error: mymodels:spec: ValueError: checkpoint: "
                                                      "no module named '9'")


def test_model_function_errors(tmp_path, user_module):
    out = tmp_path / "x.jsonl"
    p = recorder("--model", f"{user_module}:nothing", "--fake", "-o", str(out))
    assert p.returncode == 1 and "returned int, not an nn.Module or a Spec" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and not out.exists()
    p = recorder("--model", "mlp-tiny", "--checkpoint", "all-blocks", "--fake", "-o", str(out))
    assert p.returncode == 1 and "mlp-tiny defines no blocks" in p.stderr


def test_wall_clock_warning(tmp_path):
    out = str(tmp_path / "m.jsonl")
    loud = recorder("--model", "mlp-tiny", "-o", out)
    assert loud.returncode == 0 and re.search(r"^record_pytorch: warning: durations are CPU wall-clock times.*"
                                              r"--device-profile", loud.stderr, re.M)
    quiet = recorder("--model", "mlp-tiny", "--quiet", "-o", out)
    assert quiet.returncode == 0 and quiet.stderr == ""
    profiled = recorder("--model", "mlp-tiny", "--device-profile", "a100", "-o", out)
    assert "record_pytorch: warning" not in profiled.stderr


def test_docs_example_runs_as_written(tmp_path, coopsim_bin):
    with open(os.path.join(ROOT, "docs", "python.md"), encoding="utf-8") as f:
        doc = f.read()
    example = re.search(r"<!-- example: bring your own model -->\n```python\n(.*?)```", doc, re.S)
    assert example, "docs/python.md has no marked example"
    code = example.group(1)
    assert len(code.strip().splitlines()) <= 5
    script = tmp_path / "example.py"
    script.write_text(textwrap.dedent(code) + "print('TRACE', path)\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, env=env,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    path = re.search(r"^TRACE (.+)$", p.stdout, re.M).group(1)
    assert "valid coopsim trace v1" in coopsim.validate(os.path.join(tmp_path, path), binary=coopsim_bin)
    shown = re.search(r"<!-- output: bring your own model -->\n```\n(.*?)```", doc, re.S)
    assert shown, "docs/python.md does not show the example's output"
    printed = p.stdout[:p.stdout.index("TRACE ")]
    assert printed == shown.group(1), f"the example prints\n{printed}\nbut docs/python.md shows\n{shown.group(1)}"
