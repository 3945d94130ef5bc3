#!/usr/bin/env python3
"""Shell completion and the man page (issue 32), as TAP.

`coopsim completion bash` is sourced into bash and asked what it completes, word by word, as bash
would (COMP_WORDS / COMP_CWORD): commands, options, the registries' names (from `coopsim list
--json`, so a new allocator needs no test edit), comma lists, --set keys, one_of choices, and file
names for positionals after options that take values. `coopsim completion zsh` is loaded into zsh
with _arguments / _describe replaced by functions that print what they are given. `coopsim man` is
rendered by groff with warnings on and must name every command and every option --help prints.

Usage: completion_man_test.py PATH/TO/coopsim   (run from the project root)"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import command_names, finish, runner  # noqa: E402

COOPSIM = os.path.abspath(sys.argv[1])
results = []
tmp = tempfile.mkdtemp(prefix="coopsim-completion-")
run = runner(COOPSIM)


def case(name, ok, detail=""):
    results.append((name, bool(ok), detail))


def skip(name, why):
    results.append((f"{name} # SKIP {why}", True, ""))


listing = json.loads(run("list", "--json")[1])
ALLOCATORS = [c["name"] for c in listing["allocators"]]
POLICIES = [c["name"] for c in listing["policies"]]
IMPORTERS = [c["name"] for c in listing["importers"]]
COMMANDS = command_names(COOPSIM)
case("--help lists the commands, completion and man among them", {"run", "completion", "man"} <= set(COMMANDS),
     COMMANDS)

# --- bash ------------------------------------------------------------------------------------------
code, bash_script, err = run("completion", "bash")
case("`completion bash` prints a script", code == 0 and "complete -F _coopsim coopsim" in bash_script, err)
script_path = os.path.join(tmp, "coopsim.bash")
with open(script_path, "w") as f:
    f.write(bash_script)


def bash_complete(line):
    """What the script offers for the command line `line` (the cursor at its end), split into words
    as bash's default COMP_WORDBREAKS would ('=' is a word of its own)."""
    words = re.findall(r"=|[^\s=]+", line)
    if line.endswith(" ") or line.endswith("="):
        words.append("")
    program = ("source {script}\nCOMP_WORDS=({words})\nCOMP_CWORD={cword}\n_coopsim\n"
               "printf '%s\\n' \"${{COMPREPLY[@]}}\"\n").format(
        script=script_path, words=" ".join("'" + w + "'" for w in words), cword=len(words) - 1)
    p = subprocess.run(["bash", "--norc", "--noprofile", "-c", program], capture_output=True, text=True,
                       timeout=60)
    return sorted(w for w in p.stdout.splitlines() if w), p.stderr


def bash_case(line, expected, name=None):
    got, err = bash_complete(line)
    case(name or f"bash: `{line}` completes to {' '.join(expected) if len(expected) < 8 else str(len(expected)) + ' words'}",
         got == sorted(expected), f"got {got}, stderr {err!r}")


bash_case("coopsim ", COMMANDS + ["--help", "--version"], "bash: every command of --help")
bash_case("coopsim run -a ", ALLOCATORS + ["all"], "bash: -a offers every allocator of the registry, and all")
bash_case("coopsim run --policy ", POLICIES + ["all"], "bash: --policy offers every policy of the registry, and all")
bash_case("coopsim run -a pytorch,be", ["pytorch,bestfit"])
bash_case("coopsim run --allocator=cn", ["cnmem"])
bash_case("coopsim minbudget -p co", [p for p in POLICIES + ["all"] if p.startswith("co")])
bash_case("coopsim import ", IMPORTERS, "bash: import's first argument is an importer of the registry")
bash_case("coopsim run --set dtr.heur", ["dtr.heuristic="])
bash_case("coopsim generate --set lay", ["layers="])
bash_case("coopsim run --torch-snapshot-format ", ["1.13", "2.x", "auto"])
bash_case("coopsim run --memory-map-colour r", ["role"])
bash_case("coopsim run --q", ["--quiet"])
bash_case("coopsim completion ", ["bash", "zsh"])
bash_case("coopsim run -b 60% --set a=b traces/defa", ["traces/default.jsonl.gz"],
          "bash: the trace after option values and KEY=VALUE completes as a file name")
