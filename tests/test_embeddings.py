"""Embedding providers: MiniLM on onnxruntime against sentence-transformers, the real
OpenAI SDK against a local stand-in, caching, re-embedding."""

from __future__ import annotations

import numpy as np
import openai
import pytest

from vicar.errors import VicarError
from vicar.memory.embedder import (
    CachedEmbedder,
    MiniLMEmbedder,
    OpenAIEmbedder,
    make_embedder,
)
from vicar.memory.onnx_minilm import OnnxMiniLMEmbedder
from vicar.memory.principal import PrincipalMemory
from vicar.memory.reembed import reembed
from vicar.memory.retrieval import Query
from vicar.memory.store import StoreError
from vicar.settings import MemoryParams

from .conftest import docs_chunk
from .openai_standin import OpenAIStandIn, fake_vector

# Texts of every kind the gate embeds and then some: short and long (past the 256 word
# pieces both implementations truncate at), empty and blank, accents, CJK, emoji,
# control characters, code, and pieces the vocabulary lacks.
LONG_DOC = " ".join(
    f"Section {i}: the installer now verifies checksums (sha256) before unpacking; "
    f"see docs/install.md#step-{i} and run `pip install -e .[dev]`."
    for i in range(40)
)
PARITY_TEXTS = [
    "PLAN_ASSERT docs: Approve or revise the overall deliverable: documentation update.",
    "Fix typo number 17 in the installation guide.",
    "ok",
    "",
    "   ",
    "  leading and trailing whitespace \n\t ",
    "UPPER case and MiXeD Case Words",
    "Ünïcödé naïve café résumé Straße — “quotes” … 東京 北京 😀🚀",
    "def f(x):\n    return x ** 2  # squares\n\x00\x07 control chars",
    "supercalifragilisticexpialidocious pneumonoultramicroscopicsilicovolcanoconiosis",
    "a " * 600,
    LONG_DOC,
    LONG_DOC[:2000],
    "\n".join(["situation text", "artifact text " * 30, "response: approve with nits"]),
]


@pytest.fixture(scope="module")
def reference():
    return make_embedder("minilm-torch").inner  # sentence-transformers on torch


@pytest.fixture(scope="module")
def onnx_minilm():
    return make_embedder("minilm").inner  # the process's default model


def test_onnx_minilm_matches_sentence_transformers(reference, onnx_minilm):
    lens = [len(ids) for ids in onnx_minilm.tokenize(PARITY_TEXTS)]
    assert max(lens) == 256 and sum(n == 256 for n in lens) >= 3  # truncation is exercised
    want = reference.embed(PARITY_TEXTS)
    for got in (
        onnx_minilm.embed(PARITY_TEXTS),  # packed several texts per run, packs run in parallel
        np.concatenate([onnx_minilm.embed([t]) for t in PARITY_TEXTS]),  # one text per call
        onnx_minilm.embed(PARITY_TEXTS[::-1])[::-1],  # other neighbours in the packs
    ):
        assert got.shape == (len(PARITY_TEXTS), 384) and got.dtype == np.float32
        assert np.abs(got - want).max() < 1e-4
    assert np.allclose(np.linalg.norm(want, axis=1), 1.0, atol=1e-5)


def test_onnx_minilm_batches_of_any_size(reference, onnx_minilm):
    texts = [f"gate {i}: " + "word " * (i * 37 % 300) for i in range(40)]  # several packs
    assert np.abs(onnx_minilm.embed(texts) - reference.embed(texts)).max() < 1e-4
    assert onnx_minilm.embed([]).shape == (0, 384)


def test_onnx_minilm_runs_calls_from_many_threads_at_once(onnx_minilm):
    from concurrent.futures import ThreadPoolExecutor

    want = onnx_minilm.embed(PARITY_TEXTS)
    with ThreadPoolExecutor(4) as pool:  # activities call the one process-wide model concurrently
        got = list(pool.map(lambda i: onnx_minilm.embed(PARITY_TEXTS[i:] + PARITY_TEXTS[:i]), range(8)))
    for i, vecs in enumerate(got):
        assert np.abs(np.roll(vecs, i, axis=0) - want).max() < 1e-5


