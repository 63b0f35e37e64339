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
mod marshal;
mod runtime;
mod small_vecs;
mod untrusted;

pub use untrusted::run_untrusted_both;

use cranelift_codegen::settings::{self, Configurable};
use cranelift_jit::{ArenaMemoryProvider, JITBuilder, JITModule};
use nabla_lang::core::lower_typed::{Entry, Unsupported};
use nabla_lang::core::typed::{FunId, Program};
use nabla_lang::eval::{Limits, RuntimeError, Value};
use nabla_lang::syntax::span::Span;
use nabla_lang::types::Type;
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
    params: Vec<Type>,
    ty: Type,
    spans: Vec<Span>,
    /// The `trace` sites generated code points to (kept with the code).
    #[allow(clippy::vec_box)] // each box's address is baked into the code
    _traces: Vec<Box<runtime::TraceSite>>,
    /// The vectors of constant literals the code points to (freed after
    /// the code, as fields are dropped after `drop`).
    _constants: marshal::Objects,
    global_names: Vec<String>,
    global_area: usize,
    limits: Limits,
    ir: Vec<(String, String)>,
    /// How long compiling took.
    pub compile_time: Duration,
}

impl Native {
    /// Compiles what `entry` needs of `prog`, or says which construct native
    /// code does not handle yet. The entry is a value ([`Native::run`]) or a
    /// function the host applies to values ([`Native::call`]); neither its
    /// parameters nor its result may contain functions.
    pub fn compile(prog: &Program, entry: Entry, options: &Options) -> Result<Native, Unsupported> {
        let start = Instant::now();
        let (params, ty, span) = match entry {
            Entry::Global(g) => (Vec::new(), prog.global(g).ty.clone(), prog.global(g).span),
            Entry::Fun(f) => {
                let fun = prog.fun(f);
                let params = fun.params.iter().map(|(_, t)| t.clone()).collect();
                (params, fun.ret.clone(), fun.span)
            }
        };
        if params.iter().any(layout::has_function) {
            return Err(Unsupported {
                what: "an entry that takes a function".into(),
                span,
            });
        }
        if layout::has_function(&ty) {
            return Err(Unsupported {
                what: "a result that contains a function".into(),
                span,
            });
        }
        let mapped = codegen::mapped_functions(prog);
        let small_vecs::Rewritten {
            prog,
            entry,
            origins,
        } = small_vecs::rewrite(prog, entry, options.limits.max_vector_len);
        let prog = &prog;
        // Every copy of a function given to `map` is an element function.
        let elements = (0..prog.funs.len() as u32)
            .map(FunId)
            .filter(|f| mapped.contains(&origins[f.0 as usize]))
            .collect();
        let module = jit_module()?;
        let mut cg = codegen::Codegen::new(
            prog,
            elements,
            module,
            options.limits.max_calls.is_some(),
            options.keep_ir,
        );
        let (entry_id, release_id) = cg.host_functions(entry)?;
        cg.define_all()?;
        let global_area = cg.global_area();
        let spans = std::mem::take(&mut cg.spans);
        let traces = std::mem::take(&mut cg.traces);
        let constants = std::mem::take(&mut cg.constants);
        let ir = cg.dumps.take().unwrap_or_default();
        let mut module = cg.module;
        module.finalize_definitions().map_err(|e| Unsupported {
            what: format!("internal: finalizing: {e}"),
            span: Span::default(),
        })?;
        let entry = module.get_finalized_function(entry_id);
        let release = module.get_finalized_function(release_id);
        if std::env::var_os("NABLA_PERF_MAP").is_some() {
            write_perf_map(&module, &cg.sizes);
        }
        Ok(Native {
            module: Some(module),
            entry,
            release,
            params,
            ty,
            spans,
            _traces: traces,
            _constants: constants,
            global_names: prog.globals.iter().map(|g| g.name.clone()).collect(),
            global_area,
            limits: options.limits,
            ir,
            compile_time: start.elapsed(),
        })
    }

