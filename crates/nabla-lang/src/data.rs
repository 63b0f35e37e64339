//! Data in and out of a program: the argument of `main` decoded from JSON,
//! CSV or NumPy `.npy` by the type `main` expects (`nabla run --input`),
//! and a value written as JSON (`--output json`).
//!
//! Decoding is driven by the type, so the same JSON number is a `Real` or
//! an `Int` as the program needs, and an error names the place in the data
//! (a JSON path such as `$.1[3]`, a CSV line, an `.npy` header field) and
//! the type expected there.
//!
//! | type | JSON |
//! |---|---|
//! | `Real` | a number |
//! | `Int` | an integer (no fraction or exponent), within 64 bits |
//! | `Bool` | `true` / `false` |
//! | `()` | `null` |
//! | `(A, B, …)` | an array of as many elements |
//! | `Vec A` | an array |
//! | `A + B` | `{"inl": a}` or `{"inr": b}` |
//! | `{ b : B, w : W }` | an object with exactly the fields `b` and `w` |
//!
//! Written JSON uses the same table; reals are printed in their shortest
//! form that reads back to the same bits, and the three reals JSON has no
//! number for as the strings `"NaN"`, `"Infinity"` and `"-Infinity"`, which
//! [`decode_json`] reads back as reals.
//!
//! ```
//! use nabla_lang::data::{decode_json, encode_json};
//! use nabla_lang::types::Type;
//! let ty = Type::Tuple(vec![Type::Vec(Box::new(Type::Real)), Type::Int]);
//! let v = decode_json("[[1, 2.5], 3]", &ty).unwrap();
//! assert_eq!(encode_json(&v).unwrap(), "[[1.0,2.5],3]");
//! let e = decode_json("[[1, true], 3]", &ty).unwrap_err();
//! assert_eq!(e.to_string(), "at $[0][1]: expected a Real, found true");
//! ```

use crate::eval::Value;
use crate::pretty::print_type;
use crate::types::Type;
use std::fmt;

/// Data that does not fit the type expected, or does not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataError {
    /// Where: a JSON path (`$[0].inl`), a CSV line or an `.npy` part.
    pub place: String,
    /// What is wrong there.
    pub message: String,
}

impl fmt::Display for DataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at {}: {}", self.place, self.message)
    }
}

impl std::error::Error for DataError {}

fn error(place: impl Into<String>, message: impl Into<String>) -> DataError {
    DataError {
        place: place.into(),
        message: message.into(),
    }
}

/// The type `ty` as an error message names it: "a Real", "a vector (Vec Real)".
fn expected(ty: &Type) -> String {
    match ty {
        Type::Real => "a Real".into(),
        Type::Int => "an Int".into(),
        Type::Bool => "a Bool".into(),
        Type::Unit => "null (for `()`)".into(),
        Type::Tuple(ts) => format!("an array of {} (for {})", ts.len(), print_type(ty)),
        Type::Vec(_) => format!("an array (for {})", print_type(ty)),
        Type::Sum(..) => format!(
            "an object {{\"inl\": …}} or {{\"inr\": …}} (for {})",
            print_type(ty)
        ),
        Type::Record(names, _) => format!(
            "an object with the fields {} (for {})",
            names.join(", "),
            print_type(ty)
        ),
        _ => print_type(ty),
    }
}

/// A short description of a JSON value, for messages.
fn found(j: &serde_json::Value) -> String {
    match j {
        serde_json::Value::Null => "null".into(),
        serde_json::Value::Bool(b) => b.to_string(),
        serde_json::Value::Number(n) => n.to_string(),
        serde_json::Value::String(s) => format!("the string {s:?}"),
        serde_json::Value::Array(a) => format!("an array of {}", a.len()),
        serde_json::Value::Object(_) => "an object".into(),
    }
}

/// Decodes `text`, a JSON document, as a value of type `ty`.
pub fn decode_json(text: &str, ty: &Type) -> Result<Value, DataError> {
    let j: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        error(
            format!("line {}, column {}", e.line(), e.column()),
            format!("not valid JSON: {e}"),
        )
    })?;
    let mut path = String::from("$");
    from_json(&j, ty, &mut path)
}

