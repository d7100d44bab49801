#!/usr/bin/env python3
"""Draws the benchmark's plots from the CSV files pcpu_bench --csv DIR wrote,
or summarises a before/after comparison (run.sh --against).

    python3 bench/plot.py DIR
    python3 bench/plot.py --compare DIR     # DIR/<label>-<i>/ of run.sh --against

Writes into DIR, for each CSV present:
  incr_<index>.png  ns per increment vs threads (log scale), min-max as error
                 bars, one plot per slot index (incr_cpu.csv, incr_mm_cid.csv;
                 incr.csv of older versions gives incr.png)
  getcpu.png     ns per call of each way to learn the CPU number, with slide 21
  dataplane.png  cycles per counter update per pattern and worker count, with
                 the DPDK guide's published figures
  thesis.png     time of the thesis table's runs relative to pcpu
Plots need matplotlib (scripts/install-deps.sh installs it); --compare does not.
"""
import csv
import glob
import os
import statistics
import sys

plt = None


def load_matplotlib():
    global plt, matplotlib
    import matplotlib  # noqa: F401

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot
    import matplotlib.ticker  # noqa: F401

    plt = matplotlib.pyplot


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


def plot_incr(folder, rows, out="incr.png", index=None):
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
    ax.set_title("Cost per increment of one shared counter" +
                 (" (pcpu slot index %s)" % index if index else ""))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", ncol=2)
    fig.tight_layout()
    fig.savefig(os.path.join(folder, out), dpi=100)
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
    names = {"none": "no statistics\n(noise floor)",
             "per_core_16b": "diagnostic: per core\n16 B (pre-v2 pcpu)"}
    ax.set_xticklabels([names.get(v, v.replace("_", " ")) for v in variants],
                       rotation=30, ha="right")
    # symlog: the cheap patterns sit near 0 (the noise floor can be negative),
    # the shared ones in the hundreds or thousands.
    ax.set_yscale("symlog", linthresh=2)
    lowest = min(min(vals.values()) for _, vals, _ in series)
    ax.set_ylim(bottom=min(-1.0, 1.5 * lowest))
    percore = [vals.get("per_core") for _, vals, h in series if h is None]
    percore = [p for p in percore if p is not None]
    if percore:
        ax.axhline(max(percore), color="red", linewidth=0.8, linestyle="--",
                   label="target: <= Per Core (worst worker count)")
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
    if len(sys.argv) == 3 and sys.argv[1] == "--compare":
        compare(sys.argv[2])
        return
    if len(sys.argv) != 2:
        sys.exit("usage: plot.py DIR | plot.py --compare DIR")
    folder = sys.argv[1]
    load_matplotlib()
    drawn = []
    for path in sorted(glob.glob(os.path.join(folder, "incr*.csv"))):
        name = os.path.basename(path)
        if name == "incr.csv":
            index, out = None, "incr.png"
        elif name.endswith(("_rounds.csv", "_ratios.csv", "_paired.csv")):
            continue
        else:
            index = name[len("incr_"):-len(".csv")]
            out = "incr_%s.png" % index
        rows = read_csv(folder, name)
        if rows:
            plot_incr(folder, rows, out, index)
            drawn.append(out)
    for name, fn, out in (("getcpu.csv", plot_getcpu, "getcpu.png"),
                          ("dataplane.csv", plot_dataplane, "dataplane.png"),
                          ("thesis.csv", plot_thesis, "thesis.png")):
        rows = read_csv(folder, name)
        if rows:
            fn(folder, rows)
            drawn.append(out)
    print("plot.py: drew %s in %s" % (", ".join(drawn) if drawn else "nothing", folder))


# ---- before/after summary (run.sh --against) --------------------------------------