    /// Compiles `main` for `nabla run`: as [`Native::compile`], but a `main`
    /// that takes arguments is refused (there is nothing to pass it).
    pub fn compile_main(
        prog: &Program,
        entry: Entry,
        options: &Options,
    ) -> Result<Native, Unsupported> {
        if let Entry::Fun(f) = entry {
            return Err(Unsupported {
                what: "a `main` that takes arguments".into(),
                span: prog.fun(f).span,
            });
        }
        Native::compile(prog, entry, options)
    }

    /// The types of the entry's parameters, one per argument
    /// [`Native::call`] takes (none for a value).
    pub fn params(&self) -> &[Type] {
        &self.params
    }

    /// The type of the entry's value or result.
    pub fn result_type(&self) -> &Type {
        &self.ty
    }

    /// The Cranelift IR of every generated function, `(name, text)`, if
    /// [`Options::keep_ir`] was set.
    pub fn ir(&self) -> &[(String, String)] {
        &self.ir
    }

    /// Evaluates an entry that is a value afresh (top-level values are
    /// evaluated again) and returns it: [`Native::call`] with no arguments.
    pub fn run(&self) -> Result<Value, RuntimeError> {
        self.call(&[])
    }

    /// Applies the entry function to `args` (one per parameter, of the
    /// types [`Native::params`] gives: the entry's type after defaulting —
    /// annotate a numeric-generic entry to take Reals; none for a value),
    /// evaluating
    /// top-level values afresh, and returns the result. Run it on a thread
    /// with a stack budget ([`nabla_lang::stack::run_with_stack`]): deeper
    /// recursion than the budget is the error "stack depth exceeded".
    ///
    /// ```
    /// use nabla_lang::driver::Session;
    /// use nabla_lang::eval::Value;
    /// use nabla_native::{Native, Options};
    /// let total = nabla_lang::stack::run_with_stack(|| {
    ///     let mut s = Session::new();
    ///     s.load("demo.nabla", "def total (xs : Vec Real) scale = scale * sum xs").unwrap();
    ///     let (prog, entry) = s.typed_program("total").unwrap();
    ///     let native = Native::compile(&prog, entry, &Options::default()).unwrap();
    ///     let xs = Value::reals(vec![1.0, 2.0, 3.5]);
    ///     match native.call(&[xs, Value::Real(2.0)]).unwrap() {
    ///         Value::Real(x) => x,
    ///         other => panic!("{other:?}"),
    ///     }
    /// });
    /// assert_eq!(total, Some(13.0));
    /// ```
    pub fn call(&self, args: &[Value]) -> Result<Value, RuntimeError> {
        self.call_with(&self.args(args)?)
    }

    /// Converts `args` (one per parameter, of the types [`Native::params`]
    /// gives) to native code's representation once, for any number of
    /// [`Native::call_with`]s: the host keeps its data in that form, as a
    /// JAX user keeps arrays on the device.
    pub fn args(&self, args: &[Value]) -> Result<Args, RuntimeError> {
        if args.len() != self.params.len() {
            return Err(RuntimeError {
                message: format!(
                    "the entry takes {} argument(s), not {}",
                    self.params.len(),
                    args.len()
                ),
                span: Span::default(),
            });
        }
        let mut out = Args {
            types: self.params.clone(),
            slots: Vec::new(),
            heap: marshal::Objects::default(),
        };
        for (k, (a, t)) in args.iter().zip(&self.params).enumerate() {
            marshal::write_value(t, a, &mut out.slots, &mut out.heap).map_err(|problem| {
                RuntimeError {
                    message: format!("argument {} of the entry: {problem}", k + 1),
                    span: Span::default(),
                }
            })?;
        }
        Ok(out)
    }

    /// The context of one run.
    fn context(&self, globals: *mut u64) -> runtime::Ctx {
        runtime::Ctx::new(
            nabla_lang::stack::Guard::for_evaluation().lowest() as u64,
            self.limits
                .max_calls
                .map_or(i64::MAX, |n| n.min(i64::MAX as u64) as i64),
            globals,
            self.limits.max_vector_len.min(i64::MAX as usize) as i64,
        )
    }

