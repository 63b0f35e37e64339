//! Structured parameters: the operators of `nabla::structured` on derived structs,
//! tuples, arrays, `Vec`s and `Option`s, checked against finite differences and
//! against the slice operators on the same parameters flattened by hand.
//! (Needs the feature `derive`.)

use nabla::structured::{self, Differentiable};
use nabla::{Lift, Reverse, Scalar, lift};

#[derive(Clone, Debug, PartialEq, nabla::Differentiable)]
struct Layer<S> {
    weights: Vec<Vec<S>>,
    biases: Vec<S>,
}

#[derive(Clone, Debug, PartialEq, nabla::Differentiable)]
struct Model<S> {
    w: Vec<S>,
    b: S,
    layers: Vec<Layer<S>>,
}

/// Inputs and targets of the regression problem the model is fitted to.
const DATA: [([f64; 2], f64); 3] = [([0.5, -1.0], 0.3), ([1.5, 0.25], -0.2), ([-0.7, 0.8], 0.9)];

/// A small network: an elementwise input scaling by `w`, then the layers with tanh,
/// then the sum of the last layer plus `b`.
fn predict<S: Scalar>(m: &Model<S>, input: &[f64; 2]) -> S {
    let mut h: Vec<S> = input
        .iter()
        .zip(&m.w)
        .map(|(&x, &w)| (w * x).sin())
        .collect();
    for layer in &m.layers {
        h = layer
            .weights
            .iter()
            .zip(&layer.biases)
            .map(|(row, &bias)| (row.iter().zip(&h).map(|(&w, &v)| w * v).sum::<S>() + bias).tanh())
            .collect();
    }
    h.into_iter().sum::<S>() + m.b
}

fn loss<S: Scalar>(m: &Model<S>) -> S {
    DATA.iter()
        .map(|(x, y)| {
            let r = predict(m, x) - *y;
            r * r
        })
        .sum::<S>()
        + m.b * m.b * 0.1
}

/// A model with every parameter different, from a deterministic sequence.
fn model() -> Model<f64> {
    let mut k = 0.0;
    let mut next = || {
        k += 1.0;
        (k * 0.7_f64).sin() * 0.8
    };
    Model {
        w: vec![next(), next()],
        b: next(),
        layers: vec![
            Layer {
                weights: vec![
                    vec![next(), next()],
                    vec![next(), next()],
                    vec![next(), next()],
                ],
                biases: vec![next(), next(), next()],
            },
            Layer {
                weights: vec![vec![next(), next(), next()]],
                biases: vec![next()],
            },
        ],
    }
}

/// The parameters in field order, written out by hand (not by the trait).
fn flatten_by_hand<S: Copy>(m: &Model<S>) -> Vec<S> {
    let mut p = m.w.clone();
    p.push(m.b);
    for layer in &m.layers {
        for row in &layer.weights {
            p.extend(row);
        }
        p.extend(&layer.biases);
    }
    p
}

/// A model of `model()`'s shape holding `p`, built by hand.
fn unflatten_by_hand<S: Copy>(p: &[S]) -> Model<S> {
    let mut it = p.iter().copied();
    let mut take = |n: usize| (0..n).map(|_| it.next().unwrap()).collect::<Vec<S>>();
    let w = take(2);
    let b = take(1)[0];
    let first = Layer {
        weights: vec![take(2), take(2), take(2)],
        biases: take(3),
    };
    let second = Layer {
        weights: vec![take(3)],
        biases: take(1),
    };
    assert!(take(0).is_empty());
    Model {
        w,
        b,
        layers: vec![first, second],
    }
}

/// The central difference of `f` along the basis vector of parameter `i`.
fn partial(f: impl Fn(&[f64]) -> f64, p: &[f64], i: usize) -> f64 {
    let h = 1e-6;
    let (mut plus, mut minus) = (p.to_vec(), p.to_vec());
    plus[i] += h;
    minus[i] -= h;
    (f(&plus) - f(&minus)) / (2.0 * h)
}

fn assert_close(a: f64, b: f64, tolerance: f64, what: &str) {
    assert!(
        (a - b).abs() <= tolerance * (1.0 + a.abs().max(b.abs())),
        "{what}: {a} vs {b}"
    );
}

fn loss_flat(p: &[f64]) -> f64 {
    loss(&unflatten_by_hand(p))
}

#[test]
fn the_hand_flattening_agrees_with_the_trait() {
    let m = model();
    assert_eq!(m.scalar_count(), 2 + 1 + (3 * 2 + 3) + (3 + 1));
    assert_eq!(m.flatten(), flatten_by_hand(&m));
    assert_eq!(unflatten_by_hand(&m.flatten()), m);
    assert_eq!(m.unflatten(&flatten_by_hand(&m)), m);
}

