//! `cargo bench --manifest-path bench/peers/Cargo.toml`: nabla against num-dual,
//! ad_trait and echidna, one criterion group per workload. Before timing
//! anything, every implementation is checked against an independent reference
//! (the same checks as `tests/agreement.rs`); a disagreement aborts the run.

use std::hint::black_box;
use std::time::Duration;

use criterion::Criterion;
use nabla_peers::{hessian, logdet, mlp, nested, rosenbrock};

fn rosenbrock(c: &mut Criterion) {
    let (x, v) = (rosenbrock::point(), rosenbrock::direction());
    let mut g = c.benchmark_group("rosenbrock_gradient");
    g.bench_function("f64 primal", |b| {
        b.iter(|| rosenbrock::plain(black_box(&x)))
    });
    g.bench_function("nabla grad", |b| {
        b.iter(|| rosenbrock::nabla_grad(black_box(&x)))
    });
    g.bench_function("nabla tape::grad", |b| {
        b.iter(|| rosenbrock::nabla_tape_grad(black_box(&x)))
    });
    g.bench_function("echidna grad", |b| {
        b.iter(|| rosenbrock::echidna_grad(black_box(&x)))
    });
    g.bench_function("ad_trait adr", |b| {
        b.iter(|| rosenbrock::ad_trait_grad(black_box(&x)))
    });
    g.finish();

    let mut g = c.benchmark_group("rosenbrock_directional");
    g.bench_function("nabla jvp", |b| {
        b.iter(|| rosenbrock::nabla_jvp(black_box(&x), black_box(&v)))
    });
    g.bench_function("nabla Dual", |b| {
        b.iter(|| rosenbrock::nabla_dual(black_box(&x), black_box(&v)))
    });
    g.bench_function("num-dual Dual64", |b| {
        b.iter(|| rosenbrock::num_dual_jvp(black_box(&x), black_box(&v)))
    });
    g.bench_function("echidna Dual64", |b| {
        b.iter(|| rosenbrock::echidna_jvp(black_box(&x), black_box(&v)))
    });
    g.bench_function("ad_trait adfn<1>", |b| {
        b.iter(|| rosenbrock::ad_trait_jvp(black_box(&x), black_box(&v)))
    });
    g.finish();
}

fn mlp(c: &mut Criterion) {
    let (p, data) = mlp::problem();
    let mut g = c.benchmark_group("mlp_gradient");
    g.bench_function("nabla grad", |b| {
        b.iter(|| mlp::nabla_grad(black_box(&p), &data))
    });
    g.bench_function("nabla tape::grad", |b| {
        b.iter(|| mlp::nabla_tape_grad(black_box(&p), &data))
    });
    g.bench_function("echidna grad", |b| {
        b.iter(|| mlp::echidna_grad(black_box(&p), &data))
    });
    g.bench_function("ad_trait adr", |b| {
        b.iter(|| mlp::ad_trait_grad(black_box(&p), &data))
    });
    g.finish();
}

fn nested(c: &mut Criterion) {
    let mut g = c.benchmark_group("saddle");
    g.bench_function("nabla FF", |b| b.iter(nested::nabla_saddle_ff));
    g.bench_function("nabla RR", |b| b.iter(nested::nabla_saddle_rr));
    g.bench_function("nabla FF seeded", |b| {
        b.iter(nested::nabla_saddle_ff_seeded)
    });
    g.bench_function("num-dual FF", |b| b.iter(nested::num_dual_impl::saddle));
    g.bench_function("echidna FF", |b| b.iter(nested::echidna_impl::saddle));
    g.finish();

    let mut g = c.benchmark_group("particle");
    g.bench_function("nabla FF", |b| b.iter(nested::nabla_particle_ff));
    g.bench_function("nabla RR", |b| b.iter(nested::nabla_particle_rr));
    g.bench_function("nabla FF seeded", |b| {
        b.iter(nested::nabla_particle_ff_seeded)
    });
    g.bench_function("num-dual FF", |b| b.iter(nested::num_dual_impl::particle));
    g.bench_function("echidna FF", |b| b.iter(nested::echidna_impl::particle));
    g.finish();
}

fn logdet(c: &mut Criterion) {
    let m = logdet::point();
    let mut g = c.benchmark_group("logdet_gradient_reverse");
    g.bench_function("f64 primal", |b| b.iter(|| logdet::logdet(black_box(&m))));
    g.bench_function("nabla tape::grad", |b| {
        b.iter(|| logdet::nabla_tape_grad(black_box(&m)))
    });
    g.bench_function("echidna grad", |b| {
        b.iter(|| logdet::echidna_grad(black_box(&m)))
    });
    g.bench_function("ad_trait adr", |b| {
        b.iter(|| logdet::ad_trait_grad(black_box(&m)))
    });
    g.finish();

    // 2500 forward passes per gradient: ten samples.
    let mut g = c.benchmark_group("logdet_gradient_forward");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.bench_function("nabla grad_forward", |b| {
        b.iter(|| logdet::nabla_forward_grad(black_box(&m)))
    });
    g.bench_function("num-dual Dual64", |b| {
        b.iter(|| logdet::num_dual_grad(black_box(&m)))
    });
    g.bench_function("echidna Dual64", |b| {
        b.iter(|| logdet::echidna_forward_grad(black_box(&m)))
    });
    g.finish();
}

