//! Strings the phases together: the one entry point used by the CLI, the
//! REPL, the test runner and the fuzz target.

use crate::core::{self, desugar_program, lower_typed};
use crate::diagnostic::Diagnostic;
use crate::eval::{Limits, Machine, RuntimeError, STEP_LIMIT_EXCEEDED, Value};
use crate::pretty::{TypeNamer, print_value_as};
use crate::syntax::ast::{Def, Expr, FunBinding, Ident};
use crate::syntax::parser::{IdGen, parse_expression, parse_program};
use crate::syntax::span::{SourceMap, Span};
use crate::translate;
use crate::types::{CheckedProgram, Kind, Type, Typing, check_program, check_program_with};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// Name of the synthetic definition that holds a REPL / `eval` expression.
/// It is not an identifier, so no program can refer to it.
const EXPR_DEF: &str = "<expr>";

/// The name under which expressions see the last value [`Session::eval_expr`] printed.
pub const IT: &str = "it";

/// A session: the source text seen so far and the definitions in force.
///
/// In a file, every definition is new and names must be unique. When more
/// input is loaded later (the REPL's definitions and `:load`), a definition
/// replaces an earlier one of the same name.
#[derive(Debug, Default)]
pub struct Session {
    /// All source text, for rendering diagnostics.
    pub sources: SourceMap,
    ids: IdGen,
    /// The definitions as written (records and all).
    defs: Vec<Def>,
    /// The type of each of `defs`, from the last successful `load`.
    def_types: Vec<Type>,
    /// `defs` with records erased to tuples ([`core::records`]), if they
    /// use records: the program every back end and translation runs (see
    /// [`Session::core_defs`]). Its first definitions are `defs`' in order.
    erased: Option<Vec<Def>>,
    /// The checker's facts about [`Session::core_defs`], from the last successful `load`.
    typing: Option<Typing>,
    /// Limits applied to every evaluation.
    pub limits: Limits,
    /// When set (by another thread), a running evaluation stops with
    /// [`crate::eval::INTERRUPTED`] (the REPL's Ctrl-C). The session never
    /// clears it.
    pub interrupt: Option<Arc<AtomicBool>>,
    /// The last value printed, if it is data: `it` in later expressions.
    it: Option<KeptValue>,
}

/// A value kept for later expressions, with the definition that gives it
/// its type to the checker (`def it : T = it`, never evaluated: the
/// machine is handed the value instead).
#[derive(Debug)]
struct KeptValue {
    def: Def,
    value: Value,
}

/// Result of a phase: diagnostics on failure.
pub type Outcome<T> = Result<T, Vec<Diagnostic>>;

impl Session {
    /// An empty session with default (unlimited) evaluation limits.
    pub fn new() -> Session {
        Session::default()
    }

    /// Names of the definitions in force.
    pub fn def_names(&self) -> Vec<String> {
        self.defs
            .iter()
            .map(|d| d.binding.name.name.clone())
            .collect()
    }

    /// Parses and type-checks `text` (a sequence of `def`s) together with the
    /// definitions already in force, and keeps them if everything checks.
    /// Returns `(name, type)` of each new definition.
    pub fn load(&mut self, name: &str, text: &str) -> Outcome<Vec<(String, String)>> {
        let file = self.sources.add(name, text);
        let base = self.sources.file(file).base;
        let (prog, errors) = parse_program(text, base, &mut self.ids);
        if !errors.is_empty() {
            return Err(errors.into_iter().map(Diagnostic::from).collect());
        }
        let new_names: Vec<String> = prog
            .defs
            .iter()
            .map(|d| d.binding.name.name.clone())
            .collect();
        let mut defs: Vec<Def> = self
            .defs
            .iter()
            .filter(|d| !new_names.contains(&d.binding.name.name))
            .cloned()
            .collect();
        let first_new = defs.len();
        defs.extend(prog.defs);
        let (source, erased) = checked_core(&defs, &self.declared_records())?;
        let out = Self::named_types(&defs, &source.def_types)
            .into_iter()
            .skip(first_new)
            .collect();
        self.defs = defs;
        self.def_types = source.def_types;
        (self.erased, self.typing) = match erased {
            Some((defs, checked)) => (Some(defs), Some(checked.typing)),
            None => (None, Some(source.typing)),
        };
        Ok(out)
    }