#[test]
fn grad_in_reverse_mode() {
    let m = model();
    let p = flatten_by_hand(&m);
    let (value, g) = structured::value_and_grad(|m| loss(m), &m);
    assert_eq!(value, loss(&m));
    assert_eq!(structured::grad(|m| loss(m), &m), g);
    // An annotated argument stays generic over the trace's lifetime too.
    assert_eq!(structured::grad(|m: &Model<_>| loss(m), &m), g);

    // The slice operator on the same parameters: the same operations, so the same bits.
    let (flat_value, flat_g) = nabla::value_and_grad(|p| loss(&unflatten_by_hand(p)), &p);
    assert_eq!(value, flat_value);
    assert_eq!(flatten_by_hand(&g), flat_g);

    for (i, gi) in flatten_by_hand(&g).into_iter().enumerate() {
        assert_close(gi, partial(loss_flat, &p, i), 1e-7, &format!("∂loss/∂p{i}"));
    }
    // Every parameter matters to this loss.
    assert!(flatten_by_hand(&g).iter().all(|&gi| gi != 0.0));
}

#[test]
fn grad_in_forward_mode() {
    let m = model();
    let p = flatten_by_hand(&m);
    let g = structured::grad_forward(loss, &m);
    assert_eq!(
        flatten_by_hand(&g),
        nabla::grad_forward(|p| loss(&unflatten_by_hand(p)), &p)
    );
    let reverse = structured::grad(|m| loss(m), &m);
    for (a, b) in flatten_by_hand(&g)
        .into_iter()
        .zip(flatten_by_hand(&reverse))
    {
        assert_close(a, b, 1e-14, "forward against reverse");
    }
}

#[test]
fn value_and_grad_with_aux_returns_the_predictions() {
    let m = model();
    let ((value, predictions), g) = structured::value_and_grad_with_aux(
        |m| {
            let predictions: Vec<f64> = DATA.iter().map(|(x, _)| predict(m, x).primal()).collect();
            (loss(m), predictions)
        },
        &m,
    );
    assert_eq!(value, loss(&m));
    let expected: Vec<f64> = DATA.iter().map(|(x, _)| predict(&m, x)).collect();
    assert_eq!(predictions, expected);
    assert_eq!(g, structured::grad(|m| loss(m), &m));
}

#[test]
fn value_and_grad_sum_over_the_data() {
    let m = model();
    let regulariser = |m: &Model<f64>| m.b * m.b * 0.1;
    let (value, g) = structured::value_and_grad_sum(
        |m, (x, y): &([f64; 2], f64)| {
            let r = predict(m, x) - *y;
            r * r
        },
        &m,
        &DATA,
    );
    assert_close(value + regulariser(&m), loss(&m), 1e-15, "the summed value");
    let whole = structured::grad(|m| loss(m), &m);
    let reg = structured::grad(|m| m.b * m.b * 0.1, &m);
    let g_total = g.zip_map_scalars(&reg, &mut |a, b| a + b);
    for (a, b) in flatten_by_hand(&g_total)
        .into_iter()
        .zip(flatten_by_hand(&whole))
    {
        assert_close(a, b, 1e-14, "sum of terms against the whole");
    }
}

/// A direction of the model's shape with every component different.
fn direction(m: &Model<f64>) -> Model<f64> {
    let mut k = 0.0;
    m.map_scalars(&mut |_| {
        k += 1.0;
        (k * 1.3_f64).cos()
    })
}

#[test]
fn jvp_with_a_structured_tangent_and_output() {
    let m = model();
    let v = direction(&m);
    let p = flatten_by_hand(&m);
    let dp = flatten_by_hand(&v);

    // A scalar output.
    let (y, dy) = structured::jvp(loss, &m, &v);
    let (flat_y, flat_dy) = nabla::jvp(|p| vec![loss(&unflatten_by_hand(p))], &p, &dp);
    assert_eq!((vec![y], vec![dy]), (flat_y, flat_dy));
    let h = 1e-6;
    let shifted = |t: f64| loss(&m.zip_map_scalars(&v, &mut |a, b| a + b * t));
    assert_close(
        dy,
        (shifted(h) - shifted(-h)) / (2.0 * h),
        1e-7,
        "directional derivative",
    );

    // A structured output: the model with each parameter squared, and the loss.
    let (y, dy) = structured::jvp(|m| (m.map_scalars(&mut |&s| s * s), loss(m)), &m, &v);
    assert_eq!(y.0, m.map_scalars(&mut |&s| s * s));
    assert_eq!(y.1, loss(&m));
    assert_eq!(dy.0, m.zip_map_scalars(&v, &mut |&s, &t| s * t * 2.0));
    assert_eq!(dy.1, flat_dy_of_loss(&p, &dp));
}

