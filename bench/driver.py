"""bench/run's driver (runs inside bench/.venv): correctness gate, then timing, then
bench/results.md and bench/results.png. See bench/README.md."""

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PYTHON_IMPLS = ["jax", "autograd", "torch"]
ORDER = ["nabla", "nabla-fwd", "nabla-lang", "nabla-compiled", "manual", "jax", "autograd", "torch"]
# On the nested benchmarks this implementation's "primal" is the hand-derived
# program (no AD), shown beside its derivative time.
HAND_DERIVED_PRIMAL = ("nabla-compiled",)
FAMILIES = ["gmm", "ba", "lstm", "saddle", "particle"]
TITLES = {"gmm": "GMM objective + gradient", "ba": "BA residuals + sparse Jacobian",
          "lstm": "LSTM loss + gradient", "saddle": "Nested: saddle", "particle": "Nested: particle"}
ABOUT = {
    "jax": "JAX on CPU, `jit`, float64 (nested: `lax.while_loop`; forward through it, reverse cannot)",
    "autograd": "HIPS autograd, dynamic tape over NumPy (nested: Python loops, `grad`/`make_jvp`)",
    "torch": "PyTorch on CPU, eager, float64, one thread (nested: Python loops under `torch.func`)",
}
# A derivative whose checked evaluation took longer than this is not repeated for
# timing: the check run (one call) is its measurement.
SLOW_S = 3.0
# The systems whose first call is a steady call (no tracing/compilation to exclude).
NO_JIT = ("autograd", "torch")

START = time.time()


def progress(msg):
    print(f"[bench {time.time() - START:6.1f}s] {msg}", file=sys.stderr, flush=True)


def stream(cmd, log):
    """Runs cmd, yielding its JSON-lines stdout; its stderr goes to the log file."""
    with open(log, "a") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT)
        for line in proc.stdout:
            line = line.strip()
            if line.startswith("{"):
                yield json.loads(line)
        proc.wait()
    stream.returncode = proc.returncode


def describe(rec):
    s = rec["status"]
    if s in ("ok", "FAIL") and "max_error" in rec:
        return f"{s} (max error {rec['max_error']:.1e} vs {rec['reference']}, {rec.get('seconds', 0):.2f} s)"
    if s == "ok" and rec.get("derivative_s") is not None:
        p = rec.get("primal_s")
        return f"derivative {fmt_time(rec['derivative_s'])}" + (f", primal {fmt_time(p)}" if p else "")
    if s == "ok" and rec.get("primal_s") is not None:
        return f"primal {fmt_time(rec['primal_s'])} (no derivative)"
    return f"{s}: {rec.get('why', '')}"


def fmt_time(t):
    if t is None:
        return "—"
    if t < 1e-3:
        return f"{t * 1e6:.1f} µs"
    if t < 1:
        return f"{t * 1e3:.2f} ms"
    return f"{t:.2f} s"


