#!/usr/bin/env python3
"""Checks that libcoopsim's layers link only downward (docs/architecture.md, "Layers").

Every file under src/<layer>/ or include/coopsim/<layer>/ belongs to <layer>. A file may include
 * a public header of its own layer or of a layer below it: "coopsim/<layer>/...";
 * a private header of its own layer, by a path relative to the including file that stays inside
   src/<layer>/ (public headers include public headers only).
Anything else fails: a higher layer, another layer's private header, an unknown layer, a path
through the repository root ("src/...") or an include that names no file of the tree. The engine
may include only the policy interface (POLICY_INTERFACE), never a concrete policy.

With --build DIR it also checks the links (`nm` on DIR/src/libcoopsim_<layer>.a): every symbol a
layer's library uses must be defined in that library or a lower layer's, so that no layer links
upward even where its headers do not show it (a function declared in one layer and defined in a
higher one).

Usage: scripts/check_layers.py [ROOT] [--build DIR]   (exit 0 and one summary line, or 1 and one
line per violation: FILE:LINE: problem, or LIBRARY: problem)"""
import os
import re
import subprocess
import sys

# Bottom to top. Each layer is one static library (src/meson.build) and may use the ones before it.
LAYERS = ["base", "model", "formats", "audit", "planner", "alloc", "policy", "engine", "generate", "import",
          "output", "replay", "sim", "sweep", "cli", "app"]
RANK = {name: i for i, name in enumerate(LAYERS)}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
GENERATED = {"coopsim_config.h", "coopsim_vcs.h"}  # written by Meson into the build directory (include/meson.build)
# The public API (include/coopsim/coopsim.hpp), implemented in the sim layer (src/sim/facade.cpp).
FACADE = {"include/coopsim/coopsim.hpp": "sim"}
# The policy headers the engine may include: the interface and the data it shares with policies,
# never a concrete policy (a policy says which execution model it needs: Policy::execution_model).
POLICY_INTERFACE = {"include/coopsim/policy/policy.hpp", "include/coopsim/policy/remat/eviction_score.hpp"}


def layer_of(path):
    if path in FACADE:
        return FACADE[path]
    parts = path.split("/")
    if parts[0] == "src" and len(parts) > 2:
        return parts[1]
    if parts[:2] == ["include", "coopsim"] and len(parts) > 3:
        return parts[2]
    return None


def check(root):
    problems, files, includes = [], [], 0
    for top in ("src", "include"):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in names:
                if name.endswith((".cpp", ".hpp", ".h", ".cu")):
                    files.append(os.path.relpath(os.path.join(dirpath, name), root))
    for path in sorted(files):
        layer = layer_of(path)
        if layer not in RANK:
            problems.append(f"{path}:1: not inside a layer directory (layers: {', '.join(LAYERS)})")
            continue
        with open(os.path.join(root, path), encoding="utf-8") as f:
            lines = f.read().split("\n")
        for number, line in enumerate(lines, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            quote, target = m.groups()
            where = f"{path}:{number}"
            if quote == "<":
                if target.startswith("coopsim/"):
                    problems.append(f"{where}: coopsim headers are included with quotes: \"{target}\"")
                continue
            includes += 1
            if target in GENERATED:
                continue
            if target.startswith("coopsim/"):
                resolved = "include/" + target
            else:
                resolved = os.path.normpath(os.path.join(os.path.dirname(path), target))
                if not os.path.isfile(os.path.join(root, resolved)):
                    problems.append(f"{where}: \"{target}\" names no file next to {path} (the repository root "
                                    "is not an include path)")
                    continue
                if path.startswith("include/") and not resolved.startswith("include/"):
                    problems.append(f"{where}: public header includes private {resolved}")
                    continue
                if resolved.startswith("include/"):
                    problems.append(f"{where}: public header {resolved} spelled as a relative path; write "
                                    f"\"{resolved[len('include/'):]}\"")
                    continue
                if layer_of(resolved) != layer:
                    problems.append(f"{where}: includes {resolved}, a private header of layer "
                                    f"'{layer_of(resolved)}'")
                    continue
            if not os.path.isfile(os.path.join(root, resolved)):
                problems.append(f"{where}: \"{target}\" names no file of the tree")
                continue
            other = layer_of(resolved)
            if layer == "engine" and other == "policy" and resolved not in POLICY_INTERFACE:
                problems.append(f"{where}: the engine includes {resolved}; it sees policies only through "
                                f"{', '.join(sorted(POLICY_INTERFACE))}")
                continue
            if other not in RANK:
                problems.append(f"{where}: {resolved} is not inside a layer directory")
            elif RANK[other] > RANK[layer]:
                problems.append(f"{where}: layer '{layer}' includes {resolved} of the higher layer '{other}'")
    return problems, len(files), includes


def symbols(archive, *flags):
    """Global symbols of an archive, mangled: nm's names after the given filter flags."""
    out = subprocess.run(["nm", "-g", "-P", *flags, archive], capture_output=True, text=True, check=True).stdout
    names = set()
    for line in out.splitlines():
        fields = line.split()
        # "NAME TYPE [VALUE SIZE]"; archive member headers end with ':' or "]:".
        if len(fields) >= 2 and not fields[0].endswith(":"):
            names.add(fields[0])
    return names


def check_links(build):
    """One problem per symbol a layer's library uses that only a higher layer's defines."""
    problems, defined, undefined, libraries = [], {}, {}, 0
    for layer in LAYERS:
        archive = os.path.join(build, "src", f"libcoopsim_{layer}.a")
        if not os.path.isfile(archive):
            continue  # app is an executable, not a library
        libraries += 1
        defined[layer] = symbols(archive, "--defined-only")
        undefined[layer] = symbols(archive, "--undefined-only") - defined[layer]
    for layer, needed in undefined.items():
        below = set()
        for other in LAYERS[:RANK[layer]]:
            below |= defined.get(other, set())
        for name in sorted(needed - below):
            higher = [o for o in LAYERS[RANK[layer] + 1:] if name in defined.get(o, set())]
            if higher:
                problems.append(f"libcoopsim_{layer}.a: uses {demangle(name)}, defined in the higher layer "
                                f"'{higher[0]}'")
    return problems, libraries


def demangle(name):
    p = subprocess.run(["c++filt", name], capture_output=True, text=True)
    return p.stdout.strip() or name


def main():
    args = sys.argv[1:]
    build = None
    if "--build" in args:
        i = args.index("--build")
        if i + 1 >= len(args):
            print("check_layers: --build needs a directory")
            return 2
        build = args[i + 1]
        del args[i:i + 2]
    root = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    problems, nfiles, nincludes = check(root)
    libraries = 0
    if build is not None:
        link_problems, libraries = check_links(build)
        problems += link_problems
        if libraries == 0:
            problems.append(f"{build}: no libcoopsim_<layer>.a under src/ (not a build directory)")
    for p in problems:
        print(p)
    if problems:
        print(f"check_layers: {len(problems)} violation(s)")
        return 1
    links = f"; {libraries} libraries link only downward" if build is not None else ""
    print(f"check_layers: {nfiles} files, {nincludes} includes, {len(LAYERS)} layers "
          f"({' < '.join(LAYERS)}): every include goes down or stays in its layer{links}")
    return 0


sys.exit(main())
