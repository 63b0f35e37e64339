//! Structured parameters: differentiate with respect to a model — a struct, tuple,
//! array, `Vec` or `Option` of scalars, nested arbitrarily — instead of a flat slice.
//!
//! The trait [`Differentiable`] describes a value that holds scalars: it counts and
//! visits them in a fixed order and rebuilds the same shape over another scalar type
//! (`Model<f64>` → `Model<Reverse<'t, f64>>` → `Model<f64>`). The operators of this
//! module are those of the crate root with the slice `&[S]` replaced by such a value
//! `&P`: [`grad`] returns a `P`, [`jvp`] takes a tangent of `x`'s shape, the pullback
//! of [`vjp`] returns a cotangent of `x`'s shape.
//!
//! ```
//! use nabla::{Scalar, structured::{Differentiable, grad}};
//!
//! // A line y = a·x + b, and its squared error on two points.
//! fn loss<S: Scalar>((a, b): &(S, S)) -> S {
//!     [(0.0, 1.0), (1.0, 3.0)].iter().map(|&(x, y)| {
//!         let r = *a * x + *b - y;
//!         r * r
//!     }).sum()
//! }
//! let g: (f64, f64) = grad(|p| loss(p), &(1.0, 0.0));
//! // ∂/∂a = Σ 2rᵢxᵢ = 2·(−1·0 + −2·1), ∂/∂b = Σ 2rᵢ = 2·(−1 − 2)
//! assert_eq!(g, (-4.0, -6.0));
//! ```
//!
//! The Jacobian of a function from a structure to a `Vec` of outputs comes back as
//! one value of `x`'s shape per output ([`jacobian`](fn@jacobian),
//! [`jacobian!`](crate::structured::jacobian!), [`jacobian_forward`],
//! [`jacobian_reverse`], [`jacobian_with`]).
//!
//! With the feature `derive`, `#[derive(nabla::Differentiable)]` implements the trait
//! for a struct generic over its scalar type (see [`Differentiable`]).
//!
//! # Why a separate family of operators
//! The slice operators of the crate root stay as they are. Making them generic over
//! `P: Differentiable` would change what existing calls mean: `grad(f, &[3.0, 4.0])`
//! passes an `&[f64; 2]`, which today coerces to a slice and returns a `Vec`; a
//! generic operator would take the array as the structure and return `[f64; 2]`, and
//! the closure would receive `&[Reverse<'_, f64>; 2]` — calls that compare the result
//! with a `vec!`, or name the closure's argument as a slice, would stop compiling.
//! So the structured operators live here, under the same names.

use crate::{Dual, Lift, Pullback, Real, Reverse, Scalar};

/// A value that holds scalars — a model's parameters — in a fixed order, and whose
/// shape can be rebuilt over another scalar type.
///
/// Implemented for every scalar type ([`f64`], [`f32`], [`Dual`], [`Reverse`]: each
/// holds itself), for tuples of up to twelve `Differentiable` values with one scalar
/// type, for arrays `[T; N]`, `Vec<T>` and `Option<T>` of them, and — with the
/// feature `derive` — for structs by `#[derive(nabla::Differentiable)]`.
///
/// The order of the scalars ([`for_each_scalar`](Differentiable::for_each_scalar),
/// [`flatten`](Differentiable::flatten)) is the order of the fields as written,
/// tuple elements left to right, array and `Vec` elements by index, and an
/// `Option` holds its value's scalars or none.
///
/// # The design: a scalar-generic shape
/// A structure is written once over its scalar type, `Model<S>`, and the trait
/// says which scalar a value holds ([`Scalar`](Differentiable::Scalar)) and names
/// the same structure over any other scalar type `T` (the generic associated type
/// [`With<T>`](Differentiable::With)). An operator that differentiates `f` at
/// `x: &Model<f64>` gives `f` a `&<Model<f64> as Differentiable>::With<Reverse<'t,
/// f64>>`, which the compiler normalises to `&Model<Reverse<'t, f64>>` before it
/// type-checks the closure — so the closure needs no annotation, and its argument
/// stays generic over the trace's lifetime `'t` as reverse mode requires (`for<'t>
/// FnOnce(&Model<Reverse<'t, f64>>) -> Reverse<'t, f64>`). The alternatives fare
/// worse: a scalar type parameter on the trait (`Differentiable<S>`) leaves `S` to
/// be inferred from an impl rather than read off the type, and a family of marker
/// types (`Model` as a type constructor) would need a second type per struct.
///
/// Scalars are leaves through one blanket implementation for every type with a
/// [`Precision`](crate::Precision) — every scalar type — so that in a generic
/// `Model<S>` the compiler knows `<S as Differentiable>::With<T>` is `T` and
/// `<Vec<S> as Differentiable>::With<T>` is `Vec<T>`: that is what lets the derived
/// `map_scalars` of `Model<S>` build a `Model<T>` field by field.
///
/// ```
/// use nabla::structured::Differentiable;
/// let p = (1.0, [2.0, 3.0], vec![(4.0, Some(5.0)), (6.0, None)]);
/// assert_eq!(p.scalar_count(), 6);
/// assert_eq!(p.flatten(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
/// let doubled = p.map_scalars(&mut |&s| s * 2.0);
/// assert_eq!(doubled, (2.0, [4.0, 6.0], vec![(8.0, Some(10.0)), (12.0, None)]));
/// ```
///
/// # Deriving
/// With the feature `derive`, `#[derive(nabla::Differentiable)]` implements it for a
/// struct (named or tuple) whose first type parameter is its scalar type. Each field
/// is `Differentiable` with that scalar (a scalar, another derived struct, a tuple,
/// array, `Vec` or `Option` of those), or is marked `#[nabla(skip)]`: then it holds
/// no scalars, must not mention the scalar type, and is cloned into rebuilt values.
/// The struct must not bound its scalar parameter in its definition (`struct
/// Model<S: Scalar>`), since `With<T>` rebuilds it over every `T`; put bounds on the
/// functions instead.
///
/// ```
/// # #[cfg(feature = "derive")] {
/// use nabla::{Scalar, structured::{Differentiable, grad}};
///
/// #[derive(Clone, Debug, PartialEq, nabla::Differentiable)]
/// struct Line<S> {
///     slope: S,
///     intercept: S,
///     #[nabla(skip)]
///     name: String,
/// }
///
/// fn loss<S: Scalar>(l: &Line<S>) -> S {
///     let r = l.slope * 2.0 + l.intercept - 5.0;
///     r * r
/// }
///
/// let line = Line { slope: 1.0, intercept: 1.0, name: "fit".to_string() };
/// let g = grad(|l| loss(l), &line);
/// // r = 2 + 1 − 5 = −2: ∂/∂slope = 2r·2, ∂/∂intercept = 2r
/// assert_eq!(g, Line { slope: -8.0, intercept: -4.0, name: "fit".to_string() });
/// # }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a structure of nabla scalars",
    label = "expected a scalar, or a struct, tuple, array, `Vec` or `Option` of scalars",
    note = "for a struct generic over its scalar type, derive the trait: \
            `#[derive(nabla::Differentiable)] struct Model<S> {{ … }}` (feature `derive`)",
    note = "for a slice `&[f64]`, use the operators of the crate root (`nabla::grad`, …)"
)]
pub trait Differentiable {
    /// The scalar type of the leaves.
    type Scalar;