def machine(args, torch_status):
    def cmd(c):
        try:
            return subprocess.run(c, capture_output=True, text=True, cwd=ROOT).stdout.strip()
        except OSError:
            return "?"
    cpu = "?"
    for line in cmd(["lscpu"]).splitlines():
        if line.startswith("Model name"):
            cpu = line.split(":", 1)[1].strip()
    mem = "?"
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 2**20:.0f} GiB"
    osname = platform.platform()
    if os.path.exists("/etc/os-release"):
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    osname = line.split("=", 1)[1].strip().strip('"')
    versions = {}
    for mod in ("jax", "autograd", "numpy", "torch", "matplotlib"):
        try:
            from importlib.metadata import version
            versions[mod] = version(mod)
        except Exception:
            versions[mod] = "not installed"
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu, "cores": os.cpu_count(), "memory": mem, "os": osname,
        "rustc": cmd(["rustc", "-V"]), "python": platform.python_version(), "versions": versions,
        "commit": cmd(["git", "rev-parse", "--short", "HEAD"]),
        "mode": "--quick" if args.quick else "full", "torch": torch_status,
        "load": open("/proc/loadavg").read().split()[0],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--refs", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--out", default=HERE)
    ap.add_argument("--render", action="store_true",
                    help="only rewrite results.md and results.png from results.json")
    args = ap.parse_args()
    if args.render:
        return render(args)
    quick = ["--quick"] if args.quick else []
    logdir = os.path.join(os.path.dirname(args.refs), "bench-logs")
    os.makedirs(logdir, exist_ok=True)
    log = os.path.join(logdir, "run.log")
    open(log, "w").close()
    progress(f"{'quick' if args.quick else 'full'} run; child output in {log}")

    workloads = [r for r in stream([args.bin, "list"] + quick, log) if r["kind"] == "workload"]
    rust_impls = [r for r in stream([args.bin, "list"], log) if r["kind"] == "implementation"]
    checked_ids = [w["id"] for w in workloads if w["oracle"] or w["timed"]]
    timed_ids = [w["id"] for w in workloads if w["timed"]]

    torch_status_file = os.path.join(HERE, ".venv", ".torch-status")
    torch_status = "ok"
    try:
        import torch  # noqa: F401
    except Exception:
        torch_status = open(torch_status_file).read().strip() if os.path.exists(torch_status_file) else "not installed"
    if args.no_torch:
        torch_status = "not installed (--no-torch)"

    checks, times = {}, {}

    # 1. Correctness gate: every implementation, before anything is timed.
    progress("correctness gate: Rust implementations")
    for r in stream([args.bin, "check", "--refs", args.refs] + quick, log):
        if not applicable(r):
            continue
        checks[(r["workload"], r["impl"])] = r
        progress(f"  check {r['workload']:<14} {r['impl']:<10} {describe(r)}")
    rust_check_rc = stream.returncode
    limit = 10.0 if args.quick else 20.0
    for imp in PYTHON_IMPLS:
        if imp == "torch" and torch_status != "ok":
            for w in checked_ids:
                checks[(w, imp)] = {"status": "unavailable", "why": f"PyTorch {torch_status}"}
            continue
        ids = checked_ids
        if args.quick and imp in ("autograd", "torch"):
            # One nested evaluation takes 10 s to minutes on a dynamic tape in Python.
            ids = [w for w in checked_ids if not w.startswith(("saddle", "particle"))]
            for w in checked_ids:
                if w not in ids:
                    checks[(w, imp)] = {"status": "not run", "why": "not run with --quick (one evaluation takes over 10 s; see the full run)"}
        progress(f"correctness gate: {imp}")
        cmd = [sys.executable, os.path.join(HERE, "python", "run.py"), "check", "--impl", imp,
               "--refs", args.refs, "--limit", str(limit)] + sum((["--workload", w] for w in ids), [])
        for r in stream(cmd, log):
            checks[(r["workload"], imp)] = r
            progress(f"  check {r['workload']:<14} {imp:<10} {describe(r)}")
        if stream.returncode not in (0, 1):
            progress(f"  {imp} crashed (exit {stream.returncode}); see {log}")
            for w in ids:
                checks.setdefault((w, imp), {"status": "FAIL", "why": "runner crashed"})
    failures = [(w, i, r) for (w, i), r in checks.items() if r["status"] == "FAIL"]
    if failures or rust_check_rc not in (0, None):
        progress("CORRECTNESS GATE FAILED — nothing timed:")
        for w, i, r in failures:
            progress(f"  {w} / {i}: {describe(r)}")
        sys.exit(1)
    progress("correctness gate passed")

    # 2. Timing, one implementation at a time, one thread each.
    progress("timing: Rust implementations")
    for r in stream([args.bin, "time"] + quick, log):
        if not applicable(r):
            continue
        times[(r["workload"], r["impl"])] = r
        progress(f"  time  {r['workload']:<14} {r['impl']:<10} {describe(r)}")
    for imp in PYTHON_IMPLS:
        ok = [w for w in timed_ids if checks.get((w, imp), {}).get("status") == "ok"]
        if not ok:
            continue
        # JAX's checked call includes its compilation, so it is always timed afresh.
        reuse = [f"{w}={checks[(w, imp)]['seconds']}" for w in ok
                 if imp in NO_JIT and checks[(w, imp)]["seconds"] > SLOW_S]
        progress(f"timing: {imp}")
        cmd = [sys.executable, os.path.join(HERE, "python", "run.py"), "time", "--impl", imp,
               "--refs", args.refs] + quick + sum((["--workload", w] for w in ok), []) + sum((["--reuse", r] for r in reuse), [])
        for r in stream(cmd, log):
            times[(r["workload"], imp)] = r
            progress(f"  time  {r['workload']:<14} {imp:<10} {describe(r)}")

    info = machine(args, torch_status)
    info["elapsed_s"] = time.time() - START
    raw = {"machine": info, "checks": [dict(r, workload=w, impl=i) for (w, i), r in checks.items()],
           "times": [dict(r, workload=w, impl=i) for (w, i), r in times.items()]}
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(raw, f, indent=1)
    write_markdown(args, info, rust_impls, workloads, checks, times)
    plot(args, info, workloads, checks, times)
    progress(f"wrote results.md, results.png, results.json in {args.out} in {time.time() - START:.0f} s")