fn from_json(j: &serde_json::Value, ty: &Type, path: &mut String) -> Result<Value, DataError> {
    use serde_json::Value as J;
    let mismatch = |path: &String| {
        Err(error(
            path.clone(),
            format!("expected {}, found {}", expected(ty), found(j)),
        ))
    };
    match (ty, j) {
        (Type::Real, J::Number(n)) => match n.as_f64() {
            Some(x) => Ok(Value::Real(x)),
            None => mismatch(path),
        },
        (Type::Real, J::String(s)) => match s.as_str() {
            "NaN" => Ok(Value::Real(f64::NAN)),
            "Infinity" => Ok(Value::Real(f64::INFINITY)),
            "-Infinity" => Ok(Value::Real(f64::NEG_INFINITY)),
            _ => mismatch(path),
        },
        (Type::Int, J::Number(n)) => match n.as_i64() {
            Some(k) => Ok(Value::Int(k)),
            None => mismatch(path),
        },
        (Type::Bool, J::Bool(b)) => Ok(Value::Bool(*b)),
        (Type::Unit, J::Null) => Ok(Value::Unit),
        (Type::Tuple(ts), J::Array(items)) if ts.len() == items.len() => {
            let mut out = Vec::with_capacity(ts.len());
            for (k, (t, x)) in ts.iter().zip(items).enumerate() {
                out.push(at_index(path, k, |p| from_json(x, t, p))?);
            }
            Ok(Value::Tuple(std::rc::Rc::new(out)))
        }
        (Type::Vec(elem), J::Array(items)) => {
            let mut out = Vec::with_capacity(items.len());
            for (k, x) in items.iter().enumerate() {
                out.push(at_index(path, k, |p| from_json(x, elem, p))?);
            }
            Ok(Value::vector(out))
        }
        (Type::Record(names, ts), J::Object(fields)) => {
            if let Some(extra) = fields.keys().find(|k| !names.contains(k)) {
                return Err(error(
                    path.clone(),
                    format!("unknown field {extra:?}: expected {}", expected(ty)),
                ));
            }
            let mut out = Vec::with_capacity(ts.len());
            for (name, t) in names.iter().zip(ts) {
                let Some(x) = fields.get(name) else {
                    return Err(error(
                        path.clone(),
                        format!("missing field {name:?}: expected {}", expected(ty)),
                    ));
                };
                let len = path.len();
                path.push('.');
                path.push_str(name);
                out.push(from_json(x, t, path)?);
                path.truncate(len);
            }
            // A record runs as the tuple of its fields in name order (one
            // field: the field itself; see `core::records`).
            Ok(match out.len() {
                1 => out.remove(0),
                _ => Value::Tuple(std::rc::Rc::new(out)),
            })
        }
        (Type::Sum(a, b), J::Object(fields)) if fields.len() == 1 => {
            let (side, x) = fields
                .iter()
                .next()
                .ok_or_else(|| error(path.clone(), ""))?;
            let (t, inject): (&Type, fn(std::rc::Rc<Value>) -> Value) = match side.as_str() {
                "inl" => (a, Value::Inl),
                "inr" => (b, Value::Inr),
                _ => return mismatch(path),
            };
            let len = path.len();
            path.push('.');
            path.push_str(side);
            let v = from_json(x, t, path)?;
            path.truncate(len);
            Ok(inject(std::rc::Rc::new(v)))
        }
        _ => mismatch(path),
    }
}

/// Runs `f` with `[k]` appended to `path`.
fn at_index<T>(path: &mut String, k: usize, f: impl FnOnce(&mut String) -> T) -> T {
    let len = path.len();
    path.push_str(&format!("[{k}]"));
    let r = f(path);
    path.truncate(len);
    r
}

