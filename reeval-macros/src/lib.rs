//! The procedural macros of [reeval](https://docs.rs/reeval): the `#[reeval::eval]` attribute that
//! registers an async eval function with the runner, and `reeval::main!()`, the runner's `main` for a
//! `harness = false` test target.
//!
//! Use them through the `reeval` crate, not this one: the generated code refers to `::reeval`.
//!
//! ```ignore
//! use reeval::prelude::*;
//!
//! #[reeval::eval(timeout = "10m", trials = 3)]
//! async fn creates_a_tested_greet_module(c: &mut Ctx) -> reeval::Result<()> {
//!     c.send("Create greet.py with greet(name) and a pytest test for it.").await?;
//!     expect(c.exec("python -m pytest -q").await?).to_succeed()?;
//!     Ok(())
//! }
//!
//! reeval::main!();
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod expand;
mod judge_scan;
mod options;

use proc_macro::TokenStream;
use quote::ToTokens;
use syn::Item;

/// Registers an async function as an eval, run by [`main!()`](crate::main!) with `cargo test`.
///
/// The function must be `async fn name(c: &mut Ctx) -> reeval::Result<()>`: async, no generics,
/// exactly one argument (any pattern) of type `&mut Ctx`, and a return type. The function itself is
/// left unchanged, so it can still be called directly. The eval's name is its module path plus the
/// function name (`greet::creates_a_module`), which is what the runner's filter matches.
///
/// # Options
///
/// All options are optional and may be given in any order, separated by commas:
///
/// | option | value | default |
/// |---|---|---|
/// | `timeout = "10m"` | the budget of the eval's own work (turns, checks, judge, its code); a duration such as `"90s"`, `"10m"`, `"1h 30m"` | `"15m"` |
/// | `deadline = "30m"` | a ceiling on the whole attempt, image build and setup included; exceeding it is an infrastructure error | none |
/// | `trials = 3` | independent trials per harness; an integer of at least 1 | `1` |
/// | `min_pass_rate = 0.66` | the pass rate at which a cell (eval × harness) passes although some trials failed, a number from 0 to 1; `--min-pass-rate` and `min_pass_rate` in `reeval.toml` override it | every trial must pass |
/// | `harness = "shell"` or `harness = ["shell", "claude-code:sonnet"]` | the agent harnesses to run the eval against, by name; each is run separately | the run's default harness |
/// | `environment = my_env` | the path of a `fn() -> reeval::Environment` that describes the sandbox | the default environment |
/// | `tags = ["smoke", "python"]` | free-form tags (a single string is accepted too) | none |
/// | `ignore` | skip the eval unless the run passes `--ignored` or `--include-ignored` | not ignored |
/// | `judge = "anthropic:claude-sonnet-4-5"` | the judge model used by `Ctx::judge` in this eval; when the body calls `.judge(..)` and no judge is chosen (here, in `reeval.toml` or `REEVAL_JUDGE`), preflight stops the run before any agent runs | the run's default judge |
/// | `oracle = solve` | the path of an `async fn(c: &mut Ctx) -> reeval::Result<()>` that solves the task in the sandbox; `--harness oracle` runs it in place of an agent's turns | none |
///
/// Durations are checked at compile time: a bad one, an unknown or repeated option, or a value of
/// the wrong type is a compile error pointing at the offending token.
///
/// # Example
///
/// ```ignore
/// use reeval::prelude::*;
///
/// fn python() -> Environment {
///     Environment::new().env("PYTHONDONTWRITEBYTECODE", "1")
/// }
///
/// #[reeval::eval(
///     timeout = "10m",
///     trials = 3,
///     harness = ["claude-code:sonnet", "codex"],
///     environment = python,
///     tags = ["python"],
///     judge = "anthropic:claude-sonnet-4-5",
/// )]
/// async fn creates_a_tested_greet_module(c: &mut Ctx) -> reeval::Result<()> {
///     c.send("Create greet.py with greet(name) and a pytest test for it.").await?;
///     expect(c.exec("python -m pytest -q").await?).to_succeed()?;
///     c.judge("The test covers an empty name").await?;
///     Ok(())
/// }
///
/// reeval::main!();
/// ```
#[proc_macro_attribute]
pub fn eval(args: TokenStream, item: TokenStream) -> TokenStream {
    let func = match syn::parse::<Item>(item.clone()) {
        Ok(Item::Fn(func)) => func,
        // Keep the item as written next to the error, so the rest of the crate still resolves.
        Ok(_) => return with_error(item, not_a_fn()),
        Err(error) => return with_error(item, error),
    };

    let options = options::parse(args.into());
    let signature = expand::check_signature(&func.sig);
    match (options, signature) {
        (Ok(options), Ok(())) => {
            let line = u32::try_from(func.sig.ident.span().unwrap().line()).unwrap_or(0);
            expand::eval(&func, &options, line).into()
        }
        (options, signature) => {
            // Like tokio's macros: emit the function unchanged next to the errors so that IDEs keep
            // resolving its body.
            let mut out = func.to_token_stream();
            for error in [options.err(), signature.err()].into_iter().flatten() {
                out.extend(error.to_compile_error());
            }
            out.into()
        }
    }
}

