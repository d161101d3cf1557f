"""The padded and int8 MiniLM graphs (memory/minilm_int8.py) against the fp32 default
(memory/onnx_minilm.py, itself held to sentence-transformers in tests/test_embeddings.py).

Stated tolerances, from bench/EMBED_RESULTS.md's measurements on the replay's texts:
- padded fp32: the default's vectors to float rounding (1e-5);
- int8 blockwise (MatMulNBits, 8 bits, a scale per 32 weights and per 32 activations):
  every cosine to the fp32 vector >= 0.998, mean >= 0.9995;
- int8 dynamic (DynamicQuantizeMatMul, activations per tensor): every cosine >= 0.95,
  mean >= 0.98 (too far for the default: its recall@10 against fp32 is below 0.99).
"""

from __future__ import annotations

import numpy as np
import pytest

from vicar.memory.embedder import CachedEmbedder
from vicar.memory.minilm_int8 import INT8_MODEL_NAME, Int8MiniLMEmbedder, length_batches
from vicar.memory.onnx_minilm import MODEL_NAME, OnnxMiniLMEmbedder

from .test_embeddings import PARITY_TEXTS

TEXTS = PARITY_TEXTS + [f"gate {i}: " + "review the patch to the driver " * (i * 7 % 40) for i in range(30)]


@pytest.fixture(scope="module")
def fp32():
    return OnnxMiniLMEmbedder()


@pytest.fixture(scope="module")
def want(fp32):
    return fp32.embed(TEXTS)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1)


def test_length_batches_cover_every_text_once_within_the_budget():
    lens = [5, 256, 17, 17, 100, 1, 256, 64, 3, 90]
    batches = length_batches(lens, 300)
    assert sorted(i for b in batches for i in b) == list(range(len(lens)))
    for b in batches:
        assert lens[b[0]] == max(lens[i] for i in b)  # padded to its first text
        assert lens[b[0]] * len(b) <= 300 or len(b) == 1
    firsts = [lens[b[0]] for b in batches]
    assert firsts == sorted(firsts, reverse=True)  # longest first


def test_padded_fp32_graph_equals_the_packed_default(want):
    padded = Int8MiniLMEmbedder(quantize=False, batch_tokens=700)  # several batches
    assert padded.model_name != MODEL_NAME  # a measuring aid: never stored under the default's name
    got = padded.embed(TEXTS)
    assert got.shape == want.shape and got.dtype == np.float32
    assert np.abs(got - want).max() < 1e-5
    assert padded.embed([]).shape == (0, 384)


def test_int8_blockwise_within_its_stated_tolerance(want):
    emb = Int8MiniLMEmbedder(kernel="blockwise")
    got = emb.embed(TEXTS)
    cos = cosines(got, want)
    assert cos.min() >= 0.998 and cos.mean() >= 0.9995, (cos.min(), cos.mean())
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    # Activations are quantized per block of a row: a text's vector hardly depends on its batch.
    alone = np.concatenate([emb.embed([t]) for t in TEXTS[:8]])
    assert np.abs(alone - got[:8]).max() < 1e-3


def test_int8_dynamic_within_its_stated_tolerance(want):
    emb = Int8MiniLMEmbedder()
    got = emb.embed(TEXTS)
    cos = cosines(got, want)
    assert cos.min() >= 0.95 and cos.mean() >= 0.98, (cos.min(), cos.mean())
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_int8_vectors_never_served_from_the_fp32_cache(tmp_path, fp32):
    """One cache file, both models: each reads back only its own vectors."""
    cache = tmp_path / "embeddings.sqlite"
    int8 = Int8MiniLMEmbedder()
    assert int8.model_name == INT8_MODEL_NAME != fp32.model_name
    texts = TEXTS[:6]
    from_fp32 = CachedEmbedder(fp32, cache).embed(texts)
    from_int8 = CachedEmbedder(int8, cache).embed(texts)  # a fresh LRU: only the file is shared
    assert not np.array_equal(from_int8, from_fp32)
    assert np.abs(from_int8 - int8.embed(texts)).max() < 1e-6
    assert np.array_equal(CachedEmbedder(fp32, cache).embed(texts), from_fp32)
