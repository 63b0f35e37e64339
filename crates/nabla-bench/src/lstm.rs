//! LSTM: the loss of a stacked LSTM with diagonal weights over a sequence (ADBench),
//! and its gradient with respect to the main and extra parameters.

use nabla::{Scalar, value_and_grad};

use crate::data::Numbers;

/// An LSTM input.
#[derive(Clone, Debug)]
pub struct LstmInput {
    /// Number of layers.
    pub l: usize,
    /// Sequence length.
    pub c: usize,
    /// Width of every vector.
    pub b: usize,
    /// Main (2l rows of 4b) then extra (3 rows of b) parameters: the gradient's order.
    pub params: Vec<f64>,
    /// Initial state: per layer h then c, each b values.
    pub state: Vec<f64>,
    /// The sequence, c rows of b.
    pub seq: Vec<f64>,
}

impl LstmInput {
    /// Parses the ADBench LSTM format.
    pub fn parse(text: &str) -> Self {
        let mut t = Numbers::new(text);
        let (l, c, b) = (t.next_usize(), t.next_usize(), t.next_usize());
        let params = t.take(8 * l * b + 3 * b);
        let state = t.take(2 * l * b);
        let seq = t.take(c * b);
        LstmInput {
            l,
            c,
            b,
            params,
            state,
            seq,
        }
    }

    /// The number of parameters (and gradient entries).
    pub fn num_params(&self) -> usize {
        self.params.len()
    }
}

fn sigmoid<S: Scalar>(x: S) -> S {
    S::one() / (S::one() + (-x).exp())
}

/// The loss at `params`, written once for every scalar type.
pub fn objective<S: Scalar>(params: &[S], data: &LstmInput) -> S {
    let (l, b) = (data.l, data.b);
    let extra = &params[8 * l * b..];
    let (in_w, out_w, out_b) = (&extra[..b], &extra[b..2 * b], &extra[2 * b..]);
    let mut state: Vec<S> = data.state.iter().map(|&v| S::from(v)).collect();
    let mut input = vec![S::zero(); b];
    let mut loss = S::zero();
    for t in 0..data.c - 1 {
        let x = &data.seq[t * b..(t + 1) * b];
        for j in 0..b {
            input[j] = in_w[j] * x[j];
        }
        for layer in 0..l {
            let w = &params[8 * layer * b..8 * layer * b + 4 * b];
            let bias = &params[8 * layer * b + 4 * b..8 * (layer + 1) * b];
            let (h, c) = state[2 * layer * b..2 * (layer + 1) * b].split_at_mut(b);
            for j in 0..b {
                let forget = sigmoid(input[j] * w[j] + bias[j]);
                let ingate = sigmoid(h[j] * w[b + j] + bias[b + j]);
                let outgate = sigmoid(input[j] * w[2 * b + j] + bias[2 * b + j]);
                let change = (h[j] * w[3 * b + j] + bias[3 * b + j]).tanh();
                c[j] = c[j] * forget + ingate * change;
                h[j] = outgate * c[j].tanh();
                input[j] = h[j];
            }
        }
        let y: Vec<S> = (0..b).map(|j| input[j] * out_w[j] + out_b[j]).collect();
        let lse = (y.iter().map(|&v| v.exp()).sum::<S>() + 2.0).ln();
        let next = &data.seq[(t + 1) * b..(t + 2) * b];
        for j in 0..b {
            loss -= (y[j] - lse) * next[j];
        }
    }
    loss / ((data.c - 1) * b) as f64
}

/// The primal: the loss on `f64`.
pub fn primal(data: &LstmInput) -> f64 {
    objective(&data.params, data)
}

/// Value and gradient by the library's reverse mode.
pub fn gradient_nabla(data: &LstmInput) -> (f64, Vec<f64>) {
    value_and_grad(|p| objective(p, data), &data.params)
}

/// The forward quantities of one layer step that the backward sweep needs.
#[derive(Clone, Copy, Default)]
struct Step {
    input: f64,
    h_prev: f64,
    c_prev: f64,
    forget: f64,
    ingate: f64,
    outgate: f64,
    change: f64,
    tanh_c: f64,
}

