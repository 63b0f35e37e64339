"""Runs one Python implementation over the workloads: `check` compares each with the
reference `nabla-bench check` wrote (the oracle, or the hand-written derivative where
there is none) and exits 1 on any disagreement; `time` measures primal and
derivative. One JSON object per line on stdout, as nabla-bench prints.

    python run.py check|time --impl jax|autograd|torch --refs DIR --workload ID...
"""

import argparse
import importlib
import os
import signal
import sys
import time
import traceback

import common


class Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise Timeout()


def main():
    signal.signal(signal.SIGALRM, _alarm)
    ap = argparse.ArgumentParser()
    ap.add_argument("command", choices=["check", "time"])
    ap.add_argument("--impl", required=True)
    ap.add_argument("--refs", required=True)
    ap.add_argument("--workload", action="append", required=True)
    ap.add_argument("--quick", action="store_true", help="time: 3 batches instead of 5")
    ap.add_argument("--limit", type=float, default=0.0,
                    help="check: seconds one evaluation may take before it is reported as a timeout")
    ap.add_argument("--reuse", action="append", default=[],
                    help="time: WORKLOAD=SECONDS, a derivative too slow to repeat; its check run is the measurement")
    args = ap.parse_args()
    reuse = {k: float(v) for k, v in (r.split("=") for r in args.reuse)}
    module = importlib.import_module("impl_" + args.impl)
    ok = True
    for workload in args.workload:
        print(f"{args.command} {workload} {module.NAME}", file=sys.stderr)
        base = {"kind": args.command, "workload": workload, "impl": module.NAME}
        try:
            primal, derivative = module.prepare(workload)
        except common.Cannot as why:
            common.emit({**base, "status": "cannot", "why": str(why)})
            continue
        if args.command == "check":
            try:
                start = time.perf_counter()
                if args.limit:
                    signal.setitimer(signal.ITIMER_REAL, args.limit)
                try:
                    values, deriv = derivative()
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                err = common.disagreement(values, deriv, common.load_reference(args.refs, workload))
                good = err < common.TOLERANCE
                ok &= good
                meta = common.load_reference(args.refs, workload)[0]
                common.emit({**base, "status": "ok" if good else "FAIL", "max_error": err,
                             "reference": meta["source"], "seconds": time.perf_counter() - start})
            except Timeout:
                common.emit({**base, "status": "timeout", "limit_s": args.limit,
                             "why": f"one evaluation takes over {args.limit:g} s (not verified, not timed)"})
                rest = args.workload[args.workload.index(workload) + 1:]
                if rest:
                    # The alarm can land inside a framework's transform (torch.func
                    # keeps a global stack of levels), whose state the next workload
                    # would inherit: go on in a fresh interpreter.
                    sys.stdout.flush()
                    sys.stderr.flush()
                    if not ok:
                        os.environ["NABLA_BENCH_FAILED"] = "1"
                    os.execv(sys.executable, [sys.executable, __file__] + without_workloads(sys.argv[1:]) +
                             [a for w in rest for a in ("--workload", w)])
            except Exception:  # a crash is a failed check, not a skipped one
                traceback.print_exc()
                ok = False
                common.emit({**base, "status": "FAIL", "why": "raised an exception"})
        elif workload in reuse:
            # Too slow to repeat: the check run was one call, and is the measurement.
            p = common.measure(primal, args.quick) if primal is not None else None
            common.emit({**base, "status": "ok", "primal_s": p[0] if p else None, "derivative_s": reuse[workload],
                         "primal_reps": p[1] if p else None, "derivative_reps": 1, "batches": 1,
                         "compile_s": None, "note": "single run (the check)"})
        else:
            # First calls include tracing/JIT compilation: reported separately.
            start = time.perf_counter()
            if primal is not None:
                primal()
            first_primal = time.perf_counter() - start
            start = time.perf_counter()
            derivative()
            first_derivative = time.perf_counter() - start
            p = common.measure(primal, args.quick) if primal is not None else None
            d = common.measure(derivative, args.quick)
            compile_s = max(0.0, first_derivative - d[0]) + (max(0.0, first_primal - p[0]) if p else 0.0)
            common.emit({**base, "status": "ok", "primal_s": p[0] if p else None, "derivative_s": d[0],
                         "primal_reps": p[1] if p else None, "derivative_reps": d[1], "batches": d[2],
                         "compile_s": compile_s})
    ok &= os.environ.get("NABLA_BENCH_FAILED") != "1"
    sys.exit(0 if ok else 1)


def without_workloads(argv):
    """The command-line arguments without the `--workload ID` pairs."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--workload":
            skip = True
        elif not a.startswith("--workload="):
            out.append(a)
    return out


if __name__ == "__main__":
    main()
