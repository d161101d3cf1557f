"""What the selector costs per consult and per refit, on the dev replay's gates.

    VICAR_DATA_DIR=/tmp/score-data sh bench/score/pin_product.sh 2be538f /tmp/score-product \
        bench.score.cost [--no-similar]

Per gate: `confidence` (features + one prediction) and `observe` (the history's
update), timed over Junio C Hamano's gates with the model as fitted online; per refit:
the fit on the first 1,000, 5,000 and all of his labelled rows. One thread.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace

import numpy as np

from bench.score.run_selector import load
from bench.score.selector import Selector, SelectorParams, artifact_features


def main() -> None:
    d = load(0)["Junio C Hamano"]
    # The replay precomputes each gate's artifact features once; a consult computes them.
    gates = [replace(g, artifact=None) for g in d["gates"]]
    if "--no-similar" in sys.argv:  # the product's consult brings the neighbours: time the rest
        gates = [replace(g, vector=None) for g in gates]
    sel = Selector(SelectorParams(refit_every=10**9))
    confidence, observe = [], []
    fit_at = {1000, 5000, len(gates) - 1}
    fits = {}
    for i, g in enumerate(gates):
        t = time.perf_counter()
        sel.confidence(g)
        confidence.append(time.perf_counter() - t)
        t = time.perf_counter()
        sel.observe(g, d["actual"][i], bool(d["right"][i]))
        observe.append(time.perf_counter() - t)
        if len(sel.labels) in fit_at and len(sel.labels) not in fits:
            t = time.perf_counter()
            sel.fit()
            fits[len(sel.labels)] = time.perf_counter() - t
    c, o = np.array(confidence[1000:]) * 1e3, np.array(observe[1000:]) * 1e3
    # The similar-work lookup alone, at the end of the history (the largest matrix): in
    # the product the consult's memory search (similar_work) finds the neighbours.
    t = time.perf_counter()
    for g in gates[-500:]:
        sel.history.similar(g)
    sim_ms = (time.perf_counter() - t) / 500 * 1e3
    t = time.perf_counter()
    for g in gates[:2000]:
        artifact_features(g)
    art = (time.perf_counter() - t) / 2000 * 1e3
    print("| step | p50 ms | p95 ms | max ms |")
    print("|---|---|---|---|")
    print(
        f"| confidence (features + prediction), gates 1,001-{len(gates)} | {np.median(c):.2f}"
        f" | {np.percentile(c, 95):.2f} | {c.max():.1f} |"
    )
    print(f"| observe | {np.median(o):.3f} | {np.percentile(o, 95):.3f} | {o.max():.1f} |")
    print(f"| of which artifact features (mean) | {art:.2f} | | |")
    print(f"| of which the similar-work lookup over {len(gates):,} vectors (mean, at the end) | {sim_ms:.2f} | | |")
    for n, s in sorted(fits.items()):
        print(f"| refit on {n:,} labelled rows | {s * 1e3:.0f} | | |")


if __name__ == "__main__":
    main()
