//! Printing named-core programs ([`crate::core::named`]) as nabla source.
//!
//! The output re-parses, type-checks and runs: it is how the source-to-source
//! AD translations are shown. [`print_program`] and [`print_expr`] follow
//! these rules:
//!
//! * **Parentheses** only where the parser needs them (see the precedence
//!   table in `docs/language.md`), plus two for the reader: a negation as
//!   the right operand of a binary operator or of another negation is
//!   parenthesised (`a - (-b)`, `-(-x)`). `let`, `if`, `fun` and `match`
//!   are left bare where they end the enclosing expression
//!   (`1.0 + if c then a else b`) and parenthesised elsewhere.
//! * **Layout** at 100 columns, with [Wadler's algorithm][wadler]: a group
//!   prints on one line if it fits, else it breaks. `def f x =` keeps its
//!   body on the same line if it fits, else indents it by 2 on the next
//!   lines; two or more `let … in` in a row (or one that defines a
//!   function, or is wider than 60 columns) print one binding per line at
//!   the same indentation; `if` (wider than 60), `match` (wider than 50),
//!   `fun` and `do` break into their conventional multi-line shapes, a `do`
//!   block with two or more statements always; a `do` block stays on the
//!   line of its `=`, `->`, `then` or `else` (`def f x = do {`), and a call
//!   whose `fun` or `do` argument is followed only by short ones keeps its
//!   arguments on its line and breaks inside the `fun` (`map (fun x ->`).
//!   The same input gives the same text; no line has trailing spaces;
//!   definitions are separated by one blank line; a program ends with one
//!   newline.
//! * **Sugar**: `if a then b else false` prints as `a && b` and
//!   `if a then true else b` as `a || b` (what they lower from); a
//!   projection from a pair as `fst e`/`snd e`, from a wider tuple as
//!   `let (_, x, _) = e in x`; an operator used as a value as a `fun`
//!   (`fun a b -> a + b`: the language has no operator sections).
//! * **Literals**: Reals with [`super::format_real`] (always a `.` or an
//!   exponent, shortest round-trip); `inf`, `-inf` and `nan`, which have no
//!   literal, as `1.0 / 0.0`, `-1.0 / 0.0` and `0.0 / 0.0`. The one
//!   annotation printed: `sum` of an empty vector literal at a type other
//!   than Int, `sum ([] : Vec Real)` (annotations are dropped by lowering,
//!   and nothing else would fix the element type).
//! * **Names**: variables print as they are, except a binder whose name the
//!   printed program also needs for a primitive (a user `let sum = …` in a
//!   program that also calls the built-in `sum`), or that is a keyword of the
//!   output: such a binder and its uses are renamed with primes (`sum'`).
//! * **Translated programs**: a program that contains a construct of the
//!   translated dialect (a `do` block, `runDelta`, a polytypic helper
//!   `initVars @(Vec Real)`, a Delta or reference primitive) starts with the
//!   line `#!translated`. In such a program `let () = e1 in e2` prints as the
//!   sequence `e1; e2`, bare where it reads as in OCaml (the body of a
//!   `def`, `let` or `fun`, a `let` value, a `match` arm: these extend over
//!   `;`) and parenthesised elsewhere (an `if` branch, a tuple component,
//!   an operand, the last item of a `do` block).
//!
//! A program nested too deeply for the printer's stack budget prints `...`
//! where the budget ran out (the same convention as values).
//!
//! [wadler]: https://homepages.inf.ed.ac.uk/wadler/papers/prettier/prettier.pdf

use super::{format_real, print_type};
use crate::core::Lit;
use crate::core::named::{Def, Expr, Pat, PrimAt, Program};
use crate::prim::Prim;
use crate::stack;
use crate::types::Type;
use std::cell::Cell;
use std::collections::{HashMap, HashSet};

/// Line width the layout aims for.
pub const WIDTH: usize = 100;

/// The widest one-line `let … in …` (a longer one puts its body on the next line).
const SHORT_LET: usize = 60;

/// The widest one-line `if` (a longer one prints `then` and `else` branches on lines of their own).
const SHORT_IF: usize = 60;

/// The widest one-line `match` (a longer one prints one arm per line).
const SHORT_MATCH: usize = 50;

/// The widest argument that may follow a hanging `fun` on its closing line.
const SHORT_ARG: usize = 24;

/// The first line of every program that uses the translated dialect.
pub use crate::syntax::lexer::TRANSLATED_HEADER;

/// Prints a program as nabla source (see the module docs).
pub fn print_program(p: &Program) -> String {
    let translated = program_is_translated(p);
    let renamed;
    let p = match rename_program(p, translated) {
        Some(q) => {
            renamed = q;
            &renamed
        }
        None => p,
    };
    let printer = Printer::new(translated);
    let mut out = String::new();
    if translated {
        out.push_str(TRANSLATED_HEADER);
        out.push('\n');
        if !p.defs.is_empty() {
            out.push('\n');
        }
    }
    for (i, d) in p.defs.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&render(&printer.def(d), WIDTH));
        out.push('\n');
    }
    out
}

/// Prints an expression as nabla source, without a trailing newline. In an
/// expression that contains a translated construct, `let () = e1 in e2`
/// prints as `e1; e2`.
pub fn print_expr(e: &Expr) -> String {
    let translated = expr_is_translated(e);
    let renamed;
    let e = match rename_expr(e, translated) {
        Some(x) => {
            renamed = x;
            &renamed
        }
        None => e,
    };
    let printer = Printer::new(translated);
    render(&printer.expr(e, Ctx::TOP), WIDTH)
}

/// True if the program uses a construct of the translated dialect, so that
/// its printed form needs the [`TRANSLATED_HEADER`].
pub fn program_is_translated(p: &Program) -> bool {
    p.defs.iter().any(|d| expr_is_translated(&d.body))
}

/// True if `e` uses a construct of the translated dialect.
pub fn expr_is_translated(e: &Expr) -> bool {
    let mut found = false;
    walk(e, &mut |x| {
        found |= match x {
            Expr::Bind(..) | Expr::RunDelta(..) | Expr::Poly(..) => true,
            Expr::Prim(p, _) | Expr::PrimRef(p) => is_translated_prim(p.prim),
            _ => false,
        };
    });
    found
}

/// True for the primitives that exist only in translated programs (the
/// Delta, monad and reference-cell operations).
fn is_translated_prim(p: Prim) -> bool {
    p.info().translated
}