    /// Compiles the definitions in force (already checked by [`Session::load`])
    /// for repeated evaluation by a host program: see [`Compiled`].
    pub fn compile(&self) -> Outcome<Compiled> {
        let checked;
        let typing = match &self.typing {
            Some(t) => t,
            None => {
                checked = check_program(self.core_defs())
                    .map_err(|es| es.into_iter().map(Diagnostic::from).collect::<Vec<_>>())?;
                &checked.typing
            }
        };
        let prog =
            desugar_program(self.core_defs(), typing).map_err(|e| vec![Diagnostic::from(e)])?;
        Ok(Compiled {
            machine: Machine::new(&prog, self.limits),
            names: prog.globals.iter().map(|g| g.name.clone()).collect(),
        })
    }

    /// The definitions in force as the typed IR the native compiler reads:
    /// monomorphised, closure-converted, what `entry` needs. A construct it
    /// cannot express yet is reported with its position (the interpreter
    /// still runs the program).
    pub fn typed_program(
        &self,
        entry: &str,
    ) -> Result<(crate::core::typed::Program, lower_typed::Entry), lower_typed::Unsupported> {
        let mono = crate::types::monomorphise(self.core_defs()).map_err(|es| {
            let e = es.into_iter().next();
            lower_typed::Unsupported {
                what: format!(
                    "a polymorphic definition that cannot be specialised ({})",
                    e.as_ref().map_or("", |e| e.message.as_str())
                ),
                span: e.map_or(Span::default(), |e| e.span),
            }
        })?;
        let (mut program, entry) = lower_typed::lower_typed(&mono, entry)?;
        crate::translate::dual::expand(&mut program)?;
        Ok((program, entry))
    }

    /// The record types declared so far (`type Name = { … }`), which the
    /// checker takes for a record whose type nothing else tells (see
    /// [`check_program_with`]).
    fn declared_records(&self) -> Vec<Type> {
        self.ids
            .aliases()
            .filter_map(|(_, t)| crate::types::infer::poly_index_type(t).ok())
            .filter(|t| matches!(t, Type::Record(..)))
            .collect()
    }

    /// The definitions every back end and translation runs: [`Session`]'s
    /// definitions with records erased to tuples.
    fn core_defs(&self) -> &[Def] {
        self.erased.as_deref().unwrap_or(&self.defs)
    }

    /// True if the definitions in force use records (which every back end
    /// and [`Session::named_program`] see as tuples).
    pub fn has_records(&self) -> bool {
        self.erased.is_some()
    }

    /// The type of definition `name` as written (records by their fields),
    /// if it is defined: what its value is printed and encoded by
    /// ([`crate::pretty::print_value_as`], [`crate::data::encode_json_as`]).
    pub fn type_of(&self, name: &str) -> Option<&Type> {
        let index = self.defs.iter().position(|d| d.binding.name.name == name)?;
        self.def_types.get(index)
    }

    /// The type of `main`'s argument, if `main` is a function, as data for
    /// it must be given (`nabla run --input`): monomorphic, so a
    /// numeric-generic parameter is an Int unless annotated.
    pub fn main_parameter(&self) -> Outcome<Option<crate::types::Type>> {
        let Some(index) = self.defs.iter().position(|d| d.binding.name.name == "main") else {
            return Ok(None);
        };
        let mono = crate::types::monomorphise_with(&self.defs, &self.declared_records())
            .map_err(|es| es.into_iter().map(Diagnostic::from).collect::<Vec<_>>())?;
        Ok(match mono.def_types.get(index) {
            Some(crate::types::Type::Fun(a, _)) => Some((**a).clone()),
            _ => None,
        })
    }

