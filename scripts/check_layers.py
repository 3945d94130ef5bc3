#!/usr/bin/env python3
"""Checks that libcoopsim's layers link only downward (docs/architecture.md, "Layers").

Every file under src/<layer>/ or include/coopsim/<layer>/ belongs to <layer>. A file may include
 * a public header of its own layer or of a layer below it: "coopsim/<layer>/...";
 * a private header of its own layer, by a path relative to the including file that stays inside
   src/<layer>/ (public headers include public headers only).
Anything else fails: a higher layer, another layer's private header, an unknown layer, a path
through the repository root ("src/...") or an include that names no file of the tree.

Usage: scripts/check_layers.py [ROOT]   (exit 0 and one summary line, or 1 and one line per
violation: FILE:LINE: problem)"""
import os
import re
import sys

# Bottom to top. Each layer is one static library (src/meson.build) and may use the ones before it.
LAYERS = ["base", "model", "formats", "validate", "planner", "alloc", "policy", "engine", "generate", "import",
          "output", "replay", "sim", "sweep", "cli", "app"]
RANK = {name: i for i, name in enumerate(LAYERS)}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
GENERATED = {"coopsim_config.h"}  # written by Meson into the build directory (src/meson.build)


def layer_of(path):
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
            if other not in RANK:
                problems.append(f"{where}: {resolved} is not inside a layer directory")
            elif RANK[other] > RANK[layer]:
                problems.append(f"{where}: layer '{layer}' includes {resolved} of the higher layer '{other}'")
    return problems, len(files), includes


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    problems, nfiles, nincludes = check(root)
    for p in problems:
        print(p)
    if problems:
        print(f"check_layers: {len(problems)} violation(s)")
        return 1
    print(f"check_layers: {nfiles} files, {nincludes} includes, {len(LAYERS)} layers "
          f"({' < '.join(LAYERS)}): every include goes down or stays in its layer")
    return 0


sys.exit(main())