fn flat_dy_of_loss(p: &[f64], dp: &[f64]) -> f64 {
    nabla::jvp(|p| vec![loss(&unflatten_by_hand(p))], p, dp).1[0]
}

#[test]
fn vjp_returns_the_cotangent_in_the_input_structure() {
    let m = model();
    let p = flatten_by_hand(&m);
    fn outputs<S: Scalar>(m: &Model<S>) -> Vec<S> {
        vec![loss(m), m.b * m.w[0], m.layers[1].biases[0].exp()]
    }
    // Reverse mode needs the closure (a generic `fn` accepts one trace's values, not
    // every trace's); clippy does not see the higher-ranked bound behind `RefFnOnce`.
    #[allow(clippy::redundant_closure)]
    let (y, pullback) = structured::vjp(|m| outputs(m), &m);
    let (flat_y, flat_pullback) = nabla::vjp(|p| outputs(&unflatten_by_hand(p)), &p);
    assert_eq!(y, flat_y);
    let ct = [0.5, -2.0, 3.0];
    let back = pullback.apply(&ct);
    assert_eq!(flatten_by_hand(&back), flat_pullback.apply(&ct));
    assert_eq!(pullback.flat().apply(&ct), flat_pullback.apply(&ct));

    // ctᵀJ is the gradient of ct·f.
    let weighted = |p: &[f64]| {
        let m = unflatten_by_hand(p);
        let f = [loss(&m), m.b * m.w[0], m.layers[1].biases[0].exp()];
        f.iter().zip(ct).map(|(f, c)| f * c).sum::<f64>()
    };
    for (i, gi) in flatten_by_hand(&back).into_iter().enumerate() {
        assert_close(gi, partial(weighted, &p, i), 1e-7, &format!("(ctᵀJ)_{i}"));
    }
}

#[test]
fn hessian_and_hvp_forward_over_reverse() {
    let m = model();
    let p = flatten_by_hand(&m);
    let h = structured::hessian(|m| loss(m), &m);
    assert_eq!(h, nabla::hessian(|p| loss(&unflatten_by_hand(p)), &p));
    assert_eq!(h.len(), p.len());

    // Each row is the derivative of the gradient along that parameter.
    let grad_at =
        |p: &[f64]| flatten_by_hand(&structured::grad(|m| loss(m), &unflatten_by_hand(p)));
    for (i, row) in h.iter().enumerate() {
        let h_step = 1e-5;
        let (mut plus, mut minus) = (p.clone(), p.clone());
        plus[i] += h_step;
        minus[i] -= h_step;
        let (gp, gm) = (grad_at(&plus), grad_at(&minus));
        for (j, &hij) in row.iter().enumerate() {
            assert_close(
                hij,
                (gp[j] - gm[j]) / (2.0 * h_step),
                1e-6,
                &format!("H[{i}][{j}]"),
            );
            assert_close(hij, h[j][i], 1e-13, "symmetry");
        }
    }

    // H·v, as a model, is the Hessian times the flattened direction.
    let v = direction(&m);
    let hv = structured::hvp(|m| loss(m), &m, &v);
    let dp = flatten_by_hand(&v);
    assert_eq!(
        flatten_by_hand(&hv),
        nabla::hvp(|p| loss(&unflatten_by_hand(p)), &p, &dp)
    );
    for (row, hvi) in h.iter().zip(flatten_by_hand(&hv)) {
        let product: f64 = row.iter().zip(&dp).map(|(a, b)| a * b).sum();
        assert_close(hvi, product, 1e-13, "H·v");
    }
}

