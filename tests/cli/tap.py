"""TAP output shared by the CLI tests: cases collected as (name, ok, detail), printed at the end."""
import shutil
import subprocess
import sys


def runner(coopsim, timeout=300):
    """A function run(*args) -> (exit status, stdout, stderr) of the coopsim binary `coopsim`."""
    def run(*args):
        p = subprocess.run([coopsim, *args], capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr
    return run


def registry_names(coopsim, kind):
    """The names of `kind` ("allocators" or "policies") in the registry's order, from `coopsim list
    --json`: tests take component names from there, so a new one needs no test edit."""
    import json
    p = subprocess.run([coopsim, "list", "--json"], capture_output=True, text=True, timeout=60, check=True)
    return [c["name"] for c in json.loads(p.stdout)[kind]]


def command_names(coopsim):
    """The commands in the order `coopsim --help` lists them (its Subcommands section): tests
    take the list from there, so a new command needs no test edit."""
    import re
    p = subprocess.run([coopsim, "--help"], capture_output=True, text=True, timeout=60, check=True)
    return re.findall(r"^  (\S+)\s", p.stdout.split("Subcommands:")[1], re.M)


def finish(results, scratch=None):
    """Prints the TAP plan and one line per case (the detail of a failure as a comment), removes
    the scratch directory, and exits 0 when every case passed, else 1."""
    print(f"1..{len(results)}")
    for i, (name, ok, detail) in enumerate(results, 1):
        print(f"{'ok' if ok else 'not ok'} {i} - {name}")
        if not ok:
            print(f"# {detail}")
    if scratch:
        shutil.rmtree(scratch, ignore_errors=True)
    sys.exit(0 if all(ok for _, ok, _ in results) else 1)
