"""Split a gate-replay file's reviewers in two by a hash of their id, so a design can be
chosen on one half and confirmed on the other (the people kept back are checked the same
way). Each half keeps the file's order.

    python -m bench.team_split /work/shared/datasets/permissions/dev.jsonl.gz --out /tmp/halves
    # writes /tmp/halves/dev-half0.jsonl.gz and dev-half1.jsonl.gz
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
from pathlib import Path


def half_of(reviewer: str) -> int:
    """0 or 1, by the first byte of the id's BLAKE2b digest."""
    return hashlib.blake2b(reviewer.encode(), digest_size=8).digest()[0] % 2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.file.name.removesuffix(".gz").removesuffix(".jsonl")
    paths = [args.out / f"{stem}-half{h}.jsonl.gz" for h in (0, 1)]
    people: list[set[str]] = [set(), set()]
    with gzip.open(args.file, "rt", encoding="utf-8") as src:
        outs = [gzip.open(p, "wt", encoding="utf-8") for p in paths]
        try:
            for line in src:
                if line.strip():
                    h = half_of(json.loads(line)["reviewer"])
                    people[h].add(json.loads(line)["reviewer"])
                    outs[h].write(line)
        finally:
            for f in outs:
                f.close()
    for p, who in zip(paths, people):
        print(f"{p}: {len(who)} reviewers")


if __name__ == "__main__":
    main()
