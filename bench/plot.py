#!/usr/bin/env python3
"""Draws the benchmark's plots from the CSV files pcpu_bench --csv DIR wrote.

    python3 bench/plot.py DIR

Writes into DIR, for each CSV present:
  incr.png       ns per increment vs threads (log scale), min-max as error bars
  getcpu.png     ns per call of each way to learn the CPU number, with slide 21
  dataplane.png  cycles per counter update per pattern and worker count, with
                 the DPDK guide's published figures
  thesis.png     time of the thesis table's runs relative to pcpu
Needs matplotlib (scripts/install-deps.sh installs it).
"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402


def read_csv(folder, name):
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        return None
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def ordered(rows, key):
    """Distinct values of `key` in the order the CSV lists them."""
    seen = []
    for r in rows:
        if r[key] not in seen:
            seen.append(r[key])
    return seen


def plot_incr(folder, rows):
    fig, ax = plt.subplots(figsize=(9, 6))
    for variant in ordered(rows, "variant"):
        rs = [r for r in rows if r["variant"] == variant]
        x = [int(r["threads"]) for r in rs]
        y = [float(r["ns_per_op_median"]) for r in rs]
        lo = [max(0.0, yi - float(r["ns_per_op_min"])) for yi, r in zip(y, rs)]
        hi = [max(0.0, float(r["ns_per_op_max"]) - yi) for yi, r in zip(y, rs)]
        pcpu = variant.startswith("pcpu")
        ax.errorbar(x, y, yerr=[lo, hi], marker="o" if pcpu else ".", capsize=3,
                    linewidth=2.2 if pcpu else 1.2, label=variant)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    threads = sorted({int(r["threads"]) for r in rows})
    ax.set_xticks(threads)
    ax.set_xticklabels([str(t) for t in threads])
    ax.set_xlabel("threads (not pinned)")
    ax.set_ylabel("CPU ns per increment per thread (median, min-max)")
    ax.set_title("Cost per increment of one shared counter")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", ncol=2)
    fig.tight_layout()
    fig.savefig(os.path.join(folder, "incr.png"), dpi=100)
    plt.close(fig)


def plot_getcpu(folder, rows):
    fig, ax = plt.subplots(figsize=(8, 4))
    names = [r["method"] for r in rows]
    y = list(range(len(rows)))
    ours = [float(r["ns_median"]) for r in rows]
    ax.barh(y, ours, color="tab:blue", label="this machine")
    slide = [(i, float(r["slide21_ns"])) for i, r in enumerate(rows)
             if r["slide21_ns"] not in ("", "nan")]
    if slide:
        ax.scatter([v for _, v in slide], [i for i, _ in slide], marker="D",
                   color="tab:orange", zorder=3, label="slide 21 (E5-2630 v3)")
    ax.set_yticks(y)
    ax.set_yticklabels(names)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("ns per call (log)")
    ax.set_title("Learning the current CPU number")
    ax.grid(True, axis="x", which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(folder, "getcpu.png"), dpi=100)
    plt.close(fig)


def plot_dataplane(folder, rows):
    variants = [v for v in ordered(rows, "variant")]
    workers = ordered(rows, "workers")
    series = [("%s worker%s" % (w, "" if w == "1" else "s"),
               {r["variant"]: float(r["cycles_per_update_median"])
                for r in rows if r["workers"] == w}, None) for w in workers]
    for col, label in (("dpdk_4_workers", "DPDK Xeon, 4 workers"),
                       ("dpdk_20_workers", "DPDK Xeon, 20 workers")):
        vals = {r["variant"]: float(r[col]) for r in rows if r[col] not in ("", "nan")}
        if vals:
            series.append((label, vals, "//"))
    fig, ax = plt.subplots(figsize=(11, 5.5))
    width = 0.8 / len(series)
    for i, (label, vals, hatch) in enumerate(series):
        xs = [j + (i - (len(series) - 1) / 2) * width for j, v in enumerate(variants) if v in vals]
        ys = [vals[v] for v in variants if v in vals]
        ax.bar(xs, ys, width, label=label, hatch=hatch,
               fill=hatch is None, edgecolor=None if hatch is None else "gray")
    ax.set_xticks(range(len(variants)))
    names = {"none": "no statistics\n(noise floor)", "per_core_16b": "diagnostic:\nper core 16 B"}
    ax.set_xticklabels([names.get(v, v.replace("_", " ")) for v in variants],
                       rotation=30, ha="right")
    # symlog: the cheap patterns sit near 0 (the noise floor can be negative),
    # the shared ones in the hundreds or thousands.
    ax.set_yscale("symlog", linthresh=2)
    lowest = min(min(vals.values()) for _, vals, _ in series)
    ax.set_ylim(bottom=min(-1.0, 1.5 * lowest))
    ax.axhline(5, color="red", linewidth=0.8, linestyle="--", label="target: 5 cycles")
    ax.set_ylabel("TSC cycles per counter update (median)")
    ax.set_title("Data-plane simulation: statistics overhead per counter update")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(os.path.join(folder, "dataplane.png"), dpi=100)
    plt.close(fig)


def plot_thesis(folder, rows):
    figs = ordered(rows, "figure")
    fig, axes = plt.subplots(1, len(figs), figsize=(5 * len(figs), 4), squeeze=False)
    for ax, figure in zip(axes[0], figs):
        rs = [r for r in rows if r["figure"] == figure]
        pcpu = next(float(r["time_s_median"]) for r in rs if r["counter"] == "pcpu")
        thesis_pcpu = next(float(r["thesis_time_s"]) for r in rs if r["counter"] == "pcpu")
        names = [r["counter"] for r in rs]
        x = range(len(rs))
        ax.bar([i - 0.2 for i in x], [float(r["time_s_median"]) / pcpu for r in rs], 0.4,
               label="this machine (× pcpu)")
        ax.bar([i + 0.2 for i in x], [float(r["thesis_time_s"]) / thesis_pcpu for r in rs], 0.4,
               fill=False, hatch="//", edgecolor="gray", label="thesis (× counter(9))")
        ax.set_xticks(list(x))
        ax.set_xticklabels(names)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_title("fig. %s analogue: time relative to per-CPU counter" % figure)
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(folder, "thesis.png"), dpi=100)
    plt.close(fig)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: plot.py DIR (the folder given to pcpu_bench --csv)")
    folder = sys.argv[1]
    drawn = []
    for name, fn, out in (("incr.csv", plot_incr, "incr.png"),
                          ("getcpu.csv", plot_getcpu, "getcpu.png"),
                          ("dataplane.csv", plot_dataplane, "dataplane.png"),
                          ("thesis.csv", plot_thesis, "thesis.png")):
        rows = read_csv(folder, name)
        if rows:
            fn(folder, rows)
            drawn.append(out)
    print("plot.py: drew %s in %s" % (", ".join(drawn) if drawn else "nothing", folder))


if __name__ == "__main__":
    main()
