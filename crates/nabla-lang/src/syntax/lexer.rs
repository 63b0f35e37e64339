//! The lexer: source text to [`Token`]s, built with `logos`.
//!
//! The tokens of the translated dialect (`@ ! += <- ;` and the keywords
//! `do`, `runDelta`) exist only in files that opt in with a first line
//! `#!translated` ([`Dialect::Translated`]); elsewhere `@ ! ;` are
//! unexpected characters, `+=` is `+` `=`, `<-` is `<` `-`, and `do`,
//! `runDelta` are identifiers, exactly as before the dialect existed.

use super::span::Span;
use logos::Logos;

/// Token kinds. Whitespace and `#` line comments are skipped.
#[derive(Logos, Clone, Copy, Debug, PartialEq, Eq)]
#[logos(skip r"[ \t\r\n\f]+")]
#[logos(skip(r"#[^\n]*", allow_greedy = true))]
pub enum Tok {
    /// `def`
    #[token("def")]
    Def,
    /// `let`
    #[token("let")]
    Let,
    /// `rec`
    #[token("rec")]
    Rec,
    /// `in`
    #[token("in")]
    In,
    /// `fun`
    #[token("fun")]
    Fun,
    /// `if`
    #[token("if")]
    If,
    /// `then`
    #[token("then")]
    Then,
    /// `else`
    #[token("else")]
    Else,
    /// `match`
    #[token("match")]
    Match,
    /// `with`
    #[token("with")]
    With,
    /// `inl`
    #[token("inl")]
    Inl,
    /// `inr`
    #[token("inr")]
    Inr,
    /// `true`
    #[token("true")]
    True,
    /// `false`
    #[token("false")]
    False,
    /// `trace` (`trace "label" v`)
    #[token("trace")]
    Trace,
    /// `type` (`type Model = { w : Vec Real, b : Real }`)
    #[token("type")]
    Type,
    /// An identifier (including `_`).
    #[regex(r"[A-Za-z_][A-Za-z0-9_']*")]
    Ident,
    /// An integer literal.
    #[regex(r"[0-9]+")]
    Int,
    /// A real literal: `1.0`, `2.5e-3`, `1e6`.
    #[regex(r"[0-9]+\.[0-9]+([eE][+-]?[0-9]+)?")]
    #[regex(r"[0-9]+[eE][+-]?[0-9]+")]
    Real,
    /// `(`
    #[token("(")]
    LParen,
    /// `)`
    #[token(")")]
    RParen,
    /// `[`
    #[token("[")]
    LBracket,
    /// `]`
    #[token("]")]
    RBracket,
    /// `,`
    #[token(",")]
    Comma,
    /// `->`
    #[token("->")]
    Arrow,
    /// `=`
    #[token("=")]
    Assign,
    /// `:`
    #[token(":")]
    Colon,
    /// `|`
    #[token("|")]
    Bar,
    /// `+`
    #[token("+")]
    Plus,
    /// `-`
    #[token("-")]
    Minus,
    /// `*`
    #[token("*")]
    Star,
    /// `/`
    #[token("/")]
    Slash,
    /// `%`
    #[token("%")]
    Percent,
    /// `**`
    #[token("**")]
    StarStar,
    /// `<`
    #[token("<")]
    Lt,
    /// `<=`
    #[token("<=")]
    Le,
    /// `>`
    #[token(">")]
    Gt,
    /// `>=`
    #[token(">=")]
    Ge,
    /// `==`
    #[token("==")]
    EqEq,
    /// `!=`
    #[token("!=")]
    Ne,
    /// `&&`
    #[token("&&")]
    AndAnd,
    /// `||`
    #[token("||")]
    OrOr,
    /// `@` (translated dialect: `initVars @(Vec Real)`)
    #[token("@")]
    At,
    /// `!` (translated dialect: dereference)
    #[token("!")]
    Bang,
    /// `+=` (translated dialect: add to a reference cell)
    #[token("+=")]
    PlusEq,
    /// `<-` (translated dialect: bind in a `do` block)
    #[token("<-")]
    LArrow,
    /// `{` (records; `do` blocks in the translated dialect)
    #[token("{")]
    LBrace,
    /// `}`
    #[token("}")]
    RBrace,
    /// `.` (a record's field: `r.w`)
    #[token(".")]
    Dot,
    /// `;` (translated dialect: statement separator and sequencing)
    #[token(";")]
    Semi,
    /// `do` (a keyword only in the translated dialect; never produced by logos)
    Do,
    /// `runDelta` (a keyword only in the translated dialect; never produced by logos)
    RunDelta,
    /// A string literal `"…"` (escapes `\"`, `\\`, `\n`; its text is
    /// [`string_value`]), which only `trace` takes. An unterminated literal
    /// (running to the end of its line) or one with another escape is matched
    /// whole so that [`lex`] reports it as one error.
    #[regex(r#""([^"\\\n]|\\[^\n])*"?"#)]
    Str,
    /// End of input (never produced by logos; appended by [`lex`]).
    Eof,
}