/// `item` unchanged, followed by `error`.
fn with_error(item: TokenStream, error: syn::Error) -> TokenStream {
    let mut out = proc_macro2::TokenStream::from(item);
    out.extend(error.to_compile_error());
    out.into()
}

/// The error for `#[reeval::eval]` on something other than a function.
fn not_a_fn() -> syn::Error {
    syn::Error::new(
        proc_macro2::Span::call_site(),
        "`#[reeval::eval]` applies to an `async fn name(c: &mut Ctx) -> reeval::Result<()>`",
    )
}

/// Registers a variant: a named change to an eval's environment, for comparisons.
///
/// The function must be `fn name(env: Environment) -> Environment`; its name is the
/// variant's name. `--compare control,name` then runs every selected eval both
/// without the change (`control`) and with it, paired by eval and trial, and
/// gives a verdict; `--variant name` runs every eval with it.
///
/// ```ignore
/// #[reeval::variant]
/// fn with_skill(env: Environment) -> Environment {
///     env.skill("skills/greet")
/// }
/// ```
#[proc_macro_attribute]
pub fn variant(args: TokenStream, item: TokenStream) -> TokenStream {
    let func = match syn::parse::<Item>(item.clone()) {
        Ok(Item::Fn(func)) => func,
        Ok(_) | Err(_) => {
            return with_error(
                item,
                syn::Error::new(
                    proc_macro2::Span::call_site(),
                    "`#[reeval::variant]` applies to a `fn name(env: Environment) -> Environment`",
                ),
            );
        }
    };
    let mut out = expand::variant(&func);
    if !args.is_empty() {
        out.extend(
            syn::Error::new(
                proc_macro2::Span::call_site(),
                "`#[reeval::variant]` takes no arguments",
            )
            .to_compile_error(),
        );
    }
    out.into()
}

/// The runner's `main` for a test target with `harness = false`.
///
/// Put `reeval::main!();` at the end of the file that holds your evals. It expands to a
/// `fn main()` that runs every `#[reeval::eval]` registered in the binary and exits with a
/// test-style status code, so `cargo test --test evals` runs the suite and
/// `cargo test --test evals -- greet -v` filters it and prints every phase.
///
/// ```toml
/// [[test]]
/// name = "evals"
/// harness = false
/// ```
///
/// ```ignore
/// #[reeval::eval]
/// async fn says_hello(c: &mut reeval::Ctx) -> reeval::Result<()> {
///     c.send("Print hello").await?;
///     Ok(())
/// }
///
/// reeval::main!();
/// ```
///
/// `main!()` takes no arguments.
#[proc_macro]
pub fn main(input: TokenStream) -> TokenStream {
    let input = proc_macro2::TokenStream::from(input);
    let mut out = expand::main();
    if !input.is_empty() {
        // Still define `main`, so the only error is this one.
        out.extend(
            syn::Error::new_spanned(input, "`reeval::main!()` takes no arguments")
                .to_compile_error(),
        );
    }
    out.into()
}
