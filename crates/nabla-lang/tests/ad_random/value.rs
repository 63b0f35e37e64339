//! First-order values on the test side: written into programs as source
//! text, and read back from what the interpreter prints.
//!
//! The interpreter prints every Real in the shortest form that reads back to
//! the same f64, so parsing the printed output loses nothing.

use nabla_lang::pretty::format_real;

/// A first-order value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Val {
    Real(f64),
    Int(i64),
    Bool(bool),
    Unit,
    Tuple(Vec<Val>),
    Inl(Box<Val>),
    Inr(Box<Val>),
    Vec(Vec<Val>),
}

impl Val {
    /// Source text for this value, safe to use as a function argument.
    pub(crate) fn source(&self) -> String {
        let mut s = String::new();
        self.write(&mut s);
        s
    }

    fn write(&self, out: &mut String) {
        match self {
            Val::Real(x) => {
                let t = format_real(*x);
                if *x < 0.0 || t.starts_with('-') {
                    out.push('(');
                    out.push_str(&t);
                    out.push(')');
                } else {
                    out.push_str(&t);
                }
            }
            Val::Int(n) => {
                if *n < 0 {
                    out.push_str(&format!("({n})"));
                } else {
                    out.push_str(&n.to_string());
                }
            }
            Val::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Val::Unit => out.push_str("()"),
            Val::Tuple(vs) | Val::Vec(vs) => {
                let (open, close) = if matches!(self, Val::Tuple(_)) {
                    ('(', ')')
                } else {
                    ('[', ']')
                };
                out.push(open);
                for (i, v) in vs.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    v.write(out);
                }
                out.push(close);
            }
            Val::Inl(v) | Val::Inr(v) => {
                out.push_str(if matches!(self, Val::Inl(_)) {
                    "(inl "
                } else {
                    "(inr "
                });
                v.write(out);
                out.push(')');
            }
        }
    }

    /// The Real leaves, in order.
    pub(crate) fn reals(&self) -> Vec<f64> {
        let mut out = Vec::new();
        self.collect(&mut out);
        out
    }

    fn collect(&self, out: &mut Vec<f64>) {
        match self {
            Val::Real(x) => out.push(*x),
            Val::Int(_) | Val::Bool(_) | Val::Unit => {}
            Val::Tuple(vs) | Val::Vec(vs) => vs.iter().for_each(|v| v.collect(out)),
            Val::Inl(v) | Val::Inr(v) => v.collect(out),
        }
    }

    /// The same shape with the Real leaves replaced, in order, by `xs`.
    pub(crate) fn with_reals(&self, xs: &[f64]) -> Val {
        let mut it = xs.iter().copied();
        let v = self.replace(&mut it);
        assert!(it.next().is_none(), "too many reals");
        v
    }

    fn replace(&self, it: &mut impl Iterator<Item = f64>) -> Val {
        match self {
            Val::Real(_) => Val::Real(it.next().expect("too few reals")),
            Val::Int(_) | Val::Bool(_) | Val::Unit => self.clone(),
            Val::Tuple(vs) => Val::Tuple(vs.iter().map(|v| v.replace(it)).collect()),
            Val::Vec(vs) => Val::Vec(vs.iter().map(|v| v.replace(it)).collect()),
            Val::Inl(v) => Val::Inl(Box::new(v.replace(it))),
            Val::Inr(v) => Val::Inr(Box::new(v.replace(it))),
        }
    }

    /// `true` if `other` has the same shape: same tuple arities, vector
    /// lengths and sum constructors, equal Int/Bool leaves, and Reals where
    /// this has Reals (the rule for tangents and cotangents).
    pub(crate) fn same_shape(&self, other: &Val) -> bool {
        match (self, other) {
            (Val::Real(_), Val::Real(_)) => true,
            (Val::Int(a), Val::Int(b)) => a == b,
            (Val::Bool(a), Val::Bool(b)) => a == b,
            (Val::Unit, Val::Unit) => true,
            (Val::Tuple(a), Val::Tuple(b)) | (Val::Vec(a), Val::Vec(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.same_shape(y))
            }
            (Val::Inl(a), Val::Inl(b)) | (Val::Inr(a), Val::Inr(b)) => a.same_shape(b),
            _ => false,
        }
    }
}

