//! Source positions: byte spans into a [`SourceMap`] that may hold several files.
//!
//! Every file added to a [`SourceMap`] occupies its own range of a single global
//! offset space, so a [`Span`] is just two `u32`s and still knows which file it
//! belongs to (the REPL accumulates definitions from many inputs).

/// A half-open byte range `start..end` in the global offset space of a [`SourceMap`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    /// First byte (global offset).
    pub start: u32,
    /// One past the last byte (global offset).
    pub end: u32,
}

impl Span {
    /// A span from `start` to `end`.
    pub fn new(start: u32, end: u32) -> Span {
        Span { start, end }
    }

    /// The smallest span covering both `self` and `other`.
    pub fn to(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
}

/// The UTF-8 byte-order mark, which some editors put at the start of a file.
const BYTE_ORDER_MARK: char = '\u{feff}';

/// A file's text as nabla reads it: without a leading byte-order mark.
/// [`SourceMap::add`] stores this text and the parser lexes it, so offsets
/// agree and columns do not count the mark.
pub fn without_byte_order_mark(text: &str) -> &str {
    text.strip_prefix(BYTE_ORDER_MARK).unwrap_or(text)
}

/// One source file (or REPL input, or `eval` argument).
#[derive(Clone, Debug)]
pub struct SourceFile {
    /// The name shown in diagnostics, e.g. `examples/fib.nabla` or `<eval>`.
    pub name: String,
    /// The full text.
    pub text: String,
    /// Global offset of the first byte.
    pub base: u32,
}

/// Identifies a file inside a [`SourceMap`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileId(pub usize);

/// All source text the current session has seen.
#[derive(Clone, Debug, Default)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

impl SourceMap {
    /// An empty map.
    pub fn new() -> SourceMap {
        SourceMap::default()
    }

    /// Adds a file and returns its id. Offsets of later files start after this
    /// one (plus one, so an end-of-file span never touches the next file).
    /// A leading byte-order mark is dropped ([`without_byte_order_mark`]).
    pub fn add(&mut self, name: impl Into<String>, text: impl Into<String>) -> FileId {
        let base = self.files.last().map_or(0, |f| {
            f.base.saturating_add(f.text.len() as u32).saturating_add(1)
        });
        let mut text = text.into();
        if without_byte_order_mark(&text).len() < text.len() {
            text.drain(..BYTE_ORDER_MARK.len_utf8());
        }
        self.files.push(SourceFile {
            name: name.into(),
            text,
            base,
        });
        FileId(self.files.len() - 1)
    }

    /// The file with id `id`.
    pub fn file(&self, id: FileId) -> &SourceFile {
        &self.files[id.0]
    }

    /// All files, in the order they were added.
    pub fn files(&self) -> &[SourceFile] {
        &self.files
    }

    /// The file containing global offset `offset`.
    pub fn lookup(&self, offset: u32) -> Option<FileId> {
        let idx = self.files.partition_point(|f| f.base <= offset);
        if idx == 0 {
            None
        } else {
            Some(FileId(idx - 1))
        }
    }

    /// `(file name, line, column)` of a global offset, 1-based, column in characters.
    pub fn line_col(&self, offset: u32) -> Option<(String, usize, usize)> {
        let id = self.lookup(offset)?;
        let file = self.file(id);
        let local = ((offset - file.base) as usize).min(file.text.len());
        let before = file.text.get(..local)?;
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let col = before[line_start..].chars().count() + 1;
        Some((file.name.clone(), line, col))
    }
}
