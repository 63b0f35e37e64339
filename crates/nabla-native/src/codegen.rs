//! The typed IR to Cranelift IR.
//!
//! Calling convention (Cranelift's `tail`, so that calls in tail position
//! are jumps): a known function takes the context pointer, its captures'
//! scalars (borrowed), then its parameters' scalars (owned), and returns its
//! result's scalars (owned). A closure's code takes the context, the
//! closure itself and the argument's scalars.
//!
//! Ownership (reference counting, see `docs/compiler.md`): an expression
//! yields an owned value; reading a local or a global makes a new reference,
//! except where the value is only looked at (the vector of `v[i]`, `size`,
//! `sum`, `map`, `fold`, `zip`, the tuple of a projection): then it is
//! borrowed. A `let`, a parameter or a pattern owns what it binds and drops
//! it when its scope ends; a call in tail position drops first.
//!
//! Errors: a failing check calls the runtime's `rt_error` and returns zeros;
//! every caller checks the context's `failed` word after a call and returns
//! too, so an error unwinds the native stack without Rust's unwinding.

use crate::layout::{self, CLO_CODE, CLO_DROP, CLO_ENV, SLOT, VEC_DATA, VEC_LEN};
use crate::marshal;
use crate::runtime::{self, Ctx, ErrorKind, Parked, WideView};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    self, AbiParam, BlockArg, FuncRef, InstBuilder, MemFlagsData, Signature, UserFuncName, types,
};
use cranelift_codegen::isa::CallConv;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use cranelift_jit::JITModule;
use cranelift_module::{FuncId, Linkage, Module};
use nabla_lang::core::flow::Flow;
use nabla_lang::core::lower_typed::{Entry, Unsupported};
use nabla_lang::core::typed::{
    Expr, ExprKind, Fun, FunId, GlobalId, Lit, Local, Pat, Program, TapeOp,
};
use nabla_lang::prim::{Prim, RealFn, Selection};
use nabla_lang::syntax::span::Span;
use nabla_lang::types::Type;
use std::collections::{HashMap, HashSet};

type R<T> = Result<T, Unsupported>;
type Vals = Vec<ir::Value>;

const PTR: types::Type = types::I64;

/// The most scalars a generated function takes or returns (tuples are
/// flattened into them; Cranelift's calling conventions have limits).
const MAX_SCALARS: usize = 200;

fn flags() -> MemFlagsData {
    MemFlagsData::trusted()
}

/// For loads of what never changes while an object is alive — a vector's
/// length and elements, a closure's code and captures (only the count
/// changes): Cranelift may then merge repeated loads of the same address.
/// (Not `can_move`: a pointer may be null on a path that does not use it,
/// the side of a sum not taken.)
fn immutable() -> MemFlagsData {
    MemFlagsData::trusted().with_readonly()
}

/// The Cranelift type of a trace word read as `ty` (a `Real` or an `Int`).
fn word_type(ty: &Type) -> types::Type {
    if *ty == Type::Real {
        types::F64
    } else {
        types::I64
    }
}

fn bargs(vs: &[ir::Value]) -> Vec<BlockArg> {
    vs.iter().map(|&v| BlockArg::Value(v)).collect()
}

/// The most Cranelift IR instructions a generated function may have. The
/// register allocator's time and memory grow faster than linearly in a
/// function's size (a straight-line chain of 1 000 operations recorded for
/// reverse mode, 32 000 instructions, takes 1 s and 340 MB to compile; 2 500
/// of them 8 s and 2 GB), so a function larger than this — five times the
/// largest in the benchmarks (LSTM's gradient) — is refused, and `--backend
/// auto` runs the program in the interpreter.
const MAX_FUNCTION_INSTS: usize = 25_000;

fn internal(what: &str, span: Span) -> Unsupported {
    Unsupported {
        what: format!("internal: {what}"),
        span,
    }
}

/// A function to define once everything it refers to is declared.
#[derive(Clone, Debug)]
enum Job {
    Fun(FunId),
    ClosureCode(FunId),
    ClosureDrop(FunId),
    VecDrop(Type),
    Global(GlobalId),
    /// `entry(ctx, args, out)` (the host's calling convention): reads the
    /// entry function's arguments (owned) from `args`, or evaluates the
    /// global, and writes the value's scalars to `out`, one per slot.
    Entry(Entry),
    /// `release(ctx, out)`: drops what a run owns: the value in `out` when
    /// the entry is a function (a global's is borrowed), then every
    /// evaluated global.
    Release(Entry),
    /// A runtime function called through a trampoline that saves every
    /// register it uses ([`Codegen::import_preserving`]).
    Preserving(&'static str, Vec<types::Type>),
}

/// What generating code for one program needs.
pub(crate) struct Codegen<'p> {
    pub prog: &'p Program,
    pub module: JITModule,
    fctx: FunctionBuilderContext,
    declared: HashMap<String, FuncId>,
    jobs: Vec<Job>,
    /// Positions that run-time errors report, by the index code passes.
    pub spans: Vec<Span>,
    /// The label and type of each `trace` in the code, boxed so that code
    /// can pass each one's fixed address to [`runtime::rt_trace`]; the
    /// compiled program keeps them as long as its code.
    #[allow(clippy::vec_box)] // each box's address is baked into the code
    pub traces: Vec<Box<runtime::TraceSite>>,
    /// The vectors of constant literals, made once when compiling: the
    /// compiled program holds a reference to each as long as its code.
    pub constants: marshal::Objects,
    /// Where each global's slots start in the context's global area (the
    /// first slot is its state: 0 not evaluated, 1 running, 2 done).
    pub global_slots: Vec<usize>,
    /// Imported runtime functions.
    imports: HashMap<&'static str, FuncId>,
    /// Count calls against a limit.
    count_calls: bool,
    /// The Cranelift IR of each function defined, when asked for.
    pub dumps: Option<Vec<(String, String)>>,
    /// Every function defined: its id, code size in bytes and name (for
    /// profilers' symbol maps).
    pub sizes: Vec<(FuncId, u32, String)>,
    /// The element functions ([`mapped_functions`] of the program before
    /// small vectors were made tuples, and their copies): inlined as loop
    /// bodies are, also where they are called directly.
    elements: HashSet<FunId>,
    /// The functions whose closures may be run through their code
    /// ([`applied_closures`]); any other closure's code is a stub.
    applied: HashSet<FunId>,
    /// Per function, the locals it binds ([`bound_locals`]): looked up at
    /// every inlining, twice.
    bound: Vec<Box<[Local]>>,
    /// Per function, whether it keeps level 1's staging cursor in
    /// variables ([`staged_appenders`], [`StagedCursor`]).
    staged_appenders: Vec<bool>,
    /// The imported runtime functions that neither read nor change level
    /// 1's staging (all but the trace's, `rt_tape_*`): calling one needs no
    /// [`StagedCursor`] written back or reloaded.
    staging_neutral: HashSet<FuncId>,
}

/// The functions whose closures an application may run through their code:
/// those that can reach an application that is not of a recoding (by the
/// flow analysis). Any other closure is only applied by a recoding, whose
/// switch on the closure's code calls a copy directly
/// ([`FnGen::apply_recoded`]): its code is compared against, never run, and
/// is generated as a stub (an internal error), so that the function it
/// would call is not compiled for it (saddle's direct copies left the
/// vector versions compiled for nothing).
pub(crate) fn applied_closures(prog: &Program) -> HashSet<FunId> {
    let flow = Flow::solve(prog);
    let mut out = HashSet::new();
    let mut work: Vec<&Expr> = prog.funs.iter().map(|f| &f.body).collect();
    work.extend(prog.globals.iter().map(|g| &g.body));
    while let Some(e) = work.pop() {
        if let ExprKind::Apply(f, _) = &e.kind
            && !matches!(f.kind, ExprKind::Recode { .. })
        {
            out.extend(flow.of(f));
        }
        e.for_each_child(|c| work.push(c));
    }
    out
}

/// The functions given to `map` in `prog`, and those a `fold`'s step calls
/// on each element (the fused `sum (map g v)` of `translate::dual` folds
/// `fun acc a -> add acc (g a)`).
pub(crate) fn mapped_functions(prog: &Program) -> HashSet<FunId> {
    let mut out = HashSet::new();
    let mut work: Vec<&Expr> = prog.funs.iter().map(|f| &f.body).collect();
    work.extend(prog.globals.iter().map(|g| &g.body));
    while let Some(e) = work.pop() {
        match &e.kind {
            ExprKind::Prim(Prim::Map, args) => {
                if let Some(ExprKind::Closure(f)) = args.first().map(|a| &a.kind) {
                    out.insert(*f);
                }
            }
            ExprKind::Prim(Prim::Fold, args) => {
                if let Some(ExprKind::Closure(f)) = args.first().map(|a| &a.kind)
                    && let Some(g) = sum_step_element(prog.fun(*f))
                {
                    out.insert(g);
                }
            }
            _ => {}
        }
        e.for_each_child(|c| work.push(c));
    }
    out
}

/// `g` if `step` is a sum's step `fun acc a -> add acc (g a)` (the fused
/// `sum (map g v)` and `sum (build n g)` of `translate::dual`), whose
/// element `g` makes is evaluated first.
fn sum_step_element(step: &Fun) -> Option<FunId> {
    let ExprKind::Call(_, args) = &step.body.kind else {
        return None;
    };
    let [acc, made] = &args[..] else { return None };
    let ExprKind::Call(g, xs) = &made.kind else {
        return None;
    };
    match (&acc.kind, &xs[..]) {
        (ExprKind::Local(_), [x]) if matches!(x.kind, ExprKind::Local(_)) => Some(*g),
        _ => None,
    }
}

/// Per function, whether it runs a loop (`build`, `map`, `fold`) whose
/// function appends Deltas to level 1's staged trace (`Push`, `Combine`,
/// `Input` of slot 1), in its body or in that of a function it names
/// (which it may inline): such a function keeps the staging's cursor in
/// variables ([`StagedCursor`]). Loading and writing back the cursor costs
/// a function without such a loop more than its few appends gain (particle
/// RF +8 % instructions with every appending function keeping it; LSTM,
/// GMM −5–7 % with these). A choice of speed only: an append is right with
/// the cursor in variables or in the context.
fn staged_appenders(prog: &Program) -> Vec<bool> {
    fn any(e: &Expr, found: &impl Fn(&Expr) -> bool) -> bool {
        let mut work = vec![e];
        while let Some(e) = work.pop() {
            if found(e) {
                return true;
            }
            e.for_each_child(|c| work.push(c));
        }
        false
    }
    let appends = |e: &Expr| {
        matches!(
            e.kind,
            ExprKind::Tape {
                op: TapeOp::Push | TapeOp::Combine | TapeOp::Input,
                slot,
                ..
            } if usize::from(slot) == runtime::STAGED_SLOT
        )
    };
    let own: Vec<bool> = prog.funs.iter().map(|f| any(&f.body, &appends)).collect();
    let named = |e: &Expr| match &e.kind {
        ExprKind::Call(g, _) | ExprKind::Closure(g) => own[g.0 as usize],
        ExprKind::Recode { cases, .. } => cases.iter().any(|&(_, g)| own[g.0 as usize]),
        _ => false,
    };
    let deep: Vec<bool> = prog
        .funs
        .iter()
        .zip(&own)
        .map(|(f, &own)| own || any(&f.body, &named))
        .collect();
    let appending_loop = |e: &Expr| match &e.kind {
        ExprKind::Prim(Prim::Build | Prim::Map | Prim::Fold, args) => args
            .iter()
            .any(|a| matches!(a.kind, ExprKind::Closure(g) if deep[g.0 as usize])),
        _ => false,
    };
    prog.funs
        .iter()
        .map(|f| any(&f.body, &appending_loop))
        .collect()
}

impl<'p> Codegen<'p> {
    pub(crate) fn new(
        prog: &'p Program,
        elements: HashSet<FunId>,
        module: JITModule,
        count_calls: bool,
        dump: bool,
    ) -> Self {
        let mut slots = Vec::new();
        let mut next = 0;
        for g in &prog.globals {
            slots.push(next);
            next += 1 + layout::width(&g.ty);
        }
        Codegen {
            prog,
            module,
            fctx: FunctionBuilderContext::new(),
            declared: HashMap::new(),
            jobs: Vec::new(),
            spans: Vec::new(),
            traces: Vec::new(),
            constants: marshal::Objects::default(),
            global_slots: slots,
            imports: HashMap::new(),
            count_calls,
            dumps: dump.then(Vec::new),
            sizes: Vec::new(),
            elements,
            applied: applied_closures(prog),
            bound: prog.funs.iter().map(bound_locals).collect(),
            staged_appenders: staged_appenders(prog),
            staging_neutral: HashSet::new(),
        }
    }

    /// Slots of the global area.
    pub(crate) fn global_area(&self) -> usize {
        self.prog
            .globals
            .iter()
            .map(|g| 1 + layout::width(&g.ty))
            .sum()
    }

    fn sig(&self, params: &[types::Type], rets: &[types::Type], cc: CallConv) -> Signature {
        let mut s = Signature::new(cc);
        s.params.extend(params.iter().map(|&t| AbiParam::new(t)));
        s.returns.extend(rets.iter().map(|&t| AbiParam::new(t)));
        s
    }

    fn declare(&mut self, name: String, sig: &Signature, job: Job) -> R<FuncId> {
        if let Some(&id) = self.declared.get(&name) {
            return Ok(id);
        }
        if sig.params.len() > MAX_SCALARS || sig.returns.len() > MAX_SCALARS {
            return Err(Unsupported {
                what: format!(
                    "a function whose arguments or result flatten to more than {MAX_SCALARS} numbers"
                ),
                span: self.job_span(&job),
            });
        }
        let id = self
            .module
            .declare_function(&name, Linkage::Local, sig)
            .map_err(|e| internal(&format!("declaring {name}: {e}"), Span::default()))?;
        self.declared.insert(name, id);
        self.jobs.push(job);
        Ok(id)
    }

    fn import(
        &mut self,
        name: &'static str,
        params: &[types::Type],
        rets: &[types::Type],
    ) -> R<FuncId> {
        if let Some(&id) = self.imports.get(name) {
            return Ok(id);
        }
        let sig = self.sig(params, rets, CallConv::SystemV);
        let id = self
            .module
            .declare_function(name, Linkage::Import, &sig)
            .map_err(|e| internal(&format!("importing {name}: {e}"), Span::default()))?;
        self.imports.insert(name, id);
        if !name.starts_with("rt_tape") {
            self.staging_neutral.insert(id);
        }
        Ok(id)
    }

    /// A runtime function without a result, called through a trampoline of
    /// the `preserve_all` convention, which saves every register it uses.
    /// For calls on rare paths inside hot code (freeing a large object):
    /// a plain call clobbers every caller-saved register, so the register
    /// allocator would keep the values that live across it (a loop's
    /// running sum) on the stack for the whole loop, not only around the
    /// rare call.
    fn import_preserving(&mut self, name: &'static str, params: &[types::Type]) -> R<FuncId> {
        let sig = self.sig(params, &[], CallConv::PreserveAll);
        self.declare(
            preserving_name(name),
            &sig,
            Job::Preserving(name, params.to_vec()),
        )
    }

    fn job_span(&self, job: &Job) -> Span {
        match job {
            Job::Fun(f) | Job::ClosureCode(f) | Job::ClosureDrop(f) => self.prog.fun(*f).span,
            Job::Global(g) | Job::Entry(Entry::Global(g)) => self.prog.global(*g).span,
            Job::Entry(Entry::Fun(f)) => self.prog.fun(*f).span,
            Job::VecDrop(_) | Job::Release(_) | Job::Preserving(..) => Span::default(),
        }
    }

    // ---- signatures of generated functions ----

    fn captures_flat(&self, f: FunId) -> R<Vec<types::Type>> {
        let fun = self.prog.fun(f);
        let mut out = vec![PTR];
        for &c in &fun.captures {
            layout::flatten(self.prog.local_ty(c), &mut out, fun.span)?;
        }
        Ok(out)
    }

    fn fun_sig(&self, f: FunId) -> R<Signature> {
        let fun = self.prog.fun(f);
        let mut params = self.captures_flat(f)?;
        for (_, t) in &fun.params {
            layout::flatten(t, &mut params, fun.span)?;
        }
        let rets = layout::flat(&fun.ret, fun.span)?;
        Ok(self.sig(&params, &rets, CallConv::Tail))
    }

    /// The signature of closure code for a function value of type `a -> b`.
    fn closure_sig(&self, a: &Type, b: &Type, span: Span) -> R<Signature> {
        let mut params = vec![PTR, PTR];
        layout::flatten(a, &mut params, span)?;
        let rets = layout::flat(b, span)?;
        Ok(self.sig(&params, &rets, CallConv::Tail))
    }

    fn host_sig(&self, job: &Job) -> Signature {
        match job {
            Job::Entry(_) => self.sig(&[PTR, PTR, PTR], &[], CallConv::SystemV),
            _ => self.sig(&[PTR, PTR], &[], CallConv::SystemV),
        }
    }

    /// Declares the functions the host calls: `entry` and `release`.
    pub(crate) fn host_functions(&mut self, e: Entry) -> R<(FuncId, FuncId)> {
        let entry_sig = self.host_sig(&Job::Entry(e));
        let entry = self.declare("entry".into(), &entry_sig, Job::Entry(e))?;
        let release_sig = self.host_sig(&Job::Release(e));
        let release = self.declare("release".into(), &release_sig, Job::Release(e))?;
        Ok((entry, release))
    }

    /// Drop functions take the context and the object.
    fn drop_sig(&self) -> Signature {
        self.sig(&[PTR, PTR], &[], CallConv::Tail)
    }

    fn global_sig(&self, g: GlobalId) -> R<Signature> {
        let gl = self.prog.global(g);
        let rets = layout::flat(&gl.ty, gl.span)?;
        // The context, and the position of the use (for "depends on itself").
        Ok(self.sig(&[PTR, types::I32], &rets, CallConv::Tail))
    }

    fn fun_id(&mut self, f: FunId) -> R<FuncId> {
        let sig = self.fun_sig(f)?;
        let name = format!("f{}_{}", f.0, sanitize(&self.prog.fun(f).name));
        self.declare(name, &sig, Job::Fun(f))
    }

    fn closure_code_id(&mut self, f: FunId) -> R<FuncId> {
        let fun = self.prog.fun(f);
        let [(_, a)] = &fun.params[..] else {
            return Err(internal(
                "a closure of a function of several parameters",
                fun.span,
            ));
        };
        let sig = self.closure_sig(a, &fun.ret, fun.span)?;
        self.declare(format!("clo{}", f.0), &sig, Job::ClosureCode(f))
    }

    fn closure_drop_id(&mut self, f: FunId) -> R<FuncId> {
        let sig = self.drop_sig();
        self.declare(format!("drop_clo{}", f.0), &sig, Job::ClosureDrop(f))
    }

    fn vec_drop_id(&mut self, elem: &Type) -> R<FuncId> {
        let sig = self.drop_sig();
        let mut name = String::from("drop_vec_");
        type_name(elem, &mut name);
        self.declare(name, &sig, Job::VecDrop(elem.clone()))
    }

    pub(crate) fn global_id(&mut self, g: GlobalId) -> R<FuncId> {
        let sig = self.global_sig(g)?;
        let name = format!("g{}_{}", g.0, sanitize(&self.prog.global(g).name));
        self.declare(name, &sig, Job::Global(g))
    }

    /// Defines every function declared so far and every one they need.
    pub(crate) fn define_all(&mut self) -> R<()> {
        let mut done = 0;
        while done < self.jobs.len() {
            let job = self.jobs[done].clone();
            done += 1;
            self.define(job)?;
        }
        Ok(())
    }

    fn define(&mut self, job: Job) -> R<()> {
        let (id, sig, name) = match &job {
            Job::Fun(f) => (
                self.fun_id(*f)?,
                self.fun_sig(*f)?,
                self.prog.fun(*f).name.clone(),
            ),
            Job::ClosureCode(f) => {
                let fun = self.prog.fun(*f);
                let sig = self.closure_sig(&fun.params[0].1, &fun.ret, fun.span)?;
                (
                    self.closure_code_id(*f)?,
                    sig,
                    format!("closure of {}", fun.name),
                )
            }
            Job::ClosureDrop(f) => (
                self.closure_drop_id(*f)?,
                self.drop_sig(),
                format!("drop of closure of {}", self.prog.fun(*f).name),
            ),
            Job::VecDrop(t) => (
                self.vec_drop_id(t)?,
                self.drop_sig(),
                "drop of a vector".into(),
            ),
            Job::Global(g) => (
                self.global_id(*g)?,
                self.global_sig(*g)?,
                self.prog.global(*g).name.clone(),
            ),
            Job::Preserving(target, params) => (
                self.declared[&preserving_name(target)],
                self.sig(params, &[], CallConv::PreserveAll),
                format!("{target} (preserving registers)"),
            ),
            Job::Entry(_) | Job::Release(_) => {
                let name = if matches!(job, Job::Release(_)) {
                    "release"
                } else {
                    "entry"
                };
                (self.declared[name], self.host_sig(&job), name.to_string())
            }
        };
        let mut ctx = self.module.make_context();
        ctx.func.signature = sig;
        ctx.func.name = UserFuncName::user(0, id.as_u32());
        let mut fctx = std::mem::replace(&mut self.fctx, FunctionBuilderContext::new());
        let config = self.module.target_config();
        let r = {
            let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
            let r = FnGen::build(self, &mut b, &job);
            if r.is_ok() {
                b.seal_all_blocks();
                b.finalize(config);
            }
            r
        };
        self.fctx = fctx;
        r?;
        let insts = ctx.func.dfg.num_insts();
        if insts > MAX_FUNCTION_INSTS {
            return Err(Unsupported {
                what: format!(
                    "a function this large ({name}: {insts} instructions of \
                     Cranelift IR, at most {MAX_FUNCTION_INSTS})"
                ),
                span: self.job_span(&job),
            });
        }
        if cfg!(debug_assertions) {
            let flags =
                cranelift_codegen::settings::Flags::new(cranelift_codegen::settings::builder());
            if let Err(e) = cranelift_codegen::verify_function(&ctx.func, &flags) {
                return Err(internal(
                    &format!("verifier: {e} in {name}\n{}", ctx.func.display()),
                    Span::default(),
                ));
            }
        }
        if let Some(d) = &mut self.dumps {
            d.push((name.clone(), ctx.func.display().to_string()));
        }
        self.module
            .define_function(id, &mut ctx)
            .map_err(|e| internal(&format!("compiling {name}: {e:?}"), Span::default()))?;
        if let Some(code) = ctx.compiled_code() {
            let size = code.code_info().total_size;
            self.sizes.push((id, size, name));
        }
        self.module.clear_context(&mut ctx);
        Ok(())
    }