impl Tok {
    /// How the token is described in "expected …, found …" messages.
    pub fn describe(self) -> &'static str {
        match self {
            Tok::Def => "`def`",
            Tok::Let => "`let`",
            Tok::Rec => "`rec`",
            Tok::In => "`in`",
            Tok::Fun => "`fun`",
            Tok::If => "`if`",
            Tok::Then => "`then`",
            Tok::Else => "`else`",
            Tok::Match => "`match`",
            Tok::With => "`with`",
            Tok::Inl => "`inl`",
            Tok::Inr => "`inr`",
            Tok::True => "`true`",
            Tok::False => "`false`",
            Tok::Trace => "`trace`",
            Tok::Type => "`type`",
            Tok::Ident => "an identifier",
            Tok::Int => "an integer literal",
            Tok::Real => "a real literal",
            Tok::LParen => "`(`",
            Tok::RParen => "`)`",
            Tok::LBracket => "`[`",
            Tok::RBracket => "`]`",
            Tok::Comma => "`,`",
            Tok::Arrow => "`->`",
            Tok::Assign => "`=`",
            Tok::Colon => "`:`",
            Tok::Bar => "`|`",
            Tok::Plus => "`+`",
            Tok::Minus => "`-`",
            Tok::Star => "`*`",
            Tok::Slash => "`/`",
            Tok::Percent => "`%`",
            Tok::StarStar => "`**`",
            Tok::Lt => "`<`",
            Tok::Le => "`<=`",
            Tok::Gt => "`>`",
            Tok::Ge => "`>=`",
            Tok::EqEq => "`==`",
            Tok::Ne => "`!=`",
            Tok::AndAnd => "`&&`",
            Tok::OrOr => "`||`",
            Tok::At => "`@`",
            Tok::Bang => "`!`",
            Tok::PlusEq => "`+=`",
            Tok::LArrow => "`<-`",
            Tok::LBrace => "`{`",
            Tok::RBrace => "`}`",
            Tok::Dot => "`.`",
            Tok::Semi => "`;`",
            Tok::Do => "`do`",
            Tok::RunDelta => "`runDelta`",
            Tok::Str => "a string literal",
            Tok::Eof => "end of input",
        }
    }
}

/// A token with its position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token {
    /// What kind of token.
    pub kind: Tok,
    /// Where (global offsets).
    pub span: Span,
}

/// A character sequence that is not a token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LexError {
    /// Where.
    pub span: Span,
    /// The offending text.
    pub text: String,
}

impl LexError {
    /// The headline and the text under the caret. A string literal or a
    /// backslash lambda gets its own headline; other characters that
    /// newcomers bring from other languages (`;;`, `!`, `&`, …) are
    /// "unexpected" with a label saying what nabla writes instead.
    pub fn explain(&self) -> (String, String) {
        let t = self.text.as_str();
        let unexpected = format!(
            "unexpected character{} `{t}`",
            if t.chars().count() > 1 { "s" } else { "" },
        );
        if let Some(problem) = string_error(t) {
            return problem;
        }
        let (message, label) = match t.chars().next() {
            Some('\\') => (
                "a function is written `fun x -> e`".to_string(),
                "write `fun x -> …` instead of `\\x -> …`",
            ),
            _ if t.starts_with(";;") => (
                unexpected,
                "`;;` is not needed: the next `def` starts a new definition",
            ),
            Some(';') => (
                unexpected,
                "nabla has no `;`: a definition ends where the next `def` starts",
            ),
            Some('!') => (unexpected, "negate a Bool with `not b`"),
            Some('&') => (unexpected, "the logical and is `&&`"),
            Some('$') => (unexpected, "there is no `$` operator: write `f (g x)`"),
            _ => (unexpected, "not part of any token"),
        };
        (message, label.to_string())
    }
}