    /// `(name, type)` of every definition in force, in order.
    pub fn check_all(&self) -> Outcome<Vec<(String, String)>> {
        self.types_of(&self.defs)
    }

    fn types_of(&self, defs: &[Def]) -> Outcome<Vec<(String, String)>> {
        let checked = check_program_with(defs, &self.declared_records())
            .map_err(|es| es.into_iter().map(Diagnostic::from).collect::<Vec<_>>())?;
        Ok(Self::named_types(defs, &checked.def_types))
    }

    fn named_types(defs: &[Def], types: &[crate::types::Type]) -> Vec<(String, String)> {
        defs.iter()
            .zip(types)
            .map(|(d, t)| {
                (
                    d.binding.name.name.clone(),
                    TypeNamer::new().print(t, &|_| Kind::Any),
                )
            })
            .collect()
    }

    /// Evaluates `main` and prints its value.
    pub fn run_main(&self) -> Outcome<String> {
        let v = self.prepare_main()?.evaluate()?;
        Ok(print_value_as(
            &v,
            self.type_of("main").unwrap_or(&Type::Unit),
        ))
    }

    /// Prepares `main` of the definitions in force (already checked by
    /// [`Session::load`]) for evaluation: lowered to the interpreter's core
    /// and compiled to its closures once, to be evaluated as often as asked
    /// (`nabla run --repeat`). Fails if there is no `main`.
    pub fn prepare_main(&self) -> Outcome<PreparedMain> {
        let Some(index) = self.defs.iter().position(|d| d.binding.name.name == "main") else {
            let span = self
                .sources
                .files()
                .last()
                .map_or(Span::default(), |f| Span::new(f.base, f.base));
            return Err(vec![
                Diagnostic::error("no definition of `main`", span)
                    .with_label("this program has no `main`")
                    .with_note(
                        "add a definition such as `def main = 42`; `nabla run` prints its value",
                    ),
            ]);
        };
        let mut machine = self.compile()?.machine;
        if let Some(flag) = &self.interrupt {
            machine.set_interrupt(Arc::clone(flag));
        }
        Ok(PreparedMain {
            machine,
            index,
            span: self.defs[index].span,
            limits: self.limits,
        })
    }

    /// Checks `defs` and evaluates definition `index`: its value and type.
    fn evaluate(&self, defs: &[Def], index: usize) -> Outcome<(Value, Type)> {
        let (mut source, erased) = checked_core(defs, &self.declared_records())?;
        let (core_defs, typing) = match &erased {
            Some((defs, checked)) => (&defs[..], &checked.typing),
            None => (defs, &source.typing),
        };
        let prog: core::Program =
            desugar_program(core_defs, typing).map_err(|e| vec![Diagnostic::from(e)])?;
        let mut m = Machine::new(&prog, self.limits);
        if let Some(flag) = &self.interrupt {
            m.set_interrupt(Arc::clone(flag));
        }
        if let Some(it) = &self.it
            && let Some(i) = defs.iter().position(|d| d.span == it.def.span)
        {
            m.preset_global(i, it.value.clone());
        }
        let span = defs[index].span;
        let v = m
            .global(index, span)
            .map_err(|e| vec![runtime_diagnostic(self.limits, *e)])?;
        Ok((v, source.def_types.swap_remove(index)))
    }

    /// Keeps `value` (of type `ty`) as `it` for later expressions if it is
    /// data: a function's code belongs to the program that made it, so
    /// functions are not kept (nor is a value whose type does not read back).
    fn keep_it(&mut self, value: Value, ty: &str) {
        self.it = None;
        if !is_data(&value) {
            return;
        }
        let text = format!("def {IT} : {ty} = {IT}");
        let file = self.sources.add("<it>", &text);
        let base = self.sources.file(file).base;
        let (prog, errors) = parse_program(&text, base, &mut self.ids);
        if let (true, [def]) = (errors.is_empty(), &prog.defs[..]) {
            self.it = Some(KeptValue {
                def: def.clone(),
                value,
            });
        }
    }