def render(args):
    with open(os.path.join(args.out, "results.json")) as f:
        raw = json.load(f)
    info = raw["machine"]
    args.quick = info["mode"] == "--quick"
    log = os.devnull
    quick = ["--quick"] if args.quick else []
    workloads = [r for r in stream([args.bin, "list"] + quick, log) if r["kind"] == "workload"]
    rust_impls = [r for r in stream([args.bin, "list"], log) if r["kind"] == "implementation"]
    checks = {(r["workload"], r["impl"]): r for r in raw["checks"]}
    times = {(r["workload"], r["impl"]): r for r in raw["times"]}
    write_markdown(args, info, rust_impls, workloads, checks, times)
    plot(args, info, workloads, checks, times)


def cell_status(check, timing):
    """The text of a row that has no time: why not."""
    if timing and timing.get("status") == "ok":
        return None
    for r in (timing, check):
        if r and r.get("status") not in (None, "ok"):
            why = r.get("why", r["status"])
            return why
    return "—"


def family(wid):
    return "ba" if wid.startswith("ba") else wid.split("_")[0]


def applicable(rec):
    """False for registry combinations that do not exist (forward-mode nabla is only
    registered for BA): left out of tables and plots, unlike a real "cannot"."""
    return not (rec and rec.get("status") == "cannot" and rec.get("why", "").startswith("not applicable"))


def write_markdown(args, info, rust_impls, workloads, checks, times):
    lines = [
        "# nabla benchmark results", "",
        f"Run: `bench/run{' --quick' if args.quick else ''}` on {info['date']}, commit {info['commit']}, "
        f"{info['elapsed_s'] / 60:.1f} minutes in all."
        + (f" Load average at the end: {info['load']} (the machine's 2 cores are shared with other work, "
           "so times can vary by tens of percent between runs)." if info.get("load") else ""), "",
        f"Machine: {info['cpu']}, {info['cores']} cores (shared; every implementation runs on one thread), "
        f"{info['memory']} RAM, {info['os']}; {info['rustc']}; Python {info['python']} with "
        + ", ".join(f"{k} {v}" for k, v in info["versions"].items()) + ".", "",
        "Method (shared/BENCHMARKS.md): every implementation is first checked against the oracle "
        "(oracle.json / the expected values of BENCHMARKS.md; on inputs without an oracle, against the "
        "hand-written derivative, itself checked against the oracle) to |x−y|/max(1,|x|+|y|) < 1e-8 "
        "(nested: |x−y|/|y| < 1e-8); any disagreement fails the run before anything is timed. Then each is "
        "timed in its own process: calls are repeated until a batch takes ≥ 0.2 s and the minimum over 5 "
        "batches is kept (with --quick, 2; 3 batches when a call takes over 1 s; a single call when it takes over "
        f"{SLOW_S:g} s — in autograd and PyTorch the checked one). JIT/compile time is reported separately and not included "
        "(for nabla-lang: parsing and type-checking the program, then compiling it to closures; for nabla-compiled: "
        "parsing and type-checking, then compiling to native code; each the minimum over repeated runs).", "",
        "*nabla-compiled* is the same .nabla programs as nabla-lang compiled to native code, derivatives "
        "included (issue 14: every operator and nesting in native code). On the nested benchmarks its row also "
        "gives, in brackets, the time of the hand-derived program compiled (`saddle_manual`/`particle_manual` in "
        "bench/nabla/nested.nabla: manual's algorithm, no AD).", "",
        "Columns: *primal* = the objective alone on plain floats; *derivative* = objective and gradient "
        "(BA: residuals and the full sparse Jacobian in CSR form); *ratio* = derivative / primal; *vs fastest* = "
        "derivative time / the fastest derivative time for that workload. The nested benchmarks are one "
        "computation (an optimisation whose gradients differentiate through another optimisation or a "
        "simulation), so they have a single time. For saddle, the hand-written version uses that the inner "
        "optimum does not depend on a (∇_b f = −2b), so d/da max_b f = 2a in closed form: it does much less work than "
        "any AD variant; for particle it carries d/dw through the simulation by hand, like forward-over-forward.", "",
        "Not every cell has a time, and none is left out silently: *cannot* = the system cannot express it (JAX "
        "cannot reverse-differentiate `lax.while_loop`); *cannot (too slow)* = measured beforehand to be too slow "
        "for the run's budget (the nabla-lang interpreter on the largest GMM; the cell gives the measurement); "
        "*pending* = not implemented yet; *timed out* = one "
        "evaluation did not finish within the limit (a lower bound, neither verified nor timed); *not run with "
        "--quick* = too slow for the quick budget, see a full run.", "",
        "Implementations:", "",
    ]
    about = {r["name"]: r["about"] for r in rust_impls}
    about.update(ABOUT)
    for name in ORDER:
        lines.append(f"- **{name}**: {about.get(name, '')}")
    if info["torch"] != "ok":
        lines.append(f"- PyTorch: {info['torch']}")
    lines.append("")
    for fam in FAMILIES:
        ids = [w["id"] for w in workloads if w["timed"] and family(w["id"]) == fam]
        if not ids:
            continue
        lines += [f"## {TITLES[fam]}", ""]
        nested = fam in ("saddle", "particle")
        for wid in ids:
            rows = [(i, times.get((wid, i)), checks.get((wid, i))) for i in ORDER
                    if ((wid, i) in times or (wid, i) in checks)
                    and applicable(times.get((wid, i))) and applicable(checks.get((wid, i)))]
            ok_times = [t["derivative_s"] for _, t, _ in rows
                        if t and t.get("status") == "ok" and t.get("derivative_s") is not None]
            fastest = min(ok_times) if ok_times else None
            lines += [f"### {wid}", ""]
            if nested:
                lines += ["| implementation | time | vs fastest | compile/JIT | check |", "|---|---:|---:|---:|---|"]
            else:
                lines += ["| implementation | primal | derivative | ratio | vs fastest | compile/JIT | check |",
                          "|---|---:|---:|---:|---:|---:|---|"]
            for imp, t, c in rows:
                chk = f"{c['max_error']:.0e} vs {c['reference']}" if c and "max_error" in c else ""
                if imp == "manual" and c and c.get("reference") == "manual":
                    chk = "is the reference (no oracle for this input)"
                missing = cell_status(c, t)
                if missing is not None:
                    blank = "| — " * (2 if nested else 4)
                    lines.append(f"| {imp} | {missing} {blank}| {chk} |")
                    continue
                d, p = t.get("derivative_s"), t.get("primal_s")
                note = f" ({t['note']})" if t.get("note") else ""
                rel = f"{d / fastest:.1f}×" if d is not None and fastest else "—"
                comp = fmt_time(t["compile_s"]) if t.get("compile_s") else "—"
                if "parse_check_s" in t:
                    comp = f"{fmt_time(t['parse_check_s'])} parse+check, {fmt_time(t['lower_s'])} compile"
                if nested and imp in HAND_DERIVED_PRIMAL and p:
                    note += f" (hand-derived program: {fmt_time(p)})"
                if nested:
                    lines.append(f"| {imp} | {fmt_time(d)}{note} | {rel} | {comp} | {chk} |")
                else:
                    ratio = f"{d / p:.1f}" if p and d is not None else "—"
                    lines.append(f"| {imp} | {fmt_time(p)} | {fmt_time(d)}{note} | {ratio} | {rel} | {comp} | {chk} |")
            lines.append("")
    lines += ["![results](results.png)", ""]
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write("\n".join(lines))