/// Value and gradient derived by hand (backpropagation through time, no AD).
pub fn gradient_manual(data: &LstmInput) -> (f64, Vec<f64>) {
    let (l, b, steps) = (data.l, data.b, data.c - 1);
    let p = &data.params;
    let extra = 8 * l * b;
    let (in_w, out_w, out_b) = (
        &p[extra..extra + b],
        &p[extra + b..extra + 2 * b],
        &p[extra + 2 * b..],
    );
    let scale = 1.0 / (steps * b) as f64;

    // Forward, recording every step of every layer and the top output.
    let mut tape = vec![Step::default(); steps * l * b];
    let mut top = vec![0.0; steps * b];
    let mut state = data.state.clone();
    let mut input = vec![0.0; b];
    let mut loss = 0.0;
    for t in 0..steps {
        let x = &data.seq[t * b..(t + 1) * b];
        for j in 0..b {
            input[j] = in_w[j] * x[j];
        }
        for layer in 0..l {
            let w = &p[8 * layer * b..];
            let bias = &p[8 * layer * b + 4 * b..];
            for j in 0..b {
                let (h, c) = (state[2 * layer * b + j], state[(2 * layer + 1) * b + j]);
                let s = Step {
                    input: input[j],
                    h_prev: h,
                    c_prev: c,
                    forget: sig(input[j] * w[j] + bias[j]),
                    ingate: sig(h * w[b + j] + bias[b + j]),
                    outgate: sig(input[j] * w[2 * b + j] + bias[2 * b + j]),
                    change: (h * w[3 * b + j] + bias[3 * b + j]).tanh(),
                    tanh_c: 0.0,
                };
                let c_new = c * s.forget + s.ingate * s.change;
                let s = Step {
                    tanh_c: c_new.tanh(),
                    ..s
                };
                state[(2 * layer + 1) * b + j] = c_new;
                state[2 * layer * b + j] = s.outgate * s.tanh_c;
                input[j] = s.outgate * s.tanh_c;
                tape[(t * l + layer) * b + j] = s;
            }
        }
        top[t * b..(t + 1) * b].copy_from_slice(&input);
        let y: Vec<f64> = (0..b).map(|j| input[j] * out_w[j] + out_b[j]).collect();
        let lse = (y.iter().map(|v| v.exp()).sum::<f64>() + 2.0).ln();
        let next = &data.seq[(t + 1) * b..(t + 2) * b];
        loss -= (0..b).map(|j| (y[j] - lse) * next[j]).sum::<f64>();
    }

    // Backward through time. dh/dc carry the gradient w.r.t. each layer's state.
    let mut g = vec![0.0; p.len()];
    let mut dh = vec![0.0; l * b];
    let mut dc = vec![0.0; l * b];
    let mut d_above = vec![0.0; b];
    for t in (0..steps).rev() {
        // loss_t = −Σ_j next_j (y_j − lse): ∂/∂y_j = −next_j + (Σ next)·softmax₊₂(y)_j.
        let h_top = &top[t * b..(t + 1) * b];
        let y: Vec<f64> = (0..b).map(|j| h_top[j] * out_w[j] + out_b[j]).collect();
        let denom = y.iter().map(|v| v.exp()).sum::<f64>() + 2.0;
        let next = &data.seq[(t + 1) * b..(t + 2) * b];
        let next_sum: f64 = next.iter().sum();
        for j in 0..b {
            let dy = scale * (next_sum * y[j].exp() / denom - next[j]);
            g[extra + 2 * b + j] += dy;
            g[extra + b + j] += dy * h_top[j];
            d_above[j] = dy * out_w[j];
        }
        for layer in (0..l).rev() {
            let (w0, b0) = (8 * layer * b, 8 * layer * b + 4 * b);
            for j in 0..b {
                let s = tape[(t * l + layer) * b + j];
                let dh_total = dh[layer * b + j] + d_above[j];
                // h = o·tanh(c); c = c_prev·f + i·g.
                let d_out = dh_total * s.tanh_c;
                let dc_new = dc[layer * b + j] + dh_total * s.outgate * (1.0 - s.tanh_c * s.tanh_c);
                let d_forget = dc_new * s.c_prev;
                let d_in = dc_new * s.change;
                let d_change = dc_new * s.ingate;
                // Through the gate nonlinearities: σ' = σ(1 − σ), tanh' = 1 − tanh².
                let a_f = d_forget * s.forget * (1.0 - s.forget);
                let a_i = d_in * s.ingate * (1.0 - s.ingate);
                let a_o = d_out * s.outgate * (1.0 - s.outgate);
                let a_c = d_change * (1.0 - s.change * s.change);
                g[w0 + j] += a_f * s.input;
                g[w0 + b + j] += a_i * s.h_prev;
                g[w0 + 2 * b + j] += a_o * s.input;
                g[w0 + 3 * b + j] += a_c * s.h_prev;
                g[b0 + j] += a_f;
                g[b0 + b + j] += a_i;
                g[b0 + 2 * b + j] += a_o;
                g[b0 + 3 * b + j] += a_c;
                dh[layer * b + j] = a_i * p[w0 + b + j] + a_c * p[w0 + 3 * b + j];
                dc[layer * b + j] = dc_new * s.forget;
                d_above[j] = a_f * p[w0 + j] + a_o * p[w0 + 2 * b + j];
            }
        }
        // The bottom layer's input is x_t scaled by the input weight.
        let x = &data.seq[t * b..(t + 1) * b];
        for j in 0..b {
            g[extra + j] += d_above[j] * x[j];
        }
    }
    (loss * scale, g)
}

fn sig(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}
