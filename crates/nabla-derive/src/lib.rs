//! `#[derive(Differentiable)]` for [nabla](https://docs.rs/nabla): implements
//! `nabla::structured::Differentiable` for a struct of parameters generic over its
//! scalar type, so that nabla's structured operators differentiate with respect to
//! it. Use it through nabla's feature `derive`, as `nabla::Differentiable`.
//!
//! ```
//! use nabla::{Scalar, structured::grad};
//!
//! #[derive(Debug, PartialEq, nabla::Differentiable)]
//! struct Affine<S> {
//!     weights: Vec<S>,
//!     bias: S,
//! }
//!
//! fn output<S: Scalar>(a: &Affine<S>) -> S {
//!     a.weights.iter().zip([1.0, 2.0]).map(|(&w, x)| w * x).sum::<S>() + a.bias
//! }
//!
//! let a = Affine { weights: vec![0.5, -1.0], bias: 3.0 };
//! assert_eq!(grad(|a| output(a), &a), Affine { weights: vec![1.0, 2.0], bias: 1.0 });
//! ```

use proc_macro2::{TokenStream, TokenTree};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, GenericParam, Ident, Index, Member, Type, WherePredicate};

/// Implements `nabla::structured::Differentiable` for a struct generic over its
/// scalar type.
///
/// The scalar type is the struct's first type parameter, or the one named by
/// `#[nabla(scalar = T)]` on the struct. Every field holds scalars of it — a
/// scalar, a derived struct, a tuple, array, `Vec` or `Option` of those — except
/// the fields marked `#[nabla(skip)]`, which hold none: they are cloned into rebuilt
/// values, so their types must be `Clone` and must not mention the scalar type.
/// Scalars are visited in field order. Other type parameters may appear in skipped
/// fields only. The scalar parameter must not be bounded in the struct's definition.
///
/// ```
/// use nabla::structured::Differentiable;
///
/// #[derive(Clone, Debug, PartialEq, nabla::Differentiable)]
/// struct Layer<S> {
///     weights: Vec<Vec<S>>,
///     biases: Vec<S>,
/// }
///
/// #[derive(Clone, Debug, PartialEq, nabla::Differentiable)]
/// #[nabla(scalar = S)]
/// struct Network<'a, Tag, S>(
///     Vec<Layer<S>>,
///     #[nabla(skip)] &'a str,
///     #[nabla(skip)] Tag,
/// );
///
/// let net = Network(vec![Layer { weights: vec![vec![1.0, 2.0]], biases: vec![3.0] }], "net", 7);
/// assert_eq!(net.flatten(), vec![1.0, 2.0, 3.0]);
/// let zeros: Network<i32, f32> = net.map_scalars(&mut |_| 0.0_f32);
/// assert_eq!(zeros.1, "net");
/// ```
///
/// # Errors
/// Each is a compile error pointing at the offending token: an enum or a union
///
/// ```compile_fail
/// #[derive(nabla::Differentiable)]
/// enum Choice<S> { One(S), Two(S, S) }
/// ```
///
/// a struct that is not generic over its scalar type
///
/// ```compile_fail
/// #[derive(nabla::Differentiable)]
/// struct Fixed { weight: f64 }
/// ```
///
/// a bounded scalar parameter, a skipped field that mentions the scalar type, an
/// unknown `nabla` attribute.
#[proc_macro_derive(Differentiable, attributes(nabla))]
pub fn derive_differentiable(input: proc_macro::TokenStream) -> proc_macro::TokenStream {
    match syn::parse(input).and_then(|input| expand(&input)) {
        Ok(tokens) => tokens.into(),
        Err(error) => error.into_compile_error().into(),
    }
}

