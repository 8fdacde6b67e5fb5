//! Code generation for `#[reeval::eval]` and `reeval::main!()`, and the checks on the eval's signature.

use proc_macro2::TokenStream;
use quote::{ToTokens, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, ItemFn, ReturnType, Signature, Type};

use crate::options::EvalOptions;

/// Checks that `sig` is `async fn name(c: &mut Ctx) -> R`, reporting every problem found.
pub(crate) fn check_signature(sig: &Signature) -> syn::Result<()> {
    let mut errors: Vec<syn::Error> = Vec::new();
    if sig.asyncness.is_none() {
        errors.push(syn::Error::new(sig.fn_token.span, "an eval must be an `async fn`"));
    }
    if let Some(constness) = &sig.constness {
        errors.push(syn::Error::new(constness.span, "an eval cannot be a `const fn`"));
    }
    if let Some(unsafety) = &sig.unsafety {
        errors.push(syn::Error::new(unsafety.span, "an eval cannot be an `unsafe fn`"));
    }
    if let Some(abi) = &sig.abi {
        errors.push(syn::Error::new_spanned(abi, "an eval cannot have an `extern` ABI"));
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        errors
            .push(syn::Error::new_spanned(&sig.generics, "an eval cannot have generic parameters"));
    }
    if let Some(variadic) = &sig.variadic {
        errors.push(syn::Error::new_spanned(variadic, "an eval cannot be variadic"));
    }
    match sig.inputs.len() {
        0 => errors.push(syn::Error::new(sig.paren_token.span.join(), "an eval takes exactly one argument, the context: `c: &mut Ctx`")),
        1 => {}
        _ => errors.push(syn::Error::new_spanned(
            sig.inputs.iter().nth(1),
            "an eval takes exactly one argument, the context: `c: &mut Ctx`; remove the extra arguments",
        )),
    }
    if let Some(first) = sig.inputs.first() {
        match first {
            FnArg::Receiver(receiver) => errors.push(syn::Error::new_spanned(
                receiver,
                "an eval cannot take `self`; its argument is `c: &mut Ctx`",
            )),
            FnArg::Typed(arg) if !is_mut_ctx(&arg.ty) => errors
                .push(syn::Error::new_spanned(&arg.ty, "an eval's argument must be `&mut Ctx`")),
            FnArg::Typed(_) => {}
        }
    }
    if let ReturnType::Default = sig.output {
        errors.push(syn::Error::new(
            sig.paren_token.span.close(),
            "an eval must return `reeval::Result<()>`; add `-> reeval::Result<()>`",
        ));
    }
    errors
        .into_iter()
        .reduce(|mut all, e| {
            all.combine(e);
            all
        })
        .map_or(Ok(()), Err)
}

/// Whether `ty` is `&mut Ctx`, `&'_ mut Ctx`, `&mut reeval::Ctx`, … (any path ending in `Ctx`).
fn is_mut_ctx(ty: &Type) -> bool {
    let Type::Reference(reference) = ty else {
        return false;
    };
    if reference.mutability.is_none() {
        return false;
    }
    let mut elem = &*reference.elem;
    while let Type::Paren(inner) = elem {
        elem = &inner.elem;
    }
    match elem {
        Type::Path(path) => {
            path.qself.is_none()
                && path
                    .path
                    .segments
                    .last()
                    .is_some_and(|last| last.ident == "Ctx" && last.arguments.is_empty())
        }
        _ => false,
    }
}

