//! Native code for nabla programs: the typed IR
//! ([`nabla_lang::core::typed`]) compiled with Cranelift and run in process.
//!
//! This is the one crate of the workspace that may use `unsafe`: calling
//! generated code and reading the memory it returns. Every such block says
//! why it is sound.
//!
//! ```
//! use nabla_lang::driver::Session;
//! use nabla_native::{Native, Options};
//! // Compile and run on a thread with a stack budget, as `nabla run` does.
//! let printed = nabla_lang::stack::run_with_stack(|| {
//!     let mut s = Session::new();
//!     s.load("demo.nabla", "def sq x = x * x\ndef main = sq 3.0").unwrap();
//!     let (prog, entry) = s.typed_program("main").unwrap();
//!     let native = Native::compile(&prog, entry, &Options::default()).unwrap();
//!     nabla_lang::pretty::print_value(&native.run().unwrap())
//! });
//! assert_eq!(printed.as_deref(), Some("9.0"));
//! ```

mod codegen;
mod layout;
mod runtime;

use cranelift_codegen::settings::{self, Configurable};
use cranelift_jit::{JITBuilder, JITModule};
use nabla_lang::core::lower_typed::{Entry, Unsupported};
use nabla_lang::core::typed::Program;
use nabla_lang::eval::{Limits, RuntimeError, Value};
use nabla_lang::syntax::span::Span;
use nabla_lang::types::Type;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// How to compile.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// The evaluation limits (a call limit makes every call count).
    pub limits: Limits,
    /// Keep the Cranelift IR of every function (see [`Native::ir`]).
    pub keep_ir: bool,
}

/// A compiled program, ready to evaluate its entry any number of times.
pub struct Native {
    /// Owns the generated code (freed when dropped).
    module: Option<JITModule>,
    entry: *const u8,
    release: *const u8,
    ty: Type,
    spans: Vec<Span>,
    global_names: Vec<String>,
    global_area: usize,
    limits: Limits,
    ir: Vec<(String, String)>,
    /// How long compiling took.
    pub compile_time: Duration,
}

impl Native {
    /// Compiles what `entry` needs of `prog`, or says which construct native
    /// code does not handle yet.
    pub fn compile(prog: &Program, entry: Entry, options: &Options) -> Result<Native, Unsupported> {
        let start = Instant::now();
        let g = match entry {
            Entry::Global(g) => g,
            Entry::Fun(f) => {
                return Err(Unsupported {
                    what: "a `main` that takes arguments".into(),
                    span: prog.fun(f).span,
                });
            }
        };
        let ty = prog.global(g).ty.clone();
        if layout::has_function(&ty) {
            return Err(Unsupported {
                what: "a result that contains a function".into(),
                span: prog.global(g).span,
            });
        }
        let module = jit_module()?;
        let mut cg = codegen::Codegen::new(
            prog,
            module,
            options.limits.max_calls.is_some(),
            options.keep_ir,
        );
        let (entry_id, release_id) = cg.host_functions(g)?;
        cg.define_all()?;
        let global_area = cg.global_area();
        let spans = std::mem::take(&mut cg.spans);
        let ir = cg.dumps.take().unwrap_or_default();
        let mut module = cg.module;
        module.finalize_definitions().map_err(|e| Unsupported {
            what: format!("internal: finalizing: {e}"),
            span: Span::default(),
        })?;
        let entry = module.get_finalized_function(entry_id);
        let release = module.get_finalized_function(release_id);
        Ok(Native {
            module: Some(module),
            entry,
            release,
            ty,
            spans,
            global_names: prog.globals.iter().map(|g| g.name.clone()).collect(),
            global_area,
            limits: options.limits,
            ir,
            compile_time: start.elapsed(),
        })
    }

    /// The Cranelift IR of every generated function, `(name, text)`, if
    /// [`Options::keep_ir`] was set.
    pub fn ir(&self) -> &[(String, String)] {
        &self.ir
    }