/// Decodes CSV text as a `Vec (Vec Real)` (one vector per row) or a
/// `Vec Real` (one column, or one row). A first row with no number in it is
/// a header and is skipped; every other field must be a number, and every
/// row as long as the first.
pub fn decode_csv(text: &str, ty: &Type) -> Result<Value, DataError> {
    let real_vec = Type::Vec(Box::new(Type::Real));
    let matrix = match ty {
        Type::Vec(elem) if **elem == Type::Real => false,
        Type::Vec(elem) if **elem == real_vec => true,
        _ => {
            return Err(error(
                "the file",
                format!(
                    "CSV holds a `Vec Real` or a `Vec (Vec Real)`, but `main` takes {}",
                    print_type(ty)
                ),
            ));
        }
    };
    let rows = csv_rows(text)?;
    if matrix {
        return Ok(Value::vector(
            rows.into_iter().map(|(_, r)| Value::reals(r)).collect(),
        ));
    }
    if rows.iter().all(|(_, r)| r.len() == 1) {
        Ok(Value::reals(rows.into_iter().map(|(_, r)| r[0]).collect()))
    } else if rows.len() == 1 {
        Ok(Value::reals(
            rows.into_iter().flat_map(|(_, r)| r).collect(),
        ))
    } else {
        Err(error(
            "the file",
            format!(
                "expected one column or one row of numbers (for Vec Real), found {} rows of {}",
                rows.len(),
                rows.first().map_or(0, |(_, r)| r.len())
            ),
        ))
    }
}

/// The numeric rows of a CSV file with their line numbers, checked to be
/// of equal length.
fn csv_rows(text: &str) -> Result<Vec<(u64, Vec<f64>)>, DataError> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let mut rows: Vec<(u64, Vec<f64>)> = Vec::new();
    for (k, record) in reader.records().enumerate() {
        let record = record.map_err(|e| error("the file", format!("not valid CSV: {e}")))?;
        let line = record.position().map_or(k as u64 + 1, |p| p.line());
        let numbers: Vec<Option<f64>> = record.iter().map(|f| f.parse::<f64>().ok()).collect();
        if k == 0 && numbers.iter().all(Option::is_none) {
            continue; // a header
        }
        let mut row = Vec::with_capacity(numbers.len());
        for (col, (x, field)) in numbers.iter().zip(record.iter()).enumerate() {
            match x {
                Some(x) => row.push(*x),
                None => {
                    return Err(error(
                        format!("line {line}, column {}", col + 1),
                        format!("expected a number, found {field:?}"),
                    ));
                }
            }
        }
        if let Some((first_line, first)) = rows.first()
            && first.len() != row.len()
        {
            return Err(error(
                format!("line {line}"),
                format!(
                    "a row of {} fields, but line {first_line} has {}",
                    row.len(),
                    first.len()
                ),
            ));
        }
        rows.push((line, row));
    }
    Ok(rows)
}

