//! A hand-written recursive-descent / precedence-climbing parser.
//!
//! The parser never panics. On a syntax error inside a definition it records
//! the error and skips to the next `def`, so one run reports every definition
//! that fails to parse. Recursion is guarded by [`crate::stack::check`], so
//! absurdly deep nesting is an error, never a native stack overflow.
//!
//! Precedence, loosest first (all binary operators left-associative unless noted):
//!
//! | level | operators |
//! |---|---|
//! | 1 | `\|\|` |
//! | 2 | `&&` |
//! | 3 | `< <= > >= == !=` (non-associative) |
//! | 4 | `+ -` |
//! | 5 | `* /` |
//! | 6 | unary `-` (prefix) |
//! | 7 | `**` (right-associative) |
//! | 8 | application `f x y` |
//! | 9 | indexing `v[i]` (postfix, no space before `[`) |
//!
//! `let`, `if`, `fun` and `match` extend as far to the right as possible and may
//! appear as the last operand of an operator (`1 + if c then 2 else 3`).
//!
//! In a translated file ([`Dialect::Translated`]) there are also, loosest
//! first: sequencing `e1; e2` (below everything, extending as far right as
//! possible: `let x = a in b; c` is `let x = a in (b; c)`), then `r += e`
//! (non-associative, below `||`); `!e` binds like unary `-`; `runDelta e1 e2`
//! and `do { … }` are application-level forms, and `name @T` an atom. Inside
//! a `do` block `;` separates statements, so a sequence there needs
//! parentheses.

use super::ast::*;
use super::lexer::{self, Dialect, LexError, Tok, Token, lex_in};
use super::span::{Span, without_byte_order_mark};
use crate::core::named::Poly;
use crate::diagnostic::{Diagnostic, Label};
use crate::stack;
use crate::types::Con;
use std::collections::HashMap;

/// A syntax error.
#[derive(Clone, Debug, PartialEq)]
pub struct ParseError {
    /// The headline.
    pub message: String,
    /// Where.
    pub span: Span,
    /// Text under the caret.
    pub label: String,
    /// Related places, e.g. where the parser gave up on an unclosed `(`.
    pub secondary: Vec<Label>,
    /// Notes printed after the source excerpt.
    pub notes: Vec<String>,
}

impl ParseError {
    fn new(message: impl Into<String>, span: Span, label: impl Into<String>) -> ParseError {
        ParseError {
            message: message.into(),
            span,
            label: label.into(),
            secondary: Vec::new(),
            notes: Vec::new(),
        }
    }

    fn with_secondary(mut self, span: Span, message: impl Into<String>) -> ParseError {
        self.secondary.push(Label {
            span,
            message: message.into(),
        });
        self
    }

    fn with_note(mut self, note: impl Into<String>) -> ParseError {
        self.notes.push(note.into());
        self
    }
}

impl From<ParseError> for Diagnostic {
    fn from(e: ParseError) -> Diagnostic {
        let mut d = Diagnostic::error(e.message, e.span).with_label(e.label);
        d.secondary = e.secondary;
        d.notes = e.notes;
        d
    }
}

impl From<LexError> for ParseError {
    fn from(e: LexError) -> ParseError {
        let (message, label) = e.explain();
        ParseError::new(message, e.span, label)
    }
}

/// All errors of one parse, in source order. A syntax error in the same
/// definition as an earlier lexical error is left out: leaving the bad
/// characters out of the token stream usually breaks the syntax around them
/// (`"hello"`, `\x -> e`), and the lexical error already says what is wrong.
/// `def_starts` are the offsets of the `def` tokens, in order.
fn collect_errors(
    lexical: Vec<LexError>,
    syntax: Vec<ParseError>,
    def_starts: &[u32],
) -> Vec<ParseError> {
    // An error at a `def` token is about the definition before it, which
    // ended too early.
    let definition = |offset: u32| def_starts.partition_point(|&s| s < offset);
    let after_lexical_error = |e: &ParseError| {
        let before = lexical.partition_point(|l| l.span.start <= e.span.start);
        before > 0 && definition(lexical[before - 1].span.start) == definition(e.span.start)
    };
    let mut errors: Vec<ParseError> = syntax
        .into_iter()
        .filter(|e| !after_lexical_error(e))
        .collect();
    errors.extend(lexical.into_iter().map(ParseError::from));
    errors.sort_by_key(|e| e.span.start);
    errors
}

/// What the parser carries from one input of a session to the next: it
/// hands out fresh [`NodeId`]s and remembers the type aliases declared so
/// far (`type Model = { … }`), which it expands where they are named.
#[derive(Clone, Debug, Default)]
pub struct IdGen {
    next: u32,
    aliases: HashMap<String, TypeExpr>,
}

impl IdGen {
    /// A generator starting at 0.
    pub fn new() -> IdGen {
        IdGen::default()
    }

    fn fresh(&mut self) -> NodeId {
        let id = NodeId(self.next);
        self.next = self.next.saturating_add(1);
        id
    }

    /// The types declared so far (`type Name = T`), by name.
    pub fn aliases(&self) -> impl Iterator<Item = (&str, &TypeExpr)> {
        self.aliases.iter().map(|(n, t)| (n.as_str(), t))
    }

    /// Number of ids handed out so far.
    pub fn count(&self) -> usize {
        self.next as usize
    }
}

/// Parses a whole file: a sequence of `def`s. `base` is the file's global
/// offset in its [`SourceMap`](super::span::SourceMap). Returns every
/// definition that parsed and every error found. A file whose first line is
/// `#!translated` is parsed in the translated dialect ([`Dialect::of`]).
///
/// A leading byte-order mark is skipped ([`without_byte_order_mark`]): `base`
/// is the offset of the text after it, as in the `SourceMap`.
pub fn parse_program(text: &str, base: u32, ids: &mut IdGen) -> (Program, Vec<ParseError>) {
    let text = without_byte_order_mark(text);
    let dialect = Dialect::of(text);
    let (tokens, lex_errors) = lex_in(text, base, dialect);
    let mut p = Parser::new(text, base, tokens, ids, dialect);
    let mut defs = Vec::new();
    while p.peek() != Tok::Eof && !p.fatal {
        if p.peek() == Tok::Type {
            if p.type_alias().is_err() {
                p.skip_to_def();
            }
            continue;
        }
        if p.peek() != Tok::Def {
            let _ = p.error_expected::<()>("`def`");
            p.skip_to_def();
            continue;
        }
        match p.def() {
            Ok(d) => defs.push(d),
            Err(()) => p.skip_to_def(),
        }
    }
    let def_starts: Vec<u32> = p
        .tokens
        .iter()
        .filter(|t| matches!(t.kind, Tok::Def | Tok::Type))
        .map(|t| t.span.start)
        .collect();
    let errors = collect_errors(lex_errors, p.errors, &def_starts);
    (Program { defs }, errors)
}

/// Parses a single expression filling the whole input (for `nabla eval` and the REPL).
pub fn parse_expression(text: &str, base: u32, ids: &mut IdGen) -> Result<Expr, Vec<ParseError>> {
    parse_expression_in(text, base, ids, Dialect::Ordinary)
}

/// [`parse_expression`] in the given dialect.
pub fn parse_expression_in(
    text: &str,
    base: u32,
    ids: &mut IdGen,
    dialect: Dialect,
) -> Result<Expr, Vec<ParseError>> {
    let text = without_byte_order_mark(text);
    let (tokens, lex_errors) = lex_in(text, base, dialect);
    let mut p = Parser::new(text, base, tokens, ids, dialect);
    let result = p.expr();
    if result.is_ok() && p.peek() != Tok::Eof {
        let _ = p.error_expected::<()>("end of input");
    }
    let errors = collect_errors(lex_errors, p.errors, &[]);
    match result {
        Ok(e) if errors.is_empty() => Ok(e),
        _ => Err(errors),
    }
}