#[test]
fn nested_structured_operators() {
    let m = model();
    let v = direction(&m);

    // Forward over reverse by hand: the jvp of the structured gradient is H·v.
    let (g, hv) = structured::jvp(|m| structured::grad(|n| loss(n), m), &m, &v);
    assert_eq!(g, structured::grad(|m| loss(m), &m));
    let expected = structured::hvp(|m| loss(m), &m, &v);
    for (a, b) in flatten_by_hand(&hv)
        .into_iter()
        .zip(flatten_by_hand(&expected))
    {
        assert_close(a, b, 1e-14, "jvp of grad against hvp");
    }

    // Reverse over reverse: the gradient of ½‖∇loss‖² is H·∇loss.
    let outer = structured::grad(
        |m| {
            let g = structured::grad(|n| loss(n), m);
            g.flatten()
                .into_iter()
                .map(|gi| gi * gi)
                .sum::<Reverse<'_, f64>>()
                * 0.5
        },
        &m,
    );
    let grad = structured::grad(|m| loss(m), &m);
    let h_grad = structured::hvp(|m| loss(m), &m, &grad);
    for (a, b) in flatten_by_hand(&outer)
        .into_iter()
        .zip(flatten_by_hand(&h_grad))
    {
        assert_close(a, b, 1e-12, "reverse over reverse against H·∇");
    }

    // A captured outer value enters the inner differentiation through `lift`:
    // d/ds loss(s·m) along m at s = 1, by forward mode over a structured gradient.
    let d = nabla::derivative(
        |s| {
            let scaled = m.map_scalars(&mut |&p| s * p);
            let g = structured::grad(|n| loss(n) * lift(s), &scaled);
            g.flatten()
                .into_iter()
                .zip(m.flatten())
                .map(|(gi, pi)| gi * pi)
                .sum()
        },
        1.0,
    );
    // = d/ds [s·∇loss(s·m)·m] = ∇loss(m)·m + mᵀHm
    let hm = structured::hvp(|m| loss(m), &m, &m);
    let expected: f64 = grad
        .flatten()
        .iter()
        .zip(m.flatten())
        .map(|(g, p)| g * p)
        .sum::<f64>()
        + hm.flatten()
            .iter()
            .zip(m.flatten())
            .map(|(h, p)| h * p)
            .sum::<f64>();
    assert_close(d, expected, 1e-12, "derivative of a structured gradient");
}

#[test]
fn tuples_arrays_options_and_nested_vecs() {
    type Params<S> = (S, [S; 2], Vec<(S, Option<S>)>, Option<[S; 1]>);
    let x: Params<f64> = (
        1.5,
        [2.0, -0.5],
        vec![(0.25, Some(3.0)), (-1.0, None)],
        None,
    );
    assert_eq!(x.scalar_count(), 6);
    let flat = x.flatten();
    assert_eq!(flat, vec![1.5, 2.0, -0.5, 0.25, 3.0, -1.0]);
    assert_eq!(x.unflatten(&flat), x);

    fn f<S: Scalar>((a, [b, c], v, o): &Params<S>) -> S {
        let mut sum = *a * *b * c.exp();
        for (d, e) in v {
            sum += match e {
                Some(e) => (*d * *e).sin(),
                None => *d * *d,
            };
        }
        sum + o.map_or(S::zero(), |[z]| z)
    }
    let g = structured::grad(|x| f(x), &x);
    assert_eq!(g.2[1].1, None);
    assert_eq!(g.3, None);
    let flat_f = |p: &[f64]| f(&x.unflatten(p));
    for (i, gi) in g.flatten().into_iter().enumerate() {
        assert_close(gi, partial(flat_f, &flat, i), 1e-8, &format!("∂f/∂x{i}"));
    }
    assert_eq!(
        g.flatten(),
        nabla::grad(|p| f(&x.unflatten(p)), &flat),
        "the slice operator on the flattened tuple"
    );
    let h = structured::hessian(|x| f(x), &x);
    assert_eq!(h, nabla::hessian(|p| f(&x.unflatten(p)), &flat));
}

#[test]
fn mismatched_shapes_panic() {
    let zip = std::panic::catch_unwind(|| {
        (1.0, vec![2.0]).zip_map_scalars(&(1.0, vec![2.0, 3.0]), &mut |a, b| a + b)
    });
    assert!(zip.is_err());
    let option =
        std::panic::catch_unwind(|| Some(1.0).zip_map_scalars(&None, &mut |a, b: &f64| a + b));
    assert!(option.is_err());
    assert!(std::panic::catch_unwind(|| (1.0, 2.0).unflatten(&[1.0])).is_err());
    assert!(std::panic::catch_unwind(|| (1.0, 2.0).unflatten(&[1.0, 2.0, 3.0])).is_err());
    let jvp = std::panic::catch_unwind(|| {
        structured::jvp(|v: &Vec<_>| v[0], &vec![1.0], &vec![1.0, 2.0])
    });
    assert!(jvp.is_err());
}

/// A tuple struct whose scalar parameter is not the first, with skipped fields.
#[derive(Clone, Debug, PartialEq, nabla::Differentiable)]
#[nabla(scalar = S)]
struct Tagged<'a, K, S, const N: usize>(
    #[nabla(skip)] &'a str,
    [S; N],
    #[nabla(skip)] K,
    Option<Vec<S>>,
);

