//! Timing `main` for `nabla run --repeat N` and `-v`: the `%timeit` of
//! nabla. It knows nothing of how `main` is evaluated: a backend hands it a
//! closure that evaluates `main` once, afresh, and the time its preparation
//! (parsing, checking, lowering, compiling) took.

use std::fmt::Write as _;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

/// Which evaluator ran `main`, as `-v` and `--repeat` name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Backend {
    /// The closure-compiling interpreter of `nabla_lang::eval`.
    Interpreter,
    /// Native code (`nabla_native`, Cranelift).
    Native,
}

impl Backend {
    /// The backend's name in messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Backend::Interpreter => "the interpreter",
            Backend::Native => "native code",
        }
    }
}

/// The value of `main` and how long its evaluations took.
pub(crate) struct Measured<T> {
    /// The value of the last evaluation.
    pub(crate) value: T,
    /// The first evaluation (the warm-up, under `--repeat`).
    pub(crate) first: Duration,
    /// The timed evaluations after the warm-up (none without `--repeat`).
    pub(crate) repeats: Vec<Duration>,
}

/// Evaluates with `evaluate_once`: once, or with `repeat`, once to warm up
/// and then `repeat` more times, timing each. The first error ends it.
///
/// A value is dropped before the next evaluation starts, so that no two
/// are alive at once (the memory budget applies to each evaluation) and
/// dropping is not timed.
pub(crate) fn measure<T, E>(
    repeat: Option<NonZeroU32>,
    mut evaluate_once: impl FnMut() -> Result<T, E>,
) -> Result<Measured<T>, E> {
    let mut timed = || -> Result<(T, Duration), E> {
        let start = Instant::now();
        let value = evaluate_once()?;
        Ok((value, start.elapsed()))
    };
    let (mut value, first) = timed()?;
    let count = repeat.map_or(0, NonZeroU32::get);
    let mut repeats = Vec::with_capacity(count as usize);
    for _ in 0..count {
        drop(value);
        let (next, took) = timed()?;
        value = next;
        repeats.push(took);
    }
    Ok(Measured {
        value,
        first,
        repeats,
    })
}

/// The minimum and the median of some times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Summary {
    /// The shortest: the best estimate of the cost itself, the least disturbed.
    pub(crate) min: Duration,
    /// The middle one (the mean of the middle two for an even count).
    pub(crate) median: Duration,
}

/// The minimum and median of `times`; `None` if there are none.
pub(crate) fn summarise(times: &[Duration]) -> Option<Summary> {
    let mut sorted = times.to_vec();
    sorted.sort_unstable();
    let n = sorted.len();
    let min = *sorted.first()?;
    let median = if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2
    };
    Some(Summary { min, median })
}

/// What `-v` and `--repeat` print on stderr about a run of `main`: with
/// `verbose`, the backend and the time of the preparation and of the first
/// evaluation; with repeats, the minimum and median time per evaluation.
pub(crate) fn report<T>(
    measured: &Measured<T>,
    preparation: Duration,
    backend: Backend,
    verbose: bool,
) -> String {
    let mut out = String::new();
    if verbose {
        let first = if measured.repeats.is_empty() {
            "evaluated"
        } else {
            "warm-up evaluated"
        };
        let _ = writeln!(
            out,
            "main: ran on {}; prepared in {}, {first} in {}",
            backend.name(),
            show_duration(preparation),
            show_duration(measured.first)
        );
    }
    if let Some(s) = summarise(&measured.repeats) {
        let n = measured.repeats.len();
        let _ = writeln!(
            out,
            "main: {n} evaluation{} after 1 warm-up: min {}, median {} (prepared in {}, on {})",
            if n == 1 { "" } else { "s" },
            show_duration(s.min),
            show_duration(s.median),
            show_duration(preparation),
            backend.name()
        );
    }
    out
}