/// Parses a type expression filling the whole input (used for the primitive
/// table and tests). The translated dialect's type constructors (`Delta`,
/// `M A`, …) are recognised.
pub fn parse_type(text: &str, base: u32) -> Result<TypeExpr, Vec<ParseError>> {
    let (tokens, lex_errors) = lex_in(text, base, Dialect::Translated);
    let mut ids = IdGen::new();
    let mut p = Parser::new(text, base, tokens, &mut ids, Dialect::Translated);
    let result = p.ty();
    if result.is_ok() && p.peek() != Tok::Eof {
        let _ = p.error_expected::<()>("end of input");
    }
    let errors = collect_errors(lex_errors, p.errors, &[]);
    match result {
        Ok(t) if errors.is_empty() => Ok(t),
        _ => Err(errors),
    }
}

type PResult<T> = Result<T, ()>;

struct Parser<'a> {
    text: &'a str,
    base: u32,
    tokens: Vec<Token>,
    pos: usize,
    errors: Vec<ParseError>,
    ids: &'a mut IdGen,
    /// Set when the nesting budget ran out: stop, do not try to recover.
    fatal: bool,
    /// Index of the first token of the definition being parsed (the whole
    /// input for an expression): where [`Parser::slip`] looks for causes.
    def_start: usize,
    /// Trying a parse that may be undone ([`Parser::bind_pattern`]): errors
    /// are discarded, so [`Parser::slip`] need not look for causes.
    speculating: bool,
    /// Parsing a translated file.
    translated: bool,
    /// May `;` sequence expressions here? (Not at the top of a `do` block's
    /// items, where it separates statements; brackets allow it again.)
    allow_seq: bool,
}

/// The part of a `let` before `in`.
enum LetHead {
    /// `let p = value`
    Pat(Pattern, Expr),
    /// `let [rec] f x y = …`
    Fun(bool, FunBinding),
}

/// A statement of a `do` block.
enum Stmt {
    /// `p <- e`
    Bind(Pattern, Expr),
    /// `let …` (without `in`)
    Let(LetHead),
}

fn binop(t: Tok) -> Option<(BinOp, u8)> {
    Some(match t {
        Tok::PlusEq => (BinOp::AddTo, 0),
        Tok::OrOr => (BinOp::Or, 1),
        Tok::AndAnd => (BinOp::And, 2),
        Tok::Lt => (BinOp::Lt, 3),
        Tok::Le => (BinOp::Le, 3),
        Tok::Gt => (BinOp::Gt, 3),
        Tok::Ge => (BinOp::Ge, 3),
        Tok::EqEq => (BinOp::Eq, 3),
        Tok::Ne => (BinOp::Ne, 3),
        Tok::Plus => (BinOp::Add, 4),
        Tok::Minus => (BinOp::Sub, 4),
        Tok::Star => (BinOp::Mul, 5),
        Tok::Slash => (BinOp::Div, 5),
        Tok::Percent => (BinOp::Rem, 5),
        _ => return None,
    })
}

const CMP_PREC: u8 = 3;

/// For the keywords that start an expression extending as far right as
/// possible: how that expression is written as an argument.
fn bracketed_argument_example(t: Tok) -> Option<&'static str> {
    Some(match t {
        Tok::Fun => "`grad (fun x -> x * x) 3.0`",
        Tok::If => "`f (if c then 1 else 2)`",
        Tok::Let => "`f (let y = 2 in y * y)`",
        Tok::Match => "`f (match s with inl a -> a | inr b -> b)`",
        _ => return None,
    })
}

/// A syntax error whose found token shows what was meant.
struct Confusion {
    /// What the parser expected (as in "expected …").
    expected: &'static str,
    /// What it found.
    found: Tok,
    /// The headline; empty to keep "expected …, found …".
    message: &'static str,
    /// The text under the caret.
    label: &'static str,
}

/// Common confusions of newcomers from OCaml, Haskell and Python.
const CONFUSIONS: &[Confusion] = &[
    Confusion {
        expected: "`=`",
        found: Tok::EqEq,
        message: "names are bound with `=`, not `==`",
        label: "write `=` here; `==` compares two values",
    },
    Confusion {
        expected: "`then`",
        found: Tok::Assign,
        message: "`=` does not compare: write `==`",
        label: "`a == b` compares; `=` only binds names",
    },
    Confusion {
        expected: "`then`",
        found: Tok::Colon,
        message: "an `if` has no `:`",
        label: "write `if c then a else b`",
    },
    Confusion {
        expected: "`->`",
        found: Tok::Assign,
        message: "",
        label: "a function is written `fun x -> body`",
    },
    Confusion {
        expected: "`def`",
        found: Tok::Let,
        message: "top-level definitions start with `def`, not `let`",
        label: "write `def x = …`; `let … in …` is an expression",
    },
    Confusion {
        expected: "`def`",
        found: Tok::Ident,
        message: "",
        label: "every top-level definition starts with `def`, e.g. `def main = …`",
    },
];