#[test]
fn derived_tuple_struct_with_skipped_fields() {
    let t = Tagged("tag", [1.0, 2.0], 42_u8, Some(vec![3.0]));
    assert_eq!(t.flatten(), vec![1.0, 2.0, 3.0]);
    let g = structured::grad(|t| t.1[0] * t.1[1] * t.3.as_ref().unwrap()[0], &t);
    assert_eq!(g, Tagged("tag", [6.0, 3.0], 42, Some(vec![2.0])));
    let as_f32: Tagged<'_, u8, f32, 2> = t.map_scalars(&mut |&s| s as f32);
    assert_eq!(as_f32.flatten(), vec![1.0_f32, 2.0, 3.0]);
    let g32 = structured::grad(|t| t.1[0] * t.1[1] * t.3.as_ref().unwrap()[0], &as_f32);
    assert_eq!(g32.flatten(), vec![6.0_f32, 3.0, 2.0]);
}

/// A scalar MLP y = Σⱼ vⱼ·tanh(wⱼ·x + bⱼ) + c fitted to sin on a few points.
#[derive(Clone, Debug, PartialEq, nabla::Differentiable)]
struct Mlp<S> {
    hidden: Vec<(S, S)>,
    out: Vec<S>,
    c: S,
}

fn mlp<S: Scalar>(m: &Mlp<S>, x: f64) -> S {
    m.hidden
        .iter()
        .zip(&m.out)
        .map(|(&(w, b), &v)| v * (w * x + b).tanh())
        .sum::<S>()
        + m.c
}

fn mlp_loss<S: Scalar>(m: &Mlp<S>) -> S {
    let xs = [-1.5, -0.75, 0.0, 0.75, 1.5];
    xs.iter()
        .map(|&x| {
            let r = mlp(m, x) - x.sin();
            r * r
        })
        .sum::<S>()
        * (1.0 / xs.len() as f64)
}

#[test]
fn a_scalar_mlp_trains_with_the_structured_gradient() {
    let mut m = Mlp {
        hidden: (0..4)
            .map(|j| (0.3 * (j as f64 + 1.0), 0.2 * j as f64 - 0.3))
            .collect(),
        out: (0..4).map(|j| 0.1 * (j as f64 - 1.5)).collect(),
        c: 0.05,
    };
    let initial = mlp_loss(&m);
    let mut previous = initial;
    for _ in 0..200 {
        let (value, g) = structured::value_and_grad(|m| mlp_loss(m), &m);
        assert_eq!(value, previous);
        // The same step by the slice operator on the hand-flattened parameters.
        let flat = m.flatten();
        let flat_g = nabla::grad(|p| mlp_loss(&m.unflatten(p)), &flat);
        assert_eq!(g.flatten(), flat_g);
        m = m.zip_map_scalars(&g, &mut |p, g| p - g * 0.2);
        let now = mlp_loss(&m);
        assert!(
            now < previous,
            "gradient descent with a small step decreases the loss"
        );
        previous = now;
    }
    assert!(previous < 0.1 * initial, "{initial} → {previous}");
}

/// A derived struct with a field of each container kind around derived structs.
#[derive(Clone, Debug, PartialEq, nabla::Differentiable)]
struct Kinds<S> {
    pair: (S, Layer<S>),
    array: [Layer<S>; 2],
    option: Option<Layer<S>>,
    nested: Vec<Vec<(S, [S; 1])>>,
}

fn layer(a: f64) -> Layer<f64> {
    Layer {
        weights: vec![vec![a, a + 0.1]],
        biases: vec![a + 0.2],
    }
}

fn kinds_value<S: Scalar>(k: &Kinds<S>) -> S {
    let layer_sum = |l: &Layer<S>| {
        l.weights.iter().flatten().map(|&w| w.sin()).sum::<S>() + l.biases[0] * l.biases[0]
    };
    let mut v = k.pair.0 * layer_sum(&k.pair.1);
    for l in &k.array {
        v += layer_sum(l).exp();
    }
    if let Some(l) = &k.option {
        v += layer_sum(l) * k.pair.0;
    }
    for row in &k.nested {
        for &(a, [b]) in row {
            v += a * b * b;
        }
    }
    v
}

