//! Embedding nabla in a Rust program: load a `.nabla` file, pass it Rust
//! data, read Rust data back — the loss and its gradient compiled to native
//! code — and fit a line by gradient descent.
//!
//! `cargo run --release -p nabla-native --example embed`

use nabla_lang::data::{FromValue, IntoValue};
use nabla_lang::driver::Session;
use nabla_native::{Native, Options};

const MODEL: &str = include_str!("line.nabla");

fn fit() -> Result<(Vec<f64>, f64, f64), String> {
    let mut session = Session::new();
    session
        .load("line.nabla", MODEL)
        .map_err(|d| session.render(&d))?;
    // Points on y = 2x + 1.
    let xs: Vec<f64> = (0..50).map(|i| f64::from(i) / 10.0).collect();
    let ys: Vec<f64> = xs.iter().map(|x| 2.0 * x + 1.0).collect();

    // The loss and its gradient (`grad` inside `loss_grad`) as native code.
    let native = |name: &str| {
        let (prog, entry) = session.typed_program(name).map_err(|u| u.what)?;
        Native::compile(&prog, entry, &Options::default()).map_err(|u| u.what)
    };
    let loss = native("loss")?;
    let loss_grad = native("loss_grad")?;

    let mut p = vec![0.0, 0.0];
    let first = f64::from_value(
        &loss
            .call(&[(p.clone(), xs.clone(), ys.clone()).into_value()])
            .map_err(|e| e.message)?,
    )
    .map_err(|e| e.to_string())?;
    for _ in 0..2000 {
        let input = (p.clone(), xs.clone(), ys.clone()).into_value();
        let g = loss_grad.call(&[input]).map_err(|e| e.message)?;
        let g = Vec::<f64>::from_value(&g).map_err(|e| e.to_string())?;
        p = p.iter().zip(&g).map(|(pi, gi)| pi - 0.05 * gi).collect();
    }
    let last = f64::from_value(
        &loss
            .call(&[(p.clone(), xs, ys).into_value()])
            .map_err(|e| e.message)?,
    )
    .map_err(|e| e.to_string())?;
    Ok((p, first, last))
}

fn main() {
    // The language runs on a thread with its stack budget.
    match nabla_lang::stack::run_with_stack(fit) {
        Some(Ok((p, first, last))) => {
            println!(
                "loss {first:.4} -> {last:.2e}; fitted y = {:.4} x + {:.4}",
                p[0], p[1]
            );
            assert!(last < 1e-6 * first, "the loss falls");
            assert!((p[0] - 2.0).abs() < 1e-3 && (p[1] - 1.0).abs() < 1e-3);
        }
        Some(Err(e)) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
        None => {
            eprintln!("the evaluation thread failed");
            std::process::exit(1);
        }
    }
}
