//! BA: bundle-adjustment reprojection residuals and their sparse Jacobian (ADBench).

use nabla::{Dual, Scalar, jvp, vjp};

use crate::data::Numbers;

/// Camera parameters: rotation (3, axis-angle), centre (3), f, u0, v0, k1, k2.
pub const CAM: usize = 11;
/// Inputs one reprojection residual depends on: camera, point, weight.
pub const LOCAL: usize = CAM + 3 + 1;

/// A BA input, with the file's single camera, point, weight and feature replicated.
#[derive(Clone, Debug)]
pub struct BaInput {
    /// Cameras.
    pub n: usize,
    /// Points.
    pub m: usize,
    /// Observations (and weights).
    pub p: usize,
    /// n·11 camera parameters.
    pub cams: Vec<f64>,
    /// m·3 point coordinates.
    pub points: Vec<f64>,
    /// p weights.
    pub weights: Vec<f64>,
    /// p·2 observed features.
    pub features: Vec<f64>,
}

impl BaInput {
    /// Parses the ADBench BA format.
    pub fn parse(text: &str) -> Self {
        let mut t = Numbers::new(text);
        let (n, m, p) = (t.next_usize(), t.next_usize(), t.next_usize());
        let cam = t.take(CAM);
        let point = t.take(3);
        let weight = t.next_f64();
        let feature = t.take(2);
        BaInput {
            n,
            m,
            p,
            cams: cam.repeat(n),
            points: point.repeat(m),
            weights: vec![weight; p],
            features: feature.repeat(p),
        }
    }

    /// The 15 local inputs of observation `i`: camera i mod n, point i mod m, weight i.
    pub fn local(&self, i: usize) -> [f64; LOCAL] {
        let (c, q) = (i % self.n, i % self.m);
        let mut v = [0.0; LOCAL];
        v[..CAM].copy_from_slice(&self.cams[c * CAM..(c + 1) * CAM]);
        v[CAM..CAM + 3].copy_from_slice(&self.points[q * 3..q * 3 + 3]);
        v[CAM + 3] = self.weights[i];
        v
    }

    fn feature(&self, i: usize) -> [f64; 2] {
        [self.features[2 * i], self.features[2 * i + 1]]
    }
}

/// All residuals: 2 per observation, then 1 per weight.
#[derive(Clone, Debug, PartialEq)]
pub struct Residuals {
    /// w·(proj − feature), 2p values.
    pub reproj: Vec<f64>,
    /// 1 − w², p values.
    pub weight: Vec<f64>,
}

/// The Jacobian in CSR form, (2p + p) × (11n + 3m + p).
#[derive(Clone, Debug, PartialEq)]
pub struct SparseJacobian {
    /// Row start offsets (rows + 1 entries).
    pub rows: Vec<usize>,
    /// Column of each value.
    pub cols: Vec<usize>,
    /// The non-zeros, row major.
    pub values: Vec<f64>,
}

