"""Packaging: pyproject's package list, the one version, and what a built wheel holds
(brrr_compiler.passes inside brrr's namespace, no top-level `passes`, the LICENSE)."""
import importlib.metadata
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import brrr_compiler

REPO = Path(__file__).resolve().parents[1]
tomllib = pytest.importorskip("tomllib")      # Python >= 3.11


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def test_package_list_names_every_package_in_the_tree():
    tree = {".".join(p.parent.relative_to(REPO).parts)
            for p in (REPO / "brrr_compiler").rglob("__init__.py")}
    tree.add("brrr_compiler.passes")            # passes/, mapped by package-dir
    setuptools = _pyproject()["tool"]["setuptools"]
    assert set(setuptools["packages"]) == tree
    assert setuptools["package-dir"] == {"brrr_compiler.passes": "passes"}


def test_one_version():
    project = _pyproject()["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert _pyproject()["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "brrr_compiler.__version__"}
    assert importlib.metadata.version("brrr-compiler") == brrr_compiler.__version__


def test_license_is_an_spdx_expression_with_its_file():
    project = _pyproject()["project"]
    assert project["license"] == "BSD-3-Clause"
    assert project["license-files"] == ["LICENSE"]
    assert "the brrr authors" in (REPO / "LICENSE").read_text()


def test_torch_is_bounded_on_both_sides():
    torch_req = next(d for d in _pyproject()["project"]["dependencies"] if d.startswith("torch"))
    assert ">=" in torch_req and "<" in torch_req.replace("<=", "")


def test_wheel_installs_passes_inside_brrr(tmp_path):
    setuptools = pytest.importorskip("setuptools")
    if int(setuptools.__version__.split(".")[0]) < 77:
        pytest.skip("needs setuptools >= 77 in this environment (build without isolation)")
    src = tmp_path / "src"          # a copy: setuptools leaves build/ where it builds
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, src / name)
    for name in ("brrr_compiler", "passes"):
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                           "--no-build-isolation", "-q", str(src), "-w", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    (wheel,) = tmp_path.glob("brrr_compiler-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"brrr_compiler", f"brrr_compiler-{brrr_compiler.__version__}.dist-info"}
    assert "brrr_compiler/passes/__init__.py" in names
    assert "brrr_compiler/passes/cse.py" in names
    assert "brrr_compiler/codegen/cpp_prelude.h" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