    /// Evaluates the entry afresh (top-level values are evaluated again)
    /// and returns its value. Run it on a thread with a stack budget
    /// ([`nabla_lang::stack::run_with_stack`]): deeper recursion than the
    /// budget is the error "stack depth exceeded".
    pub fn run(&self) -> Result<Value, RuntimeError> {
        let mut globals = vec![0u64; self.global_area.max(1)];
        let mut ctx = runtime::Ctx {
            failed: 0,
            stack_limit: nabla_lang::stack::Guard::for_evaluation().lowest() as u64,
            calls_left: self
                .limits
                .max_calls
                .map_or(i64::MAX, |n| n.min(i64::MAX as u64) as i64),
            globals: globals.as_mut_ptr(),
            max_vector_len: self.limits.max_vector_len.min(i64::MAX as usize) as i64,
            error: None,
        };
        let mut out = vec![0u64; layout::width(&self.ty).max(1)];
        // SAFETY: `entry` is the finalized code of the `entry` function, of
        // signature `extern "C" fn(*mut Ctx, *mut u64)` (`Codegen::host_sig`);
        // the module that owns it lives as long as `self`. `ctx` and `out`
        // outlive the call, `out` has one slot per scalar of the result and
        // `globals` one per global slot (`Codegen::global_area`).
        let entry: extern "C" fn(*mut runtime::Ctx, *mut u64) =
            unsafe { std::mem::transmute(self.entry) };
        entry(&mut ctx, out.as_mut_ptr());
        let result = match ctx.error {
            Some(e) => Err(RuntimeError {
                message: e.message(&self.global_names),
                span: self.spans.get(e.span as usize).copied().unwrap_or_default(),
            }),
            // SAFETY: no error, so `out` holds the entry's value as laid out
            // by `layout`, its vectors alive (owned by the globals).
            None => Ok(unsafe { read_value(&self.ty, &out, &mut 0) }),
        };
        // SAFETY: as for `entry`, of signature `extern "C" fn(*mut Ctx)`;
        // after an error, globals still being evaluated are not `done` and
        // are not touched.
        let release: extern "C" fn(*mut runtime::Ctx) =
            unsafe { std::mem::transmute(self.release) };
        ctx.failed = 0;
        release(&mut ctx);
        result
    }
}

impl Drop for Native {
    fn drop(&mut self) {
        if let Some(m) = self.module.take() {
            // SAFETY: no generated function runs (`run` borrows `self`), and
            // no pointer into the code outlives `self`.
            unsafe { m.free_memory() };
        }
    }
}

/// A JIT module for this machine, with the runtime's symbols.
fn jit_module() -> Result<JITModule, Unsupported> {
    let fail = |what: String| Unsupported {
        what: format!("internal: {what}"),
        span: Span::default(),
    };
    let mut flags = settings::builder();
    flags
        .set("opt_level", "speed")
        .map_err(|e| fail(e.to_string()))?;
    flags
        .set(
            "enable_verifier",
            if cfg!(debug_assertions) {
                "true"
            } else {
                "false"
            },
        )
        .map_err(|e| fail(e.to_string()))?;
    // Cranelift's tail calls need frame pointers.
    flags
        .set("preserve_frame_pointers", "true")
        .map_err(|e| fail(e.to_string()))?;
    // Multiple results come back through a return area when registers run out.
    flags
        .set("enable_multi_ret_implicit_sret", "true")
        .map_err(|e| fail(e.to_string()))?;
    let isa = cranelift_native::builder()
        .map_err(|e| fail(e.to_string()))?
        .finish(settings::Flags::new(flags))
        .map_err(|e| fail(e.to_string()))?;
    let mut builder = JITBuilder::with_isa(isa, cranelift_module::default_libcall_names());
    for (name, ptr) in runtime::symbols() {
        builder.symbol(name, ptr);
    }
    Ok(JITModule::new(builder))
}

/// The value of type `ty` whose scalars start at `slots[*at]`.
///
/// # Safety
/// The slots must hold a value of `ty` laid out as `layout` says, with
/// every vector it points to alive.
unsafe fn read_value(ty: &Type, slots: &[u64], at: &mut usize) -> Value {
    let mut next = || {
        let s = slots.get(*at).copied().unwrap_or(0);
        *at += 1;
        s
    };
    match ty {
        Type::Real => Value::Real(f64::from_bits(next())),
        Type::Int => Value::Int(next() as i64),
        Type::Bool => Value::Bool(next() & 0xff != 0),
        Type::Unit | Type::Var(_) | Type::Con(..) | Type::Fun(..) => Value::Unit,
        Type::Tuple(ts) => {
            // SAFETY: the caller's guarantee, component by component.
            let items = ts
                .iter()
                .map(|t| unsafe { read_value(t, slots, at) })
                .collect();
            Value::Tuple(Rc::new(items))
        }
        Type::Sum(a, b) => {
            let right = next() & 0xff != 0;
            // SAFETY: as above; the side not taken is all zeros.
            let (x, y) = unsafe { (read_value(a, slots, at), read_value(b, slots, at)) };
            if right {
                Value::Inr(Rc::new(y))
            } else {
                Value::Inl(Rc::new(x))
            }
        }
        Type::Vec(elem) => {
            let p = next() as *const u64;
            // SAFETY: a live vector: `[count, length, slots…]`, length
            // elements of `width(elem)` slots each.
            let len = unsafe { *p.add(1) } as usize;
            let w = layout::width(elem);
            // SAFETY: as above.
            let data = unsafe { std::slice::from_raw_parts(p.add(2), len * w) };
            if **elem == Type::Real {
                return Value::reals(data.iter().map(|&b| f64::from_bits(b)).collect());
            }
            let mut items = Vec::with_capacity(len);
            let mut k = 0;
            for _ in 0..len {
                // SAFETY: each element is a value of `elem`.
                items.push(unsafe { read_value(elem, data, &mut k) });
            }
            Value::values(items)
        }
    }
}
