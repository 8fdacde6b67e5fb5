//! Whether an eval's body asks a judge for a verdict, read from its tokens:
//! a method call `.judge(..)` or `.judge_with(..)`, in the body or in a macro
//! call inside it. Preflight then requires a judge model and its key before
//! any agent runs. A judge asked for in a helper function the body calls is
//! not seen, nor one whose model the body names itself (`.model(..)`, which
//! needs no configured judge); such an eval is found when it runs, as before.

use proc_macro2::{TokenStream, TokenTree};

/// Whether `body` calls `.judge(` or `.judge_with(` and names no `.model(` of its own.
pub(crate) fn uses_judge(body: TokenStream) -> bool {
    let mut seen = Seen::default();
    scan(body, &mut seen);
    seen.judge && !seen.model
}

#[derive(Default)]
struct Seen {
    judge: bool,
    model: bool,
}

fn scan(tokens: TokenStream, seen: &mut Seen) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    for (i, token) in tokens.iter().enumerate() {
        match token {
            TokenTree::Group(group) => scan(group.stream(), seen),
            TokenTree::Ident(ident) => {
                let after_dot = matches!(i.checked_sub(1).map(|j| &tokens[j]), Some(TokenTree::Punct(p)) if p.as_char() == '.');
                let called = matches!(tokens.get(i + 1), Some(TokenTree::Group(g)) if g.delimiter() == proc_macro2::Delimiter::Parenthesis);
                if after_dot && called {
                    let name = ident.to_string();
                    seen.judge |= name == "judge" || name == "judge_with";
                    seen.model |= name == "model";
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::uses_judge;
    use quote::quote;

    #[test]
    fn judge_calls_are_seen_in_the_body_and_in_macros() {
        assert!(uses_judge(quote! { c.send("x").await?; c.judge("crit").await?; }));
        assert!(uses_judge(quote! { let v = c.judge_with(j).await?; }));
        assert!(uses_judge(quote! { if ok { assert!(c.judge("y").await.is_ok()); } }));
    }

    #[test]
    fn other_uses_of_the_word_are_not_calls() {
        assert!(!uses_judge(quote! { c.send("judge the code").await?; }));
        assert!(!uses_judge(quote! { let judge = 1; judge(2); }));
        assert!(!uses_judge(quote! { let j = c.judge; }));
        // The eval names its judge's model: it needs no configured one.
        assert!(!uses_judge(quote! { c.judge(Judge::new("c").model("openai:gpt-4.1")).await?; }));
    }
}