/// `d` in the unit that puts it in [1, 1000) (ns, µs, ms, s; seconds above
/// that), to three significant digits (nanoseconds whole): `812 ns`,
/// `1.23 ms`, `45.6 s`.
pub(crate) fn show_duration(d: Duration) -> String {
    const UNITS: [(&str, f64); 2] = [("µs", 1e3), ("ms", 1e6)];
    if d.as_nanos() < 1000 {
        return format!("{} ns", d.as_nanos());
    }
    let nanos = d.as_nanos() as f64;
    for (unit, scale) in UNITS {
        let text = three_digits(nanos / scale);
        // Decide on the rounded text: 999.7 µs is `1.00 ms`, not `1000 µs`.
        if text.parse::<f64>().is_ok_and(|v| v < 1000.0) {
            return format!("{text} {unit}");
        }
    }
    format!("{} s", three_digits(nanos / 1e9))
}

/// `x` (≥ 1) to three significant digits, or as a whole number when it has
/// more digits before the point.
fn three_digits(x: f64) -> String {
    if x >= 99.95 {
        format!("{x:.0}")
    } else if x >= 9.995 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn min_and_median() {
        assert_eq!(summarise(&[]), None);
        assert_eq!(
            summarise(&[ms(5)]),
            Some(Summary {
                min: ms(5),
                median: ms(5)
            })
        );
        // Unsorted input, odd count: the middle one.
        assert_eq!(
            summarise(&[ms(9), ms(2), ms(4)]),
            Some(Summary {
                min: ms(2),
                median: ms(4)
            })
        );
        // Even count: the mean of the middle two.
        assert_eq!(
            summarise(&[ms(7), ms(1), ms(3), ms(100)]),
            Some(Summary {
                min: ms(1),
                median: ms(5)
            })
        );
    }

    #[test]
    fn durations_in_the_unit_that_fits() {
        let cases = [
            (Duration::ZERO, "0 ns"),
            (Duration::from_nanos(7), "7 ns"),
            (Duration::from_nanos(812), "812 ns"),
            (Duration::from_nanos(999), "999 ns"),
            (Duration::from_nanos(1_000), "1.00 µs"),
            (Duration::from_nanos(12_345), "12.3 µs"),
            (Duration::from_nanos(999_700), "1.00 ms"),
            (Duration::from_nanos(1_234_567), "1.23 ms"),
            (Duration::from_nanos(99_960_000), "100 ms"),
            (ms(1_500), "1.50 s"),
            (Duration::from_secs(45), "45.0 s"),
            (Duration::from_secs(4_000), "4000 s"),
        ];
        for (d, text) in cases {
            assert_eq!(show_duration(d), text, "{d:?}");
        }
    }

    #[test]
    fn measure_repeats_after_a_warm_up_and_stops_at_an_error() {
        let mut calls = 0;
        let m = measure(NonZeroU32::new(3), || {
            calls += 1;
            Ok::<_, ()>(calls)
        })
        .expect("no error");
        assert_eq!((m.value, m.repeats.len()), (4, 3));
        let m = measure(None, || Ok::<_, ()>(7)).expect("no error");
        assert_eq!((m.value, m.repeats.len()), (7, 0));
        let mut calls = 0;
        let r = measure(NonZeroU32::new(5), || {
            calls += 1;
            if calls == 3 { Err("boom") } else { Ok(()) }
        });
        assert_eq!((r.err(), calls), (Some("boom"), 3));
    }

    #[test]
    fn the_report_lines() {
        let m = Measured {
            value: (),
            first: ms(3),
            repeats: vec![ms(2), ms(4), ms(3)],
        };
        assert_eq!(
            report(&m, Duration::from_micros(800), Backend::Interpreter, false),
            "main: 3 evaluations after 1 warm-up: min 2.00 ms, median 3.00 ms \
             (prepared in 800 µs, on the interpreter)\n"
        );
        let once = Measured {
            value: (),
            first: ms(3),
            repeats: Vec::new(),
        };
        assert_eq!(
            report(&once, ms(1), Backend::Interpreter, true),
            "main: ran on the interpreter; prepared in 1.00 ms, evaluated in 3.00 ms\n"
        );
        assert_eq!(report(&once, ms(1), Backend::Interpreter, false), "");
    }
}
