#!/usr/bin/env python3
"""scripts/check_layers.sh (issue 16), reported as TAP: it passes on this tree, and on small
trees written here it fails, naming FILE:LINE, on each kind of violation: an include of a higher
layer, another layer's private header, a path through the repository root, a public header that
includes a private one, a file outside any layer, an include naming no file, and a coopsim
header in angle brackets, an engine file that includes a concrete policy; and with --build, on
the libraries of the build and on two small libraries compiled here, one using a function only
a higher layer defines.

Usage: check_layers_test.py [BUILD_DIR]   (run from the project root)"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import finish  # noqa: E402

SCRIPT = os.path.abspath("scripts/check_layers.sh")
results = []
scratch = tempfile.mkdtemp(prefix="coopsim-layers-")


BUILD = sys.argv[1] if len(sys.argv) > 1 else None


def run(root=None, build=None):
    args = [SCRIPT] + ([root] if root else []) + (["--build", build] if build else [])
    p = subprocess.run(args, capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout


def tree(name, files):
    root = os.path.join(scratch, name)
    for path, text in files.items():
        os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
        with open(os.path.join(root, path), "w") as f:
            f.write(text)
    return root


GOOD = {
    "include/coopsim/base/units.hpp": "#pragma once\n",
    "include/coopsim/model/trace.hpp": '#pragma once\n#include "coopsim/base/units.hpp"\n',
    "include/coopsim/sim/simulation.hpp": '#pragma once\n#include "coopsim/model/trace.hpp"\n',
    "src/model/trace.cpp": '#include "coopsim/model/trace.hpp"\n#include "detail.hpp"\n#include <vector>\n',
    "src/model/detail.hpp": "#pragma once\n",
    "src/model/sub/more.cpp": '#include "../detail.hpp"\n',
    "src/sim/simulation.cpp": '#include "coopsim/sim/simulation.hpp"\n#include "coopsim_config.h"\n',
}

code, out = run()
results.append(("the repository's own tree passes", code == 0 and out.startswith("check_layers: "), out))
code, out = run(tree("good", GOOD))
results.append(("a tree that only includes downward passes", code == 0, out))


def bad(name, extra, expected):
    files = dict(GOOD)
    files.update(extra)
    code, out = run(tree(name, files))
    results.append((f"fails on {name}", code == 1 and expected in out and "1 violation(s)" in out, out))


bad("an include of a higher layer", {"src/model/up.cpp": '\n#include "coopsim/sim/simulation.hpp"\n'},
    "src/model/up.cpp:2: layer 'model' includes include/coopsim/sim/simulation.hpp of the higher layer 'sim'")
bad("another layer's private header", {"src/sim/peek.cpp": '#include "../model/detail.hpp"\n'},
    "src/sim/peek.cpp:1: includes src/model/detail.hpp, a private header of layer 'model'")
bad("a path through the repository root", {"src/sim/root.cpp": '#include "src/model/detail.hpp"\n'},
    "src/sim/root.cpp:1: \"src/model/detail.hpp\" names no file next to src/sim/root.cpp (the repository root is "
    "not an include path)")
bad("a public header including a private one",
    {"include/coopsim/model/leak.hpp": '#include "../../../src/model/detail.hpp"\n'},
    "include/coopsim/model/leak.hpp:1: public header includes private src/model/detail.hpp")
bad("a file outside any layer", {"src/loose.cpp": "int x;\n"}, "src/loose.cpp:1: not inside a layer directory")
bad("an unknown layer", {"src/extras/x.cpp": "int x;\n"}, "src/extras/x.cpp:1: not inside a layer directory")
bad("an include naming no file", {"src/sim/missing.cpp": '#include "coopsim/base/nothing.hpp"\n'},
    "src/sim/missing.cpp:1: \"coopsim/base/nothing.hpp\" names no file of the tree")
bad("a coopsim header in angle brackets", {"src/sim/angle.cpp": "#include <coopsim/model/trace.hpp>\n"},
    "src/sim/angle.cpp:1: coopsim headers are included with quotes")

bad("an engine file naming a concrete policy",
    {"include/coopsim/policy/dtr.hpp": "#pragma once\n", "src/engine/engine.cpp": '#include "coopsim/policy/dtr.hpp"\n'},
    "src/engine/engine.cpp:1: the engine includes include/coopsim/policy/dtr.hpp")

# Links: the build's own libraries pass; a base library calling a function that only the model
# library defines fails, naming the library and the function.
if BUILD:
    code, out = run(build=BUILD)
    results.append(("the build's libraries link only downward", code == 0 and "libraries link only downward" in out,
                    out))
objects = os.path.join(scratch, "objects")
os.makedirs(os.path.join(objects, "src"))
sources = {"base": "int up_call();\nint base_entry() { return up_call() + 1; }\n",
           "model": "int up_call() { return 41; }\nint model_entry() { return 2; }\n"}
built = True
for layer, text in sources.items():
    src = os.path.join(objects, f"{layer}.cpp")
    obj = os.path.join(objects, f"{layer}.o")
    with open(src, "w") as f:
        f.write(text)
    built = built and subprocess.run(["c++", "-c", src, "-o", obj]).returncode == 0 and subprocess.run(
        ["ar", "rcs", os.path.join(objects, "src", f"libcoopsim_{layer}.a"), obj]).returncode == 0
code, out = run(tree("links", GOOD), objects) if built else (None, "could not compile the two libraries")
results.append(("fails on a library using a function only a higher layer defines",
                code == 1 and "libcoopsim_base.a: uses up_call(), defined in the higher layer 'model'" in out
                and "1 violation(s)" in out, out))
code, out = run(tree("nobuild", GOOD), scratch)
results.append(("--build on a directory without libraries fails", code == 1 and "not a build directory" in out, out))

finish(results, scratch)