    /// The same structure with scalar type `T`: `Model<T>` for `Model<S>`, `Vec<T>`
    /// for `Vec<S>`, `T` for a scalar.
    type With<T>;

    /// The number of scalars held.
    ///
    /// ```
    /// use nabla::structured::Differentiable;
    /// assert_eq!((1.0, vec![2.0, 3.0], None::<f64>).scalar_count(), 3);
    /// ```
    fn scalar_count(&self) -> usize {
        let mut count = 0;
        self.for_each_scalar(&mut |_| count += 1);
        count
    }

    /// Calls `f` on each scalar, in order.
    ///
    /// ```
    /// use nabla::structured::Differentiable;
    /// let mut sum = 0.0;
    /// (1.0, [2.0, 3.0]).for_each_scalar(&mut |&s| sum += s);
    /// assert_eq!(sum, 6.0);
    /// ```
    fn for_each_scalar<F: FnMut(&Self::Scalar)>(&self, f: &mut F);

    /// The same structure with each scalar `s` replaced by `f(s)`, called in order.
    ///
    /// ```
    /// use nabla::structured::Differentiable;
    /// let lengths = (1.5, vec![2.5]).map_scalars(&mut |s: &f64| s.to_string().len());
    /// assert_eq!(lengths, (3, vec![3]));
    /// ```
    fn map_scalars<T, F: FnMut(&Self::Scalar) -> T>(&self, f: &mut F) -> Self::With<T>;

    /// The same structure with each scalar `s` replaced by `f(s, o)`, where `o` is
    /// the scalar at the same place in `other`: a gradient step is
    /// `params.zip_map_scalars(&gradient, &mut |p, g| p - g * rate)`.
    ///
    /// # Panics
    /// If `other` does not have the same shape (a `Vec` of another length, an
    /// `Option` that is `None` where `self` is `Some` or the other way round).
    ///
    /// ```
    /// use nabla::structured::Differentiable;
    /// let p = (1.0, vec![2.0, 3.0]);
    /// let g = (0.5, vec![1.0, -1.0]);
    /// assert_eq!(p.zip_map_scalars(&g, &mut |p, g| p - g * 2.0), (0.0, vec![0.0, 5.0]));
    /// ```
    fn zip_map_scalars<U, T, F: FnMut(&Self::Scalar, &U) -> T>(
        &self,
        other: &Self::With<U>,
        f: &mut F,
    ) -> Self::With<T>;

    /// The scalars, in order.
    ///
    /// ```
    /// use nabla::structured::Differentiable;
    /// assert_eq!((1.0, [2.0, 3.0]).flatten(), vec![1.0, 2.0, 3.0]);
    /// ```
    fn flatten(&self) -> Vec<Self::Scalar>
    where
        Self::Scalar: Clone,
    {
        let mut scalars = Vec::with_capacity(self.scalar_count());
        self.for_each_scalar(&mut |s| scalars.push(s.clone()));
        scalars
    }

    /// The same structure holding `values` in order (the inverse of
    /// [`flatten`](Differentiable::flatten)); `values` may be of another scalar
    /// type.
    ///
    /// # Panics
    /// If `values` does not hold exactly [`scalar_count`](Differentiable::scalar_count)
    /// scalars.
    ///
    /// ```
    /// use nabla::structured::Differentiable;
    /// let shape = (0.0, [0.0, 0.0]);
    /// assert_eq!(shape.unflatten(&[1.0, 2.0, 3.0]), (1.0, [2.0, 3.0]));
    /// ```
    fn unflatten<T: Clone>(&self, values: &[T]) -> Self::With<T> {
        let mut values = values.iter();
        let rebuilt = self.map_scalars(&mut |_| {
            values
                .next()
                .expect("nabla::Differentiable::unflatten: too few values for the structure")
                .clone()
        });
        assert!(
            values.next().is_none(),
            "nabla::Differentiable::unflatten: more values than the structure holds"
        );
        rebuilt
    }
}