    fn with_expr(&mut self, name: &str, text: &str) -> Outcome<(Vec<Def>, usize)> {
        let file = self.sources.add(name, text);
        let base = self.sources.file(file).base;
        let expr: Expr = parse_expression(text, base, &mut self.ids)
            .map_err(|es| es.into_iter().map(Diagnostic::from).collect::<Vec<_>>())?;
        let span = expr.span;
        let mut defs = self.defs.clone();
        // A definition named `it` hides the kept value.
        if let Some(it) = &self.it
            && !defs.iter().any(|d| d.binding.name.name == IT)
        {
            defs.push(it.def.clone());
        }
        defs.push(Def {
            binding: FunBinding {
                name: Ident {
                    name: EXPR_DEF.into(),
                    span,
                },
                params: Vec::new(),
                ret: None,
                body: expr,
            },
            span,
            translated: false,
        });
        let index = defs.len() - 1;
        Ok((defs, index))
    }

    /// Evaluates an expression in the context of the definitions in force
    /// and prints its value. Later expressions see the value as `it` if it
    /// is data (numbers, booleans, tuples, vectors, sums; not functions),
    /// at its type; a definition named `it` takes precedence.
    pub fn eval_expr(&mut self, name: &str, text: &str) -> Outcome<String> {
        let (defs, index) = self.with_expr(name, text)?;
        let (value, ty) = self.evaluate(&defs, index)?;
        let printed = print_value_as(&value, &ty);
        self.keep_it(value, &TypeNamer::new().print(&ty, &|_| Kind::Any));
        Ok(printed)
    }

    /// The type of an expression in the context of the definitions in force.
    pub fn type_of_expr(&mut self, name: &str, text: &str) -> Outcome<String> {
        let (defs, index) = self.with_expr(name, text)?;
        let types = self.types_of(&defs)?;
        Ok(types
            .into_iter()
            .nth(index)
            .map(|(_, t)| t)
            .unwrap_or_default())
    }

    /// The definitions in force as a named-core program (the input of the
    /// AD translations).
    pub fn named_program(&self) -> Outcome<crate::core::named::Program> {
        let checked = check_program(self.core_defs())
            .map_err(|es| es.into_iter().map(Diagnostic::from).collect::<Vec<_>>())?;
        crate::core::lower::lower_program(self.core_defs(), &checked)
            .map_err(|e| vec![Diagnostic::from(e)])
    }

    /// `nabla ad`: the source-to-source translation of mode `mode` of the
    /// definition `def` — by default the one `main` differentiates — printed
    /// as nabla source.
    pub fn translation(&self, mode: translate::Mode, def: Option<&str>) -> Outcome<String> {
        let program = self.named_program()?;
        let def = match def {
            Some(d) => d.to_string(),
            None => self.main_call(&program)?.f,
        };
        let out =
            translate::translate(&program, &def, mode).map_err(|e| self.translation_error(e))?;
        Ok(crate::pretty::program::print_program(&out))
    }

    /// `nabla ad --mode linear`: the full Jacobian of `def` (by default the
    /// definition `main` differentiates) and of every definition it calls, as
    /// linear-map expressions (see [`translate::linear`]); with `program`, the
    /// forward and reverse derivatives `g_jvp` and `g_vjp` made from them, as
    /// nabla source.
    pub fn linear_translation(&self, def: Option<&str>, program: bool) -> Outcome<String> {
        let named = self.named_program()?;
        let def = match def {
            Some(d) => d.to_string(),
            None => self.main_call(&named)?.f,
        };
        let lin = translate::linear::jacobians(&named, &def)
            .and_then(|j| match program {
                false => Ok(translate::linear::print_jacobians(&j)),
                true => {
                    let mut p = translate::linear::forward(&named, &def)?;
                    p.defs
                        .extend(translate::linear::reverse(&named, &def)?.defs);
                    Ok(crate::pretty::program::print_program(&p))
                }
            })
            .map_err(|e| self.translation_error(e))?;
        Ok(lin)
    }

