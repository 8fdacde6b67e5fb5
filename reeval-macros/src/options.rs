//! Parsing the arguments of `#[reeval::eval(..)]`.

use std::time::Duration;

use proc_macro2::TokenStream;
use syn::meta::ParseNestedMeta;
use syn::parse::Parser;
use syn::{Expr, ExprArray, ExprLit, ExprPath, Lit, LitStr, Token};

/// Every option `#[reeval::eval]` understands, in the order the error message lists them.
const KEYS: &[&str] = &[
    "timeout",
    "deadline",
    "trials",
    "harness",
    "environment",
    "tags",
    "ignore",
    "judge",
    "min_pass_rate",
    "oracle",
];

/// The parsed arguments. `None` / empty means "not given": the runner applies its defaults.
#[derive(Default)]
pub(crate) struct EvalOptions {
    /// `timeout = "10m"`, in milliseconds.
    pub timeout_ms: Option<u64>,
    /// `deadline = "30m"`, in milliseconds.
    pub deadline_ms: Option<u64>,
    /// `trials = 3`.
    pub trials: Option<u32>,
    /// `harness = "shell"` or `harness = ["shell", "claude-code:sonnet"]`.
    pub harnesses: Vec<LitStr>,
    /// `environment = path::to::env_fn`.
    pub environment: Option<ExprPath>,
    /// `tags = ["a", "b"]`.
    pub tags: Vec<LitStr>,
    /// `ignore`.
    pub ignore: bool,
    /// `judge = "anthropic:claude-sonnet-4-5"`.
    pub judge: Option<LitStr>,
    /// `min_pass_rate = 0.66`.
    pub min_pass_rate: Option<f64>,
    /// `oracle = path::to::solve`: the eval's reference solution.
    pub oracle: Option<ExprPath>,
}

/// Parses the attribute's argument tokens, failing on the first offending token.
pub(crate) fn parse(args: TokenStream) -> syn::Result<EvalOptions> {
    let mut options = EvalOptions::default();
    let mut seen: Vec<String> = Vec::new();
    let parser = syn::meta::parser(|meta| {
        let key = match meta.path.get_ident() {
            Some(ident) if KEYS.contains(&ident.to_string().as_str()) => ident.to_string(),
            _ => {
                let path = &meta.path;
                let name = quote::quote!(#path).to_string().replace(' ', "");
                return Err(meta.error(format!(
                    "unknown eval option `{name}`; expected one of: {}",
                    KEYS.join(", ")
                )));
            }
        };
        if seen.contains(&key) {
            return Err(meta.error(format!("duplicate eval option `{key}`")));
        }
        seen.push(key.clone());

        if key == "ignore" {
            if !meta.input.is_empty() && !meta.input.peek(Token![,]) {
                return Err(meta.error("`ignore` takes no value; write just `ignore`"));
            }
            options.ignore = true;
            return Ok(());
        }

        let value = value_of(&meta, &key)?;
        match key.as_str() {
            "timeout" => options.timeout_ms = Some(duration_ms(&key, &value)?),
            "deadline" => options.deadline_ms = Some(duration_ms(&key, &value)?),
            "trials" => options.trials = Some(trials(&value)?),
            "harness" => {
                options.harnesses =
                    strings(&key, &value, "harness = [\"shell\", \"claude-code:sonnet\"]")?
            }
            "tags" => options.tags = strings(&key, &value, "tags = [\"smoke\", \"python\"]")?,
            "environment" => options.environment = Some(environment(&value)?),
            "oracle" => options.oracle = Some(oracle(&value)?),
            "min_pass_rate" => options.min_pass_rate = Some(rate(&value)?),
            "judge" => {
                options.judge =
                    Some(non_empty_string(&key, &value, "judge = \"anthropic:claude-sonnet-4-5\"")?)
            }
            _ => unreachable!("every key in KEYS is handled"),
        }
        Ok(())
    });
    parser.parse2(args)?;
    Ok(options)
}

/// The expression after `key =`, or an error showing how to write the option.
fn value_of(meta: &ParseNestedMeta<'_>, key: &str) -> syn::Result<Expr> {
    if !meta.input.peek(Token![=]) {
        return Err(
            meta.error(format!("eval option `{key}` needs a value, like `{}`", example(key)))
        );
    }
    meta.value()?.parse()
}

/// How each valued option is written, for error messages.
fn example(key: &str) -> &'static str {
    match key {
        "timeout" => "timeout = \"10m\"",
        "deadline" => "deadline = \"30m\"",
        "trials" => "trials = 3",
        "harness" => "harness = \"shell\"",
        "environment" => "environment = my_environment",
        "oracle" => "oracle = solve",
        "tags" => "tags = [\"smoke\"]",
        "judge" => "judge = \"anthropic:claude-sonnet-4-5\"",
        "min_pass_rate" => "min_pass_rate = 0.66",
        _ => "",
    }
}