/// Every scalar type holds itself: `f64`, `f32`, `Dual<S>`, `Reverse<'_, S>`.
impl<S: crate::Precision> Differentiable for S {
    type Scalar = S;
    type With<T> = T;

    #[inline]
    fn scalar_count(&self) -> usize {
        1
    }
    #[inline]
    fn for_each_scalar<F: FnMut(&S)>(&self, f: &mut F) {
        f(self)
    }
    #[inline]
    fn map_scalars<T, F: FnMut(&S) -> T>(&self, f: &mut F) -> T {
        f(self)
    }
    #[inline]
    fn zip_map_scalars<U, T, F: FnMut(&S, &U) -> T>(&self, other: &U, f: &mut F) -> T {
        f(self, other)
    }
}

impl<E: Differentiable> Differentiable for Vec<E> {
    type Scalar = E::Scalar;
    type With<T> = Vec<E::With<T>>;

    fn scalar_count(&self) -> usize {
        self.iter().map(Differentiable::scalar_count).sum()
    }
    fn for_each_scalar<F: FnMut(&Self::Scalar)>(&self, f: &mut F) {
        for e in self {
            e.for_each_scalar(f);
        }
    }
    fn map_scalars<T, F: FnMut(&Self::Scalar) -> T>(&self, f: &mut F) -> Self::With<T> {
        self.iter().map(|e| e.map_scalars(f)).collect()
    }
    fn zip_map_scalars<U, T, F: FnMut(&Self::Scalar, &U) -> T>(
        &self,
        other: &Self::With<U>,
        f: &mut F,
    ) -> Self::With<T> {
        assert_eq!(
            self.len(),
            other.len(),
            "nabla::Differentiable::zip_map_scalars: Vecs of different lengths"
        );
        self.iter()
            .zip(other)
            .map(|(e, o)| e.zip_map_scalars(o, f))
            .collect()
    }
}

impl<E: Differentiable, const N: usize> Differentiable for [E; N] {
    type Scalar = E::Scalar;
    type With<T> = [E::With<T>; N];

    fn scalar_count(&self) -> usize {
        self.iter().map(Differentiable::scalar_count).sum()
    }
    fn for_each_scalar<F: FnMut(&Self::Scalar)>(&self, f: &mut F) {
        for e in self {
            e.for_each_scalar(f);
        }
    }
    fn map_scalars<T, F: FnMut(&Self::Scalar) -> T>(&self, f: &mut F) -> Self::With<T> {
        // `each_ref().map` visits the elements in order.
        self.each_ref().map(|e| e.map_scalars(f))
    }
    fn zip_map_scalars<U, T, F: FnMut(&Self::Scalar, &U) -> T>(
        &self,
        other: &Self::With<U>,
        f: &mut F,
    ) -> Self::With<T> {
        let mut others = other.iter();
        self.each_ref().map(|e| {
            let o = others.next().expect("arrays of one length");
            e.zip_map_scalars(o, f)
        })
    }
}

impl<E: Differentiable> Differentiable for Option<E> {
    type Scalar = E::Scalar;
    type With<T> = Option<E::With<T>>;

    fn scalar_count(&self) -> usize {
        self.as_ref().map_or(0, Differentiable::scalar_count)
    }
    fn for_each_scalar<F: FnMut(&Self::Scalar)>(&self, f: &mut F) {
        if let Some(e) = self {
            e.for_each_scalar(f);
        }
    }
    fn map_scalars<T, F: FnMut(&Self::Scalar) -> T>(&self, f: &mut F) -> Self::With<T> {
        self.as_ref().map(|e| e.map_scalars(f))
    }
    fn zip_map_scalars<U, T, F: FnMut(&Self::Scalar, &U) -> T>(
        &self,
        other: &Self::With<U>,
        f: &mut F,
    ) -> Self::With<T> {
        match (self, other) {
            (Some(e), Some(o)) => Some(e.zip_map_scalars(o, f)),
            (None, None) => None,
            _ => panic!("nabla::Differentiable::zip_map_scalars: `Some` against `None`"),
        }
    }
}

/// Tuples whose elements share one scalar type.
macro_rules! tuple {
    ($first:ident $($rest:ident)*; $($index:tt)*) => {
        impl<$first: Differentiable, $($rest: Differentiable<Scalar = $first::Scalar>),*>
            Differentiable for ($first, $($rest,)*)
        {
            type Scalar = $first::Scalar;
            type With<T> = ($first::With<T>, $($rest::With<T>,)*);

            fn scalar_count(&self) -> usize {
                0 $(+ self.$index.scalar_count())*
            }
            fn for_each_scalar<F: FnMut(&Self::Scalar)>(&self, f: &mut F) {
                $(self.$index.for_each_scalar(f);)*
            }
            fn map_scalars<T, F: FnMut(&Self::Scalar) -> T>(&self, f: &mut F) -> Self::With<T> {
                // A tuple expression evaluates its elements left to right.
                ($(self.$index.map_scalars(f),)*)
            }
            fn zip_map_scalars<U, T, F: FnMut(&Self::Scalar, &U) -> T>(
                &self,
                other: &Self::With<U>,
                f: &mut F,
            ) -> Self::With<T> {
                ($(self.$index.zip_map_scalars(&other.$index, f),)*)
            }
        }
    };
}

