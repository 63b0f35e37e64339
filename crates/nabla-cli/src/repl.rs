//! The interactive loop: `nabla repl`.

use nabla_lang::driver::Session;
use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;

const HELP: &str = "\
Enter a definition (`def f x = x * x`) or an expression (`f 3.0`).
Definitions accumulate; a new definition replaces an older one of the same name.
Commands:
  :type EXPR    show the type of an expression
  :load FILE    load the definitions of a file
  :defs         list the definitions in force with their types
  :help         show this help
  :quit         leave (also Ctrl-D)";

fn history_path() -> Option<std::path::PathBuf> {
    std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".nabla_history"))
}

/// Runs the loop until `:quit` or end of input; returns the exit status.
pub(crate) fn run() -> u8 {
    let mut editor = match DefaultEditor::new() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: cannot start the line editor: {e}");
            return 1;
        }
    };
    if let Some(p) = history_path() {
        let _ = editor.load_history(&p);
    }
    let mut session = Session::new();
    let mut n = 0usize;
    println!(
        "nabla {} — :help for help, :quit to leave",
        env!("CARGO_PKG_VERSION")
    );
    loop {
        let line = match editor.readline("nabla> ") {
            Ok(l) => l,
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(e) => {
                eprintln!("error: {e}");
                break;
            }
        };
        let input = line.trim();
        if input.is_empty() || input.starts_with('#') {
            continue;
        }
        let _ = editor.add_history_entry(input);
        n += 1;
        if !handle(&mut session, input, n) {
            break;
        }
    }
    if let Some(p) = history_path() {
        let _ = editor.save_history(&p);
    }
    0
}

/// Handles one line; returns `false` to leave.
fn handle(session: &mut Session, input: &str, n: usize) -> bool {
    let name = format!("<repl:{n}>");
    if let Some(cmd) = input.strip_prefix(':') {
        let (word, rest) = cmd.split_once(char::is_whitespace).unwrap_or((cmd, ""));
        let rest = rest.trim();
        match word {
            "q" | "quit" => return false,
            "h" | "help" => println!("{HELP}"),
            "t" | "type" => match session.type_of_expr(&name, rest) {
                Ok(t) => println!("{rest} : {t}"),
                Err(ds) => eprint!("{}", session.render(&ds)),
            },
            "l" | "load" => {
                if !crate::exists(rest) {
                    eprintln!("error: cannot read `{rest}`: no such file");
                } else {
                    match crate::read_source(rest, &mut session.sources) {
                        Err(e) => eprint!("{e}"),
                        Ok(text) => match session.load(rest, &text) {
                            Ok(types) => {
                                println!("loaded {} definition(s) from {rest}", types.len())
                            }
                            Err(ds) => eprint!("{}", session.render(&ds)),
                        },
                    }
                }
            }
            "defs" => match session.check_all() {
                Ok(types) => types.iter().for_each(|(n, t)| println!("{n} : {t}")),
                Err(ds) => eprint!("{}", session.render(&ds)),
            },
            _ => eprintln!("error: unknown command `:{word}` (try :help)"),
        }
        return true;
    }
    if input.starts_with("def") && input[3..].starts_with(|c: char| c.is_whitespace()) {
        match session.load(&name, input) {
            Ok(types) => types.iter().for_each(|(n, t)| println!("{n} : {t}")),
            Err(ds) => eprint!("{}", session.render(&ds)),
        }
    } else {
        match session.eval_expr(&name, input) {
            Ok(v) => println!("{v}"),
            Err(ds) => eprint!("{}", session.render(&ds)),
        }
    }
    true
}
