#!/usr/bin/env python3
"""Turn the rows of qemu/bench/perf.sh into Documentation/benchmarks.md,
benchmarks.csv (every row of every round) and benchmarks.svg (bandwidth
against message size, drawn by gnuplot).  Runs inside the build root
(scripts/bench), which installs python3 and gnuplot.

    bench_report.py LOG OUTDIR COMMIT DATE MACHINE
"""
import csv
import statistics
import subprocess
import sys
from collections import defaultdict

IMPLS = ["rxe", "siw", "sr", "sw"]
NAMES = {"rxe": "rxe", "siw": "siw", "sr": "softrnic_roce", "sw": "softrnic_iwarp", "host": "VM"}
LOWER_IS_BETTER = {"lat_median", "lat_p99", "syscalls_per_op", "syscall_ns"}


def rows_of(log):
    """The CSV rows between "== csv" and "== end csv"."""
    lines, on = [], False
    for line in open(log, encoding="utf-8", errors="replace"):
        line = line.rstrip("\n")
        if line == "== csv":
            on = True
        elif line == "== end csv":
            on = False
        elif on:
            lines.append(line)
    return list(csv.DictReader(lines))


def fmt(v):
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.3g}"


def targets(cell):
    """Issue 16's targets, each with the figures it compares and whether
    this run met it (the figure beside rxe's and siw's, met or not)."""
    def med(key, metric, impl):
        return cell(key, metric, impl)[1]

    def verdict(ok):
        if isinstance(ok, str):
            return ok
        return "–" if ok is None else ("met" if ok else "not met")

    def at_least(a, b, factor):
        return None if a is None or b is None else a >= factor * b

    def at_most(a, b, factor):
        return None if a is None or b is None else a <= factor * b

    def show(v, unit):
        return "–" if v is None else f"{fmt(v)} {unit}"

    out = ["## Targets (issues 16 and 17)", "",
           "| target | softrnic_roce | softrnic_iwarp | rxe | siw | roce | iwarp |",
           "|---|---|---|---|---|---|---|"]

    def line(name, key, metric, unit, test):
        sr, sw, rxe, siw = (med(key, metric, i) for i in ("sr", "sw", "rxe", "siw"))
        out.append(f"| {name} | {show(sr, unit)} | {show(sw, unit)} | {show(rxe, unit)} | {show(siw, unit)} "
                   f"| {verdict(test(sr, rxe, siw))} | {verdict(test(sw, rxe, siw))} |")

    w64 = ("write_bw", 65536, 1)
    line("ib_write_bw 64 KiB, 1 QP: at least 2x rxe and 1.5x siw", w64, "bw_mibs", "MiB/s",
         lambda v, rxe, siw: None if v is None else bool(at_least(v, rxe, 2)) and at_least(v, siw, 1.5) is not False)
    mc = med(("calibrate", 0, 0), "memcpy_mibs", "host")
    if mc:
        share = {i: med(w64, "bw_mibs", i) for i in IMPLS}
        out.append(f"| ib_write_bw 64 KiB, 1 QP: at least 50 % of one core's memcpy ({fmt(mc)} MiB/s) | "
                   + " | ".join("–" if share[i] is None else f"{100 * share[i] / mc:.1f} %"
                                for i in ("sr", "sw", "rxe", "siw"))
                   + " | " + " | ".join(verdict(None if share[i] is None else share[i] >= 0.5 * mc)
                                        for i in ("sr", "sw")) + " |")
    for prog in ("send_lat", "write_lat"):
        line(f"ib_{prog} 8 B median: at most 0.5x rxe's and below siw's", (prog, 8, 1), "lat_median", "us",
             lambda v, rxe, siw: None if v is None else bool(at_most(v, rxe, 0.5)) and at_most(v, siw, 1) is not False
             and (siw is None or v < siw))
    line("64 B message rate, 4 QPs: at least 2x rxe", ("msg_rate", 64, 4), "msg_rate", "kpps",
         lambda v, rxe, siw: at_least(v, rxe, 2))
    line("goodput under 1 % loss: at least 3x rxe", ("loss1_write_bw", 65536, 1), "bw_mibs", "MiB/s",
         lambda v, rxe, siw: at_least(v, rxe, 3))
    for n in (4096, 1024, 64):
        key = ("many_qps", 4096, n)
        if any(cell(key, "bw_mibs", i)[0] != "–" for i in IMPLS):
            out.append(f"| {n} QPs carrying traffic at once: no error | "
                       + " | ".join(cell(key, "bw_mibs", i)[0] for i in ("sr", "sw", "rxe", "siw"))
                       + " | " + " | ".join(verdict(None if cell(key, "bw_mibs", i)[0] == "–"
                                                    else cell(key, "bw_mibs", i)[1] is not None
                                                    and "failed" not in cell(key, "bw_mibs", i)[0])
                                            for i in ("sr", "sw")) + " |")
            break
    # Issue 17: a kernel consumer must not be slower on softrnic than on
    # rxe (and, over iWARP, than on siw).
    for name, key in (("NVMe-oF 4 KiB random writes, depth 32", ("nvmeof_randwrite", 4096, 32)),
                      ("NVMe-oF 128 KiB writes, depth 32", ("nvmeof_write", 131072, 32)),
                      ("NFS over RDMA, 32 MiB written", ("nfs_write", 1048576, 1)),
                      ("iSER 4 KiB random writes, depth 32", ("iser_randwrite", 4096, 32))):
        if any(cell(key, "write_mibs", i)[0] != "–" for i in IMPLS):
            sr, sw, rxe, siw = (med(key, "write_mibs", i) for i in ("sr", "sw", "rxe", "siw"))
            out.append(f"| {name}: not slower than rxe (iWARP: than siw) | {show(sr, 'MiB/s')} | {show(sw, 'MiB/s')} "
                       f"| {show(rxe, 'MiB/s')} | {show(siw, 'MiB/s')} | {verdict(at_least(sr, rxe, 1))} "
                       f"| {verdict(at_least(sw, siw, 1))} |")
    # 64 KiB writes keep the engine busy; 64 B ones it may drain between
    # posts (then each post rings, as it must): reported, not judged.
    line("system calls per post and poll while the engine is busy (ib_write_bw 64 KiB): zero",
         ("syscalls_write_bw", 65536, 1), "syscalls_per_op", "calls",
         # (Below zero the two runs' difference measured something else:
         # no verdict from it.)
         lambda v, rxe, siw: None if v is None else "no figure (negative)" if v < 0 else v < 0.01)
    line("system calls per post and poll, ib_write_bw 64 B (for information)", ("syscalls_write_bw", 64, 1),
         "syscalls_per_op", "calls", lambda v, rxe, siw: None)
    out.append("")
    return out