tuple!(A; 0);
tuple!(A B; 0 1);
tuple!(A B C; 0 1 2);
tuple!(A B C D; 0 1 2 3);
tuple!(A B C D E; 0 1 2 3 4);
tuple!(A B C D E G; 0 1 2 3 4 5);
tuple!(A B C D E G H; 0 1 2 3 4 5 6);
tuple!(A B C D E G H I; 0 1 2 3 4 5 6 7);
tuple!(A B C D E G H I J; 0 1 2 3 4 5 6 7 8);
tuple!(A B C D E G H I J K; 0 1 2 3 4 5 6 7 8 9);
tuple!(A B C D E G H I J K L; 0 1 2 3 4 5 6 7 8 9 10);
tuple!(A B C D E G H I J K L M; 0 1 2 3 4 5 6 7 8 9 10 11);

/// `FnOnce(&X) -> O`, under a name of its own.
///
/// The reverse-mode operators take `F: for<'t> RefFnOnce<P::With<Reverse<'t, S>>,
/// Reverse<'t, S>>` rather than `F: for<'t> FnOnce(&P::With<Reverse<'t, S>>) ->
/// Reverse<'t, S>`, which Rust rejects (E0582): there the lifetime `'t` of the result
/// appears among the arguments only inside the projection `P::With<…>`, which might
/// not mention it. As a trait's parameters both are inputs, so the bound is
/// accepted; every closure of the right type implements it, and the compiler still
/// infers the closure's argument type from it.
///
/// ```
/// use nabla::structured::RefFnOnce;
/// fn call<F: RefFnOnce<Vec<f64>, f64>>(f: F) -> f64 {
///     f(&vec![2.0])
/// }
/// assert_eq!(call(|v| v[0] * 3.0), 6.0);
/// ```
pub trait RefFnOnce<X: ?Sized, O>: FnOnce(&X) -> O {}
impl<X: ?Sized, O, F: FnOnce(&X) -> O> RefFnOnce<X, O> for F {}

/// `Fn(&X) -> O`, under a name of its own (see [`RefFnOnce`] for why).
///
/// ```
/// use nabla::structured::RefFn;
/// fn twice<F: RefFn<f64, f64>>(f: F) -> f64 {
///     f(&1.0) + f(&2.0)
/// }
/// assert_eq!(twice(|x| x * 3.0), 9.0);
/// ```
pub trait RefFn<X: ?Sized, O>: Fn(&X) -> O {}
impl<X: ?Sized, O, F: Fn(&X) -> O> RefFn<X, O> for F {}

/// `FnMut(&X, I) -> O`, under a name of its own (see [`RefFnOnce`] for why).
///
/// ```
/// use nabla::structured::RefFnMut;
/// fn sum<F: RefFnMut<f64, f64, f64>>(mut f: F) -> f64 {
///     f(&1.0, 2.0) + f(&1.0, 3.0)
/// }
/// assert_eq!(sum(|x, t| x * t), 5.0);
/// ```
pub trait RefFnMut<X: ?Sized, I, O>: FnMut(&X, I) -> O {}
impl<X: ?Sized, I, O, F: FnMut(&X, I) -> O> RefFnMut<X, I, O> for F {}

/// `x`'s structure holding the scalars of `inputs`, in order.
fn rebuild<P: Differentiable, T: Copy>(x: &P, inputs: &[T]) -> P::With<T> {
    let mut inputs = inputs.iter();
    x.map_scalars(&mut |_| *inputs.next().expect("one input per scalar"))
}

/// `flat`'s values in `x`'s structure: the result type `P` itself.
fn shaped<P, S>(x: &P, flat: &[S]) -> P
where
    S: Copy,
    P: Differentiable<Scalar = S, With<S> = P>,
{
    rebuild(x, flat)
}

/// Reverse mode: the value of a real-valued `f` at the structure `x` and its
/// gradient, a value of `x`'s type ([`crate::value_and_grad`] on structures).
///
/// ```
/// use nabla::{Scalar, structured::value_and_grad};
/// // f(a, [b, c]) = a·b·c
/// let (v, g) = value_and_grad(|(a, bc)| *a * bc[0] * bc[1], &(2.0, [3.0, 4.0]));
/// assert_eq!(v, 24.0);
/// assert_eq!(g, (12.0, [8.0, 6.0]));
/// ```
pub fn value_and_grad<P, S, F, R>(f: F, x: &P) -> (S, P)
where
    R: Real,
    S: Scalar<R>,
    P: Differentiable<Scalar = S, With<S> = P>,
    F: for<'t> RefFnOnce<P::With<Reverse<'t, S>>, Reverse<'t, S>>,
{
    let flat = x.flatten();
    let (value, gradient) = crate::value_and_grad(|inputs| f(&rebuild(x, inputs)), &flat);
    (value, shaped(x, &gradient))
}

/// Reverse mode: the gradient of a real-valued `f` at the structure `x`, a value of
/// `x`'s type ([`crate::grad`] on structures).
///
/// ```
/// use nabla::{Scalar, structured::grad};
/// // f(w, b) = Σ wᵢ² + 3b
/// let g = grad(|(w, b): &(Vec<_>, _)| w.iter().map(|&w| w * w).sum::<nabla::Reverse<f64>>() + *b * 3.0,
///              &(vec![1.0, 2.0], 5.0));
/// assert_eq!(g, (vec![2.0, 4.0], 3.0));
/// ```
pub fn grad<P, S, F, R>(f: F, x: &P) -> P
where
    R: Real,
    S: Scalar<R>,
    P: Differentiable<Scalar = S, With<S> = P>,
    F: for<'t> RefFnOnce<P::With<Reverse<'t, S>>, Reverse<'t, S>>,
{
    value_and_grad(f, x).1
}