def _num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def run_figures(d):
    """Figures of one run folder, old or new CSV layout: {metric: value}."""
    f = {}
    # incr: old layout, incr.csv with pcpu_cpu / pcpu_mmcid rows (one process)
    old = read_csv(d, "incr.csv")
    if old:
        for r in old:
            key = {"pcpu_cpu": "pcpu add, index cpu", "pcpu_mmcid": "pcpu add, index mm_cid",
                   "pcpu_fallback": "pcpu_counter_add_atomic",
                   "percpu_lock_add": "per-CPU slot lock add",
                   "private": "thread-private +="}.get(r["variant"])
            if key:
                f["%s, ns, %s thr" % (key, r["threads"])] = _num(r["ns_per_op_median"])
    for idx in ("cpu", "mm_cid"):
        rows = read_csv(d, "incr_%s.csv" % idx)
        if not rows:
            continue
        for r in rows:
            key = {"pcpu": "pcpu add, index %s" % idx, "ideal_cpu": "ideal rseq add, index cpu",
                   "ideal_mm_cid": "ideal rseq add, index mm_cid"}.get(r["variant"])
            # the index-independent rows: from the first process only
            if key is None and not f.get("_first_index"):
                key = {"pcpu_fallback": "pcpu_counter_add_atomic",
                       "percpu_lock_add": "per-CPU slot lock add",
                       "private": "thread-private +="}.get(r["variant"])
            if key:
                f["%s, ns, %s thr" % (key, r["threads"])] = _num(r["ns_per_op_median"])
        for r in read_csv(d, "incr_%s_ratios.csv" % idx) or []:
            name = {"pcpu_vs_ideal": "pcpu / ideal, index %s" % idx,
                    "pcpu_vs_private": "pcpu / private, index %s" % idx}.get(r["ratio"])
            if name:
                f["%s, %s thr" % (name, r["threads"])] = _num(r["value"])
            elif r["ratio"] == "fallback_vs_lock_add" and not f.get("_first_index"):
                f["add_atomic / lock add, %s thr" % r["threads"]] = _num(r["value"])
        f["_first_index"] = idx
    for r in read_csv(d, "dataplane.csv") or []:
        key = {"pcpu_add_many": "data plane pcpu add_many", "pcpu_add4": "data plane pcpu 4 × add",
               "per_core": "data plane Per Core"}.get(r["variant"])
        if key:
            f["%s, cycles/update, %s w" % (key, r["workers"])] = _num(r["cycles_per_update_median"])
    for r in read_csv(d, "memory.csv") or []:
        if "zone" in r:  # old layout: alloc_in arrays, VmRSS
            if r["threads"] == "2":
                f["B/counter, array of 10^6, 2 writers, %s zone (old method: VmRSS)"
                  % r["zone"]] = _num(r["rss_bytes_per_counter"])
        else:
            f["B/counter, 10^6 × pcpu_counter_alloc(), 2 writers, %s slots, index %s"
              % (r["nslots"], r["index"])] = _num(r["rss_bytes_per_counter"])
            f["B/counter floor, plain 8 B × 2"] = _num(r["floor_bytes_per_counter"])
    for r in read_csv(d, "readside.csv") or []:
        if r["counters"] != "1000000":
            continue
        if r["operation"] == "fetch_array" and r["zone"] in ("mm_cid", "CPU", "cpu"):
            f["snapshot 10^6 fetch_array, ms, %s" % r["zone"].lower()] = _num(r["median"])
        elif r["operation"] == "memory_floor":
            f["snapshot 10^6 memory floor, ms (old: 16 B/slot; new: 8 B/slot)"] = _num(r["median"])
        elif r["operation"] == "fetch_array_vs_floor":
            f["snapshot 10^6 fetch_array / floor"] = _num(r["median"])
    f.pop("_first_index", None)
    return f


def compare(folder):
    runs = {}
    for d in sorted(glob.glob(os.path.join(folder, "*-[0-9]*"))):
        label, _, i = os.path.basename(d).rpartition("-")
        runs.setdefault(label, []).append(run_figures(d))
    labels = sorted(runs, key=lambda lab: (lab != "before", lab == "after", lab))
    metrics = []
    for lab in labels:
        for f in runs[lab]:
            for k in f:
                if k not in metrics:
                    metrics.append(k)
    metrics.sort(key=lambda k: (k.split(",")[0], k))

    def cell(vals):
        vals = [v for v in vals if v is not None]
        if not vals:
            return "—"
        m = statistics.median(vals)
        fmt = "%.3g" if abs(m) < 10 else "%.1f"
        if len(vals) == 1:
            return fmt % m
        return (fmt + " (" + fmt + "–" + fmt + ")") % (m, min(vals), max(vals))

    lines = ["| metric | " + " | ".join("%s (%d runs)" % (lab, len(runs[lab])) for lab in labels) + " |",
             "|---" * (1 + len(labels)) + "|"]
    for k in metrics:
        lines.append("| %s | " % k + " | ".join(cell([f.get(k) for f in runs[lab]]) for lab in labels)
                     + " |")
    out = "\n".join(lines) + "\n"
    with open(os.path.join(folder, "compare.md"), "w") as fh:
        fh.write("Median of the runs' medians (min–max over runs).\n\n" + out)
    sys.stdout.write(out)


if __name__ == "__main__":
    main()