    fn span_index(&mut self, span: Span) -> i64 {
        self.spans.push(span);
        (self.spans.len() - 1) as i64
    }
}

/// A staged Delta's two weights ([`FnGen::write_staged`]).
#[derive(Clone, Copy)]
enum Weights {
    /// Each in its own register.
    Scalars(ir::Value, ir::Value),
    /// Side by side in one vector (`F64X2`, weight 0 in lane 0).
    Lanes(ir::Value),
}

/// A buffer generated code appends trace records to inline.
#[derive(Clone, Copy)]
enum Buffer {
    /// The outermost reverse level's trace, whose spare capacity the
    /// runtime lends ([`runtime::Staging`]); made room in by
    /// `runtime::rt_tape_flush`, which takes the Deltas onto the trace and
    /// lends more.
    Staging,
    /// The wide records of reverse level `slot` ([`runtime::WideView`]),
    /// with `words` weight components each (after two parents); made room
    /// in by `runtime::rt_tape_reserve`.
    Wide { slot: u8, words: i64 },
}

/// The name of the `preserve_all` trampoline of runtime function `target`.
fn preserving_name(target: &str) -> String {
    format!("{target}_preserving")
}

/// Expression nodes inlined into one generated function in all: bodies that
/// call each other several times over would otherwise multiply (five calls a
/// level, 8 levels deep: 390 625 copies). The benchmarks run as fast with
/// 1 000 as with 4 000, and such a hostile program compiles 4× sooner.
const INLINE_BUDGET: usize = 1000;

/// The expression nodes of `body` (nested functions' bodies not counted:
/// they are inlined, or not, at their own uses), or `None` past `budget`.
fn body_nodes(body: &Expr, budget: usize) -> Option<usize> {
    let mut nodes = 0;
    let mut work = vec![body];
    while let Some(e) = work.pop() {
        nodes += 1;
        if nodes > budget {
            return None;
        }
        e.for_each_child(|c| work.push(c));
    }
    Some(nodes)
}

/// Bodies of at most this many nodes that call nothing are inlined even
/// when the function being generated has taken in its [`INLINE_BUDGET`],
/// and at any depth of inlining: a
/// call costs about what such a body does, and a body that calls nothing
/// cannot make copies of others. (Compiled reverse mode's addition of two
/// reals, a function of a dozen nodes, was called a million times a run
/// from GMM's innermost loop once the budget was spent on the code before.)
/// Forward levels' leaves are larger — the addition of two reals two
/// forward levels deep, with the structural zeros' branches, is about 150
/// nodes — and were called: 160 rather than 48 took particle FR 111.6 →
/// 91.5 M instructions an evaluation, RF 111.9 → 105.3 M, FF 74.4 → 72.7 M
/// (96 gave all but FF's), for 2–5 % more preparation; 256 particle RF
/// 104.6 → 99.3 M more, for no more preparation; 400 nothing more.
const LEAF_NODES: usize = 256;

/// True if `body` has at most [`LEAF_NODES`] nodes and neither calls nor
/// makes a function (nested functions are where calls hide).
fn is_small_leaf(body: &Expr) -> bool {
    let mut nodes = 0;
    let mut work = vec![body];
    while let Some(e) = work.pop() {
        nodes += 1;
        let calls = matches!(
            e.kind,
            ExprKind::Call(..)
                | ExprKind::Closure(_)
                | ExprKind::Apply(..)
                | ExprKind::Recode { .. }
        );
        if nodes > LEAF_NODES || calls {
            return false;
        }
        e.for_each_child(|c| work.push(c));
    }
    true
}

/// True if `e` is `x == 0` of a real `x`, or a conjunction `select(a, b,
/// false)` of such tests (compiled differentiation's test that a real of
/// a derivative level is zero in every component); pushes the `x`s, in
/// the order they are evaluated, to `reals`.
fn all_zero_tests<'e>(e: &'e Expr, reals: &mut Vec<&'e Expr>) -> bool {
    match &e.kind {
        ExprKind::Prim(Prim::Eq, args) => match &args[..] {
            [x, zero] if x.ty == Type::Real => {
                reals.push(x);
                matches!(zero.kind, ExprKind::Lit(Lit::Real(z)) if z == 0.0)
            }
            _ => false,
        },
        ExprKind::Select(a, b, no) => {
            matches!(no.kind, ExprKind::Lit(Lit::Bool(false)))
                && all_zero_tests(a, reals)
                && all_zero_tests(b, reals)
        }
        _ => false,
    }
}

/// The locals `fun` binds: its parameters' and its body's `let`s' and
/// `match` arms' (not those of the functions it makes: those are theirs).
fn bound_locals(fun: &Fun) -> Box<[Local]> {
    let mut out = Vec::new();
    for (p, _) in &fun.params {
        p.for_each_local(&mut |l| out.push(l));
    }
    let mut work = vec![&fun.body];
    while let Some(e) = work.pop() {
        match &e.kind {
            ExprKind::Let(p, _, _) => p.for_each_local(&mut |l| out.push(l)),
            ExprKind::Case { left, right, .. } => {
                left.0.for_each_local(&mut |l| out.push(l));
                right.0.for_each_local(&mut |l| out.push(l));
            }
            _ => {}
        }
        e.for_each_child(|c| work.push(c));
    }
    out.into_boxed_slice()
}

/// True if `body` calls into the runtime for a real function (`exp`,
/// `sin`, `pow`, …): every float register is lost across such a call.
fn calls_math(body: &Expr) -> bool {
    let mut work = vec![body];
    while let Some(e) = work.pop() {
        if let ExprKind::Prim(p, _) = &e.kind
            && math_symbol(*p).is_some()
        {
            return true;
        }
        e.for_each_child(|c| work.push(c));
    }
    false
}

/// The runtime function a primitive on reals is a call of, and its number
/// of arguments; `None` for those that are instructions (`+`, `sqrt`, …).
fn math_symbol(p: Prim) -> Option<(&'static str, usize)> {
    match p.info().real {
        Some(RealFn::Unary(op)) => runtime::unary_symbol(op).map(|s| (s.0, 1)),
        Some(RealFn::Binary(op)) => runtime::binary_symbol(op).map(|s| (s.0, 2)),
        _ => None,
    }
}

/// A sum's element that computes two at a time ([`FnGen::simd_lanes`]).
struct SimdElement<'e> {
    /// The element function's body; `None` for a vector's own elements.
    body: Option<&'e Expr>,
    /// A `map`ped function's parameter, the element.
    element: Option<Local>,
    /// What the body indexes with values from outside ([`hoistable`]).
    hoisted: Vec<&'e Expr>,
    /// The vectors it indexes with its counter (captured or hoisted).
    vectors: Vec<&'e Expr>,
}

/// What an element function's locals are ([`simd_expr`]).
struct Params<'a> {
    /// A `build`'s counter.
    counter: Option<Local>,
    /// A `map`'s element (a real).
    element: Option<Local>,
    /// Its captures, from outside the loop.
    captures: &'a [Local],
}

/// Where a [`SimdElement`] is evaluated: the vectors it indexes, the
/// `map`'s parameter and vector, and the first of the two elements.
struct Simd<'a> {
    bases: &'a HashMap<*const Expr, ir::Value>,
    element: Option<(Local, ir::Value)>,
    i: ir::Value,
}

/// True if `e` is real arithmetic (`+ - * /`, negation) on literals, the
/// mapped element, reals from outside, and elements `v[counter]` of vectors
/// of reals from outside (captured, or among `hoisted`), which it lists in
/// `vectors`: what computes two elements at a time with the same results.
fn simd_expr<'e>(
    e: &'e Expr,
    params: &Params,
    hoisted: &[&'e Expr],
    vectors: &mut Vec<&'e Expr>,
) -> bool {
    let outside = |x: &Expr| match &x.kind {
        ExprKind::Local(l) => params.captures.contains(l),
        _ => hoisted.iter().any(|h| std::ptr::eq(*h, x)),
    };
    match &e.kind {
        ExprKind::Lit(Lit::Real(_)) => true,
        ExprKind::Local(l) => {
            e.ty == Type::Real && (params.captures.contains(l) || params.element == Some(*l))
        }
        ExprKind::Prim(Prim::Index, args) => {
            let by_counter =
                matches!(args[1].kind, ExprKind::Local(l) if params.counter == Some(l));
            let ok = by_counter
                && e.ty == Type::Real
                && args[0].ty == Type::Vec(Box::new(Type::Real))
                && outside(&args[0]);
            if ok && !vectors.iter().any(|v| std::ptr::eq(*v, &args[0])) {
                vectors.push(&args[0]);
            }
            ok
        }
        ExprKind::Prim(Prim::Neg, args) if e.ty == Type::Real => {
            simd_expr(&args[0], params, hoisted, vectors)
        }
        ExprKind::Prim(Prim::Add | Prim::Sub | Prim::Mul | Prim::Div, args)
            if e.ty == Type::Real =>
        {
            args.iter().all(|a| simd_expr(a, params, hoisted, vectors))
        }
        _ => false,
    }
}

/// The slot whose wide records `body` sweeps, if it is a generated
/// backward sweep (`Helper::Sweep`: it reads their parents) that does
/// nothing else to that slot than read records and read and write adjoints.
fn swept_slot(body: &Expr) -> Option<u8> {
    let mut ops = Vec::new();
    let mut work = vec![body];
    while let Some(e) = work.pop() {
        if let ExprKind::Tape { op, slot, .. } = &e.kind {
            ops.push((*op, *slot));
        }
        e.for_each_child(|c| work.push(c));
    }
    let (_, slot) = *ops.iter().find(|(op, _)| *op == TapeOp::Parent)?;
    let reads_only = ops.iter().all(|&(op, s)| {
        s != slot
            || matches!(
                op,
                TapeOp::Parent | TapeOp::Weight | TapeOp::AdjGet | TapeOp::AdjSet
            )
    });
    reads_only.then_some(slot)
}

/// A symbol-safe version of a source name.
fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

fn type_name(t: &Type, out: &mut String) {
    match t {
        Type::Record(..) => type_name(&t.without_records(), out),
        Type::Real => out.push('R'),
        Type::Int => out.push('I'),
        Type::Bool => out.push('B'),
        Type::Unit | Type::Var(_) | Type::Con(..) => out.push('U'),
        Type::Tuple(ts) => {
            out.push_str(&format!("T{}", ts.len()));
            ts.iter().for_each(|t| type_name(t, out));
        }
        Type::Sum(a, b) => {
            out.push('S');
            type_name(a, out);
            type_name(b, out);
        }
        Type::Vec(a) => {
            out.push('V');
            type_name(a, out);
        }
        Type::Fun(a, b) => {
            out.push('F');
            type_name(a, out);
            type_name(b, out);
        }
    }
}

/// What a loop's inlined body indexes with values from outside the loop,
/// in evaluation order: `v[j]`, `v[j][k]`, `v[0]`, where `v` and `j` are
/// among `outside` (the body's captures) or literals, each looked at
/// before anything else in the body that could fail — so evaluating them
/// once before the loop (when it runs) raises the same first error as the
/// interpreter's first iteration. The walk stops at the first other step
/// that could fail (an Int operation, a call, an allocation) or that is
/// conditional (`if`, `match`).
fn hoistable<'e>(body: &'e Expr, outside: &[Local]) -> Vec<&'e Expr> {
    fn walk<'e>(e: &'e Expr, outside: &[Local], out: &mut Vec<&'e Expr>) -> bool {
        let from_outside = |x: &Expr, out: &[&Expr]| match &x.kind {
            ExprKind::Local(l) => outside.contains(l),
            ExprKind::Lit(_) => true,
            _ => out.iter().any(|c| std::ptr::eq(*c, x)),
        };
        match &e.kind {
            ExprKind::Local(_) | ExprKind::Lit(_) => true,
            ExprKind::Prim(Prim::Index, args) => {
                if from_outside(&args[0], out) && from_outside(&args[1], out) {
                    out.push(e);
                    return true;
                }
                // An index that could fail and stays in the loop: stop.
                for a in args {
                    if !walk(a, outside, out) {
                        break;
                    }
                }
                false
            }
            ExprKind::Prim(p, args) if cannot_fail(*p, args) => {
                args.iter().all(|a| walk(a, outside, out))
            }
            ExprKind::Tuple(xs) => xs.iter().all(|x| walk(x, outside, out)),
            ExprKind::Proj(x, _) | ExprKind::Inl(x) | ExprKind::Inr(x) => walk(x, outside, out),
            ExprKind::Let(_, a, b) => walk(a, outside, out) && walk(b, outside, out),
            _ => false,
        }
    }
    let mut out = Vec::new();
    walk(body, outside, &mut out);
    out
}

/// True if the primitive applied to `args` cannot raise an error: real
/// arithmetic and functions, comparisons, `size`, projections.
/// A type whose values have no heap parts (nothing to count or free).
fn plain_data(t: &Type) -> bool {
    match t {
        Type::Real | Type::Int | Type::Bool | Type::Unit => true,
        Type::Tuple(ts) => ts.iter().all(plain_data),
        _ => false,
    }
}

fn cannot_fail(p: Prim, args: &[Expr]) -> bool {
    use Prim::*;
    let on_reals = args.first().is_some_and(|a| a.ty == Type::Real);
    match p {
        Add | Sub | Mul | Div | Rem | Neg | Pow => on_reals,
        Lt | Le | Gt | Ge | Eq | Ne | Not | Size | Fst | Snd | ToReal | Min | Max | Chain => true,
        _ => p.info().real.is_some(),
    }
}

/// Generating one function's body.
struct FnGen<'a, 'b, 'p> {
    cg: &'a mut Codegen<'p>,
    b: &'a mut FunctionBuilder<'b>,
    ctx: ir::Value,
    /// The scalars of every local in scope.
    vars: HashMap<Local, Vals>,
    /// Owned locals in scope with heap parts, innermost last.
    owned: Vec<Local>,
    /// Returns zeros (after an error).
    unwind: ir::Block,
    /// The function being compiled and its loop header (self tail calls).
    current: Option<(FunId, ir::Block)>,
    rets: Vec<types::Type>,
    funcs: HashMap<FuncId, FuncRef>,
    /// A global's getter: the position of the use it was called for.
    span_arg: Option<ir::Value>,
    /// The functions whose bodies are being inlined here, innermost last.
    inlining: Vec<FunId>,
    /// Expression nodes inlined into this function so far (at most
    /// [`INLINE_BUDGET`]).
    inlined_nodes: usize,
    /// The most inlined nodes this function may take in: [`INLINE_BUDGET`],
    /// or, while a direct application's body is inlined, that body's nodes.
    inline_cap: usize,
    /// Facts for bounds checks, about SSA values (each defined once, so a
    /// fact holds wherever its values are): the vectors each length was
    /// loaded from, and the vectors each loop counter is below the length
    /// of (`build (size v) (fun i -> … v[i] …)` needs no check).
    lengths: HashMap<ir::Value, Vec<ir::Value>>,
    below: HashMap<ir::Value, Vec<ir::Value>>,
    /// Inside a loop: the elements its inlined body indexes with values
    /// from outside it, evaluated once before it (by the expression's
    /// address), and the lengths of those that are vectors, loaded there.
    hoisted: HashMap<*const Expr, Vals>,
    known_len: HashMap<ir::Value, ir::Value>,
    /// In a generated backward sweep of wide records (`Helper::Sweep`,
    /// compiled as its own function): the slot it sweeps and the fields of
    /// that slot's [`WideView`] its reads and writes use, loaded once on
    /// entry. The sweep appends nothing to its own slot (its arithmetic is
    /// the lower levels'), so the runtime does not make that view again
    /// while it runs; reloading the fields at every access took three
    /// loads of the context per word.
    sweep_view: Option<(u8, [(usize, ir::Value); 6])>,
    /// The runtime's real functions (pure) called so far, by `(symbol,
    /// arguments)`: a second call with the same arguments reuses the
    /// first's result. Reverse mode computes `sin θ` and `cos θ` for their
    /// values and again as each other's partials (BA's `rotate`): half the
    /// calls, and the spills around them, go.
    math_calls: BlockMemo<(&'static str, Vals)>,
    /// The terms `chain(p, d) + 0` made so far, by `(p, d)`
    /// ([`FnGen::chain_plus_zero`]): its branch is not an instruction
    /// Cranelift merges with an equal one, so a term formed twice (`x *
    /// x`'s two) is reused here.
    terms_made: BlockMemo<ChainOperands>,
    /// The operands `(∂, c)` of each `chain(∂, c)` made so far: a Delta's
    /// two weights are formed again side by side in one vector register
    /// ([`FnGen::weights_in_lanes`]), and the two scalar forms, then unused,
    /// are dropped by the optimiser.
    chains: HashMap<ir::Value, ChainOperands>,
    /// Level 1's staging cursor, in variables, in a function that appends
    /// to it ([`Codegen::staged_appenders`]); `None`: appends read and
    /// write the context.
    staged: Option<StagedCursor>,
}

/// Level 1's staging cursor ([`runtime::Staging`]) kept in variables
/// through a function that appends to it: an append tests the next id
/// against the end and writes the record at its id's address, where the
/// context's length, capacity, base and buffer took four loads and a
/// store. The context is written (its length) before anything that reads
/// or changes the staging — a call, other than of the runtime's functions
/// that do not ([`Codegen::staging_neutral`]), a return, a level begun or
/// ended inline — and the variables are loaded again after it. (An error
/// leaves the context as it was at the last such write: the evaluation is
/// abandoned with its trace.)
#[derive(Clone, Copy)]
struct StagedCursor {
    /// The id of the next Delta: the buffer's base id plus its length.
    next: Variable,
    /// The base id plus the buffer's capacity: the buffer is full when
    /// `next` reaches it.
    end: Variable,
    /// The address the record of id 0 would have in the buffer (its
    /// address less base · record size): a record is at `records + id ·
    /// size`.
    records: Variable,
}

/// The bytes of a staged Delta record ([`runtime::Staged`]).
const STAGED_BYTES: i64 = std::mem::size_of::<runtime::Staged>() as i64;

/// The operands `(∂, c)` of a `chain(∂, c)` in generated code.
type ChainOperands = (ir::Value, ir::Value);

/// Pure values made in straight-line code, by key: a value made in a block
/// is usable anywhere after it there, and in a block that only that block
/// jumps to ([`BlockMemo::continue_into`]). Looking up or adding from
/// another block forgets what was made.
struct BlockMemo<K> {
    block: Option<ir::Block>,
    made: Vec<(K, ir::Value)>,
}

impl<K> Default for BlockMemo<K> {
    fn default() -> Self {
        BlockMemo {
            block: None,
            made: Vec::new(),
        }
    }
}

impl<K: PartialEq> BlockMemo<K> {
    fn enter(&mut self, block: Option<ir::Block>) {
        if self.block != block {
            self.block = block;
            self.made.clear();
        }
    }

    /// The value made for `key` in `block`'s straight-line code, if any.
    fn get(&mut self, block: Option<ir::Block>, key: &K) -> Option<ir::Value> {
        self.enter(block);
        self.made.iter().find(|(k, _)| k == key).map(|&(_, v)| v)
    }

    fn insert(&mut self, block: Option<ir::Block>, key: K, value: ir::Value) {
        self.enter(block);
        self.made.push((key, value));
    }

    /// `to` continues `from` (entered from it alone, after a diamond):
    /// what was made in `from` stays usable.
    fn continue_into(&mut self, from: Option<ir::Block>, to: ir::Block) {
        if self.block == from {
            self.block = Some(to);
        }
    }
}

impl<'a, 'b, 'p> FnGen<'a, 'b, 'p> {
    fn build(cg: &'a mut Codegen<'p>, b: &'a mut FunctionBuilder<'b>, job: &Job) -> R<()> {
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let params = b.block_params(entry).to_vec();
        let rets: Vec<types::Type> = b
            .func
            .signature
            .returns
            .iter()
            .map(|p| p.value_type)
            .collect();
        let unwind = b.create_block();
        b.set_cold_block(unwind);
        let mut g = FnGen {
            cg,
            b,
            ctx: params[0],
            vars: HashMap::new(),
            owned: Vec::new(),
            unwind,
            current: None,
            rets,
            funcs: HashMap::new(),
            span_arg: None,
            inlining: Vec::new(),
            inlined_nodes: 0,
            inline_cap: INLINE_BUDGET,
            lengths: HashMap::new(),
            below: HashMap::new(),
            hoisted: HashMap::new(),
            known_len: HashMap::new(),
            sweep_view: None,
            math_calls: BlockMemo::default(),
            terms_made: BlockMemo::default(),
            chains: HashMap::new(),
            staged: None,
        };
        if let Job::Fun(f) = job
            && g.cg.staged_appenders[f.0 as usize]
        {
            g.staged = Some(StagedCursor {
                next: g.b.declare_var(types::I64),
                end: g.b.declare_var(types::I64),
                records: g.b.declare_var(PTR),
            });
            g.load_staged();
        }
        match job {
            Job::Fun(f) => g.fun(*f, &params)?,
            Job::ClosureCode(f) => g.closure_code(*f, &params)?,
            Job::ClosureDrop(f) => g.closure_drop(*f, &params)?,
            Job::VecDrop(t) => g.vec_drop(t, params[1])?,
            Job::Global(gid) => g.global(*gid, params[1])?,
            Job::Entry(e) => g.entry(*e, params[1], params[2])?,
            Job::Release(e) => g.host_release(*e, params[1])?,
            Job::Preserving(target, types) => {
                let f = g.cg.import(target, types, &[])?;
                g.call(f, &params);
                g.b.ins().return_(&[]);
            }
        }
        // The unwind block: return zeros.
        g.b.switch_to_block(unwind);
        let zeros: Vals = g.rets.clone().iter().map(|&t| g.zero(t)).collect();
        g.b.ins().return_(&zeros);
        Ok(())
    }