/// Reverse mode, for a function that also returns auxiliary data (see
/// [`crate::value_and_grad_with_aux`]): `f` returns its value and something that
/// does not hold this trace's values; the gradient has `x`'s type.
///
/// ```
/// use nabla::{Scalar, structured::value_and_grad_with_aux};
/// let ((loss, residual), g) = value_and_grad_with_aux(
///     |&(a, b)| {
///         let r = a * 2.0 + b - 1.0;
///         (r * r, r.primal())
///     },
///     &(1.0, 1.0),
/// );
/// assert_eq!((loss, residual), (4.0, 2.0));
/// assert_eq!(g, (8.0, 4.0));
/// ```
pub fn value_and_grad_with_aux<P, S, A, F, R>(f: F, x: &P) -> ((S, A), P)
where
    R: Real,
    S: Scalar<R>,
    P: Differentiable<Scalar = S, With<S> = P>,
    F: for<'t> RefFnOnce<P::With<Reverse<'t, S>>, (Reverse<'t, S>, A)>,
{
    let flat = x.flatten();
    let (value_aux, gradient) =
        crate::value_and_grad_with_aux(|inputs| f(&rebuild(x, inputs)), &flat);
    (value_aux, shaped(x, &gradient))
}

/// Reverse mode: the value and gradient of a sum Σₜ f(x, t) over `terms`, one term's
/// trace at a time (see [`crate::value_and_grad_sum`]), at a structure `x`.
///
/// ```
/// use nabla::{Scalar, structured::value_and_grad_sum};
/// let points = [(0.0, 1.0), (1.0, 3.0)];
/// let (loss, g) = value_and_grad_sum(
///     |&(a, b), &(x, y)| {
///         let r = a * x + b - y;
///         r * r
///     },
///     &(1.0, 1.0),
///     &points,
/// );
/// assert_eq!(loss, 0.0 + 1.0);
/// assert_eq!(g, (-2.0, -2.0));
/// ```
pub fn value_and_grad_sum<P, S, F, I, R>(mut f: F, x: &P, terms: I) -> (S, P)
where
    R: Real,
    S: Scalar<R>,
    P: Differentiable<Scalar = S, With<S> = P>,
    I: IntoIterator,
    F: for<'t> RefFnMut<P::With<Reverse<'t, S>>, I::Item, Reverse<'t, S>>,
{
    let flat = x.flatten();
    let (value, gradient) =
        crate::value_and_grad_sum(|inputs, t| f(&rebuild(x, inputs), t), &flat, terms);
    (value, shaped(x, &gradient))
}

/// Forward mode: the gradient of a real-valued `f` at the structure `x`, one
/// evaluation of `f` on dual numbers per scalar (see [`crate::grad_forward`]).
///
/// ```
/// use nabla::{Scalar, structured::grad_forward};
/// let g = grad_forward(|&(a, b)| a * b.sin(), &(2.0, 0.0));
/// assert_eq!(g, (0.0, 2.0));
/// ```
pub fn grad_forward<P, S, F, R>(f: F, x: &P) -> P
where
    R: Real,
    S: Scalar<R>,
    P: Differentiable<Scalar = S, With<S> = P>,
    F: Fn(&P::With<Dual<S>>) -> Dual<S>,
{
    let flat = x.flatten();
    let gradient = crate::grad_forward(|inputs| f(&rebuild(x, inputs)), &flat);
    shaped(x, &gradient)
}

/// Forward mode: the value of `f` at the structure `x` and its directional
/// derivative along the tangent `dx` (of `x`'s type), in one evaluation of `f`
/// ([`crate::jvp`] on structures). `f` may return any structure over dual numbers —
/// a scalar, a tuple, a `Vec`, a derived struct — and the value and the tangent
/// come back in that structure over `S`.
///
/// ```
/// use nabla::{Scalar, structured::jvp};
/// // (a, b) ↦ (a·b, [sin a])
/// let (y, dy) = jvp(|&(a, b)| (a * b, [a.sin()]), &(2.0, 3.0), &(1.0, 0.0));
/// assert_eq!(y, (6.0, [2.0_f64.sin()]));
/// assert_eq!(dy, (3.0, [2.0_f64.cos()]));
/// ```
///
/// # Panics
/// If `dx` does not hold as many scalars as `x`.
pub fn jvp<P, S, Q, F, R>(f: F, x: &P, dx: &P) -> (Q::With<S>, Q::With<S>)
where
    R: Real,
    S: Scalar<R>,
    P: Differentiable<Scalar = S>,
    Q: Differentiable<Scalar = Dual<S>>,
    F: FnOnce(&P::With<Dual<S>>) -> Q,
{
    let (flat, tangent) = (x.flatten(), dx.flatten());
    assert_eq!(
        tangent.len(),
        flat.len(),
        "nabla::structured::jvp: the tangent `dx` holds {} scalars but the point `x` holds {}",
        tangent.len(),
        flat.len()
    );
    let mut inputs = flat.iter().zip(&tangent);
    let point = x.map_scalars(&mut |_| {
        let (&p, &t) = inputs.next().expect("one input per scalar");
        Dual::new(p, t)
    });
    let y = f(&point);
    (
        y.map_scalars(&mut |y| y.primal()),
        y.map_scalars(&mut |y| y.tangent()),
    )
}

/// Reverse mode: the value of `f` at the structure `x` — a `Vec` of outputs — and
/// its pullback, which maps an output cotangent to the input cotangent ctᵀJ in
/// `x`'s type ([`crate::vjp`] on structures).
///
/// The outputs are a `Vec`: an output structure would hold the trace's values, whose
/// type mentions the lifetime each call quantifies over, and Rust cannot infer a
/// structure from such a type. Flatten a structured output with
/// [`Differentiable::flatten`] inside `f`.
///
/// ```
/// use nabla::{Scalar, structured::vjp};
/// let (y, pullback) = vjp(|&(a, [b])| vec![a * b, a + b], &(2.0, [5.0]));
/// assert_eq!(y, vec![10.0, 7.0]);
/// assert_eq!(pullback.apply(&[1.0, 0.0]), (5.0, [2.0]));
/// assert_eq!(pullback.apply(&[0.0, 1.0]), (1.0, [1.0]));
/// ```
pub fn vjp<P, S, F, R>(f: F, x: &P) -> (Vec<S>, StructuredPullback<P>)
where
    R: Real,
    S: Scalar<R>,
    P: Differentiable<Scalar = S, With<S> = P>,
    F: for<'t> RefFnOnce<P::With<Reverse<'t, S>>, Vec<Reverse<'t, S>>>,
{
    let flat = x.flatten();
    let (values, pullback) = crate::vjp(|inputs| f(&rebuild(x, inputs)), &flat);
    let pullback = StructuredPullback {
        pullback,
        shape: shaped(x, &flat),
    };
    (values, pullback)
}

/// The backward half of [`vjp`] on structures: a [`Pullback`] that returns the
/// input cotangent in the input's structure.
///
/// ```
/// use nabla::{Scalar, structured::vjp};
/// let (_, pullback) = vjp(|v: &Vec<_>| vec![v[0] * v[1]], &vec![3.0, 4.0]);
/// assert_eq!(pullback.apply(&[2.0]), vec![8.0, 6.0]);
/// assert_eq!(pullback.flat().apply(&[2.0]), vec![8.0, 6.0]);
/// ```
#[derive(Debug)]
pub struct StructuredPullback<P: Differentiable> {
    pullback: Pullback<P::Scalar>,
    /// The point, whose structure the cotangents take.
    shape: P,
}

impl<R, S, P> StructuredPullback<P>
where
    R: Real,
    S: Scalar<R> + crate::Precision<Real = R>,
    P: Differentiable<Scalar = S, With<S> = P>,
{
    /// The input cotangent ctᵀJ, in the input's structure, for the output cotangent
    /// `ct` (one per output).
    ///
    /// # Panics
    /// If `cotangent` does not have one entry per output of the function.
    ///
    /// ```
    /// use nabla::{Scalar, structured::vjp};
    /// let (_, pullback) = vjp(|&(a, b)| vec![a * b], &(3.0, 4.0));
    /// assert_eq!(pullback.apply(&[1.0]), (4.0, 3.0));
    /// ```
    pub fn apply(&self, cotangent: &[S]) -> P {
        shaped(&self.shape, &self.pullback.apply(cotangent))
    }

    /// The pullback over the flattened input (its trace statistics, cotangents as
    /// a `Vec` in [`Differentiable::flatten`] order).
    ///
    /// ```
    /// use nabla::{Scalar, structured::vjp};
    /// let (_, pullback) = vjp(|&(a, b)| vec![a * b], &(3.0, 4.0));
    /// assert_eq!(pullback.flat().outputs(), 1);
    /// ```
    pub fn flat(&self) -> &Pullback<S> {
        &self.pullback
    }
}

/// The Hessian-vector product H·v of a real-valued `f` at the structure `x`, along
/// a direction `v` of `x`'s type, forward over reverse ([`crate::hvp`] on
/// structures); H·v has `x`'s type.
///
/// ```
/// use nabla::{Scalar, structured::hvp};
/// // f(x, y) = 2x² + 3xy + 4y²: H = [[4, 3], [3, 8]]
/// let hv = hvp(|&(x, y)| x * x * 2.0 + x * y * 3.0 + y * y * 4.0, &(3.0, 4.0), &(7.0, 8.0));
/// assert_eq!(hv, (52.0, 85.0));
/// ```
///
/// # Panics
/// If `v` does not hold as many scalars as `x`.
pub fn hvp<P, S, F, R>(f: F, x: &P, v: &P) -> P
where
    R: Real,
    S: Scalar<R>,
    P: Differentiable<Scalar = S, With<S> = P>,
    F: for<'t> RefFnOnce<P::With<Reverse<'t, Dual<S>>>, Reverse<'t, Dual<S>>>,
{
    let (flat, direction) = (x.flatten(), v.flatten());
    let hv = crate::hvp(|inputs| f(&rebuild(x, inputs)), &flat, &direction);
    shaped(x, &hv)
}

/// The Hessian of a real-valued `f` at the structure `x`, forward over reverse
/// ([`crate::hessian`] on structures), as a matrix over the scalars in
/// [`Differentiable::flatten`] order: `h[i][j]` is ∂²f/∂xᵢ∂xⱼ for the `i`-th and
/// `j`-th scalars of `x`.
///
/// A matrix, rather than a structure of structures, because that is what a Hessian
/// is used as — a linear map to solve with, factor or inspect — and because a row in
/// `x`'s structure is one call away: `x.unflatten(&h[i])`. (JAX's `hessian` on a
/// pytree returns the nested form; `x.map_scalars` over the rows builds it.)
///
/// ```
/// use nabla::{Scalar, structured::{Differentiable, hessian}};
/// let x = (3.0, [4.0]);
/// let h = hessian(|&(x, [y])| x * x * 2.0 + x * y * 3.0 + y * y * 4.0, &x);
/// assert_eq!(h, vec![vec![4.0, 3.0], vec![3.0, 8.0]]);
/// // The row of ∂/∂y, in x's structure:
/// assert_eq!(x.unflatten(&h[1]), (3.0, [8.0]));
/// ```
pub fn hessian<P, S, F, R>(f: F, x: &P) -> Vec<Vec<S>>
where
    R: Real,
    S: Scalar<R>,
    P: Differentiable<Scalar = S>,
    F: for<'t> RefFn<P::With<Reverse<'t, Dual<S>>>, Reverse<'t, Dual<S>>>,
{
    let flat = x.flatten();
    crate::hessian(|inputs| f(&rebuild(x, inputs)), &flat)
}

/// The rows of a flat Jacobian, each in `x`'s structure.
fn rows<P, S>(x: &P, jacobian: &[Vec<S>]) -> Vec<P::With<S>>
where
    S: Copy,
    P: Differentiable<Scalar = S>,
{
    jacobian.iter().map(|row| rebuild(x, row)).collect()
}

/// The Jacobian of `f` at the structure `x` by forward mode: one evaluation of `f`
/// on dual numbers per scalar of `x` ([`crate::jacobian_forward`] on structures).
///
/// `f` returns a `Vec` of outputs; the result has one value of `x`'s shape per
/// output, the gradient of that output (row `i` of the Jacobian, whose flattened
/// form is row `i` of [`crate::jacobian_forward`] on `x.flatten()`, bit for bit).
///
/// ```
/// use nabla::{Scalar, structured::jacobian_forward};
/// // (a, [b]) ↦ (a·b, sin a)
/// let j = jacobian_forward(|&(a, [b])| vec![a * b, a.sin()], &(2.0, [3.0]));
/// assert_eq!(j, vec![(3.0, [2.0]), (2.0_f64.cos(), [0.0])]);
/// ```
pub fn jacobian_forward<P, S, F, R>(f: F, x: &P) -> Vec<P::With<S>>
where
    R: Real,
    S: Scalar<R>,
    P: Differentiable<Scalar = S>,
    F: Fn(&P::With<Dual<S>>) -> Vec<Dual<S>>,
{
    let flat = x.flatten();
    rows(x, &crate::jacobian_forward(|v| f(&rebuild(x, v)), &flat))
}

/// The Jacobian of `f` at the structure `x` by reverse mode: one evaluation of `f`,
/// then one backward sweep per output ([`crate::jacobian_reverse`] on structures).
///
/// `f` returns a `Vec` of outputs (see [`vjp`] for why not a structure); the result
/// has one value of `x`'s shape per output, the gradient of that output.
///
/// ```
/// use nabla::{Scalar, structured::jacobian_reverse};
/// // (a, [b, c]) ↦ (a·b·c, a + c)
/// let j = jacobian_reverse(|(a, [b, c])| vec![*a * *b * *c, *a + *c], &(2.0, [3.0, 4.0]));
/// assert_eq!(j, vec![(12.0, [8.0, 6.0]), (1.0, [0.0, 1.0])]);
/// ```
pub fn jacobian_reverse<P, S, F, R>(f: F, x: &P) -> Vec<P::With<S>>
where
    R: Real,
    S: Scalar<R>,
    P: Differentiable<Scalar = S>,
    F: for<'t> RefFnOnce<P::With<Reverse<'t, S>>, Vec<Reverse<'t, S>>>,
{
    let flat = x.flatten();
    rows(x, &crate::jacobian_reverse(|v| f(&rebuild(x, v)), &flat))
}

/// A vector function of a structure, written once for every scalar type built on
/// the level `S` it is evaluated at, so that [`jacobian`](fn@jacobian) can run it in
/// whichever mode suits its shape ([`crate::VectorFunction`] on structures). `P` is
/// the structure over `S` (`Model<S>`); `eval` receives it over `T` (`Model<T>`).
/// Values the function captured from level `S` enter through [`Lift::lift`].
///
/// ```
/// use nabla::{Lift, Scalar, structured::VectorFunction};
/// /// (r, θ) ↦ (r cos θ, r sin θ), the same at every level.
/// struct Polar;
/// impl<S: Scalar> VectorFunction<(S, S), S> for Polar {
///     fn eval<T: Lift<S>>(&self, &(r, theta): &(T, T)) -> Vec<T> {
///         vec![r * theta.cos(), r * theta.sin()]
///     }
/// }
/// // Called directly, `P` must be named: `eval`'s argument, `P::With<T>`, does not
/// // determine it (operators such as `jacobian` read it off their `x`).
/// let y = VectorFunction::<(f64, f64), f64>::eval(&Polar, &(2.0, 0.0));
/// assert_eq!(y, vec![2.0, 0.0]);
/// ```
pub trait VectorFunction<P: Differentiable<Scalar = S>, S: Scalar<R>, R: Real = f64> {
    /// The function's value at `x`.
    fn eval<T: Lift<S, R>>(&self, x: &P::With<T>) -> Vec<T>;
}

/// The Jacobian of `f` at the structure `x`, one value of `x`'s shape per output
/// (the gradient of that output), by forward mode when `x` holds no more scalars
/// than `f` has outputs and by reverse mode otherwise, as [`crate::jacobian`](fn@crate::jacobian) —
/// whose result on `x.flatten()` it is, row by row, bit for bit.
///
/// For a closure, use the macro [`structured::jacobian!`](crate::structured::jacobian!).
///
/// ```
/// use nabla::{Lift, Scalar, grad, structured::{VectorFunction, jacobian}};
/// struct Polar;
/// impl<S: Scalar> VectorFunction<(S, S), S> for Polar {
///     fn eval<T: Lift<S>>(&self, &(r, theta): &(T, T)) -> Vec<T> {
///         vec![r * theta.cos(), r * theta.sin()]
///     }
/// }
/// let j = jacobian(&Polar, &(2.0, 0.0));
/// assert_eq!(j, vec![(1.0, 0.0), (0.0, 2.0)]);
///
/// // Nested, with a captured value of the enclosing level: d/da of ∂f₀/∂x for
/// // f(x, [y]) = (a·x·y, x + y) at (1, 2) is y = 2.
/// struct Scaled<S>(S);
/// impl<S: Scalar> VectorFunction<(S, [S; 1]), S> for Scaled<S> {
///     fn eval<T: Lift<S>>(&self, &(x, [y]): &(T, [T; 1])) -> Vec<T> {
///         vec![T::lift(self.0) * x * y, x + y]
///     }
/// }
/// let g = grad(|a| {
///     let one = a[0] / a[0];
///     jacobian(&Scaled(a[0]), &(one, [one * 2.0]))[0].0
/// }, &[3.0]);
/// assert_eq!(g, vec![2.0]);
/// ```
pub fn jacobian<P, S, F, R>(f: &F, x: &P) -> Vec<P::With<S>>
where
    R: Real,
    S: Scalar<R>,
    P: Differentiable<Scalar = S>,
    F: VectorFunction<P, S, R> + ?Sized,
{
    /// `f` on the flattened scalars of `x`.
    struct Flat<'a, P, F: ?Sized> {
        f: &'a F,
        x: &'a P,
    }
    impl<R, S, P, F> crate::VectorFunction<S, R> for Flat<'_, P, F>
    where
        R: Real,
        S: Scalar<R>,
        P: Differentiable<Scalar = S>,
        F: VectorFunction<P, S, R> + ?Sized,
    {
        fn eval<T: Lift<S, R>>(&self, v: &[T]) -> Vec<T> {
            self.f.eval(&rebuild(self.x, v))
        }
    }
    let flat = x.flatten();
    rows(x, &crate::jacobian(&Flat { f, x }, &flat))
}

