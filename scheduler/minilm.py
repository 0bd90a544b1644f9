"""all-MiniLM-L6-v2 in numpy: the built-in embedder's forward pass, no PyTorch.

sentence-transformers runs this model through PyTorch, which with its CUDA libraries
takes some 6 GB on disk to run a 90 MB model on a CPU. The model is a small BERT (6
layers, 384 wide, 12 heads) and its sentence vector is the mean of its last hidden
states over the real tokens, L2-normalised; that fits in a page of numpy. Tokens come
from the model's own ``tokenizer.json`` through the ``tokenizers`` library (the fast
tokenizer sentence-transformers itself uses) and weights from safetensors through the
``safetensors`` library, so nothing here is a reimplementation of either.

What makes it match sentence-transformers (``tests/scheduler/test_minilm.py`` compares them,
cosine >= 0.999 on a few hundred texts): the same truncation (``max_seq_length`` of
``sentence_bert_config.json``, 256 for this model, [CLS] and [SEP] included), the
same stripping of surrounding whitespace, the exact (erf) GELU, LayerNorm with the
config's epsilon, mean pooling over the attention mask and L2 normalisation.

What makes it fast on a CPU (``bench/embedder.py`` measures it against
sentence-transformers): texts are sorted by token count and batched so a batch pads
little, every matrix product is float32, the three attention projections are one
product (with attention's 1/sqrt(width) folded into the query's weights), a product
over a few rows (a search query) runs as weights x rows^T, which OpenBLAS does in two
thirds of the time of rows x weights (see `linear`), and the elementwise passes (GELU,
softmax) run over cache-sized blocks, where they went twice as fast as over whole arrays.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: Tokens a batch holds at most (rows x padded length): bounds memory for the attention scores.
BATCH_TOKENS = 2048
#: Sequences in one batch at most.
MAX_BATCH = 64
#: Rows of the feed-forward layer's activations run through GELU at a time (fits in cache).
CACHE_ROWS = 32
#: Attention score matrices (one head of one text) run through softmax at a time.
CACHE_HEADS = 4
#: Rows (a batch's tokens) up to which `linear` multiplies weights x rows^T.
NARROW_ROWS = 128

# Abramowitz and Stegun 7.1.26: erf to within 1.5e-7, far below float32's resolution at
# the model's activations; numpy has no vectorised erf and scipy is not a dependency.
_ERF_P = 0.3275911
_ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
# Subnormal floats make every product that touches them some 100 times slower on x86, and
# exp() of a large negative number is one: erf is 1 to float32 precision from 4 on and a
# softmax weight of e^-60 is nothing, so inputs to exp() stop there.
_ERF_SATURATED = np.float32(9.0)
_EXP_FLOOR = np.float32(-60.0)


def gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU, ``x * (1 + erf(x / sqrt 2)) / 2``, in place on ``x`` (float32).

    A dozen passes over the numbers: run over `CACHE_ROWS` rows at a time they stay in
    the CPU's cache between passes (twice as fast as whole-array passes, measured on
    a batch's 2048 x 1536), and ``out=`` throughout avoids fresh temporaries.
    """
    if x.ndim == 2 and x.shape[0] > CACHE_ROWS:
        for start in range(0, x.shape[0], CACHE_ROWS):
            _gelu(x[start : start + CACHE_ROWS])
        return x
    return _gelu(x)


def _gelu(x: np.ndarray) -> np.ndarray:
    z = x * np.float32(1 / math.sqrt(2))
    np.abs(z, out=z)
    np.minimum(z, _ERF_SATURATED, out=z)
    t = z * np.float32(_ERF_P)
    t += np.float32(1.0)
    np.reciprocal(t, out=t)
    poly = t * np.float32(_ERF_A[4])
    for coefficient in reversed(_ERF_A[:4]):
        poly += np.float32(coefficient)
        poly *= t
    z *= z
    np.negative(z, out=z)
    np.exp(z, out=z)
    poly *= z
    np.subtract(np.float32(1.0), poly, out=poly)  # erf(|x| / sqrt 2)
    np.copysign(poly, x, out=poly)
    poly += np.float32(1.0)
    x *= poly
    x *= np.float32(0.5)
    return x