/// `0.66` (or `1`): a rate between 0 and 1, checked at compile time.
fn rate(value: &Expr) -> syn::Result<f64> {
    let fail = || {
        syn::Error::new_spanned(
            value,
            "eval option `min_pass_rate` takes a number between 0 and 1, like `min_pass_rate = 0.66`",
        )
    };
    let rate = match value {
        Expr::Lit(ExprLit { lit: Lit::Float(f), .. }) => {
            f.base10_parse::<f64>().map_err(|_| fail())?
        }
        Expr::Lit(ExprLit { lit: Lit::Int(i), .. }) => {
            i.base10_parse::<f64>().map_err(|_| fail())?
        }
        _ => return Err(fail()),
    };
    if (0.0..=1.0).contains(&rate) { Ok(rate) } else { Err(fail()) }
}

/// A string literal, or `None` if `expr` is anything else.
fn as_str(expr: &Expr) -> Option<&LitStr> {
    match expr {
        Expr::Lit(ExprLit { lit: Lit::Str(s), attrs }) if attrs.is_empty() => Some(s),
        _ => None,
    }
}

/// `"10m"` → milliseconds, checked at compile time.
fn duration_ms(key: &str, value: &Expr) -> syn::Result<u64> {
    let Some(lit) = as_str(value) else {
        return Err(syn::Error::new_spanned(
            value,
            format!(
                "`{key}` expects a duration string; write it like `{}` or `{key} = \"90s\"`",
                example(key)
            ),
        ));
    };
    let text = lit.value();
    let duration: Duration = humantime::parse_duration(&text).map_err(|e| {
        syn::Error::new(
            lit.span(),
            format!("invalid duration `{text}`: {e}; write it like \"10m\" or \"90s\""),
        )
    })?;
    let ms = u64::try_from(duration.as_millis())
        .map_err(|_| syn::Error::new(lit.span(), format!("duration `{text}` is too long")))?;
    if ms == 0 {
        return Err(syn::Error::new(
            lit.span(),
            format!("`{key}` must be at least 1ms, got `{text}`"),
        ));
    }
    Ok(ms)
}

/// `trials = N` with N ≥ 1.
fn trials(value: &Expr) -> syn::Result<u32> {
    let message = "`trials` expects an integer of at least 1, like `trials = 3`";
    let Expr::Lit(ExprLit { lit: Lit::Int(int), .. }) = value else {
        return Err(syn::Error::new_spanned(value, message));
    };
    if !int.suffix().is_empty() && int.suffix() != "u32" {
        return Err(syn::Error::new(int.span(), message));
    }
    match int.base10_parse::<u32>() {
        Ok(n) if n >= 1 => Ok(n),
        Ok(_) => Err(syn::Error::new(int.span(), "`trials` must be at least 1")),
        Err(_) => Err(syn::Error::new(
            int.span(),
            format!("`trials = {}` does not fit in a u32", int.base10_digits()),
        )),
    }
}

/// A non-empty string literal.
fn non_empty_string(key: &str, value: &Expr, example: &str) -> syn::Result<LitStr> {
    let Some(lit) = as_str(value) else {
        return Err(syn::Error::new_spanned(
            value,
            format!("`{key}` expects a string, like `{example}`"),
        ));
    };
    if lit.value().trim().is_empty() {
        return Err(syn::Error::new(lit.span(), format!("`{key}` must not be empty")));
    }
    Ok(lit.clone())
}