    /// Prints `label: VALUE` for the value `vals` of type `ty` (left alive):
    /// its slots go to a stack area laid out as an entry's result, which
    /// [`runtime::rt_trace`] reads by type.
    fn trace(&mut self, label: &str, ty: &Type, vals: &[ir::Value]) -> R<()> {
        let site = Box::new(runtime::TraceSite {
            label: label.to_string(),
            ty: ty.clone(),
        });
        let site_addr = &*site as *const runtime::TraceSite as i64;
        self.cg.traces.push(site);
        let bytes = (SLOT as usize * vals.len().max(1)) as u32;
        let area = self.b.create_sized_stack_slot(ir::StackSlotData::new(
            ir::StackSlotKind::ExplicitSlot,
            bytes,
            3,
        ));
        for (k, &v) in vals.iter().enumerate() {
            // A Bool is one byte: widen it so the whole slot is defined.
            let v = if self.b.func.dfg.value_type(v) == types::I8 {
                self.b.ins().uextend(types::I64, v)
            } else {
                v
            };
            self.b
                .ins()
                .stack_store(PTR, v, area, (SLOT * k as i64) as i32);
        }
        let slots = self.b.ins().stack_addr(PTR, area, 0);
        let site = self.b.ins().iconst(PTR, site_addr);
        let f = self.cg.import("rt_trace", &[PTR, PTR, PTR], &[])?;
        let f = self.func_ref(f);
        self.b.ins().call(f, &[self.ctx, site, slots]);
        Ok(())
    }

    /// An operation on a reverse level's trace. The frequent ones are
    /// inline: beginning and ending a level on a parked trace
    /// ([`FnGen::begin_parked`]), appending a Delta or an input (into the
    /// trace's buffer, lent, at the outermost level; to the wide records
    /// above it), and
    /// above the outermost level the count of Deltas and, around and in the
    /// generated sweep, setting, reading and writing wide records and
    /// adjoints in place ([`runtime::WideView`]). The others are a call of
    /// their runtime function (`runtime::rt_tape_*`) with the context and
    /// the slot first. Wide weights and adjoint components are 64-bit words
    /// (an `f64` by its bits).
    fn tape(&mut self, op: TapeOp, slot: u8, args: &[Expr], ty: &Type, span: Span) -> R<Vals> {
        if let (
            TapeOp::Inputs | TapeOp::Adjoints | TapeOp::AdjointsAgain | TapeOp::SeedOutputs,
            [v],
        ) = (op, args)
        {
            return self.tape_vector(op, slot, v, ty, span);
        }
        if let (TapeOp::DotTerms, [u, v, n]) = (op, args) {
            return self.tape_dot(slot, (u, v, n), span);
        }
        let mut operands = Vec::new();
        for a in args {
            operands.extend(self.owned_value(a)?);
        }
        let literal = |k: usize| match args.get(k).map(|a| &a.kind) {
            Some(ExprKind::Lit(Lit::Int(n))) => Some(*n),
            _ => None,
        };
        // Level 1 (the outermost reverse level) keeps its trace in the
        // staging that generated code writes in place; the levels above it
        // in wide records.
        let staged = usize::from(slot) == runtime::STAGED_SLOT;
        let inline = match (op, &operands[..]) {
            // A level that is not a pullback's replay (operands: width,
            // replay) begins and ends on the slot's parked trace, if the
            // runtime parked one of its width (level 1's changing the
            // staging inline: its cursor is written back and reloaded).
            (TapeOp::Begin, _) if literal(1) == Some(0) => {
                if let Some(width) = literal(0) {
                    self.around_staging(staged, |g| g.begin_parked(slot, width, &operands, span))?;
                    return Ok(Vec::new());
                }
                None
            }
            (TapeOp::End, &[]) => {
                self.around_staging(staged, |g| g.end_parked(slot, span))?;
                return Ok(Vec::new());
            }
            // Plain weights: only the outermost level has them.
            (TapeOp::Push, &[p0, w0, p1, w1]) if staged => {
                Some(self.staged_push(p0, w0, p1, w1, span)?)
            }
            (TapeOp::Push, _) => {
                return Err(internal("a plain Delta below the outermost level", span));
            }
            (TapeOp::Combine, &[p0, w0, a0, p1, w1, a1]) if staged => {
                return self.staged_combine((p0, w0, a0), (p1, w1, a1), span);
            }
            (TapeOp::Input, &[]) if staged => Some(self.staged_input(span)?),
            (TapeOp::Input, weights) if !weights.is_empty() => {
                Some(self.wide_input(slot, weights, span)?)
            }
            (TapeOp::Input, _) => {
                return Err(internal(
                    "an input without its weights above the outermost level",
                    span,
                ));
            }
            // Above the outermost level (wide records only), the count the
            // view keeps.
            (TapeOp::Len, &[]) if !staged => Some(self.wide_field(slot, WideView::LEN)),
            (TapeOp::Adjoint, &[id]) if staged => Some(self.staged_adjoint(id)?),
            (TapeOp::PushWide, &[p0, p1, ref weights @ ..]) => {
                Some(self.wide_push(slot, (p0, p1), weights, span)?)
            }
            (TapeOp::Parent, &[id, k]) => Some(self.wide_record(slot, (id, k), 0, &Type::Int)),
            (TapeOp::Weight, &[id, j]) => Some(self.wide_record(slot, (id, j), 2, ty)),
            (TapeOp::AdjGet, &[id, j]) => {
                let at = self.wide_adjoint(slot, id, j);
                let flags = self.wide_buffer_flags();
                Some(self.b.ins().load(word_type(ty), flags, at, 0))
            }
            (TapeOp::AdjInit, zero) if !staged => {
                self.wide_adj_init(slot, zero, span)?;
                return Ok(Vec::new());
            }
            // A resumed trace's inputs are its first Deltas: ids counted
            // inline from 0 (`runtime::InputsAgain`, set by `Resume`).
            (TapeOp::InputAgain, []) if staged => {
                let next = self.ctx_word(Ctx::AGAIN_NEXT);
                let end = self.ctx_word(Ctx::AGAIN_END);
                let more = self.b.ins().icmp(IntCC::SignedLessThan, next, end);
                let after = self.b.ins().iadd_imm_s(next, 1);
                let after = self.b.ins().select(more, after, next);
                self.b
                    .ins()
                    .store(flags(), after, self.ctx, Ctx::AGAIN_NEXT);
                let none = self.b.ins().iconst(types::I64, -1);
                Some(self.b.ins().select(more, next, none))
            }
            (TapeOp::AdjSet, &[id, j, v]) => {
                let at = self.wide_adjoint(slot, id, j);
                let v = self.word(v);
                let flags = self.wide_buffer_flags();
                self.b.ins().store(flags, v, at, 0);
                return Ok(Vec::new());
            }
            _ => None,
        };
        if let Some(v) = inline {
            return Ok(vec![v]);
        }
        self.tape_call(op, slot, operands, span)
    }

    /// A trace operation on a vector of the outermost reverse level
    /// (`Inputs`, `Adjoints`, `AdjointsAgain`, `SeedOutputs`): the result
    /// vector (if any) made here and filled by one runtime call
    /// (`runtime::rt_tape_inputs` …) that goes over the elements, as tight
    /// as the operation on one real inline, without its checks of the
    /// buffer's room and the adjoints' view per element (a vector's inputs
    /// took 33 instructions each in a `map` of `Input`, its adjoints
    /// 18–22), or as one call where there was one per real (`SeedOutput`).
    fn tape_vector(&mut self, op: TapeOp, slot: u8, v: &Expr, ty: &Type, span: Span) -> R<Vals> {
        let elem = match ty {
            Type::Vec(elem) => Some(&**elem),
            Type::Unit => None,
            _ => return Err(internal("a vector trace operation of another type", span)),
        };
        if usize::from(slot) != runtime::STAGED_SLOT {
            return Err(internal(
                "a vector trace operation above the outermost level",
                span,
            ));
        }
        let name = match op {
            TapeOp::Inputs => "rt_tape_inputs",
            TapeOp::Adjoints => "rt_tape_adjoints",
            TapeOp::AdjointsAgain => "rt_tape_adjoints_again",
            _ => "rt_tape_seed_outputs",
        };
        let (src, owned) = self.borrowed(v)?;
        let dst = match elem {
            Some(elem) => {
                let n = self.vec_len(src[0]);
                Some(self.alloc_vec(elem, n, span)?)
            }
            None => None,
        };
        let f = self.cg.import(name, &[PTR, types::I32, PTR, PTR], &[])?;
        let s = self.cg.span_index(span);
        let s = self.b.ins().iconst(types::I32, s);
        let out = match dst {
            Some(v) => v,
            None => self.b.ins().iconst(PTR, 0),
        };
        self.call(f, &[self.ctx, s, src[0], out]);
        if op == TapeOp::Inputs {
            // Making room for the inputs' Deltas can go over the budget.
            self.check_failed();
        }
        self.release(&v.ty, &src, owned)?;
        Ok(dst.into_iter().collect())
    }

    /// `DotTerms` (a sum of products recorded as one Delta over their
    /// terms): one call of `runtime::rt_tape_dot` on the two vectors,
    /// borrowed, which writes the primal into a stack slot and returns the
    /// Delta's id (−1 if the sum is to be recorded real by real).
    fn tape_dot(&mut self, slot: u8, (u, v, n): (&Expr, &Expr, &Expr), span: Span) -> R<Vals> {
        if usize::from(slot) != runtime::STAGED_SLOT {
            return Err(internal(
                "a sum of products above the outermost level",
                span,
            ));
        }
        let (us, u_owned) = self.borrowed(u)?;
        let (vs, v_owned) = self.borrowed(v)?;
        let n = self.owned_value(n)?[0];
        let area = self.b.create_sized_stack_slot(ir::StackSlotData::new(
            ir::StackSlotKind::ExplicitSlot,
            SLOT as u32,
            3,
        ));
        let primal_at = self.b.ins().stack_addr(PTR, area, 0);
        let f = self.cg.import(
            "rt_tape_dot",
            &[PTR, types::I32, PTR, PTR, types::I64, PTR],
            &[types::I64],
        )?;
        let s = self.cg.span_index(span);
        let s = self.b.ins().iconst(types::I32, s);
        let id = self.call(f, &[self.ctx, s, us[0], vs[0], n, primal_at])[0];
        // Making room for the Deltas can go over the budget.
        self.check_failed();
        let primal = self.b.ins().stack_load(PTR, types::F64, area, 0);
        self.release(&v.ty, &vs, v_owned)?;
        self.release(&u.ty, &us, u_owned)?;
        Ok(vec![primal, id])
    }

    /// A trace operation by a call of its runtime function
    /// (`runtime::rt_tape_*`), with the context and the slot first.
    fn tape_call(&mut self, op: TapeOp, slot: u8, operands: Vec<ir::Value>, span: Span) -> R<Vals> {
        let mut vals = vec![self.ctx, self.b.ins().iconst(types::I64, i64::from(slot))];
        let (name, params, rets): (_, Vec<types::Type>, &[types::Type]) = match op {
            TapeOp::Begin => ("rt_tape_begin", vec![types::I64, types::I64], &[]),
            TapeOp::Seed => ("rt_tape_seed", vec![types::I64, types::F64], &[]),
            TapeOp::Sweep => ("rt_tape_sweep", vec![], &[]),
            TapeOp::Adjoint => ("rt_tape_adjoint", vec![types::I64], &[types::F64]),
            TapeOp::Len => ("rt_tape_len", vec![], &[types::I64]),
            TapeOp::Push
            | TapeOp::Input
            | TapeOp::Inputs
            | TapeOp::SeedOutputs
            | TapeOp::Adjoints
            | TapeOp::AdjointsAgain
            | TapeOp::InputAgain
            | TapeOp::PushWide
            | TapeOp::Combine
            | TapeOp::AdjInit
            | TapeOp::Parent
            | TapeOp::Weight
            | TapeOp::AdjGet
            | TapeOp::AdjSet
            | TapeOp::DotTerms => {
                return Err(internal("a trace operation with other operands", span));
            }
            TapeOp::End => ("rt_tape_end", vec![], &[]),
            TapeOp::Output => ("rt_tape_output", vec![types::I64, types::F64], &[]),
            TapeOp::Keep => ("rt_tape_keep", vec![], &[types::I64]),
            TapeOp::Resume => (
                "rt_tape_resume",
                vec![types::I64, types::I64],
                &[types::I64],
            ),
            TapeOp::SeedOutput => ("rt_tape_seed_output", vec![types::I64, types::F64], &[]),
        };
        vals.extend(operands);
        let mut params = params;
        params.splice(0..0, [PTR, types::I64]);
        if vals.len() != params.len() {
            return Err(internal("a trace operation with other operands", span));
        }
        let f = self.cg.import(name, &params, rets)?;
        Ok(self.call(f, &vals))
    }

    /// Appends a Delta with parents `p0` and `p1` inline, returning its id:
    /// none and −1 if both are absent (−1), else as [`FnGen::append_record`].
    fn append_delta(
        &mut self,
        (p0, p1): (ir::Value, ir::Value),
        buffer: Buffer,
        write: impl FnOnce(&mut Self, ir::Value) -> ir::Value,
        span: Span,
    ) -> R<ir::Value> {
        // Ids are −1 or non-negative: both are −1 exactly when their bits'
        // conjunction is.
        let both = self.b.ins().band(p0, p1);
        let both = self.b.ins().icmp_imm_s(IntCC::Equal, both, -1);
        let push = self.b.create_block();
        let done = self.b.create_block();
        self.b.append_block_param(done, types::I64);
        let none = self.b.ins().iconst(types::I64, -1);
        self.b.ins().brif(both, done, &[none.into()], push, &[]);

        self.b.switch_to_block(push);
        let id = self.append_record(buffer, write, span)?;
        self.b.ins().jump(done, &[id.into()]);

        self.b.switch_to_block(done);
        Ok(self.b.block_params(done)[0])
    }

    /// `TapeOp::Begin` of a level of weights of `width` words that is not a
    /// replay: inline on the slot's parked trace if the runtime parked one
    /// of that width and none is lent ([`runtime::Parked`]), else by the
    /// runtime. On a wide level the slot's view is saved and the parked
    /// trace's made the slot's; on level 1 (plain weights, staged Deltas)
    /// the parked trace's spare capacity is lent instead of the scratch
    /// buffer ([`runtime::ParkedBuffer`]). (`operands`: the width and the
    /// replay flag.)
    fn begin_parked(&mut self, slot: u8, width: i64, operands: &[ir::Value], span: Span) -> R<()> {
        let staged = usize::from(slot) == runtime::STAGED_SLOT;
        let state = Self::parked_state(slot);
        let mut ready = self.ctx_word_is(state, Parked::READY);
        if !staged {
            let parked = self.ctx_word(Parked::at(slot, Parked::WIDTH));
            let same = self.b.ins().icmp_imm_s(IntCC::Equal, parked, width);
            ready = self.b.ins().band(ready, same);
        }
        let lend = |g: &mut Self| {
            if staged {
                let ptr = g.ctx_word(Ctx::PARKED_PTR);
                let cap = g.ctx_word(Ctx::PARKED_CAP);
                g.lend_staging(ptr, cap);
            } else {
                g.copy_view(WideView::at(slot, 0), Parked::at(slot, Parked::OUTER));
                g.copy_view(Parked::at(slot, Parked::VIEW), WideView::at(slot, 0));
            }
            g.set_ctx_word(state, Parked::LENT as i64);
        };
        self.inline_or_call(ready, lend, TapeOp::Begin, slot, operands.to_vec(), span)
    }

    /// `TapeOp::End`: inline if the level runs on the slot's lent parked
    /// trace (a wide slot's view put back as it was when the level began;
    /// on level 1 the scratch buffer lent again), the trace parked again as
    /// it is; else by the runtime.
    fn end_parked(&mut self, slot: u8, span: Span) -> R<()> {
        let state = Self::parked_state(slot);
        let lent = self.ctx_word_is(state, Parked::LENT);
        let give_back = |g: &mut Self| {
            if usize::from(slot) == runtime::STAGED_SLOT {
                let scratch = g.ctx_word(Ctx::STAGING_SCRATCH);
                let cap = g.b.ins().iconst(types::I64, runtime::SCRATCH as i64);
                g.lend_staging(scratch, cap);
            } else {
                g.copy_view(Parked::at(slot, Parked::OUTER), WideView::at(slot, 0));
            }
            g.set_ctx_word(state, Parked::READY as i64);
        };
        self.inline_or_call(lent, give_back, TapeOp::End, slot, Vec::new(), span)
    }

    /// The offset in the context of the state of `slot`'s parked trace.
    fn parked_state(slot: u8) -> i32 {
        if usize::from(slot) == runtime::STAGED_SLOT {
            Ctx::PARKED_STATE
        } else {
            Parked::at(slot, Parked::STATE)
        }
    }

    /// Whether the context word at `offset` is `value`.
    fn ctx_word_is(&mut self, offset: i32, value: u64) -> ir::Value {
        let w = self.ctx_word(offset);
        self.b.ins().icmp_imm_s(IntCC::Equal, w, value as i64)
    }

    /// `inline` if `test` holds, else the trace operation `op` by a call of
    /// the runtime ([`FnGen::tape_call`]); then on.
    fn inline_or_call(
        &mut self,
        test: ir::Value,
        inline: impl FnOnce(&mut Self),
        op: TapeOp,
        slot: u8,
        operands: Vec<ir::Value>,
        span: Span,
    ) -> R<()> {
        let (yes, no, done) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.ins().brif(test, yes, &[], no, &[]);
        self.b.switch_to_block(yes);
        inline(self);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(no);
        self.tape_call(op, slot, operands, span)?;
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(done);
        Ok(())
    }

    /// Lends level 1's staging the empty buffer of `cap` Deltas at `ptr`
    /// (as the runtime's `flush` lends a trace's spare capacity).
    fn lend_staging(&mut self, ptr: ir::Value, cap: ir::Value) {
        let zero = self.b.ins().iconst(types::I64, 0);
        let c = self.ctx;
        self.b.ins().store(flags(), ptr, c, Ctx::STAGING_PTR);
        self.b.ins().store(flags(), zero, c, Ctx::STAGING_LEN);
        self.b.ins().store(flags(), cap, c, Ctx::STAGING_CAP);
        self.b.ins().store(flags(), zero, c, Ctx::STAGING_BASE);
        self.b
            .ins()
            .store(flags(), zero, c, Ctx::STAGING_ADJOINTS_LEN);
    }

    /// Stores the constant `value` in the context word at `offset`.
    fn set_ctx_word(&mut self, offset: i32, value: i64) {
        let v = self.b.ins().iconst(types::I64, value);
        self.b.ins().store(flags(), v, self.ctx, offset);
    }

    /// Copies a [`WideView`] within the context, word by word.
    fn copy_view(&mut self, from: i32, to: i32) {
        const WORDS: i32 = (size_of::<WideView>() / 8) as i32;
        for k in 0..WORDS {
            let w = self.ctx_word(from + 8 * k);
            self.b.ins().store(flags(), w, self.ctx, to + 8 * k);
        }
    }

    /// Appends a record inline to `buffer`, returning its id: if the buffer
    /// has no room, it is first made room in by a call of its runtime
    /// function (a cold path, which may raise "out of memory"); then `write`
    /// appends the record at the buffer's count of records, which it is
    /// given (read once on the common path), and returns its id.
    fn append_record(
        &mut self,
        buffer: Buffer,
        write: impl FnOnce(&mut Self, ir::Value) -> ir::Value,
        span: Span,
    ) -> R<ir::Value> {
        let make_room = self.b.create_block();
        let append = self.b.create_block();
        self.b.append_block_param(append, types::I64);
        let len = self.buffer_len(buffer);
        let is_full = self.buffer_full(buffer, len);
        self.b.set_cold_block(make_room);
        self.b
            .ins()
            .brif(is_full, make_room, &[], append, &[len.into()]);

        self.b.switch_to_block(make_room);
        let (name, extra): (&'static str, Vec<i64>) = match buffer {
            Buffer::Staging => ("rt_tape_flush", vec![]),
            Buffer::Wide { slot, words, .. } => ("rt_tape_reserve", vec![i64::from(slot), words]),
        };
        let mut params = vec![PTR, types::I32];
        params.extend(extra.iter().map(|_| types::I64));
        // Through a `preserve_all` trampoline: with a plain call, every value
        // live across an append would have to survive a clobber of the
        // caller-saved registers, and the register allocator splits each
        // such value at every append — quadratic in a long straight-line
        // body (a chain of 2 500 recorded operations took 10 s and 3 GB to
        // compile).
        let f = self.cg.import_preserving(name, &params)?;
        let s = self.cg.span_index(span);
        let mut args = vec![self.ctx, self.b.ins().iconst(types::I32, s)];
        for k in extra {
            args.push(self.b.ins().iconst(types::I64, k));
        }
        self.call(f, &args);
        self.check_failed();
        // The rest of the rare path is out of line too.
        if let Some(rest) = self.b.current_block() {
            self.b.set_cold_block(rest);
        }
        let len = self.buffer_len(buffer);
        self.b.ins().jump(append, &[len.into()]);

        self.b.switch_to_block(append);
        let len = self.b.block_params(append)[0];
        Ok(write(self, len))
    }

    /// The count of records in `buffer`; for the staging with its cursor in
    /// variables, the next id ([`StagedCursor`]).
    fn buffer_len(&mut self, buffer: Buffer) -> ir::Value {
        match (buffer, self.staged) {
            (Buffer::Staging, Some(c)) => self.b.use_var(c.next),
            (Buffer::Staging, None) => self.ctx_word(Ctx::STAGING_LEN),
            (Buffer::Wide { slot, .. }, _) => self.wide_field(slot, WideView::LEN),
        }
    }

