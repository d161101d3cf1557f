"""all-MiniLM-L6-v2 over length-sorted padded batches, with int8 Linears.

The same model as memory/onnx_minilm.py with two changes, measured one at a time
against it by bench/embed_bench.py (bench/EMBED_RESULTS.md):
- Texts sorted by length run as padded batches [B, L]: attention costs B x L^2
  instead of the packed layout's (sum of lengths)^2, mostly spent on the zeros of
  its block-diagonal mask.
- Every Linear in int8, by one of onnxruntime's contrib kernels: "dynamic"
  (DynamicQuantizeMatMul: weights with a scale per output column, activations
  quantized per call to uint8 with one scale for the whole tensor: fast on VNNI, but
  one outlier word piece coarsens the whole batch) or "blockwise" (MatMulNBits at 8
  bits, accuracy level 4: weights and activations with a scale per 32 values along
  K: close to fp32, but not faster on this onnxruntime).
Neither int8 kernel holds retrieval and speed at once (EMBED_RESULTS.md), so none is
a provider: the default stays fp32. Their vectors are not the fp32 model's, so each
carries its own model name and never shares a cache or a memory with fp32 vectors.
"""

from __future__ import annotations

import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

import numpy as np

from vicar.memory.onnx_minilm import (
    _FLOAT,
    _INT64,
    MODEL_NAME,
    _check_config,
    _Graph,
    _Msg,
    _value_info,
    read_safetensors,
)

INT8_MODEL_NAME = MODEL_NAME + "-int8"
BATCH_TOKENS = 2048  # padded word pieces per run (B x L)


