//! Helpers shared by the translation tests (each test crate uses some of them).
#![allow(dead_code)]

/// Splits printed output into its numbers and the text between them.
pub(crate) fn tokens(s: &str) -> (Vec<f64>, String) {
    let mut numbers = Vec::new();
    let mut text = String::new();
    let mut rest = s;
    while !rest.is_empty() {
        let starts_number = rest.chars().next().is_some_and(|c| {
            c.is_ascii_digit() || c == '-' && rest[1..].starts_with(|d: char| d.is_ascii_digit())
        });
        if starts_number {
            let end = rest[1..]
                .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '-' | '+')))
                .map_or(rest.len(), |i| i + 1);
            numbers.push(rest[..end].parse().unwrap_or(f64::NAN));
            text.push('#');
            rest = &rest[end..];
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            text.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    (numbers, text)
}

/// True if two printed outputs are the same up to rounding: same text
/// between the numbers, numbers equal to 1e-12 relative.
pub(crate) fn agree(expected: &str, found: &str) -> bool {
    let (a, ta) = tokens(expected);
    let (b, tb) = tokens(found);
    ta == tb
        && a.len() == b.len()
        && a.iter().zip(&b).all(|(x, y)| {
            x == y
                || (x.is_nan() && y.is_nan())
                || (x - y).abs() <= 1e-12 * x.abs().max(y.abs()).max(1.0)
        })
}

/// A program of source definitions, printed derived definitions and `main`,
/// with the translated dialect's first line, if the derived code has it, first.
pub(crate) fn with_source(source: &str, derived: &str, main: &str) -> String {
    let header = "#!translated\n";
    match derived.strip_prefix(header) {
        Some(rest) => format!("{header}{source}\n\n{rest}\ndef main = {main}\n"),
        None => format!("{source}\n\n{derived}\ndef main = {main}\n"),
    }
}