def main():
    log, outdir, commit, date, machine = sys.argv[1:6]
    rows = rows_of(log)
    if not rows:
        sys.exit("bench_report: no rows in " + log)
    with open(f"{outdir}/benchmarks.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)

    values = defaultdict(list)  # (scenario, size, qps, metric, impl) -> values
    failed = defaultdict(int)  # (scenario, size, qps, impl) -> failed rounds
    order, units = [], {}
    for r in rows:
        key = (r["scenario"], int(r["size"]), int(r["qps"]))
        if key not in order:
            order.append(key)
        if r["metric"] == "failed":
            failed[key + (r["impl"],)] += 1
            continue
        values[key + (r["metric"], r["impl"])].append(float(r["value"]))
        units[r["metric"]] = r["unit"]
    rounds = max(int(r["round"]) for r in rows)

    def cell(key, metric, impl):
        v = values.get(key + (metric, impl))
        n_fail = failed.get(key + (impl,), 0)
        if not v:
            return ("failed" if n_fail else "–"), None
        med = statistics.median(v)
        s = f"{fmt(med)} ({fmt(min(v))}–{fmt(max(v))})" if len(v) > 1 else fmt(med)
        if n_fail:
            s += f", {n_fail} failed"
        return s, med

    def ratio(a, b, metric):
        if a is None or b is None or a == 0 or b == 0:
            return "–"
        return f"{(b / a if metric in LOWER_IS_BETTER else a / b):.2f}"

    out = [
        "# Benchmarks",
        "",
        f"`make bench` on {date}, commit {commit}, {machine}; {rounds} round(s), "
        "the implementations alternating within each round in one VM (TCG: only "
        "the ratios mean anything). Each cell: median (min–max) over the rounds. "
        "Ratios are softrnic's figure over the other's, inverted for latencies and "
        "syscall counts, so above 1 always means softrnic is better; softrnic_roce "
        "is compared with rxe, softrnic_iwarp with siw and with rxe.",
        "",
        "Every QP is connected through rdma_cm (perftest -R) between two network "
        "namespaces joined by a veth pair; bandwidth tests run 4 s each (perftest -D 4: the middle 2 s measured), latency "
        "tests 500 iterations. Under 1 % loss the veths take one wire packet per skb (gso_max_segs 1), since netem "
        "drops whole skbs: a GSO packet (a TCP sender's, or softrnic_roce's run of up to 16 packets) would "
        "otherwise be lost as one; pages before 2026-12-01 measured TCP's loss per GSO packet.",
        "",
    ]
    metrics_of = defaultdict(list)
    for k in values:
        key, metric = k[:3], k[3]
        if metric not in metrics_of[key]:
            metrics_of[key].append(metric)
    for k in failed:
        metrics_of[k[:3]]
    for metric in metrics_of[("calibrate", 0, 0)]:
        c, _ = cell(("calibrate", 0, 0), metric, "host")
        out.append(f"- calibration, {metric}: {c} {units.get(metric, '')}")
    out.append("")
    out += targets(cell)
    out.append("")
    out.append("## Every figure")
    out.append("")
    out.append("| scenario | size | QPs | figure | rxe | siw | softrnic_roce | softrnic_iwarp "
               "| roce/rxe | roce/siw | iwarp/siw | iwarp/rxe |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for key in order:
        scen, size, qps = key
        for metric in metrics_of[key] or ["failed"]:
            cells = {i: cell(key, metric, i) for i in IMPLS}
            if key[0] == "calibrate":
                continue
            out.append(
                f"| {scen} | {size} | {qps} | {metric} ({units.get(metric, '')}) | "
                + " | ".join(cells[i][0] for i in IMPLS)
                + f" | {ratio(cells['sr'][1], cells['rxe'][1], metric)}"
                + f" | {ratio(cells['sr'][1], cells['siw'][1], metric)}"
                + f" | {ratio(cells['sw'][1], cells['siw'][1], metric)}"
                + f" | {ratio(cells['sw'][1], cells['rxe'][1], metric)} |"
            )
    # softrnic's single-QP bandwidth as a share of one core's memcpy.
    mc = values.get(("calibrate", 0, 0, "memcpy_mibs", "host"))
    if mc:
        memcpy = statistics.median(mc)
        out += ["", f"One core's memcpy in the VM: {fmt(memcpy)} MiB/s. ib_write_bw 64 KiB, 1 QP, as a share of it:"]
        for i in IMPLS:
            v = values.get(("write_bw", 65536, 1, "bw_mibs", i))
            if v:
                out.append(f"- {NAMES[i]}: {100 * statistics.median(v) / memcpy:.1f} %")
    out += ["", "Plot: [benchmarks.svg](benchmarks.svg) (ib_write_bw, 1 QP, MiB/s against message size). "
            "Raw rows: [benchmarks.csv](benchmarks.csv).", ""]
    with open(f"{outdir}/benchmarks.md", "w") as f:
        f.write("\n".join(out))

    # The plot: one line per implementation, write_bw 1 QP.
    data = f"{outdir}/.bench-plot.dat"
    with open(data, "w") as f:
        for i in IMPLS:
            f.write(f'"{NAMES[i]}"\n')
            for key in order:
                if key[0] == "write_bw" and key[2] == 1:
                    v = values.get(key + ("bw_mibs", i))
                    if v:
                        f.write(f"{key[1]} {statistics.median(v)}\n")
            f.write("\n\n")
    script = f"""
set terminal svg size 800,500 dynamic
set output '{outdir}/benchmarks.svg'
set title 'ib_write_bw, 1 QP ({date}, {commit})'
set logscale x 2
set xlabel 'message size (bytes)'
set ylabel 'MiB/s'
set key left top
plot for [i=0:{len(IMPLS) - 1}] '{data}' index i using 1:2 with linespoints title columnheader(1)
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
    subprocess.run(["rm", "-f", data], check=True)


main()