/// Calls `f` on `e` and every expression inside it (iteratively: no native
/// recursion on the depth of `e`).
fn walk<'a>(e: &'a Expr, f: &mut dyn FnMut(&'a Expr)) {
    let mut work = vec![e];
    while let Some(e) = work.pop() {
        f(e);
        match e {
            Expr::Var(_) | Expr::Lit(_) | Expr::PrimRef(_) | Expr::Poly(..) => {}
            Expr::Lam(_, b) | Expr::Inl(b) | Expr::Inr(b) => work.push(b),
            Expr::Proj { tuple, .. } => work.push(tuple),
            Expr::App(f, args) => {
                work.push(f);
                work.extend(args);
            }
            Expr::Let(_, v, b) | Expr::Bind(_, v, b) | Expr::RunDelta(v, b) => {
                work.push(v);
                work.push(b);
            }
            Expr::LetRec { value, body, .. } => {
                work.push(value);
                work.push(body);
            }
            Expr::Tuple(es) | Expr::Vector(es) | Expr::Prim(_, es) => work.extend(es),
            Expr::Case {
                scrutinee,
                left,
                right,
            } => {
                work.push(scrutinee);
                work.push(&left.1);
                work.push(&right.1);
            }
            Expr::If(c, a, b) => {
                work.push(c);
                work.push(a);
                work.push(b);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Renaming binders that would hide a primitive or are keywords
// ---------------------------------------------------------------------------

const KEYWORDS: &[&str] = &[
    "def", "let", "rec", "in", "fun", "if", "then", "else", "match", "with", "inl", "inr", "true",
    "false", "trace",
];

/// Words that are keywords only in translated files.
const TRANSLATED_KEYWORDS: &[&str] = &["do", "runDelta"];

/// The names a binder must not have in the printed program: the names the
/// printer writes for primitives and helpers, and keywords.
fn reserved_names(exprs: &[&Expr], translated: bool) -> HashSet<String> {
    let mut r: HashSet<String> = KEYWORDS.iter().map(|s| s.to_string()).collect();
    if translated {
        r.extend(TRANSLATED_KEYWORDS.iter().map(|s| s.to_string()));
    }
    for e in exprs {
        walk(e, &mut |x| match x {
            Expr::Prim(p, _) | Expr::PrimRef(p) => {
                let info = p.prim.info();
                if info.named {
                    r.insert(info.name.to_string());
                }
            }
            Expr::Proj {
                arity: 2, index, ..
            } => {
                r.insert(if *index == 0 { "fst" } else { "snd" }.to_string());
            }
            Expr::Poly(p, _) => {
                r.insert(p.name().to_string());
            }
            _ => {}
        });
    }
    r
}

fn pat_names<'a>(p: &'a Pat, out: &mut Vec<&'a str>) {
    match p {
        Pat::Var(n) => out.push(n),
        Pat::Wild => {}
        Pat::Tuple(ps) => ps.iter().for_each(|q| pat_names(q, out)),
    }
}

/// Every name bound or used in `e`.
fn all_names<'a>(e: &'a Expr, out: &mut HashSet<&'a str>) {
    let mut names = Vec::new();
    walk(e, &mut |x| match x {
        Expr::Var(n) => names.push(n.as_str()),
        Expr::Lam(ps, _) => ps.iter().for_each(|p| pat_names(p, &mut names)),
        Expr::Let(p, _, _) | Expr::Bind(p, _, _) => pat_names(p, &mut names),
        Expr::LetRec { name, params, .. } => {
            names.push(name);
            params.iter().for_each(|p| pat_names(p, &mut names));
        }
        Expr::Case { left, right, .. } => {
            pat_names(&left.0, &mut names);
            pat_names(&right.0, &mut names);
        }
        _ => {}
    });
    out.extend(names);
}

fn binds_reserved(e: &Expr, reserved: &HashSet<String>) -> bool {
    let mut found = false;
    let mut names = Vec::new();
    walk(e, &mut |x| {
        names.clear();
        match x {
            Expr::Lam(ps, _) => ps.iter().for_each(|p| pat_names(p, &mut names)),
            Expr::Let(p, _, _) | Expr::Bind(p, _, _) => pat_names(p, &mut names),
            Expr::LetRec { name, params, .. } => {
                names.push(name);
                params.iter().for_each(|p| pat_names(p, &mut names));
            }
            Expr::Case { left, right, .. } => {
                pat_names(&left.0, &mut names);
                pat_names(&right.0, &mut names);
            }
            _ => {}
        }
        found |= names.iter().any(|n| reserved.contains(*n));
    });
    found
}

/// Hands out names not used anywhere in the program.
struct Renamer {
    reserved: HashSet<String>,
    taken: HashSet<String>,
    /// Innermost last: (source name, printed name).
    scope: Vec<(String, String)>,
    globals: HashMap<String, String>,
}

impl Renamer {
    fn fresh(&mut self, base: &str) -> String {
        let mut n = format!("{base}'");
        while self.taken.contains(&n) || self.reserved.contains(&n) {
            n.push('\'');
        }
        self.taken.insert(n.clone());
        n
    }

    fn binder(&mut self, name: &str) -> String {
        let new = if self.reserved.contains(name) {
            self.fresh(name)
        } else {
            name.to_string()
        };
        self.scope.push((name.to_string(), new.clone()));
        new
    }

    fn pat(&mut self, p: &Pat) -> Pat {
        match p {
            Pat::Var(n) => Pat::Var(self.binder(n)),
            Pat::Wild => Pat::Wild,
            Pat::Tuple(ps) => Pat::Tuple(ps.iter().map(|q| self.pat(q)).collect()),
        }
    }

    fn var(&self, name: &str) -> String {
        if let Some((_, new)) = self.scope.iter().rev().find(|(n, _)| n == name) {
            return new.clone();
        }
        self.globals
            .get(name)
            .cloned()
            .unwrap_or_else(|| name.to_string())
    }

    fn expr(&mut self, e: &Expr) -> Expr {
        if stack::check().is_err() {
            return e.clone();
        }
        let mark = self.scope.len();
        let out = match e {
            Expr::Var(n) => Expr::Var(self.var(n)),
            Expr::Lit(_) | Expr::PrimRef(_) | Expr::Poly(..) => e.clone(),
            Expr::Lam(ps, b) => {
                let ps = ps.iter().map(|p| self.pat(p)).collect();
                Expr::Lam(ps, Box::new(self.expr(b)))
            }
            Expr::App(f, args) => Expr::App(
                Box::new(self.expr(f)),
                args.iter().map(|a| self.expr(a)).collect(),
            ),
            Expr::Let(p, v, b) | Expr::Bind(p, v, b) => {
                let v = Box::new(self.expr(v));
                let p = self.pat(p);
                let b = Box::new(self.expr(b));
                if matches!(e, Expr::Let(..)) {
                    Expr::Let(p, v, b)
                } else {
                    Expr::Bind(p, v, b)
                }
            }
            Expr::LetRec {
                name,
                params,
                value,
                body,
            } => {
                let name = self.binder(name);
                let inner = self.scope.len();
                let params = params.iter().map(|p| self.pat(p)).collect();
                let value = Box::new(self.expr(value));
                self.scope.truncate(inner);
                let body = Box::new(self.expr(body));
                Expr::LetRec {
                    name,
                    params,
                    value,
                    body,
                }
            }
            Expr::Tuple(es) => Expr::Tuple(es.iter().map(|x| self.expr(x)).collect()),
            Expr::Vector(es) => Expr::Vector(es.iter().map(|x| self.expr(x)).collect()),
            Expr::Prim(p, es) => Expr::Prim(p.clone(), es.iter().map(|x| self.expr(x)).collect()),
            Expr::Proj {
                tuple,
                index,
                arity,
            } => Expr::Proj {
                tuple: Box::new(self.expr(tuple)),
                index: *index,
                arity: *arity,
            },
            Expr::Inl(x) => Expr::Inl(Box::new(self.expr(x))),
            Expr::Inr(x) => Expr::Inr(Box::new(self.expr(x))),
            Expr::Case {
                scrutinee,
                left,
                right,
            } => {
                let s = Box::new(self.expr(scrutinee));
                let mut arm = |(p, b): &(Pat, Box<Expr>)| {
                    let m = self.scope.len();
                    let p = self.pat(p);
                    let b = Box::new(self.expr(b));
                    self.scope.truncate(m);
                    (p, b)
                };
                let left = arm(left);
                let right = arm(right);
                Expr::Case {
                    scrutinee: s,
                    left,
                    right,
                }
            }
            Expr::If(c, a, b) => Expr::If(
                Box::new(self.expr(c)),
                Box::new(self.expr(a)),
                Box::new(self.expr(b)),
            ),
            Expr::RunDelta(a, b) => Expr::RunDelta(Box::new(self.expr(a)), Box::new(self.expr(b))),
        };
        self.scope.truncate(mark);
        out
    }
}

/// The program with every binder whose name is reserved (see
/// [`reserved_names`]) renamed, or `None` if there is none.
fn rename_program(p: &Program, translated: bool) -> Option<Program> {
    let bodies: Vec<&Expr> = p.defs.iter().map(|d| &d.body).collect();
    let reserved = reserved_names(&bodies, translated);
    let needed = p.defs.iter().any(|d| {
        reserved.contains(&d.name)
            || binds_reserved(&d.body, &reserved)
            || d.params.iter().any(|q| {
                let mut ns = Vec::new();
                pat_names(q, &mut ns);
                ns.iter().any(|n| reserved.contains(*n))
            })
    });
    if !needed {
        return None;
    }
    let mut taken = HashSet::new();
    for d in &p.defs {
        taken.insert(d.name.as_str());
        all_names(&d.body, &mut taken);
        for q in &d.params {
            let mut ns = Vec::new();
            pat_names(q, &mut ns);
            taken.extend(ns);
        }
    }
    let mut r = Renamer {
        taken: taken.into_iter().map(str::to_string).collect(),
        reserved,
        scope: Vec::new(),
        globals: HashMap::new(),
    };
    for d in &p.defs {
        if r.reserved.contains(&d.name) {
            let new = r.fresh(&d.name);
            r.globals.insert(d.name.clone(), new);
        }
    }
    let defs = p
        .defs
        .iter()
        .map(|d| {
            let params = d.params.iter().map(|q| r.pat(q)).collect();
            let body = r.expr(&d.body);
            r.scope.clear();
            Def {
                name: r.var(&d.name),
                params,
                body,
                ty: d.ty.clone(),
            }
        })
        .collect();
    Some(Program { defs })
}

fn rename_expr(e: &Expr, translated: bool) -> Option<Expr> {
    let reserved = reserved_names(&[e], translated);
    if !binds_reserved(e, &reserved) {
        return None;
    }
    let mut taken = HashSet::new();
    all_names(e, &mut taken);
    let mut r = Renamer {
        taken: taken.into_iter().map(str::to_string).collect(),
        reserved,
        scope: Vec::new(),
        globals: HashMap::new(),
    };
    Some(r.expr(e))
}

// ---------------------------------------------------------------------------
// Documents and Wadler's layout algorithm
// ---------------------------------------------------------------------------

/// A document: text with optional line breaks.
#[derive(Clone, Debug)]
enum Doc {
    Text(String),
    /// A space, or a newline if the enclosing group breaks.
    Line,
    /// Always a newline (its enclosing groups break).
    Hard,
    Cat(Vec<Doc>),
    /// Indent the lines inside by this much more.
    Nest(usize, Box<Doc>),
    /// Indent the lines inside to the column where this starts.
    Align(Box<Doc>),
    /// On one line if it fits, else with every `Line` of its own broken.
    Group(Box<Doc>),
    /// A group that also breaks if its one-line form is wider than this.
    Short(usize, Box<Doc>),
}

fn text(s: impl Into<String>) -> Doc {
    Doc::Text(s.into())
}

fn cat(ds: Vec<Doc>) -> Doc {
    Doc::Cat(ds)
}

fn nest(n: usize, d: Doc) -> Doc {
    Doc::Nest(n, Box::new(d))
}

fn align(d: Doc) -> Doc {
    Doc::Align(Box::new(d))
}

fn group(d: Doc) -> Doc {
    Doc::Group(Box::new(d))
}

/// A group that stays on one line only if that line is at most `max` wide.
fn short(max: usize, d: Doc) -> Doc {
    Doc::Short(max, Box::new(d))
}

/// `(d)`, with the lines of `d` aligned after the parenthesis.
fn parens(d: Doc) -> Doc {
    cat(vec![text("("), align(d), text(")")])
}

/// Indentation stops growing here: a program nested thousands of levels deep
/// would otherwise print a number of spaces quadratic in its depth.
const MAX_INDENT: usize = 60;

/// Lays `doc` out in `width` columns.
fn render(doc: &Doc, width: usize) -> String {
    let mut out = String::new();
    let mut col = 0usize;
    // (indentation, flat?, document), next item last.
    let mut stack: Vec<(usize, bool, &Doc)> = vec![(0, false, doc)];
    let newline = |out: &mut String, col: &mut usize, indent: usize| {
        let trimmed = out.trim_end_matches(' ').len();
        out.truncate(trimmed);
        out.push('\n');
        let indent = indent.min(MAX_INDENT);
        out.extend(std::iter::repeat_n(' ', indent));
        *col = indent;
    };
    while let Some((indent, flat, d)) = stack.pop() {
        match d {
            Doc::Text(s) => {
                out.push_str(s);
                col += s.chars().count();
            }
            Doc::Line if flat => {
                out.push(' ');
                col += 1;
            }
            Doc::Line | Doc::Hard => newline(&mut out, &mut col, indent),
            Doc::Cat(ds) => stack.extend(ds.iter().rev().map(|d| (indent, flat, d))),
            Doc::Nest(n, d) => stack.push((indent + n, flat, d)),
            Doc::Align(d) => stack.push((col, flat, d)),
            Doc::Group(d) => {
                let fl = flat || fits(width.saturating_sub(col), d, &stack);
                stack.push((indent, fl, d));
            }
            Doc::Short(max, d) => {
                let fl = flat || (fits(*max, d, &[]) && fits(width.saturating_sub(col), d, &stack));
                stack.push((indent, fl, d));
            }
        }
    }
    let trimmed = out.trim_end_matches(' ').len();
    out.truncate(trimmed);
    out
}

/// Whether `d` laid out flat, followed by the rest of the document up to
/// its next possible line break, fits in `width` columns. (A later group
/// can always break, so it counts up to its first line.)
fn fits(width: usize, d: &Doc, rest: &[(usize, bool, &Doc)]) -> bool {
    let mut left = width as isize;
    let mut local: Vec<(bool, &Doc)> = vec![(true, d)];
    let mut next_rest = rest.len();
    loop {
        let (flat, d) = match local.pop() {
            Some(x) => x,
            None => {
                if next_rest == 0 {
                    return true;
                }
                next_rest -= 1;
                let (_, flat, d) = rest[next_rest];
                (flat, d)
            }
        };
        match d {
            Doc::Text(s) => {
                left -= s.chars().count() as isize;
                if left < 0 {
                    return false;
                }
            }
            Doc::Line if flat => {
                left -= 1;
                if left < 0 {
                    return false;
                }
            }
            Doc::Hard if flat => return false,
            Doc::Line | Doc::Hard => return true,
            Doc::Cat(ds) => local.extend(ds.iter().rev().map(|d| (flat, d))),
            // A short group inside a flat one must itself be short.
            Doc::Short(max, d) if flat && !fits(*max, d, &[]) => return false,
            Doc::Nest(_, d) | Doc::Align(d) => local.push((flat, d)),
            Doc::Group(d) | Doc::Short(_, d) if flat => local.push((true, d)),
            // A later group will be flat if it fits in what is left, else break.
            Doc::Group(d) => local.push((fits(left.max(0) as usize, d, &[]), d)),
            Doc::Short(max, d) => {
                let flat = fits(*max, d, &[]) && fits(left.max(0) as usize, d, &[]);
                local.push((flat, d))
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Expressions to documents
// ---------------------------------------------------------------------------

/// Precedence levels, loosest first (`docs/language.md`, plus the
/// translated dialect's `;` and `+=`).
mod level {
    /// `e1; e2`
    pub(super) const SEQ: u8 = 0;
    /// `let`, `if`, `fun`, `match`: extend as far right as possible.
    pub(super) const OPEN: u8 = 1;
    /// `r += e` (translated dialect), non-associative.
    pub(super) const ADD_TO: u8 = 2;
    /// `||`
    pub(super) const OR: u8 = 3;
    /// `&&`
    pub(super) const AND: u8 = 4;
    /// `< <= > >= == !=`, non-associative.
    pub(super) const CMP: u8 = 5;
    /// `+ -`
    pub(super) const ADD: u8 = 6;
    /// `* /`
    pub(super) const MUL: u8 = 7;
    /// prefix `-` and `!`
    pub(super) const UNARY: u8 = 8;
    /// `**`, right-associative.
    pub(super) const POW: u8 = 9;
    /// application, `inl e`
    pub(super) const APP: u8 = 10;
    /// `v[i]`
    pub(super) const POSTFIX: u8 = 11;
    /// names, literals, brackets
    pub(super) const ATOM: u8 = 12;
}

use level::*;

/// What follows an expression in the printed text, which decides whether
/// an open construct (`let`, `if`, `fun`, `match`) may stay unparenthesised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tail {
    /// A closing token (`)`, `]`, `,`, `in`, `then`, `else`, `with`, the next `def`).
    Free,
    /// The `| inr` of a `match`: everything but a `match` may end here.
    Bar,
    /// A `;` that ends a sequence's item (which must not extend over it).
    Semi,
    /// An operator or an argument: no open construct may end here.
    Inner,
}

/// Where an expression is printed.
#[derive(Clone, Copy, Debug)]
struct Ctx {
    /// The loosest level allowed without parentheses.
    need: u8,
    tail: Tail,
    /// Parenthesise a negation here (right operands, for the reader).
    neg_paren: bool,
}

impl Ctx {
    const TOP: Ctx = Ctx::new(SEQ, Tail::Free);

    const fn new(need: u8, tail: Tail) -> Ctx {
        Ctx {
            need,
            tail,
            neg_paren: false,
        }
    }

    /// A right operand.
    const fn right(need: u8, tail: Tail) -> Ctx {
        Ctx {
            need,
            tail,
            neg_paren: true,
        }
    }

    /// For the last part of an open construct printed bare in this context.
    fn trailing(self) -> Ctx {
        Ctx::new(if self.need == SEQ { SEQ } else { OPEN }, self.tail)
    }
}

/// A binary operator as printed: its level, symbol and associativity.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Assoc {
    Left,
    Right,
    None,
}

#[derive(Clone, Copy)]
struct BinOp<'a> {
    level: u8,
    symbol: &'static str,
    assoc: Assoc,
    lhs: &'a Expr,
    rhs: &'a Expr,
}

fn bool_lit(e: &Expr) -> Option<bool> {
    match e {
        Expr::Lit(Lit::Bool(b)) => Some(*b),
        _ => None,
    }
}

/// `e` as a binary operator application, if it prints as one.
fn as_binop(e: &Expr) -> Option<BinOp<'_>> {
    match e {
        Expr::Prim(p, args) if args.len() == 2 && p.prim.info().arity == 2 => {
            let info = p.prim.info();
            if info.named || p.prim == Prim::Index {
                return None;
            }
            let (level, assoc) = match info.name {
                "+" | "-" => (ADD, Assoc::Left),
                "*" | "/" | "%" => (MUL, Assoc::Left),
                "**" => (POW, Assoc::Right),
                "<" | "<=" | ">" | ">=" | "==" | "!=" => (CMP, Assoc::None),
                "+=" => (ADD_TO, Assoc::None),
                _ => return None,
            };
            Some(BinOp {
                level,
                symbol: info.name,
                assoc,
                lhs: &args[0],
                rhs: &args[1],
            })
        }
        Expr::If(c, a, b) if bool_lit(b) == Some(false) => Some(BinOp {
            level: AND,
            symbol: "&&",
            assoc: Assoc::Left,
            lhs: c,
            rhs: a,
        }),
        Expr::If(c, a, b) if bool_lit(a) == Some(true) => Some(BinOp {
            level: OR,
            symbol: "||",
            assoc: Assoc::Left,
            lhs: c,
            rhs: b,
        }),
        _ => None,
    }
}

/// A prefix operator application (`-e`, `!e`), if `e` prints as one.
fn as_prefix(e: &Expr) -> Option<(&'static str, &Expr)> {
    match e {
        Expr::Prim(p, args) if args.len() == 1 && p.prim.info().arity == 1 => {
            let info = p.prim.info();
            (!info.named).then(|| (info.name, &args[0]))
        }
        _ => None,
    }
}

/// True if `e` has at most `n` nodes (counted without visiting more than n + 1).
fn has_at_most_nodes(e: &Expr, n: usize) -> bool {
    let mut count = 0;
    let mut work = vec![e];
    while let Some(e) = work.pop() {
        count += 1;
        if count > n {
            return false;
        }
        match e {
            Expr::Var(_) | Expr::Lit(_) | Expr::PrimRef(_) | Expr::Poly(..) => {}
            Expr::Lam(_, b) | Expr::Inl(b) | Expr::Inr(b) => work.push(b),
            Expr::Proj { tuple, .. } => work.push(tuple),
            Expr::App(f, args) => {
                work.push(f);
                work.extend(args);
            }
            Expr::Let(_, v, b) | Expr::Bind(_, v, b) | Expr::RunDelta(v, b) => {
                work.push(v);
                work.push(b);
            }
            Expr::LetRec { value, body, .. } => {
                work.push(value);
                work.push(body);
            }
            Expr::Tuple(es) | Expr::Vector(es) | Expr::Prim(_, es) => work.extend(es),
            Expr::Case {
                scrutinee,
                left,
                right,
            } => {
                work.push(scrutinee);
                work.push(&left.1);
                work.push(&right.1);
            }
            Expr::If(c, a, b) => {
                work.push(c);
                work.push(a);
                work.push(b);
            }
        }
    }
    true
}

/// The name of a variable not occurring in `e`: `x`, `x1`, `x2`, ….
fn name_not_in(e: &Expr) -> String {
    let mut names = HashSet::new();
    all_names(e, &mut names);
    let mut n = "x".to_string();
    let mut i = 0;
    while names.contains(n.as_str()) {
        i += 1;
        n = format!("x{i}");
    }
    n
}

/// A projection from a tuple wider than a pair, as `let (_, x, _) = e in x`.
fn projection_let(tuple: &Expr, index: u32, arity: u32) -> Expr {
    let x = name_not_in(tuple);
    let pats = (0..arity.max(index + 1))
        .map(|i| {
            if i == index {
                Pat::Var(x.clone())
            } else {
                Pat::Wild
            }
        })
        .collect();
    Expr::Let(
        Pat::Tuple(pats),
        Box::new(tuple.clone()),
        Box::new(Expr::Var(x)),
    )
}

/// An operator used as a value, as a `fun`.
fn operator_lambda(p: &PrimAt) -> Expr {
    let info = p.prim.info();
    let names: &[&str] = match (p.prim, info.arity) {
        (Prim::Index, _) => &["v", "i"],
        (_, 1) => &["a"],
        (_, 2) => &["a", "b"],
        (_, 3) => &["a", "b", "c"],
        _ => &["a", "b", "c", "d"],
    };
    let names = &names[..info.arity.min(names.len())];
    Expr::Lam(
        names.iter().map(|n| Pat::var(*n)).collect(),
        Box::new(Expr::Prim(
            p.clone(),
            names.iter().map(|n| Expr::Var(n.to_string())).collect(),
        )),
    )
}

fn real_doc(x: f64) -> (Doc, u8) {
    if x.is_nan() {
        (text("0.0 / 0.0"), MUL)
    } else if x.is_infinite() {
        (text(if x > 0.0 { "1.0 / 0.0" } else { "-1.0 / 0.0" }), MUL)
    } else if x.is_sign_negative() {
        (text(format!("-{}", format_real(-x))), UNARY)
    } else {
        (text(format_real(x)), ATOM)
    }
}

fn lit_doc(l: &Lit) -> (Doc, u8) {
    match l {
        Lit::Unit => (text("()"), ATOM),
        Lit::Bool(b) => (text(if *b { "true" } else { "false" }), ATOM),
        Lit::Int(n) if *n == i64::MIN => (text(format!("-{} - 1", i64::MAX)), ADD),
        Lit::Int(n) if *n < 0 => (text(format!("-{}", n.unsigned_abs())), UNARY),
        Lit::Int(n) => (text(n.to_string()), ATOM),
        Lit::Real(x) => real_doc(*x),
    }
}

fn pat_text(p: &Pat) -> String {
    match p {
        Pat::Var(n) => n.clone(),
        Pat::Wild => "_".into(),
        Pat::Tuple(ps) if ps.is_empty() => "()".into(),
        Pat::Tuple(ps) if ps.len() == 1 => pat_text(&ps[0]),
        Pat::Tuple(ps) => format!(
            "({})",
            ps.iter().map(pat_text).collect::<Vec<_>>().join(", ")
        ),
    }
}

fn pats_text(ps: &[Pat]) -> String {
    ps.iter().map(pat_text).collect::<Vec<_>>().join(" ")
}

/// A type as the argument of `@`: atomic, parenthesised if need be.
fn type_arg(t: &Type) -> String {
    let s = print_type(t);
    match t {
        Type::Int | Type::Real | Type::Bool | Type::Unit | Type::Tuple(_) | Type::Var(_) => s,
        Type::Con(_, args) if args.is_empty() => s,
        _ => format!("({s})"),
    }
}

/// One item of a `do` block.
enum Stmt<'a> {
    Bind(&'a Pat, &'a Expr),
    Let(&'a Pat, &'a Expr),
}

struct Printer {
    /// Printing a translated program: `let () = a in b` is `a; b`.
    translated: bool,
    /// May a sequence `a; b` stand bare here? Not in the items of a `do`
    /// block (where `;` separates statements) until brackets open again.
    seq_ok: Cell<bool>,
}

impl Printer {
    fn new(translated: bool) -> Printer {
        Printer {
            translated,
            seq_ok: Cell::new(true),
        }
    }

    /// Runs `f` with bare sequences allowed (inside brackets) or not (in
    /// the items of a `do` block).
    fn with_seq<T>(&self, ok: bool, f: impl FnOnce() -> T) -> T {
        let saved = self.seq_ok.replace(ok);
        let r = f();
        self.seq_ok.set(saved);
        r
    }

    fn def(&self, d: &Def) -> Doc {
        let mut head = format!("def {}", d.name);
        if !d.params.is_empty() {
            head.push(' ');
            head.push_str(&pats_text(&d.params));
        }
        head.push_str(" =");
        self.body(text(head), &d.body, Ctx::TOP)
    }

    /// `head body`, where `head` ends with `=`, `->`, `then` or `else`: the
    /// body on the same line if it fits, else indented on the next lines;
    /// a `do` block stays on the head's line (`= do {`) and breaks inside.
    fn body(&self, head: Doc, body: &Expr, ctx: Ctx) -> Doc {
        group(cat(vec![head, self.indented(body, ctx)]))
    }

    /// What follows a head (`=`, `->`, `then`, `else`): a line break (or a
    /// space) and `e` indented by 2, or ` do {` on the head's line.
    fn indented(&self, e: &Expr, ctx: Ctx) -> Doc {
        if matches!(e, Expr::Bind(..)) && !self.needs_parens(e, ctx) {
            return cat(vec![text(" "), self.bare(e, ctx)]);
        }
        nest(2, cat(vec![Doc::Line, self.expr(e, ctx)]))
    }

    /// A sequence `a; b` (a `let ()` in a translated program).
    fn as_seq<'a>(&self, e: &'a Expr) -> Option<(&'a Expr, &'a Expr)> {
        match e {
            Expr::Let(Pat::Tuple(ps), a, b) if self.translated && ps.is_empty() => Some((a, b)),
            _ => None,
        }
    }

    /// The level `e` prints at (before parentheses), and whether it is a
    /// `match` (which may not end the first arm of another).
    fn level_of(&self, e: &Expr) -> u8 {
        match e {
            Expr::Lam(ps, body) if ps.is_empty() => return self.level_of(body),
            Expr::App(f, args) if args.is_empty() => return self.level_of(f),
            _ => {}
        }
        if self.as_seq(e).is_some() {
            return SEQ;
        }
        if let Some(b) = as_binop(e) {
            return b.level;
        }
        if as_prefix(e).is_some() {
            return UNARY;
        }
        match e {
            Expr::Var(_) | Expr::Tuple(_) | Expr::Vector(_) => ATOM,
            Expr::Lit(l) => lit_doc(l).1,
            Expr::Lam(..)
            | Expr::Let(..)
            | Expr::LetRec { .. }
            | Expr::Case { .. }
            | Expr::If(..) => OPEN,
            Expr::Proj { arity, .. } => {
                if *arity == 2 {
                    APP
                } else {
                    OPEN
                }
            }
            Expr::App(..) | Expr::Inl(_) | Expr::Inr(_) | Expr::RunDelta(..) => APP,
            // `name @T` and `do { … }` are atoms.
            Expr::Poly(..) | Expr::Bind(..) => ATOM,
            Expr::Prim(p, args) => {
                if p.prim == Prim::Index && args.len() == 2 {
                    POSTFIX
                } else if args.is_empty() {
                    ATOM
                } else {
                    APP
                }
            }
            Expr::PrimRef(p) => {
                let info = p.prim.info();
                if info.named || info.arity == 0 {
                    ATOM
                } else {
                    OPEN
                }
            }
        }
    }

    fn needs_parens(&self, e: &Expr, ctx: Ctx) -> bool {
        let level = self.level_of(e);
        match level {
            SEQ => {
                !self.seq_ok.get() || ctx.need > SEQ || !matches!(ctx.tail, Tail::Free | Tail::Bar)
            }
            OPEN => {
                ctx.need > UNARY
                    || matches!(ctx.tail, Tail::Semi | Tail::Inner)
                    || (ctx.tail == Tail::Bar && matches!(e, Expr::Case { .. }))
            }
            UNARY if ctx.neg_paren => !matches!(as_prefix(e), Some(("!", _))),
            l => l < ctx.need,
        }
    }

    /// `e` in context `ctx`, parenthesised if need be.
    fn expr(&self, e: &Expr, ctx: Ctx) -> Doc {
        if stack::check().is_err() {
            return text("...");
        }
        if self.needs_parens(e, ctx) {
            let inner = self.with_seq(true, || self.bare(e, Ctx::TOP));
            if matches!(e, Expr::Lam(..)) || self.level_of(e) == APP {
                // A call or a `fun` in parentheses breaks inside (a hanging
                // last argument, a `fun` body), indented from its line.
                cat(vec![text("("), inner, text(")")])
            } else {
                parens(inner)
            }
        } else {
            self.bare(e, ctx)
        }
    }

    /// `e` without parentheses around it (`ctx` tells what follows).
    fn bare(&self, e: &Expr, ctx: Ctx) -> Doc {
        if let Some((a, b)) = self.as_seq(e) {
            return self.seq(a, b, ctx);
        }
        if let Some(op) = as_binop(e) {
            return self.binop(op, ctx);
        }
        if let Some((sym, x)) = as_prefix(e) {
            return cat(vec![text(sym), self.expr(x, Ctx::right(UNARY, ctx.tail))]);
        }
        match e {
            Expr::Var(n) => text(n.clone()),
            Expr::Lit(l) => lit_doc(l).0,
            // (Degenerate forms the named core does not produce: a `fun`
            // without parameters is its body, a call without arguments its
            // function.)
            Expr::Lam(ps, body) if ps.is_empty() => self.bare(body, ctx),
            Expr::App(f, args) if args.is_empty() => self.bare(f, ctx),
            Expr::Lam(ps, body) => self.lambda(ps, body, ctx),
            Expr::App(f, args) => self.app(self.expr(f, Ctx::new(APP, Tail::Inner)), args),
            Expr::Let(..) | Expr::LetRec { .. } => self.let_chain(e, ctx),
            Expr::Tuple(es) => self.tuple(es),
            Expr::Vector(es) => self.vector(es),
            Expr::Proj {
                tuple,
                index,
                arity,
            } => {
                if *arity == 2 && *index < 2 {
                    let f = text(if *index == 0 { "fst" } else { "snd" });
                    self.app(f, std::slice::from_ref(&**tuple))
                } else {
                    self.let_chain(&projection_let(tuple, *index, *arity), ctx)
                }
            }
            Expr::Inl(x) => self.app(text("inl"), std::slice::from_ref(&**x)),
            Expr::Inr(x) => self.app(text("inr"), std::slice::from_ref(&**x)),
            Expr::Case {
                scrutinee,
                left,
                right,
            } => self.case(scrutinee, left, right, ctx),
            Expr::If(..) => self.if_chain(e, ctx),
            Expr::Prim(p, args) => self.prim(p, args),
            Expr::PrimRef(p) => {
                let info = p.prim.info();
                if info.named || info.arity == 0 {
                    text(info.name)
                } else {
                    self.bare(&operator_lambda(p), ctx)
                }
            }
            Expr::Bind(..) => self.do_block(e),
            Expr::RunDelta(a, b) => self.app(text("runDelta"), &[(**a).clone(), (**b).clone()]),
            Expr::Poly(p, t) => text(format!("{} @{}", p.name(), type_arg(t))),
        }
    }

    /// `f a1 … an`: on one line if it fits, else one argument per line;
    /// with a `fun` argument, the arguments stay on the line and the `fun`
    /// breaks inside.
    fn app(&self, f: Doc, args: &[Expr]) -> Doc {
        let arg_ctx = Ctx::new(POSTFIX, Tail::Inner);
        let hangs = self.hangs(args);
        let mut parts = Vec::with_capacity(2 * args.len() + 1);
        parts.push(f);
        for a in args {
            parts.push(if hangs { text(" ") } else { Doc::Line });
            parts.push(self.expr(a, arg_ctx));
        }
        if hangs {
            // The last argument breaks inside, indented from this line.
            cat(parts)
        } else {
            let f = parts.remove(0);
            group(cat(vec![f, nest(2, cat(parts))]))
        }
    }

    /// The arguments `e` prints with if it prints as a call `f a1 … an`.
    fn call_args<'a>(&self, e: &'a Expr) -> Option<&'a [Expr]> {
        match e {
            Expr::App(_, args) => Some(args),
            Expr::Prim(p, args) if !args.is_empty() && p.prim.info().named => Some(args),
            Expr::Inl(x) | Expr::Inr(x) => Some(std::slice::from_ref(&**x)),
            _ => None,
        }
    }

    /// Whether a call with these arguments keeps them all on its line and
    /// lets a `fun` or `do` argument break inside (`map (fun x ->` … `) v`),
    /// rather than putting one argument per line: when only short arguments
    /// follow the last `fun` or `do`, or the last argument is such a call.
    fn hangs(&self, args: &[Expr]) -> bool {
        let mut args = args;
        loop {
            if let Some(i) = args
                .iter()
                .rposition(|a| matches!(a, Expr::Lam(..) | Expr::Bind(..)))
            {
                return args[i + 1..].iter().all(|a| self.is_short(a));
            }
            match args.last().and_then(|a| self.call_args(a)) {
                Some(inner) => args = inner,
                None => return false,
            }
        }
    }

    /// An argument that prints in a few columns on one line. (Only a small
    /// expression is printed to find out, so that deciding costs little.)
    fn is_short(&self, e: &Expr) -> bool {
        has_at_most_nodes(e, SHORT_ARG / 2)
            && fits(
                SHORT_ARG,
                &self.expr(e, Ctx::new(POSTFIX, Tail::Inner)),
                &[],
            )
    }

    fn prim(&self, p: &PrimAt, args: &[Expr]) -> Doc {
        let info = p.prim.info();
        if args.len() != info.arity {
            // Not a saturated call: apply the primitive as a value.
            let f = self.expr(&Expr::PrimRef(p.clone()), Ctx::new(APP, Tail::Inner));
            return if args.is_empty() {
                f
            } else {
                self.app(f, args)
            };
        }
        if p.prim == Prim::Index {
            return cat(vec![
                self.expr(&args[0], Ctx::new(POSTFIX, Tail::Inner)),
                text("["),
                align(self.with_seq(true, || self.expr(&args[1], Ctx::new(OPEN, Tail::Free)))),
                text("]"),
            ]);
        }
        if args.is_empty() {
            return text(info.name);
        }
        if let (Prim::Sum, Some(t), [Expr::Vector(es)]) = (p.prim, &p.at, args)
            && es.is_empty()
            && *t != Type::Int
        {
            // Nothing else says what `[]` holds: `sum []` alone would be an Int.
            let v = format!("([] : {})", print_type(&Type::Vec(Box::new(t.clone()))));
            return cat(vec![text("sum "), text(v)]);
        }
        self.app(text(info.name), args)
    }

    fn binop(&self, op: BinOp<'_>, ctx: Ctx) -> Doc {
        // A left-associative chain `a + b - c` prints as one group.
        let mut rights = Vec::new();
        let mut lhs;
        let mut cur = op;
        loop {
            rights.push((cur.symbol, cur.rhs));
            lhs = cur.lhs;
            if cur.assoc != Assoc::Left {
                break;
            }
            match as_binop(lhs) {
                Some(next)
                    if next.level == op.level
                        && next.assoc == Assoc::Left
                        && !self.needs_parens(lhs, Ctx::new(op.level, Tail::Inner)) =>
                {
                    cur = next
                }
                _ => break,
            }
        }
        rights.reverse();
        let (lhs_need, rhs_need) = match op.assoc {
            Assoc::Left => (op.level, op.level + 1),
            Assoc::Right => (op.level + 1, op.level),
            Assoc::None => (op.level + 1, op.level + 1),
        };
        // `**` takes an application on its left and a unary on its right.
        let (lhs_need, rhs_need) = if op.level == POW {
            (APP, UNARY)
        } else {
            (lhs_need, rhs_need)
        };
        let first = self.expr(lhs, Ctx::new(lhs_need, Tail::Inner));
        let n = rights.len();
        let mut rest = Vec::with_capacity(2 * n);
        for (i, (sym, r)) in rights.into_iter().enumerate() {
            let tail = if i + 1 == n { ctx.tail } else { Tail::Inner };
            rest.push(Doc::Line);
            rest.push(text(format!("{sym} ")));
            rest.push(self.expr(r, Ctx::right(rhs_need, tail)));
        }
        group(cat(vec![first, nest(2, cat(rest))]))
    }

    /// `a; b; …`: on one line if short, else (and always with three or
    /// more items) one item per line.
    fn seq(&self, a: &Expr, b: &Expr, ctx: Ctx) -> Doc {
        let mut items = vec![a];
        let mut cur = b;
        while let Some((x, y)) = self.as_seq(cur) {
            items.push(x);
            cur = y;
        }
        let sep = if items.len() >= 2 {
            Doc::Hard
        } else {
            Doc::Line
        };
        let mut parts = Vec::new();
        for x in items {
            parts.push(self.expr(x, Ctx::new(OPEN, Tail::Semi)));
            parts.push(text(";"));
            parts.push(sep.clone());
        }
        parts.push(self.expr(cur, Ctx::new(SEQ, ctx.tail)));
        short(SHORT_LET, cat(parts))
    }

    fn lambda(&self, ps: &[Pat], body: &Expr, ctx: Ctx) -> Doc {
        let head = text(format!("fun {} ->", pats_text(ps)));
        self.body(head, body, ctx.trailing())
    }

    /// `let p = v in` (or `let f x = v in`, `let rec f x = v in`) and the
    /// expression after the `let`s: two or more `let`s in a row print one
    /// per line.
    fn let_chain(&self, e: &Expr, ctx: Ctx) -> Doc {
        let mut bindings = Vec::new();
        let mut defines_function = false;
        let mut cur = e;
        loop {
            if stack::check().is_err() {
                break;
            }
            defines_function |= match cur {
                Expr::LetRec { .. } => true,
                Expr::Let(Pat::Var(_), v, _) => matches!(**v, Expr::Lam(..)),
                _ => false,
            };
            match cur {
                Expr::Let(p, v, b) if self.as_seq(cur).is_none() => {
                    bindings.push(self.binding(p, v));
                    cur = b;
                }
                Expr::LetRec {
                    name,
                    params,
                    value,
                    body,
                } => {
                    bindings.push(self.function_binding(
                        &format!("let rec {name}"),
                        params,
                        value,
                        " in",
                    ));
                    cur = body;
                }
                _ => break,
            }
        }
        let body = self.expr(cur, ctx.trailing());
        let sep = if bindings.len() >= 2 || defines_function {
            Doc::Hard
        } else {
            Doc::Line
        };
        let mut parts = Vec::new();
        for b in bindings {
            parts.push(b);
            parts.push(sep.clone());
        }
        parts.push(body);
        short(SHORT_LET, cat(parts))
    }

    /// `let p = v in`, with `let f x = body in` for a function value.
    fn binding(&self, p: &Pat, v: &Expr) -> Doc {
        match (p, v) {
            (Pat::Var(f), Expr::Lam(ps, body)) => {
                self.function_binding(&format!("let {f}"), ps, body, " in")
            }
            _ => group(cat(vec![
                text(format!("let {} =", pat_text(p))),
                self.indented(v, Ctx::new(SEQ, Tail::Free)),
                text(" in"),
            ])),
        }
    }

    fn function_binding(&self, head: &str, ps: &[Pat], body: &Expr, end: &str) -> Doc {
        group(cat(vec![
            text(format!("{head} {} =", pats_text(ps))),
            self.indented(body, Ctx::new(SEQ, Tail::Free)),
            text(end),
        ]))
    }

    /// `if c1 then a1 else if c2 then a2 … else b`.
    fn if_chain(&self, e: &Expr, ctx: Ctx) -> Doc {
        let mut parts = Vec::new();
        let mut cur = e;
        let mut first = true;
        loop {
            if stack::check().is_err() {
                break;
            }
            match cur {
                Expr::If(c, a, b) if as_binop(cur).is_none() || first => {
                    if !first {
                        parts.push(Doc::Line);
                        parts.push(text("else "));
                    }
                    first = false;
                    parts.push(text("if "));
                    parts.push(align(self.expr(c, Ctx::new(OPEN, Tail::Free))));
                    parts.push(text(" then"));
                    parts.push(self.indented(a, Ctx::new(OPEN, Tail::Free)));
                    cur = b;
                }
                _ => break,
            }
        }
        parts.push(Doc::Line);
        parts.push(text("else"));
        parts.push(self.indented(cur, Ctx::new(OPEN, ctx.tail)));
        short(SHORT_IF, cat(parts))
    }

    fn case(
        &self,
        scrutinee: &Expr,
        left: &(Pat, Box<Expr>),
        right: &(Pat, Box<Expr>),
        ctx: Ctx,
    ) -> Doc {
        // An arm extends over `;` (as in OCaml): `| inl a -> k a; r += 1.0`.
        let arm = |kw: &str, p: &Pat, body: &Expr, ctx: Ctx| {
            self.body(text(format!("| {kw} {} ->", pat_text(p))), body, ctx)
        };
        short(
            SHORT_MATCH,
            cat(vec![
                text("match "),
                align(self.expr(scrutinee, Ctx::new(OPEN, Tail::Free))),
                text(" with"),
                nest(
                    2,
                    cat(vec![
                        Doc::Line,
                        arm("inl", &left.0, &left.1, Ctx::new(SEQ, Tail::Bar)),
                        Doc::Line,
                        arm("inr", &right.0, &right.1, ctx.trailing()),
                    ]),
                ),
            ]),
        )
    }

    fn tuple(&self, es: &[Expr]) -> Doc {
        if es.is_empty() {
            return text("()");
        }
        if es.len() == 1 {
            return parens(self.with_seq(true, || self.expr(&es[0], Ctx::TOP)));
        }
        group(parens(self.items(es, false)))
    }

    fn vector(&self, es: &[Expr]) -> Doc {
        let fill = es
            .iter()
            .all(|e| matches!(e, Expr::Lit(_) | Expr::Var(_)) || as_prefix(e).is_some());
        group(cat(vec![text("["), align(self.items(es, fill)), text("]")]))
    }

    /// `e1, e2, …`: each on its own line if the group breaks, or as many
    /// per line as fit when `fill`.
    fn items(&self, es: &[Expr], fill: bool) -> Doc {
        let mut parts = Vec::with_capacity(3 * es.len());
        for (i, e) in es.iter().enumerate() {
            if i > 0 {
                parts.push(text(","));
                parts.push(if fill { group(Doc::Line) } else { Doc::Line });
            }
            parts.push(self.with_seq(true, || self.expr(e, Ctx::new(OPEN, Tail::Free))));
        }
        cat(parts)
    }

    /// A chain of binds (and the `let`s between them) as one `do` block.
    fn do_block(&self, e: &Expr) -> Doc {
        let mut stmts = Vec::new();
        let mut cur = e;
        loop {
            if stack::check().is_err() {
                break;
            }
            match cur {
                Expr::Bind(p, m, rest) => {
                    stmts.push(Stmt::Bind(p, m));
                    cur = rest;
                }
                Expr::Let(p, v, rest) => {
                    stmts.push(Stmt::Let(p, v));
                    cur = rest;
                }
                _ => break,
            }
        }
        // Inside a `do` block `;` ends a statement: nothing extends over it,
        // and a sequence needs parentheses.
        self.with_seq(false, || self.do_items(&stmts, cur))
    }

    /// The right-hand side of a statement: an `if`, `match` or `let` that
    /// breaks lines up after the `<-` (or `=`); a call or `fun` breaks
    /// inside, indented from the statement like any other line.
    fn statement_value(&self, e: &Expr, ctx: Ctx) -> Doc {
        let d = self.expr(e, ctx);
        if matches!(e, Expr::Lam(..)) || self.level_of(e) >= APP {
            d
        } else {
            align(d)
        }
    }

    fn do_items(&self, stmts: &[Stmt<'_>], last: &Expr) -> Doc {
        let stmt_ctx = Ctx::new(OPEN, Tail::Free);
        let mut items: Vec<Doc> = stmts
            .iter()
            .map(|s| match s {
                Stmt::Bind(p, m) => cat(vec![
                    text(format!("{} <- ", pat_text(p))),
                    self.statement_value(m, stmt_ctx),
                    text(";"),
                ]),
                Stmt::Let(p, v) => cat(vec![
                    text(format!("let {} = ", pat_text(p))),
                    self.statement_value(v, stmt_ctx),
                    text(";"),
                ]),
            })
            .collect();
        items.push(self.expr(last, Ctx::new(OPEN, Tail::Free)));
        let sep = if stmts.len() >= 2 {
            Doc::Hard
        } else {
            Doc::Line
        };
        let mut inner = Vec::new();
        for it in items {
            inner.push(sep.clone());
            inner.push(it);
        }
        group(cat(vec![text("do {"), nest(2, cat(inner)), sep, text("}")]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::named::{self, app, int, lam, let_, pair, real, real_op, var};

    fn op(p: Prim, a: Expr, b: Expr) -> Expr {
        real_op(p, vec![a, b])
    }

    fn neg(a: Expr) -> Expr {
        real_op(Prim::Neg, vec![a])
    }

    fn p(e: Expr) -> String {
        print_expr(&e)
    }

    #[test]
    fn arithmetic_parenthesises_only_where_needed() {
        let (a, b, c) = (var("a"), var("b"), var("c"));
        assert_eq!(
            p(op(
                Prim::Sub,
                a.clone(),
                op(Prim::Sub, b.clone(), c.clone())
            )),
            "a - (b - c)"
        );
        assert_eq!(
            p(op(
                Prim::Sub,
                op(Prim::Sub, a.clone(), b.clone()),
                c.clone()
            )),
            "a - b - c"
        );
        assert_eq!(
            p(op(
                Prim::Mul,
                op(Prim::Add, a.clone(), b.clone()),
                c.clone()
            )),
            "(a + b) * c"
        );
        assert_eq!(
            p(op(
                Prim::Add,
                a.clone(),
                op(Prim::Mul, b.clone(), c.clone())
            )),
            "a + b * c"
        );
        assert_eq!(p(neg(op(Prim::Mul, var("x"), var("y")))), "-(x * y)");
        assert_eq!(p(op(Prim::Mul, neg(var("x")), var("y"))), "-x * y");
        assert_eq!(p(op(Prim::Mul, var("y"), neg(var("x")))), "y * (-x)");
        assert_eq!(p(neg(neg(var("x")))), "-(-x)");
        assert_eq!(p(op(Prim::Sub, a.clone(), real(-1.0))), "a - (-1.0)");
        assert_eq!(
            p(op(
                Prim::Div,
                op(Prim::Mul, a.clone(), b.clone()),
                op(Prim::Mul, b, c)
            )),
            "a * b / (b * c)"
        );
    }

    #[test]
    fn power_is_right_associative_and_binds_tighter_than_negation() {
        let (x, y, z) = (var("x"), var("y"), var("z"));
        let pow = |a, b| op(Prim::Pow, a, b);
        assert_eq!(p(pow(x.clone(), pow(y.clone(), z.clone()))), "x ** y ** z");
        assert_eq!(
            p(pow(pow(x.clone(), y.clone()), z.clone())),
            "(x ** y) ** z"
        );
        assert_eq!(p(neg(pow(x.clone(), y.clone()))), "-x ** y");
        assert_eq!(p(pow(neg(x.clone()), y.clone())), "(-x) ** y");
        assert_eq!(p(pow(x.clone(), neg(y.clone()))), "x ** (-y)");
        assert_eq!(
            p(pow(app(var("f"), vec![x.clone()]), real(2.0))),
            "f x ** 2.0"
        );
        assert_eq!(p(op(Prim::Mul, pow(x, y), z)), "x ** y * z");
    }

    #[test]
    fn comparisons_are_non_associative() {
        let lt = |a, b| Expr::Prim(PrimAt::at(Prim::Lt, Type::Int), vec![a, b]);
        let eq = |a, b| Expr::Prim(PrimAt::at(Prim::Eq, Type::Bool), vec![a, b]);
        assert_eq!(
            p(eq(lt(int(1), int(2)), Expr::Lit(Lit::Bool(true)))),
            "(1 < 2) == true"
        );
        assert_eq!(
            p(eq(Expr::Lit(Lit::Bool(true)), lt(int(1), int(2)))),
            "true == (1 < 2)"
        );
    }

    #[test]
    fn application_and_indexing() {
        let f = |x| app(var("f"), vec![x]);
        let g = |x| app(var("g"), vec![x]);
        let index = |v, i| named::prim(Prim::Index, vec![v, i]);
        assert_eq!(p(f(g(var("x")))), "f (g x)");
        assert_eq!(p(index(f(var("x")), int(0))), "(f x)[0]");
        assert_eq!(p(f(index(var("x"), int(0)))), "f x[0]");
        assert_eq!(p(index(index(var("m"), int(0)), int(1))), "m[0][1]");
        assert_eq!(p(f(real(-1.0))), "f (-1.0)");
        assert_eq!(p(f(int(-3))), "f (-3)");
        assert_eq!(p(f(Expr::Vector(vec![real(1.0)]))), "f [1.0]");
        assert_eq!(p(index(Expr::Vector(vec![real(1.0)]), int(0))), "[1.0][0]");
        assert_eq!(
            p(app(app(var("f"), vec![var("a")]), vec![var("b")])),
            "f a b"
        );
        assert_eq!(p(app(var("f"), vec![var("a"), var("b")])), "f a b");
        assert_eq!(
            p(app(lam(vec![Pat::var("x")], var("x")), vec![int(1)])),
            "(fun x -> x) 1"
        );
        assert_eq!(p(f(Expr::Inl(Box::new(var("x"))))), "f (inl x)");
        assert_eq!(p(Expr::Inl(Box::new(f(var("x"))))), "inl (f x)");
        assert_eq!(
            p(named::prim(Prim::Sin, vec![index(var("x"), int(1))])),
            "sin x[1]"
        );
    }

    #[test]
    fn open_constructs_need_parentheses_unless_they_end_the_expression() {
        let ite = Expr::If(Box::new(var("c")), Box::new(var("a")), Box::new(var("b")));
        assert_eq!(
            p(op(Prim::Add, ite.clone(), real(1.0))),
            "(if c then a else b) + 1.0"
        );
        assert_eq!(
            p(op(Prim::Add, real(1.0), ite.clone())),
            "1.0 + if c then a else b"
        );
        assert_eq!(
            p(app(var("f"), vec![ite.clone()])),
            "f (if c then a else b)"
        );
        let case = |l: Expr, r: Expr| Expr::Case {
            scrutinee: Box::new(var("s")),
            left: (Pat::var("x"), Box::new(l)),
            right: (Pat::var("y"), Box::new(r)),
        };
        let inner = case(var("x"), var("y"));
        assert_eq!(
            p(case(inner.clone(), inner.clone())),
            "match s with\n  | inl x -> (match s with | inl x -> x | inr y -> y)\n  | inr y -> match s with | inl x -> x | inr y -> y"
        );
        // A `let` ending in a `match` in the first arm also needs them around the match.
        assert_eq!(
            p(case(let_(Pat::var("z"), int(1), inner), var("y"))),
            "match s with\n  | inl x -> let z = 1 in (match s with | inl x -> x | inr y -> y)\n  | inr y -> y"
        );
    }

    #[test]
    fn functions_in_tuples_and_operators_as_values() {
        let id = lam(vec![Pat::var("x")], var("x"));
        assert_eq!(p(pair(id.clone(), id.clone())), "(fun x -> x, fun x -> x)");
        assert_eq!(p(Expr::Vector(vec![id.clone()])), "[fun x -> x]");
        assert_eq!(
            p(Expr::PrimRef(PrimAt::at(Prim::Add, Type::Real))),
            "fun a b -> a + b"
        );
        assert_eq!(
            p(app(
                var("fold"),
                vec![Expr::PrimRef(PrimAt::at(Prim::Mul, Type::Real)), real(1.0)]
            )),
            "fold (fun a b -> a * b) 1.0"
        );
        assert_eq!(p(Expr::PrimRef(PrimAt::plain(Prim::Sin))), "sin");
        assert_eq!(
            p(Expr::PrimRef(PrimAt::plain(Prim::Index))),
            "fun v i -> v[i]"
        );
    }

    #[test]
    fn literals() {
        assert_eq!(p(real(1e16)), "1e16");
        assert_eq!(p(real(0.1)), "0.1");
        assert_eq!(p(real(-0.0)), "-0.0");
        assert_eq!(p(real(f64::INFINITY)), "1.0 / 0.0");
        assert_eq!(p(app(var("f"), vec![real(f64::NAN)])), "f (0.0 / 0.0)");
        assert_eq!(
            p(op(Prim::Mul, real(2.0), real(f64::NEG_INFINITY))),
            "2.0 * (-1.0 / 0.0)"
        );
        assert_eq!(p(int(i64::MIN)), "-9223372036854775807 - 1");
        assert_eq!(p(Expr::Lit(Lit::Unit)), "()");
        assert_eq!(
            p(Expr::Prim(
                PrimAt::at(Prim::Sum, Type::Real),
                vec![Expr::Vector(vec![])]
            )),
            "sum ([] : Vec Real)"
        );
    }

    #[test]
    fn projections() {
        let t = Expr::Tuple(vec![int(1), int(2), int(3)]);
        let proj = |tuple: Expr, index, arity| Expr::Proj {
            tuple: Box::new(tuple),
            index,
            arity,
        };
        assert_eq!(p(proj(var("p"), 1, 2)), "snd p");
        assert_eq!(p(proj(t.clone(), 1, 3)), "let (_, x, _) = (1, 2, 3) in x");
        assert_eq!(
            p(op(Prim::Add, proj(var("x"), 2, 3), int(1))),
            "(let (_, _, x1) = x in x1) + 1"
        );
    }

    #[test]
    fn short_circuit_sugar() {
        let t = |e: Expr, a: Expr, b: Expr| Expr::If(Box::new(e), Box::new(a), Box::new(b));
        let b = |x| Expr::Lit(Lit::Bool(x));
        assert_eq!(p(t(var("a"), var("b"), b(false))), "a && b");
        assert_eq!(p(t(var("a"), b(true), var("b"))), "a || b");
        assert_eq!(
            p(t(t(var("a"), b(true), var("b")), var("c"), b(false))),
            "(a || b) && c"
        );
        assert_eq!(
            p(t(var("a"), b(true), t(var("b"), var("c"), b(false)))),
            "a || b && c"
        );
    }

    #[test]
    fn sequences_are_bare_where_ocaml_reads_them_the_same() {
        let seq = |a, b| let_(Pat::Tuple(vec![]), a, b);
        let add_to = |r: &str, x| named::prim(Prim::AddTo, vec![var(r), x]);
        let case = |l: Expr, r: Expr| Expr::Case {
            scrutinee: Box::new(var("s")),
            left: (Pat::var("x"), Box::new(l)),
            right: (Pat::var("y"), Box::new(r)),
        };
        let s = || seq(add_to("r", var("x")), var("x"));
        // A `let` value, a `match` arm, a `fun` body: bare.
        assert_eq!(
            p(let_(Pat::var("z"), s(), add_to("r", real(1.0)))),
            "let z = r += x; x in r += 1.0"
        );
        assert_eq!(
            p(case(s(), s())),
            "match s with\n  | inl x -> r += x; x\n  | inr y -> r += x; x"
        );
        // An `if` branch, a tuple component, an operand: parenthesised.
        let ite = Expr::If(Box::new(var("c")), Box::new(s()), Box::new(s()));
        assert_eq!(p(ite), "if c then (r += x; x) else (r += x; x)");
        assert_eq!(p(pair(s(), var("y"))), "((r += x; x), y)");
        // In a `do` block `;` separates statements: parenthesised at any
        // depth, until brackets open again.
        let block = named::bind(
            Pat::var("a"),
            case(s(), Expr::Tuple(vec![s(), var("y")])),
            named::prim(Prim::Pure, vec![var("a")]),
        );
        assert_eq!(
            p(block),
            "do {\n  a <- match s with\n         | inl x -> (r += x; x)\n         | inr y -> ((r += x; x), y);\n  pure a\n}"
        );
    }

    #[test]
    fn renames_a_binder_that_hides_a_needed_primitive() {
        // `let sum = 1.0 in sum + sum v` (the inner `sum` is the primitive).
        let e = let_(
            Pat::var("sum"),
            real(1.0),
            op(
                Prim::Add,
                var("sum"),
                Expr::Prim(PrimAt::at(Prim::Sum, Type::Real), vec![var("v")]),
            ),
        );
        assert_eq!(p(e), "let sum' = 1.0 in sum' + sum v");
    }

    #[test]
    fn deciding_how_calls_hang_takes_linear_time() {
        // f (fun x -> x) (f (fun x -> x) (… 60 deep …)): each level asks
        // whether the argument after its `fun` is short (printing a big one
        // to find out would take time exponential in the depth).
        let id = lam(vec![Pat::var("x")], var("x"));
        let mut e = var("z");
        for _ in 0..60 {
            e = app(var("f"), vec![id.clone(), e]);
        }
        let start = std::time::Instant::now();
        let s = p(e);
        assert!(start.elapsed().as_secs() < 30, "took {:?}", start.elapsed());
        assert!(s.starts_with("f\n  (fun x -> x)\n  (f"), "{s}");
    }

    #[test]
    fn layout_fits_in_the_width() {
        let long: Vec<Expr> = (0..30).map(|i| var(format!("variable{i}"))).collect();
        let e = app(var("f"), long);
        let s = p(e);
        assert!(
            s.lines().all(|l| l.len() <= WIDTH && !l.ends_with(' ')),
            "{s}"
        );
        assert!(s.starts_with("f\n  variable0\n  variable1\n"), "{s}");
    }
}

#[cfg(test)]
mod long_chains {
    use super::*;
    use crate::core::named::{bind, int, let_, prim, real_op, var};

    /// Builds a chain of `n` links around `last`, innermost first.
    fn chain(n: usize, link: impl Fn(usize, Expr) -> Expr, last: Expr) -> Expr {
        (0..n).rev().fold(last, |acc, i| link(i, acc))
    }

    /// Long `let`, `do`, sequence and `+` chains print without native
    /// recursion per link: on a thread with the default (1 MiB) budget the
    /// printer would otherwise run out and print `...`.
    #[test]
    fn long_chains_print_in_constant_stack() {
        let n = 20_000;
        let out = std::thread::Builder::new()
            .stack_size(256 << 20)
            .spawn(move || {
                let x = |i: usize| var(format!("x{i}"));
                let lets = chain(
                    n,
                    |i, acc| {
                        let_(
                            Pat::Var(format!("x{}", i + 1)),
                            real_op(Prim::Add, vec![x(i), x(i)]),
                            acc,
                        )
                    },
                    x(n),
                );
                let binds = chain(
                    n,
                    |i, acc| {
                        bind(
                            Pat::Var(format!("x{}", i + 1)),
                            prim(Prim::Pure, vec![x(i)]),
                            acc,
                        )
                    },
                    prim(Prim::Pure, vec![x(n)]),
                );
                let seqs = chain(
                    n,
                    |i, acc| {
                        let_(
                            Pat::Tuple(vec![]),
                            prim(Prim::AddTo, vec![x(i), int(1)]),
                            acc,
                        )
                    },
                    int(0),
                );
                let sum = (1..n).fold(x(0), |acc, i| real_op(Prim::Add, vec![acc, x(i)]));
                let outs: Vec<String> = [lets, binds, seqs, sum].iter().map(print_expr).collect();
                outs
            })
            .expect("spawn")
            .join()
            .expect("no panic");
        for s in &out {
            assert!(!s.contains("..."), "ran out of stack");
            assert!(s.lines().count() >= n / 20, "{}", &s[..200]);
        }
        assert!(out[0].starts_with("let x1 = x0 + x0 in\nlet x2 = x1 + x1 in\n"));
        // Deep nesting that is not a chain prints in reasonable time.
        let deep = crate::stack::run_with_stack(|| {
            let mut calls = var("z");
            let mut ifs = var("z");
            let mut funs = var("z");
            for i in 0..3000 {
                calls =
                    crate::core::named::app(var(if i % 2 == 0 { "f" } else { "g" }), vec![calls]);
                ifs = Expr::If(Box::new(var("c")), Box::new(ifs), Box::new(var("z")));
                funs = crate::core::named::app(
                    var("f"),
                    vec![crate::core::named::lam(vec![Pat::var("x")], funs)],
                );
            }
            let start = std::time::Instant::now();
            let printed = [calls, ifs, funs].map(|e| print_expr(&e));
            (start.elapsed(), printed.iter().all(|s| !s.contains("...")))
        })
        .expect("thread");
        assert!(deep.0.as_secs() < 60 && deep.1, "{deep:?}");
        assert!(out[1].starts_with("do {\n  x1 <- pure x0;\n"));
        assert!(out[2].starts_with("x0 += 1;\nx1 += 1;\n"));
    }
}
