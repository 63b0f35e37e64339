//! The interactive loop: `nabla repl`.

use nabla_lang::driver::Session;
use nabla_lang::eval::Limits;
use nabla_lang::syntax::lexer::{Tok, lex};
use nabla_lang::syntax::parser::{IdGen, parse_expression, parse_program};
use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

const PROMPT: &str = "nabla> ";
/// The prompt for the next line of an entry that is not complete yet.
const CONTINUATION_PROMPT: &str = "  ...> ";

const HELP: &str = "\
Enter a definition (`def f x = x * x`) or an expression (`f 3.0`).
Definitions accumulate; a new definition replaces an older one of the same name.
An entry that is not complete (an open bracket, a trailing operator, `let`
without `in`, `def f x =`) continues on the next line; an empty line ends it.
`it` is the last value printed (numbers, tuples, vectors; not functions).
Ctrl-C stops an evaluation and keeps the definitions.
Commands:
  :type EXPR    show the type of an expression
  :load FILE    load the definitions of a file
  :reload       read the loaded files again (and redo the definitions typed since)
  :defs         list the definitions in force with their types
  :help         show this help
  :quit         leave (also Ctrl-D)";

fn history_path() -> Option<std::path::PathBuf> {
    std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".nabla_history"))
}

/// Something that added definitions to the session, kept for `:reload`.
enum Source {
    /// A file loaded from the command line or with `:load`.
    File(String),
    /// Definitions typed at the prompt: the entry's name and text.
    Typed(String, String),
}

/// The session and how it was built.
struct Repl {
    session: Session,
    /// Everything that added definitions, in order.
    sources: Vec<Source>,
    /// Entries read so far (names the entries in error messages).
    entries: usize,
    interrupt: Arc<AtomicBool>,
}

impl Repl {
    fn new(limits: Limits, interrupt: Arc<AtomicBool>) -> Repl {
        Repl {
            session: fresh_session(limits, &interrupt),
            sources: Vec::new(),
            entries: 0,
            interrupt,
        }
    }

    /// Loads a file; prints what it defined or the errors.
    fn load_file(&mut self, path: &str) {
        if !crate::exists(path) {
            eprintln!("error: cannot read `{path}`: no such file");
            return;
        }
        match crate::read_source(path, &mut self.session.sources) {
            Err(e) => eprint!("{e}"),
            Ok(text) => match self.session.load(path, &text) {
                Ok(types) => {
                    println!("loaded {} definition(s) from {path}", types.len());
                    self.sources
                        .retain(|s| !matches!(s, Source::File(p) if p == path));
                    self.sources.push(Source::File(path.to_string()));
                }
                Err(ds) => eprint!("{}", self.session.render(&ds)),
            },
        }
    }

    /// Starts again from an empty session, re-reading the files and redoing
    /// the typed definitions in their original order.
    fn reload(&mut self) {
        let limits = self.session.limits;
        self.session = fresh_session(limits, &self.interrupt);
        for source in std::mem::take(&mut self.sources) {
            match source {
                Source::File(path) => self.load_file(&path),
                Source::Typed(name, text) => self.define(&name, &text, false),
            }
        }
    }

    /// Adds typed definitions; prints their types (if `verbose`) or the errors.
    fn define(&mut self, name: &str, text: &str, verbose: bool) {
        match self.session.load(name, text) {
            Ok(types) => {
                if verbose {
                    types.iter().for_each(|(n, t)| println!("{n} : {t}"));
                }
                self.sources
                    .push(Source::Typed(name.to_string(), text.to_string()));
            }
            Err(ds) => eprint!("{}", self.session.render(&ds)),
        }
    }

    /// Handles one entry; returns `false` to leave.
    fn handle(&mut self, input: &str) -> bool {
        self.entries += 1;
        let name = format!("<repl:{}>", self.entries);
        let trimmed = input.trim();
        if let Some(cmd) = trimmed.strip_prefix(':') {
            let (word, rest) = cmd.split_once(char::is_whitespace).unwrap_or((cmd, ""));
            let rest = rest.trim();
            match word {
                "q" | "quit" => return false,
                "h" | "help" | "?" => println!("{HELP}"),
                "t" | "type" => match self.session.type_of_expr(&name, rest) {
                    Ok(t) => println!("{rest} : {t}"),
                    Err(ds) => eprint!("{}", self.session.render(&ds)),
                },
                "l" | "load" => self.load_file(rest),
                "r" | "reload" => self.reload(),
                "defs" => match self.session.check_all() {
                    Ok(types) => types.iter().for_each(|(n, t)| println!("{n} : {t}")),
                    Err(ds) => eprint!("{}", self.session.render(&ds)),
                },
                _ => eprintln!("error: unknown command `:{word}` (try :help)"),
            }
            return true;
        }
        // The text is passed on untrimmed so that error columns are those
        // of the line as typed.
        if starts_with_def(trimmed) {
            self.define(&name, input, true);
        } else {
            // A Ctrl-C pressed while no evaluation ran must not stop this one.
            self.interrupt.store(false, Ordering::Relaxed);
            match self.session.eval_expr(&name, input) {
                Ok(v) => println!("{v}"),
                Err(ds) => eprint!("{}", self.session.render(&ds)),
            }
        }
        true
    }
}