impl<'a> Parser<'a> {
    fn new(
        text: &'a str,
        base: u32,
        tokens: Vec<Token>,
        ids: &'a mut IdGen,
        dialect: Dialect,
    ) -> Parser<'a> {
        Parser {
            text,
            base,
            tokens,
            pos: 0,
            errors: Vec::new(),
            ids,
            fatal: false,
            def_start: 0,
            speculating: false,
            translated: dialect == Dialect::Translated,
            allow_seq: true,
        }
    }

    /// Runs `f` with sequencing allowed (inside brackets) or not (the items
    /// of a `do` block).
    fn with_seq<T>(&mut self, allow: bool, f: impl FnOnce(&mut Self) -> T) -> T {
        let saved = std::mem::replace(&mut self.allow_seq, allow);
        let r = f(self);
        self.allow_seq = saved;
        r
    }

    fn tok(&self) -> Token {
        // `lex` always ends the stream with Eof and `bump` never moves past it.
        self.tokens
            .get(self.pos)
            .or(self.tokens.last())
            .copied()
            .unwrap_or(Token {
                kind: Tok::Eof,
                span: Span::new(self.base, self.base),
            })
    }

    fn peek(&self) -> Tok {
        self.tok().kind
    }

    fn peek_at(&self, n: usize) -> Tok {
        self.tokens.get(self.pos + n).map_or(Tok::Eof, |t| t.kind)
    }

    fn bump(&mut self) -> Token {
        let t = self.tok();
        if self.pos + 1 < self.tokens.len() {
            self.pos += 1;
        }
        t
    }

    fn prev_end(&self) -> u32 {
        if self.pos == 0 {
            self.base
        } else {
            self.tokens[self.pos - 1].span.end
        }
    }

    fn text_of(&self, span: Span) -> &'a str {
        let s = (span.start - self.base) as usize;
        let e = (span.end - self.base) as usize;
        self.text.get(s..e).unwrap_or("")
    }

    fn error(&mut self, message: impl Into<String>, span: Span, label: impl Into<String>) {
        self.errors.push(ParseError::new(message, span, label));
    }

    fn error_expected<T>(&mut self, what: &str) -> PResult<T> {
        let e = self.expected_error(what);
        self.errors.push(e);
        Err(())
    }

    /// The error for finding the current token where `what` was expected:
    /// a known slip ([`Parser::slip`]) if there is one, else "expected …,
    /// found …", with a hint when the found token shows what was meant
    /// ([`CONFUSIONS`]).
    fn expected_error(&self, what: &str) -> ParseError {
        if let Some(e) = self.slip() {
            return e;
        }
        let t = self.tok();
        let found = if t.kind == Tok::Ident || t.kind == Tok::Int || t.kind == Tok::Real {
            format!("`{}`", self.text_of(t.span))
        } else {
            t.kind.describe().to_string()
        };
        let plain = format!("expected {what}, found {found}");
        match CONFUSIONS
            .iter()
            .find(|c| c.expected == what && c.found == t.kind)
        {
            Some(c) if c.message.is_empty() => ParseError::new(plain, t.span, c.label),
            Some(c) => ParseError::new(c.message, t.span, c.label),
            None => ParseError::new(plain, t.span, format!("expected {what}")),
        }
    }

    fn expect(&mut self, kind: Tok) -> PResult<Token> {
        if self.peek() == kind {
            Ok(self.bump())
        } else {
            self.error_expected(kind.describe())
        }
    }

    /// Expects `kind`, the token that completes the construct begun by the
    /// token at `open` (`(`, `[`, `if`, `let`). When the definition ends
    /// first (at the next `def` or the end of the input), the error is at
    /// `open`, where the fix belongs, not where the parser gave up.
    fn finish(&mut self, kind: Tok, open: Span) -> PResult<Token> {
        if self.peek() == kind {
            return Ok(self.bump());
        }
        let t = self.tok();
        let opener = self.text_of(open);
        let bracket = matches!(kind, Tok::RParen | Tok::RBracket);
        let error = match self.slip() {
            Some(e) => e,
            None if matches!(t.kind, Tok::Def | Tok::Eof) => {
                let (message, label) = match kind {
                    _ if bracket => (
                        format!("this `{opener}` is never closed"),
                        format!("no matching {}", kind.describe()),
                    ),
                    Tok::In => (
                        "this `let` has no `in`".to_string(),
                        "write `let x = … in body`; a top-level binding is `def x = …`".to_string(),
                    ),
                    _ => (
                        format!("this `{opener}` has no {}", kind.describe()),
                        "an `if` is `if c then a else b`, with both branches".to_string(),
                    ),
                };
                // At the end of the input, point just after the last token
                // rather than at a blank last line.
                let (end, at) = if t.kind == Tok::Def {
                    ("the next definition starts here", t.span)
                } else {
                    let last = self.prev_end();
                    ("the input ends here", Span::new(last, last))
                };
                ParseError::new(message, open, label)
                    .with_secondary(at, format!("{end}, without {}", kind.describe()))
            }
            None => {
                let what = if bracket { "not closed" } else { "begins here" };
                self.expected_error(kind.describe())
                    .with_secondary(open, format!("this `{opener}` {what}"))
            }
        };
        self.errors.push(error);
        Err(())
    }

    /// A construct of another language in the current definition, up to the
    /// current token, that explains the syntax error here: `where`,
    /// `let rec … and …`, `elif`, `lambda`/`fn`, `return`, `::`. Words that
    /// could be variable names only count in a binding shape
    /// ([`Parser::starts_binding`]), so a variable named `where` is not blamed.
    fn slip(&self) -> Option<ParseError> {
        if self.speculating {
            return None;
        }
        let end = self.pos.min(self.tokens.len().saturating_sub(1));
        let scope = self.def_start..end;
        let let_rec = self.tokens[scope.clone()]
            .windows(2)
            .position(|w| w[0].kind == Tok::Let && w[1].kind == Tok::Rec)
            .map(|k| self.def_start + k);
        (self.def_start..=end).find_map(|i| self.slip_at(i, let_rec.is_some_and(|r| r < i)))
    }

    /// The slip at token `i` ([`Parser::slip`]), if any; `after_let_rec`
    /// says whether a `let rec` comes earlier in the definition.
    fn slip_at(&self, i: usize, after_let_rec: bool) -> Option<ParseError> {
        let t = self.tokens[i];
        if t.kind == Tok::Colon {
            let next = self.tokens.get(i + 1)?;
            if next.kind != Tok::Colon || next.span.start != t.span.end {
                return None;
            }
            return Some(
                ParseError::new(
                    "lists and `::` are not part of nabla",
                    t.span.to(next.span),
                    "use a vector instead, e.g. `[1, 2]`",
                )
                .with_note(
                    "vectors are built with `[a, b, c]` or `build n (fun i -> e)` and \
                     taken apart with `v[i]`, `size`, `map`, `fold`, `sum` and `zip`",
                ),
            );
        }
        if t.kind != Tok::Ident {
            return None;
        }
        let (message, label) = match self.text_of(t.span) {
            "where" if self.starts_binding(i) => (
                format!("`where` is not supported: write `{}`", self.where_as_let(i)),
                "bind the name with `let … in` before the expression that uses it".to_string(),
            ),
            "and" if after_let_rec && self.starts_binding(i) => (
                "`let rec … and …` (mutual recursion) is not supported".to_string(),
                "define these functions with `def` at the top level instead: \
                 top-level definitions may be mutually recursive \
                 (see examples/mutual.nabla)"
                    .to_string(),
            ),
            "elif" => (
                "`elif` is not part of nabla: write `else if`".to_string(),
                "`if a then x else if b then y else z`".to_string(),
            ),
            word @ ("lambda" | "fn") if self.starts_binding(i) => (
                "a function is written `fun x -> e`".to_string(),
                format!("write `fun x -> …` instead of `{word} x …`"),
            ),
            "return" => (
                "nabla has no `return`".to_string(),
                "a definition is `def f x = e`: its value is the expression `e`".to_string(),
            ),
            _ => return None,
        };
        Some(ParseError::new(message, t.span, label))
    }

    /// Does the word at token `i` start `word pattern… (= | -> | :)`, ending
    /// at or before the current token (as in `where y = 1` or `fn x => x`),
    /// in an expression rather than among the parameters of a binding
    /// (`def apply fn x = …` names a parameter `fn`)?
    /// It looks at most 32 tokens either way (patterns are short), so the
    /// scan of a long definition stays linear.
    fn starts_binding(&self, i: usize) -> bool {
        const REACH: usize = 32;
        let in_pattern = |k: Tok| matches!(k, Tok::Ident | Tok::LParen | Tok::RParen | Tok::Comma);
        let limit = self.pos.min(i + REACH);
        let mut j = i + 1;
        while j < limit && in_pattern(self.tokens[j].kind) {
            j += 1;
        }
        let binding_shape = j > i + 1
            && j <= self.pos
            && matches!(self.tokens[j].kind, Tok::Assign | Tok::Arrow | Tok::Colon);
        let in_header = self.tokens[self.def_start.max(i.saturating_sub(REACH))..i]
            .iter()
            .rev()
            .find(|t| !in_pattern(t.kind) && t.kind != Tok::Colon)
            .is_some_and(|t| matches!(t.kind, Tok::Def | Tok::Let | Tok::Rec | Tok::Fun));
        binding_shape && !in_header
    }

    /// `e where y = v` (the `where` at token `i`) rewritten as
    /// `let y = v in e`, quoting the source when both parts are short and on
    /// one line.
    fn where_as_let(&self, i: usize) -> String {
        let before = &self.tokens[self.def_start..i];
        // The expression starts after the definition's `=` (or at the start of an input expression).
        let expr_start = match before.first() {
            Some(t) if t.kind == Tok::Def => before
                .iter()
                .find(|t| t.kind == Tok::Assign)
                .map_or(t.span.end, |t| t.span.end),
            Some(t) => t.span.start,
            None => self.tokens[i].span.start,
        };
        let binding_end = self.tokens[i..]
            .iter()
            .find(|t| matches!(t.kind, Tok::Def | Tok::Eof))
            .map_or(self.tokens[i].span.end, |t| t.span.start);
        let expr = self
            .text_of(Span::new(expr_start, self.tokens[i].span.start))
            .trim();
        let binding = self
            .text_of(Span::new(self.tokens[i].span.end, binding_end))
            .trim();
        let short = |s: &str| !s.is_empty() && !s.contains('\n') && s.chars().count() <= 40;
        if short(expr) && short(binding) {
            format!("let {binding} in {expr}")
        } else {
            let name = self.text_of(self.tokens[i + 1].span);
            format!("let {name} = … in …")
        }
    }

    fn guard(&mut self) -> PResult<()> {
        if stack::check().is_err() {
            let span = self.tok().span;
            if !self.fatal {
                self.error(
                    "program nested too deeply",
                    span,
                    "nesting limit reached here",
                );
            }
            self.fatal = true;
            return Err(());
        }
        Ok(())
    }

    fn skip_to_def(&mut self) {
        if self.fatal {
            self.pos = self.tokens.len().saturating_sub(1);
            return;
        }
        // The failed definition consumed at least its own `def`, so a `def`
        // here starts the next definition: keep it.
        while !matches!(self.peek(), Tok::Def | Tok::Type | Tok::Eof) {
            self.bump();
        }
    }

    fn mk(&mut self, kind: ExprKind, span: Span) -> Expr {
        Expr {
            kind,
            span,
            id: self.ids.fresh(),
        }
    }

    fn ident(&mut self) -> PResult<Ident> {
        let t = self.expect(Tok::Ident)?;
        Ok(Ident {
            name: self.text_of(t.span).to_string(),
            span: t.span,
        })
    }

    // ---- definitions ----

    /// `type Name = T`: from here on (in this input and later ones of the
    /// session) `Name` stands for `T`.
    fn type_alias(&mut self) -> PResult<()> {
        self.def_start = self.pos;
        self.expect(Tok::Type)?;
        let name = self.ident()?;
        let builtin = matches!(name.name.as_str(), "Real" | "Int" | "Bool" | "Vec");
        if builtin || !name.name.starts_with(|c: char| c.is_ascii_uppercase()) {
            self.error(
                format!("`{}` cannot name a type", name.name),
                name.span,
                if builtin {
                    "this is a built-in type"
                } else {
                    "a type's name starts with an upper-case letter (`type Model = …`)"
                },
            );
            return Err(());
        }
        self.expect(Tok::Assign)?;
        let body = self.ty()?;
        self.ids.aliases.insert(name.name, body);
        Ok(())
    }

    fn def(&mut self) -> PResult<Def> {
        self.def_start = self.pos;
        let start = self.expect(Tok::Def)?.span;
        let binding = self.fun_binding()?;
        let span = start.to(binding.body.span);
        Ok(Def {
            binding,
            span,
            translated: self.translated,
        })
    }

    /// `name params* (: T)? = body`
    fn fun_binding(&mut self) -> PResult<FunBinding> {
        let name = self.ident()?;
        let mut params = Vec::new();
        while self.starts_pattern() {
            params.push(self.pattern()?);
        }
        let ret = if self.peek() == Tok::Colon {
            self.bump();
            Some(self.ty()?)
        } else {
            None
        };
        self.expect(Tok::Assign)?;
        let body = self.expr()?;
        Ok(FunBinding {
            name,
            params,
            ret,
            body,
        })
    }

    // ---- patterns ----

    fn starts_pattern(&self) -> bool {
        matches!(self.peek(), Tok::Ident | Tok::LParen | Tok::LBrace)
    }

    fn pattern(&mut self) -> PResult<Pattern> {
        self.guard()?;
        match self.peek() {
            Tok::Ident => {
                let id = self.ident()?;
                if id.name == "_" {
                    Ok(Pattern::Wild(id.span))
                } else {
                    Ok(Pattern::Var(id))
                }
            }
            Tok::LParen => {
                let open = self.bump().span;
                if self.peek() == Tok::RParen {
                    let close = self.bump().span;
                    return Ok(Pattern::Unit(open.to(close)));
                }
                let first = self.pattern()?;
                match self.peek() {
                    Tok::Colon => {
                        self.bump();
                        let t = self.ty()?;
                        let close = self.finish(Tok::RParen, open)?.span;
                        Ok(Pattern::Annot(Box::new(first), t, open.to(close)))
                    }
                    Tok::Comma => {
                        let mut items = vec![first];
                        while self.peek() == Tok::Comma {
                            self.bump();
                            items.push(self.pattern()?);
                        }
                        let close = self.finish(Tok::RParen, open)?.span;
                        Ok(Pattern::Tuple(items, open.to(close)))
                    }
                    _ => {
                        self.finish(Tok::RParen, open)?;
                        Ok(first)
                    }
                }
            }
            Tok::LBrace => self.record_pattern(),
            _ => self.error_expected("a pattern (a name, `_`, a tuple or a record pattern)"),
        }
    }

    /// `{ w = p, b }` or `{ w, .. }`.
    fn record_pattern(&mut self) -> PResult<Pattern> {
        let open_brace = self.bump().span;
        let mut fields: Vec<(Ident, Pattern)> = Vec::new();
        let mut open = false;
        loop {
            if self.peek() == Tok::Dot && self.peek_at(1) == Tok::Dot && !fields.is_empty() {
                self.bump();
                self.bump();
                open = true;
                break;
            }
            let name = self.ident()?;
            self.no_repeated_field(&fields, &name)?;
            let p = if self.peek() == Tok::Assign {
                self.bump();
                self.pattern()?
            } else {
                Pattern::Var(name.clone())
            };
            fields.push((name, p));
            if self.peek() != Tok::Comma {
                break;
            }
            self.bump();
        }
        let close = self.finish(Tok::RBrace, open_brace)?.span;
        Ok(Pattern::Record {
            fields,
            open,
            span: open_brace.to(close),
            id: self.ids.fresh(),
        })
    }

    /// An error if `name` is among `fields` already.
    fn no_repeated_field<T>(&mut self, fields: &[(Ident, T)], name: &Ident) -> PResult<()> {
        if let Some((first, _)) = fields.iter().find(|(f, _)| f.name == name.name) {
            self.errors.push(
                ParseError::new(
                    format!("the field `{}` is named twice", name.name),
                    name.span,
                    "named again here",
                )
                .with_secondary(first.span, "first named here"),
            );
            return Err(());
        }
        Ok(())
    }

    // ---- types ----

    fn ty(&mut self) -> PResult<TypeExpr> {
        self.guard()?;
        let lhs = self.ty_sum()?;
        if self.peek() == Tok::Arrow {
            self.bump();
            let rhs = self.ty()?;
            let span = lhs.span().to(rhs.span());
            return Ok(TypeExpr::Fun(Box::new(lhs), Box::new(rhs), span));
        }
        Ok(lhs)
    }

    fn ty_sum(&mut self) -> PResult<TypeExpr> {
        let mut lhs = self.ty_app()?;
        while self.peek() == Tok::Plus {
            self.bump();
            let rhs = self.ty_app()?;
            let span = lhs.span().to(rhs.span());
            lhs = TypeExpr::Sum(Box::new(lhs), Box::new(rhs), span);
        }
        Ok(lhs)
    }

    /// A type constructor of the translated dialect named by the current token.
    fn type_con(&self) -> Option<Con> {
        if !self.translated || self.peek() != Tok::Ident {
            return None;
        }
        Con::from_name(self.text_of(self.tok().span))
    }

    fn ty_app(&mut self) -> PResult<TypeExpr> {
        self.guard()?;
        if self.peek() == Tok::Ident && self.text_of(self.tok().span) == "Vec" {
            let start = self.bump().span;
            let arg = self.ty_app()?;
            let span = start.to(arg.span());
            return Ok(TypeExpr::Vec(Box::new(arg), span));
        }
        if let Some(c) = self.type_con()
            && c.arity() == 1
        {
            let start = self.bump().span;
            let arg = self.ty_app()?;
            let span = start.to(arg.span());
            return Ok(TypeExpr::Con(c, vec![arg], span));
        }
        self.ty_atom()
    }

    fn ty_atom(&mut self) -> PResult<TypeExpr> {
        if let Some(c) = self.type_con()
            && c.arity() == 0
        {
            let span = self.bump().span;
            return Ok(TypeExpr::Con(c, Vec::new(), span));
        }
        match self.peek() {
            Tok::Ident => {
                let name = self.ident()?;
                Ok(match self.ids.aliases.get(&name.name) {
                    Some(t) => t.clone(),
                    None => TypeExpr::Name(name),
                })
            }
            Tok::LBrace => {
                let open = self.bump().span;
                let mut fields: Vec<(Ident, TypeExpr)> = Vec::new();
                loop {
                    let name = self.ident()?;
                    self.no_repeated_field(&fields, &name)?;
                    self.expect(Tok::Colon)?;
                    fields.push((name, self.ty()?));
                    if self.peek() != Tok::Comma {
                        break;
                    }
                    self.bump();
                }
                let close = self.finish(Tok::RBrace, open)?.span;
                Ok(TypeExpr::Record(fields, open.to(close)))
            }
            Tok::LParen => {
                let open = self.bump().span;
                if self.peek() == Tok::RParen {
                    let close = self.bump().span;
                    return Ok(TypeExpr::Unit(open.to(close)));
                }
                let first = self.ty()?;
                if self.peek() == Tok::Comma {
                    let mut items = vec![first];
                    while self.peek() == Tok::Comma {
                        self.bump();
                        items.push(self.ty()?);
                    }
                    let close = self.finish(Tok::RParen, open)?.span;
                    return Ok(TypeExpr::Tuple(items, open.to(close)));
                }
                self.finish(Tok::RParen, open)?;
                Ok(first)
            }
            _ => self.error_expected("a type"),
        }
    }

    // ---- expressions ----

    fn expr(&mut self) -> PResult<Expr> {
        self.guard()?;
        let e = match self.peek() {
            Tok::Let => self.let_expr(),
            Tok::If => self.if_expr(),
            Tok::Fun => self.fun_expr(),
            Tok::Match => self.match_expr(),
            _ => self.binary(0),
        }?;
        if self.allow_seq && self.peek() == Tok::Semi {
            // `e; rest` is `let () = e in rest`.
            self.bump();
            let rest = self.expr()?;
            let span = e.span.to(rest.span);
            let unit = Pattern::Unit(e.span);
            return Ok(self.mk(ExprKind::Let(unit, Box::new(e), Box::new(rest)), span));
        }
        Ok(e)
    }

    fn let_expr(&mut self) -> PResult<Expr> {
        let start = self.tok().span;
        let head = self.let_head()?;
        self.finish(Tok::In, start)?;
        let body = self.expr()?;
        Ok(self.finish_let(start, head, body))
    }

    /// `let p = e1 in body` or `let [rec] f x = e1 in body`, from its parts.
    fn finish_let(&mut self, start: Span, head: LetHead, body: Expr) -> Expr {
        let span = start.to(body.span);
        let kind = match head {
            LetHead::Pat(p, value) => ExprKind::Let(p, Box::new(value), Box::new(body)),
            LetHead::Fun(rec, binding) => ExprKind::LetFun {
                rec,
                binding: Box::new(binding),
                body: Box::new(body),
            },
        };
        self.mk(kind, span)
    }

    /// `let [rec] …` up to (not including) `in`.
    fn let_head(&mut self) -> PResult<LetHead> {
        self.expect(Tok::Let)?;
        let rec = if self.peek() == Tok::Rec {
            self.bump();
            true
        } else {
            false
        };
        if self.peek() == Tok::Ident
            && (rec || !matches!(self.peek_at(1), Tok::Assign | Tok::Colon))
        {
            // A function binding `let f x y = ...` (or any `let rec`).
            let binding = self.fun_binding()?;
            if rec && binding.params.is_empty() && !matches!(binding.body.kind, ExprKind::Lam(..)) {
                self.error(
                    "`let rec` must define a function",
                    binding.name.span,
                    "write `let rec f x = ...` or `let rec f = fun x -> ...`",
                );
                return Err(());
            }
            return Ok(LetHead::Fun(rec, binding));
        }
        if rec {
            return self.error_expected("a function name after `let rec`");
        }
        let mut pat = self.pattern()?;
        if self.peek() == Tok::Colon {
            self.bump();
            let t = self.ty()?;
            let span = pat.span().to(t.span());
            pat = Pattern::Annot(Box::new(pat), t, span);
        }
        self.expect(Tok::Assign)?;
        let value = self.expr()?;
        Ok(LetHead::Pat(pat, value))
    }

    /// `do { stmt; …; e }` (translated dialect), as nested [`ExprKind::Bind`]s
    /// and `let`s.
    fn do_block(&mut self) -> PResult<Expr> {
        let start = self.expect(Tok::Do)?.span;
        self.expect(Tok::LBrace)?;
        let mut stmts: Vec<(Span, Stmt)> = Vec::new();
        let last = self.with_seq(false, |p| -> PResult<Expr> {
            loop {
                p.guard()?;
                let item_start = p.tok().span;
                if p.peek() == Tok::RBrace {
                    p.error(
                        "a `do` block must end with an expression",
                        item_start,
                        "the block ends here, without a final expression",
                    );
                    return Err(());
                }
                let e = if p.peek() == Tok::Let {
                    let head = p.let_head()?;
                    if p.peek() == Tok::In {
                        p.bump();
                        let body = p.expr()?;
                        p.finish_let(item_start, head, body)
                    } else {
                        stmts.push((item_start, Stmt::Let(head)));
                        p.end_statement()?;
                        continue;
                    }
                } else if let Some(pat) = p.bind_pattern() {
                    p.expect(Tok::LArrow)?;
                    let value = p.expr()?;
                    stmts.push((item_start, Stmt::Bind(pat, value)));
                    p.end_statement()?;
                    continue;
                } else {
                    p.expr()?
                };
                // An expression: the last item (a `;` may follow it).
                if p.peek() == Tok::Semi {
                    p.bump();
                    if p.peek() != Tok::RBrace {
                        p.error(
                            "only the last item of a `do` block may be an expression",
                            e.span,
                            "a statement is `p <- e` or `let p = e`; \
                             write `(a; b)` for a sequence",
                        );
                        return Err(());
                    }
                }
                return Ok(e);
            }
        })?;
        let close = self.expect(Tok::RBrace)?.span;
        let mut body = last;
        for (s, stmt) in stmts.into_iter().rev() {
            body = match stmt {
                Stmt::Bind(p, value) => {
                    let span = s.to(close);
                    self.mk(ExprKind::Bind(p, Box::new(value), Box::new(body)), span)
                }
                Stmt::Let(head) => {
                    let mut e = self.finish_let(s, head, body);
                    e.span = s.to(close);
                    e
                }
            };
        }
        body.span = start.to(close);
        Ok(body)
    }

    /// After a statement of a `do` block: its `;`, and more to come.
    fn end_statement(&mut self) -> PResult<()> {
        if self.peek() == Tok::RBrace {
            let span = self.tok().span;
            self.error(
                "a `do` block must end with an expression",
                span,
                "the block ends here, after a statement",
            );
            return Err(());
        }
        self.expect(Tok::Semi)?;
        Ok(())
    }

    /// A pattern followed by `<-` (not consumed), if the next item of a
    /// `do` block starts with one; otherwise nothing is consumed.
    fn bind_pattern(&mut self) -> Option<Pattern> {
        if !self.starts_pattern() {
            return None;
        }
        let (pos, errors) = (self.pos, self.errors.len());
        // A failure here is not an error, so it needs no explanation.
        let saved = std::mem::replace(&mut self.speculating, true);
        let pattern = self.pattern();
        self.speculating = saved;
        match pattern {
            Ok(p) if self.peek() == Tok::LArrow => Some(p),
            _ => {
                self.pos = pos;
                if !self.fatal {
                    self.errors.truncate(errors);
                }
                None
            }
        }
    }

    fn if_expr(&mut self) -> PResult<Expr> {
        let start = self.expect(Tok::If)?.span;
        let c = self.expr()?;
        self.finish(Tok::Then, start)?;
        let a = self.expr()?;
        self.finish(Tok::Else, start)?;
        let b = self.expr()?;
        let span = start.to(b.span);
        Ok(self.mk(ExprKind::If(Box::new(c), Box::new(a), Box::new(b)), span))
    }

    fn fun_expr(&mut self) -> PResult<Expr> {
        let start = self.expect(Tok::Fun)?.span;
        let mut params = Vec::new();
        while self.starts_pattern() {
            params.push(self.pattern()?);
        }
        if params.is_empty() {
            return self.error_expected("a parameter after `fun`");
        }
        self.expect(Tok::Arrow)?;
        let body = self.expr()?;
        let span = start.to(body.span);
        Ok(self.mk(ExprKind::Lam(params, Box::new(body)), span))
    }

    fn match_expr(&mut self) -> PResult<Expr> {
        let start = self.expect(Tok::Match)?.span;
        let scrutinee = self.expr()?;
        self.expect(Tok::With)?;
        if self.peek() == Tok::Bar {
            self.bump();
        }
        let (first_is_left, p1, e1) = self.match_arm()?;
        self.expect(Tok::Bar)?;
        let second_start = self.tok().span;
        let (second_is_left, p2, e2) = self.match_arm()?;
        if first_is_left == second_is_left {
            let which = if first_is_left { "inl" } else { "inr" };
            self.error(
                format!("`match` has two `{which}` arms"),
                second_start,
                "a `match` needs one `inl` arm and one `inr` arm",
            );
            return Err(());
        }
        let span = start.to(e2.span);
        let (left, right) = if first_is_left {
            ((p1, Box::new(e1)), (p2, Box::new(e2)))
        } else {
            ((p2, Box::new(e2)), (p1, Box::new(e1)))
        };
        Ok(self.mk(
            ExprKind::Match {
                scrutinee: Box::new(scrutinee),
                left,
                right,
            },
            span,
        ))
    }

    fn match_arm(&mut self) -> PResult<(bool, Pattern, Expr)> {
        let is_left = match self.peek() {
            Tok::Inl => true,
            Tok::Inr => false,
            _ => return self.error_expected("`inl` or `inr`"),
        };
        self.bump();
        let p = self.pattern()?;
        self.expect(Tok::Arrow)?;
        let e = self.expr()?;
        Ok((is_left, p, e))
    }

    fn binary(&mut self, min: u8) -> PResult<Expr> {
        self.guard()?;
        let mut lhs = self.unary()?;
        while let Some((op, prec)) = binop(self.peek()) {
            if prec < min {
                break;
            }
            self.bump();
            let rhs = self.binary(prec + 1)?;
            if op == BinOp::AddTo && self.peek() == Tok::PlusEq {
                let span = self.tok().span;
                self.error(
                    "`+=` cannot be chained",
                    span,
                    "`r += e` is a statement; sequence two with `;`",
                );
                return Err(());
            }
            if prec == CMP_PREC
                && let Some((_, p2)) = binop(self.peek())
                && p2 == CMP_PREC
            {
                let span = self.tok().span;
                self.error(
                    "comparison operators cannot be chained",
                    span,
                    "use `&&` or parentheses, e.g. `a < b && b < c`",
                );
                return Err(());
            }
            let span = lhs.span.to(rhs.span);
            lhs = self.mk(ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)), span);
        }
        Ok(lhs)
    }

    fn unary(&mut self) -> PResult<Expr> {
        self.guard()?;
        match self.peek() {
            Tok::Minus => {
                let start = self.bump().span;
                let e = self.unary()?;
                let span = start.to(e.span);
                Ok(self.mk(ExprKind::Neg(Box::new(e)), span))
            }
            Tok::Bang => {
                let start = self.bump().span;
                let e = self.unary()?;
                let span = start.to(e.span);
                Ok(self.mk(ExprKind::Deref(Box::new(e)), span))
            }
            // A trailing `let`/`if`/`fun`/`match` operand swallows the rest.
            Tok::Let | Tok::If | Tok::Fun | Tok::Match => self.expr(),
            _ => self.power(),
        }
    }

    fn power(&mut self) -> PResult<Expr> {
        let base = self.application()?;
        if self.peek() == Tok::StarStar {
            self.bump();
            let exp = self.unary()?;
            let span = base.span.to(exp.span);
            return Ok(self.mk(
                ExprKind::Binary(BinOp::Pow, Box::new(base), Box::new(exp)),
                span,
            ));
        }
        Ok(base)
    }

    fn starts_atom(&self) -> bool {
        matches!(
            self.peek(),
            Tok::Ident
                | Tok::Int
                | Tok::Real
                | Tok::True
                | Tok::False
                | Tok::LParen
                | Tok::LBracket
                | Tok::LBrace
                | Tok::Do
                | Tok::Str
        )
    }

    fn application(&mut self) -> PResult<Expr> {
        let mut head = match self.peek() {
            Tok::Inl | Tok::Inr => {
                let left = self.peek() == Tok::Inl;
                let kw = self.bump().span;
                if self.starts_atom() {
                    let arg = self.postfix()?;
                    let span = kw.to(arg.span);
                    let kind = if left {
                        ExprKind::Inl(Box::new(arg))
                    } else {
                        ExprKind::Inr(Box::new(arg))
                    };
                    self.mk(kind, span)
                } else {
                    self.pos -= 1;
                    self.injection_fn()
                }
            }
            Tok::RunDelta => {
                let kw = self.bump().span;
                let first = self.postfix()?;
                let m = self.postfix()?;
                let span = kw.to(m.span);
                self.mk(ExprKind::RunDelta(Box::new(first), Box::new(m)), span)
            }
            Tok::Trace => {
                let kw = self.bump().span;
                if self.peek() != Tok::Str {
                    return self.error_expected("a string literal (`trace \"label\" value`)");
                }
                let label = self.bump().span;
                let label = lexer::string_value(self.text_of(label));
                if !self.starts_atom() || self.peek() == Tok::Str {
                    return self.error_expected("the value to trace");
                }
                let v = self.postfix()?;
                let span = kw.to(v.span);
                self.mk(ExprKind::Trace(label, Box::new(v)), span)
            }
            _ => self.postfix()?,
        };
        while self.starts_atom() || matches!(self.peek(), Tok::Inl | Tok::Inr) {
            // As an argument, a bare `inl`/`inr` is the injection function.
            let arg = if matches!(self.peek(), Tok::Inl | Tok::Inr) {
                self.injection_fn()
            } else {
                self.postfix()?
            };
            let span = head.span.to(arg.span);
            head = self.mk(ExprKind::App(Box::new(head), Box::new(arg)), span);
        }
        if let Some(example) = bracketed_argument_example(self.peek()) {
            // Nothing may follow an application directly but these keywords
            // (`grad fun x -> …`): they were meant as an argument.
            let t = self.tok();
            let kw = t.kind.describe();
            let article = if t.kind == Tok::If { "an" } else { "a" };
            self.errors.push(
                ParseError::new(
                    format!("{article} {kw} expression as an argument needs parentheses"),
                    t.span,
                    format!("put the {kw} expression in parentheses"),
                )
                .with_note(format!(
                    "{kw} extends as far to the right as it can, so as an argument \
                     it is written in parentheses: {example}"
                )),
            );
            return Err(());
        }
        Ok(head)
    }

    /// A bare `inl`/`inr` (current token): the function `fun x -> inl x`.
    fn injection_fn(&mut self) -> Expr {
        let t = self.bump();
        let kw = t.span;
        let var = self.mk(ExprKind::Var("x".into()), kw);
        let kind = if t.kind == Tok::Inl {
            ExprKind::Inl(Box::new(var))
        } else {
            ExprKind::Inr(Box::new(var))
        };
        let inj = self.mk(kind, kw);
        let param = Pattern::Var(Ident {
            name: "x".into(),
            span: kw,
        });
        self.mk(ExprKind::Lam(vec![param], Box::new(inj)), kw)
    }

    fn postfix(&mut self) -> PResult<Expr> {
        let mut e = self.atom()?;
        loop {
            // `v[i]` only when `[` touches the previous token: `f [1]` is an application.
            if self.peek() == Tok::LBracket && self.tok().span.start == self.prev_end() {
                let open = self.bump().span;
                let index = self.with_seq(true, |p| p.expr())?;
                let close = self.finish(Tok::RBracket, open)?.span;
                let span = e.span.to(close);
                e = self.mk(ExprKind::Index(Box::new(e), Box::new(index)), span);
            } else if self.peek() == Tok::Dot {
                self.bump();
                let field = self.ident()?;
                let span = e.span.to(field.span);
                e = self.mk(ExprKind::Field(Box::new(e), field), span);
            } else {
                return Ok(e);
            }
        }
    }

    fn atom(&mut self) -> PResult<Expr> {
        self.guard()?;
        let t = self.tok();
        match t.kind {
            Tok::Ident => {
                self.bump();
                let name = self.text_of(t.span).to_string();
                if name == "_" {
                    self.error(
                        "`_` is not an expression",
                        t.span,
                        "`_` can only be used in a pattern",
                    );
                    return Err(());
                }
                if self.peek() == Tok::At {
                    return self.poly(name, t.span);
                }
                Ok(self.mk(ExprKind::Var(name), t.span))
            }
            Tok::Int => {
                self.bump();
                match self.text_of(t.span).parse::<i64>() {
                    Ok(n) => Ok(self.mk(ExprKind::Int(n), t.span)),
                    Err(_) => {
                        self.error(
                            "integer literal is too large",
                            t.span,
                            format!("the largest Int is {}; write a real literal like `1e30` for large reals", i64::MAX),
                        );
                        Err(())
                    }
                }
            }
            Tok::Real => {
                self.bump();
                match self.text_of(t.span).parse::<f64>() {
                    Ok(x) => Ok(self.mk(ExprKind::Real(x), t.span)),
                    Err(_) => {
                        self.error("malformed real literal", t.span, "");
                        Err(())
                    }
                }
            }
            Tok::True | Tok::False => {
                self.bump();
                Ok(self.mk(ExprKind::Bool(t.kind == Tok::True), t.span))
            }
            Tok::Do => self.do_block(),
            Tok::Str => {
                self.error(
                    "a string literal can only be the label of `trace`",
                    t.span,
                    "nabla has no strings: write `trace \"label\" value` to print a value",
                );
                Err(())
            }
            Tok::LParen => self.with_seq(true, |p| p.paren()),
            Tok::LBracket => self.with_seq(true, |p| p.vector()),
            Tok::LBrace => self.with_seq(true, |p| p.record()),
            _ => self.error_expected("an expression"),
        }
    }

    /// `name @T` (the current token is `@`): a polytypic helper.
    fn poly(&mut self, name: String, name_span: Span) -> PResult<Expr> {
        let Some(p) = Poly::from_name(&name) else {
            self.error(
                format!("`{name}` is not a polytypic helper"),
                name_span,
                "`@T` follows zipDual, tangentOf, primalOf, initVars, initZeros or lookupDual",
            );
            return Err(());
        };
        self.bump();
        let t = self.ty_atom()?;
        let span = name_span.to(t.span());
        Ok(self.mk(ExprKind::Poly(p, t), span))
    }

    /// `()`, `(e)`, `(e : T)` or a tuple.
    fn paren(&mut self) -> PResult<Expr> {
        let open = self.bump().span;
        if self.peek() == Tok::RParen {
            let close = self.bump().span;
            return Ok(self.mk(ExprKind::Unit, open.to(close)));
        }
        let first = self.expr()?;
        match self.peek() {
            Tok::Colon => {
                self.bump();
                let ty = self.ty()?;
                let close = self.finish(Tok::RParen, open)?.span;
                Ok(self.mk(ExprKind::Annot(Box::new(first), ty), open.to(close)))
            }
            Tok::Comma => {
                let mut items = vec![first];
                while self.peek() == Tok::Comma {
                    self.bump();
                    items.push(self.expr()?);
                }
                let close = self.finish(Tok::RParen, open)?.span;
                Ok(self.mk(ExprKind::Tuple(items), open.to(close)))
            }
            _ => {
                let close = self.finish(Tok::RParen, open)?.span;
                // Keep the parentheses in the span so carets cover them.
                let mut inner = first;
                inner.span = open.to(close);
                Ok(inner)
            }
        }
    }

    /// `{ w = e1, b }` or `{ r with b = e }`.
    fn record(&mut self) -> PResult<Expr> {
        let open = self.bump().span;
        let base = if self.peek() == Tok::Ident
            && matches!(self.peek_at(1), Tok::Assign | Tok::Comma | Tok::RBrace)
        {
            None
        } else {
            let r = self.expr()?;
            self.expect(Tok::With)?;
            Some(r)
        };
        let mut fields: Vec<(Ident, Expr)> = Vec::new();
        loop {
            let name = self.ident()?;
            self.no_repeated_field(&fields, &name)?;
            let value = if self.peek() == Tok::Assign {
                self.bump();
                self.expr()?
            } else {
                self.mk(ExprKind::Var(name.name.clone()), name.span)
            };
            fields.push((name, value));
            if self.peek() != Tok::Comma {
                break;
            }
            self.bump();
        }
        let close = self.finish(Tok::RBrace, open)?.span;
        let kind = match base {
            None => ExprKind::Record(fields),
            Some(r) => ExprKind::Update(Box::new(r), fields),
        };
        Ok(self.mk(kind, open.to(close)))
    }

    /// `[e1, …, en]`
    fn vector(&mut self) -> PResult<Expr> {
        let open = self.bump().span;
        let mut items = Vec::new();
        if self.peek() != Tok::RBracket {
            items.push(self.expr()?);
            while self.peek() == Tok::Comma {
                self.bump();
                items.push(self.expr()?);
            }
        }
        let close = self.finish(Tok::RBracket, open)?.span;
        Ok(self.mk(ExprKind::Vector(items), open.to(close)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fully parenthesised rendering of an expression, to check its shape.
    fn shape(e: &Expr) -> String {
        match &e.kind {
            ExprKind::Var(n) => n.clone(),
            ExprKind::Int(n) => n.to_string(),
            ExprKind::Real(x) => format!("{x:?}"),
            ExprKind::Bool(b) => b.to_string(),
            ExprKind::Unit => "()".into(),
            ExprKind::App(f, x) => format!("({} {})", shape(f), shape(x)),
            ExprKind::Binary(op, a, b) => format!("({} {} {})", shape(a), op.symbol(), shape(b)),
            ExprKind::Neg(a) => format!("(-{})", shape(a)),
            ExprKind::Index(v, i) => format!("{}[{}]", shape(v), shape(i)),
            ExprKind::Vector(es) => {
                format!("[{}]", es.iter().map(shape).collect::<Vec<_>>().join(", "))
            }
            ExprKind::Tuple(es) => {
                format!("<{}>", es.iter().map(shape).collect::<Vec<_>>().join(", "))
            }
            ExprKind::Inl(a) => format!("(inl {})", shape(a)),
            ExprKind::If(c, a, b) => format!("(if {} {} {})", shape(c), shape(a), shape(b)),
            ExprKind::Let(Pattern::Unit(_), v, b) => format!("({}; {})", shape(v), shape(b)),
            ExprKind::Let(_, v, b) => format!("(let {} {})", shape(v), shape(b)),
            ExprKind::Bind(Pattern::Var(x), v, b) => {
                format!("(bind {} {} {})", x.name, shape(v), shape(b))
            }
            ExprKind::Deref(a) => format!("(!{})", shape(a)),
            ExprKind::RunDelta(a, b) => format!("(runDelta {} {})", shape(a), shape(b)),
            ExprKind::Trace(l, v) => format!("(trace {l:?} {})", shape(v)),
            ExprKind::Poly(p, _) => format!("{}@", p.name()),
            ExprKind::Lam(_, b) => format!("(fun {})", shape(b)),
            other => format!("{other:?}"),
        }
    }

    fn parse(src: &str) -> String {
        match parse_expression(src, 0, &mut IdGen::new()) {
            Ok(e) => shape(&e),
            Err(es) => format!("ERR {}", es[0].message),
        }
    }

    #[test]
    fn precedence_and_associativity() {
        assert_eq!(parse("1 + 2 * 3"), "(1 + (2 * 3))");
        assert_eq!(parse("1 - 2 - 3"), "((1 - 2) - 3)");
        assert_eq!(parse("a || b && c"), "(a || (b && c))");
        assert_eq!(parse("a + 1 < b * 2"), "((a + 1) < (b * 2))");
        assert_eq!(parse("f x y + g z"), "(((f x) y) + (g z))");
        assert_eq!(parse("-x * y"), "((-x) * y)");
        assert_eq!(parse("-x ** 2.0"), "(-(x ** 2.0))");
        assert_eq!(parse("2.0 ** 3.0 ** 2.0"), "(2.0 ** (3.0 ** 2.0))");
        assert_eq!(parse("1 + if c then 2 else 3"), "(1 + (if c 2 3))");
        assert_eq!(parse("not a && b"), "((not a) && b)");
        assert!(parse("a < b < c").starts_with("ERR comparison operators cannot be chained"));
    }

    fn parse_translated(src: &str) -> String {
        match parse_expression_in(src, 0, &mut IdGen::new(), Dialect::Translated) {
            Ok(e) => shape(&e),
            Err(es) => format!("ERR {}", es[0].message),
        }
    }

    #[test]
    fn translated_precedence() {
        let p = parse_translated;
        // `;` is loosest and extends to the right, through `let` and `fun`.
        assert_eq!(p("a; b; c"), "(a; (b; c))");
        assert_eq!(p("let x = a in b; c"), "(let a (b; c))");
        assert_eq!(p("(fun x -> a; b)"), "(fun (a; b))");
        assert_eq!(p("f (a; b) c"), "((f (a; b)) c)");
        // `+=` is below `||`, `!` binds like unary minus.
        assert_eq!(p("r += !s * 2.0 - x"), "(r += (((!s) * 2.0) - x))");
        assert_eq!(p("r += a || b; s += 1"), "((r += (a || b)); (s += 1))");
        assert_eq!(p("!f x"), "(!(f x))");
        assert!(p("r += s += 1").starts_with("ERR `+=` cannot be chained"));
        // `runDelta` takes two application arguments.
        assert_eq!(p("runDelta n (f x)"), "(runDelta n (f x))");
        assert_eq!(p("g (runDelta 0 m)"), "(g (runDelta 0 m))");
        assert_eq!(p("initVars @(Vec Real) (x, 0)"), "(initVars@ <x, 0>)");
    }

    #[test]
    fn do_blocks() {
        let p = parse_translated;
        assert_eq!(
            p("do { x <- m; let y = f x; pure y }"),
            "(bind x m (let (f x) (pure y)))"
        );
        // Newlines anywhere; a trailing `;` after the final expression.
        assert_eq!(p("do {\n x <- m\n ;\n k x;\n}"), "(bind x m (k x))");
        // Inside a block `;` separates statements, even after a `let … in`;
        // parentheses make a sequence.
        assert_eq!(
            p("do { x <- let z = a in m; (k x; pure x) }"),
            "(bind x (let a m) ((k x); (pure x)))"
        );
        // `let … in` as the final expression, and a nested block.
        assert_eq!(
            p("do { let y = 1 in do { z <- m; pure z } }"),
            "(let 1 (bind z m (pure z)))"
        );
        assert!(p("do { x <- m }").starts_with("ERR a `do` block must end with an expression"));
        assert!(p("do { }").starts_with("ERR a `do` block must end with an expression"));
        assert!(p("do { m; pure 1 }").starts_with("ERR only the last item"));
    }

    #[test]
    fn the_dialect_is_opt_in() {
        // In an ordinary expression the dialect's tokens are what they always were.
        assert_eq!(parse("do x"), "(do x)");
        assert_eq!(parse("runDelta<-1"), "(runDelta < (-1))");
        assert!(parse("!x").starts_with("ERR unexpected character `!`"));
        assert!(parse("a; b").starts_with("ERR unexpected character `;`"));
        assert!(parse("initVars @Real").starts_with("ERR unexpected character `@`"));
        assert_eq!(
            Dialect::of("#!translated\ndef main = 1"),
            Dialect::Translated
        );
        assert_eq!(Dialect::of("#!translated"), Dialect::Translated);
        assert_eq!(Dialect::of("#!translated \n"), Dialect::Ordinary);
        assert_eq!(Dialect::of("\n#!translated\n"), Dialect::Ordinary);
        assert_eq!(
            parse_type("M (Ref Real) -> Delta", 0).map(|t| format!("{t:?}").contains("Con(M")),
            Ok(true)
        );
    }

    #[test]
    fn indexing_rule() {
        assert_eq!(parse("sin x[1]"), "(sin x[1])");
        assert_eq!(parse("f [1.0, 2.0]"), "(f [1.0, 2.0])");
        assert_eq!(parse("m[i][j]"), "m[i][j]");
        assert_eq!(parse("f(x)[0]"), "(f x[0])");
        assert_eq!(parse("[1, 2][0]"), "[1, 2][0]");
        assert_eq!(parse("f x [0]"), "((f x) [0])");
    }

    #[test]
    fn spans_cover_the_source() {
        let src = "let x = (1 + 2) in x";
        let e = parse_expression(src, 0, &mut IdGen::new()).expect("parses");
        assert_eq!((e.span.start, e.span.end), (0, src.len() as u32));
        let ExprKind::Let(_, v, _) = &e.kind else {
            panic!("not a let")
        };
        assert_eq!(&src[v.span.start as usize..v.span.end as usize], "(1 + 2)");
    }

    #[test]
    fn recovers_at_each_def() {
        let (prog, errs) = parse_program(
            "def a = )\ndef b = 1\ndef c = (\ndef d = 2\n",
            0,
            &mut IdGen::new(),
        );
        assert_eq!(errs.len(), 2);
        let names: Vec<_> = prog
            .defs
            .iter()
            .map(|d| d.binding.name.name.as_str())
            .collect();
        assert_eq!(names, ["b", "d"]);
    }

    fn first_error(src: &str) -> String {
        let (_, errs) = parse_program(src, 0, &mut IdGen::new());
        errs.first()
            .map_or("no error".into(), |e| e.message.clone())
    }

    #[test]
    fn slips_are_not_blamed_on_variables_of_that_name() {
        // Parameters named like another language's keywords, then an unrelated error.
        assert_eq!(
            first_error("def apply fn x = fn x + )"),
            "expected an expression, found `)`"
        );
        assert_eq!(
            first_error("def f where = where + )"),
            "expected an expression, found `)`"
        );
        assert_eq!(
            first_error("def f = let and x = x in and 1 + )"),
            "expected an expression, found `)`"
        );
        // The same words in an expression, in a binding shape, are blamed.
        assert_eq!(
            first_error("def f = (fn x => x)"),
            "a function is written `fun x -> e`"
        );
    }

    #[test]
    fn a_lexical_error_hides_only_the_syntax_errors_it_causes() {
        // The unterminated `"x` leaves `def a =` without a body: one error
        // for `a`, and the syntax error in `b` is still reported.
        let (_, errs) = parse_program("def a = \"x\ndef b = )\n", 0, &mut IdGen::new());
        let messages: Vec<_> = errs.iter().map(|e| e.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "unterminated string literal",
                "expected an expression, found `)`"
            ]
        );
    }

    #[test]
    fn a_byte_order_mark_is_skipped() {
        use crate::syntax::span::SourceMap;
        let src = "\u{feff}def main = 1 +";
        let mut sources = SourceMap::new();
        let file = sources.add("bom.nabla", src);
        assert_eq!(sources.file(file).text, "def main = 1 +");
        let (_, errs) = parse_program(src, sources.file(file).base, &mut IdGen::new());
        assert_eq!(errs.len(), 1);
        assert_eq!(
            sources.line_col(errs[0].span.start),
            Some(("bom.nabla".into(), 1, 15))
        );
        assert_eq!(parse("\u{feff}1 + 2"), "(1 + 2)");
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        // On a small (1 MiB) budget, 200 000 parentheses cannot fit.
        let src = format!("{}1{}", "(".repeat(200_000), ")".repeat(200_000));
        let r = parse_expression(&src, 0, &mut IdGen::new());
        assert!(matches!(r, Err(ref es) if es[0].message == "program nested too deeply"));
    }
}
