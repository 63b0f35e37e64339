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
        // An example whose `main` takes data names its file: `# input: PATH`.
        let text = std::fs::read_to_string(&p).expect("readable");
        let input = text
            .lines()
            .find_map(|l| l.strip_prefix("# input: "))
            .map(|rest| {
                repo()
                    .join("examples")
                    .join(rest.split_whitespace().next().unwrap_or(""))
            });
        let mut args = vec!["run", p.to_str().expect("utf-8 path")];
        if let Some(input) = &input {
            args.extend(["--input", input.to_str().expect("utf-8 path")]);
        }
        let o = run(&args);
        assert_eq!(o.status.code(), Some(0), "{}: {}", p.display(), stderr(&o));
        assert_eq!(stdout(&o), expected, "{}", p.display());
        // What `trace` prints, if the example traces: its `.err` file.
        let traced = std::fs::read_to_string(p.with_extension("err")).unwrap_or_default();
        assert_eq!(stderr(&o), traced, "{}", p.display());
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

/// Issue 12 §4: `nabla ad` on the shapes real files have.
#[test]
fn ad_on_real_files() {
    // Every example either runs with the translation or says, at its `main`,
    // what `main` would have to be, from the example's own definitions (or,
    // at its `trace`, that the translations do not carry `trace`).
    let mut ran = 0;
    for entry in std::fs::read_dir(repo().join("examples")).expect("examples") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "nabla") {
            continue;
        }
        let p = path.to_str().expect("path");
        let o = run(&["ad", "--run", p]);
        if o.status.success() {
            ran += 1;
            continue;
        }
        let err = stderr(&o);
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        // A program that prints progress says the translations do not carry `trace`.
        if err.contains("the `nabla ad` translations do not support `trace`") {
            assert_program_error(&o, &name, "remove this `trace`");
            continue;
        }
        assert_program_error(&o, &name, "`nabla ad` needs `main`");
        assert!(
            err.contains("def main = ") || err.contains("no definition here"),
            "{name}: no shape suggested: {err}"
        );
    }
    assert!(ran >= 1);
    // A component the function ignores has a type variable: taken as Real, as `run` does.
    let f = temp_file(
        "ad-ignored.nabla",
        b"def f (x, y) = sin x\ndef main = grad f (1.0, 2.0)\n",
    );
    let path = f.to_str().expect("path");
    let direct = stdout(&run(&["run", path]));
    assert_eq!(direct, "(0.5403023058681398, 0.0)\n");
    for mode in ["reverse", "cps"] {
        let o = run(&["ad", "--mode", mode, "--run", path]);
        assert_eq!(stdout(&o), direct, "{mode}: {}", stderr(&o));
    }
    let o = run(&["ad", "--mode", "linear", "--def", "f", path]);
    assert_program_error(&o, "ad-ignored.nabla:1:5", "annotate an ignored component");
    // Nothing to differentiate, a curried function, a main that does more: located errors.
    let f = temp_file(
        "ad-shapes.nabla",
        b"def g (n : Int) : Int = n * 2\ndef h x y = x * y\ndef f x = x * x\n\
          def main = (grad f 1.0, diff f 2.0)\n",
    );
    let path = f.to_str().expect("path");
    let o = run(&["ad", "--def", "g", path]);
    assert_program_error(&o, "ad-shapes.nabla:1:5", "no derivative to take");
    let o = run(&["ad", "--mode", "forward", "--def", "g", path]);
    assert_program_error(&o, "ad-shapes.nabla:1:5", "no derivative to take");
    let o = run(&["ad", "--def", "h", path]);
    assert_program_error(&o, "ad-shapes.nabla:2:5", "`def g (x1, x2) = h x1 x2`");
    let o = run(&["ad", "--run", path]);
    assert_program_error(&o, "ad-shapes.nabla:4:5", "def main = grad f (1.0)");
    assert!(stderr(&o).contains("`diff f (2.0)`"), "{}", stderr(&o));
    // The help names every mode.
    let o = run(&["--help"]);
    assert!(stdout(&o).contains("linear-map"), "{}", stdout(&o));
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

// ---- the REPL driven line by line ----

