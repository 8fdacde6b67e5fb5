//! What tokens cost: a price per model, in US dollars per million tokens.
//! A few well-known models have built-in list prices (as published when this
//! was written); `[prices]` in `reeval.toml` adds models or overrides them:
//!
//! ```toml
//! [prices."claude-sonnet-4-5"]
//! input = 3.0          # per million input tokens not read from the cache
//! output = 15.0
//! cache_read = 0.30    # default: input
//! cache_write = 3.75   # default: input
//! ```
//!
//! A model matches the longest entry that its name starts with, after any
//! `provider/` or `provider:` prefix (`anthropic/claude-sonnet-4-5-20250929`
//! matches `claude-sonnet-4-5`). A cost is `None` when any turn that used
//! tokens names no model or one without a price: an unknown cost is never
//! shown as zero.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::record::Record;
use crate::turn::Usage;

/// US dollars per million tokens of one model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Input tokens not read from the cache.
    pub input: f64,
    /// Output tokens (reasoning included).
    pub output: f64,
    /// Input tokens read from the prompt cache (default: `input`).
    #[serde(default)]
    pub cache_read: Option<f64>,
    /// Input tokens written to the prompt cache (default: `input`).
    #[serde(default)]
    pub cache_write: Option<f64>,
}

impl Price {
    const fn of(input: f64, output: f64, cache_read: f64, cache_write: f64) -> Self {
        Self { input, output, cache_read: Some(cache_read), cache_write: Some(cache_write) }
    }

    /// The cost of `usage` in US dollars.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let tokens = |n: Option<u64>| n.unwrap_or(0) as f64 / 1e6;
        tokens(usage.input) * self.input
            + tokens(usage.output) * self.output
            + tokens(usage.cache_read) * self.cache_read.unwrap_or(self.input)
            + tokens(usage.cache_write) * self.cache_write.unwrap_or(self.input)
    }
}

/// List prices of well-known models, US dollars per million tokens.
const BUILT_IN: &[(&str, Price)] = &[
    ("claude-opus-4-1", Price::of(15.0, 75.0, 1.5, 18.75)),
    ("claude-opus-4", Price::of(15.0, 75.0, 1.5, 18.75)),
    ("claude-sonnet-4-5", Price::of(3.0, 15.0, 0.3, 3.75)),
    ("claude-sonnet-4", Price::of(3.0, 15.0, 0.3, 3.75)),
    ("claude-haiku-4-5", Price::of(1.0, 5.0, 0.1, 1.25)),
    ("gpt-5-mini", Price::of(0.25, 2.0, 0.025, 0.25)),
    ("gpt-5", Price::of(1.25, 10.0, 0.125, 1.25)),
    ("gpt-4.1-mini", Price::of(0.4, 1.6, 0.1, 0.4)),
    ("gpt-4.1", Price::of(2.0, 8.0, 0.5, 2.0)),
    ("gemini-2.5-pro", Price::of(1.25, 10.0, 0.31, 1.25)),
    ("gemini-2.5-flash", Price::of(0.3, 2.5, 0.075, 0.3)),
];

/// Prices by model: the built-in ones, overridden and extended by `reeval.toml`.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceTable {
    models: BTreeMap<String, Price>,
}

impl Default for PriceTable {
    fn default() -> Self {
        Self { models: BUILT_IN.iter().map(|(m, p)| (m.to_string(), *p)).collect() }
    }
}

impl PriceTable {
    /// The built-in prices with `overrides` on top.
    pub fn with(overrides: &BTreeMap<String, Price>) -> Self {
        let mut table = Self::default();
        table.models.extend(overrides.iter().map(|(m, p)| (m.clone(), *p)));
        table
    }

    /// The price of `model`: the longest entry its name (without a provider prefix) starts with.
    pub fn price(&self, model: &str) -> Option<&Price> {
        let name = model.rsplit(['/', ':']).next().unwrap_or(model);
        self.models
            .iter()
            .filter(|(m, _)| name.starts_with(m.as_str()) || model == m.as_str())
            .max_by_key(|(m, _)| m.len())
            .map(|(_, p)| p)
    }

    /// The cost of every turn of `records`; `None` when a turn that used
    /// tokens has no known price, or no turn used any.
    pub fn cost<'a>(&self, records: impl IntoIterator<Item = &'a Record>) -> Option<f64> {
        let mut total = 0.0;
        let mut priced = false;
        for turn in records.into_iter().flat_map(|r| &r.turns) {
            if turn.usage == Usage::default() {
                continue;
            }
            let price = turn.model.as_deref().and_then(|m| self.price(m))?;
            total += price.cost(&turn.usage);
            priced = true;
        }
        priced.then_some(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, output: u64) -> Usage {
        Usage { input: Some(input), output: Some(output), ..Usage::default() }
    }

    #[test]
    fn the_longest_prefix_wins_and_providers_are_ignored() {
        let table = PriceTable::default();
        assert_eq!(table.price("claude-sonnet-4-5-20250929").unwrap().input, 3.0);
        assert_eq!(table.price("anthropic/gpt-5-mini").unwrap().input, 0.25);
        assert_eq!(table.price("openai:gpt-5").unwrap().input, 1.25);
        assert!(table.price("llama-3").is_none());
    }

    #[test]
    fn costs_are_none_when_a_price_is_unknown() {
        let mut overrides = BTreeMap::new();
        overrides.insert(
            "local-model".to_string(),
            Price { input: 1.0, output: 2.0, cache_read: None, cache_write: None },
        );
        let table = PriceTable::with(&overrides);
        let mut r = Record::new("run", "e", "h", 1, 1);
        let turn = |model: Option<&str>, u: Usage| crate::turn::Turn {
            prompt: String::new(),
            status: crate::turn::TurnStatus::Completed,
            final_message: None,
            model: model.map(str::to_string),
            usage: u,
            tool_calls: Vec::new(),
            file_edits: Vec::new(),
            error: None,
            duration_ms: 0,
            diff: Default::default(),
        };
        assert_eq!(table.cost([&r]), None, "no tokens, no cost");
        r.turns.push(turn(Some("local-model"), usage(1_000_000, 500_000)));
        assert_eq!(table.cost([&r]), Some(2.0));
        r.turns.push(turn(Some("mystery"), usage(1, 1)));
        assert_eq!(table.cost([&r]), None);
    }
}