    /// True if `buffer`, holding `len` records (its [`FnGen::buffer_len`]),
    /// has no room for another (or none lent yet; or, for wide records, not
    /// of this record's stride).
    fn buffer_full(&mut self, buffer: Buffer, len: ir::Value) -> ir::Value {
        match buffer {
            Buffer::Staging if let Some(c) = self.staged => {
                let end = self.b.use_var(c.end);
                self.b
                    .ins()
                    .icmp(IntCC::UnsignedGreaterThanOrEqual, len, end)
            }
            Buffer::Staging => {
                let cap = self.ctx_word(Ctx::STAGING_CAP);
                self.b
                    .ins()
                    .icmp(IntCC::UnsignedGreaterThanOrEqual, len, cap)
            }
            Buffer::Wide { slot, words } => {
                let stride = 2 + words;
                let capacity = self.wide_field(slot, WideView::CAPACITY);
                let actual = self.wide_field(slot, WideView::STRIDE);
                let no_room = self
                    .b
                    .ins()
                    .icmp(IntCC::UnsignedGreaterThanOrEqual, len, capacity);
                let other = self.b.ins().icmp_imm_s(IntCC::NotEqual, actual, stride);
                self.b.ins().bor(no_room, other)
            }
        }
    }

    /// `emit`, code that may read or change level 1's staging if
    /// `touches` (a call, a level 1 begun or ended inline), between a
    /// write-back and a reload of the cursor this function keeps in
    /// variables ([`StagedCursor`]).
    fn around_staging<T>(&mut self, touches: bool, emit: impl FnOnce(&mut Self) -> T) -> T {
        if touches {
            self.sync_staged();
        }
        let r = emit(self);
        if touches {
            self.load_staged();
        }
        r
    }

    /// Loads level 1's staging cursor into its variables (if this function
    /// keeps it there, [`StagedCursor`]).
    fn load_staged(&mut self) {
        let Some(c) = self.staged else { return };
        let len = self.ctx_word(Ctx::STAGING_LEN);
        let cap = self.ctx_word(Ctx::STAGING_CAP);
        let base = self.ctx_word(Ctx::STAGING_BASE);
        let ptr = self.b.ins().load(PTR, flags(), self.ctx, Ctx::STAGING_PTR);
        let next = self.b.ins().iadd(base, len);
        let end = self.b.ins().iadd(base, cap);
        let before = self.b.ins().imul_imm_s(base, STAGED_BYTES);
        let records = self.b.ins().isub(ptr, before);
        self.b.def_var(c.next, next);
        self.b.def_var(c.end, end);
        self.b.def_var(c.records, records);
    }

    /// Writes level 1's staging length back to the context from the
    /// variables (if this function keeps its cursor there).
    fn sync_staged(&mut self) {
        let Some(c) = self.staged else { return };
        let next = self.b.use_var(c.next);
        let base = self.ctx_word(Ctx::STAGING_BASE);
        let len = self.b.ins().isub(next, base);
        self.b.ins().store(flags(), len, self.ctx, Ctx::STAGING_LEN);
    }

    /// Writes the staged Delta `(p0, p1; w0, w1)` (parents as `I32`s) as
    /// record `len` of the lent capacity, which has room; returns its id.
    /// (With the cursor in variables, `len` is that id.)
    fn write_staged(
        &mut self,
        len: ir::Value,
        (p0, p1): (ir::Value, ir::Value),
        weights: Weights,
    ) -> ir::Value {
        let offset = self.b.ins().imul_imm_s(len, STAGED_BYTES);
        let at = match self.staged {
            Some(c) => self.b.use_var(c.records),
            None => self.b.ins().load(PTR, flags(), self.ctx, Ctx::STAGING_PTR),
        };
        let at = self.b.ins().iadd(at, offset);
        self.b.ins().store(flags(), p0, at, 0);
        self.b.ins().store(flags(), p1, at, 4);
        match weights {
            Weights::Scalars(w0, w1) => {
                self.b.ins().store(flags(), w0, at, 8);
                self.b.ins().store(flags(), w1, at, 16);
            }
            Weights::Lanes(both) => {
                // Not `aligned`: a record is 8-byte aligned, the vector 16.
                let lanes = MemFlagsData::new()
                    .with_notrap()
                    .with_endianness(ir::Endianness::Little);
                self.b.ins().store(lanes, both, at, 8);
            }
        }
        let next = self.b.ins().iadd_imm_s(len, 1);
        if let Some(c) = self.staged {
            // `len` is the id.
            self.b.def_var(c.next, next);
            return len;
        }
        let base = self.ctx_word(Ctx::STAGING_BASE);
        self.b
            .ins()
            .store(flags(), next, self.ctx, Ctx::STAGING_LEN);
        self.b.ins().iadd(base, len)
    }

    /// `TapeOp::Push` (only on the outermost reverse level), inline: the
    /// Delta `w0 · Var p0 + w1 · Var p1` written into the trace's buffer
    /// ([`runtime::Staging`]) in the trace's layout, the runtime called only
    /// when the buffer is full. An absent term (a constant of the level,
    /// id −1) is written in its place as it is: −1 is the trace's
    /// `NO_PARENT` as a `u32`, which every sweep skips whatever the weight
    /// beside it, so the sweep adds what it adds for the interpreter's
    /// entry (which moves a lone term first, with weight 0 beside it).
    fn staged_push(
        &mut self,
        p0: ir::Value,
        w0: ir::Value,
        p1: ir::Value,
        w1: ir::Value,
        span: Span,
    ) -> R<ir::Value> {
        let write = Self::staged_writer((p0, p1), Weights::Scalars(w0, w1));
        self.append_delta((p0, p1), Buffer::Staging, write, span)
    }

    /// Writes the plain Delta `w₀ · Var p0 + w₁ · Var p1` (ids as `Int`s)
    /// at a given count of staged Deltas; gives its id.
    fn staged_writer(
        (p0, p1): (ir::Value, ir::Value),
        weights: Weights,
    ) -> impl FnOnce(&mut Self, ir::Value) -> ir::Value {
        move |g: &mut Self, len| {
            let p0 = g.b.ins().ireduce(types::I32, p0);
            let p1 = g.b.ins().ireduce(types::I32, p1);
            g.write_staged(len, (p0, p1), weights)
        }
    }

    /// `TapeOp::Combine` on the outermost reverse level, inline: two
    /// different variables (the common case, one test) append their Delta
    /// and give it coefficient 1; the rest — one variable twice (`x * x`,
    /// not rare), or one operand a constant of the level — is chosen by
    /// `select`s.
    fn staged_combine(
        &mut self,
        (p0, w0, a0): (ir::Value, ir::Value, ir::Value),
        (p1, w1, a1): (ir::Value, ir::Value, ir::Value),
        span: Span,
    ) -> R<Vals> {
        // Ids are −1 or non-negative: both are variables when their bits'
        // disjunction is non-negative. Two branches, not one on the
        // conjunction (which x64 forms in flags and bytes: 9 instructions
        // to the branches' 5).
        let lanes = self.weights_in_lanes(w0, w1);
        let either = self.b.ins().bor(p0, p1);
        let variables = self
            .b
            .ins()
            .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, either, 0);
        let test_differ = self.b.create_block();
        let push = self.b.create_block();
        let other = self.b.create_block();
        let done = self.b.create_block();
        self.b.append_block_param(done, types::I64);
        self.b.append_block_param(done, types::F64);
        self.b.ins().brif(variables, test_differ, &[], other, &[]);
        self.b.switch_to_block(test_differ);
        let differ = self.b.ins().icmp(IntCC::NotEqual, p0, p1);
        self.b.ins().brif(differ, push, &[], other, &[]);

        self.b.switch_to_block(push);
        let weights = lanes.map_or(Weights::Scalars(w0, w1), Weights::Lanes);
        let write = Self::staged_writer((p0, p1), weights);
        let id = self.append_record(Buffer::Staging, write, span)?;
        let one = self.b.ins().f64const(1.0);
        self.b.ins().jump(done, &[id.into(), one.into()]);