def test_default_minilm_is_onnx_under_the_same_model_name(reference, onnx_minilm, monkeypatch):
    monkeypatch.delenv("VICAR_EMBEDDER", raising=False)
    assert isinstance(onnx_minilm, OnnxMiniLMEmbedder) and isinstance(reference, MiniLMEmbedder)
    assert make_embedder().inner is onnx_minilm  # VICAR_EMBEDDER unset
    assert onnx_minilm.model_name == reference.model_name == "all-MiniLM-L6-v2"
    assert onnx_minilm.dim == reference.dim == 384
    with pytest.raises(VicarError, match="minilm-torch"):
        make_embedder("nope")


@pytest.fixture
def standin():
    s = OpenAIStandIn()
    yield s
    s.close()


def openai_embedder(standin, **kw) -> OpenAIEmbedder:
    client = openai.OpenAI(api_key="sk-test", base_url=standin.url, max_retries=0)
    return OpenAIEmbedder(client=client, **kw)


def test_openai_embeddings_are_batched_and_normalized(standin):
    emb = openai_embedder(standin, batch=100)
    texts = [f"text {i}" for i in range(250)]
    vecs = emb.embed(texts)
    assert vecs.shape == (250, 1536)
    assert [len(r["body"]["input"]) for r in standin.requests] == [100, 100, 50]
    assert standin.requests[0]["body"]["model"] == "text-embedding-3-small"
    assert standin.requests[0]["auth"] == "Bearer sk-test"
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    want = fake_vector("text 7")
    assert np.allclose(vecs[7], want / np.linalg.norm(want), atol=1e-5)


def test_openai_errors_are_one_clear_message():
    s = OpenAIStandIn(fail_with=429)
    try:
        with pytest.raises(VicarError, match="HTTP 429: .*quota exceeded"):
            openai_embedder(s).embed(["x"])
    finally:
        s.close()


def test_cache_embeds_each_text_once_across_runs(standin, tmp_path):
    cache = tmp_path / "cache.sqlite"
    first = CachedEmbedder(openai_embedder(standin), cache)
    a = first.embed(["alpha", "beta", "alpha"])
    assert [r["body"]["input"] for r in standin.requests] == [["alpha", "beta"]]
    again = CachedEmbedder(openai_embedder(standin), cache)  # a new process, the same disk cache
    b = again.embed(["beta", "alpha", "gamma"])
    assert [r["body"]["input"] for r in standin.requests][-1] == ["gamma"]
    assert np.allclose(a[0], b[1]) and np.allclose(a[1], b[0])


def test_local_model_is_cached_in_memory(embedder):
    v = embedder.embed(["the same text", "the same text"])
    assert v.shape == (2, 384) and np.allclose(v[0], v[1])
    assert np.isclose(np.linalg.norm(v[0]), 1.0, atol=1e-5)


def test_reembed_migrates_a_memory_to_another_model(settings, embedder, standin):
    mem = PrincipalMemory("alice", settings.principals_dir, embedder, MemoryParams())
    for i in range(1, 6):
        mem.record(docs_chunk(i))
    mem.close()
    other = CachedEmbedder(openai_embedder(standin))
    with pytest.raises(StoreError, match="vicar memory reembed"):
        PrincipalMemory("alice", settings.principals_dir, other, MemoryParams())
    done = []
    assert reembed(settings.principals_dir, "alice", other, batch=2, progress=lambda d, t: done.append((d, t))) == 5
    assert done[-1] == (5, 5)
    assert reembed(settings.principals_dir, "alice", other) == 0  # already there
    moved = PrincipalMemory("alice", settings.principals_dir, other, MemoryParams())
    assert moved.vectors.count() == 5 * 3  # situation, response and the blended text
    hits = moved.retrieve(Query(now=6, texts={"situation": "PLAN_ASSERT docs: Approve doc change 3?"}))
    assert hits[0][0].chunk_id == "c3" and hits[0][0].similarity == pytest.approx(1.0, abs=1e-5)
    moved.close()
    with pytest.raises(StoreError, match="reembed"):  # and the old model is now refused
        PrincipalMemory("alice", settings.principals_dir, embedder, MemoryParams())
