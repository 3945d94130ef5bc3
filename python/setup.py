"""Builds the package's native module, coopsim._native, with the project's own Meson build.

`pip install ./python` (from a coopsim source tree: the module is libcoopsim plus
python/native/module.cpp, so the tree above this directory must be there) configures a release
build of the tree in a temporary directory with the installing Python
(-Dpython_installation), compiles only the module's target and installs it beside the package.
$COOPSIM_BUILD_DIR names an existing build directory to compile it in instead (the test suite's,
so that installing does not rebuild the library). Needs meson and ninja (Debian's, or PyPI's:
they are build requirements when absent) and the C++ dependencies of README.md ("Build").

The version is meson.build's project version: one version, single-sourced.
"""
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def project_version():
    path = os.path.join(ROOT, "meson.build")
    try:
        with open(path, encoding="utf-8") as f:
            found = re.search(r"^\s*version: '([^']+)'", f.read(), re.M)
    except OSError:
        found = None
    if not found:
        sys.exit(f"{path}: no project version there: coopsim's Python package builds from a coopsim source tree")
    return found.group(1)


class MesonBuildExt(build_ext):
    """build_ext for the one extension: Meson builds it, setuptools installs it."""

    def build_extension(self, ext):
        given = os.environ.get("COOPSIM_BUILD_DIR")
        if given:
            if not os.path.isfile(os.path.join(given, "build.ninja")):
                sys.exit(f"{given}: not a configured Meson build directory ($COOPSIM_BUILD_DIR)")
            self._build(given, ext)
            return
        # A fresh directory each time: a kept one would name the meson of an isolated build
        # environment that pip has since removed.
        with tempfile.TemporaryDirectory(prefix="coopsim-meson-") as build_dir:
            _find_pybind11()
            self._run(["meson", "setup", build_dir, ROOT, "--buildtype=release", "-Dtests=disabled",
                       "-Dcuda=disabled", "-Dpython=enabled", f"-Dpython_installation={sys.executable}"])
            self._build(build_dir, ext)

    def _build(self, build_dir, ext):
        target = "python/_native" + sysconfig.get_config_var("EXT_SUFFIX")
        self._run(["ninja", "-C", build_dir, target])
        built = os.path.join(build_dir, target)
        if not os.path.isfile(built):
            sys.exit(f"{built}: Meson did not build the native module for this Python ({sys.executable})")
        destination = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(destination), exist_ok=True)
        shutil.copyfile(built, destination)

    @staticmethod
    def _run(command):
        print(" ".join(command), flush=True)
        subprocess.run(command, check=True)


def _find_pybind11():
    """PyPI's pybind11 (a build requirement) ships a pkg-config file: let Meson's dependency() see it."""
    try:
        import pybind11
    except ImportError:
        return  # Debian's pybind11-dev, found by pkg-config as it is
    pc = os.path.join(os.path.dirname(pybind11.__file__), "share", "pkgconfig")
    if os.path.isdir(pc):
        os.environ["PKG_CONFIG_PATH"] = os.pathsep.join(p for p in (pc, os.environ.get("PKG_CONFIG_PATH")) if p)


setup(
    version=project_version(),
    ext_modules=[Extension("coopsim._native", sources=[])],
    cmdclass={"build_ext": MesonBuildExt},
)