def plot(args, info, workloads, checks, times):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fams = [f for f in FAMILIES if any(w["timed"] and family(w["id"]) == f for w in workloads)]
    fig, axes = plt.subplots(1, len(fams), figsize=(4.2 * len(fams), 4.8))
    colors = dict(zip(ORDER, plt.get_cmap("tab10").colors))
    for ax, fam in zip(axes, fams):
        ids = [w["id"] for w in workloads if w["timed"] and family(w["id"]) == fam]
        impls = [i for i in ORDER if any(((w, i) in times or (w, i) in checks)
                                         and applicable(times.get((w, i))) and applicable(checks.get((w, i))) for w in ids)]
        width = 0.8 / max(1, len(impls))
        for j, imp in enumerate(impls):
            for k, wid in enumerate(ids):
                x = k + (j - (len(impls) - 1) / 2) * width
                t = times.get((wid, imp))
                c = checks.get((wid, imp), {})
                if t and t.get("status") == "ok" and t.get("derivative_s") is not None:
                    ax.bar(x, t["derivative_s"], width, color=colors[imp], label=imp if k == 0 else None)
                elif c.get("status") == "timeout":
                    ax.bar(x, c["limit_s"], width, color=colors[imp], alpha=0.35, hatch="//",
                           label=imp if k == 0 else None)
                    ax.text(x, c["limit_s"], ">", ha="center", va="bottom", fontsize=8)
                else:
                    ax.text(x, 0, "×", ha="center", va="bottom", fontsize=9, color=colors[imp],
                            transform=ax.get_xaxis_transform())
        ax.set_yscale("log")
        ax.set_xticks(range(len(ids)))
        ax.set_xticklabels([w.split("_", 1)[-1] for w in ids], rotation=30, fontsize=8)
        ax.set_title(TITLES[fam], fontsize=10)
        ax.grid(axis="y", which="both", alpha=0.3)
        if fam == fams[0]:
            ax.set_ylabel("derivative time (s, log)")
        ax.legend(fontsize=7)
    fig.suptitle(f"nabla benchmarks ({info['mode']}, {info['date']}, {info['cpu']}, one thread) — "
                 "hatched: timed out (lower bound); ×: cannot / pending / not run", fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "results.png"), dpi=110)


if __name__ == "__main__":
    main()