def linear(x: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """``x @ weight.T`` for a weight in PyTorch's (out, in) layout, as stored.

    On one BLAS thread, 12 rows through a layer's four products took 13.7 ms as
    ``weight @ x.T`` against 20.1 ms as ``x @ weight``: a search query's embedding is
    mostly these products, and it is on every hybrid search's critical path. From some
    256 rows (a maintenance batch) the two cost the same, and the plain form needs no copy.
    """
    if x.shape[0] <= NARROW_ROWS:
        return np.ascontiguousarray((weight @ x.T).T)
    return x @ weight.T


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    x = x - mean
    variance = np.mean(x * x, axis=-1, keepdims=True)
    x /= np.sqrt(variance + np.float32(eps))
    x *= weight
    x += bias
    return x


def _softmax_numerator(scores: np.ndarray) -> np.ndarray:
    """``exp(scores - max)`` in place, row by row; returns the rows' sums, for the caller to divide by."""
    scores -= scores.max(axis=-1, keepdims=True)
    np.maximum(scores, _EXP_FLOOR, out=scores)
    np.exp(scores, out=scores)
    return scores.sum(axis=-1, keepdims=True)


@dataclass(frozen=True)
class _Layer:
    qkv: np.ndarray  # (3 * hidden, hidden): query, key, value projections stacked, (out, in) as `linear` takes
    qkv_bias: np.ndarray
    attention_out: np.ndarray
    attention_out_bias: np.ndarray
    attention_norm: tuple[np.ndarray, np.ndarray]
    intermediate: np.ndarray
    intermediate_bias: np.ndarray
    output: np.ndarray
    output_bias: np.ndarray
    output_norm: tuple[np.ndarray, np.ndarray]


class MiniLM:
    """A BERT sentence encoder with mean pooling, loaded from a sentence-transformers model directory.

    Args:
        directory: Holds ``model.safetensors``, ``tokenizer.json``, ``config.json``,
            ``sentence_bert_config.json`` and ``1_Pooling/config.json`` (checked by the
            caller: `palimpsest.scheduler.model_files.find_model_dir`).

    Raises:
        ValueError: if the model is not a BERT with mean pooling, or a weight is missing.
    """

    def __init__(self, directory: Path) -> None:
        from safetensors.numpy import load_file
        from threadpoolctl import ThreadpoolController
        from tokenizers import Tokenizer

        config = json.loads((directory / "config.json").read_text())
        pooling = json.loads((directory / "1_Pooling" / "config.json").read_text())
        if config.get("model_type") != "bert" or config.get("hidden_act") != "gelu":
            raise ValueError(f"{directory} is not a BERT model with GELU activations")
        if not pooling.get("pooling_mode_mean_tokens") or any(
            pooling.get(mode) for mode in ("pooling_mode_cls_token", "pooling_mode_max_tokens")
        ):
            raise ValueError(f"{directory} does not pool by mean")
        #: Tokens read per text, [CLS] and [SEP] included; longer texts are cut, as sentence-transformers does.
        self.max_tokens = int(json.loads((directory / "sentence_bert_config.json").read_text())["max_seq_length"])
        self.heads = heads = int(config["num_attention_heads"])
        hidden_size = int(config["hidden_size"])
        self.eps = float(config["layer_norm_eps"])
        self.dimensions = int(config["hidden_size"])

        # One BLAS thread: attention is batch x heads small products, where waking threads costs
        # more than it saves (four times slower on a busy two-core machine), and on such a
        # machine even the large products ran faster on one; a server embedding in the
        # background should leave the other cores to the tool calls anyway.
        self._one_blas_thread = functools.partial(ThreadpoolController().limit, limits=1, user_api="blas")
        self.tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=self.max_tokens)
        self.tokenizer.no_padding()

        weights = load_file(str(directory / "model.safetensors"))
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""

        def get(name: str) -> np.ndarray:
            return np.ascontiguousarray(weights[prefix + name], dtype=np.float32)

        def dense(name: str) -> tuple[np.ndarray, np.ndarray]:
            return get(f"{name}.weight"), get(f"{name}.bias")

        self.word_embeddings = get("embeddings.word_embeddings.weight")
        self.position_embeddings = get("embeddings.position_embeddings.weight")
        self.token_type = get("embeddings.token_type_embeddings.weight")[0]
        self.embedding_norm = (get("embeddings.LayerNorm.weight"), get("embeddings.LayerNorm.bias"))
        self.layers: list[_Layer] = []
        for index in range(int(config["num_hidden_layers"])):
            base = f"encoder.layer.{index}."
            projections = [dense(base + f"attention.self.{part}") for part in ("query", "key", "value")]
            # Attention scales query . key by 1/sqrt(head width): folded into the query's
            # weights once here instead of a pass over every batch's scores.
            scale = np.float32(1 / math.sqrt(hidden_size // heads))
            projections[0] = (projections[0][0] * scale, projections[0][1] * scale)
            attention_out, attention_out_bias = dense(base + "attention.output.dense")
            intermediate, intermediate_bias = dense(base + "intermediate.dense")
            output, output_bias = dense(base + "output.dense")
            self.layers.append(
                _Layer(
                    qkv=np.ascontiguousarray(np.concatenate([w for w, _ in projections], axis=0)),
                    qkv_bias=np.concatenate([b for _, b in projections]),
                    attention_out=attention_out,
                    attention_out_bias=attention_out_bias,
                    attention_norm=(
                        get(base + "attention.output.LayerNorm.weight"),
                        get(base + "attention.output.LayerNorm.bias"),
                    ),
                    intermediate=intermediate,
                    intermediate_bias=intermediate_bias,
                    output=output,
                    output_bias=output_bias,
                    output_norm=(get(base + "output.LayerNorm.weight"), get(base + "output.LayerNorm.bias")),
                )
            )

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalised float32 row per text, in order.

        Texts are tokenized together, sorted by token count and run in batches of
        similar length (at most `BATCH_TOKENS` padded tokens, `MAX_BATCH` texts).
        """
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        encodings = self.tokenizer.encode_batch([text.strip() for text in texts])
        ids = [np.asarray(encoding.ids, dtype=np.int64) for encoding in encodings]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        result = np.empty((len(ids), self.dimensions), dtype=np.float32)
        start = 0
        while start < len(order):
            # Sorted ascending: a batch's last row is its longest, so grow it while it fits.
            end = start + 1
            while (
                end < len(order)
                and end - start < MAX_BATCH
                and (end - start + 1) * len(ids[order[end]]) <= BATCH_TOKENS
            ):
                end += 1
            chunk = order[start:end]
            with self._one_blas_thread():
                result[chunk] = self._forward([ids[i] for i in chunk])
            start = end
        return result

    def _forward(self, rows: list[np.ndarray]) -> np.ndarray:
        batch, length = len(rows), max(len(row) for row in rows)
        token_ids = np.zeros((batch, length), dtype=np.int64)
        mask = np.zeros((batch, length), dtype=np.float32)
        for i, row in enumerate(rows):
            token_ids[i, : len(row)] = row
            mask[i, : len(row)] = 1.0
        hidden = self.word_embeddings[token_ids]
        hidden += self.position_embeddings[:length]
        hidden += self.token_type
        x = _layer_norm(hidden.reshape(batch * length, -1), *self.embedding_norm, self.eps)
        # Padding gets a large negative score, so softmax gives it (almost exactly) zero
        # weight; a batch of texts of one length has none to add.
        padded = bool((mask == 0).any())
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        heads, width = self.heads, self.dimensions // self.heads
        for layer in self.layers:
            qkv = linear(x, layer.qkv)
            qkv += layer.qkv_bias
            qkv = qkv.reshape(batch, length, 3, heads, width).transpose(2, 0, 3, 1, 4)
            # numpy's stacked matmul is only fast on contiguous operands: copy once, not per head.
            query = np.ascontiguousarray(qkv[0])
            key_t = np.ascontiguousarray(qkv[1].transpose(0, 1, 3, 2))
            value = np.ascontiguousarray(qkv[2])
            scores = query @ key_t
            if padded:
                scores += bias
            # Softmax a few heads at a time, while they are in cache; its division comes
            # after the product with the values, over (length x width) numbers, not (length x length).
            flat = scores.reshape(batch * heads, length, length)
            sums = np.empty((batch * heads, length, 1), dtype=np.float32)
            for start in range(0, batch * heads, CACHE_HEADS):
                sums[start : start + CACHE_HEADS] = _softmax_numerator(flat[start : start + CACHE_HEADS])
            context = scores @ value
            context /= sums.reshape(batch, heads, length, 1)
            context = context.transpose(0, 2, 1, 3).reshape(batch * length, self.dimensions)
            attended = linear(context, layer.attention_out)
            attended += layer.attention_out_bias
            attended += x
            x = _layer_norm(attended, *layer.attention_norm, self.eps)
            inner = linear(x, layer.intermediate)
            inner += layer.intermediate_bias
            out = linear(gelu(inner), layer.output)
            out += layer.output_bias
            out += x
            x = _layer_norm(out, *layer.output_norm, self.eps)
        states = x.reshape(batch, length, self.dimensions)
        pooled = np.einsum("bld,bl->bd", states, mask) / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return (pooled / norms).astype(np.float32)
