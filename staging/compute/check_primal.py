"""Parse, type-check and run every staged program with the existing interpreter,
the differentiation operators replaced by the type-only stand-ins of stubs.nabla
(appended at the end, so line numbers are unchanged).

This checks syntax, types and the primal computation; the printed values are
meaningless (the stand-ins return primal values), so they are not compared.
For error cases the stand-ins can only reproduce type errors that come from
the operators' types (not the first-order restriction, nor run-time checks).

    python3 staging/compute/check_primal.py [path/to/nabla]
"""
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
STAGING = HERE.parent
NABLA = sys.argv[1] if len(sys.argv) > 1 else str(STAGING.parent / "target" / "release" / "nabla")
STUBS = (HERE / "stubs.nabla").read_text()


def run(path):
    text = path.read_text()
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / path.name
        p.write_text(text + "\n" + STUBS)
        r = subprocess.run([NABLA, "run", str(p)], capture_output=True, text=True, timeout=600)
    return text, r


def main():
    files = sorted((STAGING / "tests" / "ad").glob("*.nabla")) + sorted((STAGING / "examples").glob("*.nabla"))
    problems = 0
    for f in files:
        text, r = run(f)
        want_err = next((ln.split(" ", 2)[2] for ln in text.splitlines() if ln.startswith("# expect-error:")), None)
        if want_err is None:
            ok = r.returncode == 0
            status = "ok" if ok else "FAIL"
            detail = "" if ok else r.stderr.strip().splitlines()[0] + " " + \
                next((ln for ln in r.stderr.splitlines() if "-->" in ln), "")
        else:
            pos, _, frag = want_err.partition(" ")
            got = next((ln for ln in r.stderr.splitlines() if "-->" in ln or " at " in ln), "")
            msg = r.stderr.strip().splitlines()[0] if r.stderr.strip() else "(no error with the stand-ins)"
            status = "err"
            ok = True
            detail = f"want {pos} '{frag}'; stand-ins: {msg} {got.strip()}"
        problems += not ok
        print(f"{status:4} {f.relative_to(STAGING)} {detail}")
    print(f"{len(files)} programs, {problems} failed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
