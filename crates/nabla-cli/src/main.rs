//! `nabla`: run, check and explore nabla programs.
//!
//! Exit status: 0 on success, 1 for any error in the program (syntax, type,
//! run time, unreadable file), 2 for command-line usage errors.

mod bench;
mod input;
mod repl;
mod timing;

use clap::{Args, Parser, Subcommand};
use nabla_lang::diagnostic::Diagnostic;
use nabla_lang::driver::Session;
use nabla_lang::eval::Limits;
use nabla_lang::syntax::span::{SourceMap, Span};
use std::io::Write;
use std::num::NonZeroU32;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;
use timing::Backend;

/// Largest source file accepted (spans are 32-bit offsets).
const MAX_SOURCE_BYTES: u64 = 256 << 20;

/// The file name that stands for standard input (`nabla run -`).
const STDIN_PATH: &str = "-";

/// How `<stdin>` is named in error messages.
const STDIN_NAME: &str = "<stdin>";

#[derive(Parser)]
#[command(
    name = "nabla",
    version,
    about = "The nabla language: a small ML-family language with first-class differentiation"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Memory budget of an evaluation (vectors, reverse-mode traces, frames),
    /// e.g. 512M or 4G; going over it is an "out of memory" error (default:
    /// half of the machine's memory). For run, eval, repl and ad --run.
    #[arg(long, global = true, value_name = "SIZE", value_parser = nabla_lang::memory::parse_size)]
    max_memory: Option<usize>,
}