/// One string or a non-empty list of strings, each non-empty and not repeated.
fn strings(key: &str, value: &Expr, example: &str) -> syn::Result<Vec<LitStr>> {
    let message = format!("`{key}` expects a string or a list of strings, like `{example}`");
    let elems: Vec<&Expr> = match value {
        Expr::Array(ExprArray { elems, attrs, .. }) if attrs.is_empty() => elems.iter().collect(),
        _ if as_str(value).is_some() => vec![value],
        _ => return Err(syn::Error::new_spanned(value, message)),
    };
    if elems.is_empty() {
        return Err(syn::Error::new_spanned(
            value,
            format!("`{key}` list is empty; omit the option instead"),
        ));
    }
    let mut out: Vec<LitStr> = Vec::with_capacity(elems.len());
    for elem in elems {
        let lit = match as_str(elem) {
            Some(lit) => lit,
            None => {
                return Err(syn::Error::new_spanned(
                    elem,
                    format!("`{key}` list items must be strings, like `{example}`"),
                ));
            }
        };
        if lit.value().trim().is_empty() {
            return Err(syn::Error::new(lit.span(), format!("`{key}` entries must not be empty")));
        }
        if out.iter().any(|l| l.value() == lit.value()) {
            return Err(syn::Error::new(
                lit.span(),
                format!("`{key}` lists \"{}\" twice", lit.value()),
            ));
        }
        out.push(lit.clone());
    }
    Ok(out)
}

/// `oracle = path`: a path to an `async fn(&mut Ctx) -> reeval::Result<()>`.
fn oracle(value: &Expr) -> syn::Result<ExprPath> {
    match value {
        Expr::Path(path) => Ok(path.clone()),
        other => Err(syn::Error::new_spanned(
            other,
            "`oracle` expects the path of an `async fn(c: &mut Ctx) -> reeval::Result<()>`, like `oracle = solve`",
        )),
    }
}

/// `environment = path`: a path to a `fn() -> reeval::Environment`.
fn environment(value: &Expr) -> syn::Result<ExprPath> {
    match value {
        Expr::Path(path) if path.attrs.is_empty() && path.qself.is_none() => Ok(path.clone()),
        _ => Err(syn::Error::new_spanned(
            value,
            "`environment` expects the path of a `fn() -> reeval::Environment`, like `environment = my_environment`",
        )),
    }
}

#[cfg(test)]
mod tests {
    /// The options table of `#[reeval::eval]`'s rustdoc (in lib.rs) has a row for every option.
    #[test]
    fn the_rustdoc_table_lists_every_option() {
        let doc = include_str!("lib.rs");
        for key in super::KEYS {
            assert!(
                doc.contains(&format!("/// | `{key}")),
                "no row for `{key}` in the options table"
            );
        }
    }

    use super::*;
    use quote::quote;