    /// Applies the entry function to arguments converted by
    /// [`Native::args`] (of this entry's parameter types), as
    /// [`Native::call`] does.
    pub fn call_with(&self, args: &Args) -> Result<Value, RuntimeError> {
        self.run_entry(args, |ty, out| {
            // SAFETY: `run_entry` passes the slots of a live result of `ty`.
            unsafe { marshal::read_value(ty, out, &mut 0) }
        })
    }

    /// As [`Native::call_with`], for a result made of reals, tuples and
    /// vectors only: its reals in order (tuples left to right, vectors in
    /// index order), read straight from native memory — no [`Value`]s made,
    /// for a host that wants the numbers (the benchmark harness).
    ///
    /// ```
    /// use nabla_lang::driver::Session;
    /// use nabla_lang::eval::Value;
    /// use nabla_native::{Native, Options};
    /// nabla_lang::stack::run_with_stack(|| {
    ///     let mut s = Session::new();
    ///     s.load("demo.nabla", "def f (x : Real) = (x, [x * 2.0, x * 3.0])").unwrap();
    ///     let (prog, entry) = s.typed_program("f").unwrap();
    ///     let f = Native::compile(&prog, entry, &Options::default()).unwrap();
    ///     let args = f.args(&[Value::Real(1.5)]).unwrap();
    ///     assert_eq!(f.call_reals(&args).unwrap(), vec![1.5, 3.0, 4.5]);
    ///     assert_eq!(f.call_real_parts(&args).unwrap(), vec![vec![1.5], vec![3.0, 4.5]]);
    /// });
    /// ```
    pub fn call_reals(&self, args: &Args) -> Result<Vec<f64>, RuntimeError> {
        self.check_only_reals()?;
        self.run_entry(args, |ty, out| {
            let mut reals = Vec::new();
            // SAFETY: `run_entry` passes the slots of a live result of `ty`.
            unsafe { marshal::read_reals(ty, out, &mut 0, &mut reals) };
            reals
        })
    }

    /// As [`Native::call_reals`], with the reals of each component of a
    /// tuple result apart (a result that is not a tuple is one part): a
    /// value and its derivative, say.
    pub fn call_real_parts(&self, args: &Args) -> Result<Vec<Vec<f64>>, RuntimeError> {
        self.check_only_reals()?;
        self.run_entry(args, |ty, out| {
            let parts = match ty {
                Type::Tuple(ts) => ts.as_slice(),
                t => std::slice::from_ref(t),
            };
            let mut at = 0;
            parts
                .iter()
                .map(|t| {
                    let mut reals = Vec::new();
                    // SAFETY: `run_entry` passes the slots of a live result of
                    // `ty`; its components' slots follow each other from 0.
                    unsafe { marshal::read_reals(t, out, &mut at, &mut reals) };
                    reals
                })
                .collect()
        })
    }

    fn check_only_reals(&self) -> Result<(), RuntimeError> {
        if marshal::only_reals(&self.ty) {
            return Ok(());
        }
        Err(RuntimeError {
            message: format!(
                "the result, of type {}, holds more than reals",
                nabla_lang::pretty::print_type(&self.ty)
            ),
            span: Span::default(),
        })
    }

