//! One workload of the peers benchmark, run `times` times, for instruction counts
//! (`valgrind --tool=callgrind`), which unlike criterion's times do not depend on
//! the load of a shared machine:
//!
//! ```sh
//! cargo build --profile callgrind --manifest-path bench/peers/Cargo.toml --example one
//! valgrind --tool=callgrind bench/peers/target/callgrind/examples/one rosenbrock-nabla 10
//! ```
//!
//! Workloads: `rosenbrock-{nabla,num-dual,echidna}` (the directional derivative,
//! nabla's `Dual` seeded by hand), `rosenbrock-gradient-nabla` (`grad`), `mlp-gradient-nabla` (`grad`), `logdet-{nabla,num-dual,echidna}` (2500 forward
//! passes), `{saddle,particle}-{nabla-ff,nabla-rr,num-dual,echidna}`.

use std::hint::black_box;

use nabla_peers::{logdet, mlp, nested, rosenbrock};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let name = args.get(1).map(String::as_str).unwrap_or("");
    let times: usize = args.get(2).map_or(1, |t| t.parse().expect("a count"));
    let (x, v, m) = (
        rosenbrock::point(),
        rosenbrock::direction(),
        logdet::point(),
    );
    let (parameters, samples) = mlp::problem();
    let mut sum = 0.0;
    for _ in 0..times {
        sum += match name {
            "rosenbrock-nabla" => rosenbrock::nabla_dual(black_box(&x), black_box(&v)),
            "rosenbrock-nabla-jvp" => rosenbrock::nabla_jvp(black_box(&x), black_box(&v)),
            "rosenbrock-gradient-nabla" => rosenbrock::nabla_grad(black_box(&x))[0],
            "mlp-gradient-nabla" => mlp::nabla_grad(black_box(&parameters), black_box(&samples))[0],
            "rosenbrock-num-dual" => rosenbrock::num_dual_jvp(black_box(&x), black_box(&v)),
            "rosenbrock-echidna" => rosenbrock::echidna_jvp(black_box(&x), black_box(&v)),
            "logdet-nabla" => logdet::nabla_forward_grad(black_box(&m))[0],
            "logdet-num-dual" => logdet::num_dual_grad(black_box(&m))[0],
            "logdet-echidna" => logdet::echidna_forward_grad(black_box(&m))[0],
            "saddle-nabla-ff" => nested::nabla_saddle_ff()[0],
            "saddle-nabla-rr" => nested::nabla_saddle_rr()[0],
            "saddle-num-dual" => nested::num_dual_impl::saddle()[0],
            "saddle-echidna" => nested::echidna_impl::saddle()[0],
            "particle-nabla-ff" => nested::nabla_particle_ff(),
            "particle-nabla-rr" => nested::nabla_particle_rr(),
            "particle-num-dual" => nested::num_dual_impl::particle(),
            "particle-echidna" => nested::echidna_impl::particle(),
            _ => {
                panic!("unknown workload {name:?} (see the comment at the top of examples/one.rs)")
            }
        };
    }
    println!("{name} × {times}: {sum:e}");
}