/// The `Differentiable` implementation for `input`, or the error to report.
fn expand(input: &DeriveInput) -> syn::Result<TokenStream> {
    let name = &input.ident;
    let fields = match &input.data {
        Data::Struct(data) => &data.fields,
        Data::Enum(data) => {
            return Err(syn::Error::new(
                data.enum_token.span,
                "`Differentiable` cannot be derived for an enum: its scalars would depend on \
                 the variant, so values of one type could have different shapes; use a struct \
                 (an `Option` field for a part that may be absent)",
            ));
        }
        Data::Union(data) => {
            return Err(syn::Error::new(
                data.union_token.span,
                "`Differentiable` cannot be derived for a union",
            ));
        }
    };
    let scalar = scalar_parameter(input)?;

    // The struct over another scalar type `__T`: the scalar parameter replaced.
    let target = format_ident!("__NablaT");
    let with_args = input.generics.params.iter().map(|param| match param {
        GenericParam::Type(t) if t.ident == scalar => quote!(#target),
        GenericParam::Type(t) => t.ident.to_token_stream(),
        GenericParam::Lifetime(l) => l.lifetime.to_token_stream(),
        GenericParam::Const(c) => c.ident.to_token_stream(),
    });
    let with = quote!(#name<#(#with_args),*>);

    let mut differentiable = Vec::new();
    let mut skipped = Vec::new();
    for (index, field) in fields.iter().enumerate() {
        let member = match &field.ident {
            Some(ident) => Member::Named(ident.clone()),
            None => Member::Unnamed(Index {
                index: index as u32,
                span: field.ty.span(),
            }),
        };
        if is_skipped(field)? {
            if mentions(&field.ty, &scalar) {
                return Err(syn::Error::new(
                    field.ty.span(),
                    format!(
                        "a `#[nabla(skip)]` field cannot mention the scalar type `{scalar}`: it \
                         is copied unchanged into the struct rebuilt over another scalar type"
                    ),
                ));
            }
            skipped.push((member, &field.ty));
        } else {
            differentiable.push((member, &field.ty));
        }
    }

    let krate = quote!(::nabla::structured);
    let trait_ = quote!(#krate::Differentiable);
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let mut predicates: Vec<WherePredicate> = where_clause
        .map(|w| w.predicates.iter().cloned().collect())
        .unwrap_or_default();
    predicates.push(syn::parse_quote!(#scalar: ::nabla::Precision));
    for (_, ty) in &skipped {
        predicates.push(syn::parse_quote!(#ty: ::core::clone::Clone));
    }

    let count = differentiable.iter().map(
        |(member, ty)| quote_spanned!(ty.span()=> + <#ty as #trait_>::scalar_count(&self.#member)),
    );
    let visit = differentiable.iter().map(|(member, ty)| {
        quote_spanned!(ty.span()=> <#ty as #trait_>::for_each_scalar(&self.#member, __nabla_f);)
    });
    let cloned = skipped
        .iter()
        .map(|(member, _)| quote!(#member: ::core::clone::Clone::clone(&self.#member)))
        .collect::<Vec<_>>();
    let mapped = differentiable.iter().map(|(member, ty)| {
        quote_spanned!(ty.span()=> #member: <#ty as #trait_>::map_scalars(&self.#member, __nabla_f))
    });
    let zipped = differentiable.iter().map(|(member, ty)| {
        quote_spanned!(ty.span()=>
            #member: <#ty as #trait_>::zip_map_scalars(&self.#member, &__nabla_other.#member, __nabla_f))
    });

    Ok(quote! {
        #[automatically_derived]
        impl #impl_generics #trait_ for #name #ty_generics where #(#predicates,)* {
            type Scalar = #scalar;
            type With<#target> = #with;

            fn scalar_count(&self) -> usize {
                0 #(#count)*
            }

            fn for_each_scalar<__NablaF: ::core::ops::FnMut(&#scalar)>(
                &self,
                __nabla_f: &mut __NablaF,
            ) {
                #(#visit)*
            }

            fn map_scalars<#target, __NablaF: ::core::ops::FnMut(&#scalar) -> #target>(
                &self,
                __nabla_f: &mut __NablaF,
            ) -> #with {
                #name { #(#mapped,)* #(#cloned,)* }
            }

            fn zip_map_scalars<__NablaU, #target, __NablaF>(
                &self,
                __nabla_other: &<Self as #trait_>::With<__NablaU>,
                __nabla_f: &mut __NablaF,
            ) -> #with
            where
                __NablaF: ::core::ops::FnMut(&#scalar, &__NablaU) -> #target,
            {
                #name { #(#zipped,)* #(#cloned,)* }
            }
        }
    })
}

/// The scalar type parameter: named by `#[nabla(scalar = S)]`, or the first type
/// parameter. It must not be bounded where the struct is defined.
fn scalar_parameter(input: &DeriveInput) -> syn::Result<Ident> {
    let mut named = None;
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("nabla")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("scalar") {
                named = Some(meta.value()?.parse::<Ident>()?);
                Ok(())
            } else {
                Err(meta.error("unknown `nabla` attribute on a struct; expected `scalar = S`"))
            }
        })?;
    }
    let mut types = input.generics.type_params();
    let param = match &named {
        Some(ident) => types.find(|t| t.ident == *ident).ok_or_else(|| {
            syn::Error::new(
                ident.span(),
                format!("`{ident}` is not a type parameter of `{}`", input.ident),
            )
        })?,
        None => types.next().ok_or_else(|| {
            let span = if input.generics.params.is_empty() {
                input.ident.span()
            } else {
                input.generics.span()
            };
            syn::Error::new(
                span,
                format!(
                    "`Differentiable` needs the struct to be generic over its scalar type, as \
                     in `struct {}<S> {{ weight: S, … }}`, so that it can be rebuilt over \
                     nabla's scalar types (`{0}<f64>`, `{0}<Reverse<'_, f64>>`, …)",
                    input.ident
                ),
            )
        })?,
    };
    let bounded_in_where = input.generics.where_clause.iter().any(|w| {
        w.predicates.iter().any(|p| match p {
            WherePredicate::Type(t) => mentions(&t.bounded_ty, &param.ident),
            _ => false,
        })
    });
    if !param.bounds.is_empty() || bounded_in_where {
        return Err(syn::Error::new(
            param.ident.span(),
            format!(
                "the scalar type parameter `{}` must not be bounded in the struct's \
                 definition: `Differentiable` rebuilds the struct over every type (for \
                 example the gradient's); put the bounds (`{0}: Scalar`) on the functions \
                 that use it",
                param.ident
            ),
        ));
    }
    Ok(param.ident.clone())
}

/// Whether the field is marked `#[nabla(skip)]`.
fn is_skipped(field: &syn::Field) -> syn::Result<bool> {
    let mut skip = false;
    for attr in field.attrs.iter().filter(|a| a.path().is_ident("nabla")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("skip") {
                skip = true;
                Ok(())
            } else {
                Err(meta.error("unknown `nabla` attribute on a field; expected `skip`"))
            }
        })?;
    }
    Ok(skip)
}

/// Whether the identifier `ident` occurs in the type `ty`.
fn mentions(ty: &Type, ident: &Ident) -> bool {
    fn walk(tokens: TokenStream, ident: &Ident) -> bool {
        tokens.into_iter().any(|tree| match tree {
            TokenTree::Ident(i) => i == *ident,
            TokenTree::Group(g) => walk(g.stream(), ident),
            _ => false,
        })
    }
    walk(ty.to_token_stream(), ident)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(source: &str) -> String {
        let input: DeriveInput = syn::parse_str(source).expect("valid Rust");
        expand(&input).expect_err("should be rejected").to_string()
    }

    fn expansion_of(source: &str) -> String {
        let input: DeriveInput = syn::parse_str(source).expect("valid Rust");
        expand(&input).expect("should be accepted").to_string()
    }

    #[test]
    fn rejects_enums_and_unions() {
        assert!(error_of("enum E<S> { A(S), B }").contains("cannot be derived for an enum"));
        assert!(error_of("union U<S> { a: S }").contains("cannot be derived for a union"));
    }

    #[test]
    fn rejects_a_struct_without_a_scalar_parameter() {
        let e = error_of("struct Model { w: f64 }");
        assert!(e.contains("generic over its scalar type"), "{e}");
        assert!(e.contains("Model<S>"), "{e}");
        let e = error_of("struct Model<'a, const N: usize> { w: &'a [f64; N] }");
        assert!(e.contains("generic over its scalar type"), "{e}");
    }

    #[test]
    fn rejects_a_bounded_scalar_parameter() {
        let e = error_of("struct Model<S: Scalar> { w: S }");
        assert!(e.contains("must not be bounded"), "{e}");
        let e = error_of("struct Model<S> where S: Copy { w: S }");
        assert!(e.contains("must not be bounded"), "{e}");
    }

    #[test]
    fn rejects_a_skipped_field_of_the_scalar_type() {
        let e = error_of("struct Model<S> { w: S, #[nabla(skip)] cache: Vec<S> }");
        assert!(e.contains("cannot mention the scalar type `S`"), "{e}");
    }

    #[test]
    fn rejects_unknown_attributes_and_parameters() {
        assert!(error_of("struct M<S> { #[nabla(frozen)] w: S }").contains("expected `skip`"));
        assert!(error_of("#[nabla(scalr = S)] struct M<S> { w: S }").contains("scalar = S"));
        assert!(
            error_of("#[nabla(scalar = T)] struct M<S> { w: S }")
                .contains("`T` is not a type parameter of `M`")
        );
    }

    #[test]
    fn rebuilds_over_the_named_scalar_parameter() {
        let out = expansion_of(
            "#[nabla(scalar = S)] struct M<'a, X, S, const N: usize>(#[nabla(skip)] &'a X, [S; N]);",
        );
        let out = out.replace(' ', "");
        assert!(
            out.contains("typeWith<__NablaT>=M<'a,X,__NablaT,N>;"),
            "{out}"
        );
        assert!(out.contains("typeScalar=S;"), "{out}");
        assert!(out.contains("&'aX:::core::clone::Clone"), "{out}");
        // The skipped field is cloned, the other one mapped.
        assert!(
            out.contains("0:::core::clone::Clone::clone(&self.0)"),
            "{out}"
        );
        assert!(
            out.contains("1:<[S;N]as::nabla::structured::Differentiable>::map_scalars(&self.1"),
            "{out}"
        );
    }
}