def quantize_columns(wt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """torch's Linear weight [out, in] as int8 B [in, out] and its per-column scale [out]:
    B * scale ~= wt.T."""
    scale = np.maximum(np.abs(wt).max(axis=1), 1e-12) / 127.0
    q = np.clip(np.rint(wt / scale[:, None]), -127, 127).astype(np.int8)
    return np.ascontiguousarray(q.T), scale.astype(np.float32)


Kernel = Literal["dynamic", "blockwise"]
BLOCK = 32  # blockwise kernel: weights and activations get one scale per 32 values along K


def quantize_blocks(wt: np.ndarray, block: int = BLOCK) -> tuple[np.ndarray, np.ndarray]:
    """torch's Linear weight [N, K] as MatMulNBits' 8-bit B [N, K / block, block] (uint8,
    zero point 128) and its scales [N, K / block]: symmetric, one scale per block of K."""
    n, k = wt.shape
    blocks = wt.reshape(n, k // block, block)
    scale = np.maximum(np.abs(blocks).max(axis=2), 1e-12) / 127.0
    q = np.clip(np.rint(blocks / scale[:, :, None]), -127, 127).astype(np.int16) + 128
    return q.astype(np.uint8), scale.astype(np.float32)


def build_padded_model(
    weights: dict[str, np.ndarray],
    config: dict,
    quantize: bool | tuple[str, ...] = True,
    kernel: Kernel = "dynamic",
) -> tuple[bytes, dict[str, np.ndarray]]:
    """The BERT encoder over a padded batch: inputs input_ids [B, L], position_ids [L],
    mask_bias [B, 1, 1, L] (0 for a word piece, a large negative for padding); output
    hidden [B, L, H]. `quantize`: int8 Linear weights (or only the Linears named, e.g.
    "attention.self.query"), else float32. `kernel`: "dynamic" (DynamicQuantizeMatMul:
    per-column weight scales, the activations quantized per tensor) or "blockwise"
    (MatMulNBits, 8 bits: weights and activations with a scale per block of 32)."""
    w = weights
    pre = "" if "embeddings.word_embeddings.weight" in w else "bert."
    hidden, heads = config["hidden_size"], config["num_attention_heads"]
    head_dim = hidden // heads
    eps = float(config["layer_norm_eps"])
    g = _Graph()
    to_heads = g.init(np.array([0, 0, heads, head_dim], np.int64))
    to_rows = g.init(np.array([0, 0, hidden], np.int64))

    def linear(x: str, name: str, scale: float = 1.0) -> str:
        wt, b = w[name + ".weight"], w[name + ".bias"]
        if scale != 1.0:
            wt, b = wt * np.float32(scale), b * np.float32(scale)
        if not (quantize is True or (quantize and name.split(".", 3)[-1] in quantize)):
            return g.op("Add", [g.op("MatMul", [x, g.init(np.ascontiguousarray(wt.T))]), g.init(b)])
        if kernel == "blockwise":
            # accuracy_level 4: the activations are quantized to int8 per block of each row too
            q, blk_scale = quantize_blocks(np.asarray(wt, np.float32))
            n, k = wt.shape
            return g.op(
                "MatMulNBits",
                [x, g.init(q), g.init(blk_scale), "", "", g.init(np.asarray(b, np.float32))],
                domain="com.microsoft",
                K=k, N=n, bits=8, block_size=BLOCK, accuracy_level=4,
            )  # fmt: skip
        q, col_scale = quantize_columns(np.asarray(wt, np.float32))
        return g.op(
            "DynamicQuantizeMatMul",
            [x, g.init(q), g.init(col_scale), "", g.init(np.asarray(b, np.float32))],
            domain="com.microsoft",
        )

    def layer_norm(x: str, name: str) -> str:
        return g.op(
            "LayerNormalization", [x, g.init(w[name + ".weight"]), g.init(w[name + ".bias"])], epsilon=eps, axis=-1
        )

    def split_heads(x: str, perm: list[int]) -> str:
        return g.op("Transpose", [g.op("Reshape", [x, to_heads])], perm=perm)

    e = pre + "embeddings."
    x = g.op("Gather", [g.init(w[e + "word_embeddings.weight"]), "input_ids"])
    x = g.op("Add", [x, g.op("Gather", [g.init(w[e + "position_embeddings.weight"]), "position_ids"])])
    x = g.op("Add", [x, g.init(w[e + "token_type_embeddings.weight"][0])])
    x = layer_norm(x, e + "LayerNorm")
    for i in range(config["num_hidden_layers"]):
        p = f"{pre}encoder.layer.{i}."
        q = split_heads(linear(x, p + "attention.self.query", 1 / math.sqrt(head_dim)), [0, 2, 1, 3])
        k = split_heads(linear(x, p + "attention.self.key"), [0, 2, 3, 1])
        v = split_heads(linear(x, p + "attention.self.value"), [0, 2, 1, 3])
        scores = g.op("Add", [g.op("MatMul", [q, k]), "mask_bias"])
        ctx = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
        ctx = g.op("Reshape", [g.op("Transpose", [ctx], perm=[0, 2, 1, 3]), to_rows])
        x = layer_norm(g.op("Add", [linear(ctx, p + "attention.output.dense"), x]), p + "attention.output.LayerNorm")
        h = g.op("Gelu", [linear(x, p + "intermediate.dense")])
        x = layer_norm(g.op("Add", [linear(h, p + "output.dense"), x]), p + "output.LayerNorm")
    g.op("Identity", [x], "hidden")

    graph = _Msg()
    for node in g.nodes:
        graph.bytes(1, node)
    graph.bytes(2, "all_minilm_l6_v2_padded")
    for t in g.inits:
        graph.bytes(5, t)
    graph.bytes(11, _value_info("input_ids", _INT64, ["B", "L"]))
    graph.bytes(11, _value_info("position_ids", _INT64, ["L"]))
    graph.bytes(11, _value_info("mask_bias", _FLOAT, ["B", 1, 1, "L"]))
    graph.bytes(12, _value_info("hidden", _FLOAT, ["B", "L", hidden]))
    model = _Msg().int(1, 9).bytes(2, "vicar").bytes(7, graph).bytes(8, _Msg().bytes(1, "").int(2, 20))
    model.bytes(8, _Msg().bytes(1, "com.microsoft").int(2, 1))
    return bytes(model.serialize()), g.external


def length_batches(lens: list[int], batch_tokens: int) -> list[list[int]]:
    """Indices of texts grouped longest first, each group padded to its first (longest)
    text's length, B x L <= batch_tokens (a text longer than that runs alone)."""
    order = sorted(range(len(lens)), key=lambda i: -lens[i])
    batches: list[list[int]] = []
    for i in order:
        if batches and lens[batches[-1][0]] * (len(batches[-1]) + 1) <= batch_tokens:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


class Int8MiniLMEmbedder:
    """all-MiniLM-L6-v2 with int8 weights on onnxruntime, padded length-sorted batches.
    Its own model name: its vectors are close to the fp32 model's (tests/
    test_embed_int8.py states how close) but not equal, so they are never mixed."""

    model_name = INT8_MODEL_NAME
    dim = 384

    def __init__(
        self,
        model_dir: Path | None = None,
        threads: int | None = None,
        batch_tokens: int = BATCH_TOKENS,
        quantize: bool | tuple[str, ...] = True,
        kernel: Kernel = "dynamic",
        workers: int | None = None,
        profile: str | None = None,
    ) -> None:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        import onnxruntime as ort
        from tokenizers import Tokenizer

        if model_dir is None:
            from vicar.memory.optional import minilm_weights

            model_dir = Path(minilm_weights().get_model_path())
        config, self.max_seq_length = _check_config(model_dir)
        self.dim = int(config["hidden_size"])
        self.batch_tokens = max(batch_tokens, self.max_seq_length)
        if not quantize:
            self.model_name = MODEL_NAME + "-padded"  # a measuring aid, not a provider
        elif kernel == "blockwise":
            self.model_name = INT8_MODEL_NAME + "-blockwise"

        tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        tok.enable_truncation(self.max_seq_length)
        tok.no_padding()
        self._tokenizer = tok
        self._tok_lock = threading.Lock()

        model, weights = build_padded_model(read_safetensors(model_dir / "model.safetensors"), config, quantize, kernel)
        opts = ort.SessionOptions()
        self._weights = [ort.OrtValue.ortvalue_from_numpy(a) for a in weights.values()]
        opts.add_external_initializers(list(weights), self._weights)
        opts.intra_op_num_threads = threads or 1
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.log_severity_level = 3
        if profile:  # onnxruntime's per-node timings, to this file prefix (bench/embed_bench.py --profile)
            opts.enable_profiling = True
            opts.profile_file_prefix = profile
        self._session = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
        workers = workers or os.cpu_count() or 1
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="minilm8") if workers > 1 else None

    def tokenize(self, texts: list[str]) -> list[list[int]]:
        with self._tok_lock:
            return [enc.ids for enc in self._tokenizer.encode_batch(list(texts), add_special_tokens=True)]

    def _run_batch(self, seqs: list[list[int]]) -> np.ndarray:
        width = max(len(s) for s in seqs)
        ids = np.zeros((len(seqs), width), dtype=np.int64)  # [PAD] is 0; masked anyway
        mask = np.zeros((len(seqs), width), dtype=np.float32)
        for row, s in enumerate(seqs):
            ids[row, : len(s)] = s
            mask[row, : len(s)] = 1.0
        bias = np.where(mask > 0, np.float32(0.0), np.finfo(np.float32).min)[:, None, None, :]
        hidden = self._session.run(
            None,
            {"input_ids": ids, "position_ids": np.arange(width, dtype=np.int64), "mask_bias": bias},
        )[0]
        vecs = np.einsum("bld,bl->bd", hidden, mask) / mask.sum(axis=1, keepdims=True)  # mean pooling
        return vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        seqs = self.tokenize(texts)
        batches = length_batches([len(s) for s in seqs], self.batch_tokens)

        def run(batch: list[int]) -> np.ndarray:
            return self._run_batch([seqs[i] for i in batch])

        pool = self._pool
        results = pool.map(run, batches) if pool is not None and len(batches) > 1 else map(run, batches)
        for batch, vecs in zip(batches, results):
            out[batch] = vecs
        return out