/// x + r × x style cross product.
fn cross<S: Scalar>(a: [S; 3], b: [S; 3]) -> [S; 3] {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

/// The weighted reprojection error of one observation from its 15 local inputs
/// (camera, point, weight), written once for every scalar type.
pub fn reprojection<S: Scalar>(v: &[S], feature: [f64; 2]) -> [S; 2] {
    let r = [v[0], v[1], v[2]];
    let x = [v[CAM] - v[3], v[CAM + 1] - v[4], v[CAM + 2] - v[5]];
    let sq_theta = r[0] * r[0] + r[1] * r[1] + r[2] * r[2];
    let cam = if sq_theta != 0.0 {
        // Rodrigues: x cos θ + (v × x) sin θ + v (v·x)(1 − cos θ), v = r/θ.
        let theta = sq_theta.sqrt();
        let (cos, sin) = (theta.cos(), theta.sin());
        let axis = [r[0] / theta, r[1] / theta, r[2] / theta];
        let vx = cross(axis, x);
        let along = (axis[0] * x[0] + axis[1] * x[1] + axis[2] * x[2]) * (S::one() - cos);
        [0, 1, 2].map(|i| x[i] * cos + vx[i] * sin + axis[i] * along)
    } else {
        let rx = cross(r, x);
        [0, 1, 2].map(|i| x[i] + rx[i])
    };
    let p = [cam[0] / cam[2], cam[1] / cam[2]];
    let rsq = p[0] * p[0] + p[1] * p[1];
    let distortion = S::one() + v[9] * rsq + v[10] * rsq * rsq;
    let w = v[CAM + 3];
    [
        (p[0] * distortion * v[6] + v[7] - feature[0]) * w,
        (p[1] * distortion * v[6] + v[8] - feature[1]) * w,
    ]
}

/// The primal: every residual on `f64`.
pub fn primal(data: &BaInput) -> Residuals {
    let mut reproj = Vec::with_capacity(2 * data.p);
    for i in 0..data.p {
        reproj.extend(reprojection(&data.local(i), data.feature(i)));
    }
    let weight = data.weights.iter().map(|w| 1.0 - w * w).collect();
    Residuals { reproj, weight }
}

/// Builds the residuals and the CSR Jacobian, given each observation's residuals and
/// 2×15 block (row major) — the part every implementation shares.
fn assemble(
    data: &BaInput,
    mut block: impl FnMut(usize) -> ([f64; 2], [[f64; LOCAL]; 2]),
) -> (Residuals, SparseJacobian) {
    let (n, m, p) = (data.n, data.m, data.p);
    let nnz = 2 * p * LOCAL + p;
    let mut rows = Vec::with_capacity(3 * p + 1);
    let mut cols = Vec::with_capacity(nnz);
    let mut values = Vec::with_capacity(nnz);
    let mut reproj = Vec::with_capacity(2 * p);
    rows.push(0);
    for i in 0..p {
        let (res, jac) = block(i);
        reproj.extend(res);
        let (cam0, pt0, w0) = (CAM * (i % n), CAM * n + 3 * (i % m), CAM * n + 3 * m + i);
        for row in &jac {
            cols.extend(cam0..cam0 + CAM);
            cols.extend(pt0..pt0 + 3);
            cols.push(w0);
            values.extend_from_slice(row);
            rows.push(cols.len());
        }
    }
    for (i, w) in data.weights.iter().enumerate() {
        cols.push(CAM * n + 3 * m + i);
        values.push(-2.0 * w);
        rows.push(cols.len());
    }
    let weight = data.weights.iter().map(|w| 1.0 - w * w).collect();
    (
        Residuals { reproj, weight },
        SparseJacobian { rows, cols, values },
    )
}

/// Residuals and Jacobian by the library's reverse mode: one [`vjp`] per
/// observation, its pullback applied to the two unit cotangents.
pub fn jacobian_nabla_reverse(data: &BaInput) -> (Residuals, SparseJacobian) {
    assemble(data, |i| {
        let feature = data.feature(i);
        let (res, pullback) = vjp(|v| reprojection(v, feature).to_vec(), &data.local(i));
        let row =
            |ct: [f64; 2]| -> [f64; LOCAL] { pullback.apply(&ct).try_into().expect("15 inputs") };
        ([res[0], res[1]], [row([1.0, 0.0]), row([0.0, 1.0])])
    })
}

/// Residuals and Jacobian by the library's forward mode: 15 [`jvp`]s per
/// observation, one per local input.
pub fn jacobian_nabla_forward(data: &BaInput) -> (Residuals, SparseJacobian) {
    assemble(data, |i| {
        let feature = data.feature(i);
        let local = data.local(i);
        let mut jac = [[0.0; LOCAL]; 2];
        let mut res = [0.0; 2];
        let mut direction = [0.0; LOCAL];
        for j in 0..LOCAL {
            direction[j] = 1.0;
            let (value, tangent) = jvp(
                |v: &[Dual<f64>]| reprojection(v, feature).to_vec(),
                &local,
                &direction,
            );
            direction[j] = 0.0;
            res = [value[0], value[1]];
            jac[0][j] = tangent[0];
            jac[1][j] = tangent[1];
        }
        (res, jac)
    })
}

type M3 = [[f64; 3]; 3];

/// One observation's residuals and 2×15 Jacobian block, derived by hand (no AD).
///
/// Chain: X_cam = R(r)(X − C); p = X_cam\[0:2\]/X_cam\[2\]; p_d = p·L(‖p‖²);
/// e = w·(f·p_d + (u0, v0) − feature). With θ = ‖r‖, v = r/θ, ∂θ/∂r_k = v_k and
/// ∂v/∂r_k = (e_k − v v_k)/θ, differentiating Rodrigues' formula term by term gives
/// ∂X_cam/∂r_k; ∂X_cam/∂X = R, ∂X_cam/∂C = −R.
pub fn block_manual(v: &[f64; LOCAL], feature: [f64; 2]) -> ([f64; 2], [[f64; LOCAL]; 2]) {
    let r = [v[0], v[1], v[2]];
    let x = [v[CAM] - v[3], v[CAM + 1] - v[4], v[CAM + 2] - v[5]];
    let (f, k1, k2, w) = (v[6], v[9], v[10], v[CAM + 3]);
    let sq_theta = r[0] * r[0] + r[1] * r[1] + r[2] * r[2];
    // cam = R x, rot = ∂cam/∂x = R, d_r[k] = ∂cam/∂r_k.
    let (cam, rot, d_r): ([f64; 3], M3, [[f64; 3]; 3]) = if sq_theta != 0.0 {
        let theta = sq_theta.sqrt();
        let (cos, sin) = (theta.cos(), theta.sin());
        let a = r.map(|ri| ri / theta);
        let ax = cross(a, x);
        let dot = a[0] * x[0] + a[1] * x[1] + a[2] * x[2];
        let cam = [0, 1, 2].map(|i| x[i] * cos + ax[i] * sin + a[i] * dot * (1.0 - cos));
        let mut rot = [[0.0; 3]; 3];
        for (i, row) in rot.iter_mut().enumerate() {
            for (j, e) in row.iter_mut().enumerate() {
                // R = cos I + sin [v]× + (1 − cos) v vᵀ.
                let skew = match (i, j) {
                    (0, 1) => -a[2],
                    (0, 2) => a[1],
                    (1, 0) => a[2],
                    (1, 2) => -a[0],
                    (2, 0) => -a[1],
                    (2, 1) => a[0],
                    _ => 0.0,
                };
                *e = if i == j { cos } else { 0.0 } + sin * skew + (1.0 - cos) * a[i] * a[j];
            }
        }
        let d_r = [0, 1, 2].map(|k| {
            let dtheta = a[k];
            let da: [f64; 3] =
                [0, 1, 2].map(|i| (if i == k { 1.0 } else { 0.0 } - a[i] * a[k]) / theta);
            let dax = cross(da, x);
            let ddot = da[0] * x[0] + da[1] * x[1] + da[2] * x[2];
            [0, 1, 2].map(|i| {
                -sin * dtheta * x[i]
                    + cos * dtheta * ax[i]
                    + sin * dax[i]
                    + sin * dtheta * dot * a[i]
                    + (1.0 - cos) * (ddot * a[i] + dot * da[i])
            })
        });
        (cam, rot, d_r)
    } else {
        // cam = x + r × x.
        let rx = cross(r, x);
        let cam = [0, 1, 2].map(|i| x[i] + rx[i]);
        let rot = [[1.0, -r[2], r[1]], [r[2], 1.0, -r[0]], [-r[1], r[0], 1.0]];
        let d_r = [0, 1, 2].map(|k| {
            let mut e = [0.0; 3];
            e[k] = 1.0;
            cross(e, x)
        });
        (cam, rot, d_r)
    };
    let p = [cam[0] / cam[2], cam[1] / cam[2]];
    let rsq = p[0] * p[0] + p[1] * p[1];
    let dist = 1.0 + k1 * rsq + k2 * rsq * rsq;
    let pd = [p[0] * dist, p[1] * dist];
    let res = [0, 1].map(|a| w * (pd[a] * f + v[7 + a] - feature[a]));
    // G = w·f·(∂p_d/∂p)(∂p/∂cam): the 2×3 map from a change in cam to the residuals.
    let ddist = 2.0 * (k1 + 2.0 * k2 * rsq);
    let dpd_dp =
        [0, 1].map(|a| [0, 1].map(|b| if a == b { dist } else { 0.0 } + ddist * p[a] * p[b]));
    let dp_dcam = [
        [1.0 / cam[2], 0.0, -p[0] / cam[2]],
        [0.0, 1.0 / cam[2], -p[1] / cam[2]],
    ];
    let g: [[f64; 3]; 2] = [0, 1].map(|a| {
        [0, 1, 2].map(|c| w * f * (dpd_dp[a][0] * dp_dcam[0][c] + dpd_dp[a][1] * dp_dcam[1][c]))
    });
    let mut jac = [[0.0; LOCAL]; 2];
    for a in 0..2 {
        let ga = g[a];
        for k in 0..3 {
            jac[a][k] = ga[0] * d_r[k][0] + ga[1] * d_r[k][1] + ga[2] * d_r[k][2];
        }
        // gᵀR: the derivative through X − C.
        let rt_g = [0, 1, 2].map(|j| ga[0] * rot[0][j] + ga[1] * rot[1][j] + ga[2] * rot[2][j]);
        for j in 0..3 {
            jac[a][3 + j] = -rt_g[j];
            jac[a][CAM + j] = rt_g[j];
        }
        jac[a][6] = w * pd[a];
        jac[a][7 + a] = w;
        jac[a][9] = w * f * p[a] * rsq;
        jac[a][10] = w * f * p[a] * rsq * rsq;
        jac[a][CAM + 3] = pd[a] * f + v[7 + a] - feature[a];
    }
    (res, jac)
}

/// Residuals and Jacobian derived by hand.
pub fn jacobian_manual(data: &BaInput) -> (Residuals, SparseJacobian) {
    assemble(data, |i| block_manual(&data.local(i), data.feature(i)))
}
