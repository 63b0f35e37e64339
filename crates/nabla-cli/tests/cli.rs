//! End-to-end tests of the `nabla` binary: examples, output format, exit
//! codes, the REPL, and hostile input.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn nabla() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nabla"))
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run_with(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut cmd = nabla();
    cmd.args(args)
        .current_dir(repo())
        .env("HOME", std::env::temp_dir());
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn nabla");
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input)
            .expect("write stdin");
    }
    child.wait_with_output().expect("wait")
}

fn run(args: &[&str]) -> Output {
    run_with(args, None)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Writes `contents` to a fresh temporary file and returns its path.
fn temp_file(name: &str, contents: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nabla-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let p = dir.join(name);
    std::fs::write(&p, contents).expect("write temp file");
    p
}

fn assert_program_error(o: &Output, location: &str, fragment: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(1), "stderr: {err}");
    assert!(err.starts_with("error: "), "stderr: {err}");
    assert!(err.contains(fragment), "stderr lacks {fragment:?}: {err}");
    assert!(err.contains(location), "stderr lacks {location:?}: {err}");
    assert!(err.contains('^'), "no caret: {err}");
}

#[test]
fn examples_print_their_expected_output() {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(repo().join("examples")).expect("examples/") {
        let p = entry.expect("entry").path();
        if p.extension().is_some_and(|e| e == "nabla") {
            names.push(p);
        }
    }
    names.sort();
    assert!(names.len() >= 8, "only {} examples", names.len());
    for p in names {
        let expected = std::fs::read_to_string(p.with_extension("out"))
            .expect("every example has a .out file");
        let o = run(&["run", p.to_str().expect("utf-8 path")]);
        assert_eq!(o.status.code(), Some(0), "{}: {}", p.display(), stderr(&o));
        assert_eq!(stdout(&o), expected, "{}", p.display());
        assert!(stderr(&o).is_empty());
    }
}

#[test]
fn check_prints_each_definition_type() {
    let o = run(&["check", "examples/fib.nabla"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        stdout(&o),
        "fib : Int -> Int\nfib_iter : Int -> Int\nfibs : Int -> Vec Int\nmain : (Int, Int, Vec Int)\n"
    );
}

#[test]
fn eval_prints_a_value() {
    let o = run(&[
        "eval",
        "let f (x, y) = 2.0 * x * x + 3.0 * x * y in f (3.0, 4.0)",
    ]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(stdout(&o), "54.0\n");
    let o = run(&["eval", "(1e-10, 1.0 / 0.0, inl [1, 2], fun x -> x)"]);
    assert_eq!(stdout(&o), "(1e-10, inf, inl [1, 2], <function>)\n");
}

#[test]
fn errors_have_position_source_line_and_caret() {
    let o = run(&["eval", "1 + true"]);
    assert_program_error(&o, "<eval>:1:5", "type mismatch");
    assert!(stderr(&o).contains("1 | 1 + true"));
    let f = temp_file("rt.nabla", b"def v = [1, 2]\ndef main = v[7]\n");
    let o = run(&["run", f.to_str().expect("path")]);
    assert_program_error(&o, "rt.nabla:2:12", "index 7 out of range");
    assert!(stdout(&o).is_empty());
}

#[test]
fn exit_status_two_for_usage_errors() {
    for args in [
        &[][..],
        &["run"][..],
        &["frobnicate"][..],
        &["run", "a", "b"][..],
        &["--bogus"][..],
    ] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
    }
}

#[test]
fn help_and_version() {
    for args in [
        &["--help"][..],
        &["run", "--help"][..],
        &["check", "--help"],
        &["eval", "--help"],
        &["repl", "--help"],
        &["bench", "--help"],
        &["ad", "--help"],
    ] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(0), "{args:?}");
        assert!(stdout(&o).contains("Usage: nabla"), "{args:?}");
    }
    let o = run(&["--version"]);
    assert_eq!(stdout(&o), format!("nabla {}\n", env!("CARGO_PKG_VERSION")));
}