    /// `nabla ad --run`: the program that computes `main`'s derivative with
    /// the translation of mode `mode` (see [`translate::runnable`]), printed.
    pub fn runnable_translation(&self, mode: translate::Mode) -> Outcome<String> {
        let program = self.named_program()?;
        let call = self.main_call(&program)?;
        let out =
            translate::runnable(&program, &call, mode).map_err(|e| self.translation_error(e))?;
        Ok(crate::pretty::program::print_program(&out))
    }

    /// The derivative `main` asks for: `main` must be `op f x …` for a
    /// definition `f`. Otherwise the error says what `main` could be, from
    /// this program's own derivative calls or definitions.
    fn main_call(
        &self,
        program: &crate::core::named::Program,
    ) -> Outcome<translate::DerivativeCall> {
        use crate::core::named::Expr as Named;
        let calls = translate::calls_in_main(program);
        let main = program.def("main");
        let is_whole_main = |c: &translate::DerivativeCall| {
            main.is_some_and(|m| match &m.body {
                Named::Prim(p, args) => p.prim == c.op && args.get(1..) == Some(&c.args[..]),
                _ => false,
            })
        };
        if let Some(c) = calls.first()
            && is_whole_main(c)
        {
            return Ok(c.clone());
        }
        let written = |c: &translate::DerivativeCall| {
            let args: Vec<String> = c
                .args
                .iter()
                .map(|a| format!("({})", crate::pretty::program::print_expr(a)))
                .collect();
            format!("{} {} {}", c.op.info().name, c.f, args.join(" "))
        };
        let (message, note) = if main.is_none() {
            (
                "`nabla ad` translates the definition `main` differentiates, and this program \
                 has no `main`"
                    .to_string(),
                self.translatable_note(program),
            )
        } else if let Some(c) = calls.first() {
            let all: Vec<String> = calls
                .iter()
                .take(5)
                .map(|c| format!("`{}`", written(c)))
                .collect();
            (
                "`nabla ad` needs `main` to be one derivative of a definition, and this `main` \
                 does more"
                    .to_string(),
                format!(
                    "the derivatives of definitions in it: {}; to run one with the translation, \
                     make it `main` (`def main = {}`), or print the translation of `{}` with \
                     `nabla ad --def {} FILE`",
                    all.join(", "),
                    written(c),
                    c.f,
                    c.f
                ),
            )
        } else {
            (
                "`nabla ad` needs `main` to be a derivative of a definition, such as \
                 `def main = grad f (3.0, 4.0)`; this `main` differentiates no definition"
                    .to_string(),
                self.translatable_note(program),
            )
        };
        let at = self
            .defs
            .iter()
            .find(|d| d.binding.name.name == "main")
            .map(|d| d.binding.name.span);
        let d = match at {
            Some(span) => Diagnostic::error(message, span),
            None => Diagnostic::without_position(message),
        };
        Err(vec![d.with_note(note)])
    }

    /// Which definitions of `program` a translation can take, as a note.
    fn translatable_note(&self, program: &crate::core::named::Program) -> String {
        let ok: Vec<String> = program
            .defs
            .iter()
            .filter(|d| d.name != "main")
            .take(40)
            .filter(|d| translate::translate(program, &d.name, translate::Mode::Reverse).is_ok())
            .take(6)
            .map(|d| {
                let ty =
                    d.ty.as_ref()
                        .map(crate::pretty::print_type)
                        .unwrap_or_default();
                format!("`{} : {ty}`", d.name)
            })
            .collect();
        match ok.first() {
            Some(_) => format!(
                "definitions a translation can differentiate: {}; print one with \
                 `nabla ad --def NAME FILE`, or run one with `def main = grad NAME x`",
                ok.join(", ")
            ),
            None => "no definition here is a function of first-order data with a `Real` in \
                     its argument and result (a derivative of a `fun` or one inside another \
                     definition is the run-time operators' job: `nabla run`)"
                .to_string(),
        }
    }

