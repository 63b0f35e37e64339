//! The one error type every phase converts into, and its terminal rendering.
//!
//! Each phase (lexer/parser, type checker, interpreter) has its own error enum;
//! all of them become a [`Diagnostic`], which the CLI renders with
//! [`Diagnostic::render`]. The rendered shape is always
//!
//! ```text
//! error: MESSAGE
//!   --> FILE:LINE:COL
//!   |
//! 3 | source line
//!   |       ^^^^ label
//! ```

use crate::syntax::span::{SourceMap, Span};
use codespan_reporting::diagnostic as cs;
use codespan_reporting::files::SimpleFiles;
use codespan_reporting::term;

/// A labelled span inside a diagnostic.
#[derive(Clone, Debug, PartialEq)]
pub struct Label {
    /// Where.
    pub span: Span,
    /// What to say there (may be empty).
    pub message: String,
}

/// A user-facing error with a position.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostic {
    /// The headline, printed after `error: `.
    pub message: String,
    /// The offending position; `None` only for errors with no place in the source.
    pub primary: Option<Label>,
    /// Related positions ("expected because of this").
    pub secondary: Vec<Label>,
    /// Free-form notes printed after the snippet.
    pub notes: Vec<String>,
}

impl Diagnostic {
    /// An error at `span` whose label repeats nothing.
    pub fn error(message: impl Into<String>, span: Span) -> Diagnostic {
        Diagnostic {
            message: message.into(),
            primary: Some(Label {
                span,
                message: String::new(),
            }),
            secondary: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// An error with no source position.
    pub fn without_position(message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            message: message.into(),
            primary: None,
            secondary: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Sets the text under the primary caret.
    pub fn with_label(mut self, message: impl Into<String>) -> Diagnostic {
        if let Some(p) = &mut self.primary {
            p.message = message.into();
        }
        self
    }

    /// Adds a secondary label.
    pub fn with_secondary(mut self, span: Span, message: impl Into<String>) -> Diagnostic {
        self.secondary.push(Label {
            span,
            message: message.into(),
        });
        self
    }

    /// Adds a note.
    pub fn with_note(mut self, note: impl Into<String>) -> Diagnostic {
        self.notes.push(note.into());
        self
    }

    /// The primary position as `FILE:LINE:COL`, if any.
    pub fn location(&self, sources: &SourceMap) -> Option<String> {
        let p = self.primary.as_ref()?;
        let (file, line, col) = sources.line_col(p.span.start)?;
        Some(format!("{file}:{line}:{col}"))
    }

    /// Renders the diagnostic as plain text (no colour), ending in a newline.
    pub fn render(&self, sources: &SourceMap) -> String {
        let mut files = SimpleFiles::new();
        for f in sources.files() {
            files.add(f.name.as_str(), f.text.as_str());
        }
        let to_label = |style: cs::LabelStyle, l: &Label| -> Option<cs::Label<usize>> {
            let id = sources.lookup(l.span.start)?;
            let file = sources.file(id);
            let len = file.text.len();
            let clamp = |o: u32| {
                let mut local = (o.saturating_sub(file.base) as usize).min(len);
                while local > 0 && !file.text.is_char_boundary(local) {
                    local -= 1;
                }
                local
            };
            let start = clamp(l.span.start);
            let end = clamp(l.span.end).max(start);
            Some(cs::Label::new(style, id.0, start..end).with_message(l.message.clone()))
        };
        let mut labels = Vec::new();
        if let Some(p) = &self.primary {
            labels.extend(to_label(cs::LabelStyle::Primary, p));
        }
        for s in &self.secondary {
            labels.extend(to_label(cs::LabelStyle::Secondary, s));
        }
        let diag = cs::Diagnostic::error()
            .with_message(self.message.clone())
            .with_labels(labels)
            .with_notes(self.notes.clone());
        let config = term::Config {
            chars: term::Chars::ascii(),
            ..term::Config::default()
        };
        match term::emit_into_string(&config, &files, &diag) {
            Ok(s) => s,
            // Rendering only fails on inconsistent offsets; fall back to the bare shape.
            Err(_) => match self.location(sources) {
                Some(loc) => format!("error: {}\n  --> {loc}\n", self.message),
                None => format!("error: {}\n", self.message),
            },
        }
    }
}

/// Renders a list of diagnostics, one after another.
pub fn render_all(diags: &[Diagnostic], sources: &SourceMap) -> String {
    // Each rendering already ends with a blank line.
    diags.iter().map(|d| d.render(sources)).collect()
}
