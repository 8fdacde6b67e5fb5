//! Variants declared in `reeval.toml` (`[variants.NAME]`, read by
//! [`crate::settings::DeclaredVariant`]) made into [`Variant`]s beside the
//! suite's `#[reeval::variant]`s.

use super::{Variant, registered_variants};
use crate::settings::{DeclaredVariant, Settings};

/// Every variant a run may name: the suite's `#[reeval::variant]`s, then the
/// ones `reeval.toml` declares.
///
/// # Errors
/// A message when a declared variant has the name of a registered one, or
/// one of its files cannot be read.
pub fn known_variants(settings: &Settings) -> Result<Vec<Variant>, String> {
    let mut known = registered_variants();
    for (name, declared) in &settings.variants {
        if known.iter().any(|v| v.name() == name) {
            return Err(format!(
                "failed to declare the variant `{name}` in reeval.toml: the suite has a \
                 #[reeval::variant] of that name"
            ));
        }
        known.push(variant(name, declared)?);
    }
    Ok(known)
}

/// The variant that adds what `declared` lists, its files read now.
fn variant(name: &str, declared: &DeclaredVariant) -> Result<Variant, String> {
    let mut files = Vec::new();
    for (target, source) in &declared.files {
        let bytes = std::fs::read(source).map_err(|e| {
            format!(
                "failed to read {}, the file `{target}` of the variant `{name}`: {e}",
                source.display()
            )
        })?;
        files.push((target.clone(), bytes));
    }
    let declared = declared.clone();
    Ok(Variant::new(name, move |mut env| {
        for (target, bytes) in &files {
            env = env.file(target.clone(), bytes.clone());
        }
        for skill in &declared.skills {
            env = env.skill(skill.clone());
        }
        if let Some(rules) = &declared.rules {
            // After the eval's own rules, not in their place.
            env.rules = Some(match env.rules.take() {
                Some(own) => format!("{own}\n\n{rules}"),
                None => rules.clone(),
            });
        }
        for (key, value) in &declared.env {
            env = env.env(key.clone(), value.clone());
        }
        env
    }))
}
