#!/usr/bin/python3
"""Draws the scaling report written by `seqattn report`.

usage: plot_scaling.py scaling.json scaling.png

Log-log median time against S, one line per (variant, threads), with each variant's
crossover against dense (from scaling.json) marked on its line. When scaling.json has a
"decode" section, a second panel draws decode K+V GB/s against the KV-cache length S_k per
thread count, with the measured read bandwidths as horizontal lines. Uses Debian's
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


THREAD_COLORS = ["tab:blue", "tab:orange", "tab:green", "tab:red"]
BANDWIDTH_STYLES = {"cache": ":", "dram": "--"}
DTYPE_MARKERS = {"f32": "o", "bf16": "s", "f16": "^"}


def plot_decode(ax, decode):
    """K+V GB/s against S_k, one line per thread count and cache dtype, and the read
    bandwidths as limits."""
    threads = sorted({p["threads"] for p in decode["points"]} |
                     {b["threads"] for b in decode.get("bandwidth", [])})
    for t in threads:
        color = THREAD_COLORS[threads.index(t) % len(THREAD_COLORS)]
        for dtype, marker in DTYPE_MARKERS.items():
            pts = sorted((p["seq_k"], p["kv_gbps"]) for p in decode["points"]
                         if p["threads"] == t and p.get("kv_dtype", "f32") == dtype
                         and p.get("kv_gbps") is not None)
            if pts:
                ax.plot([x for x, _ in pts], [y for _, y in pts],
                        "-" if dtype == "f32" else "-.", marker=marker, color=color,
                        label=f"decode K+V ({dtype} cache), {t} thr")
        for b in decode.get("bandwidth", []):
            if b["threads"] != t or b.get("gbps") is None:
                continue
            ax.axhline(b["gbps"], color=color, linestyle=BANDWIDTH_STYLES.get(b["kind"], "-."),
                       linewidth=1,
                       label=f"read bandwidth {b['kind']} ({b['mb']:.0f} MiB), {t} thr: "
                             f"{b['gbps']:.1f} GB/s")
    ax.axvspan(decode.get("dram_above_mb", 64) * 1048576
               / (4 * decode["batch"] * decode["kv_heads"] * (decode["dim"] + decode["dim_v"])),
               max(p["seq_k"] for p in decode["points"]) * 1.5, color="gray", alpha=0.08)
    ax.set_xscale("log", base=2)
    tops = [p["kv_gbps"] for p in decode["points"] if p.get("kv_gbps") is not None]
    tops += [b["gbps"] for b in decode.get("bandwidth", []) if b.get("gbps") is not None]
    ax.set_ylim(0, 1.45 * max(tops))  # room for the legend above the lines
    ax.set_xlabel("KV-cache length S_k (shaded: K+V larger than "
                  f"{decode.get('dram_above_mb', 64):.0f} MiB, compared with DRAM)")
    ax.set_ylabel("K+V read rate (GB/s)")
    ax.set_title(f"decode, S_q=1: B={decode['batch']}, H={decode['heads']}, "
                 f"H_kv={decode['kv_heads']}, D=D_v={decode['dim']}, causal dense")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper right")


FAMILY_STYLES = {"uniform": ("-", "o"), "decaying": ("--", "s"), "anchors": (":", "^"),
                 "lowrank": ("-.", "d")}


def plot_errors(ax, points):
    """Error against exact dense per S: one color per variant, one line style per input family."""
    lines = {}
    for p in points:
        if p.get("relative_error") is None:
            continue
        lines.setdefault((p["variant"], p["family"]), []).append((p["seq"], p["relative_error"]))
    for (variant, family), pts in sorted(lines.items()):
        pts.sort()
        style, marker = FAMILY_STYLES.get(family, ("-", "o"))
        # Exact points (error 0) sit on the floor of the log axis.
        ax.plot([x for x, _ in pts], [max(y, 1e-8) for _, y in pts], style, marker=marker,
                markersize=3, color=COLORS.get(variant, "black"), label=f"{variant}, {family}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length S")
    ax.set_ylabel("max|out - dense| / max|dense| (1e-8 = exact)")
    ax.set_title("error vs exact dense by input family")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6, loc="lower right", ncol=2)


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

    decode = report.get("decode")
    errors = report.get("accuracy_by_family", [])
    panels = ["time"] + (["errors"] if errors else []) + \
        (["decode"] if decode and decode.get("points") else [])
    heights = {"time": 6, "errors": 5, "decode": 5}
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, sum(heights[p] for p in panels) + 0.5),
                             dpi=110, gridspec_kw={"height_ratios": [heights[p] for p in panels]},
                             squeeze=False)
    by_panel = {name: axes[i][0] for i, name in enumerate(panels)}
    ax, ax_decode = by_panel["time"], by_panel.get("decode")
    if errors:
        plot_errors(by_panel["errors"], errors)
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
    if ax_decode is not None:
        plot_decode(ax_decode, decode)
    fig.tight_layout()
    fig.savefig(argv[2], format="png")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
