//! Sums of products at the outermost reverse level, `sum (build n (fun i ->
//! u[i] * v[i]))`, which native code records as one Delta over the
//! products' terms when every product is of two different variables
//! (`runtime::rt_tape_dot`) and real by real otherwise: random vectors of
//! inputs, scaled inputs, products of inputs and constants (shared
//! variables, signed zeros, infinities, NaN), sums of every length up to
//! past the vectors' ends, in a gradient and in a Jacobian's rows swept at
//! once — native code gives the interpreter's output, value or error, to
//! the bit.

use nabla_lang::driver::Session;
use nabla_lang::pretty::print_value;
use nabla_native::{Native, Options};

/// A small deterministic generator (xorshift64*): the cases are the same on
/// every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
}

const CONSTANTS: &[&str] = &[
    "0.0",
    "-0.0",
    "1.0",
    "-2.5",
    "0.1",
    "3.0e300",
    "(1.0 / 0.0)",
    "(0.0 / 0.0)",
];

/// An element of a vector of `p`'s reals: mostly a variable (an input, a
/// scaled input, a product of two), now and then a constant.
fn element(rng: &mut Rng, inputs: usize) -> String {
    let k = rng.below(inputs);
    match rng.below(10) {
        0 => rng.pick(CONSTANTS).to_string(),
        1..=3 => format!("p[{k}]"),
        4..=6 => format!("p[{k}] * {}", rng.pick(CONSTANTS)),
        _ => format!("p[{k}] * p[{}]", rng.below(inputs)),
    }
}

/// A vector of `len` elements: random ones, or (half the time) inputs in
/// turn from `shift`, each scaled or not — two such vectors of different
/// shifts multiply two different variables in every product.
fn vector(rng: &mut Rng, len: usize, inputs: usize, shift: usize) -> String {
    let variables = rng.below(2) == 0;
    let xs: Vec<String> = (0..len)
        .map(|i| match (variables, rng.below(3)) {
            (false, _) => element(rng, inputs),
            (true, 0) => format!("p[{}]", (i + shift) % inputs),
            (true, _) => format!(
                "p[{}] * {}",
                (i + shift) % inputs,
                rng.pick(&["-1.0", "0.5", "3.0"])
            ),
        })
        .collect();
    format!("[{}]", xs.join(", "))
}

/// A program: two vectors, sums of their products over a random length (up
/// to one past the shorter), its gradient and a two-row Jacobian.
fn program(rng: &mut Rng) -> String {
    let inputs = 2 + rng.below(8);
    let (lu, lv) = (4 + rng.below(8), 4 + rng.below(8));
    let n = rng.below(lu.min(lv) + 2);
    // Now and then a point of signed zeros, whose sums' signs are the
    // lanes' (each from -0.0).
    let pool: &[&str] = if rng.below(4) == 0 {
        &["0.0", "0.0", "-0.0"]
    } else {
        &["1.5", "-0.5", "2.0", "0.0", "-0.0", "1.0e-200", "7.25"]
    };
    let point: Vec<&str> = (0..inputs).map(|_| rng.pick(pool)).collect();
    format!(
        "def dot n u v = sum (build n (fun i -> u[i] * v[i]))\n\
         def f p = dot {n} {u} {v}\n\
         def g p = [f p, dot {m} {w} {v2}]\n\
         def main = (value_and_grad f [{x}], jacobian g [{x}])\n",
        u = vector(rng, lu, inputs, 0),
        v = vector(rng, lv, inputs, 1),
        m = 4 + rng.below(4),
        w = vector(rng, 8, inputs, 0),
        v2 = vector(rng, 8, inputs, 1),
        x = point.join(", "),
    )
}

/// `main` of `src` in the interpreter and in native code: each back end's
/// value or rendered error.
fn both(src: &str) -> (String, String) {
    let mut s = Session::new();
    s.load("dot.nabla", src).expect("checks");
    let interp = s.run_main().unwrap_or_else(|ds| s.render(&ds));
    let (prog, entry) = s.typed_program("main").expect("compiles its derivatives");
    let native = Native::compile_main(&prog, entry, &Options::default()).expect("compiles");
    let native = match native.run() {
        Ok(v) => print_value(&v),
        Err(e) => s.render(&[e.into()]),
    };
    (interp, native)
}

#[test]
fn sums_of_products_are_the_interpreters_to_the_bit() {
    nabla_lang::stack::run_with_stack(|| {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for case in 0..150 {
            let src = program(&mut rng);
            let (interp, native) = both(&src);
            assert_eq!(native, interp, "case {case}:\n{src}");
        }
    })
    .expect("thread");
}