    /// A translation error, located at the definition it is about.
    fn translation_error(&self, e: translate::TranslateError) -> Vec<Diagnostic> {
        let at = e
            .def()
            .and_then(|name| self.defs.iter().find(|d| d.binding.name.name == name))
            .map(|d| d.binding.name.span);
        let d = match at {
            Some(span) => Diagnostic::error(e.to_string(), span),
            None => Diagnostic::without_position(e.to_string()),
        };
        vec![match &e {
            translate::TranslateError::NoSuchDef(_) => {
                let names: Vec<&str> = self
                    .defs
                    .iter()
                    .map(|d| d.binding.name.name.as_str())
                    .take(12)
                    .collect();
                d.with_note(format!("the definitions are: {}", names.join(", ")))
            }
            _ => d,
        }]
    }

    /// Renders diagnostics against this session's sources.
    pub fn render(&self, diags: &[Diagnostic]) -> String {
        crate::diagnostic::render_all(diags, &self.sources)
    }
}

/// The program with records erased to tuples and its facts (see
/// [`checked_core`]).
type Erased = (Vec<Def>, CheckedProgram);

/// Checks `defs`: their types as written and, if they use records, the
/// program with records erased to tuples ([`core::records`]) with its own
/// facts — what every back end runs (without records, `defs` itself).
fn checked_core(defs: &[Def], records: &[Type]) -> Outcome<(CheckedProgram, Option<Erased>)> {
    let diagnostics =
        |es: Vec<crate::types::TypeError>| es.into_iter().map(Diagnostic::from).collect::<Vec<_>>();
    let source = check_program_with(defs, records).map_err(diagnostics)?;
    if !core::records::has_records(&source.typing) {
        return Ok((source, None));
    }
    let program = source.typing.specialised.as_deref().unwrap_or(defs);
    let erased = core::records::erase_records(program, &source.typing).map_err(|d| vec![d])?;
    let checked = check_program(&erased).map_err(diagnostics)?;
    Ok((source, Some((erased, checked))))
}

/// A run-time error (of either back end) as a diagnostic; the step limit's
/// says how to raise it.
///
/// ```
/// use nabla_lang::driver::runtime_diagnostic;
/// use nabla_lang::eval::{Limits, RuntimeError, STEP_LIMIT_EXCEEDED};
/// use nabla_lang::syntax::span::Span;
///
/// let limits = Limits { max_calls: Some(10), ..Limits::default() };
/// let e = RuntimeError { message: STEP_LIMIT_EXCEEDED.into(), span: Span::default() };
/// let d = runtime_diagnostic(limits, e);
/// assert!(d.notes.iter().any(|n| n.contains("--max-calls")));
/// ```
pub fn runtime_diagnostic(limits: Limits, e: RuntimeError) -> Diagnostic {
    let limit = limits
        .max_calls
        .filter(|_| e.message == STEP_LIMIT_EXCEEDED);
    let d = Diagnostic::from(e);
    match limit {
        Some(n) => d.with_note(format!(
            "the limit is {n} function calls; raise it with --max-calls N"
        )),
        None => d,
    }
}

/// `main`, prepared by [`Session::prepare_main`] for evaluation by the
/// interpreter, as often as asked: what `nabla run` times apart from the
/// evaluation (`--repeat`, `-v`).
///
/// Like every phase, evaluation should run on a thread started by
/// [`crate::stack::run_with_stack`].
pub struct PreparedMain {
    /// A machine that never runs: each evaluation starts from a fresh copy.
    machine: Machine,
    /// The index of `main` among the globals.
    index: usize,
    /// `main`'s definition, where a run-time error of its own is reported.
    span: Span,
    limits: Limits,
}

