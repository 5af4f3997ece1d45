#!/usr/bin/python3
"""Draws the scaling report written by `seqattn report`.

usage: plot_scaling.py scaling.json scaling.png

Log-log median time against S, one line per (variant, threads), with each variant's
crossover against dense (from scaling.json) marked on its line. Uses Debian's
python3-matplotlib (run it with /usr/bin/python3).
"""
import json
import math
import sys

import matplotlib

matplotlib.use("Agg")  # no display: write the file only
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {
    "dense": "tab:red",
    "sliding-window": "tab:blue",
    "linear": "tab:green",
    "linformer": "tab:purple",
    "auto": "tab:gray",
}


def series(points):
    """{(variant, threads): ([S], [ms])} over measured points, in S order."""
    lines = {}
    for p in points:
        if p.get("status") != "measured":
            continue
        xs, ys = lines.setdefault((p["variant"], p["threads"]), ([], []))
        xs.append(p["seq"])
        ys.append(p["median_ms"])
    for xs, ys in lines.values():
        order = sorted(range(len(xs)), key=xs.__getitem__)
        xs[:] = [xs[i] for i in order]
        ys[:] = [ys[i] for i in order]
    return lines


def interpolate_loglog(xs, ys, x):
    """The line's value at x, interpolated in log-log space (None outside the range)."""
    for (x0, y0), (x1, y1) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
        if x0 <= x <= x1:
            t = (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
            return math.exp(math.log(y0) + t * (math.log(y1) - math.log(y0)))
    return None


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        report = json.load(f)
    meta = report["meta"]
    fits = {(f["variant"], f["threads"]): f["label"] for f in report.get("fits", [])}
    lines = series(report["points"])
    thread_counts = sorted({t for _, t in lines})
    styles = ["-", "--", ":", "-."]

    fig, ax = plt.subplots(figsize=(9, 6), dpi=110)
    for (variant, threads), (xs, ys) in sorted(lines.items()):
        style = styles[thread_counts.index(threads) % len(styles)]
        label = f"{variant}, {threads} thr, {fits.get((variant, threads), '')}"
        ax.plot(xs, ys, style, marker="o", markersize=3, color=COLORS.get(variant, "black"),
                label=label)
    for x in report.get("crossovers", []):
        key = (x["variant"], x["threads"])
        if x.get("seq") is None or key not in lines or not x["note"].startswith("interpolated"):
            continue
        y = interpolate_loglog(*lines[key], x["seq"])
        if y is None:
            continue
        ax.plot([x["seq"]], [y], marker="x", markersize=10, color=COLORS.get(x["variant"], "black"))
        ax.annotate(f"{x['seq']:.0f}", (x["seq"], y), textcoords="offset points", xytext=(4, -12),
                    fontsize=7)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length S")
    ax.set_ylabel("median time per call (ms)")
    ax.set_title(f"seqattn scaling: B={meta['batch']}, H={meta['heads']}, D={meta['dim']}, "
                 f"{meta['simd_target']} (x = crossover vs dense)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(argv[2], format="png")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