bash_case("coopsim run traces/default.jsonl.gz traces/defa", [],
          "bash: nothing after run's one positional")
bash_case("coopsim run -b ", [], "bash: a budget is free text: nothing offered")

# --- zsh -------------------------------------------------------------------------------------------
code, zsh_script, err = run("completion", "zsh")
case("`completion zsh` prints a #compdef script", code == 0 and zsh_script.startswith("#compdef coopsim\n"), err)
zsh_path = os.path.join(tmp, "_coopsim")
with open(zsh_path, "w") as f:
    f.write(zsh_script)
if shutil.which("zsh") is None:
    skip("zsh: the script parses and gives _arguments every option", "no zsh (Debian package zsh)")
else:
    p = subprocess.run(["zsh", "-n", zsh_path], capture_output=True, text=True, timeout=60)
    case("zsh: the script parses (zsh -n)", p.returncode == 0, p.stderr)

    def zsh_specs(*words):
        program = ("_arguments() { print -rl -- \"$@\" }\n_describe() { print -rl -- ${(P)4} }\n"
                   "compdef() { }\nsource {path}\nwords=({words})\nCURRENT={current}\n_coopsim\n").replace(
            "{path}", zsh_path).replace("{words}", " ".join(words)).replace("{current}", str(len(words)))
        p = subprocess.run(["zsh", "-f", "-c", program], capture_output=True, text=True, timeout=60)
        return p.stdout.splitlines(), p.stderr

    specs, err = zsh_specs("coopsim", "''")
    case("zsh: the commands with their help", sorted(s.split(":")[0] for s in specs) == sorted(COMMANDS), (specs, err))
    specs, err = zsh_specs("coopsim", "run", "''")
    allocator = [s for s in specs if s.lstrip("*").startswith(("-a+", "--allocator="))]
    case("zsh: run's -a / --allocator take the registry's allocators as a comma sequence",
         len(allocator) == 2 and all(("compadd - " + " ".join(ALLOCATORS + ["all"])) in s for s in allocator),
         (allocator, err))
    flags = [s for s in specs if s.startswith("--paranoid[")]
    case("zsh: run's flags are there with their help", len(flags) == 1, specs)
    case("zsh: run's trace is its first positional, a file", "1:trace:_files" in specs, specs)

# --- man -------------------------------------------------------------------------------------------
code, page, err = run("man")
case("`man` prints a roff page", code == 0 and page.startswith(".\\\"") and "\n.TH COOPSIM 1 " in page, err)
code2, page2, _ = run("man")
case("`man` is the same bytes each time (no date)", page == page2)
if shutil.which("groff") is None:
    skip("man: groff renders it without warnings", "no groff (Debian package groff-base)")
else:
    p = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z"], input=page, capture_output=True, text=True,
                       timeout=60)
    case("man: groff renders it without warnings", p.returncode == 0 and p.stderr == "", p.stderr)
    text = subprocess.run(["groff", "-man", "-Tascii", "-P", "-cbou"], input=page, capture_output=True, text=True,
                          timeout=60).stdout
    missing = []
    for command in COMMANDS:
        sub_help = run(command, "--help")[1]
        for flag in re.findall(r"^\s+(?:-\w,)?(--[\w-]+)", sub_help, re.M):
            if flag != "--help" and flag not in text:
                missing.append(f"{command} {flag}")
        if not re.search(rf"^   {re.escape(command)}$", text, re.M):
            missing.append(command)
    case("man: every command and every option of each command's --help is in the page", not missing, missing)
    case("man: the exit statuses and the environment", all(w in text for w in ("EXIT STATUS", "COOPSIM_AUDIT",
                                                                               "COOPSIM_PYTHON")), text[-600:])

finish(results, tmp)