impl PreparedMain {
    /// Evaluates `main` afresh: top-level definitions are cached within
    /// this evaluation, as in `nabla run`, but none is kept from an earlier
    /// one, so every evaluation does the whole work again. The limits
    /// (calls, memory) apply to each evaluation on its own.
    pub fn evaluate(&self) -> Outcome<Value> {
        self.machine
            .fresh()
            .global(self.index, self.span)
            .map_err(|e| vec![runtime_diagnostic(self.limits, *e)])
    }

    /// Evaluates `main`, a function, afresh and applies it to `arg`
    /// (`nabla run --input`).
    pub fn evaluate_with(&self, arg: Value) -> Outcome<Value> {
        let mut machine = self.machine.fresh();
        let f = machine
            .global(self.index, self.span)
            .map_err(|e| vec![runtime_diagnostic(self.limits, *e)])?;
        machine
            .apply(f, arg, self.span)
            .map_err(|e| vec![runtime_diagnostic(self.limits, *e)])
    }
}

/// Whether `v` is plain data, with no function in it (deep values are
/// taken not to be, rather than overflow the stack).
fn is_data(v: &Value) -> bool {
    if crate::stack::check().is_err() {
        return false;
    }
    match v {
        Value::Unit | Value::Bool(_) | Value::Int(_) | Value::Real(_) | Value::RealVec(_) => true,
        Value::Tuple(vs) => vs.iter().all(is_data),
        Value::Vec(vs) => vs.iter().all(is_data),
        Value::Inl(x) | Value::Inr(x) => is_data(x),
        _ => false,
    }
}

/// A checked program compiled for repeated evaluation by a host program
/// (an embedding: the benchmark harness, `crates/nabla-bench`, uses it).
///
/// The host looks definitions up by name and applies function values to
/// values it builds itself ([`Value`]), so data enters a program without
/// being written out as source text. Top-level definitions are evaluated on
/// first use and cached, as in `nabla run`; an application is evaluated
/// afresh every time. The host must type its values as the program expects
/// (check with [`Session::type_of_expr`]). Like every phase, evaluation
/// should run on a thread started by [`crate::stack::run_with_stack`], whose
/// stack budget makes deep recursion a clean error.
pub struct Compiled {
    machine: Machine,
    /// The name of each global, by index.
    names: Vec<String>,
}

impl Compiled {
    /// The value of the top-level definition `name`.
    pub fn global(&mut self, name: &str) -> Outcome<Value> {
        let Some(index) = self.names.iter().position(|n| n == name) else {
            return Err(vec![Diagnostic::without_position(format!(
                "no definition of `{name}`"
            ))]);
        };
        self.machine
            .global(index, Span::default())
            .map_err(|e| vec![Diagnostic::from(e)])
    }

    /// Applies the function value `f` to `x`.
    pub fn apply(&mut self, f: Value, x: Value) -> Outcome<Value> {
        self.machine
            .apply(f, x, Span::default())
            .map_err(|e| vec![Diagnostic::from(e)])
    }
}

/// Limits for untrusted input (the fuzz target and the random-input smoke
/// test): small enough that every run finishes quickly.
pub const UNTRUSTED_LIMITS: Limits = Limits {
    max_calls: Some(20_000),
    max_vector_len: 10_000,
};

/// Parses, checks and runs arbitrary bytes as a program, then as an
/// expression, rendering every diagnostic. This is the single entry point
/// the fuzz target drives: it must never panic, overflow the stack or hang.
/// Returns the printed value of `main`, or the rendered errors.
pub fn run_untrusted(bytes: &[u8]) -> Result<String, String> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Err("error: not valid UTF-8\n".into());
    };
    let mut s = Session::new();
    s.limits = UNTRUSTED_LIMITS;
    let as_expr = s.eval_expr("<fuzz-expr>", text).map_err(|ds| s.render(&ds));
    let mut s = Session::new();
    s.limits = UNTRUSTED_LIMITS;
    let as_program = s
        .load("fuzz.nabla", text)
        .and_then(|_| s.run_main())
        .map_err(|ds| s.render(&ds));
    as_program.or(as_expr)
}