        self.b.switch_to_block(other);
        let (w0, w1, a0, a1) = match lanes {
            // The scalar weights, and an alone coefficient that is its
            // weight, from the lanes.
            Some(both) => {
                let v0 = self.b.ins().extractlane(both, 0);
                let v1 = self.b.ins().extractlane(both, 1);
                let a0 = if a0 == w0 { v0 } else { a0 };
                let a1 = if a1 == w1 { v1 } else { a1 };
                (v0, v1, a0, a1)
            }
            None => (w0, w1, a0, a1),
        };
        let sum = self.b.ins().fadd(w0, w1);
        let second_constant = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, p1, 0);
        let alone_id = self.b.ins().select(second_constant, p0, p1);
        let alone_c = self.b.ins().select(second_constant, a0, a1);
        let id = self.b.ins().select(variables, p0, alone_id);
        let c = self.b.ins().select(variables, sum, alone_c);
        self.b.ins().jump(done, &[id.into(), c.into()]);

        self.b.switch_to_block(done);
        Ok(self.b.block_params(done).to_vec())
    }

    /// `TapeOp::Input` on the outermost reverse level, inline: a Delta
    /// without parents written (the trace counts those that come first as
    /// its inputs, `Trace::append_in_place`).
    fn staged_input(&mut self, span: Span) -> R<ir::Value> {
        let write = |g: &mut Self, len| {
            let none = g.b.ins().iconst(types::I32, -1);
            let zero = g.b.ins().f64const(0.0);
            g.write_staged(len, (none, none), Weights::Scalars(zero, zero))
        };
        self.append_record(Buffer::Staging, write, span)
    }

    /// `TapeOp::Adjoint` on the outermost reverse level: read from the view
    /// of the inputs' adjoints the last sweep published
    /// ([`runtime::Staging`]), or asked of the runtime if it has none.
    fn staged_adjoint(&mut self, id: ir::Value) -> R<ir::Value> {
        let len = self.ctx_word(Ctx::STAGING_ADJOINTS_LEN);
        let inside = self.b.ins().icmp(IntCC::UnsignedLessThan, id, len);
        let read = self.b.create_block();
        let ask = self.b.create_block();
        let done = self.b.create_block();
        self.b.append_block_param(done, types::F64);
        self.b.set_cold_block(ask);
        self.b.ins().brif(inside, read, &[], ask, &[]);

        self.b.switch_to_block(read);
        let ptr = self
            .b
            .ins()
            .load(PTR, flags(), self.ctx, Ctx::STAGING_ADJOINTS);
        let offset = self.b.ins().imul_imm_s(id, 8);
        let at = self.b.ins().iadd(ptr, offset);
        let a = self.b.ins().load(types::F64, flags(), at, 0);
        self.b.ins().jump(done, &[a.into()]);

        self.b.switch_to_block(ask);
        let f = self.cg.import(
            "rt_tape_adjoint",
            &[PTR, types::I64, types::I64],
            &[types::F64],
        )?;
        let slot = self.b.ins().iconst(types::I64, runtime::STAGED_SLOT as i64);
        let a = self.call(f, &[self.ctx, slot, id]);
        self.b.ins().jump(done, &[a[0].into()]);

        self.b.switch_to_block(done);
        Ok(self.b.block_params(done)[0])
    }

    /// `TapeOp::PushWide`, inline: the Delta `w₀ · Var p0 + w₁ · Var p1`
    /// appended to the wide records of `slot` (`weights` are w₀'s then
    /// w₁'s components), parents in place (−1 for an absent one), as
    /// [`runtime::WideView`] lays them out; the runtime is called only when
    /// the records are full (or not of this Delta's stride).
    fn wide_push(
        &mut self,
        slot: u8,
        (p0, p1): (ir::Value, ir::Value),
        weights: &[ir::Value],
        span: Span,
    ) -> R<ir::Value> {
        let write = Self::wide_writer(slot, (p0, p1), weights);
        let buffer = Buffer::Wide {
            slot,
            words: weights.len() as i64,
        };
        self.append_delta((p0, p1), buffer, write, span)
    }

    /// `TapeOp::Input` above other levels, inline: a wide Delta with no
    /// terms (parents −1, `weights` zero) appended to the records of `slot`.
    fn wide_input(&mut self, slot: u8, weights: &[ir::Value], span: Span) -> R<ir::Value> {
        let none = self.b.ins().iconst(types::I64, -1);
        let write = Self::wide_writer(slot, (none, none), weights);
        let buffer = Buffer::Wide {
            slot,
            words: weights.len() as i64,
        };
        self.append_record(buffer, write, span)
    }

    /// `TapeOp::AdjInit`, inline: every Delta's wide adjoint of `slot` set
    /// to the words of `zero`, one word each of the view's width (the
    /// runtime asked to lengthen the adjoints first if they are too short,
    /// a cold path; kept between levels, they seldom are).
    fn wide_adj_init(&mut self, slot: u8, zero: &[ir::Value], span: Span) -> R<()> {
        let words: Vec<ir::Value> = zero.iter().map(|&v| self.word(v)).collect();
        let len = self.wide_field(slot, WideView::LEN);
        let need = self.b.ins().imul_imm_s(len, words.len() as i64);
        let last = self.wide_field(slot, WideView::LAST_ADJOINT_WORD);
        let room = self.b.ins().iadd_imm_s(last, 1);
        let short = self.b.ins().icmp(IntCC::UnsignedGreaterThan, need, room);
        let grow = self.b.create_block();
        let fill = self.b.create_block();
        self.b.set_cold_block(grow);
        self.b.ins().brif(short, grow, &[], fill, &[]);

        self.b.switch_to_block(grow);
        let params = [PTR, types::I32, types::I64, types::I64];
        let f = self.cg.import_preserving("rt_tape_adj_reserve", &params)?;
        let s = self.cg.span_index(span);
        let s = self.b.ins().iconst(types::I32, s);
        let slot_v = self.b.ins().iconst(types::I64, i64::from(slot));
        self.call(f, &[self.ctx, s, slot_v, need]);
        self.check_failed();
        self.b.ins().jump(fill, &[]);

        self.b.switch_to_block(fill);
        // The `len · words` words from the buffer's start, which the test
        // above found in it: no index clamped, the view read once.
        let flags = self.wide_buffer_flags();
        let adjoints = self.wide_field(slot, WideView::ADJOINTS);
        let record = words.len() as i64 * SLOT;
        self.fold_index(len, &[], None, |g, id, _| {
            let offset = g.b.ins().imul_imm_s(id, record);
            let at = g.b.ins().iadd(adjoints, offset);
            for (j, &w) in words.iter().enumerate() {
                g.b.ins().store(flags, w, at, (SLOT * j as i64) as i32);
            }
            Ok(Vec::new())
        })?;
        Ok(())
    }

    /// Writes the wide record (parents `p0`, `p1`, then `weights`) at a
    /// given count of records of `slot` and counts it; gives its id.
    fn wide_writer<'w>(
        slot: u8,
        (p0, p1): (ir::Value, ir::Value),
        weights: &'w [ir::Value],
    ) -> impl FnOnce(&mut Self, ir::Value) -> ir::Value + 'w {
        let stride = 2 + weights.len() as i64;
        move |g: &mut Self, len| {
            let records = g.wide_field(slot, WideView::RECORDS);
            let offset = g.b.ins().imul_imm_s(len, stride * SLOT);
            let at = g.b.ins().iadd(records, offset);
            let region = g.wide_buffer_flags();
            for (k, &v) in [p0, p1].iter().chain(weights).enumerate() {
                let w = g.word(v);
                g.b.ins().store(region, w, at, (SLOT * k as i64) as i32);
            }
            let next = g.b.ins().iadd_imm_s(len, 1);
            let at = WideView::at(slot, WideView::LEN);
            g.b.ins().store(flags(), next, g.ctx, at);
            len
        }
    }

    /// The 64-bit field at `field` of the context's view of the wide
    /// buffers of `slot` ([`runtime::WideView`]).
    fn wide_field(&mut self, slot: u8, field: usize) -> ir::Value {
        if let Some((swept, view)) = &self.sweep_view
            && *swept == slot
            && let Some(&(_, v)) = view.iter().find(|(f, _)| *f == field)
        {
            return v;
        }
        self.ctx_word(WideView::at(slot, field))
    }

    /// The address of word `index` of the wide buffer at `buffer` of `slot`,
    /// the index clamped to that buffer's last word, `last` (a wrong id
    /// reads or writes a wrong word, never outside the buffer).
    fn wide_word(&mut self, slot: u8, buffer: usize, last: usize, index: ir::Value) -> ir::Value {
        let base = self.wide_field(slot, buffer);
        let last = self.wide_field(slot, last);
        let index = self.b.ins().umin(index, last);
        let offset = self.b.ins().ishl_imm_u(index, 3);
        self.b.ins().iadd(base, offset)
    }

    /// For loads and stores of wide buffers' words: an alias region of
    /// their own (only this inline code touches the buffers; a runtime
    /// call, which may move them, is a barrier for all regions), so that
    /// Cranelift need not assume an adjoint store changes other memory
    /// (2 % fewer instructions on saddle_FR).
    fn wide_buffer_flags(&mut self) -> MemFlagsData {
        let region = self.b.func.dfg.alias_regions.insert(ir::AliasRegionData {
            user_id: 0,
            description: "wide trace buffers".into(),
        });
        flags().with_alias_region(Some(region))
    }

    /// `TapeOp::Parent` and `Weight`, inline: word `first + k` (parent k
    /// from 0, weight component k from 2) of Delta `id`'s wide record, of
    /// type `ty`.
    fn wide_record(
        &mut self,
        slot: u8,
        (id, k): (ir::Value, ir::Value),
        first: i64,
        ty: &Type,
    ) -> ir::Value {
        let stride = self.wide_field(slot, WideView::STRIDE);
        let start = self.b.ins().imul(id, stride);
        let index = self.b.ins().iadd(start, k);
        let index = self.b.ins().iadd_imm_s(index, first);
        let at = self.wide_word(slot, WideView::RECORDS, WideView::LAST_RECORD_WORD, index);
        let flags = self.wide_buffer_flags();
        self.b.ins().load(word_type(ty), flags, at, 0)
    }

    /// The address of component `j` of Delta `id`'s wide adjoint.
    fn wide_adjoint(&mut self, slot: u8, id: ir::Value, j: ir::Value) -> ir::Value {
        let width = self.wide_field(slot, WideView::WIDTH);
        let start = self.b.ins().imul(id, width);
        let index = self.b.ins().iadd(start, j);
        self.wide_word(slot, WideView::ADJOINTS, WideView::LAST_ADJOINT_WORD, index)
    }

    /// A 64-bit word holding `v`: an `f64` by its bits, an integer as is.
    fn word(&mut self, v: ir::Value) -> ir::Value {
        match self.b.func.dfg.value_type(v) {
            types::F64 => self.b.ins().bitcast(types::I64, MemFlagsData::new(), v),
            types::I64 => v,
            _ => self.b.ins().uextend(types::I64, v),
        }
    }

    fn func_ref(&mut self, id: FuncId) -> FuncRef {
        if let Some(&r) = self.funcs.get(&id) {
            return r;
        }
        let r = self.cg.module.declare_func_in_func(id, self.b.func);
        self.funcs.insert(id, r);
        r
    }

    fn zero(&mut self, t: types::Type) -> ir::Value {
        if t == types::F64 {
            self.b.ins().f64const(0.0)
        } else {
            self.b.ins().iconst(t, 0)
        }
    }

    // ---- prologues and errors ----

    /// The checks before every call, as the interpreter makes them: native
    /// stack left, and the call limit if there is one.
    fn before_call(&mut self, span: Span) -> R<()> {
        let sp = self.b.ins().get_stack_pointer(PTR);
        let limit = self.b.ins().load(PTR, flags(), self.ctx, Ctx::STACK_LIMIT);
        let low = self.b.ins().icmp(IntCC::UnsignedLessThan, sp, limit);
        self.fail_if(low, ErrorKind::StackDepth, span, None)?;
        if self.cg.count_calls {
            self.count_call(span)?;
        }
        Ok(())
    }

    fn count_call(&mut self, span: Span) -> R<()> {
        let left = self.ctx_word(Ctx::CALLS_LEFT);
        let left = self.b.ins().iadd_imm_s(left, -1);
        self.b.ins().store(flags(), left, self.ctx, Ctx::CALLS_LEFT);
        let out = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, left, 0);
        self.fail_if(out, ErrorKind::CallLimit, span, None)
    }

    /// If `cond`, raise `kind` (with the message's numbers) and return.
    fn fail_if(
        &mut self,
        cond: ir::Value,
        kind: ErrorKind,
        span: Span,
        nums: Option<(ir::Value, ir::Value)>,
    ) -> R<()> {
        let bad = self.b.create_block();
        let ok = self.b.create_block();
        self.b.set_cold_block(bad);
        self.b.ins().brif(cond, bad, &[], ok, &[]);
        self.b.switch_to_block(bad);
        let err = self.cg.import(
            "rt_error",
            &[PTR, types::I32, types::I32, types::I64, types::I64],
            &[],
        )?;
        let err = self.func_ref(err);
        let k = self.b.ins().iconst(types::I32, kind as i64);
        let s = match self.span_arg.filter(|_| kind == ErrorKind::Cycle) {
            Some(v) => v,
            None => {
                let s = self.cg.span_index(span);
                self.b.ins().iconst(types::I32, s)
            }
        };
        let (x, y) = match nums {
            Some(n) => n,
            None => {
                let z = self.b.ins().iconst(types::I64, 0);
                (z, z)
            }
        };
        self.b.ins().call(err, &[self.ctx, k, s, x, y]);
        self.b.ins().jump(self.unwind, &[]);
        self.b.switch_to_block(ok);
        Ok(())
    }

    /// Raises the standard library's error `code` (`prim'fail code a b`)
    /// and returns; the value, for the code after it, is never used.
    fn fail_library(
        &mut self,
        code: ir::Value,
        a: ir::Value,
        b: ir::Value,
        span: Span,
    ) -> R<ir::Value> {
        let one = self.b.ins().iconst(types::I8, 1);
        let bad = self.b.create_block();
        let ok = self.b.create_block();
        self.b.set_cold_block(bad);
        self.b.ins().brif(one, bad, &[], ok, &[]);
        self.b.switch_to_block(bad);
        let fail = self.cg.import(
            "rt_fail",
            &[PTR, types::I32, types::I64, types::I64, types::I64],
            &[],
        )?;
        let fail = self.func_ref(fail);
        let s = self.cg.span_index(span);
        let s = self.b.ins().iconst(types::I32, s);
        self.b.ins().call(fail, &[self.ctx, s, code, a, b]);
        self.b.ins().jump(self.unwind, &[]);
        self.b.switch_to_block(ok);
        Ok(self.b.ins().iconst(types::I64, 0))
    }

    /// The 64-bit field of the run's context at `offset` ([`Ctx`]).
    fn ctx_word(&mut self, offset: i32) -> ir::Value {
        self.b.ins().load(types::I64, flags(), self.ctx, offset)
    }

    /// After a call that may have raised an error: return if it did.
    fn check_failed(&mut self) {
        let failed = self.ctx_word(Ctx::FAILED);
        let ok = self.b.create_block();
        self.b.ins().brif(failed, self.unwind, &[], ok, &[]);
        self.b.switch_to_block(ok);
    }

    /// After applying a closure that may have raised an error: return if
    /// it did, giving an error raised "at the application" (a pullback's
    /// cotangent of the wrong shape) this application's position.
    fn check_failed_at(&mut self, span: Span) -> R<()> {
        let failed = self.ctx_word(Ctx::FAILED);
        let bad = self.b.create_block();
        let ok = self.b.create_block();
        self.b.set_cold_block(bad);
        self.b.ins().brif(failed, bad, &[], ok, &[]);
        self.b.switch_to_block(bad);
        self.unwind_from(span)?;
        self.b.switch_to_block(ok);
        Ok(())
    }

    /// Ends the current block: an error returning through the closure
    /// application at `span` gets its position there, and unwinds.
    fn unwind_from(&mut self, span: Span) -> R<()> {
        let f = self.cg.import("rt_error_site", &[PTR, types::I32], &[])?;
        let s = self.cg.span_index(span);
        let s = self.b.ins().iconst(types::I32, s);
        self.call(f, &[self.ctx, s]);
        self.b.ins().jump(self.unwind, &[]);
        Ok(())
    }

    fn call(&mut self, id: FuncId, args: &[ir::Value]) -> Vals {
        let touches = !self.cg.staging_neutral.contains(&id);
        self.around_staging(touches, |g| {
            let r = g.func_ref(id);
            let inst = g.b.ins().call(r, args);
            g.b.inst_results(inst).to_vec()
        })
    }

    // ---- the kinds of function ----

    fn fun(&mut self, f: FunId, params: &[ir::Value]) -> R<()> {
        let fun = self.cg.prog.fun(f);
        // Captures, then the parameters (which a self tail call re-binds).
        let mut at = 1;
        for &c in &fun.captures {
            let w = layout::width(self.cg.prog.local_ty(c));
            self.vars.insert(c, params[at..at + w].to_vec());
            at += w;
        }
        if let Some(slot) = swept_slot(&fun.body) {
            let fields = [
                WideView::STRIDE,
                WideView::WIDTH,
                WideView::RECORDS,
                WideView::LAST_RECORD_WORD,
                WideView::ADJOINTS,
                WideView::LAST_ADJOINT_WORD,
            ];
            let view = fields.map(|f| (f, self.ctx_word(WideView::at(slot, f))));
            self.sweep_view = Some((slot, view));
        }
        let header = self.b.create_block();
        for &v in &params[at..] {
            let t = self.b.func.dfg.value_type(v);
            self.b.append_block_param(header, t);
        }
        self.b.ins().jump(header, &bargs(&params[at..]));
        self.b.switch_to_block(header);
        let args = self.b.block_params(header).to_vec();
        self.current = Some((f, header));
        let mut at = 0;
        for (p, t) in &fun.params {
            let w = layout::width(t);
            self.bind(p, t, &args[at..at + w]);
            at += w;
        }
        let r = self.expr(&fun.body, true)?;
        if let Some(vals) = r {
            self.drop_scope(0);
            self.sync_staged();
            self.b.ins().return_(&vals);
        }
        Ok(())
    }

    /// Closure code: load the captures from the closure, call the function.
    fn closure_code(&mut self, f: FunId, params: &[ir::Value]) -> R<()> {
        let fun = self.cg.prog.fun(f);
        if !self.cg.applied.contains(&f) {
            // Never run ([`applied_closures`]); reaching it is a compiler
            // bug, reported as such.
            let always = self.b.ins().iconst(types::I8, 1);
            self.fail_if(always, ErrorKind::Internal, fun.span, None)?;
            self.b.ins().jump(self.unwind, &[]);
            return Ok(());
        }
        let env = params[1];
        let mut args = vec![self.ctx];
        let mut slot = 0;
        for &c in &fun.captures {
            for t in layout::flat(self.cg.prog.local_ty(c), fun.span)? {
                let off = (CLO_ENV + SLOT * slot) as i32;
                args.push(self.b.ins().load(t, immutable(), env, off));
                slot += 1;
            }
        }
        args.extend_from_slice(&params[2..]);
        let id = self.cg.fun_id(f)?;
        let r = self.func_ref(id);
        self.b.ins().return_call(r, &args);
        Ok(())
    }

    /// Drops the captures of a closure of `f` whose count reached zero, then frees it.
    fn closure_drop(&mut self, f: FunId, params: &[ir::Value]) -> R<()> {
        let fun = self.cg.prog.fun(f);
        let env = params[1];
        let mut slot = 0i64;
        for &c in &fun.captures {
            let t = self.cg.prog.local_ty(c).clone();
            let flat = layout::flat(&t, fun.span)?;
            let vals: Vals = flat
                .iter()
                .enumerate()
                .map(|(k, &ft)| {
                    self.b.ins().load(
                        ft,
                        flags(),
                        env,
                        (CLO_ENV + SLOT * (slot + k as i64)) as i32,
                    )
                })
                .collect();
            self.dec(&t, &vals)?;
            slot += flat.len() as i64;
        }
        let bytes = self.b.ins().iconst(types::I64, CLO_ENV + SLOT * slot);
        self.free(env, bytes)?;
        self.b.ins().return_(&[]);
        Ok(())
    }

    /// The size in bytes of a vector of `len` elements of `elem`.
    fn vec_bytes(&mut self, elem: &Type, len: ir::Value) -> ir::Value {
        let stride = SLOT * layout::width(elem) as i64;
        let bytes = self.b.ins().imul_imm_s(len, stride);
        self.b.ins().iadd_imm_s(bytes, VEC_DATA)
    }

    /// Returns an object of `bytes` to the runtime: a small one onto its
    /// free list, inline.
    fn free(&mut self, p: ir::Value, bytes: ir::Value) -> R<()> {
        let (head_addr, small) = self.free_list(bytes);
        let (push, slow, done) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.ins().brif(small, push, &[], slow, &[]);
        self.b.switch_to_block(push);
        let head = self.b.ins().load(PTR, flags(), head_addr, 0);
        self.b.ins().store(flags(), head, p, 0);
        self.b.ins().store(flags(), p, head_addr, 0);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(slow);
        self.b.set_cold_block(slow);
        let free = self
            .cg
            .import_preserving("rt_free", &[PTR, PTR, types::I64])?;
        let free = self.func_ref(free);
        self.b.ins().call(free, &[self.ctx, p, bytes]);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(done);
        Ok(())
    }

    /// Drops the elements of a vector whose count reached zero, then frees it.
    fn vec_drop(&mut self, elem: &Type, v: ir::Value) -> R<()> {
        let len = self.b.ins().load(types::I64, flags(), v, VEC_LEN);
        if layout::has_heap(elem) {
            let elem = elem.clone();
            self.each_index(len, None, |g, i| {
                let vals = g.load_elem(&elem, v, i)?;
                g.dec(&elem, &vals)
            })?;
        }
        let bytes = self.vec_bytes(elem, len);
        self.free(v, bytes)?;
        self.b.ins().return_(&[]);
        Ok(())
    }

    /// A global's getter: evaluates it on first use; returns it borrowed.
    fn global(&mut self, g: GlobalId, use_span: ir::Value) -> R<()> {
        let gl = self.cg.prog.global(g);
        self.span_arg = Some(use_span);
        let base = self.cg.global_slots[g.0 as usize] as i32 * SLOT as i32;
        let area = self.b.ins().load(PTR, flags(), self.ctx, Ctx::GLOBALS);
        let state = self.b.ins().load(types::I64, flags(), area, base);
        let flat = layout::flat(&gl.ty, gl.span)?;
        let done = self.b.create_block();
        let not_done = self.b.create_block();
        let is_done = self.b.ins().icmp_imm_s(IntCC::Equal, state, 2);
        self.b.ins().brif(is_done, done, &[], not_done, &[]);
        // Done: load the value.
        self.b.switch_to_block(done);
        let vals: Vals = flat
            .iter()
            .enumerate()
            .map(|(k, &t)| {
                self.b
                    .ins()
                    .load(t, flags(), area, base + SLOT as i32 * (1 + k as i32))
            })
            .collect();
        self.b.ins().return_(&vals);
        // Running: it depends on itself.
        self.b.switch_to_block(not_done);
        let running = self.b.ins().icmp_imm_s(IntCC::Equal, state, 1);
        let index = self.b.ins().iconst(types::I64, g.0 as i64);
        self.fail_if(running, ErrorKind::Cycle, gl.span, Some((index, index)))?;
        let one = self.b.ins().iconst(types::I64, 1);
        self.b.ins().store(flags(), one, area, base);
        let vals = self
            .expr(&gl.body, false)?
            .ok_or_else(|| internal("a global's value left its function", gl.span))?;
        for (k, &v) in vals.iter().enumerate() {
            self.b
                .ins()
                .store(flags(), v, area, base + SLOT as i32 * (1 + k as i32));
        }
        let two = self.b.ins().iconst(types::I64, 2);
        self.b.ins().store(flags(), two, area, base);
        self.b.ins().return_(&vals);
        Ok(())
    }

    /// The host's entry: the global's value (borrowed), or the function
    /// applied to the arguments in `args` (owned), written to `out`.
    fn entry(&mut self, e: Entry, args: ir::Value, out: ir::Value) -> R<()> {
        let vals = match e {
            Entry::Global(gid) => {
                let span = self.cg.prog.global(gid).span;
                self.global_value(gid, span)?
            }
            Entry::Fun(f) => {
                let fun = self.cg.prog.fun(f);
                if !fun.captures.is_empty() {
                    return Err(internal("an entry function with captures", fun.span));
                }
                let mut argv = vec![self.ctx];
                for (_, t) in &fun.params {
                    for ft in layout::flat(t, fun.span)? {
                        let off = (SLOT * (argv.len() - 1) as i64) as i32;
                        argv.push(self.b.ins().load(ft, flags(), args, off));
                    }
                }
                let id = self.cg.fun_id(f)?;
                self.before_call(fun.span)?;
                let vals = self.call(id, &argv);
                self.check_failed();
                vals
            }
        };
        for (k, &v) in vals.iter().enumerate() {
            self.b
                .ins()
                .store(flags(), v, out, (SLOT * k as i64) as i32);
        }
        self.b.ins().return_(&[]);
        Ok(())
    }

    /// The host's release: the owned result of an entry function, then the
    /// globals.
    fn host_release(&mut self, e: Entry, out: ir::Value) -> R<()> {
        if let Entry::Fun(f) = e {
            let fun = self.cg.prog.fun(f);
            let ty = fun.ret.clone();
            let vals: Vals = layout::flat(&ty, fun.span)?
                .iter()
                .enumerate()
                .map(|(k, &t)| self.b.ins().load(t, flags(), out, (SLOT * k as i64) as i32))
                .collect();
            self.dec(&ty, &vals)?;
        }
        self.release_globals()
    }

    /// Drops the value of every global that was evaluated.
    fn release_globals(&mut self) -> R<()> {
        let area = self.b.ins().load(PTR, flags(), self.ctx, Ctx::GLOBALS);
        for (k, gl) in self.cg.prog.globals.iter().enumerate() {
            if !layout::has_heap(&gl.ty) {
                continue;
            }
            let base = self.cg.global_slots[k] as i32 * SLOT as i32;
            let state = self.b.ins().load(types::I64, flags(), area, base);
            let done = self.b.ins().icmp_imm_s(IntCC::Equal, state, 2);
            let (yes, next) = (self.b.create_block(), self.b.create_block());
            self.b.ins().brif(done, yes, &[], next, &[]);
            self.b.switch_to_block(yes);
            let flat = layout::flat(&gl.ty, gl.span)?;
            let vals: Vals = flat
                .iter()
                .enumerate()
                .map(|(j, &t)| {
                    self.b
                        .ins()
                        .load(t, flags(), area, base + SLOT as i32 * (1 + j as i32))
                })
                .collect();
            self.dec(&gl.ty.clone(), &vals)?;
            self.b.ins().jump(next, &[]);
            self.b.switch_to_block(next);
        }
        self.b.ins().return_(&[]);
        Ok(())
    }

    // ---- locals and ownership ----

    /// Binds `p` to `vals` (owned); parts `_` matches are dropped now.
    fn bind(&mut self, p: &Pat, ty: &Type, vals: &[ir::Value]) {
        match p {
            Pat::Local(l) => {
                self.vars.insert(*l, vals.to_vec());
                if layout::has_heap(ty) {
                    self.owned.push(*l);
                }
            }
            Pat::Wild => {
                // Dropping cannot fail to generate for types that flattened.
                let _ = self.dec(ty, vals);
            }
            Pat::Tuple(ps) => {
                if let Type::Tuple(ts) = ty {
                    let mut at = 0;
                    for (p, t) in ps.iter().zip(ts) {
                        let w = layout::width(t);
                        self.bind(p, t, &vals[at..at + w]);
                        at += w;
                    }
                }
            }
        }
    }

    /// Drops the owned locals above `mark` and forgets them.
    fn drop_scope(&mut self, mark: usize) {
        while self.owned.len() > mark {
            let Some(l) = self.owned.pop() else { break };
            let ty = self.cg.prog.local_ty(l).clone();
            if let Some(vals) = self.vars.get(&l).cloned() {
                let _ = self.dec(&ty, &vals);
            }
        }
    }

    /// Drops every owned local (before leaving the function by a tail call)
    /// without forgetting them (the code after a branch still sees them).
    fn drop_all(&mut self) -> R<()> {
        for l in self.owned.clone().into_iter().rev() {
            let ty = self.cg.prog.local_ty(l).clone();
            if let Some(vals) = self.vars.get(&l).cloned() {
                self.dec(&ty, &vals)?;
            }
        }
        Ok(())
    }

    fn inc(&mut self, ty: &Type, vals: &[ir::Value]) {
        let mut ptrs = Vec::new();
        layout::for_each_pointer(ty, 0, &mut |_, at| ptrs.push(vals[at]));
        for p in ptrs {
            let live = self.b.create_block();
            let next = self.b.create_block();
            self.b.ins().brif(p, live, &[], next, &[]);
            self.b.switch_to_block(live);
            let n = self.b.ins().load(types::I64, flags(), p, 0);
            let n = self.b.ins().iadd_imm_s(n, 1);
            self.b.ins().store(flags(), n, p, 0);
            self.b.ins().jump(next, &[]);
            self.b.switch_to_block(next);
        }
    }

    fn dec(&mut self, ty: &Type, vals: &[ir::Value]) -> R<()> {
        let mut ptrs = Vec::new();
        layout::for_each_pointer(ty, 0, &mut |t, at| ptrs.push((t.clone(), vals[at])));
        for (t, p) in ptrs {
            let live = self.b.create_block();
            let dead = self.b.create_block();
            let next = self.b.create_block();
            self.b.ins().brif(p, live, &[], next, &[]);
            self.b.switch_to_block(live);
            let n = self.b.ins().load(types::I64, flags(), p, 0);
            let n = self.b.ins().iadd_imm_s(n, -1);
            self.b.ins().store(flags(), n, p, 0);
            self.b.ins().brif(n, next, &[], dead, &[]);
            self.b.switch_to_block(dead);
            match &t {
                // Elements without heap parts: nothing to drop but the
                // vector itself, inline.
                Type::Vec(elem) if !layout::has_heap(elem) => {
                    let len = self.b.ins().load(types::I64, flags(), p, VEC_LEN);
                    let bytes = self.vec_bytes(elem, len);
                    self.free(p, bytes)?;
                }
                Type::Vec(elem) => {
                    let id = self.cg.vec_drop_id(elem)?;
                    self.call(id, &[self.ctx, p]);
                }
                _ => {
                    let code = self.b.ins().load(PTR, flags(), p, CLO_DROP);
                    let sig = self.cg.drop_sig();
                    let sig = self.b.import_signature(sig);
                    let ctx = self.ctx;
                    self.around_staging(true, |g| {
                        g.b.ins().call_indirect(sig, code, &[ctx, p]);
                    });
                }
            }
            self.b.ins().jump(next, &[]);
            self.b.switch_to_block(next);
        }
        Ok(())
    }

    // ---- expressions ----

    /// The value of `e` and whether it is owned (else borrowed from a local
    /// or global that outlives its use).
    fn borrowed(&mut self, e: &Expr) -> R<(Vals, bool)> {
        if let Some(vals) = self.hoisted.get(&(e as *const Expr)) {
            return Ok((vals.clone(), false));
        }
        match &e.kind {
            ExprKind::Local(l) => Ok((self.local(*l, e.span)?, false)),
            ExprKind::Global(g) => Ok((self.global_value(*g, e.span)?, false)),
            ExprKind::Proj(t, k) => {
                let (vals, owned) = self.borrowed(t)?;
                let Type::Tuple(ts) = &t.ty else {
                    return Err(internal("projection from a non-tuple", e.span));
                };
                let at: usize = ts[..*k as usize].iter().map(layout::width).sum();
                let part = vals[at..at + layout::width(&ts[*k as usize])].to_vec();
                if owned {
                    // Keep the component, drop the others.
                    let mut at = 0;
                    for (i, t) in ts.iter().enumerate() {
                        let w = layout::width(t);
                        if i != *k as usize {
                            self.dec(t, &vals[at..at + w])?;
                        }
                        at += w;
                    }
                }
                Ok((part, owned))
            }
            ExprKind::Prim(Prim::Index, args) => self.index(args, e.span),
            _ => Ok((self.owned_value(e)?, true)),
        }
    }

    /// `v[i]`, borrowed from `v` if `v` is borrowed (an element lives as
    /// long as its vector), else owned.
    fn index(&mut self, args: &[Expr], span: Span) -> R<(Vals, bool)> {
        let Type::Vec(elem) = &args[0].ty else {
            return Err(internal("indexing a non-vector", span));
        };
        let (v, owned) = self.borrowed(&args[0])?;
        let i = self.owned_value(&args[1])?[0];
        let in_range = self.below.get(&i).is_some_and(|vs| vs.contains(&v[0]));
        if !in_range {
            let len = match self.known_len.get(&v[0]) {
                Some(&len) => len,
                None => self.vec_len(v[0]),
            };
            let out = self.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, i, len);
            self.fail_if(out, ErrorKind::IndexOutOfRange, span, Some((i, len)))?;
        }
        let x = self.load_elem(elem, v[0], i)?;
        if owned {
            self.inc(elem, &x);
            self.dec(&args[0].ty, &v)?;
        }
        Ok((x, owned))
    }

    /// The size argument of `build`, checked as the interpreter checks it.
    fn build_size(&mut self, n: &Expr, span: Span) -> R<ir::Value> {
        let n = self.owned_value(n)?[0];
        let neg = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, n, 0);
        let zero = self.b.ins().iconst(types::I64, 0);
        self.fail_if(neg, ErrorKind::NegativeBuild, span, Some((n, zero)))?;
        let max = self.ctx_word(Ctx::MAX_VECTOR_LEN);
        let big = self.b.ins().icmp(IntCC::SignedGreaterThan, n, max);
        self.fail_if(big, ErrorKind::BuildTooLong, span, Some((n, max)))?;
        Ok(n)
    }

    /// `n` if `e` is `build n (fun i -> i)`, the indices below `n`.
    fn indices<'e>(&self, e: &'e Expr) -> Option<&'e Expr> {
        let ExprKind::Prim(Prim::Build, args) = &e.kind else {
            return None;
        };
        let ExprKind::Closure(f) = args[1].kind else {
            return None;
        };
        let fun = self.cg.prog.fun(f);
        match (&fun.params[..], &fun.body.kind) {
            ([(Pat::Local(i), _)], ExprKind::Local(j)) if i == j => Some(&args[0]),
            _ => None,
        }
    }

    /// `sum v` of a Real or Int vector. `sum (build n f)` and
    /// `sum (map f u)` of reals add the elements as they are computed,
    /// without making the vector (the same additions in the same order).
    fn sum(&mut self, v: &Expr, ty: &Type, span: Span) -> R<Vals> {
        if *ty != Type::Real {
            // Ints left to right, after every element is made: an addition
            // can fail, and the interpreter makes every element (whose
            // errors come first) before it adds any.
            let (u, owned) = self.borrowed(v)?;
            let n = self.vec_len(u[0]);
            let zero = self.b.ins().iconst(types::I64, 0);
            let acc = self.fold_index(n, &[zero], None, |g, i, acc| {
                let x = g.load_elem(&Type::Int, u[0], i)?;
                Ok(vec![g.int_op(Prim::Add, acc[0], x[0], span)?])
            })?;
            self.release(&v.ty, &u, owned)?;
            return Ok(acc);
        }
        let (n, total) = match &v.kind {
            ExprKind::Prim(Prim::Build, args) => {
                let n = self.build_size(&args[0], v.span)?;
                let total = self.lane_sum(n, Some(&args[1]), None, |g, i| {
                    Ok(g.call_fn_arg(&args[1], &[i], span)?[0])
                })?;
                (n, total)
            }
            ExprKind::Prim(Prim::Map, args) => {
                let Type::Vec(a) = &args[1].ty else {
                    return Err(internal("`map` of a non-vector", span));
                };
                let a = (**a).clone();
                let (u, owned) = self.borrowed(&args[1])?;
                let n = self.vec_len(u[0]);
                let reals = (a == Type::Real).then_some(u[0]);
                let total = self.lane_sum(n, Some(&args[0]), reals, |g, i| {
                    let x = g.load_elem(&a, u[0], i)?;
                    g.inc(&a, &x);
                    Ok(g.call_fn_arg(&args[0], &x, span)?[0])
                })?;
                self.release(&args[1].ty, &u, owned)?;
                (n, total)
            }
            _ => {
                let (u, owned) = self.borrowed(v)?;
                let n = self.vec_len(u[0]);
                let total = self.lane_sum(n, None, Some(u[0]), |g, i| {
                    Ok(g.load_elem(&Type::Real, u[0], i)?[0])
                })?;
                self.release(&v.ty, &u, owned)?;
                (n, total)
            }
        };
        // The sum of no reals is 0.0 (the lanes' -0.0 otherwise).
        let empty = self.b.ins().icmp_imm_s(IntCC::Equal, n, 0);
        let zero = self.b.ins().f64const(0.0);
        Ok(vec![self.b.ins().select(empty, zero, total)])
    }

    /// The reals `elem(i)`, `i < n`, added in the language's lanes
    /// (`nabla_lang::prim::sum_in_lanes`): element `i` into lane `i mod 4`,
    /// then `((lane 0 + lane 1) + lane 2) + lane 3`. Each lane starts at
    /// -0.0, which adds exactly (`-0.0 + x` is `x`), so an empty lane adds
    /// nothing. A small inlined element (or a vector's own) is added by a
    /// plain loop up to four elements, else unrolled four to an iteration,
    /// one lane each, so the four chains overlap
    /// ([`FnGen::unrolled_lane_sum`]); a larger element, or one that calls
    /// a math function, is generated once and adds into its lane in memory
    /// ([`FnGen::lanes_in_place`]). `fun_arg` is the `build`'s or `map`'s
    /// function, `reals` the vector of reals summed or mapped, if any.
    fn lane_sum(
        &mut self,
        n: ir::Value,
        fun_arg: Option<&Expr>,
        reals: Option<ir::Value>,
        mut elem: impl FnMut(&mut Self, ir::Value) -> R<ir::Value>,
    ) -> R<ir::Value> {
        let small = match fun_arg.map(|e| &e.kind) {
            None => true,
            Some(ExprKind::Closure(f)) => {
                let body = &self.cg.prog.fun(*f).body;
                is_small_leaf(body) && !calls_math(body) && self.may_inline_in_loop(*f)
            }
            Some(_) => false,
        };
        let z = self.b.ins().f64const(-0.0);
        if !small {
            let zero = self.b.ins().iconst(types::I64, 0);
            return self.lanes_in_place(&[z; 4], zero, n, fun_arg, &mut elem);
        }
        // Up to four elements, the lanes add left to right: one plain loop
        // (short sums, such as GMM's at d = 2, pay nothing for the lanes),
        // after one test for 1 to 4 elements (n - 1 below 4, unsigned).
        let (short, other, long, joined) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.append_block_param(joined, types::F64);
        let before = self.b.ins().iadd_imm_s(n, -1);
        let few = self.b.ins().icmp_imm_u(IntCC::UnsignedLessThan, before, 4);
        self.b.ins().brif(few, short, &[], other, &[]);
        self.b.switch_to_block(other);
        let none = self.b.ins().icmp_imm_s(IntCC::Equal, n, 0);
        self.b.ins().brif(none, joined, &bargs(&[z]), long, &[]);
        self.b.switch_to_block(short);
        let total = self.fold_index_runs(n, true, &[z], fun_arg, |g, i, acc| {
            let x = elem(g, i)?;
            Ok(vec![g.b.ins().fadd(acc[0], x)])
        })?;
        self.b.ins().jump(joined, &bargs(&total));
        self.b.switch_to_block(long);
        let total = self.unrolled_lane_sum(n, fun_arg, reals, &mut elem)?;
        self.b.ins().jump(joined, &bargs(&[total]));
        self.b.switch_to_block(joined);
        Ok(self.b.block_params(joined)[0])
    }

    /// Adds `elem(start + j)`, `j < count`, into lane `(start + j) mod 4`
    /// of `lanes`, kept in a stack slot (an element generated once; lanes
    /// in registers would be saved and restored across its calls), and
    /// returns the lanes' total ([`FnGen::lane_sum`]).
    fn lanes_in_place(
        &mut self,
        lanes: &[ir::Value],
        start: ir::Value,
        count: ir::Value,
        fun_arg: Option<&Expr>,
        elem: &mut impl FnMut(&mut Self, ir::Value) -> R<ir::Value>,
    ) -> R<ir::Value> {
        let slot = self.b.create_sized_stack_slot(ir::StackSlotData::new(
            ir::StackSlotKind::ExplicitSlot,
            (SLOT * 4) as u32,
            3,
        ));
        for (k, &lane) in lanes.iter().enumerate() {
            self.b
                .ins()
                .stack_store(PTR, lane, slot, (SLOT * k as i64) as i32);
        }
        let base = self.b.ins().stack_addr(PTR, slot, 0);
        self.fold_index(count, &[], fun_arg, |g, j, _| {
            let i = g.b.ins().iadd(start, j);
            let x = elem(g, i)?;
            let lane = g.b.ins().band_imm_u(i, 3);
            let offset = g.b.ins().ishl_imm_u(lane, 3);
            let at = g.b.ins().iadd(base, offset);
            let sum = g.b.ins().load(types::F64, flags(), at, 0);
            let sum = g.b.ins().fadd(sum, x);
            g.b.ins().store(flags(), sum, at, 0);
            Ok(Vec::new())
        })?;
        let lanes: Vec<_> = (0..4)
            .map(|k| {
                self.b
                    .ins()
                    .stack_load(PTR, types::F64, slot, (SLOT * k) as i32)
            })
            .collect();
        Ok(self.add_lanes(&lanes))
    }

    /// [`FnGen::lane_sum`] of more than four small elements: four to an
    /// iteration, then the last `n mod 4` straight, element `start + k`
    /// into lane k.
    fn unrolled_lane_sum(
        &mut self,
        n: ir::Value,
        fun_arg: Option<&Expr>,
        reals: Option<ir::Value>,
        elem: &mut impl FnMut(&mut Self, ir::Value) -> R<ir::Value>,
    ) -> R<ir::Value> {
        let z = self.b.ins().f64const(-0.0);
        // Every index is below n, so below every length n is below.
        let bounds = self.bounds_of(n);
        let note_below = |g: &mut Self, i: ir::Value| {
            if !bounds.is_empty() {
                g.below.insert(i, bounds.clone());
            }
        };
        let blocks = self.b.ins().sshr_imm_u(n, 2);
        // Blocks whose elements are computed two at a time, if any.
        let (simd_blocks, lanes) = match self.simd_element(fun_arg, reals) {
            Some(element) => self.simd_lanes(n, &element, reals)?,
            None => (self.b.ins().iconst(types::I64, 0), vec![z; 4]),
        };
        let scalar_blocks = self.b.ins().isub(blocks, simd_blocks);
        let mut lanes = self.fold_index(scalar_blocks, &lanes, fun_arg, |g, b, acc| {
            let b = g.b.ins().iadd(b, simd_blocks);
            let first = g.b.ins().ishl_imm_u(b, 2);
            let mut out = Vec::with_capacity(4);
            for (k, &lane) in acc.iter().enumerate() {
                let i = g.b.ins().iadd_imm_s(first, k as i64);
                note_below(g, i);
                let x = elem(g, i)?;
                out.push(g.b.ins().fadd(lane, x));
            }
            Ok(out)
        })?;
        // The last n mod 4 elements, while there are any.
        let start = self.b.ins().ishl_imm_u(blocks, 2);
        let rest = self.b.ins().isub(n, start);
        let done = self.b.create_block();
        for _ in 0..4 {
            self.b.append_block_param(done, types::F64);
        }
        for k in 0..3 {
            let more = self.b.create_block();
            let left = self
                .b
                .ins()
                .icmp_imm_s(IntCC::SignedGreaterThan, rest, k as i64);
            self.b.ins().brif(left, more, &[], done, &bargs(&lanes));
            self.b.switch_to_block(more);
            let i = self.b.ins().iadd_imm_s(start, k as i64);
            note_below(self, i);
            let x = elem(self, i)?;
            lanes[k] = self.b.ins().fadd(lanes[k], x);
        }
        self.b.ins().jump(done, &bargs(&lanes));
        self.b.switch_to_block(done);
        let lanes = self.b.block_params(done).to_vec();
        Ok(self.add_lanes(&lanes))
    }

    /// A sum's element, if it computes two at a time ([`simd_expr`]): a
    /// vector's own (`reals`, no function), a `map`ped function of the
    /// element of `reals`, or a `build`'s function of its counter.
    fn simd_element(
        &self,
        fun_arg: Option<&Expr>,
        reals: Option<ir::Value>,
    ) -> Option<SimdElement<'p>> {
        let Some(fun_arg) = fun_arg else {
            return reals.map(|_| SimdElement {
                body: None,
                element: None,
                hoisted: Vec::new(),
                vectors: Vec::new(),
            });
        };
        let ExprKind::Closure(f) = fun_arg.kind else {
            return None;
        };
        let fun = self.cg.prog.fun(f);
        let (counter, element) = match (fun.params.as_slice(), reals) {
            ([(Pat::Local(i), Type::Int)], None) => (Some(*i), None),
            ([(Pat::Local(x), Type::Real)], Some(_)) => (None, Some(*x)),
            _ => return None,
        };
        let body = &fun.body;
        let hoisted = hoistable(body, &fun.captures);
        let mut vectors = Vec::new();
        let inside = Params {
            counter,
            element,
            captures: &fun.captures,
        };
        simd_expr(body, &inside, &hoisted, &mut vectors).then_some(SimdElement {
            body: Some(body),
            element,
            hoisted,
            vectors,
        })
    }

    /// The first blocks of four of a sum whose element computes with two
    /// lanes at a time: two `f64x2` running sums, lanes 0 and 1, 2 and 3,
    /// the same additions of the same products as one at a time. What the
    /// element indexes is evaluated first, as the first element would
    /// ([`hoistable`]); the blocks inside every vector it indexes with its
    /// counter need no bounds checks, and the rest (none unless an index
    /// fails) are left to the scalar loop. Returns the number of blocks
    /// done and the four lanes.
    fn simd_lanes(
        &mut self,
        n: ir::Value,
        element: &SimdElement,
        reals: Option<ir::Value>,
    ) -> R<(ir::Value, Vals)> {
        let mut evaluated: HashMap<*const Expr, ir::Value> = HashMap::new();
        for &e in &element.hoisted {
            let (vals, owned) = self.borrowed(e)?;
            if owned {
                return Err(internal("a hoisted element that is not borrowed", e.span));
            }
            evaluated.insert(e as *const Expr, vals[0]);
        }
        let mut within = n;
        let mut bases = HashMap::new();
        for &v in &element.vectors {
            let base = match &v.kind {
                ExprKind::Local(l) => self.local(*l, v.span)?[0],
                _ => *evaluated
                    .get(&(v as *const Expr))
                    .ok_or_else(|| internal("an indexed vector not evaluated", v.span))?,
            };
            let len = self.vec_len(base);
            let shorter = self.b.ins().icmp(IntCC::SignedLessThan, len, within);
            within = self.b.ins().select(shorter, len, within);
            bases.insert(v as *const Expr, base);
        }
        let blocks = self.b.ins().sshr_imm_u(within, 2);
        let minus_zero = self.b.ins().f64const(-0.0);
        let z = self.b.ins().splat(types::F64X2, minus_zero);
        let sums = self.fold_index(blocks, &[z, z], None, |g, b, acc| {
            let first = g.b.ins().ishl_imm_u(b, 2);
            let third = g.b.ins().iadd_imm_s(first, 2);
            let low = g.simd_element_at(element, &bases, reals, first)?;
            let high = g.simd_element_at(element, &bases, reals, third)?;
            Ok(vec![
                g.b.ins().fadd(acc[0], low),
                g.b.ins().fadd(acc[1], high),
            ])
        })?;
        let lanes = (0..4)
            .map(|k| self.b.ins().extractlane(sums[k / 2], (k % 2) as u8))
            .collect();
        Ok((blocks, lanes))
    }

    /// Elements `i` and `i + 1` of a [`SimdElement`], as `f64x2`.
    fn simd_element_at(
        &mut self,
        element: &SimdElement,
        bases: &HashMap<*const Expr, ir::Value>,
        reals: Option<ir::Value>,
        i: ir::Value,
    ) -> R<ir::Value> {
        let at = Simd {
            bases,
            element: element.element.zip(reals),
            i,
        };
        match (element.body, reals) {
            (Some(body), _) => self.simd_eval(&at, body),
            (None, Some(v)) => Ok(self.simd_load(v, i)),
            (None, None) => Err(internal("a two-lane element of nothing", Span::default())),
        }
    }

    /// Elements `i` and `i + 1` of the vector of reals `v`.
    fn simd_load(&mut self, v: ir::Value, i: ir::Value) -> ir::Value {
        let offset = self.b.ins().ishl_imm_u(i, 3);
        let at = self.b.ins().iadd(v, offset);
        // Elements are 8-byte aligned, not 16: no `aligned` flag.
        let mem = MemFlagsData::new().with_notrap().with_readonly();
        self.b.ins().load(types::F64X2, mem, at, VEC_DATA as i32)
    }

    /// `e`, part of a [`SimdElement`], at its elements `at.i` and `at.i + 1`,
    /// as `f64x2`.
    fn simd_eval(&mut self, at: &Simd, e: &Expr) -> R<ir::Value> {
        Ok(match &e.kind {
            ExprKind::Lit(Lit::Real(x)) => {
                let x = self.b.ins().f64const(*x);
                self.b.ins().splat(types::F64X2, x)
            }
            ExprKind::Local(l) => match at.element {
                Some((x, v)) if x == *l => self.simd_load(v, at.i),
                _ => {
                    let x = self.local(*l, e.span)?[0];
                    self.b.ins().splat(types::F64X2, x)
                }
            },
            ExprKind::Prim(Prim::Index, args) => {
                let base = *at
                    .bases
                    .get(&(&args[0] as *const Expr))
                    .ok_or_else(|| internal("an indexed vector not evaluated", e.span))?;
                self.simd_load(base, at.i)
            }
            ExprKind::Prim(Prim::Neg, args) => {
                let x = self.simd_eval(at, &args[0])?;
                self.b.ins().fneg(x)
            }
            ExprKind::Prim(p, args) => {
                let x = self.simd_eval(at, &args[0])?;
                let y = self.simd_eval(at, &args[1])?;
                match p {
                    Prim::Add => self.b.ins().fadd(x, y),
                    Prim::Sub => self.b.ins().fsub(x, y),
                    Prim::Mul => self.b.ins().fmul(x, y),
                    _ => self.b.ins().fdiv(x, y),
                }
            }
            _ => return Err(internal("an element that is not two-lane", e.span)),
        })
    }

    /// `((lane 0 + lane 1) + lane 2) + lane 3`.
    fn add_lanes(&mut self, lanes: &[ir::Value]) -> ir::Value {
        let (&first, rest) = lanes.split_first().expect("four lanes");
        rest.iter()
            .fold(first, |total, &lane| self.b.ins().fadd(total, lane))
    }

    /// The lengths `n` is known to be at most: those it is, and those it is
    /// below.
    fn bounds_of(&self, n: ir::Value) -> Vec<ir::Value> {
        let mut bounds = self.lengths.get(&n).cloned().unwrap_or_default();
        bounds.extend(self.below.get(&n).into_iter().flatten().copied());
        bounds
    }

    /// Drops a value [`FnGen::borrowed`] returned if it was owned.
    fn release(&mut self, ty: &Type, vals: &[ir::Value], owned: bool) -> R<()> {
        if owned { self.dec(ty, vals) } else { Ok(()) }
    }

    fn local(&mut self, l: Local, span: Span) -> R<Vals> {
        self.vars
            .get(&l)
            .cloned()
            .ok_or_else(|| internal("a local out of scope", span))
    }

    fn global_value(&mut self, g: GlobalId, span: Span) -> R<Vals> {
        self.before_call(span)?;
        let id = self.cg.global_id(g)?;
        let s = self.cg.span_index(span);
        let s = self.b.ins().iconst(types::I32, s);
        let vals = self.call(id, &[self.ctx, s]);
        self.check_failed();
        Ok(vals)
    }

    fn owned_value(&mut self, e: &Expr) -> R<Vals> {
        self.expr(e, false)?
            .ok_or_else(|| internal("a value left its function", e.span))
    }

    /// Compiles `e`; `None` if control left the function (a tail call).
    fn expr(&mut self, e: &Expr, tail: bool) -> R<Option<Vals>> {
        let span = e.span;
        if let Some(vals) = self.hoisted.get(&(e as *const Expr)).cloned() {
            self.inc(&e.ty, &vals);
            return Ok(Some(vals));
        }
        let vals = match &e.kind {
            ExprKind::Local(_) | ExprKind::Global(_) | ExprKind::Proj(..) => {
                let (vals, owned) = self.borrowed(e)?;
                if !owned {
                    self.inc(&e.ty, &vals);
                }
                vals
            }
            ExprKind::Lit(l) => match l {
                Lit::Unit => Vec::new(),
                Lit::Bool(b) => vec![self.b.ins().iconst(types::I8, i64::from(*b))],
                Lit::Int(n) => vec![self.b.ins().iconst(types::I64, *n)],
                Lit::Real(x) => vec![self.b.ins().f64const(*x)],
            },
            ExprKind::Call(f, args) => return self.call_known(*f, args, tail, span),
            ExprKind::Closure(f) => self.closure(*f, span)?,
            ExprKind::Trace(label, x) => {
                let vals = self.owned_value(x)?;
                self.trace(label, &x.ty, &vals)?;
                vals
            }
            ExprKind::Recode { direct: true, .. } => {
                return Err(internal("a direct recoding not applied", span));
            }
            ExprKind::Recode { closure, cases, .. } => {
                let (c, owned) = self.borrowed(closure)?;
                let v = self.recode(c[0], cases, span)?;
                self.release(&closure.ty, &c, owned)?;
                vec![v]
            }
            ExprKind::TangentShape(point, tangent, role) => {
                let (p, p_owned) = self.borrowed(point)?;
                let (t, t_owned) = self.borrowed(tangent)?;
                let (kind, n, m) = if matches!(point.ty, Type::Sum(..)) {
                    let n = self.b.ins().uextend(types::I64, p[0]);
                    let m = self.b.ins().uextend(types::I64, t[0]);
                    (ErrorKind::shape(*role, true), n, m)
                } else {
                    let kind = ErrorKind::shape(*role, false);
                    (kind, self.vec_len(p[0]), self.vec_len(t[0]))
                };
                let differ = self.b.ins().icmp(IntCC::NotEqual, n, m);
                self.fail_if(differ, kind, span, Some((m, n)))?;
                self.release(&point.ty, &p, p_owned)?;
                self.release(&tangent.ty, &t, t_owned)?;
                Vec::new()
            }
            ExprKind::Apply(fe, x) => {
                if let ExprKind::Recode {
                    closure,
                    cases,
                    direct,
                } = &fe.kind
                {
                    let Type::Fun(_, b) = &fe.ty else {
                        return Err(internal("applying a non-function", span));
                    };
                    let rets = layout::flat(b, span)?;
                    let recoded = (closure.as_ref(), cases.as_slice(), *direct);
                    return self.apply_recoded(recoded, x, &rets, span).map(Some);
                }
                let (fv, owned) = self.borrowed(fe)?;
                let xv = self.owned_value(x)?;
                let Type::Fun(a, b) = &fe.ty else {
                    return Err(internal("applying a non-function", span));
                };
                let sig = self.cg.closure_sig(a, b, span)?;
                let sig = self.b.import_signature(sig);
                self.before_call(span)?;
                let code = self.b.ins().load(PTR, flags(), fv[0], CLO_CODE);
                let mut args = vec![self.ctx, fv[0]];
                args.extend(xv);
                let r = self.around_staging(true, |g| {
                    let inst = g.b.ins().call_indirect(sig, code, &args);
                    g.b.inst_results(inst).to_vec()
                });
                self.check_failed_at(span)?;
                self.release(&fe.ty, &fv, owned)?;
                r
            }
            ExprKind::Let(p, v, body) => {
                let vv = self.owned_value(v)?;
                let mark = self.owned.len();
                self.bind(p, &v.ty, &vv);
                let r = self.expr(body, tail)?;
                match r {
                    Some(vals) => {
                        self.drop_scope(mark);
                        vals
                    }
                    None => {
                        self.owned.truncate(mark);
                        return Ok(None);
                    }
                }
            }
            ExprKind::Tuple(es) => {
                let mut out = Vec::new();
                for x in es {
                    out.extend(self.owned_value(x)?);
                }
                out
            }
            ExprKind::Inl(x) | ExprKind::Inr(x) => {
                let Type::Sum(a, b) = &e.ty else {
                    return Err(internal("a sum of a non-sum type", span));
                };
                let left = matches!(e.kind, ExprKind::Inl(_));
                let xv = self.owned_value(x)?;
                let tag = self.b.ins().iconst(types::I8, i64::from(!left));
                let mut out = vec![tag];
                let (fa, fb) = (layout::flat(a, span)?, layout::flat(b, span)?);
                if left {
                    out.extend(xv);
                    out.extend(fb.iter().map(|&t| self.zero(t)).collect::<Vals>());
                } else {
                    out.extend(fa.iter().map(|&t| self.zero(t)).collect::<Vals>());
                    out.extend(xv);
                }
                out
            }
            ExprKind::Case {
                scrutinee,
                left,
                right,
            } => {
                let sv = self.owned_value(scrutinee)?;
                let Type::Sum(a, b) = &scrutinee.ty else {
                    return Err(internal("`match` on a non-sum", span));
                };
                let wa = layout::width(a);
                let lv = sv[1..1 + wa].to_vec();
                let rv = sv[1 + wa..].to_vec();
                let (lb, rb) = (self.b.create_block(), self.b.create_block());
                self.b.ins().brif(sv[0], rb, &[], lb, &[]);
                let arms = [
                    (lb, &left.0, a, lv, &left.1),
                    (rb, &right.0, b, rv, &right.1),
                ];
                return self.branches(
                    arms.into_iter()
                        .map(|(blk, p, t, v, body)| (blk, Some((p, (**t).clone(), v)), &**body))
                        .collect(),
                    &e.ty,
                    tail,
                );
            }
            ExprKind::If(c, a, b2) => {
                let cv = self.owned_value(c)?;
                let (tb, fb) = (self.b.create_block(), self.b.create_block());
                self.b.ins().brif(cv[0], tb, &[], fb, &[]);
                return self.branches(vec![(tb, None, &**a), (fb, None, &**b2)], &e.ty, tail);
            }
            ExprKind::Select(c, a, b2) => {
                let mut reals = Vec::new();
                if all_zero_tests(e, &mut reals) {
                    return Ok(Some(vec![self.all_zero(&reals)?]));
                }
                if !plain_data(&e.ty) {
                    return Err(internal("a branch-free choice of heap values", span));
                }
                let cv = self.owned_value(c)?;
                let av = self.owned_value(a)?;
                let bv = self.owned_value(b2)?;
                av.iter()
                    .zip(&bv)
                    .map(|(&x, &y)| self.b.ins().select(cv[0], x, y))
                    .collect()
            }
            ExprKind::Prim(p, args) => self.prim(*p, args, &e.ty, span)?,
            ExprKind::Tape { op, slot, args } => self.tape(*op, *slot, args, &e.ty, span)?,
            ExprKind::Vector(_) if marshal::is_large_constant(e) => {
                // Made once, when compiling (`marshal::is_large_constant`).
                let mut slots = Vec::new();
                marshal::write_constant(e, &mut slots, &mut self.cg.constants)
                    .map_err(|what| Unsupported { what, span })?;
                let v = self.b.ins().iconst(PTR, slots[0] as i64);
                self.inc(&e.ty, &[v]);
                vec![v]
            }
            ExprKind::Vector(es) => {
                let Type::Vec(elem) = &e.ty else {
                    return Err(internal("a vector of a non-vector type", span));
                };
                // The vector first, each element stored as soon as it is
                // evaluated (in order): evaluated first, all of them would be
                // live at once, and the register allocator's time and memory
                // grow with the square of a long literal's length.
                let n = self.b.ins().iconst(types::I64, es.len() as i64);
                let v = self.alloc_vec(elem, n, span)?;
                for (i, x) in es.iter().enumerate() {
                    let item = self.owned_value(x)?;
                    let i = self.b.ins().iconst(types::I64, i as i64);
                    self.store_elem(elem, v, i, &item);
                }
                vec![v]
            }
        };
        Ok(Some(vals))
    }

    /// The arms of an `if` or `match`, each starting in its block (with the
    /// pattern it binds), joined after.
    #[allow(clippy::type_complexity)]
    fn branches(
        &mut self,
        arms: Vec<(ir::Block, Option<(&Pat, Type, Vals)>, &Expr)>,
        ty: &Type,
        tail: bool,
    ) -> R<Option<Vals>> {
        let join = self.b.create_block();
        let flat = layout::flat(ty, Span::default())?;
        for &t in &flat {
            self.b.append_block_param(join, t);
        }
        let mut any = false;
        for (blk, bound, body) in arms {
            self.b.switch_to_block(blk);
            let mark = self.owned.len();
            if let Some((p, t, v)) = bound {
                self.bind(p, &t, &v);
            }
            match self.expr(body, tail)? {
                Some(vals) => {
                    self.drop_scope(mark);
                    self.b.ins().jump(join, &bargs(&vals));
                    any = true;
                }
                None => self.owned.truncate(mark),
            }
        }
        self.b.switch_to_block(join);
        if !any {
            // No arm reaches the join: it is unreachable.
            self.b.ins().jump(self.unwind, &[]);
            return Ok(None);
        }
        Ok(Some(self.b.block_params(join).to_vec()))
    }

    /// A direct call; in tail position a jump (self call) or a tail call.
    fn call_known(&mut self, f: FunId, args: &[Expr], tail: bool, span: Span) -> R<Option<Vals>> {
        let mut argv = Vec::new();
        for a in args {
            argv.extend(self.owned_value(a)?);
        }
        let fun = self.cg.prog.fun(f);
        // Not in tail position: inlining there would turn the body's own
        // tail calls into calls that grow the stack.
        // An element function called directly is an element of a sum added
        // straight (`translate::dual`) or of an unrolled `map`: one call per
        // element as in a loop, and as large a body is inlined.
        let element = self.cg.elements.contains(&f);
        if !tail && (self.may_inline(f) || element && self.may_inline_in_loop(f)) {
            return self.inline(f, &argv, span).map(Some);
        }
        if tail
            && let Some((me, header)) = self.current
            && me == f
        {
            self.drop_all()?;
            if self.cg.count_calls {
                self.count_call(span)?;
            }
            self.b.ins().jump(header, &bargs(&argv));
            return Ok(None);
        }
        let mut full = vec![self.ctx];
        for &c in &fun.captures {
            full.extend(self.local(c, span)?);
        }
        full.extend(argv);
        let id = self.cg.fun_id(f)?;
        self.before_call(span)?;
        // A tail call drops the locals first: only if none is a capture it passes.
        if tail && !fun.captures.iter().any(|c| self.owned.contains(c)) {
            self.drop_all()?;
            self.sync_staged();
            let r = self.func_ref(id);
            self.b.ins().return_call(r, &full);
            return Ok(None);
        }
        let r = self.call(id, &full);
        self.check_failed();
        Ok(Some(r))
    }

    /// A new closure of `f` over the current values of its captures.
    fn closure(&mut self, f: FunId, span: Span) -> R<Vals> {
        let fun = self.cg.prog.fun(f);
        let mut caps = Vec::new();
        for &c in &fun.captures {
            let v = self.local(c, span)?;
            self.inc(&self.cg.prog.local_ty(c).clone(), &v);
            caps.extend(v);
        }
        Ok(vec![self.closure_object(f, &caps, span)?])
    }

    /// A new closure object of `f` (count 1) over the captured slots
    /// `slots` (whose references it takes).
    fn closure_object(&mut self, f: FunId, slots: &[ir::Value], span: Span) -> R<ir::Value> {
        let bytes = self
            .b
            .ins()
            .iconst(types::I64, CLO_ENV + SLOT * slots.len() as i64);
        let p = self.alloc(bytes, span)?;
        let one = self.b.ins().iconst(types::I64, 1);
        self.b.ins().store(flags(), one, p, 0);
        let drop_id = self.cg.closure_drop_id(f)?;
        let drop_ref = self.func_ref(drop_id);
        let drop_addr = self.b.ins().func_addr(PTR, drop_ref);
        self.b.ins().store(flags(), drop_addr, p, CLO_DROP);
        let code_id = self.cg.closure_code_id(f)?;
        let code_ref = self.func_ref(code_id);
        let code_addr = self.b.ins().func_addr(PTR, code_ref);
        self.b.ins().store(flags(), code_addr, p, CLO_CODE);
        for (k, v) in slots.iter().enumerate() {
            self.b
                .ins()
                .store(flags(), *v, p, (CLO_ENV + SLOT * k as i64) as i32);
        }
        Ok(p)
    }

    /// A new closure over the captured values of closure `c` with the code
    /// of `to` for the `(from, to)` pair whose `from` code `c` has
    /// ([`ExprKind::Recode`]): `to` has `from`'s captures, so the slots are
    /// copied as they are (each value's count raised).
    fn recode(&mut self, c: ir::Value, cases: &[(FunId, FunId)], span: Span) -> R<ir::Value> {
        let r = self.by_code(c, cases, &[PTR], span, |g, to| {
            let mut slots = Vec::new();
            for (ty, vals) in g.captures_in(c, to, span)? {
                g.inc(&ty, &vals);
                slots.extend(vals);
            }
            Ok(vec![g.closure_object(to, &slots, span)?])
        })?;
        Ok(r[0])
    }

    /// `closure x` where `closure` is recoded ([`ExprKind::Recode`]): the
    /// recoded closure would only be called and dropped, so `to`'s function
    /// is called directly over the captures read from the closure itself (no
    /// closure made: nested `jvp`s and `grad`s recode their function at every
    /// call). The order of evaluation is the application's: the closure,
    /// then the argument.
    fn apply_recoded(
        &mut self,
        (closure, cases, direct): (&Expr, &[(FunId, FunId)], bool),
        x: &Expr,
        rets: &[ir::Type],
        span: Span,
    ) -> R<Vals> {
        let (c, owned) = self.borrowed(closure)?;
        let xv = self.owned_value(x)?;
        let r = self.by_code(c[0], cases, rets, span, |g, to| {
            let captures = g.captures_in(c[0], to, span)?;
            // A small body (a partial application, `fun x -> -(f x)`) is
            // inlined, its captures bound to the closure's slots for it.
            // A direct application (a closure applied to a tuple calls a
            // copy of its function for it, `small_vecs::Pass::apply`): its
            // body is inlined, and the direct applications in it, but of
            // what it calls only small leaves. Inlining the calls behind
            // such closures too took saddle's compile 2–3× for 5 % fewer
            // instructions.
            let cap = g.inline_cap;
            if direct {
                let own = body_nodes(&g.cg.prog.fun(to).body, INLINE_BUDGET);
                g.inline_cap = INLINE_BUDGET.min(g.inlined_nodes + own.unwrap_or(INLINE_BUDGET));
            }
            if g.may_inline(to) {
                let r = g.inline_recoded(to, captures, &xv, span);
                g.inline_cap = cap;
                return r;
            }
            g.inline_cap = cap;
            let mut args = vec![g.ctx];
            for (_, vals) in captures {
                args.extend(vals);
            }
            args.extend_from_slice(&xv);
            g.before_call(span)?;
            let id = g.cg.fun_id(to)?;
            let r = g.call(id, &args);
            g.check_failed_at(span)?;
            Ok(r)
        })?;
        self.release(&closure.ty, &c, owned)?;
        Ok(r)
    }

    /// `to`'s body in place of a call of it, over `captures` read from a
    /// closure and the argument `xv`. The body's errors leave through a
    /// block that reports them at the application `span`, as
    /// [`Self::check_failed_at`] after the call would (the interpreter
    /// reports a closure's error at its innermost application).
    fn inline_recoded(
        &mut self,
        to: FunId,
        captures: Vec<(Type, Vals)>,
        xv: &[ir::Value],
        span: Span,
    ) -> R<Vals> {
        let locals = self.cg.prog.fun(to).captures.clone();
        let shadowed: Vec<(Local, Option<Vals>)> = locals
            .iter()
            .zip(captures)
            .map(|(&l, (_, vals))| (l, self.vars.insert(l, vals)))
            .collect();
        // The error block is made first: a block is filled before another
        // is begun.
        let outer_unwind = self.unwind;
        let (here, body) = (self.b.create_block(), self.b.create_block());
        self.b.set_cold_block(here);
        self.b.ins().jump(body, &[]);
        self.b.switch_to_block(here);
        self.unwind_from(span)?;
        self.b.switch_to_block(body);
        self.unwind = here;
        let r = self.inline(to, xv, span);
        self.unwind = outer_unwind;
        for (l, before) in shadowed {
            match before {
                Some(vals) => self.vars.insert(l, vals),
                None => self.vars.remove(&l),
            };
        }
        r
    }

    /// Branches on the code of closure `c` to `arm(self, to)` for the
    /// `(from, to)` pair of [`ExprKind::Recode`]'s `cases` whose `from` it
    /// is; the arms' values (of types `rets`) join after.
    fn by_code(
        &mut self,
        c: ir::Value,
        cases: &[(FunId, FunId)],
        rets: &[ir::Type],
        span: Span,
        mut arm: impl FnMut(&mut Self, FunId) -> R<Vals>,
    ) -> R<Vals> {
        let code = self.b.ins().load(PTR, flags(), c, CLO_CODE);
        let done = self.b.create_block();
        for &t in rets {
            self.b.append_block_param(done, t);
        }
        for &(from, to) in cases {
            let from_id = self.cg.closure_code_id(from)?;
            let from_ref = self.func_ref(from_id);
            let from_addr = self.b.ins().func_addr(PTR, from_ref);
            let (this, next) = (self.b.create_block(), self.b.create_block());
            let same = self.b.ins().icmp(IntCC::Equal, code, from_addr);
            self.b.ins().brif(same, this, &[], next, &[]);
            self.b.switch_to_block(this);
            let vals = arm(self, to)?;
            self.b.ins().jump(done, &bargs(&vals));
            self.b.switch_to_block(next);
        }
        // Every closure of the type is one of the cases (the pass lists them
        // all); reaching here is a compiler bug, reported as such.
        let always = self.b.ins().iconst(types::I8, 1);
        self.fail_if(always, ErrorKind::Internal, span, None)?;
        self.b.ins().jump(self.unwind, &[]);
        self.b.switch_to_block(done);
        Ok(self.b.block_params(done).to_vec())
    }

    /// The captured values of `to`, read (borrowed) from the slots of
    /// closure `c`, which has a copy of `to`'s function over the same
    /// captures: each with its type.
    fn captures_in(&mut self, c: ir::Value, to: FunId, span: Span) -> R<Vec<(Type, Vals)>> {
        let captures = self.cg.prog.fun(to).captures.clone();
        let mut out = Vec::with_capacity(captures.len());
        let mut offset = CLO_ENV;
        for l in captures {
            let ty = self.cg.prog.local_ty(l).clone();
            let flat = layout::flat(&ty, span)?;
            let mut vals = Vec::with_capacity(flat.len());
            for t in flat {
                vals.push(self.b.ins().load(t, flags(), c, offset as i32));
                offset += SLOT;
            }
            out.push((ty, vals));
        }
        Ok(out)
    }

    fn alloc(&mut self, bytes: ir::Value, span: Span) -> R<ir::Value> {
        // Fast path, inline: pop the free list of the size's class.
        let (head_addr, small) = self.free_list(bytes);
        let (pop, slow, done) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.append_block_param(done, PTR);
        let check_head = self.b.create_block();
        self.b.ins().brif(small, check_head, &[], slow, &[]);
        self.b.switch_to_block(check_head);
        let head = self.b.ins().load(PTR, flags(), head_addr, 0);
        self.b.ins().brif(head, pop, &[], slow, &[]);
        self.b.switch_to_block(pop);
        let next = self.b.ins().load(PTR, flags(), head, 0);
        self.b.ins().store(flags(), next, head_addr, 0);
        self.b.ins().jump(done, &bargs(&[head]));
        // Slow path: the runtime (the system allocator, the budget).
        self.b.switch_to_block(slow);
        let id = self
            .cg
            .import("rt_alloc", &[PTR, types::I64, types::I32], &[PTR])?;
        let s = self.cg.span_index(span);
        let s = self.b.ins().iconst(types::I32, s);
        let r = self.call(id, &[self.ctx, bytes, s]);
        self.check_failed();
        self.b.ins().jump(done, &bargs(&r));
        self.b.switch_to_block(done);
        Ok(self.b.block_params(done)[0])
    }

    /// The address of the free list for objects of `bytes` in the context,
    /// and whether `bytes` is small enough to have one
    /// ([`runtime::SMALL`]).
    fn free_list(&mut self, bytes: ir::Value) -> (ir::Value, ir::Value) {
        let small =
            self.b
                .ins()
                .icmp_imm_s(IntCC::UnsignedLessThanOrEqual, bytes, runtime::SMALL as i64);
        // Classes are multiples of 8 bytes: class k's head is at FREE + 8k.
        let at = self.b.ins().iadd(self.ctx, bytes);
        let head_addr = self.b.ins().iadd_imm_s(at, i64::from(Ctx::FREE));
        (head_addr, small)
    }

    /// A vector of `n` (≥ 0) elements of `elem`, count 1, elements unset.
    fn alloc_vec(&mut self, elem: &Type, n: ir::Value, span: Span) -> R<ir::Value> {
        let bytes = self.vec_bytes(elem, n);
        let v = self.alloc(bytes, span)?;
        let one = self.b.ins().iconst(types::I64, 1);
        self.b.ins().store(flags(), one, v, 0);
        self.b.ins().store(flags(), n, v, VEC_LEN);
        Ok(v)
    }

    fn elem_addr(&mut self, elem: &Type, v: ir::Value, i: ir::Value) -> ir::Value {
        let stride = SLOT * layout::width(elem) as i64;
        let off = self.b.ins().imul_imm_s(i, stride);
        let a = self.b.ins().iadd(v, off);
        self.b.ins().iadd_imm_s(a, VEC_DATA)
    }

    /// Element `i` of vector `v`, borrowed.
    fn load_elem(&mut self, elem: &Type, v: ir::Value, i: ir::Value) -> R<Vals> {
        let addr = self.elem_addr(elem, v, i);
        let flat = layout::flat(elem, Span::default())?;
        Ok(flat
            .iter()
            .enumerate()
            .map(|(k, &t)| {
                self.b
                    .ins()
                    .load(t, immutable(), addr, (SLOT * k as i64) as i32)
            })
            .collect())
    }

    fn store_elem(&mut self, elem: &Type, v: ir::Value, i: ir::Value, vals: &[ir::Value]) {
        let addr = self.elem_addr(elem, v, i);
        for (k, &x) in vals.iter().enumerate() {
            self.b
                .ins()
                .store(flags(), x, addr, (SLOT * k as i64) as i32);
        }
    }

    /// `for i in 0..n { body(i) }`.
    fn each_index(
        &mut self,
        n: ir::Value,
        fun_arg: Option<&Expr>,
        mut body: impl FnMut(&mut Self, ir::Value) -> R<()>,
    ) -> R<()> {
        self.fold_index(n, &[], fun_arg, |g, i, _| {
            body(g, i)?;
            Ok(Vec::new())
        })
        .map(|_| ())
    }

    /// `for i in 0..n { acc = body(i, acc) }`, returning `acc`.
    /// When the body is the inlined `fun_arg`, what it indexes with values
    /// from outside the loop is evaluated once, before it ([`hoistable`]).
    ///
    /// The loop is rotated: one test before it, and the test of the next
    /// counter at the end of the body branches back, so that an iteration
    /// takes one taken branch instead of two (a header test and a jump).
    fn fold_index(
        &mut self,
        n: ir::Value,
        init: &[ir::Value],
        fun_arg: Option<&Expr>,
        body: impl FnMut(&mut Self, ir::Value, &[ir::Value]) -> R<Vals>,
    ) -> R<Vals> {
        self.fold_index_runs(n, false, init, fun_arg, body)
    }

    /// [`FnGen::fold_index`], told whether `n > 0` is known here (then the
    /// loop is entered without a test).
    fn fold_index_runs(
        &mut self,
        n: ir::Value,
        runs: bool,
        init: &[ir::Value],
        fun_arg: Option<&Expr>,
        mut body: impl FnMut(&mut Self, ir::Value, &[ir::Value]) -> R<Vals>,
    ) -> R<Vals> {
        let step = self.b.create_block();
        let exit = self.b.create_block();
        self.b.append_block_param(step, types::I64);
        for &v in init {
            let t = self.b.func.dfg.value_type(v);
            self.b.append_block_param(step, t);
            self.b.append_block_param(exit, t);
        }
        let hoisted = self.hoist_before_loop(n, runs, init, fun_arg, exit)?;
        let zero = self.b.ins().iconst(types::I64, 0);
        let mut args = vec![zero];
        args.extend_from_slice(init);
        if hoisted.is_empty() && !runs {
            let runs = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, n, 0);
            self.b
                .ins()
                .brif(runs, step, &bargs(&args), exit, &bargs(init));
        } else {
            // It runs, or `hoist_before_loop` has left for `exit` if not.
            self.b.ins().jump(step, &bargs(&args));
        }
        self.b.switch_to_block(step);
        let params = self.b.block_params(step).to_vec();
        let (i, acc) = (params[0], params[1..].to_vec());
        // 0 <= i < n: i is below every length n is, or is below.
        let under = self.bounds_of(n);
        if !under.is_empty() {
            self.below.insert(i, under);
        }
        let acc = body(self, i, &acc)?;
        let next = self.b.ins().iadd_imm_s(i, 1);
        let more = self.b.ins().icmp(IntCC::SignedLessThan, next, n);
        let mut args = vec![next];
        args.extend_from_slice(&acc);
        self.b
            .ins()
            .brif(more, step, &bargs(&args), exit, &bargs(&acc));
        self.b.switch_to_block(exit);
        // What was evaluated before the loop does not dominate its exit.
        for e in hoisted {
            if let Some(vals) = self.hoisted.remove(&e) {
                self.known_len.remove(&vals[0]);
            }
        }
        Ok(self.b.block_params(exit).to_vec())
    }

    /// Evaluates before a loop what its inlined body `fun_arg` indexes with
    /// values from outside ([`hoistable`]), when the loop runs at all (the
    /// interpreter evaluates them in the first iteration, before anything
    /// else that could fail): a zero-trip loop jumps to `exit` with `init`
    /// (unless `runs`: then `n > 0` is known and nothing is tested).
    /// Returns the expressions hoisted.
    fn hoist_before_loop(
        &mut self,
        n: ir::Value,
        runs: bool,
        init: &[ir::Value],
        fun_arg: Option<&Expr>,
        exit: ir::Block,
    ) -> R<Vec<*const Expr>> {
        let Some(ExprKind::Closure(f)) = fun_arg.map(|e| &e.kind) else {
            return Ok(Vec::new());
        };
        if !self.may_inline_in_loop(*f) {
            return Ok(Vec::new());
        }
        let prog = self.cg.prog;
        let fun = prog.fun(*f);
        let mut candidates = hoistable(&fun.body, &fun.captures);
        // A sum's step: its element's body runs first, over the step's
        // captures.
        if candidates.is_empty()
            && let Some(g) = sum_step_element(fun)
        {
            let g = prog.fun(g);
            if g.captures.iter().all(|c| fun.captures.contains(c)) {
                candidates = hoistable(&g.body, &g.captures);
            }
        }
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        if !runs {
            let pre = self.b.create_block();
            let runs = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, n, 0);
            self.b.ins().brif(runs, pre, &[], exit, &bargs(init));
            self.b.switch_to_block(pre);
        }
        let mut keys = Vec::new();
        for e in candidates {
            let (vals, owned) = self.borrowed(e)?;
            if owned {
                return Err(internal("a hoisted element that is not borrowed", e.span));
            }
            if matches!(e.ty, Type::Vec(_)) {
                let len = self.vec_len(vals[0]);
                self.known_len.insert(vals[0], len);
            }
            self.hoisted.insert(e as *const Expr, vals);
            keys.push(e as *const Expr);
        }
        Ok(keys)
    }

    /// Calls the known function of a `build`/`map`/`fold` argument, or
    /// inlines its body: a call per element costs more than the small
    /// bodies these loops usually have.
    fn call_fn_arg(&mut self, fe: &Expr, args: &[ir::Value], span: Span) -> R<Vals> {
        let ExprKind::Closure(f) = fe.kind else {
            return Err(internal(
                "a function argument that is not a known function",
                span,
            ));
        };
        let fun = self.cg.prog.fun(f);
        if self.may_inline_in_loop(f) {
            return self.inline(f, args, span);
        }
        let mut full = vec![self.ctx];
        for &c in &fun.captures {
            full.extend(self.local(c, span)?);
        }
        full.extend_from_slice(args);
        let id = self.cg.fun_id(f)?;
        self.before_call(span)?;
        let r = self.call(id, &full);
        self.check_failed();
        Ok(r)
    }

    /// The body of `f` applied to `args` (owned, as in a call), generated
    /// here. The captures keep their ids in the body and are in scope here.
    fn inline(&mut self, f: FunId, args: &[ir::Value], span: Span) -> R<Vals> {
        let fun = self.cg.prog.fun(f);
        // A call limit counts every call, made or inlined.
        if self.cg.count_calls {
            self.count_call(span)?;
        }
        // A small leaf is inlined whatever the budget, so it spends none
        // (a sum in lanes inlines its element up to eight times).
        if !is_small_leaf(&fun.body) {
            self.inlined_nodes += body_nodes(&fun.body, INLINE_BUDGET).unwrap_or(INLINE_BUDGET);
        }
        self.inlining.push(f);
        let mark = self.owned.len();
        let mut at = 0;
        for (p, t) in &fun.params {
            let w = layout::width(t);
            self.bind(p, t, &args[at..at + w]);
            at += w;
        }
        let r = self.owned_value(&fun.body);
        self.drop_scope(mark);
        self.inlining.pop();
        // The body's locals go out of scope ([`Self::may_inline_within`]
        // made sure none was bound here before).
        for l in &self.cg.bound[f.0 as usize] {
            self.vars.remove(l);
        }
        r
    }

    /// True if `f`'s body is small and inlining it here cannot recur.
    fn may_inline(&self, f: FunId) -> bool {
        /// Expression nodes a body may have (nested functions not counted:
        /// they are inlined, or not, at their own uses).
        const BODY_BUDGET: usize = 72;
        self.may_inline_within(f, BODY_BUDGET)
    }

    /// [`Self::may_inline`] for the function argument of a loop (`build`,
    /// `map`, `fold`): a call per element costs more, and such a function is
    /// usually used once, so larger bodies are inlined (the bodies compiled
    /// differentiation makes at level 2 have a few hundred nodes: `fun a ->
    /// a * a` forward over reverse, 410; particle RF −2 % instructions with
    /// it inlined).
    fn may_inline_in_loop(&self, f: FunId) -> bool {
        const LOOP_BODY_BUDGET: usize = 600;
        self.may_inline_within(f, LOOP_BODY_BUDGET)
    }

    fn may_inline_within(&self, f: FunId, budget: usize) -> bool {
        /// How deep inlined bodies nest. GMM's point term (objective → data
        /// term → point → component → `qtimes` → row sum) needs 6 to become
        /// one loop nest; with loops rotated (`fold_index`) the register
        /// allocator keeps its counters in registers (GMM d = 2 primal
        /// 130 → 118 µs, d = 20 9.1 → 7.7 ms; 4 deep before).
        const DEPTH: usize = 8;
        if self.inlining.contains(&f) || self.current.is_some_and(|(me, _)| me == f) {
            return false;
        }
        // A small leaf at any depth: it has no loop counters to spill.
        let fun = self.cg.prog.fun(f);
        let small = is_small_leaf(&fun.body)
            || self.inlining.len() < DEPTH
                && body_nodes(&fun.body, budget)
                    .is_some_and(|n| self.inlined_nodes + n <= self.inline_cap);
        // A function whose locals are bound here — one this function is
        // nested in, whose locals it captures (a captured local keeps its
        // id) — is called: its body would rebind them.
        small
            && !self.cg.bound[f.0 as usize]
                .iter()
                .any(|l| self.vars.contains_key(l))
    }

    fn vec_len(&mut self, v: ir::Value) -> ir::Value {
        let n = self.b.ins().load(types::I64, immutable(), v, VEC_LEN);
        self.lengths.insert(n, vec![v]);
        n
    }

    // ---- primitives ----

    fn prim(&mut self, p: Prim, args: &[Expr], ty: &Type, span: Span) -> R<Vals> {
        match p {
            Prim::Index => {
                let (x, owned) = self.index(args, span)?;
                if !owned {
                    self.inc(ty, &x);
                }
                return Ok(x);
            }
            Prim::Size => {
                let (v, owned) = self.borrowed(&args[0])?;
                let len = self.vec_len(v[0]);
                self.release(&args[0].ty, &v, owned)?;
                return Ok(vec![len]);
            }
            Prim::Sum => return self.sum(&args[0], ty, span),
            Prim::Build => {
                let Type::Vec(elem) = ty else {
                    return Err(internal("`build` of a non-vector", span));
                };
                let n = self.build_size(&args[0], span)?;
                let v = self.alloc_vec(elem, n, span)?;
                let elem = (**elem).clone();
                self.each_index(n, Some(&args[1]), |g, i| {
                    let x = g.call_fn_arg(&args[1], &[i], span)?;
                    g.store_elem(&elem, v, i, &x);
                    Ok(())
                })?;
                return Ok(vec![v]);
            }
            Prim::Map => {
                let (Type::Vec(a), Type::Vec(b)) = (&args[1].ty, ty) else {
                    return Err(internal("`map` of a non-vector", span));
                };
                let (v, owned) = self.borrowed(&args[1])?;
                let n = self.vec_len(v[0]);
                let out = self.alloc_vec(b, n, span)?;
                let (a, b) = ((**a).clone(), (**b).clone());
                self.each_index(n, Some(&args[0]), |g, i| {
                    let x = g.load_elem(&a, v[0], i)?;
                    g.inc(&a, &x);
                    let y = g.call_fn_arg(&args[0], &x, span)?;
                    g.store_elem(&b, out, i, &y);
                    Ok(())
                })?;
                self.release(&args[1].ty, &v, owned)?;
                return Ok(vec![out]);
            }
            Prim::Fold => {
                let Type::Vec(a) = &args[2].ty else {
                    return Err(internal("`fold` of a non-vector", span));
                };
                let init = self.owned_value(&args[1])?;
                if let Some(n) = self.indices(&args[2]) {
                    // A fold over the indices `build n (fun i -> i)` (a
                    // built sum's, `translate::dual`) counts them.
                    let n = self.build_size(n, args[2].span)?;
                    return self.fold_index(n, &init, Some(&args[0]), |g, i, acc| {
                        let mut call_args = acc.to_vec();
                        call_args.push(i);
                        g.call_fn_arg(&args[0], &call_args, span)
                    });
                }
                let (v, owned) = self.borrowed(&args[2])?;
                let n = self.vec_len(v[0]);
                let a = (**a).clone();
                let r = self.fold_index(n, &init, Some(&args[0]), |g, i, acc| {
                    let x = g.load_elem(&a, v[0], i)?;
                    g.inc(&a, &x);
                    let mut call_args = acc.to_vec();
                    call_args.extend(x);
                    g.call_fn_arg(&args[0], &call_args, span)
                })?;
                self.release(&args[2].ty, &v, owned)?;
                return Ok(r);
            }
            Prim::Zip => {
                let (Type::Vec(a), Type::Vec(b), Type::Vec(pair)) = (&args[0].ty, &args[1].ty, ty)
                else {
                    return Err(internal("`zip` of non-vectors", span));
                };
                let (u, u_owned) = self.borrowed(&args[0])?;
                let (w, w_owned) = self.borrowed(&args[1])?;
                let n = self.vec_len(u[0]);
                let m = self.vec_len(w[0]);
                let differ = self.b.ins().icmp(IntCC::NotEqual, n, m);
                self.fail_if(differ, ErrorKind::ZipLengths, span, Some((n, m)))?;
                let out = self.alloc_vec(pair, n, span)?;
                let (a, b, pair) = ((**a).clone(), (**b).clone(), (**pair).clone());
                self.each_index(n, None, |g, i| {
                    let mut x = g.load_elem(&a, u[0], i)?;
                    g.inc(&a, &x);
                    let y = g.load_elem(&b, w[0], i)?;
                    g.inc(&b, &y);
                    x.extend(y);
                    g.store_elem(&pair, out, i, &x);
                    Ok(())
                })?;
                self.release(&args[0].ty, &u, u_owned)?;
                self.release(&args[1].ty, &w, w_owned)?;
                return Ok(vec![out]);
            }
            Prim::Add => {
                if let [chain, zero] = args
                    && let ExprKind::Prim(Prim::Chain, operands) = &chain.kind
                    && let ExprKind::Lit(Lit::Real(z)) = zero.kind
                    && z.to_bits() == 0
                {
                    let p = self.owned_value(&operands[0])?[0];
                    let d = self.owned_value(&operands[1])?[0];
                    return Ok(vec![self.chain_plus_zero(p, d)]);
                }
            }
            _ => {}
        }
        let mut vals = Vec::new();
        for a in args {
            vals.extend(self.owned_value(a)?);
        }
        let operand = args.first().map(|a| a.ty.clone()).unwrap_or(Type::Unit);
        let ins = self.b.ins();
        let v = match (p, &operand, &vals[..]) {
            (Prim::Not, _, &[x]) => ins.icmp_imm_s(IntCC::Equal, x, 0),
            (Prim::ToReal, _, &[x]) => ins.fcvt_from_sint(types::F64, x),
            (Prim::Fail, _, &[code, a, b]) => self.fail_library(code, a, b, span)?,
            (Prim::ToInt, _, &[x]) => {
                // -2^63 <= x < 2^63 (false for NaN), as `arith::to_int`.
                let lo = ins.f64const(-9_223_372_036_854_775_808.0);
                let ge = self.b.ins().fcmp(FloatCC::GreaterThanOrEqual, x, lo);
                let hi = self.b.ins().f64const(9_223_372_036_854_775_808.0);
                let lt = self.b.ins().fcmp(FloatCC::LessThan, x, hi);
                let ok = self.b.ins().band(ge, lt);
                let bad = self.b.ins().icmp_imm_s(IntCC::Equal, ok, 0);
                let bits = self.b.ins().bitcast(types::I64, MemFlagsData::new(), x);
                self.fail_if(bad, ErrorKind::NotAnInt, span, Some((bits, bits)))?;
                self.b.ins().fcvt_to_sint(types::I64, x)
            }
            (Prim::Neg, Type::Int, &[x]) => {
                let zero = self.b.ins().iconst(types::I64, 0);
                return Ok(vec![self.int_op(Prim::Sub, zero, x, span)?]);
            }
            (Prim::Add | Prim::Sub | Prim::Mul | Prim::Div | Prim::Rem, Type::Int, &[x, y]) => {
                return Ok(vec![self.int_op(p, x, y, span)?]);
            }
            (
                Prim::Lt | Prim::Le | Prim::Gt | Prim::Ge | Prim::Eq | Prim::Ne,
                Type::Real,
                &[x, y],
            ) => {
                let cc = match p {
                    Prim::Lt => FloatCC::LessThan,
                    Prim::Le => FloatCC::LessThanOrEqual,
                    Prim::Gt => FloatCC::GreaterThan,
                    Prim::Ge => FloatCC::GreaterThanOrEqual,
                    Prim::Eq => FloatCC::Equal,
                    _ => FloatCC::NotEqual,
                };
                ins.fcmp(cc, x, y)
            }
            (Prim::Lt | Prim::Le | Prim::Gt | Prim::Ge | Prim::Eq | Prim::Ne, _, &[x, y]) => {
                let cc = match p {
                    Prim::Lt => IntCC::SignedLessThan,
                    Prim::Le => IntCC::SignedLessThanOrEqual,
                    Prim::Gt => IntCC::SignedGreaterThan,
                    Prim::Ge => IntCC::SignedGreaterThanOrEqual,
                    Prim::Eq => IntCC::Equal,
                    _ => IntCC::NotEqual,
                };
                ins.icmp(cc, x, y)
            }
            (Prim::Add, Type::Real, &[x, y]) => ins.fadd(x, y),
            (Prim::Sub, Type::Real, &[x, y]) => ins.fsub(x, y),
            (Prim::Mul, Type::Real, &[x, y]) => ins.fmul(x, y),
            (Prim::Div, Type::Real, &[x, y]) => ins.fdiv(x, y),
            (Prim::Neg, Type::Real, &[x]) => ins.fneg(x),
            (Prim::Sqrt, _, &[x]) => ins.sqrt(x),
            (Prim::Abs, _, &[x]) => ins.fabs(x),
            (Prim::Floor, _, &[x]) => ins.floor(x),
            // The value; its derivative is 0 (compiled differentiation
            // strips the operand to its primal before it gets here).
            (Prim::StopGradient, _, &[x]) => x,
            // `nabla::Number::chain`: an exact zero on either side gives 0
            // ([`FnGen::chain_masked`]).
            (Prim::Chain, _, &[p, d]) => {
                let w = self.chain_masked(p, d);
                self.chains.insert(w, (p, d));
                w
            }
            (Prim::Min | Prim::Max, _, &[x, y]) => {
                let sel = match p.info().real {
                    Some(RealFn::Select(Selection::Min)) => FloatCC::LessThan,
                    _ => FloatCC::GreaterThan,
                };
                // The second is taken only if strictly smaller (larger): ties and NaN keep the first.
                let second = ins.fcmp(sel, y, x);
                self.b.ins().select(second, y, x)
            }
            _ => {
                let Some((name, _)) = math_symbol(p).filter(|&(_, n)| n == vals.len()) else {
                    return Err(Unsupported {
                        what: format!("the primitive `{}` in native code", p.info().name),
                        span,
                    });
                };
                return Ok(vec![self.math_call(name, &vals)?]);
            }
        };
        Ok(vec![v])
    }

    /// `chain(p, d) + 0`, the form of every term of a plain tangent: the
    /// product plus 0 (+0 for a zero product, as `chain`'s zero plus 0),
    /// except where that is NaN, which may be `0 · ∞` or `0 · NaN` where
    /// `chain` gives 0: there (a cold block) the exact masked form.
    /// Three instructions on the common path where the masked form takes
    /// nine.
    fn chain_plus_zero(&mut self, p: ir::Value, d: ir::Value) -> ir::Value {
        let block = self.b.current_block();
        if let Some(w) = self.terms_made.get(block, &(p, d)) {
            return w;
        }
        let product = self.b.ins().fmul(p, d);
        let zero = self.b.ins().f64const(0.0);
        let sum = self.b.ins().fadd(product, zero);
        let nan = self.b.ins().fcmp(FloatCC::Unordered, sum, sum);
        let exact = self.b.create_block();
        let done = self.b.create_block();
        self.b.set_cold_block(exact);
        self.b.append_block_param(done, types::F64);
        self.b.ins().brif(nan, exact, &[], done, &[sum.into()]);
        self.b.switch_to_block(exact);
        let w = self.chain_masked(p, d);
        let zero = self.b.ins().f64const(0.0);
        let w = self.b.ins().fadd(w, zero);
        self.b.ins().jump(done, &[w.into()]);
        self.b.switch_to_block(done);
        // `done` continues the block before: what was made there is
        // usable here.
        let w = self.b.block_params(done)[0];
        self.terms_made.continue_into(block, done);
        self.math_calls.continue_into(block, done);
        self.terms_made.insert(Some(done), (p, d), w);
        w
    }

    /// True if every one of `reals` is ±0 ([`all_zero_tests`]): their bits
    /// or'ed, shifted past the sign, are 0 — where each float comparison
    /// with zero takes flags of two kinds (a NaN is unordered) and the
    /// conjunction a select.
    fn all_zero(&mut self, reals: &[&Expr]) -> R<ir::Value> {
        let mut bits = None;
        for x in reals {
            let v = self.owned_value(x)?[0];
            let b = self.b.ins().bitcast(types::I64, MemFlagsData::new(), v);
            bits = Some(match bits {
                Some(acc) => self.b.ins().bor(acc, b),
                None => b,
            });
        }
        let bits = bits.ok_or_else(|| internal("a zero test of no real", Span::default()))?;
        let magnitude = self.b.ins().ishl_imm_u(bits, 1);
        Ok(self.b.ins().icmp_imm_s(IntCC::Equal, magnitude, 0))
    }

    /// `chain(p, d)` of two reals, branch- and flag-free: in lane 0 of a
    /// vector register ([`FnGen::chain_lanes`]), the operands splat (one
    /// instruction each, where putting them in a zeroed vector takes two:
    /// GMM, BA, saddle −2 %, particle FF −4 %, LSTM −3 % instructions).
    fn chain_masked(&mut self, p: ir::Value, d: ir::Value) -> ir::Value {
        let pv = self.b.ins().splat(types::F64X2, p);
        let dv = self.b.ins().splat(types::F64X2, d);
        let masked = self.chain_lanes(pv, dv);
        self.b.ins().extractlane(masked, 0)
    }

    /// `nabla::Number::chain` lane by lane: the products `p · d` with their
    /// bits masked by `p ≠ 0 ∧ d ≠ 0` (+0 is all zero bits; a NaN is ≠ 0,
    /// so it stays in the product, as in `chain`).
    fn chain_lanes(&mut self, p: ir::Value, d: ir::Value) -> ir::Value {
        let zero = self.b.ins().f64const(0.0);
        let zeros = self.b.ins().splat(types::F64X2, zero);
        let p_nonzero = self.b.ins().fcmp(FloatCC::NotEqual, p, zeros);
        let d_nonzero = self.b.ins().fcmp(FloatCC::NotEqual, d, zeros);
        let both = self.b.ins().band(p_nonzero, d_nonzero);
        let product = self.b.ins().fmul(p, d);
        let lanes = MemFlagsData::new().with_endianness(ir::Endianness::Little);
        let mask = self.b.ins().bitcast(types::F64X2, lanes, both);
        self.b.ins().band(product, mask)
    }

    /// The weights `(w0, w1)` of a Delta side by side in one vector (lane
    /// 0, lane 1), where both are `chain`s made here ([`FnGen::chains`]):
    /// one product and mask for the two, and one store.
    fn weights_in_lanes(&mut self, w0: ir::Value, w1: ir::Value) -> Option<ir::Value> {
        let (&(p0, d0), &(p1, d1)) = (self.chains.get(&w0)?, self.chains.get(&w1)?);
        let p = self.b.ins().splat(types::F64X2, p0);
        let p = self.b.ins().insertlane(p, p1, 1);
        let d = self.b.ins().splat(types::F64X2, d0);
        let d = self.b.ins().insertlane(d, d1, 1);
        Some(self.chain_lanes(p, d))
    }

    /// The runtime's real function `name` (pure) at `args`: a call, unless
    /// one with the same arguments was made earlier in the current block
    /// ([`FnGen::math_calls`]).
    fn math_call(&mut self, name: &'static str, args: &[ir::Value]) -> R<ir::Value> {
        let block = self.b.current_block();
        let key = (name, args.to_vec());
        if let Some(r) = self.math_calls.get(block, &key) {
            return Ok(r);
        }
        let id = self
            .cg
            .import(name, &vec![types::F64; args.len()], &[types::F64])?;
        let r = self.call(id, args)[0];
        self.math_calls.insert(block, key, r);
        Ok(r)
    }

    /// Int `+ - * / %` with the interpreter's overflow and division errors.
    fn int_op(&mut self, p: Prim, x: ir::Value, y: ir::Value, span: Span) -> R<ir::Value> {
        let op_index = runtime::OVERFLOW_OPS
            .iter()
            .position(|&q| q == p)
            .unwrap_or(0);
        let which = self.b.ins().iconst(types::I64, op_index as i64);
        let (r, overflow) = match p {
            Prim::Add => self.b.ins().sadd_overflow(x, y),
            Prim::Sub => self.b.ins().ssub_overflow(x, y),
            Prim::Mul => self.b.ins().smul_overflow(x, y),
            _ => {
                let zero = self.b.ins().icmp_imm_s(IntCC::Equal, y, 0);
                self.fail_if(zero, ErrorKind::DivByZero, span, None)?;
                let min = self.b.ins().icmp_imm_s(IntCC::Equal, x, i64::MIN);
                let minus_one = self.b.ins().icmp_imm_s(IntCC::Equal, y, -1);
                let both = self.b.ins().band(min, minus_one);
                self.fail_if(both, ErrorKind::Overflow, span, Some((which, which)))?;
                return Ok(if p == Prim::Rem {
                    self.b.ins().srem(x, y)
                } else {
                    self.b.ins().sdiv(x, y)
                });
            }
        };
        self.fail_if(overflow, ErrorKind::Overflow, span, Some((which, which)))?;
        Ok(r)
    }
}