#[derive(Subcommand)]
enum Command {
    /// Type-check FILE, evaluate its `main` and print the value.
    Run {
        /// The program (a .nabla file; `-` reads standard input).
        file: String,
        /// Time `main`: after one warm-up evaluation, evaluate it N more
        /// times afresh and print the minimum and median time per
        /// evaluation on stderr, preparation time apart (N ≥ 1).
        #[arg(long, value_name = "N", value_parser = parse_repeat)]
        repeat: Option<NonZeroU32>,
        /// Print on stderr which backend ran `main` and how long preparing
        /// (parsing, checking, lowering, compiling) and evaluating it took.
        #[arg(short, long)]
        verbose: bool,
        /// Silence `trace`: print nothing for `trace "label" v` (which is
        /// still `v`).
        #[arg(short, long)]
        quiet: bool,
        /// Which backend evaluates `main`: native code, falling back to the
        /// interpreter for what the compiler does not handle yet (auto);
        /// native code only (native: says what it does not handle, and
        /// where); the interpreter (interp).
        #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
        backend: BackendChoice,
        /// Print the Cranelift IR of every generated function on stderr.
        #[arg(long)]
        emit_clif: bool,
        /// `main`'s argument, when `main` is a function: a JSON file (`-`
        /// reads standard input), a `.csv` (for `Vec Real` or
        /// `Vec (Vec Real)`) or a NumPy `.npy` of float64 (one or two
        /// dimensions), decoded by the type `main` takes.
        #[arg(long, value_name = "FILE")]
        input: Option<String>,
        /// How to print `main`'s value: as the language writes it (text) or
        /// as JSON (json).
        #[arg(long, value_enum, default_value_t = input::Output::Text)]
        output: input::Output,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Type-check FILE and print the inferred type of each top-level definition.
    Check {
        /// The program (a .nabla file).
        file: String,
    },
    /// Evaluate one expression and print its value.
    Eval {
        /// The expression, e.g. '2.0 * sin 1.0'.
        expr: String,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Interactive read-eval-print loop (`:help` inside for commands).
    Repl {
        /// Files to load first (`:reload` reads them again).
        files: Vec<String>,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Print a source-to-source derivative of a definition: the forward
    /// (dual numbers), reverse (Delta monad), reverse-CPS or linear-map
    /// (Jacobian) translation of the papers, as nabla source. By default the
    /// definition `main` differentiates.
    Ad {
        /// Which translation: forward (Krawiec et al. Fig. 3), reverse (Fig. 9
        /// and 16), cps (Wang et al. Fig. 10) or linear (the Jacobian as a
        /// linear map, Ellis et al. Fig. 6).
        #[arg(long, value_enum, default_value_t = AdMode::Reverse)]
        mode: AdMode,
        /// The definition to differentiate (default: the one `main` differentiates).
        #[arg(long)]
        def: Option<String>,
        /// Instead of printing the translation, run it: compute `main`'s
        /// derivative with the translated program and print it.
        #[arg(long)]
        run: bool,
        /// Print the complete program that `--run` runs instead of running it.
        #[arg(long, conflicts_with = "run")]
        program: bool,
        /// The program (a .nabla file).
        file: String,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Time three programs in nabla and in CPython (python3) and print a table.
    Bench {
        /// Run each program once instead of taking the best of seven.
        #[arg(long)]
        quick: bool,
    },
}

/// Evaluation limits, shared by every command that evaluates.
#[derive(Args, Clone, Copy)]
struct LimitArgs {
    /// Stop with an error after this many function calls (default: no limit).
    #[arg(long, value_name = "N")]
    max_calls: Option<u64>,
}

impl LimitArgs {
    fn limits(self) -> Limits {
        Limits {
            max_calls: self.max_calls,
            ..Limits::default()
        }
    }
}

/// The translations `nabla ad` prints.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum AdMode {
    /// Dual numbers (Krawiec et al. Fig. 3).
    Forward,
    /// The Delta monad (Krawiec et al. Fig. 9, 11, 16).
    Reverse,
    /// Continuation-passing style with gradient cells (Wang et al. Fig. 10).
    Cps,
    /// The full Jacobian as a linear map (Ellis et al. Fig. 3, 4, 6);
    /// `--program` prints the forward and reverse derivatives made from it.
    Linear,
}

impl From<AdMode> for nabla_lang::translate::Mode {
    fn from(m: AdMode) -> Self {
        use nabla_lang::translate::Mode;
        match m {
            AdMode::Forward => Mode::Forward,
            AdMode::Reverse => Mode::Reverse,
            AdMode::Cps => Mode::Cps,
            AdMode::Linear => unreachable!("the linear mode is dispatched in `ad`"),
        }
    }
}

/// What a command produced: text for stdout and stderr, and the exit status.
struct Report {
    stdout: String,
    stderr: String,
    status: u8,
}

impl Report {
    fn ok(stdout: String) -> Report {
        Report {
            stdout,
            stderr: String::new(),
            status: 0,
        }
    }

    fn failed(stderr: String) -> Report {
        Report {
            stdout: String::new(),
            stderr,
            status: 1,
        }
    }
}

/// The name of `path` in messages.
fn source_name(path: &str) -> &str {
    if path == STDIN_PATH { STDIN_NAME } else { path }
}

/// Reads a source file (standard input for `-`); on failure, a rendered error.
pub(crate) fn read_source(
    path: &str,
    sources_for_errors: &mut SourceMap,
) -> Result<String, String> {
    if path == STDIN_PATH {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(
            &mut std::io::Read::take(std::io::stdin().lock(), MAX_SOURCE_BYTES + 1),
            &mut bytes,
        )
        .map_err(|e| format!("error: cannot read standard input: {e}\n"))?;
        return decode_source(STDIN_NAME, bytes, sources_for_errors);
    }
    let meta =
        std::fs::metadata(path).map_err(|e| format!("error: cannot read `{path}`: {e}\n"))?;
    if meta.len() > MAX_SOURCE_BYTES {
        return Err(format!(
            "error: `{path}` is too large ({} bytes; the limit is {MAX_SOURCE_BYTES})\n",
            meta.len()
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("error: cannot read `{path}`: {e}\n"))?;
    decode_source(path, bytes, sources_for_errors)
}

/// Source text as UTF-8; on failure, a rendered error pointing at the bad byte.
fn decode_source(
    path: &str,
    bytes: Vec<u8>,
    sources_for_errors: &mut SourceMap,
) -> Result<String, String> {
    if bytes.len() as u64 > MAX_SOURCE_BYTES {
        return Err(format!(
            "error: `{path}` is too large (the limit is {MAX_SOURCE_BYTES} bytes)\n"
        ));
    }
    match String::from_utf8(bytes) {
        Ok(s) => Ok(s),
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let lossy = String::from_utf8_lossy(e.as_bytes()).into_owned();
            let file = sources_for_errors.add(path, lossy);
            let base = sources_for_errors.file(file).base;
            let at = base.saturating_add(valid as u32);
            let d = Diagnostic::error(
                "source file is not valid UTF-8",
                Span::new(at, at.saturating_add(1)),
            )
            .with_label("invalid byte sequence here");
            Err(d.render(sources_for_errors))
        }
    }
}

fn load_file(session: &mut Session, path: &str) -> Result<Vec<(String, String)>, String> {
    let text = read_source(path, &mut session.sources)?;
    session
        .load(source_name(path), &text)
        .map_err(|ds| session.render(&ds))
}

/// The N of `--repeat N`: a whole number, at least 1.
fn parse_repeat(text: &str) -> Result<NonZeroU32, String> {
    match text.parse::<u32>() {
        Ok(n) => NonZeroU32::new(n).ok_or_else(|| "N must be at least 1".to_string()),
        Err(e) => Err(format!(
            "N must be a whole number from 1 to {}: {e}",
            u32::MAX
        )),
    }
}

/// How `nabla run` times `main` (`--repeat`, `-v`).
#[derive(Clone, Copy)]
struct RunTiming {
    repeat: Option<NonZeroU32>,
    verbose: bool,
}

/// The choices of `nabla run --backend`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum BackendChoice {
    /// Native code where the compiler handles the program, else the interpreter.
    Auto,
    /// Native code only.
    Native,
    /// The interpreter.
    Interp,
}

/// `main` compiled to native code, or why not.
fn compile_native(
    session: &Session,
    limits: Limits,
    emit_clif: bool,
    with_argument: bool,
) -> Result<nabla_native::Native, Diagnostic> {
    let unsupported = |u: nabla_lang::core::lower_typed::Unsupported| {
        Diagnostic::error(
            format!("native code does not handle {} yet", u.what),
            u.span,
        )
        .with_label("here")
        .with_note("`--backend interp` (or the default `auto`) runs it in the interpreter")
    };
    let (prog, entry) = session.typed_program("main").map_err(unsupported)?;
    let options = nabla_native::Options {
        limits,
        keep_ir: emit_clif,
    };
    if with_argument {
        nabla_native::Native::compile(&prog, entry, &options).map_err(unsupported)
    } else {
        nabla_native::Native::compile_main(&prog, entry, &options).map_err(unsupported)
    }
}

/// What `nabla run` was asked besides the file, the limits and the timing.
struct RunChoices {
    backend: BackendChoice,
    emit_clif: bool,
    /// The file holding `main`'s argument.
    input: Option<String>,
    output: input::Output,
}

/// The type of what `nabla run` prints: `main`'s, or its result's when it
/// is applied to an argument.
fn printed_type(session: &Session, applied: bool) -> nabla_lang::types::Type {
    use nabla_lang::types::Type;
    match (session.type_of("main"), applied) {
        (Some(Type::Fun(_, result)), true) => (**result).clone(),
        (Some(t), _) => t.clone(),
        (None, _) => Type::Unit,
    }
}

/// `nabla run` on native code, or why it cannot run there (the caller
/// falls back to the interpreter or reports it).
fn run_native(
    session: &Session,
    limits: Limits,
    timing: RunTiming,
    choices: &RunChoices,
    argument: Option<&nabla_lang::eval::Value>,
    load_time: std::time::Duration,
) -> Result<Report, Diagnostic> {
    let start = Instant::now();
    let native = compile_native(session, limits, choices.emit_clif, argument.is_some())?;
    let argument: Vec<nabla_lang::eval::Value> = argument.into_iter().cloned().collect();
    let args = native.args(&argument).map_err(Diagnostic::from)?;
    let preparation = load_time + start.elapsed();
    let mut stderr = String::new();
    if choices.emit_clif {
        for (name, ir) in native.ir() {
            stderr.push_str(&format!("; {name}\n{ir}\n"));
        }
    }
    let measured = timing::measure(timing.repeat, || {
        native
            .call_with(&args)
            .map_err(|e| vec![nabla_lang::driver::runtime_diagnostic(limits, e)])
    });
    Ok(match measured {
        Ok(m) => {
            stderr.push_str(&timing::report(
                &m,
                preparation,
                Backend::Native,
                timing.verbose,
            ));
            if timing.verbose {
                stderr.push_str(&format!(
                    "native: compiled in {:.1} ms\n",
                    native.compile_time.as_secs_f64() * 1e3
                ));
            }
            printed(
                &m.value,
                &printed_type(session, !argument.is_empty()),
                choices.output,
                stderr,
            )
        }
        Err(ds) => {
            stderr.push_str(&session.render(&ds));
            Report {
                stdout: String::new(),
                stderr,
                status: 1,
            }
        }
    })
}

/// The report of a run that produced `value`.
fn printed(
    value: &nabla_lang::eval::Value,
    ty: &nabla_lang::types::Type,
    output: input::Output,
    stderr: String,
) -> Report {
    match input::print(value, ty, output) {
        Ok(stdout) => Report {
            stdout,
            stderr,
            status: 0,
        },
        Err(e) => Report {
            stdout: String::new(),
            stderr: stderr + &e,
            status: 1,
        },
    }
}

fn run(file: &str, limits: Limits, timing: RunTiming, choices: RunChoices) -> Report {
    let mut session = Session::new();
    session.limits = limits;
    let text = match read_source(file, &mut session.sources) {
        Ok(text) => text,
        Err(e) => return Report::failed(e),
    };
    let start = Instant::now();
    if let Err(ds) = session.load(source_name(file), &text) {
        return Report::failed(session.render(&ds));
    }
    // `main`'s argument, when it takes one.
    let parameter = match session.main_parameter() {
        Ok(p) => p,
        Err(ds) => return Report::failed(session.render(&ds)),
    };
    let mut notes = String::new();
    let argument = match (&choices.input, &parameter) {
        (Some(path), Some(ty)) => match input::read(path, ty) {
            Ok(v) => Some(v),
            Err(e) => return Report::failed(e),
        },
        (Some(_), None) => {
            return Report::failed(
                "error: `--input` gives `main` an argument, but `main` takes none\n".into(),
            );
        }
        (None, Some(ty)) => {
            notes = format!(
                "note: `main` is a function: give its argument (of type {}) with `--input FILE`\n",
                nabla_lang::pretty::print_type(ty)
            );
            None
        }
        (None, None) => None,
    };
    let mut fallback_note = String::new();
    if choices.backend != BackendChoice::Interp && (parameter.is_none() || argument.is_some()) {
        match run_native(
            &session,
            limits,
            timing,
            &choices,
            argument.as_ref(),
            start.elapsed(),
        ) {
            Ok(report) => return report,
            Err(d) if choices.backend == BackendChoice::Native => {
                return Report::failed(session.render(&[d]));
            }
            Err(d) if timing.verbose => {
                fallback_note = format!(
                    "note: running in the interpreter: {}",
                    session.render(&[d]).trim_start_matches("error: ")
                );
            }
            Err(_) => {}
        }
    }
    let prepared = session.prepare_main();
    let preparation = start.elapsed();
    let measured = prepared.and_then(|main| {
        timing::measure(timing.repeat, || match &argument {
            Some(arg) => main.evaluate_with(arg.clone()),
            None => main.evaluate(),
        })
    });
    match measured {
        Ok(m) => printed(
            &m.value,
            &printed_type(&session, argument.is_some()),
            choices.output,
            notes
                + &fallback_note
                + &timing::report(&m, preparation, Backend::Interpreter, timing.verbose),
        ),
        Err(ds) => Report::failed(session.render(&ds)),
    }
}

fn check(file: &str) -> Report {
    let mut session = Session::new();
    match load_file(&mut session, file) {
        Ok(types) => Report::ok(types.iter().map(|(n, t)| format!("{n} : {t}\n")).collect()),
        Err(e) => Report::failed(e),
    }
}

fn eval(expr: &str, limits: Limits) -> Report {
    let mut session = Session::new();
    session.limits = limits;
    match session.eval_expr("<eval>", expr) {
        Ok(v) => Report::ok(format!("{v}\n")),
        Err(ds) => Report::failed(session.render(&ds)),
    }
}

fn ad(
    file: &str,
    mode: AdMode,
    def: Option<&str>,
    run: bool,
    program: bool,
    limits: Limits,
) -> Report {
    let mut session = Session::new();
    if let Err(e) = load_file(&mut session, file) {
        return Report::failed(e);
    }
    if let AdMode::Linear = mode {
        if run {
            return Report::failed(
                "error: --mode linear prints the Jacobian (or, with --program, the derivatives \
                 made from it); it has no --run\n"
                    .into(),
            );
        }
        return match session.linear_translation(def, program) {
            Ok(text) => Report::ok(text),
            Err(ds) => Report::failed(session.render(&ds)),
        };
    }
    let mode = mode.into();
    if !(run || program) {
        return match session.translation(mode, def) {
            Ok(text) => Report::ok(text),
            Err(ds) => Report::failed(session.render(&ds)),
        };
    }
    if def.is_some() {
        return Report::failed(
            "error: --run and --program differentiate what `main` differentiates; drop --def\n"
                .into(),
        );
    }
    let text = match session.runnable_translation(mode) {
        Ok(text) => text,
        Err(ds) => return Report::failed(session.render(&ds)),
    };
    if program {
        return Report::ok(text);
    }
    // Run the printed program: what runs is exactly what a user would read.
    let mut translated = Session::new();
    translated.limits = limits;
    let name = format!("{} (translated)", source_name(file));
    match translated
        .load(&name, &text)
        .and_then(|_| translated.run_main())
    {
        Ok(v) => Report::ok(format!("{v}\n")),
        Err(ds) => Report::failed(translated.render(&ds)),
    }
}

fn emit(r: &Report) -> ExitCode {
    let _ = std::io::stdout().write_all(r.stdout.as_bytes());
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().write_all(r.stderr.as_bytes());
    ExitCode::from(r.status)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(bytes) = cli.max_memory {
        nabla_lang::memory::set_budget(bytes);
    }
    match cli.command {
        Command::Bench { quick } => return bench::run(quick),
        Command::Repl { files, limits } => {
            let limits = limits.limits();
            return match nabla_lang::stack::try_run_with_stack(move || repl::run(&files, limits)) {
                Ok(code) => ExitCode::from(code),
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(1)
                }
            };
        }
        _ => {}
    }
    // Every phase runs on a thread with a large, explicitly sized stack;
    // deep input then fails cleanly on the stack budget, never overflows.
    let report = nabla_lang::stack::try_run_with_stack(move || dispatch(cli.command));
    match report {
        Ok(r) => emit(&r),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// Runs a command other than `repl` and `bench`.
fn dispatch(command: Command) -> Report {
    match command {
        Command::Run {
            file,
            repeat,
            verbose,
            quiet,
            backend,
            emit_clif,
            input,
            output,
            limits,
        } => {
            nabla_lang::eval::tracing::set_quiet(quiet);
            run(
                &file,
                limits.limits(),
                RunTiming { repeat, verbose },
                RunChoices {
                    backend,
                    emit_clif,
                    input,
                    output,
                },
            )
        }
        Command::Check { file } => check(&file),
        Command::Eval { expr, limits } => eval(&expr, limits.limits()),
        Command::Ad {
            mode,
            def,
            run,
            program,
            file,
            limits,
        } => ad(&file, mode, def.as_deref(), run, program, limits.limits()),
        Command::Repl { .. } | Command::Bench { .. } => Report::ok(String::new()),
    }
}

/// Whether `path` names an existing file (for `:load`).
pub(crate) fn exists(path: &str) -> bool {
    Path::new(path).is_file()
}
