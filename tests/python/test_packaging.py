"""The installable package: pip install into a fresh venv, one version number, the type stubs,
and the seqattn.Error hierarchy."""

import ast
import inspect
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import seqattn
from conftest import SOURCE_DIR, randn


def cmake_version():
    text = (SOURCE_DIR / "CMakeLists.txt").read_text()
    return re.search(r"project\(seqattn\s+VERSION\s+([0-9.]+)", text).group(1)


def test_the_version_is_cmakes_project_version():
    assert seqattn.__version__ == cmake_version()


def test_pip_install_into_a_fresh_venv(tmp_path):
    """pip install --no-build-isolation . (offline) into a venv that sees Debian's numpy and
    torch, then the package imported outside the source tree. The module is built in the
    suite's own CMake tree (SEQATTN_CMAKE_BUILD_DIR), so this costs no second build; setup.py's
    own configure-and-build path is what the README's pip line runs."""
    tree = os.environ.get("SEQATTN_BUILD_DIR")
    if not tree:
        pytest.skip("SEQATTN_BUILD_DIR is not set to the CMake build tree (ctest sets it)")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True, capture_output=True)
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["SEQATTN_CMAKE_BUILD_DIR"] = tree
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-build-isolation", "--no-index",
         "--disable-pip-version-check", str(SOURCE_DIR)],
        env=env, cwd=tmp_path, capture_output=True, text=True)
    assert install.returncode == 0, install.stdout + install.stderr
    check = textwrap.dedent(f"""
        import importlib.metadata, pathlib, sys
        import numpy as np
        import seqattn
        where = pathlib.Path(seqattn.__file__).resolve()
        assert str(where).startswith({str(venv.resolve())!r}), where
        assert seqattn.__version__ == importlib.metadata.version("seqattn") == {cmake_version()!r}
        assert (where.parent / "py.typed").is_file() and (where.parent / "__init__.pyi").is_file()
        q = np.ones((1, 2, 5, 8), np.float32)
        out = seqattn.attention(q, q, q)
        assert out.shape == (1, 2, 5, 8) and abs(float(out[0, 0, 0, 0]) - 1.0) < 1e-6
        try:
            seqattn.attention(q, q, q, scale=-1.0)
        except seqattn.InvalidArgumentError as e:
            assert isinstance(e, ValueError) and e.argument == "scale"
        else:
            sys.exit("no error")
        print(seqattn.__version__, seqattn.simd_target())
    """)
    run = subprocess.run([str(python), "-c", check], env=env, cwd=tmp_path, capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith(cmake_version())


def stub_parameters(node):
    """(name, kind) of a stub function's parameters, as inspect names the kinds."""
    a = node.args
    params = [(p.arg, "POSITIONAL_ONLY") for p in a.posonlyargs]
    params += [(p.arg, "POSITIONAL_OR_KEYWORD") for p in a.args]
    if a.vararg:
        params.append((a.vararg.arg, "VAR_POSITIONAL"))
    params += [(p.arg, "KEYWORD_ONLY") for p in a.kwonlyargs]
    if a.kwarg:
        params.append((a.kwarg.arg, "VAR_KEYWORD"))
    return params


def runtime_parameters(fn, drop_self):
    params = [(p.name, p.kind.name) for p in inspect.signature(fn).parameters.values()]
    return params[1:] if drop_self else params


def test_the_stubs_declare_every_public_name_with_its_signature():
    """What the stubs say is what the package has: every name in __all__, and each function's
    and method's parameters (names, order, positional/keyword kinds)."""
    tree = ast.parse((SOURCE_DIR / "python/seqattn/__init__.pyi").read_text())
    declared = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            declared[node.name] = node
        elif isinstance(node, ast.AnnAssign):
            declared[node.target.id] = node
    assert set(seqattn.__all__) <= set(declared), set(seqattn.__all__) - set(declared)
    checked = 0
    for name, node in declared.items():
        if isinstance(node, ast.FunctionDef):
            assert stub_parameters(node) == runtime_parameters(getattr(seqattn, name), False), name
            checked += 1
        elif isinstance(node, ast.ClassDef):
            cls = getattr(seqattn, name)
            for member in node.body:
                if not isinstance(member, ast.FunctionDef):
                    continue
                decorators = {d.id for d in member.decorator_list if isinstance(d, ast.Name)}
                if "property" in decorators or member.name.startswith("__") and \
                        not member.name == "__init__":
                    assert hasattr(cls, member.name), f"{name}.{member.name}"
                    continue
                if cls.__module__ == "seqattn._seqattn" or issubclass(cls, BaseException):
                    continue  # compiled or exception classes: names only
                runtime = inspect.getattr_static(cls, member.name)
                fn = runtime.__func__ if isinstance(runtime, classmethod) else runtime
                assert stub_parameters(member) == runtime_parameters(fn, False), \
                    f"{name}.{member.name}"
                checked += 1
    assert checked >= 12


def test_errors_keep_kind_argument_expected_and_actual(rng):
    q = randn(rng, 1, 2, 6, 8)
    cases = [
        # (call, class, built-in base, kind, argument)
        (lambda: seqattn.attention(q, q, q, scale=-1.0), seqattn.InvalidArgumentError,
         ValueError, "invalid_argument", "scale"),
        (lambda: seqattn.attention(q, q, q, variant="linear", return_weights=True),
         seqattn.UnsupportedError, ValueError, "unsupported", "weights"),
        (lambda: seqattn.attention(q, q, q, variant="auto", profile="/no/such/profile.json"),
         seqattn.FileError, OSError, "io", None),
        (lambda: seqattn.attention(q.astype(np.float64), q, q), seqattn.ArgumentTypeError,
         TypeError, "invalid_argument", "q"),  # raised by the bindings
        (lambda: seqattn.attention(q, q, q, layout="sbhd"), seqattn.InvalidArgumentError,
         ValueError, "invalid_argument", "layout"),  # raised by the Python layer
        (lambda: seqattn.attention(q, q, q, threads=1.5), seqattn.ArgumentTypeError, TypeError,
         "invalid_argument", "threads"),
        (lambda: seqattn.KvCache(1, 1, 8, 8, dtype="int4"), seqattn.InvalidArgumentError,
         ValueError, "invalid_argument", "dtype"),
        (lambda: seqattn.scaled_dot_product_attention(q, q, q, dropout_p=0.1),
         seqattn.NotImplementedFeatureError, NotImplementedError, "not_implemented", "dropout_p"),
    ]
    for call, cls, base, kind, argument in cases:
        with pytest.raises(cls) as info:
            call()
        e = info.value
        assert isinstance(e, seqattn.Error) and isinstance(e, base), type(e)
        assert e.kind == kind
        if argument is not None:
            assert e.argument == argument, (e.argument, str(e))
        assert e.expected and e.actual, str(e)
        assert e.argument in str(e)