#[test]
fn derived_fields_of_every_container_kind() {
    let k = Kinds {
        pair: (0.5, layer(1.0)),
        array: [layer(2.0), layer(-1.0)],
        option: Some(layer(0.3)),
        nested: vec![
            vec![(1.5, [2.0]), (0.25, [-1.0])],
            vec![],
            vec![(3.0, [0.5])],
        ],
    };
    // The order: fields as written, each container in its own order.
    let mut by_hand = vec![0.5];
    for l in [
        &k.pair.1,
        &k.array[0],
        &k.array[1],
        k.option.as_ref().unwrap(),
    ] {
        by_hand.extend(l.weights.iter().flatten());
        by_hand.extend(&l.biases);
    }
    by_hand.extend([1.5, 2.0, 0.25, -1.0, 3.0, 0.5]);
    assert_eq!(k.flatten(), by_hand);
    assert_eq!(k.scalar_count(), by_hand.len());

    let g = structured::grad(|k| kinds_value(k), &k);
    let flat_f = |p: &[f64]| kinds_value(&k.unflatten(p));
    for (i, gi) in g.flatten().into_iter().enumerate() {
        // exp(…) reaches ~10³, so the differences carry ~10⁻⁷ of rounding.
        assert_close(gi, partial(flat_f, &by_hand, i), 1e-6, &format!("∂/∂k{i}"));
    }
    // The structure of the gradient is the structure of the point.
    assert_eq!(g.nested[1], vec![]);
    assert_eq!(g.map_scalars(&mut |_| 0.0), k.map_scalars(&mut |_| 0.0));

    let without = Kinds {
        option: None,
        ..k.clone()
    };
    assert_eq!(without.scalar_count(), by_hand.len() - 3);
    let g = structured::grad(|k| kinds_value(k), &without);
    assert_eq!(g.option, None);
}

/// Three outputs of the model: fewer outputs than parameters, so `jacobian` runs
/// in reverse mode.
fn outputs<S: Scalar>(m: &Model<S>) -> Vec<S> {
    vec![
        loss(m),
        m.b * m.w[0] + m.layers[0].weights[2][1].sin(),
        m.layers[1].biases[0].exp() * predict(m, &DATA[1].0),
    ]
}

/// `outputs` as a structured vector function.
struct Outputs;
impl<S: Scalar> structured::VectorFunction<Model<S>, S> for Outputs {
    fn eval<T: Lift<S>>(&self, m: &Model<T>) -> Vec<T> {
        outputs(m)
    }
}

/// `outputs` on the hand-flattened parameters, as a slice vector function.
struct FlatOutputs;
impl<S: Scalar> nabla::VectorFunction<S> for FlatOutputs {
    fn eval<T: Lift<S>>(&self, p: &[T]) -> Vec<T> {
        outputs(&unflatten_by_hand(p))
    }
}

/// The rows of a structured Jacobian, flattened by hand.
fn flat_rows(j: &[Model<f64>]) -> Vec<Vec<f64>> {
    j.iter().map(flatten_by_hand).collect()
}

#[test]
// Reverse mode needs the closures `|m| outputs(m)` (see `vjp_returns_the_cotangent_in_the_input_structure`);
// clippy does not see the higher-ranked bound behind `RefFnOnce`.
#[allow(clippy::redundant_closure)]
fn jacobian_matches_the_flat_jacobian_in_both_modes() {
    let m = model();
    let p = flatten_by_hand(&m);
    let unflat = |p: &[_]| unflatten_by_hand(p);

    // Reverse mode: bit for bit the slice operator on the hand-flattened parameters.
    let reverse = structured::jacobian_reverse(|m| outputs(m), &m);
    assert_eq!(reverse.len(), 3);
    assert_eq!(
        flat_rows(&reverse),
        nabla::jacobian_reverse(|p| outputs(&unflatten_by_hand(p)), &p)
    );
    // Each row is a model: the gradient of that output.
    assert_eq!(reverse[0], structured::grad(|m| loss(m), &m));
    assert_eq!(
        reverse[1].map_scalars(&mut |_| 0.0),
        m.map_scalars(&mut |_| 0.0)
    );

    // Forward mode: likewise, and equal to reverse mode up to rounding.
    let forward = structured::jacobian_forward(outputs, &m);
    assert_eq!(
        flat_rows(&forward),
        nabla::jacobian_forward(|p| outputs(&unflat(p)), &p)
    );
    for (f, r) in flat_rows(&forward).iter().zip(flat_rows(&reverse)) {
        for (a, b) in f.iter().zip(r) {
            assert_close(*a, b, 1e-14, "forward against reverse");
        }
    }

    // The mode-choosing forms: 17 parameters > 3 outputs, so reverse mode, exactly.
    let by_trait = structured::jacobian(&Outputs, &m);
    assert_eq!(flat_rows(&by_trait), nabla::jacobian(&FlatOutputs, &p));
    assert_eq!(by_trait, reverse);
    // The closure runs once to count the outputs, then once to record the trace.
    let calls = std::cell::Cell::new(0);
    let by_macro = structured::jacobian!(
        |m| {
            calls.set(calls.get() + 1);
            outputs(m)
        },
        &m
    );
    assert_eq!(calls.get(), 1 + 1);
    assert_eq!(
        flat_rows(&by_macro),
        nabla::jacobian!(|p| outputs(&unflatten_by_hand(p)), &p)
    );
    assert_eq!(by_macro, reverse);
    let by_closures = structured::jacobian_with(outputs, |m| outputs(m), &m);
    assert_eq!(by_closures, reverse);

    // Finite differences, entry by entry.
    for (i, row) in flat_rows(&reverse).iter().enumerate() {
        let output = |p: &[f64]| outputs(&unflatten_by_hand(p))[i];
        for (j, &jij) in row.iter().enumerate() {
            assert_close(jij, partial(output, &p, j), 1e-7, &format!("J[{i}][{j}]"));
        }
    }
}