/// What is wrong with the text of a [`Tok::Str`] token, if anything: the
/// headline and the label of its error.
fn string_error(text: &str) -> Option<(String, String)> {
    if !text.starts_with('"') {
        return None;
    }
    let body = &text[1..];
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return None,
            '\\' => match chars.next() {
                Some('"' | '\\' | 'n') => {}
                Some(other) => {
                    return Some((
                        format!("unknown escape `\\{other}` in a string literal"),
                        "the escapes are `\\\"`, `\\\\` and `\\n`".to_string(),
                    ));
                }
                None => break,
            },
            _ => {}
        }
    }
    Some((
        "unterminated string literal".to_string(),
        "a string literal ends with `\"` on the same line".to_string(),
    ))
}

/// The text a well-formed string literal (a [`Tok::Str`] token, quotes
/// included) stands for, its escapes resolved.
pub fn string_value(literal: &str) -> String {
    let inner = literal
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(literal);
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some(other) => out.push(other),
                None => {}
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Which language a file is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Dialect {
    /// The language of `LANGUAGE.md`.
    #[default]
    Ordinary,
    /// The language of translated programs (the output of source-to-source
    /// AD): ordinary nabla plus `do` blocks, `runDelta`, the polytypic
    /// helpers `name @T`, `!`, `+=`, `;` and the Delta and reference-cell
    /// primitives (see `docs/language.md`, "The translated dialect").
    Translated,
}

/// The first line that makes a file [`Dialect::Translated`].
pub const TRANSLATED_HEADER: &str = "#!translated";

impl Dialect {
    /// The dialect of a whole file: translated exactly when its first line
    /// is `#!translated` (a comment for the ordinary lexer).
    pub fn of(text: &str) -> Dialect {
        if text.lines().next() == Some(TRANSLATED_HEADER) {
            Dialect::Translated
        } else {
            Dialect::Ordinary
        }
    }
}

/// Splits `text` (whose first byte has global offset `base`) into tokens,
/// ending with [`Tok::Eof`]. Unrecognised characters are returned as errors and
/// left out of the token stream.
pub fn lex(text: &str, base: u32) -> (Vec<Token>, Vec<LexError>) {
    lex_in(text, base, Dialect::Ordinary)
}

/// [`lex`] in the given dialect.
pub fn lex_in(text: &str, base: u32, dialect: Dialect) -> (Vec<Token>, Vec<LexError>) {
    let translated = dialect == Dialect::Translated;
    let mut tokens = Vec::new();
    let mut errors = Vec::new();
    let mut lexer = Tok::lexer(text);
    while let Some(result) = lexer.next() {
        let r = lexer.span();
        let span = Span::new(
            base.saturating_add(r.start as u32),
            base.saturating_add(r.end as u32),
        );
        let result = match result {
            Ok(Tok::Ident) if translated => Ok(match lexer.slice() {
                "do" => Tok::Do,
                "runDelta" => Tok::RunDelta,
                _ => Tok::Ident,
            }),
            // Outside the dialect, its two-character tokens are what they were.
            Ok(kind @ (Tok::PlusEq | Tok::LArrow)) if !translated => {
                let (a, b) = if kind == Tok::PlusEq {
                    (Tok::Plus, Tok::Assign)
                } else {
                    (Tok::Lt, Tok::Minus)
                };
                let mid = span.start.saturating_add(1);
                tokens.push(Token {
                    kind: a,
                    span: Span::new(span.start, mid),
                });
                tokens.push(Token {
                    kind: b,
                    span: Span::new(mid, span.end),
                });
                continue;
            }
            Ok(Tok::At | Tok::Bang | Tok::Semi) if !translated => Err(()),
            Ok(Tok::Str) if string_error(lexer.slice()).is_some() => Err(()),
            other => other,
        };
        match result {
            Ok(kind) => tokens.push(Token { kind, span }),
            Err(()) => {
                let text = lexer.slice().to_string();
                // Merge runs of adjacent bad characters into one error.
                match errors.last_mut() {
                    Some(LexError {
                        span: last,
                        text: t,
                    }) if last.end == span.start => {
                        last.end = span.end;
                        t.push_str(&text);
                    }
                    _ => errors.push(LexError { span, text }),
                }
            }
        }
    }
    let end = base.saturating_add(text.len() as u32);
    tokens.push(Token {
        kind: Tok::Eof,
        span: Span::new(end, end),
    });
    (tokens, errors)
}