/// A `nabla repl` child driven line by line; threads collect its output.
/// Dropping it kills the child, so a failing test never leaves it behind.
struct LiveRepl {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    stdout: std::sync::Arc<std::sync::Mutex<String>>,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

/// How long a live REPL may take to answer before the test gives up
/// (a guard against hangs, not a measurement).
const REPL_PATIENCE: std::time::Duration = std::time::Duration::from_secs(60);

impl LiveRepl {
    fn start(args: &[&str], home: &Path) -> LiveRepl {
        let mut child = nabla()
            .arg("repl")
            .args(args)
            .current_dir(repo())
            .env("HOME", home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn nabla repl");
        let collect = |mut from: Box<dyn std::io::Read + Send>| {
            let text = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
            let sink = text.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = from.read(&mut buf) {
                    let chunk = String::from_utf8_lossy(&buf[..n]).into_owned();
                    sink.lock().expect("lock").push_str(&chunk);
                }
            });
            text
        };
        let stdout = collect(Box::new(child.stdout.take().expect("stdout")));
        let stderr = collect(Box::new(child.stderr.take().expect("stderr")));
        let stdin = child.stdin.take();
        LiveRepl {
            child,
            stdin,
            stdout,
            stderr,
        }
    }

    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .expect("write to the repl");
        stdin.flush().expect("flush");
    }

    fn stdout(&self) -> String {
        self.stdout.lock().expect("lock").clone()
    }

    fn stderr(&self) -> String {
        self.stderr.lock().expect("lock").clone()
    }

    /// Waits up to `patience` for `done` to hold of (stdout, stderr).
    fn wait_until(&self, patience: std::time::Duration, done: impl Fn(&str, &str) -> bool) -> bool {
        let start = std::time::Instant::now();
        while start.elapsed() < patience {
            if done(&self.stdout(), &self.stderr()) {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        done(&self.stdout(), &self.stderr())
    }

    /// Waits for `text` on stdout; panics (killing the child) if it never comes.
    fn expect_out(&self, text: &str) {
        assert!(
            self.wait_until(REPL_PATIENCE, |out, _| out.contains(text)),
            "no {text:?} on stdout: {}\nstderr: {}",
            self.stdout(),
            self.stderr()
        );
    }

    /// Closes stdin and waits for the exit status.
    fn finish(mut self) -> Option<i32> {
        drop(self.stdin.take());
        let start = std::time::Instant::now();
        while start.elapsed() < REPL_PATIENCE {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status.code();
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        panic!("the repl did not leave at end of input")
    }
}

impl Drop for LiveRepl {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A fresh, empty directory to serve as `$HOME`.
fn temp_home(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("nabla-cli-test-{}-home-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp home");
    dir
}

#[test]
fn ctrl_c_stops_an_evaluation_and_keeps_the_session() {
    // Ctrl-C used to kill the REPL (exit 130) with every definition lost.
    let home = temp_home("ctrl-c");
    let mut repl = LiveRepl::start(&[], &home);
    repl.send("def sq x = x * x");
    repl.expect_out("sq : ");
    repl.send("let rec loop x = loop x in loop 1");
    // The signal may come before the evaluation starts (and be ignored
    // then): send it until the evaluation reports that it stopped.
    let pid = repl.child.id().to_string();
    let mut stopped = false;
    for _ in 0..100 {
        let sent = Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .expect("run kill");
        assert!(sent.success());
        if repl.wait_until(std::time::Duration::from_millis(300), |_, err| {
            err.contains("evaluation interrupted")
        }) {
            stopped = true;
            break;
        }
    }
    assert!(stopped, "never interrupted; stderr: {}", repl.stderr());
    assert!(
        repl.child.try_wait().expect("try_wait").is_none(),
        "the repl died"
    );
    repl.send("sq 7.0");
    repl.expect_out("49.0");
    assert!(repl.child.try_wait().expect("try_wait").is_none());
    assert_eq!(repl.finish(), Some(0));
}

#[test]
fn repl_history_is_saved_after_each_entry() {
    // History used to be written only on a clean exit.
    let home = temp_home("history");
    let mut repl = LiveRepl::start(&[], &home);
    repl.send("def remembered = 41 + 1");
    repl.expect_out("remembered : Int");
    let history = home.join(".nabla_history");
    let saved = repl.wait_until(REPL_PATIENCE, |_, _| {
        std::fs::read_to_string(&history).is_ok_and(|h| h.contains("def remembered = 41 + 1"))
    });
    assert!(saved, "history not saved while the session runs");
    // Killed, not left: the entry is still there, and a new session reads it.
    drop(repl);
    let text = std::fs::read_to_string(&history).expect("history file");
    assert!(text.contains("def remembered = 41 + 1"), "{text}");
}

#[test]
fn repl_reload_reads_the_files_again() {
    let home = temp_home("reload");
    let file = temp_file("reload.nabla", b"def a = 1\ndef b = 10\n");
    let path = file.to_str().expect("path");
    let mut repl = LiveRepl::start(&[path], &home);
    repl.expect_out("loaded 2 definition(s)");
    repl.send("def c = a + 100");
    repl.send("(a, b, c)");
    repl.expect_out("(1, 10, 101)");
    std::fs::write(&file, b"def a = 2\ndef b = 20\n").expect("rewrite");
    repl.send(":reload");
    // The typed definition `c` is redone on top of the new `a`.
    repl.send("(a, b, c)");
    repl.expect_out("(2, 20, 102)");
    // A file given with :load is read again too.
    let other = temp_file("reload2.nabla", b"def d = 5\n");
    repl.send(&format!(":load {}", other.to_str().expect("path")));
    repl.send("d");
    repl.expect_out("\n5\n");
    std::fs::write(&other, b"def d = 6\n").expect("rewrite");
    repl.send(":r");
    repl.send("d * 1000");
    repl.expect_out("6000");
    assert_eq!(repl.finish(), Some(0));
}

#[test]
fn repl_continues_incomplete_entries_on_the_next_lines() {
    let input = b"def f x =\n  x * 10\nf 3\n(1,\n 2)\n[1.0,\n  2.0] \n1 +\n  2 +\n  3\nlet y = 4\nin y * y\ndef g x = let z = x in\n  z + 1\n\ng 1\n(1 +\n\n:type (fun x ->\n  x)\n";
    let o = run_with(&["repl"], Some(input));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    for line in ["f : ", "30", "(1, 2)", "[1.0, 2.0]", "6", "16", "g : ", "2"] {
        assert!(
            out.lines()
                .any(|l| l == line || (line.ends_with(' ') && l.starts_with(line))),
            "missing {line:?} in {out}"
        );
    }
    // An empty line ends an entry that is still incomplete: its error is
    // reported and the session goes on (`:type` is one line).
    assert!(
        stderr(&o).contains("expected an expression"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn repl_it_is_the_last_value() {
    let input = b"1 + 2\nit * 2\n:type it\n(2.5, [1.0])\n:type it\nfst it + 1.0\nfun x -> x\nit\n";
    let o = run_with(&["repl"], Some(input));
    let out = stdout(&o);
    for line in ["3", "6", "it : Int", "it : (Real, Vec Real)", "3.5"] {
        assert!(out.lines().any(|l| l == line), "missing {line:?} in {out}");
    }
    // A function is not kept (its code belongs to the program that made it).
    assert!(
        stderr(&o).contains("unknown variable `it`"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn repl_declares_types_and_keeps_records() {
    let input =
        b"type P = { x : Real, y : Real }\ndef norm (p : P) = sqrt (p.x * p.x + p.y * p.y)\n\
{ y = 4.0, x = 3.0 }\n:type it\n{ it with x = 1.0 }\nnorm it\ngrad norm { x = 3.0, y = 4.0 }\n";
    let o = run_with(&["repl"], Some(input));
    let out = stdout(&o);
    for line in [
        "{ x = 3.0, y = 4.0 }",
        "it : { x : Real, y : Real }",
        "{ x = 1.0, y = 4.0 }",
        "4.123105625617661",
        "{ x = 0.6000000000000001, y = 0.8 }",
    ] {
        assert!(out.lines().any(|l| l == line), "missing {line:?} in {out}");
    }
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
}

#[test]
fn repl_error_columns_count_leading_spaces() {
    // The input used to be trimmed first, so the column was that of `true`
    // in `1 + true`, not in the line typed.
    let o = run_with(&["repl"], Some(b"   1 + true\n"));
    let err = stderr(&o);
    assert!(err.contains("<repl:1>:1:8"), "{err}");
    assert!(err.contains("1 |    1 + true"), "{err}");
    let o = run_with(&["repl"], Some(b"  def f x = x + true\n"));
    assert!(stderr(&o).contains("<repl:1>:1:17"), "{}", stderr(&o));
}

#[test]
fn repl_help_lists_the_commands() {
    let o = run_with(&["repl"], Some(b":help\n"));
    for command in [
        ":type", ":load", ":reload", ":defs", ":help", ":quit", "`it`", "Ctrl-C",
    ] {
        assert!(
            stdout(&o).contains(command),
            "{command} missing from {}",
            stdout(&o)
        );
    }
}

#[test]
fn max_calls_for_every_command_that_evaluates() {
    let forever = "let rec f x = f x in f 1";
    let flag = "raise it with --max-calls N";
    let o = run(&["eval", "--max-calls", "1000", forever]);
    assert_program_error(&o, "<eval>:1:15", "evaluation step limit exceeded");
    assert!(stderr(&o).contains(flag), "{}", stderr(&o));
    let o = run_with(
        &["repl", "--max-calls", "1000"],
        Some(format!("{forever}\n1 + 1\n").as_bytes()),
    );
    assert!(stderr(&o).contains(flag), "{}", stderr(&o));
    assert!(stdout(&o).lines().any(|l| l == "2"), "{}", stdout(&o));
    let f = temp_file(
        "ad-loop.nabla",
        b"def f x = let rec g i = if i == 0 then x else g (i - 1) in x * g 100000\ndef main = grad f 2.0\n",
    );
    let path = f.to_str().expect("path");
    let o = run(&["ad", "--run", path]);
    assert_eq!(stdout(&o), "4.0\n", "{}", stderr(&o));
    let o = run(&["ad", "--run", "--max-calls", "1000", path]);
    assert_program_error(&o, "(translated)", "evaluation step limit exceeded");
    assert!(stderr(&o).contains(flag), "{}", stderr(&o));
    let o = run(&["run", "--max-calls", "1000", path]);
    assert!(stderr(&o).contains(flag), "{}", stderr(&o));
}

#[test]
fn run_dash_reads_standard_input() {
    let o = run_with(&["run", "-"], Some(b"def main = 6 * 7\n"));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "42\n");
    let o = run_with(&["run", "-"], Some(b"def main =\n  1 + true\n"));
    assert_program_error(&o, "<stdin>:2:7", "type mismatch");
    let o = run_with(&["run", "-"], Some(b"def main = 1 +\n  \xff 2\n"));
    assert_program_error(&o, "<stdin>:2:3", "not valid UTF-8");
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
    // A loop of 10⁸ steps on two variables records 2·10⁸ Deltas (6.4 GB).
    // (On one variable, `acc * x` would only scale its coefficient.)
    let src = b"def f (x, y) = let rec loop i acc = if i == 0 then acc else loop (i - 1) (acc * x + y) in loop 100000000 x\ndef main = grad f (1.0, 0.0)\n";
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

// ---- timing `main`: --repeat and -v ----

#[test]
fn repeat_prints_the_value_once_and_the_times_on_stderr() {
    let f = temp_file(
        "repeat.nabla",
        b"def fib n = if n < 2 then n else fib (n - 1) + fib (n - 2)\ndef main = fib 15\n",
    );
    let path = f.to_str().expect("path");
    let o = run(&["run", "--backend", "interp", "--repeat", "3", path]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "610\n");
    let err = stderr(&o);
    let line = err.lines().next().unwrap_or_default();
    assert!(
        line.starts_with("main: 3 evaluations after 1 warm-up: min ")
            && line.contains(", median ")
            && line.contains("(prepared in ")
            && line.ends_with(", on the interpreter)"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    // Each time has a number and one of the units.
    let times: Vec<&str> = line
        .split(['(', ')', ','])
        .filter_map(|part| part.trim().rsplit_once(' '))
        .filter(|(_, unit)| ["ns", "µs", "ms", "s"].contains(unit))
        .map(|(number, _)| number.rsplit(' ').next().unwrap_or_default())
        .collect();
    assert_eq!(times.len(), 3, "{line}");
    for t in times {
        assert!(t.parse::<f64>().is_ok(), "{t:?} in {line}");
    }
    // One evaluation: the singular.
    let o = run(&["run", "--backend", "interp", "--repeat", "1", path]);
    assert!(
        stderr(&o).starts_with("main: 1 evaluation after 1 warm-up: min "),
        "{}",
        stderr(&o)
    );
}

#[test]
fn repeat_needs_a_positive_count() {
    let f = temp_file("repeat0.nabla", b"def main = 1\n");
    let path = f.to_str().expect("path");
    for n in ["0", "-1", "three", ""] {
        let o = run(&["run", "--backend", "interp", &format!("--repeat={n}"), path]);
        assert_eq!(o.status.code(), Some(2), "{n:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("--repeat"), "{n:?}: {}", stderr(&o));
        assert!(stdout(&o).is_empty());
    }
}

#[test]
fn verbose_names_the_backend_and_keeps_stdout() {
    let f = temp_file("verbose.nabla", b"def main = 6 * 7\n");
    let path = f.to_str().expect("path");
    let plain = run(&["run", "--backend", "interp", path]);
    assert_eq!(stderr(&plain), "");
    for flag in ["-v", "--verbose"] {
        let o = run(&["run", "--backend", "interp", flag, path]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert_eq!(o.stdout, plain.stdout);
        let err = stderr(&o);
        assert!(
            err.starts_with("main: ran on the interpreter; prepared in ")
                && err.contains(", evaluated in "),
            "{err}"
        );
    }
    // With --repeat, the first evaluation is the warm-up.
    let o = run(&["run", "--backend", "interp", "-v", "--repeat", "2", path]);
    assert_eq!(stdout(&o), "42\n");
    let err = stderr(&o);
    assert!(err.contains(", warm-up evaluated in "), "{err}");
    assert!(err.contains("main: 2 evaluations after 1 warm-up"), "{err}");
}

#[test]
fn repeat_reports_a_run_time_error_as_run_does() {
    let f = temp_file("repeat-rt.nabla", b"def v = [1, 2]\ndef main = v[7]\n");
    let path = f.to_str().expect("path");
    let plain = run(&["run", "--backend", "interp", path]);
    let o = run(&["run", "--backend", "interp", "--repeat", "3", path]);
    assert_program_error(&o, "repeat-rt.nabla:2:12", "index 7 out of range");
    assert_eq!(stderr(&o), stderr(&plain));
    assert!(stdout(&o).is_empty());
}

#[test]
fn repeat_applies_the_limits_to_each_evaluation() {
    // About 600 calls per evaluation: within a limit of 1000 each time, though
    // the four evaluations together make more.
    let f = temp_file(
        "repeat-limit.nabla",
        b"def count = let rec go i = if i == 0 then 0 else 1 + go (i - 1) in go 600\ndef main = count\n",
    );
    let path = f.to_str().expect("path");
    let o = run(&[
        "run",
        "--backend",
        "interp",
        "--repeat",
        "3",
        "--max-calls",
        "1000",
        path,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "600\n");
    let o = run(&[
        "run",
        "--backend",
        "interp",
        "--repeat",
        "3",
        "--max-calls",
        "500",
        path,
    ]);
    assert_program_error(&o, "repeat-limit.nabla", "evaluation step limit exceeded");
    assert!(
        stderr(&o).contains("raise it with --max-calls N"),
        "{}",
        stderr(&o)
    );
    // A 1.5 MiB vector, cached within each evaluation: each fits in 2 MiB,
    // so every evaluation's memory is given back before the next one.
    let f = temp_file(
        "repeat-memory.nabla",
        b"def v = build 200000 (fun i -> 1.0)\ndef main = size v\n",
    );
    let path = f.to_str().expect("path");
    let o = run(&[
        "run",
        "--backend",
        "interp",
        "--repeat",
        "4",
        "--max-memory",
        "2M",
        path,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "200000\n");
    let o = run(&[
        "run",
        "--backend",
        "interp",
        "--repeat",
        "4",
        "--max-memory",
        "1M",
        path,
    ]);
    assert_program_error(&o, "repeat-memory.nabla:1:9", "out of memory");
}

#[test]
fn backends_native_auto_and_interp() {
    let fib = repo().join("examples/fib.nabla");
    let fib = fib.to_str().expect("utf-8 path");
    // Native code by default; -v says so and stdout is the interpreter's.
    let interp = run(&["run", "--backend", "interp", fib]);
    let auto = run(&["run", "-v", fib]);
    assert!(auto.status.success());
    assert_eq!(stdout(&auto), stdout(&interp));
    assert!(
        stderr(&auto).contains("ran on native code"),
        "{}",
        stderr(&auto)
    );
    // A tower of derivatives built by recursion: auto falls back (and -v
    // says why), native refuses.
    let conf = repo().join("tests/lang/ad/fc_returned.nabla");
    let conf = conf.to_str().expect("utf-8 path");
    let auto = run(&["run", "-v", conf]);
    assert!(auto.status.success());
    assert!(
        stderr(&auto).contains("running in the interpreter"),
        "{}",
        stderr(&auto)
    );
    assert!(
        stderr(&auto).contains("ran on the interpreter"),
        "{}",
        stderr(&auto)
    );
    let native = run(&["run", "--backend", "native", conf]);
    assert_eq!(native.status.code(), Some(1));
    assert!(
        stderr(&native)
            .contains("native code does not handle derivatives nested more than 6 deep yet")
            && stderr(&native).contains("fc_returned.nabla:"),
        "{}",
        stderr(&native)
    );
    // --emit-clif shows Cranelift IR.
    let clif = run(&["run", "--backend", "native", "--emit-clif", fib]);
    assert!(stderr(&clif).contains("function u0:"), "{}", stderr(&clif));
}

/// A NumPy .npy file (format 1.0) of float64 with `shape`, as numpy writes it.
fn npy(descr: &str, shape: &str, data: &[f64]) -> Vec<u8> {
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((header.len() as u16).to_le_bytes());
    out.extend(header.as_bytes());
    for x in data {
        out.extend(x.to_le_bytes());
    }
    out
}

#[test]
fn main_takes_its_argument_from_json_csv_or_npy_on_both_backends() {
    let prog = temp_file(
        "input_main.nabla",
        b"def main (rows : Vec (Vec Real)) = (size rows, map (fun r -> sum r) rows)\n",
    );
    let prog = prog.to_str().expect("utf-8 path");
    let json = temp_file("rows.json", b"[[1, 2.5], [3, -4]]");
    let csv = temp_file("rows.csv", b"a, b\n1, 2.5\n3, -4\n");
    let npy_file = temp_file("rows.npy", &npy("<f8", "(2, 2)", &[1.0, 2.5, 3.0, -4.0]));
    for data in [&json, &csv, &npy_file] {
        let data = data.to_str().expect("utf-8 path");
        for backend in ["native", "interp"] {
            let o = run(&["run", "--backend", backend, "--input", data, prog]);
            assert!(o.status.success(), "{backend} {data}: {}", stderr(&o));
            assert_eq!(stdout(&o), "(2, [3.5, -1.0])\n", "{backend} {data}");
            let o = run(&[
                "run",
                "--backend",
                backend,
                "--input",
                data,
                "--output",
                "json",
                prog,
            ]);
            assert_eq!(stdout(&o), "[2,[3.5,-1.0]]\n", "{backend} {data}");
        }
    }
}

#[test]
fn records_come_in_as_json_objects_and_go_out_as_them_on_both_backends() {
    let prog = temp_file(
        "input_record.nabla",
        b"type Model = { w : Vec Real, b : Real }
          def loss (m : Model) = sum (map (fun w -> w * w) m.w) + m.b * m.b
          def main (m : Model) = (grad loss m, { m with b = 0.0 })
",
    );
    let prog = prog.to_str().expect("utf-8 path");
    let data = temp_file("model.json", br#"{"w": [1, -2], "b": 0.5}"#);
    let data = data.to_str().expect("utf-8 path");
    for backend in ["native", "interp"] {
        let o = run(&["run", "--backend", backend, "--input", data, prog]);
        assert!(o.status.success(), "{backend}: {}", stderr(&o));
        assert_eq!(
            stdout(&o),
            "({ b = 1.0, w = [2.0, -4.0] }, { b = 0.0, w = [1.0, -2.0] })\n",
            "{backend}"
        );
        let o = run(&[
            "run",
            "--backend",
            backend,
            "--input",
            data,
            "--output",
            "json",
            prog,
        ]);
        assert_eq!(
            stdout(&o),
            "[{\"b\":1.0,\"w\":[2.0,-4.0]},{\"b\":0.0,\"w\":[1.0,-2.0]}]\n",
            "{backend}"
        );
    }
    for (name, contents, fragment) in [
        (
            "missing.json",
            &br#"{"w": [1]}"#[..],
            "at $: missing field \"b\"",
        ),
        (
            "extra.json",
            br#"{"w": [1], "b": 1, "c": 2}"#,
            "unknown field \"c\"",
        ),
        (
            "deep.json",
            br#"{"w": [1, true], "b": 1}"#,
            "at $.w[1]: expected a Real",
        ),
    ] {
        let bad = temp_file(name, contents);
        let o = run(&["run", "--input", bad.to_str().expect("utf-8 path"), prog]);
        assert_eq!(o.status.code(), Some(1), "{name}");
        assert!(stderr(&o).contains(fragment), "{name}: {}", stderr(&o));
    }
}

#[test]
fn bad_input_data_is_a_clear_error_naming_the_place() {
    let prog = temp_file(
        "input_bad.nabla",
        b"def main (p : (Vec (Vec Real), Int)) = size (fst p) + snd p\n",
    );
    let prog = prog.to_str().expect("utf-8 path");
    let cases: [(&str, Vec<u8>, &str); 6] = [
        (
            "deep.json",
            b"[[[1.0], [2.0, \"x\"]], 3]".to_vec(),
            "at $[0][1][1]: expected a Real, found the string \"x\"",
        ),
        (
            "int.json",
            b"[[[1.0]], 3.5]".to_vec(),
            "at $[1]: expected an Int, found 3.5",
        ),
        ("malformed.json", b"[[[1.0]], 3".to_vec(), "not valid JSON"),
        (
            "short.json",
            b"[[[1.0]]]".to_vec(),
            "at $: expected an array of 2",
        ),
        (
            "ragged.csv",
            b"1, 2\n3\n".to_vec(),
            "CSV holds a `Vec Real` or a `Vec (Vec Real)`",
        ),
        (
            "f32.npy",
            npy("<f4", "(2,)", &[]),
            "expected float64 ('<f8'), found '<f4'",
        ),
    ];
    for (name, contents, fragment) in cases {
        let data = temp_file(name, &contents);
        let o = run(&["run", "--input", data.to_str().expect("utf-8 path"), prog]);
        assert_eq!(o.status.code(), Some(1), "{name}");
        let err = stderr(&o);
        assert!(err.starts_with("error: "), "{name}: {err}");
        assert!(err.contains(fragment), "{name}: {err}");
        assert!(err.contains(name), "{name}: the file is named: {err}");
    }
    // A ragged CSV for a type CSV can hold.
    let rows = temp_file(
        "input_rows.nabla",
        b"def main (rows : Vec (Vec Real)) = size rows\n",
    );
    let data = temp_file("ragged2.csv", b"1, 2\n3\n");
    let o = run(&[
        "run",
        "--input",
        data.to_str().expect("utf-8 path"),
        rows.to_str().expect("utf-8 path"),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("at line 2: a row of 1 fields, but line 1 has 2"),
        "{}",
        stderr(&o)
    );
    // --input for a main that takes nothing; a function main without it.
    let plain = repo().join("examples/fib.nabla");
    let json = temp_file("unused.json", b"1");
    let o = run(&[
        "run",
        "--input",
        json.to_str().expect("utf-8 path"),
        plain.to_str().expect("utf-8 path"),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("but `main` takes none"),
        "{}",
        stderr(&o)
    );
    let o = run(&["run", prog]);
    assert!(stderr(&o).contains("give its argument"), "{}", stderr(&o));
}

// ---- trace ----

/// `trace "label" v` prints `label: VALUE` on stderr in evaluation order, on
/// both back ends alike: inside a fold, under `diff` and `jvp` (the primal,
/// also of vectors and sums two levels deep) and with escapes in the label; `--quiet`
/// silences it without changing the result.
#[test]
fn trace_prints_on_stderr_on_both_backends() {
    let file = "tests/lang/output/trace.nabla";
    let expected = "vector: [1.0, 2.0]\nacc: 1.0\nacc: 3.0\nacc: 6.0\n\
                    tuple: (3.0, [3.0, 6.0], inl 3.0, true)\nin \"diff\"\nnext\\: 9.0\n\
                    nested: 8.0\njvp: 9.0\ndeep: ([4.0, 2.0], inr (2.0, 2))\nint: 2\n";
    let value = "([1.0, 2.0], 6.0, 6.0, 8.0, (9.0, 6.0), 8.0, 5)\n";
    for backend in ["interp", "native"] {
        let o = run(&["run", "--backend", backend, file]);
        assert!(o.status.success(), "{backend}: {}", stderr(&o));
        assert_eq!(stdout(&o), value, "{backend}");
        assert_eq!(stderr(&o), expected, "{backend}");
        let quiet = run(&["run", "--quiet", "--backend", backend, file]);
        assert!(quiet.status.success(), "{backend}: {}", stderr(&quiet));
        assert_eq!(stdout(&quiet), value, "{backend}");
        assert_eq!(stderr(&quiet), "", "{backend} --quiet");
    }
}

/// A structured `jacobian` calls its function as the interpreter does on
/// both back ends: one `jvp` per input real in forward mode, one `jvp` and
/// one `vjp` in reverse mode (the pullbacks' replays print nothing).
#[test]
fn trace_under_a_structured_jacobian_is_the_same_on_both_backends() {
    let file = "tests/lang/ad/jacobian_sums_ints.nabla";
    let expected = "wide: 6.0\nwide: 6.0\ntall: (6.0, 5.0)\ntall: (6.0, 5.0)\n";
    let interp = run(&["run", "--backend", "interp", file]);
    let native = run(&["run", "--backend", "native", file]);
    assert!(native.status.success(), "{}", stderr(&native));
    assert_eq!(stderr(&interp), expected);
    assert_eq!(stderr(&native), expected);
    assert_eq!(stdout(&native), stdout(&interp));
}

/// Under the reverse-mode operators (interpreter) `trace` prints primals.
#[test]
fn trace_under_grad_prints_primals() {
    let o = run(&["run", "tests/lang/output/trace_grad.nabla"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "([2.0, 4.0], [[0.0, 1.0], [1.0, 0.0]])\n");
    let err = stderr(&o);
    assert!(err.starts_with("x: 1.0\nx: 4.0\nh: 2.0\n"), "{err}");
    assert!(
        err.lines()
            .all(|l| l == "x: 1.0" || l == "x: 4.0" || l == "h: 2.0"),
        "{err}"
    );
    let quiet = run(&["run", "-q", "tests/lang/output/trace_grad.nabla"]);
    assert_eq!(stderr(&quiet), "");
}

/// The `nabla ad` translations refuse `trace` with a clear error.
#[test]
fn the_translations_refuse_trace() {
    let f = temp_file(
        "trace_ad.nabla",
        b"def main = grad (fun x -> trace \"t\" (x * x)) 1.0\n",
    );
    for mode in ["forward", "reverse", "cps", "linear"] {
        let o = run(&["ad", "--mode", mode, f.to_str().expect("path")]);
        assert_eq!(o.status.code(), Some(1), "{mode}");
        assert!(
            stderr(&o).starts_with("error: the `nabla ad` translations do not support `trace`"),
            "{mode}: {}",
            stderr(&o)
        );
    }
}