    /// Runs the entry on `args` and reads the result with `read` (given
    /// the result type and slots, valid only during the call) before it is
    /// released.
    fn run_entry<T>(
        &self,
        args: &Args,
        read: impl FnOnce(&Type, &[u64]) -> T,
    ) -> Result<T, RuntimeError> {
        if args.types != self.params {
            return Err(RuntimeError {
                message: "arguments converted for an entry of other parameter types".into(),
                span: Span::default(),
            });
        }
        let mut globals = vec![0u64; self.global_area.max(1)];
        let mut ctx = self.context(globals.as_mut_ptr());
        // The entry owns its arguments: it gets references of its own.
        let mut at = 0;
        for t in &args.types {
            layout::for_each_pointer(t, at, &mut |_, k| {
                let p = args.slots[k] as *mut u64;
                if !p.is_null() {
                    // SAFETY: a non-null pointer slot of `args` points to a
                    // live object `Args` holds a reference to (written by
                    // `write_value` for `types`); its first slot is its
                    // count. (Null: the side of a sum not taken.)
                    unsafe { *p += 1 };
                }
            });
            at += layout::width(t);
        }
        let mut arg_slots = args.slots.clone();
        arg_slots.push(0);
        let mut out = vec![0u64; layout::width(&self.ty).max(1)];
        // SAFETY: `entry` is the finalized code of the `entry` function, of
        // signature `extern "C" fn(*mut Ctx, *const u64, *mut u64)`
        // (`Codegen::host_sig`); the module that owns it lives as long as
        // `self`. `ctx`, `arg_slots` and `out` outlive the call; `arg_slots`
        // holds the arguments' scalars laid out as `layout` says for the
        // parameter types (checked above), with a reference of the entry's
        // own to each object; `out` has one slot per scalar of the result
        // and `globals` one per global slot (`Codegen::global_area`).
        let entry: extern "C" fn(*mut runtime::Ctx, *const u64, *mut u64) =
            unsafe { std::mem::transmute(self.entry) };
        entry(&mut ctx, arg_slots.as_ptr(), out.as_mut_ptr());
        let result = match ctx.error {
            Some(e) => Err(RuntimeError {
                message: e.message(&self.global_names),
                span: self.spans.get(e.span as usize).copied().unwrap_or_default(),
            }),
            // No error: `out` holds the entry's value as laid out by
            // `layout`, its vectors alive (owned by the globals or by `out`
            // until `release`).
            None => Ok(read(&self.ty, &out)),
        };
        // SAFETY: as for `entry`, of signature `extern "C" fn(*mut Ctx,
        // *mut u64)`. After an error, `out` holds zeros (null pointers,
        // which dropping skips) and globals still being evaluated are not
        // `done` and are not touched.
        let release: extern "C" fn(*mut runtime::Ctx, *mut u64) =
            unsafe { std::mem::transmute(self.release) };
        ctx.failed = 0;
        release(&mut ctx, out.as_mut_ptr());
        result
    }
}

/// Arguments for a compiled entry function in native code's
/// representation ([`Native::args`]), reusable across calls.
pub struct Args {
    /// The parameter types they were converted for.
    types: Vec<Type>,
    /// Their scalars, one per slot.
    slots: Vec<u64>,
    /// Every object they point to, directly or not, freed with them:
    /// every call has dropped the references it was given by the time it
    /// returned (or leaked them after a run-time error, never to touch them
    /// again), so the objects are the host's alone.
    heap: marshal::Objects,
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

/// Appends the generated functions to `/tmp/perf-PID.map`, where `perf
/// report` looks for the symbols of JIT code (set `NABLA_PERF_MAP=1`; see
/// docs/compiler.md). Best effort: a failure to write is ignored.
fn write_perf_map(module: &JITModule, sizes: &[(cranelift_module::FuncId, u32, String)]) {
    use std::io::Write;
    let path = format!("/tmp/perf-{}.map", std::process::id());
    let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    else {
        return;
    };
    for (id, size, name) in sizes {
        let addr = module.get_finalized_function(*id) as usize;
        let _ = writeln!(file, "{addr:x} {size:x} nabla::{name}");
    }
}

/// The address space reserved for one program's code.
const CODE_REGION_BYTES: usize = 256 << 20;

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
    // Calls between generated functions are 32-bit pc-relative: all code
    // must lie in one region (the default provider's separate allocations
    // can end up more than 2 GiB apart, and relocating then fails). The
    // region is reserved address space, committed as code is emitted.
    let arena = ArenaMemoryProvider::new_with_size(CODE_REGION_BYTES)
        .map_err(|e| fail(format!("reserving the code region: {e}")))?;
    builder.memory_provider(Box::new(arena));
    for (name, ptr) in runtime::symbols() {
        builder.symbol(name, ptr);
    }
    Ok(JITModule::new(builder))
}
