//! `nabla run --input FILE` and `--output json`: data for `main`'s argument
//! and the form its value is printed in ([`nabla_lang::data`] decodes and
//! encodes by type).

use nabla_lang::data;
use nabla_lang::eval::Value;
use nabla_lang::pretty::{print_type, print_value_as};
use nabla_lang::types::Type;

/// The most data `--input` reads (1 GiB).
const MAX_INPUT_BYTES: u64 = 1 << 30;

/// How `nabla run` prints `main`'s value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Output {
    /// As the language writes values (`(1.0, [2, 3])`).
    #[default]
    Text,
    /// As JSON, reals exact (`[1.0,[2,3]]`; see docs/language.md).
    Json,
}

/// Prints `v`, of type `ty` (as checked: records by their fields), as
/// `output` says, with a final newline.
pub(crate) fn print(v: &Value, ty: &Type, output: Output) -> Result<String, String> {
    match output {
        Output::Text => Ok(format!("{}\n", print_value_as(v, ty))),
        Output::Json => data::encode_json_as(v, ty)
            .map(|s| s + "\n")
            .map_err(|e| format!("error: `--output json`: {e}\n")),
    }
}

/// Reads `path` and decodes it as `main`'s argument of type `ty`, by the
/// file's extension: `.csv`, `.npy`, else JSON (`-` reads JSON from
/// standard input).
pub(crate) fn read(path: &str, ty: &Type) -> Result<Value, String> {
    let fail = |m: String| format!("error: `{path}`: {m}\n");
    let bytes = if path == "-" {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(
            &mut std::io::Read::take(std::io::stdin().lock(), MAX_INPUT_BYTES + 1),
            &mut bytes,
        )
        .map_err(|e| fail(format!("cannot read standard input: {e}")))?;
        bytes
    } else {
        let meta = std::fs::metadata(path).map_err(|e| fail(format!("cannot read it: {e}")))?;
        if meta.len() > MAX_INPUT_BYTES {
            return Err(fail(format!(
                "too large ({} bytes; the limit is {MAX_INPUT_BYTES})",
                meta.len()
            )));
        }
        std::fs::read(path).map_err(|e| fail(format!("cannot read it: {e}")))?
    };
    let extension = std::path::Path::new(path)
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).map_err(|_| fail("not UTF-8 text".into()));
    let decoded = match extension.as_deref() {
        Some("npy") => data::decode_npy(&bytes, ty),
        Some("csv") => data::decode_csv(&text(bytes)?, ty),
        _ => data::decode_json(&text(bytes)?, ty),
    };
    decoded.map_err(|e| fail(format!("{e} (`main` takes {})", print_type(ty))))
}