#[test]
fn jacobian_of_a_wide_function_runs_forward() {
    // (a, [b, c]) ↦ five outputs: more outputs than inputs, so forward mode.
    fn f<S: Scalar>(&(a, [b, c]): &(S, [S; 2])) -> Vec<S> {
        vec![a * b, b.sin() * c, (a * c).exp(), a + b + c, c * c * a]
    }
    let x = (0.5, [-1.25, 2.0]);
    let flat = x.flatten();
    let forward = structured::jacobian_forward(f, &x);
    assert_eq!(forward.len(), 5);
    let flat_forward = nabla::jacobian_forward(|p| f(&x.unflatten(p)), &flat);
    assert_eq!(
        forward.iter().map(|r| r.flatten()).collect::<Vec<_>>(),
        flat_forward
    );
    assert_eq!(forward[0], (-1.25, [0.5, 0.0]));
    // The closure runs once to count the outputs, then once per input.
    let calls = std::cell::Cell::new(0);
    let by_macro = structured::jacobian!(
        |x| {
            calls.set(calls.get() + 1);
            f(x)
        },
        &x
    );
    assert_eq!(by_macro, forward);
    assert_eq!(calls.get(), 1 + 3);
    assert_eq!(
        nabla::jacobian!(|p| f(&x.unflatten(p)), &flat),
        flat_forward
    );
    assert_eq!(structured::jacobian_with(f, |x| f(x), &x), forward);
    #[allow(clippy::redundant_closure)]
    let reverse = structured::jacobian_reverse(|x| f(x), &x);
    for (row_f, row_r) in forward.iter().zip(&reverse) {
        for (a, b) in row_f.flatten().into_iter().zip(row_r.flatten()) {
            assert_close(a, b, 1e-15, "forward against reverse");
        }
    }
    for (i, row) in forward.iter().enumerate() {
        let output = |p: &[f64]| f(&x.unflatten(p))[i];
        for (j, jij) in row.flatten().into_iter().enumerate() {
            assert_close(
                jij,
                partial(output, &flat, j),
                1e-8,
                &format!("J[{i}][{j}]"),
            );
        }
    }
}

#[test]
// Reverse mode needs the closures `|m| outputs(m)` (see `vjp_returns_the_cotangent_in_the_input_structure`);
// clippy does not see the higher-ranked bound behind `RefFnOnce`.
#[allow(clippy::redundant_closure)]
fn jacobian_of_vecs_options_and_no_outputs() {
    // A Vec of pairs with an Option inside: the rows keep the `None`.
    type Params<S> = Vec<(S, Option<S>)>;
    let x: Params<f64> = vec![(1.0, Some(2.0)), (-0.5, None), (3.0, Some(0.25))];
    fn f<S: Scalar>(x: &Params<S>) -> Vec<S> {
        let s: S = x.iter().map(|&(a, b)| a * b.unwrap_or(S::one())).sum();
        vec![s, s.sin()]
    }
    let flat = x.flatten();
    let j = structured::jacobian!(|x| f(x), &x);
    assert_eq!(j[0], vec![(2.0, Some(1.0)), (1.0, None), (0.25, Some(3.0))]);
    assert_eq!(
        j.iter().map(|r| r.flatten()).collect::<Vec<_>>(),
        nabla::jacobian!(|p| f(&x.unflatten(p)), &flat)
    );
    assert_eq!(j, structured::jacobian_forward(f, &x));

    // No outputs: no rows, in either mode; no inputs: rows of empty structures.
    let none = structured::jacobian!(|_: &Params<_>| Vec::new(), &x);
    assert!(none.is_empty());
    let empty: Vec<f64> = Vec::new();
    // (A constant output of either mode's type: `lift` converts into both.)
    let rows = structured::jacobian!(|_| vec![lift(1.0).into(); 2], &empty);
    assert_eq!(rows, vec![Vec::<f64>::new(), Vec::new()]);
}