/// Decodes a NumPy `.npy` file of float64 as a `Vec Real` (one dimension)
/// or a `Vec (Vec Real)` (two dimensions, C order: one vector per row).
pub fn decode_npy(bytes: &[u8], ty: &Type) -> Result<Value, DataError> {
    let header = |m: String| error("the .npy header", m);
    let magic = b"\x93NUMPY";
    if bytes.len() < 10 || &bytes[..6] != magic {
        return Err(header("not a NumPy .npy file (no \\x93NUMPY magic)".into()));
    }
    let (major, rest) = (bytes[6], &bytes[8..]);
    // Version 1 has a 2-byte header length, versions 2 and 3 a 4-byte one.
    let (len, rest) = match major {
        1 => (u16::from_le_bytes([rest[0], rest[1]]) as usize, &rest[2..]),
        2 | 3 if rest.len() >= 4 => (
            u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize,
            &rest[4..],
        ),
        _ => return Err(header(format!("unsupported .npy version {major}"))),
    };
    let (dict, data) = (
        rest.get(..len)
            .ok_or_else(|| header("the header is cut short".into()))?,
        &rest[len.min(rest.len())..],
    );
    let dict = std::str::from_utf8(dict).map_err(|_| header("the header is not text".into()))?;
    let field = |name: &str| -> Result<&str, DataError> {
        let key = format!("'{name}':");
        let at = dict
            .find(&key)
            .ok_or_else(|| header(format!("no '{name}' field")))?;
        Ok(dict[at + key.len()..].trim_start())
    };
    let descr = field("descr")?;
    if !descr.starts_with("'<f8'") {
        let shown = descr.split(',').next().unwrap_or(descr);
        return Err(error(
            "the .npy dtype",
            format!("expected float64 ('<f8'), found {shown}"),
        ));
    }
    if field("fortran_order")?.starts_with("True") {
        return Err(error(
            "the .npy layout",
            "expected C order, found Fortran order (save with np.ascontiguousarray)",
        ));
    }
    let shape = field("shape")?;
    let shape = &shape[..shape.find(')').unwrap_or(shape.len())];
    let dims: Vec<usize> = shape
        .trim_start_matches('(')
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse()
                .map_err(|_| header(format!("a shape of {shape})")))
        })
        .collect::<Result<_, _>>()?;
    let count = dims
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or_else(|| header(format!("a shape of {shape}) too large")))?;
    if data.len() != count * 8 {
        return Err(error(
            "the .npy data",
            format!(
                "a shape of {shape}) holds {count} float64s, but the file has {} bytes of data",
                data.len()
            ),
        ));
    }
    let reals = data
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]));
    let real_vec = Type::Vec(Box::new(Type::Real));
    match (dims.as_slice(), ty) {
        ([_], Type::Vec(e)) if **e == Type::Real => Ok(Value::reals(reals.collect())),
        ([_, cols], Type::Vec(e)) if **e == real_vec => {
            let all: Vec<f64> = reals.collect();
            let rows = all
                .chunks(*cols.max(&1))
                .take(dims[0])
                .map(|r| Value::reals(r.to_vec()));
            Ok(Value::vector(rows.collect()))
        }
        _ => Err(error(
            "the .npy shape",
            format!(
                "an array of {} dimension(s), but `main` takes {}",
                dims.len(),
                print_type(ty)
            ),
        )),
    }
}

/// The value `v` as JSON (see the module's table). Functions and the
/// derivative machinery's values have no JSON form.
pub fn encode_json(v: &Value) -> Result<String, String> {
    Ok(to_json(v)?.to_string())
}

/// The value `v` of type `ty` (as checked) as JSON: as [`encode_json`],
/// but a record is an object of its fields.
///
/// ```
/// use nabla_lang::data::{decode_json, encode_json_as};
/// use nabla_lang::types::Type;
/// let ty = Type::record(vec![("w".into(), Type::Vec(Box::new(Type::Real))), ("b".into(), Type::Real)]);
/// let v = decode_json(r#"{"w": [1, 2], "b": 0.5}"#, &ty).unwrap();
/// assert_eq!(encode_json_as(&v, &ty).unwrap(), r#"{"b":0.5,"w":[1.0,2.0]}"#);
/// ```
pub fn encode_json_as(v: &Value, ty: &Type) -> Result<String, String> {
    Ok(to_json_as(v, ty)?.to_string())
}

fn to_json_as(v: &Value, ty: &Type) -> Result<serde_json::Value, String> {
    use serde_json::Value as J;
    Ok(match (v, ty) {
        (_, Type::Record(names, ts)) => {
            let one = [v.clone()];
            let parts: &[Value] = match v {
                Value::Tuple(vs) if ts.len() > 1 => vs,
                _ => &one,
            };
            let mut object = serde_json::Map::new();
            for ((n, t), x) in names.iter().zip(ts).zip(parts) {
                object.insert(n.clone(), to_json_as(x, t)?);
            }
            J::Object(object)
        }
        (Value::Tuple(vs), Type::Tuple(ts)) if vs.len() == ts.len() => J::Array(
            vs.iter()
                .zip(ts)
                .map(|(x, t)| to_json_as(x, t))
                .collect::<Result<_, _>>()?,
        ),
        (Value::Vec(vs), Type::Vec(t)) => J::Array(
            vs.iter()
                .map(|x| to_json_as(x, t))
                .collect::<Result<_, _>>()?,
        ),
        (Value::Inl(x), Type::Sum(a, _)) => J::Object(
            [("inl".to_string(), to_json_as(x, a)?)]
                .into_iter()
                .collect(),
        ),
        (Value::Inr(x), Type::Sum(_, b)) => J::Object(
            [("inr".to_string(), to_json_as(x, b)?)]
                .into_iter()
                .collect(),
        ),
        _ => to_json(v)?,
    })
}