fn hessian(c: &mut Criterion) {
    let x = hessian::point(hessian::N_SMALL);
    let mut g = c.benchmark_group("hessian_rosenbrock_100");
    g.sample_size(20);
    g.bench_function("nabla hessian", |b| {
        b.iter(|| hessian::nabla_hessian(black_box(&x)))
    });
    g.bench_function("nabla tape::hessian", |b| {
        b.iter(|| hessian::nabla_tape_hessian(black_box(&x)))
    });
    g.bench_function("nabla FF", |b| {
        b.iter(|| hessian::nabla_hessian_ff(black_box(&x)))
    });
    g.bench_function("num-dual Dual2DVec64", |b| {
        b.iter(|| hessian::num_dual_hessian(black_box(&x)))
    });
    g.bench_function("echidna hessian", |b| {
        b.iter(|| hessian::echidna_hessian(black_box(&x)))
    });
    let tape = hessian::echidna_record(&x);
    g.bench_function("echidna tape.hessian, recorded once", |b| {
        b.iter(|| tape.hessian(black_box(&x)).2)
    });
    g.finish();

    let (x, v) = (
        hessian::point(hessian::N_LARGE),
        hessian::direction(hessian::N_LARGE),
    );
    let mut g = c.benchmark_group("hessian_hvp_rosenbrock_1000");
    g.bench_function("nabla hvp", |b| {
        b.iter(|| hessian::nabla_hvp(black_box(&x), black_box(&v)))
    });
    g.bench_function("nabla tape::hvp", |b| {
        b.iter(|| hessian::nabla_tape_hvp(black_box(&x), black_box(&v)))
    });
    g.bench_function("num-dual HyperDual64", |b| {
        b.iter(|| hessian::num_dual_hvp(black_box(&x), black_box(&v)))
    });
    g.bench_function("echidna hvp", |b| {
        b.iter(|| hessian::echidna_hvp(black_box(&x), black_box(&v)))
    });
    let tape = hessian::echidna_record(&x);
    g.bench_function("echidna tape.hvp, recorded once", |b| {
        b.iter(|| tape.hvp(black_box(&x), black_box(&v)).1)
    });
    g.finish();

    // Forward over reverse only: num-dual's one pass would carry a 1000 × 1000
    // matrix in every number, nabla FF would take 10⁶ passes.
    let mut g = c.benchmark_group("hessian_rosenbrock_1000");
    g.sample_size(10);
    g.bench_function("nabla hessian", |b| {
        b.iter(|| hessian::nabla_hessian(black_box(&x)))
    });
    g.bench_function("nabla tape::hessian", |b| {
        b.iter(|| hessian::nabla_tape_hessian(black_box(&x)))
    });
    g.bench_function("echidna hessian", |b| {
        b.iter(|| hessian::echidna_hessian(black_box(&x)))
    });
    g.finish();

    let m = hessian::mlp_problem();
    let mut g = c.benchmark_group("hessian_mlp");
    g.sample_size(10);
    g.bench_function("nabla hessian", |b| {
        b.iter(|| hessian::mlp_nabla_hessian(black_box(&m)))
    });
    g.bench_function("nabla tape::hessian", |b| {
        b.iter(|| hessian::mlp_nabla_tape_hessian(black_box(&m)))
    });
    g.bench_function("nabla FF", |b| {
        b.iter(|| hessian::mlp_nabla_hessian_ff(black_box(&m)))
    });
    g.bench_function("num-dual Dual2DVec64", |b| {
        b.iter(|| hessian::mlp_num_dual_hessian(black_box(&m)))
    });
    g.bench_function("echidna hessian", |b| {
        b.iter(|| hessian::mlp_echidna_hessian(black_box(&m)))
    });
    g.finish();
}

fn main() {
    let checks = [
        rosenbrock::check(),
        mlp::check(),
        nested::check(),
        logdet::check(true),
        hessian::check(true),
    ];
    for check in checks {
        if let Err(e) = check {
            panic!("implementations disagree, nothing timed: {e}");
        }
    }
    println!("all implementations agree; timing");
    let mut c = Criterion::default().configure_from_args();
    rosenbrock(&mut c);
    mlp(&mut c);
    nested(&mut c);
    logdet(&mut c);
    hessian(&mut c);
    c.final_summary();
}