    fn err(args: TokenStream) -> String {
        match parse(args) {
            Ok(_) => panic!("expected an error"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn empty_is_all_defaults() {
        let o = parse(quote!()).unwrap();
        assert_eq!(o.timeout_ms, None);
        assert_eq!(o.deadline_ms, None);
        assert_eq!(o.trials, None);
        assert!(o.harnesses.is_empty());
        assert!(o.environment.is_none());
        assert!(o.tags.is_empty());
        assert!(!o.ignore);
        assert!(o.judge.is_none());
    }

    #[test]
    fn every_option_in_any_order() {
        let o = parse(quote!(
            ignore,
            judge = "anthropic:claude-sonnet-4-5",
            tags = ["a", "b"],
            environment = crate::envs::python,
            harness = ["shell", "claude-code:sonnet"],
            trials = 3,
            deadline = "30m",
            timeout = "1m 30s",
        ))
        .unwrap();
        assert_eq!(o.timeout_ms, Some(90_000));
        assert_eq!(o.deadline_ms, Some(1_800_000));
        assert_eq!(o.trials, Some(3));
        assert_eq!(
            o.harnesses.iter().map(LitStr::value).collect::<Vec<_>>(),
            ["shell", "claude-code:sonnet"]
        );
        let env = o.environment.unwrap();
        assert_eq!(quote!(#env).to_string().replace(' ', ""), "crate::envs::python");
        assert_eq!(o.tags.iter().map(LitStr::value).collect::<Vec<_>>(), ["a", "b"]);
        assert!(o.ignore);
        assert_eq!(o.judge.unwrap().value(), "anthropic:claude-sonnet-4-5");
    }

    #[test]
    fn single_string_harness_and_tag() {
        let o = parse(quote!(harness = "shell", tags = "smoke")).unwrap();
        assert_eq!(o.harnesses.iter().map(LitStr::value).collect::<Vec<_>>(), ["shell"]);
        assert_eq!(o.tags.iter().map(LitStr::value).collect::<Vec<_>>(), ["smoke"]);
    }

    #[test]
    fn min_pass_rate_is_a_rate() {
        assert_eq!(parse(quote!(min_pass_rate = 0.66)).unwrap().min_pass_rate, Some(0.66));
        assert_eq!(parse(quote!(min_pass_rate = 1)).unwrap().min_pass_rate, Some(1.0));
        for bad in
            [quote!(min_pass_rate = 1.5), quote!(min_pass_rate = "0.5"), quote!(min_pass_rate)]
        {
            assert!(err(bad).contains("min_pass_rate"));
        }
    }

    #[test]
    fn unknown_key() {
        assert_eq!(
            err(quote!(timeout = "1m", foo = 1)),
            "unknown eval option `foo`; expected one of: timeout, deadline, trials, harness, environment, tags, ignore, judge, min_pass_rate, oracle"
        );
        assert!(err(quote!(a::b = 1)).starts_with("unknown eval option `a::b`"));
    }

    #[test]
    fn duplicate_key() {
        assert_eq!(err(quote!(trials = 1, trials = 2)), "duplicate eval option `trials`");
        assert_eq!(err(quote!(ignore, ignore)), "duplicate eval option `ignore`");
    }

    #[test]
    fn bad_durations() {
        assert!(err(quote!(timeout = "10 x")).starts_with("invalid duration `10 x`: "));
        assert!(err(quote!(timeout = "10 x")).ends_with("; write it like \"10m\" or \"90s\""));
        assert!(err(quote!(deadline = "soon")).starts_with("invalid duration `soon`"));
        assert!(err(quote!(timeout = 10)).starts_with("`timeout` expects a duration string"));
        assert_eq!(err(quote!(timeout = "0s")), "`timeout` must be at least 1ms, got `0s`");
        assert!(err(quote!(timeout)).starts_with("eval option `timeout` needs a value"));
    }

    #[test]
    fn bad_trials() {
        assert_eq!(err(quote!(trials = 0)), "`trials` must be at least 1");
        assert_eq!(
            err(quote!(trials = "x")),
            "`trials` expects an integer of at least 1, like `trials = 3`"
        );
        assert_eq!(
            err(quote!(trials = -1)),
            "`trials` expects an integer of at least 1, like `trials = 3`"
        );
        assert_eq!(
            err(quote!(trials = 1.5)),
            "`trials` expects an integer of at least 1, like `trials = 3`"
        );
        assert_eq!(
            err(quote!(trials = 5_000_000_000)),
            "`trials = 5000000000` does not fit in a u32"
        );
        assert_eq!(parse(quote!(trials = 2u32)).unwrap().trials, Some(2));
    }

    #[test]
    fn bad_string_lists() {
        assert!(
            err(quote!(harness = ["shell", 1])).starts_with("`harness` list items must be strings")
        );
        assert!(
            err(quote!(harness = shell))
                .starts_with("`harness` expects a string or a list of strings")
        );
        assert!(err(quote!(harness = [])).starts_with("`harness` list is empty"));
        assert_eq!(err(quote!(harness = "")), "`harness` entries must not be empty");
        assert_eq!(err(quote!(tags = ["a", "a"])), "`tags` lists \"a\" twice");
    }

    #[test]
    fn bad_environment_judge_ignore() {
        assert!(err(quote!(environment = "python")).starts_with("`environment` expects the path"));
        assert!(err(quote!(environment = || make())).starts_with("`environment` expects the path"));
        assert!(err(quote!(judge = anthropic)).starts_with("`judge` expects a string"));
        assert_eq!(err(quote!(judge = "")), "`judge` must not be empty");
        assert_eq!(err(quote!(ignore = true)), "`ignore` takes no value; write just `ignore`");
        assert!(err(quote!(timeout("1m"))).starts_with("eval option `timeout` needs a value"));
    }
}