fn to_json(v: &Value) -> Result<serde_json::Value, String> {
    use serde_json::Value as J;
    let real = |x: f64| match serde_json::Number::from_f64(x) {
        Some(n) => J::Number(n),
        None if x.is_nan() => J::String("NaN".into()),
        None if x > 0.0 => J::String("Infinity".into()),
        None => J::String("-Infinity".into()),
    };
    Ok(match v {
        Value::Unit => J::Null,
        Value::Bool(b) => J::Bool(*b),
        Value::Int(n) => J::Number((*n).into()),
        Value::Real(x) => real(*x),
        Value::Tuple(items) => J::Array(items.iter().map(to_json).collect::<Result<_, _>>()?),
        Value::RealVec(xs) => J::Array(xs.iter().map(|&x| real(x)).collect()),
        Value::Vec(items) => J::Array(items.iter().map(to_json).collect::<Result<_, _>>()?),
        Value::Inl(x) => J::Object([("inl".to_string(), to_json(x)?)].into_iter().collect()),
        Value::Inr(x) => J::Object([("inr".to_string(), to_json(x)?)].into_iter().collect()),
        other => return Err(format!("{} has no JSON form", other.describe())),
    })
}

/// Rust data a host passes to a program: `f64` → `Real`, `i64` → `Int`,
/// `bool` → `Bool`, `()` → `()`, `Vec<T>` and slices → `Vec`, tuples (up
/// to six) → tuples. So a host never builds a [`Value`] by hand:
///
/// ```
/// use nabla_lang::data::{FromValue, IntoValue};
/// let v = (vec![1.0, 2.0], vec![vec![3.0]], 7_i64).into_value();
/// assert_eq!(nabla_lang::pretty::print_value(&v), "([1.0, 2.0], [[3.0]], 7)");
/// let back = <(Vec<f64>, Vec<Vec<f64>>, i64)>::from_value(&v).unwrap();
/// assert_eq!(back, (vec![1.0, 2.0], vec![vec![3.0]], 7));
/// ```
pub trait IntoValue {
    /// The nabla value.
    fn into_value(self) -> Value;
}

/// Rust data a host reads back from a program's value (the inverse of
/// [`IntoValue`]); a value of another shape is a [`DataError`] that says
/// where (`$[1][0]`).
pub trait FromValue: Sized {
    /// The Rust data, or where `v` does not have its shape.
    fn from_value(v: &Value) -> Result<Self, DataError> {
        Self::from_value_at(v, &mut String::from("$"))
    }

    /// [`FromValue::from_value`] for the part of a value at `path`.
    fn from_value_at(v: &Value, path: &mut String) -> Result<Self, DataError>;
}

fn not_a(what: &str, v: &Value, path: &str) -> DataError {
    error(path, format!("expected {what}, found {}", v.describe()))
}

impl IntoValue for f64 {
    fn into_value(self) -> Value {
        Value::Real(self)
    }
}

impl IntoValue for i64 {
    fn into_value(self) -> Value {
        Value::Int(self)
    }
}

impl IntoValue for bool {
    fn into_value(self) -> Value {
        Value::Bool(self)
    }
}

impl IntoValue for () {
    fn into_value(self) -> Value {
        Value::Unit
    }
}

impl<T: IntoValue> IntoValue for Vec<T> {
    fn into_value(self) -> Value {
        // All reals: the contiguous representation.
        Value::vector(self.into_iter().map(IntoValue::into_value).collect())
    }
}

impl<T: IntoValue + Clone> IntoValue for &[T] {
    fn into_value(self) -> Value {
        self.to_vec().into_value()
    }
}