#[test]
fn ad_prints_and_runs_translations() {
    let f = temp_file(
        "ad.nabla",
        b"def f (x, y) = x * y + sin x\ndef main = grad f (1.0, 2.0)\n",
    );
    let path = f.to_str().expect("path");
    let direct = stdout(&run(&["run", path]));
    assert_eq!(direct, "(2.5403023058681398, 1.0)\n");
    for mode in ["reverse", "cps"] {
        let o = run(&["ad", "--mode", mode, "--run", path]);
        assert_eq!(o.status.code(), Some(0), "{mode}: {}", stderr(&o));
        assert_eq!(stdout(&o), direct, "{mode}");
    }
    // The printed translation is a translated-dialect program naming the derived definitions.
    let o = run(&["ad", "--mode", "reverse", path]);
    let text = stdout(&o);
    assert!(text.starts_with("#!translated\n"), "{text}");
    for name in ["def f_rev", "deltaLet", "def f_vjp", "runDelta"] {
        assert!(text.contains(name), "{name} missing from {text}");
    }
    let o = run(&["ad", "--mode", "forward", "--def", "f", path]);
    assert!(stdout(&o).contains("def f_jvp"), "{}", stderr(&o));
    // --program prints what --run runs, and that program runs on its own.
    let o = run(&["ad", "--mode", "reverse", "--program", path]);
    let whole = temp_file("ad-whole.nabla", &o.stdout);
    assert_eq!(
        stdout(&run(&["run", whole.to_str().expect("path")])),
        direct
    );
    // Errors: forward mode cannot run a gradient; an unknown definition.
    let o = run(&["ad", "--mode", "forward", "--run", path]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("jvp f x dx"), "{}", stderr(&o));
    let o = run(&["ad", "--def", "nope", path]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("no definition named `nope`"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn unreadable_file_is_an_error() {
    let o = run(&["run", "/nonexistent/file.nabla"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).starts_with("error: cannot read"));
}

#[test]
fn repl_session() {
    let input = b"def sq x = x * x\nsq 3.0\n:type fun x -> (x, x)\n1 + true\nsq 4.0\n:load examples/fib.nabla\nfib 10\n:help\n:quit\nsq 5.0\n";
    let o = run_with(&["repl"], Some(input));
    assert_eq!(o.status.code(), Some(0));
    let out = stdout(&o);
    for line in [
        "9.0",
        "fun x -> (x, x) : a -> (a, a)",
        "16.0",
        "loaded 4 definition(s)",
        "55",
        ":type EXPR",
    ] {
        assert!(
            out.lines().any(|l| l.contains(line)),
            "missing {line:?} in {out}"
        );
    }
    // The error did not end the session, and `:quit` did (25.0 never printed).
    assert!(stderr(&o).contains("type mismatch"));
    assert!(!out.contains("25.0"));
}

// ---- hostile input: each gives a clean error or a result, never a crash ----

fn run_file(name: &str, contents: &[u8]) -> Output {
    let f = temp_file(name, contents);
    run(&["run", f.to_str().expect("path")])
}

fn assert_clean(o: &Output) {
    let code = o.status.code();
    assert!(
        code == Some(0) || code == Some(1),
        "status {:?}, stderr {}",
        o.status,
        stderr(o)
    );
    if code == Some(1) {
        assert!(stderr(o).starts_with("error: "), "{}", stderr(o));
    }
    assert!(!stderr(o).contains("panicked"), "{}", stderr(o));
}

#[test]
fn malformed_utf8() {
    let o = run_file("bad.nabla", b"def main = 1 +\n  \xff\xfe 2\n");
    assert_program_error(&o, "bad.nabla:2:3", "not valid UTF-8");
}

#[test]
fn hundred_thousand_nested_parentheses() {
    let n = 100_000;
    let src = format!("def main = {}1{}\n", "(".repeat(n), ")".repeat(n));
    let o = run_file("parens.nabla", src.as_bytes());
    assert_clean(&o);
    let unbalanced = format!("def main = {}1\n", "(".repeat(n));
    let o = run_file("parens2.nabla", unbalanced.as_bytes());
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn sixteen_thousand_deep_types_check_in_linear_time() {
    // Type checking used to copy a type at every step of resolving it, quadratic in
    // its depth: this program took 245 s to check. Now it is checked in milliseconds.
    let n = 16_000;
    let ty = (0..n).fold("Real".to_string(), |t, _| format!("({t}, Real)"));
    let value = (0..n).fold("1.0".to_string(), |v, _| format!("({v}, 2.0)"));
    let src = format!("def f (x : {ty}) = x\ndef g (x : {ty}) = f (f x)\ndef main = 1.0\n");
    let o = run_file("deep_type.nabla", src.as_bytes());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "1.0\n");
    // A mismatch against it is reported (the message shows the whole type; this
    // case took over 10 GB of memory before).
    let src = format!("def f (x : {ty}) = x\ndef main = f 1.0\n");
    let o = run_file("deep_mismatch.nabla", src.as_bytes());
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with("error: type mismatch"),
        "{}",
        stderr(&o)
    );
    // Applied to a value of that type, the inferred type of `main` is as deep.
    let src = format!("def f (x : {ty}) = x\ndef main = f {value}\n");
    let o = run_file("deep_value.nabla", src.as_bytes());
    assert_clean(&o);
    if o.status.code() == Some(0) {
        assert_eq!(stdout(&o).trim_end(), value);
    }
}

#[test]
fn fifty_thousand_chained_lets() {
    let mut src = String::from("def main =\n");
    for i in 0..50_000 {
        src.push_str(&format!("let x{i} = {i} in\n"));
    }
    src.push_str("x49999 + x0\n");
    let o = run_file("lets.nabla", src.as_bytes());
    assert_clean(&o);
    if o.status.code() == Some(0) {
        assert_eq!(stdout(&o), "49999\n");
    }
}

#[test]
fn huge_integer_literal() {
    let o = run_file(
        "big.nabla",
        format!("def main = {}\n", "9".repeat(5000)).as_bytes(),
    );
    assert_program_error(&o, "big.nabla:1:12", "integer literal is too large");
}

#[test]
fn empty_file_and_missing_main() {
    let o = run_file("empty.nabla", b"");
    assert_program_error(&o, "empty.nabla:1:1", "no definition of `main`");
    let o = run_file("nomain.nabla", b"def f x = x\n");
    assert_program_error(&o, "nomain.nabla:1:1", "no definition of `main`");
}

#[test]
fn deep_recursion_runs_or_stops_cleanly() {
    let src = b"def count n = if n == 0 then 0 else 1 + count (n - 1)\ndef main = count 1000000\n";
    let o = run_file("deep.nabla", src);
    assert_clean(&o);
    match o.status.code() {
        Some(0) => assert_eq!(stdout(&o), "1000000\n"),
        _ => assert!(stderr(&o).contains("stack depth exceeded")),
    }
    // Far deeper than any stack: must stop with the clean error.
    let src =
        b"def count n = if n == 0 then 0 else 1 + count (n - 1)\ndef main = count 100000000\n";
    let o = run_file("deeper.nabla", src);
    assert_program_error(&o, "deeper.nabla:1:41", "stack depth exceeded");
}

#[test]
fn tail_calls_run_in_constant_stack() {
    let src = b"def main = let rec loop i acc = if i == 0 then acc else loop (i - 1) (acc + 2) in loop 3000000 0\n";
    let o = run_file("tail.nabla", src);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "6000000\n");
}

#[test]
fn max_calls_bounds_an_infinite_loop() {
    // Without a limit this would run forever; with one it stops cleanly.
    let f = temp_file("forever2.nabla", b"def main = let rec f x = f x in f 1\n");
    let o = run(&["run", "--max-calls", "100000", f.to_str().expect("path")]);
    assert_program_error(&o, "forever2.nabla:1:26", "evaluation step limit exceeded");
}

// ---- the memory budget and the evaluator thread ----

/// Runs `nabla ARGS…` under `sh -c 'ulimit -v KB; …'` (the address-space
/// cap the reports used).
fn run_capped(kb: u64, args: &[&str]) -> Output {
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let script = format!(
        "ulimit -v {kb} && exec '{}' {}",
        env!("CARGO_BIN_EXE_nabla"),
        quoted.join(" ")
    );
    Command::new("sh")
        .args(["-c", &script])
        .current_dir(repo())
        .stdin(Stdio::null())
        .output()
        .expect("spawn sh")
}

#[test]
fn out_of_memory_is_a_clean_error_at_the_allocating_operation() {
    // The report: 10¹⁰ reals, built one 100 000-element row at a time.
    let src = b"def main = size (build 100000 (fun i -> build 100000 (fun j -> 0.0)))\n";
    let f = temp_file("rows.nabla", src);
    let o = run(&["run", "--max-memory", "16M", f.to_str().expect("path")]);
    assert_program_error(&o, "rows.nabla:1:41", "out of memory");
    assert!(stderr(&o).contains("budget of 16 MiB"), "{}", stderr(&o));
    // One vector too big for the budget is refused before it is allocated.
    let o = run(&[
        "eval",
        "--max-memory",
        "64M",
        "size (build 100000000 (fun i -> 0.0))",
    ]);
    assert_program_error(&o, "<eval>:1:7", "out of memory: 763 MiB more");
    // Within the budget, the same operations work.
    let o = run(&[
        "eval",
        "--max-memory",
        "64M",
        "size (build 1000 (fun i -> build 1000 (fun j -> 0.0)))",
    ]);
    assert_eq!(stdout(&o), "1000\n", "{}", stderr(&o));
    // Live bytes are counted, not cumulative ones: 100 rows of 80 KB one
    // after another fit in 1 MiB.
    let o = run(&[
        "eval",
        "--max-memory",
        "1M",
        "fold (fun acc i -> acc + size (build 10000 (fun j -> 0.0))) 0 (build 100 (fun i -> i))",
    ]);
    assert_eq!(stdout(&o), "1000000\n", "{}", stderr(&o));
    // A bad size is a usage error.
    let o = run(&["eval", "--max-memory", "lots", "1"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn a_reverse_mode_trace_counts_against_the_memory_budget() {
    // A loop of 10⁸ multiplications records 10⁸ Deltas (3.2 GB).
    let src = b"def f x = let rec loop i acc = if i == 0 then acc else loop (i - 1) (acc * x) in loop 100000000 x\ndef main = grad f 1.0\n";
    let f = temp_file("trace.nabla", src);
    let o = run(&["run", "--max-memory", "16M", f.to_str().expect("path")]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).starts_with("error: out of memory"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("trace.nabla:1:"), "{}", stderr(&o));
}

#[test]
fn max_memory_applies_to_the_repl_and_ad_run() {
    let input = b"size (build 100000000 (fun i -> 0.0))\n1 + 2\n";
    let o = run_with(&["repl", "--max-memory", "64M"], Some(input));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("out of memory"), "{}", stderr(&o));
    assert!(
        stdout(&o).lines().any(|l| l.contains('3')),
        "{}",
        stdout(&o)
    );
    let src = b"def f x = sum (build 100000000 (fun i -> x))\ndef main = grad f 1.0\n";
    let f = temp_file("ad_big.nabla", src);
    let o = run(&[
        "ad",
        "--run",
        "--max-memory",
        "64M",
        f.to_str().expect("path"),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).starts_with("error: out of memory"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn under_an_address_space_cap_the_evaluator_starts_or_says_why_not() {
    let one = temp_file("one.nabla", b"def main = 1\n");
    let one = one.to_str().expect("path");
    let stack_kb = (nabla_lang::stack::BIG_STACK_BYTES / 1024) as u64;
    // The report: `def main = 1` under `ulimit -v 1000000`, below the
    // evaluator's stack, said "internal error". Now it says why.
    let o = run_capped(stack_kb / 2, &["run", one]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        format!(
            "error: could not start the evaluator thread with {} MB of stack: \
             Resource temporarily unavailable (os error 11)\n",
            stack_kb / 1024
        )
    );
    // With room for the stack, it runs.
    let o = run_capped(stack_kb + 1_000_000, &["run", one]);
    assert_eq!(stdout(&o), "1\n", "{}", stderr(&o));
}

/// Peak resident memory of a running child in KiB (`VmHWM`, the high-water
/// mark, polled until the child exits), with its output.
fn peak_rss_kb(mut cmd: Command) -> (u64, Output) {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let status = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    let mut child = child;
    while child.try_wait().expect("wait").is_none() {
        let hwm = std::fs::read_to_string(&status)
            .ok()
            .and_then(|t| {
                let line = t.lines().find(|l| l.starts_with("VmHWM:"))?.to_owned();
                line.split_whitespace().nth(1)?.parse::<u64>().ok()
            })
            .unwrap_or(0);
        peak = peak.max(hwm);
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    (peak, child.wait_with_output().expect("output"))
}

#[test]
fn infinite_recursion_stops_cleanly_in_a_quarter_of_the_stack() {
    // The report: 2.2 GB touched before "stack depth exceeded". Evaluation
    // now has a quarter of the 2 GiB stack.
    let f = temp_file(
        "forever.nabla",
        b"def f n = 1 + f (n + 1)\ndef main = f 0\n",
    );
    let mut cmd = nabla();
    cmd.args(["run", f.to_str().expect("path")]);
    let (peak_kb, o) = peak_rss_kb(cmd);
    assert_program_error(&o, "forever.nabla:1:15", "stack depth exceeded");
    if cfg!(target_os = "linux") {
        let stack_kb = (nabla_lang::stack::BIG_STACK_BYTES / 1024) as u64;
        assert!(peak_kb > 0, "VmHWM not read");
        assert!(peak_kb < stack_kb / 2, "peak {peak_kb} KiB");
    }
}