/// The Jacobian of `f` at the structure `x` given as two closures, one per mode —
/// `forward` over dual numbers, `reverse` over reverse-mode values — by forward
/// mode when `x` holds no more scalars than `f` has outputs and by reverse mode
/// otherwise ([`crate::jacobian_with`] on structures): one value of `x`'s shape per
/// output.
///
/// The two closures must compute the same function;
/// [`structured::jacobian!`](crate::structured::jacobian!) writes one closure twice
/// so that they do. `forward` is evaluated once more, at constant inputs, to count
/// the outputs.
///
/// ```
/// use nabla::{Scalar, structured::jacobian_with};
/// let j = jacobian_with(
///     |&(a, [b])| vec![a * b, a.sin()],
///     |&(a, [b])| vec![a * b, a.sin()],
///     &(2.0, [3.0]),
/// );
/// assert_eq!(j, vec![(3.0, [2.0]), (2.0_f64.cos(), [0.0])]);
/// ```
pub fn jacobian_with<P, S, F, G, R>(forward: F, reverse: G, x: &P) -> Vec<P::With<S>>
where
    R: Real,
    S: Scalar<R>,
    P: Differentiable<Scalar = S>,
    F: Fn(&P::With<Dual<S>>) -> Vec<Dual<S>>,
    G: for<'t> RefFnOnce<P::With<Reverse<'t, S>>, Vec<Reverse<'t, S>>>,
{
    let flat = x.flatten();
    rows(
        x,
        &crate::jacobian_with(
            |v| forward(&rebuild(x, v)),
            |v| reverse(&rebuild(x, v)),
            &flat,
        ),
    )
}