impl FromValue for f64 {
    fn from_value_at(v: &Value, path: &mut String) -> Result<Self, DataError> {
        match v {
            Value::Real(x) => Ok(*x),
            _ => Err(not_a("a Real", v, path)),
        }
    }
}

impl FromValue for i64 {
    fn from_value_at(v: &Value, path: &mut String) -> Result<Self, DataError> {
        match v {
            Value::Int(n) => Ok(*n),
            _ => Err(not_a("an Int", v, path)),
        }
    }
}

impl FromValue for bool {
    fn from_value_at(v: &Value, path: &mut String) -> Result<Self, DataError> {
        match v {
            Value::Bool(b) => Ok(*b),
            _ => Err(not_a("a Bool", v, path)),
        }
    }
}

impl FromValue for () {
    fn from_value_at(v: &Value, path: &mut String) -> Result<Self, DataError> {
        match v {
            Value::Unit => Ok(()),
            _ => Err(not_a("()", v, path)),
        }
    }
}

impl<T: FromValue> FromValue for Vec<T> {
    fn from_value_at(v: &Value, path: &mut String) -> Result<Self, DataError> {
        match v {
            Value::RealVec(xs) => xs
                .iter()
                .enumerate()
                .map(|(k, &x)| at_index(path, k, |p| T::from_value_at(&Value::Real(x), p)))
                .collect(),
            Value::Vec(items) => items
                .iter()
                .enumerate()
                .map(|(k, x)| at_index(path, k, |p| T::from_value_at(x, p)))
                .collect(),
            _ => Err(not_a("a vector", v, path)),
        }
    }
}

macro_rules! tuple_conversions {
    ($(($($t:ident $k:tt),+)),* $(,)?) => {$(
        impl<$($t: IntoValue),+> IntoValue for ($($t,)+) {
            fn into_value(self) -> Value {
                Value::Tuple(std::rc::Rc::new(vec![$(self.$k.into_value()),+]))
            }
        }

        impl<$($t: FromValue),+> FromValue for ($($t,)+) {
            fn from_value_at(v: &Value, path: &mut String) -> Result<Self, DataError> {
                const N: usize = [$($k),+].len();
                match v {
                    Value::Tuple(items) if items.len() == N => Ok((
                        $(at_index(path, $k, |p| $t::from_value_at(&items[$k], p))?,)+
                    )),
                    _ => Err(not_a(&format!("a tuple of {N}"), v, path)),
                }
            }
        }
    )*};
}