#[test]
// Reverse mode needs the closures `|m| outputs(m)` (see `vjp_returns_the_cotangent_in_the_input_structure`);
// clippy does not see the higher-ranked bound behind `RefFnOnce`.
#[allow(clippy::redundant_closure)]
fn nested_structured_jacobians() {
    // d/ds of ∂f₀/∂y for f_s(x, [y]) = (s·x·sin y, x² + exp(s·y)), s captured
    // through `lift`: ∂f₀/∂y = s·x·cos y, whose s-derivative is x·cos y; and
    // ∂f₁/∂y = s·exp(s·y), whose s-derivative is (1 + s·y)·exp(s·y).
    let (x, y, s) = (1.5, 0.75, 0.5);
    let entries = |s| {
        let point = (nabla::Dual::constant(x), [nabla::Dual::constant(y)]);
        let j = structured::jacobian!(
            |&(x, [y])| vec![lift(s) * x * y.sin(), x * x + (lift(s) * y).exp()],
            &point
        );
        (j[0].1[0], j[1].1[0])
    };
    let d0 = nabla::derivative(|s| entries(s).0, s);
    let d1 = nabla::derivative(|s| entries(s).1, s);
    assert_close(d0, x * y.cos(), 1e-15, "d/ds ∂f₀/∂y");
    assert_close(d1, (1.0 + s * y) * (s * y).exp(), 1e-15, "d/ds ∂f₁/∂y");

    // The same through the slice operator: the same bits.
    let flat_d0 = nabla::derivative(
        |s| {
            let point = [nabla::Dual::constant(x), nabla::Dual::constant(y)];
            nabla::jacobian!(
                |v| vec![
                    lift(s) * v[0] * v[1].sin(),
                    v[0] * v[0] + (lift(s) * v[1]).exp()
                ],
                &point
            )[0][1]
        },
        s,
    );
    assert_eq!(d0, flat_d0);

    // A model scaled by s: d/ds of a structured Jacobian entry, in each mode, against
    // the slice operator (exact) and a central difference in s.
    let m = model();
    let entry = |s: f64| {
        let scaled = m.map_scalars(&mut |&p| s * p);
        structured::jacobian(&Outputs, &scaled)[2].layers[0].weights[1][0]
    };
    let d = nabla::derivative(
        |s| {
            let scaled = m.map_scalars(&mut |&p| s * p);
            structured::jacobian!(|n| outputs(n), &scaled)[2].layers[0].weights[1][0]
        },
        1.0,
    );
    let d_forward = nabla::derivative(
        |s| {
            let scaled = m.map_scalars(&mut |&p| s * p);
            structured::jacobian_forward(outputs, &scaled)[2].layers[0].weights[1][0]
        },
        1.0,
    );
    let p = flatten_by_hand(&m);
    let position = 2 + 1 + 2; // after w, b and the first row of the first layer
    assert_eq!(p[position], m.layers[0].weights[1][0]);
    let flat_d = nabla::derivative(
        |s| {
            let scaled: Vec<_> = p.iter().map(|&p| s * p).collect();
            nabla::jacobian(&FlatOutputs, &scaled)[2][position]
        },
        1.0,
    );
    assert_eq!(d, flat_d);
    assert_close(
        d_forward,
        d,
        1e-13,
        "forward over forward against forward over reverse",
    );
    let h = 1e-6;
    assert_close(
        d,
        (entry(1.0 + h) - entry(1.0 - h)) / (2.0 * h),
        1e-6,
        "d/ds J",
    );

    // Reverse over a structured Jacobian: the gradient of J[0]·m at m is
    // J[0] + Hᵀm = ∇loss + H·m, H the Hessian of loss.
    let outer = structured::grad(
        |n| {
            let j = structured::jacobian!(|k| outputs(k), n);
            j[0].flatten()
                .into_iter()
                .zip(n.flatten())
                .map(|(a, b)| a * b)
                .sum()
        },
        &m,
    );
    let expected = structured::grad(|m| loss(m), &m)
        .zip_map_scalars(&structured::hvp(|m| loss(m), &m, &m), &mut |a, b| a + b);
    for (a, b) in outer.flatten().into_iter().zip(expected.flatten()) {
        assert_close(a, b, 1e-12, "reverse over a structured Jacobian");
    }
}