#[doc(inline)]
pub use crate::__structured_jacobian as jacobian;

/// The Jacobian of a closure at a structure, by whichever mode suits its shape:
/// `structured::jacobian!(|p| …, &x)`, one value of `x`'s shape per output
/// ([`jacobian!`](crate::jacobian!) on structures).
///
/// The macro writes the closure twice, and each copy is type-checked at its own
/// mode's scalar type ([`jacobian_with`]); values captured from an enclosing
/// differentiation enter through [`lift`](crate::lift). The argument must be a
/// closure expression.
///
/// ```
/// use nabla::{Scalar, derivative, lift, structured};
/// let j = structured::jacobian!(|&(r, [theta])| vec![r * theta.cos(), r * theta.sin()],
///                               &(2.0, [0.0]));
/// assert_eq!(j, vec![(1.0, [0.0]), (0.0, [2.0])]);
///
/// // Nested: d/da of ∂f₀/∂x for f(x, y) = (a·x·y, x + y) at (1, 2) is y = 2.
/// let d = derivative(|a| {
///     let one = a / a;
///     structured::jacobian!(|&(x, y)| vec![lift(a) * x * y, x + y], &(one, one * 2.0))[0].0
/// }, 3.0);
/// assert_eq!(d, 2.0);
/// ```
///
/// (Exported at the crate root as `__structured_jacobian` only because
/// `macro_rules!` macros are; call it by its name in `structured`.)
#[doc(hidden)]
#[macro_export]
macro_rules! __structured_jacobian {
    ($f:expr, $x:expr $(,)?) => {
        $crate::structured::jacobian_with($f, $f, $x)
    };
}