fn fresh_session(limits: Limits, interrupt: &Arc<AtomicBool>) -> Session {
    let mut session = Session::new();
    session.limits = limits;
    session.interrupt = Some(Arc::clone(interrupt));
    session
}

/// Whether `text` is a definition (`def …` or `type …`) rather than an expression.
fn starts_with_def(text: &str) -> bool {
    ["def", "type"].iter().any(|kw| {
        text.strip_prefix(kw)
            .is_some_and(|rest| rest.starts_with(char::is_whitespace))
    })
}

/// Whether `text` is the beginning of an entry rather than a whole one: it
/// leaves a bracket open, or does not parse only because it stops early (a
/// trailing operator, `let` without `in`, `def f x =`).
fn is_incomplete(text: &str) -> bool {
    let trimmed = text.trim();
    if trimmed.is_empty() || trimmed.starts_with(':') {
        return false;
    }
    let (tokens, _) = lex(text, 0);
    if tokens.len() <= 1 {
        // Only a comment (the token list always ends with `Eof`).
        return false;
    }
    let mut open = 0i64;
    let mut last_end = 0;
    for t in &tokens {
        match t.kind {
            Tok::LParen | Tok::LBracket => open += 1,
            Tok::RParen | Tok::RBracket => open -= 1,
            Tok::Eof => continue,
            _ => {}
        }
        last_end = t.span.end;
    }
    if open > 0 {
        return true;
    }
    let mut ids = IdGen::new();
    let errors = if starts_with_def(trimmed) {
        parse_program(text, 0, &mut ids).1
    } else {
        parse_expression(text, 0, &mut ids)
            .err()
            .unwrap_or_default()
    };
    // The parser reports an unfinished construct at its start (`let` without
    // `in`), marking the end of the input as a secondary place.
    errors
        .iter()
        .any(|e| e.span.start >= last_end || e.secondary.iter().any(|l| l.span.start >= last_end))
}

/// Reads one entry: a line, and more lines while it is incomplete (an
/// empty line submits it as it is). `None` if Ctrl-C abandoned it.
fn read_entry(editor: &mut DefaultEditor) -> Result<Option<String>, ReadlineError> {
    let mut text = match editor.readline(PROMPT) {
        Ok(line) => line,
        Err(ReadlineError::Interrupted) => return Ok(None),
        Err(e) => return Err(e),
    };
    while is_incomplete(&text) {
        match editor.readline(CONTINUATION_PROMPT) {
            Ok(line) if line.trim().is_empty() => break,
            Ok(line) => {
                text.push('\n');
                text.push_str(&line);
            }
            Err(ReadlineError::Interrupted) => return Ok(None),
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(e),
        }
    }
    Ok(Some(text))
}

/// Runs the loop until `:quit` or end of input, after loading `files`;
/// returns the exit status.
pub(crate) fn run(files: &[String], limits: Limits) -> u8 {
    let mut editor = match DefaultEditor::new() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: cannot start the line editor: {e}");
            return 1;
        }
    };
    let history = history_path();
    if let Some(p) = &history {
        let _ = editor.load_history(p);
    }
    // Ctrl-C while an evaluation runs (the terminal is not in raw mode then)
    // sets the flag, which stops the evaluation; at the prompt, the line
    // editor sees Ctrl-C as a key instead.
    let interrupt = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&interrupt);
    if let Err(e) = ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed)) {
        eprintln!("warning: Ctrl-C will not stop evaluations ({e})");
    }
    let mut repl = Repl::new(limits, interrupt);
    println!(
        "nabla {} — :help for help, :quit to leave",
        env!("CARGO_PKG_VERSION")
    );
    for f in files {
        repl.load_file(f);
    }
    loop {
        let input = match read_entry(&mut editor) {
            Ok(Some(text)) => text,
            Ok(None) => continue,
            Err(ReadlineError::Eof) => break,
            Err(e) => {
                eprintln!("error: {e}");
                break;
            }
        };
        let trimmed = input.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        // Saved as it goes: a session that ends abruptly keeps its history.
        let _ = editor.add_history_entry(trimmed);
        if let Some(p) = &history {
            let _ = editor.append_history(p);
        }
        if !repl.handle(&input) {
            break;
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::is_incomplete;

    #[test]
    fn incomplete_entries_are_recognised() {
        for text in [
            "(1, 2",
            "[1,\n 2",
            "1 +",
            "let x = 1",
            "def f x =",
            "def f x = let y = x in",
            "if true then 1",
            "fun x ->",
        ] {
            assert!(is_incomplete(text), "{text:?}");
        }
        for text in [
            "1 + 2",
            "def f x = x",
            "1 + true",
            "(1, 2))",
            ":type (1,",
            "",
            "1 + )",
            "def f x = x\ndef g y = f y",
            "# a comment",
        ] {
            assert!(!is_incomplete(text), "{text:?}");
        }
    }
}
