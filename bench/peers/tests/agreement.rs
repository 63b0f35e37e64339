//! Every implementation of every workload computes the same derivative (to a
//! tolerance) as an independent reference: what the benchmark checks before timing.

#[test]
fn rosenbrock_gradient_and_directional_derivative_agree() {
    nabla_peers::rosenbrock::check().unwrap();
}

#[test]
fn mlp_gradients_agree() {
    nabla_peers::mlp::check().unwrap();
}

#[test]
fn nested_saddle_and_particle_agree() {
    nabla_peers::nested::check().unwrap();
}

#[test]
fn logdet_gradients_agree() {
    nabla_peers::logdet::check(true).unwrap();
}

#[test]
fn hessians_and_hessian_vector_products_agree() {
    nabla_peers::hessian::check(true).unwrap();
}
