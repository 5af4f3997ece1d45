"""Builds the seqattn extension for `pip install .` with the project's own CMake build.

The library and the pybind11 module are configured and built by CMake (Release, no tests,
benches, CLI or MPI) under build/pip/, and the module is copied where setuptools packages it.
The version is CMake's project version, the one `seqattn.__version__` reports.

SEQATTN_CMAKE_BUILD_DIR=<tree>: build the module in an already configured tree (e.g.
build/release, which scripts/build configures with the Python package) instead of configuring
a new one; the test suite installs from its own tree this way.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
BUILD_BASE = ROOT / "build" / "pip"


def cmake_version():
    """The VERSION of CMakeLists.txt's project() call."""
    match = re.search(r"project\(seqattn\s+VERSION\s+([0-9]+\.[0-9]+\.[0-9]+)",
                      (ROOT / "CMakeLists.txt").read_text())
    if not match:
        raise RuntimeError("CMakeLists.txt: expected project(seqattn VERSION x.y.z ...)")
    return match.group(1)


def run(args):
    print("seqattn setup.py:", " ".join(str(a) for a in args), flush=True)
    subprocess.run([str(a) for a in args], check=True)


class CMakeExtension(Extension):
    """An extension whose sources CMake compiles (python/CMakeLists.txt, target _seqattn)."""

    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        tree = os.environ.get("SEQATTN_CMAKE_BUILD_DIR")
        if tree:
            build = Path(tree).resolve()
            if not (build / "CMakeCache.txt").exists():
                raise RuntimeError(f"SEQATTN_CMAKE_BUILD_DIR: expected a configured CMake build "
                                   f"tree, got {build} (no CMakeCache.txt)")
        else:
            build = BUILD_BASE / "cmake"
            self.configure(build)
        jobs = os.environ.get("SEQATTN_JOBS", str(os.cpu_count() or 1))
        run(["cmake", "--build", build, "--target", "_seqattn", "-j", jobs])
        built = sorted((build / "python" / "seqattn").glob("_seqattn*.so"))
        if not built:
            raise RuntimeError(f"{build}: the build made no _seqattn module (was the tree "
                               "configured with -DSEQATTN_PYTHON=ON and pybind11 found?)")
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[0], target)

    @staticmethod
    def configure(build):
        args = ["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                "-DSEQATTN_BUILD_TESTS=OFF", "-DSEQATTN_BUILD_BENCH=OFF", "-DSEQATTN_BUILD_CLI=OFF",
                "-DSEQATTN_MPI=OFF", "-DSEQATTN_PYTHON=ON", f"-DPython_EXECUTABLE={sys.executable}"]
        if shutil.which("ninja"):
            args += ["-G", "Ninja"]
        try:  # an isolated build's pybind11 (pip's), else CMake's search finds pybind11-dev
            import pybind11
            args.append(f"-Dpybind11_DIR={pybind11.get_cmake_dir()}")
        except ImportError:
            pass
        run(args)


BUILD_BASE.mkdir(parents=True, exist_ok=True)
setup(
    version=cmake_version(),
    ext_modules=[CMakeExtension("seqattn._seqattn")],
    cmdclass={"build_ext": CMakeBuild},
    # Every build product under build/pip/, none beside the sources.
    options={"build": {"build_base": str(BUILD_BASE)},
             "egg_info": {"egg_base": str(BUILD_BASE)}},
)