/// Parses a printed value.
pub(crate) fn parse(text: &str) -> Result<Val, String> {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    let v = p.value()?;
    p.ws();
    if p.i != p.s.len() {
        return Err(format!("trailing text at {} in {text:?}", p.i));
    }
    Ok(v)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i] == b' ' {
            self.i += 1;
        }
    }

    fn eat(&mut self, t: &str) -> bool {
        self.ws();
        if self.s[self.i..].starts_with(t.as_bytes()) {
            self.i += t.len();
            true
        } else {
            false
        }
    }

    fn err<T>(&self, what: &str) -> Result<T, String> {
        Err(format!(
            "expected {what} at {} in {:?}",
            self.i,
            String::from_utf8_lossy(self.s)
        ))
    }

    fn list(&mut self, close: &str) -> Result<Vec<Val>, String> {
        let mut out = Vec::new();
        if self.eat(close) {
            return Ok(out);
        }
        loop {
            out.push(self.value()?);
            if self.eat(close) {
                return Ok(out);
            }
            if !self.eat(",") {
                return self.err("`,`");
            }
        }
    }

    fn value(&mut self) -> Result<Val, String> {
        self.ws();
        if self.eat("(") {
            let vs = self.list(")")?;
            return match vs.len() {
                0 => Ok(Val::Unit),
                1 => Ok(vs.into_iter().next().expect("one")),
                _ => Ok(Val::Tuple(vs)),
            };
        }
        if self.eat("[") {
            return Ok(Val::Vec(self.list("]")?));
        }
        if self.eat("inl ") {
            return Ok(Val::Inl(Box::new(self.value()?)));
        }
        if self.eat("inr ") {
            return Ok(Val::Inr(Box::new(self.value()?)));
        }
        if self.eat("true") {
            return Ok(Val::Bool(true));
        }
        if self.eat("false") {
            return Ok(Val::Bool(false));
        }
        let start = self.i;
        while self.i < self.s.len() && !b" ,)]".contains(&self.s[self.i]) {
            self.i += 1;
        }
        let tok = std::str::from_utf8(&self.s[start..self.i]).map_err(|e| e.to_string())?;
        if tok.is_empty() {
            return self.err("a value");
        }
        match tok {
            "inf" => return Ok(Val::Real(f64::INFINITY)),
            "-inf" => return Ok(Val::Real(f64::NEG_INFINITY)),
            "nan" => return Ok(Val::Real(f64::NAN)),
            _ => {}
        }
        if tok.contains(['.', 'e', 'E']) {
            tok.parse::<f64>()
                .map(Val::Real)
                .map_err(|e| format!("bad real {tok:?}: {e}"))
        } else {
            tok.parse::<i64>()
                .map(Val::Int)
                .map_err(|e| format!("bad int {tok:?}: {e}"))
        }
    }
}

/// `sum_i a_i * b_i`, and `sum_i |a_i * b_i|` (the scale of the sum).
pub(crate) fn dot(a: &[f64], b: &[f64]) -> (f64, f64) {
    assert_eq!(a.len(), b.len(), "dot of different lengths");
    a.iter()
        .zip(b)
        .fold((0.0, 0.0), |(s, m), (x, y)| (s + x * y, m + (x * y).abs()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for text in [
            "1.5",
            "(1, -2.5e-10)",
            "[inl (1.0, 2.0), inr 3.0]",
            "inl (inr [])",
            "((), true, [[1.0], [2.0, 3.0]])",
        ] {
            let v = parse(text).unwrap();
            assert_eq!(parse(&v.source()).unwrap(), v, "{text}");
        }
        assert_eq!(parse("(1, -2.5e-10)").unwrap().reals(), vec![-2.5e-10]);
    }
}