/// The original function followed by its registration with the runner.
///
/// `line` is the line of the function's name (1-based).
pub(crate) fn eval(func: &ItemFn, options: &EvalOptions, line: u32) -> TokenStream {
    let name = &func.sig.ident;
    let name_str = name.to_string();
    let name_str = name_str.strip_prefix("r#").unwrap_or(&name_str);

    let timeout_ms = option(options.timeout_ms.map(|ms| quote!(#ms)));
    let deadline_ms = option(options.deadline_ms.map(|ms| quote!(#ms)));
    let trials = option(options.trials.map(|n| quote!(#n)));
    let harnesses = &options.harnesses;
    // Spanned on the path so that a function of the wrong type is reported there.
    let environment = match &options.environment {
        Some(path) => quote_spanned!(path.span()=> ::std::option::Option::Some(#path)),
        None => quote!(::std::option::Option::None),
    };
    let tags = &options.tags;
    let ignore = options.ignore;
    let judge = option(options.judge.as_ref().map(|judge| quote!(#judge)));
    let min_pass_rate = option(options.min_pass_rate.map(|rate| quote!(#rate)));
    let uses_judge = crate::judge_scan::uses_judge(func.block.to_token_stream());

    // Spanned on the function's name so that a non-`Send` future or a wrong return type is reported there.
    let call = quote_spanned! {name.span()=>
        ::std::boxed::Box::pin(#name(__reeval_ctx))
    };
    let (oracle_fn, oracle) = match &options.oracle {
        Some(path) => {
            let call = quote_spanned! {path.span()=>
                ::std::boxed::Box::pin(#path(__reeval_ctx))
            };
            (
                quote! {
                    fn __reeval_oracle<'a>(
                        __reeval_ctx: &'a mut ::reeval::Ctx,
                    ) -> ::reeval::__private::BoxFuture<'a, ::reeval::Result<()>> {
                        #call
                    }
                },
                quote!(::std::option::Option::Some(__reeval_oracle)),
            )
        }
        None => (quote!(), quote!(::std::option::Option::None)),
    };

    quote! {
        #func

        const _: () = {
            fn __reeval_run<'a>(
                __reeval_ctx: &'a mut ::reeval::Ctx,
            ) -> ::reeval::__private::BoxFuture<'a, ::reeval::Result<()>> {
                #call
            }
            #oracle_fn

            ::reeval::__private::inventory::submit! {
                ::reeval::__private::EvalRegistration {
                    module: ::std::module_path!(),
                    name: #name_str,
                    file: ::std::file!(),
                    line: #line,
                    timeout_ms: #timeout_ms,
                    deadline_ms: #deadline_ms,
                    trials: #trials,
                    harnesses: &[#(#harnesses),*],
                    environment: #environment,
                    tags: &[#(#tags),*],
                    ignore: #ignore,
                    judge: #judge,
                    min_pass_rate: #min_pass_rate,
                    uses_judge: #uses_judge,
                    run: __reeval_run,
                    oracle: #oracle,
                }
            }
        };
    }
}

/// `#[reeval::variant]`: the function unchanged, registered under its name.
pub(crate) fn variant(func: &ItemFn) -> TokenStream {
    let name = &func.sig.ident;
    let name_str = name.to_string();
    let name_str = name_str.strip_prefix("r#").unwrap_or(&name_str).to_string();
    // Spanned on the name so that a function of the wrong type is reported there.
    let apply = quote_spanned!(name.span()=> #name);
    quote! {
        #func

        ::reeval::__private::inventory::submit! {
            ::reeval::__private::VariantRegistration { name: #name_str, apply: #apply }
        }
    }
}

/// `Some(value)` or `None`, fully qualified.
fn option(value: Option<TokenStream>) -> TokenStream {
    match value {
        Some(value) => quote!(::std::option::Option::Some(#value)),
        None => quote!(::std::option::Option::None),
    }
}

/// The body of `reeval::main!()`.
pub(crate) fn main() -> TokenStream {
    quote! {
        fn main() {
            ::reeval::__private::main()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::parse_quote;

    fn sig_err(func: ItemFn) -> String {
        check_signature(&func.sig)
            .expect_err("expected an error")
            .into_iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join(" | ")
    }

    #[test]
    fn accepts_the_usual_shapes() {
        let ok: Vec<ItemFn> = vec![
            parse_quote!(
                async fn a(c: &mut Ctx) -> reeval::Result<()> {
                    Ok(())
                }
            ),
            parse_quote!(
                async fn a(ctx: &mut reeval::Ctx) -> Result<()> {
                    Ok(())
                }
            ),
            parse_quote!(
                pub async fn a(_: &'_ mut ::reeval::Ctx) -> Result<()> {
                    Ok(())
                }
            ),
            parse_quote!(
                async fn a(mut c: &mut (Ctx)) -> Result<()> {
                    Ok(())
                }
            ),
        ];
        for func in ok {
            check_signature(&func.sig).unwrap();
        }
    }

    #[test]
    fn rejects_bad_shapes() {
        assert_eq!(
            sig_err(parse_quote!(
                fn a(c: &mut Ctx) -> Result<()> {
                    Ok(())
                }
            )),
            "an eval must be an `async fn`"
        );
        assert!(
            sig_err(parse_quote!(
                async fn a() -> Result<()> {
                    Ok(())
                }
            ))
            .starts_with("an eval takes exactly one argument")
        );
        assert!(
            sig_err(parse_quote!(
                async fn a(c: &mut Ctx, d: u8) -> Result<()> {
                    Ok(())
                }
            ))
            .starts_with("an eval takes exactly one argument")
        );
        assert_eq!(
            sig_err(parse_quote!(
                async fn a(c: Ctx) -> Result<()> {
                    Ok(())
                }
            )),
            "an eval's argument must be `&mut Ctx`"
        );
        assert_eq!(
            sig_err(parse_quote!(
                async fn a(c: &Ctx) -> Result<()> {
                    Ok(())
                }
            )),
            "an eval's argument must be `&mut Ctx`"
        );
        assert_eq!(
            sig_err(parse_quote!(
                async fn a(c: &mut Context) -> Result<()> {
                    Ok(())
                }
            )),
            "an eval's argument must be `&mut Ctx`"
        );
        assert_eq!(
            sig_err(parse_quote!(
                async fn a<T>(c: &mut Ctx) -> Result<()> {
                    Ok(())
                }
            )),
            "an eval cannot have generic parameters"
        );
        assert!(
            sig_err(parse_quote!(
                async fn a(c: &mut Ctx) {}
            ))
            .starts_with("an eval must return `reeval::Result<()>`")
        );
        assert!(
            sig_err(parse_quote!(
                async unsafe fn a(c: &mut Ctx) -> Result<()> {
                    Ok(())
                }
            ))
            .contains("`unsafe fn`")
        );
    }

    #[test]
    fn reports_every_problem() {
        let message = sig_err(parse_quote!(
            fn a(c: Ctx) {}
        ));
        assert_eq!(message.matches(" | ").count(), 2, "{message}");
    }

    #[test]
    fn expansion_registers_the_fn() {
        let func: ItemFn = parse_quote!(
            async fn greet(c: &mut Ctx) -> reeval::Result<()> {
                Ok(())
            }
        );
        let options = crate::options::parse(quote!(
            timeout = "10m",
            trials = 3,
            harness = "shell",
            environment = env
        ))
        .unwrap();
        let out = eval(&func, &options, 7).to_string();
        for needle in [
            "async fn greet",
            "name : \"greet\"",
            "line : 7u32",
            "timeout_ms : :: std :: option :: Option :: Some (600000u64)",
            "trials : :: std :: option :: Option :: Some (3u32)",
            "harnesses : & [\"shell\"]",
            "environment : :: std :: option :: Option :: Some (env)",
            "tags : & []",
            "ignore : false",
            "judge : :: std :: option :: Option :: None",
            "min_pass_rate : :: std :: option :: Option :: None",
            ":: std :: boxed :: Box :: pin (greet (__reeval_ctx))",
        ] {
            assert!(out.contains(needle), "missing `{needle}` in {out}");
        }
    }
}