tuple_conversions! {
    (A 0, B 1),
    (A 0, B 1, C 2),
    (A 0, B 1, C 2, D 3),
    (A 0, B 1, C 2, D 3, E 4),
    (A 0, B 1, C 2, D 3, E 4, F 5),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vec(t: Type) -> Type {
        Type::Vec(Box::new(t))
    }

    #[test]
    fn json_round_trips_every_first_order_type_exactly() {
        let ty = Type::Tuple(vec![
            vec(Type::Real),
            Type::Sum(Box::new(Type::Int), Box::new(vec(Type::Bool))),
            Type::Unit,
            vec(vec(Type::Real)),
        ]);
        let text = r#"[[0.1,-0.0,5e-324,1.7976931348623157e308,"NaN","Infinity","-Infinity"],{"inr":[true,false]},null,[[],[1.0]]]"#;
        let v = decode_json(text, &ty).unwrap();
        assert_eq!(
            encode_json(&v).unwrap(),
            r#"[[0.1,-0.0,5e-324,1.7976931348623157e+308,"NaN","Infinity","-Infinity"],{"inr":[true,false]},null,[[],[1.0]]]"#
        );
        let left = decode_json(
            r#"{"inl": -7}"#,
            &Type::Sum(Box::new(Type::Int), Box::new(Type::Unit)),
        )
        .unwrap();
        assert_eq!(encode_json(&left).unwrap(), r#"{"inl":-7}"#);
    }

    #[test]
    fn json_that_does_not_fit_the_type_names_the_place() {
        let sum = Type::Sum(Box::new(Type::Real), Box::new(Type::Int));
        let cases: [(&str, Type, &str); 5] = [
            (
                "[1, 2]",
                Type::Tuple(vec![Type::Int; 3]),
                "at $: expected an array of 3",
            ),
            (
                "9223372036854775808",
                Type::Int,
                "at $: expected an Int, found 9223372036854775808",
            ),
            (
                r#"{"inl": 1, "inr": 2}"#,
                sum.clone(),
                "at $: expected an object",
            ),
            (r#"{"left": 1}"#, sum.clone(), "at $: expected an object"),
            (
                r#"[{"inr": 1.5}]"#,
                vec(sum),
                "at $[0].inr: expected an Int, found 1.5",
            ),
        ];
        for (text, ty, want) in cases {
            let e = decode_json(text, &ty).unwrap_err().to_string();
            assert!(e.starts_with(want), "{text}: {e}");
        }
        let e = decode_json("[1,\n 2", &vec(Type::Real)).unwrap_err();
        assert_eq!(e.place, "line 2, column 2");
    }

    #[test]
    fn csv_reads_a_matrix_a_column_or_a_row_and_skips_a_header() {
        let m = decode_csv("x,y\n1,2\n3,4.5\n", &vec(vec(Type::Real))).unwrap();
        assert_eq!(encode_json(&m).unwrap(), "[[1.0,2.0],[3.0,4.5]]");
        let col = decode_csv("1\n2\n", &vec(Type::Real)).unwrap();
        assert_eq!(encode_json(&col).unwrap(), "[1.0,2.0]");
        let row = decode_csv("1,2,3\n", &vec(Type::Real)).unwrap();
        assert_eq!(encode_json(&row).unwrap(), "[1.0,2.0,3.0]");
        let e = decode_csv("1,2\n3,x\n", &vec(vec(Type::Real))).unwrap_err();
        assert_eq!(
            e.to_string(),
            "at line 2, column 2: expected a number, found \"x\""
        );
        let e = decode_csv("1,2\n3,4\n", &vec(Type::Real)).unwrap_err();
        assert!(e.message.contains("one column or one row"), "{e}");
    }

    fn npy(descr: &str, fortran: bool, shape: &str, data: &[f64]) -> Vec<u8> {
        let order = if fortran { "True" } else { "False" };
        let mut header =
            format!("{{'descr': '{descr}', 'fortran_order': {order}, 'shape': {shape}, }}\n");
        while (10 + header.len()) % 64 != 0 {
            header.insert(header.len() - 1, ' ');
        }
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend((header.len() as u16).to_le_bytes());
        out.extend(header.as_bytes());
        for x in data {
            out.extend(x.to_le_bytes());
        }
        out
    }

    #[test]
    fn npy_reads_float64_vectors_and_matrices_and_refuses_the_rest() {
        let v = decode_npy(
            &npy("<f8", false, "(3,)", &[1.0, -2.0, 0.5]),
            &vec(Type::Real),
        );
        assert_eq!(encode_json(&v.unwrap()).unwrap(), "[1.0,-2.0,0.5]");
        let m = decode_npy(
            &npy("<f8", false, "(2, 3)", &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            &vec(vec(Type::Real)),
        );
        assert_eq!(
            encode_json(&m.unwrap()).unwrap(),
            "[[1.0,2.0,3.0],[4.0,5.0,6.0]]"
        );
        let refused = [
            (
                npy("<i8", false, "(1,)", &[1.0]),
                vec(Type::Real),
                "expected float64",
            ),
            (
                npy("<f8", true, "(1, 1)", &[1.0]),
                vec(vec(Type::Real)),
                "Fortran order",
            ),
            (
                npy("<f8", false, "(3,)", &[1.0]),
                vec(Type::Real),
                "holds 3 float64s",
            ),
            (
                npy("<f8", false, "(1, 1)", &[1.0]),
                vec(Type::Real),
                "2 dimension(s)",
            ),
            (
                b"PK\x03\x04 not npy".to_vec(),
                vec(Type::Real),
                "not a NumPy .npy file",
            ),
        ];
        for (bytes, ty, want) in refused {
            let e = decode_npy(&bytes, &ty).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
    }
}
