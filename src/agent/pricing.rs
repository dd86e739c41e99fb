//! What model calls cost: a small built-in price table for widely used
//! models, `--price INPUT,OUTPUT[,CACHE_READ,CACHE_WRITE]` to set or
//! override it, and the cost of a call's usage: cache reads and cache
//! writes priced apart where the usage reports them, and what the same
//! usage would have cost without a cache.

use serde::{Deserialize, Serialize};

use crate::run_folder::Usage;

/// When the built-in prices were taken from the providers' price pages
/// (Anthropic: docs.anthropic.com/en/docs/about-claude/pricing; OpenAI:
/// openai.com/api/pricing and the GPT-5.2 launch page). Prices change:
/// `--price` overrides them.
pub(crate) const PRICES_TAKEN: &str = "2026-11-30";

/// USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct Price {
    pub input: f64,
    pub output: f64,
    /// Input read from the provider's prompt cache.
    pub cached_input: f64,
    /// Input written to the prompt cache (Anthropic charges extra).
    pub cache_write: f64,
}

impl Price {
    pub(crate) const FREE: Price = Price {
        input: 0.0,
        output: 0.0,
        cached_input: 0.0,
        cache_write: 0.0,
    };

    /// A price with cached input at the full input price (for `--price`,
    /// which gives only input and output).
    pub(crate) fn flat(input: f64, output: f64) -> Price {
        Price {
            input,
            output,
            cached_input: input,
            cache_write: input,
        }
    }

    /// Cost in USD. `prompt_tokens` includes cached reads and cache writes,
    /// which are priced at their own rates.
    pub(crate) fn cost(&self, usage: &Usage) -> f64 {
        let plain_input = usage
            .prompt_tokens
            .saturating_sub(usage.cached_tokens)
            .saturating_sub(usage.cache_write_tokens);
        (plain_input as f64 * self.input
            + usage.cached_tokens as f64 * self.cached_input
            + usage.cache_write_tokens as f64 * self.cache_write
            + usage.completion_tokens as f64 * self.output)
            / 1_000_000.0
    }

    /// What `usage` would have cost with no prompt cache: every input
    /// token at the input price.
    pub(crate) fn cost_without_cache(&self, usage: &Usage) -> f64 {
        (usage.prompt_tokens as f64 * self.input + usage.completion_tokens as f64 * self.output)
            / 1_000_000.0
    }

    /// Parses `--price INPUT,OUTPUT[,CACHE_READ,CACHE_WRITE]` (USD per
    /// million tokens). With two numbers, cache reads and writes are
    /// priced as plain input.
    pub(crate) fn parse(raw: &str) -> Result<Price, PriceError> {
        let number = |s: &str| -> Result<f64, PriceError> {
            s.trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| PriceError::NotAPrice {
                    raw: raw.to_owned(),
                    part: s.to_owned(),
                })
        };
        let parts: Vec<&str> = raw.split(',').collect();
        match parts[..] {
            [input, output] => Ok(Price::flat(number(input)?, number(output)?)),
            [input, output, cached_input, cache_write] => Ok(Price {
                input: number(input)?,
                output: number(output)?,
                cached_input: number(cached_input)?,
                cache_write: number(cache_write)?,
            }),
            _ => Err(PriceError::Shape {
                raw: raw.to_owned(),
            }),
        }
    }
}

/// A `--price` that cannot be read; the message quotes it.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum PriceError {
    #[error("--price {raw:?}: {part:?} is not a price")]
    NotAPrice { raw: String, part: String },
    #[error(
        "--price {raw:?} is not INPUT,OUTPUT or INPUT,OUTPUT,CACHE_READ,CACHE_WRITE (USD per million tokens, for example 3,15,0.3,3.75)"
    )]
    Shape { raw: String },
}

/// (model name prefix, input, output, cached input, cache write), USD per
/// million tokens, as published on [`PRICES_TAKEN`]. Anthropic's cache
/// write is the 5-minute one (1.25 x input; onebash asks for no other
/// ttl) and a read is 0.1 x input. OpenAI caches by itself and charges
/// nothing extra to write, so its write price is the input price. Prices
/// for prompts over 200K (Sonnet's long context) or 270K tokens (GPT-5.4)
/// are higher and not modelled.
const TABLE: &[(&str, f64, f64, f64, f64)] = &[
    ("gpt-5.4-nano", 0.20, 1.25, 0.02, 0.20),
    ("gpt-5.4-mini", 0.75, 4.50, 0.075, 0.75),
    ("gpt-5.4", 2.50, 15.00, 0.25, 2.50),
    ("gpt-5.2", 1.75, 14.00, 0.175, 1.75),
    ("gpt-5.1-codex-mini", 0.25, 2.00, 0.025, 0.25),
    ("gpt-5.1-codex", 1.25, 10.00, 0.125, 1.25),
    ("gpt-5.1", 1.25, 10.00, 0.125, 1.25),
    ("gpt-5-codex", 1.25, 10.00, 0.125, 1.25),
    ("gpt-5-nano", 0.05, 0.40, 0.005, 0.05),
    ("gpt-5-mini", 0.25, 2.00, 0.025, 0.25),
    ("gpt-5", 1.25, 10.00, 0.125, 1.25),
    ("gpt-4.1-nano", 0.10, 0.40, 0.025, 0.10),
    ("gpt-4.1-mini", 0.40, 1.60, 0.10, 0.40),
    ("gpt-4.1", 2.00, 8.00, 0.50, 2.00),
    ("gpt-4o-mini", 0.15, 0.60, 0.075, 0.15),
    // The first gpt-4o snapshot kept its launch price.
    ("gpt-4o-2024-05-13", 5.00, 15.00, 5.00, 5.00),
    ("gpt-4o", 2.50, 10.00, 1.25, 2.50),
    ("o4-mini", 1.10, 4.40, 0.275, 1.10),
    ("o3-mini", 1.10, 4.40, 0.55, 1.10),
    ("o3", 2.00, 8.00, 0.50, 2.00),
    ("claude-opus-4-7", 5.00, 25.00, 0.50, 6.25),
    ("claude-opus-4-6", 5.00, 25.00, 0.50, 6.25),
    ("claude-opus-4-5", 5.00, 25.00, 0.50, 6.25),
    ("claude-opus-4", 15.00, 75.00, 1.50, 18.75),
    ("claude-sonnet-4", 3.00, 15.00, 0.30, 3.75),
    ("claude-3-7-sonnet", 3.00, 15.00, 0.30, 3.75),
    ("claude-haiku-4-5", 1.00, 5.00, 0.10, 1.25),
    ("claude-3-5-haiku", 0.80, 4.00, 0.08, 1.00),
];

/// What may follow a table name in a model's name and keep its price: a
/// version or date (`-5`, `-20250929`, `-2024-08-06`, Vertex's
/// `@20250929`) or `-latest`. Anything else is another model, often at
/// another price (`gpt-5-pro`, `o3-deep-research`, `gpt-5.1-codex-mini`),
/// which gets no built-in price rather than a wrong one.
fn is_version_suffix(rest: &str) -> bool {
    let rest = match rest.split_once('@') {
        Some((_, "")) => return false,
        Some((version, _date)) => version,
        None => rest,
    };
    rest.is_empty()
        || rest.strip_prefix('-').is_some_and(|parts| {
            parts.split('-').all(|part| {
                part == "latest" || (!part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
            })
        })
}

/// The built-in price of a model: the longest table name its name starts
/// with and then only versions or dates follow ([`is_version_suffix`]),
/// after any `provider/` part (OpenRouter names such as `openai/gpt-4o`).
pub(crate) fn builtin_price(model: &str) -> Option<Price> {
    let name = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    TABLE
        .iter()
        .filter(|(prefix, ..)| name.strip_prefix(prefix).is_some_and(is_version_suffix))
        .max_by_key(|(prefix, ..)| prefix.len())
        .map(|&(_, input, output, cached_input, cache_write)| Price {
            input,
            output,
            cached_input,
            cache_write,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_prefix_wins_and_dated_names_match() {
        assert_eq!(builtin_price("gpt-4o").map(|p| p.input), Some(2.50));
        assert_eq!(builtin_price("gpt-4o-mini").map(|p| p.input), Some(0.15));
        assert_eq!(
            builtin_price("gpt-4o-2024-08-06").map(|p| p.input),
            Some(2.50)
        );
        assert_eq!(
            builtin_price("openai/gpt-4.1-mini").map(|p| p.output),
            Some(1.60)
        );
        assert_eq!(
            builtin_price("claude-sonnet-4-5-20250929").map(|p| p.input),
            Some(3.00)
        );
        assert_eq!(
            builtin_price("claude-opus-4-1").map(|p| p.input),
            Some(15.00)
        );
        assert_eq!(
            builtin_price("claude-opus-4-5").map(|p| p.input),
            Some(5.00)
        );
        // Not a prefix at a word boundary: unknown, not gpt-4o's price.
        assert_eq!(builtin_price("gpt-4omega"), None);
        assert_eq!(builtin_price("my-local-model"), None);
    }

    /// A name that goes on past a table name with more than a version or
    /// a date is another model: no price, not its family's.
    #[test]
    fn other_models_of_a_family_get_no_price_rather_than_a_wrong_one() {
        for model in [
            "gpt-5-pro",
            "gpt-5.2-pro",
            "o3-pro",
            "o3-deep-research",
            "gpt-4o-audio-preview",
            "claude-sonnet-4-5-experimental",
        ] {
            assert_eq!(builtin_price(model), None, "{model}");
        }
        assert_eq!(
            builtin_price("gpt-4o-2024-05-13").map(|p| (p.input, p.output)),
            Some((5.00, 15.00))
        );
        for (model, input) in [
            ("o3-2025-04-16", 2.00),
            ("claude-3-7-sonnet-latest", 3.00),
            ("claude-sonnet-4-5@20250929", 3.00),
            ("claude-opus-4-1-20250805", 15.00),
            ("gpt-5.1-codex-mini", 0.25),
        ] {
            assert_eq!(
                builtin_price(model).map(|p| p.input),
                Some(input),
                "{model}"
            );
        }
    }

    #[test]
    fn cost_prices_cached_input_apart() {
        let price = Price {
            input: 2.0,
            output: 8.0,
            cached_input: 0.5,
            cache_write: 2.5,
        };
        let usage = Usage {
            prompt_tokens: 1_000_000,
            completion_tokens: 100_000,
            total_tokens: 1_100_000,
            cached_tokens: 400_000,
            cache_write_tokens: 100_000,
            reasoning_tokens: 0,
        };
        // 500k plain at 2, 400k cached at 0.5, 100k written at 2.5, 100k out at 8.
        let expected =
            (500_000.0 * 2.0 + 400_000.0 * 0.5 + 100_000.0 * 2.5 + 100_000.0 * 8.0) / 1e6;
        assert!((price.cost(&usage) - expected).abs() < 1e-12);
    }

    #[test]
    fn current_models_are_priced() {
        let price = |model: &str| builtin_price(model).map(|p| (p.input, p.output));
        assert_eq!(price("claude-opus-4-6"), Some((5.0, 25.0)));
        assert_eq!(price("claude-opus-4-7"), Some((5.0, 25.0)));
        assert_eq!(price("claude-sonnet-4-6"), Some((3.0, 15.0)));
        assert_eq!(price("claude-haiku-4-5-20251001"), Some((1.0, 5.0)));
        assert_eq!(price("gpt-5.1-codex"), Some((1.25, 10.0)));
        assert_eq!(price("gpt-5.2"), Some((1.75, 14.0)));
        assert_eq!(price("gpt-5.4-mini"), Some((0.75, 4.5)));
        assert_eq!(price("gpt-5-mini-2025-08-07"), Some((0.25, 2.0)));
        // Anthropic's 5-minute cache write is 1.25 x input, a read 0.1 x,
        // for every Claude model in the table.
        for (prefix, input, _, cached_input, cache_write) in TABLE {
            if prefix.starts_with("claude") {
                assert!((cache_write - 1.25 * input).abs() < 1e-9, "{prefix}");
                assert!((cached_input - 0.1 * input).abs() < 1e-9, "{prefix}");
            }
        }
    }

    #[test]
    fn cost_without_cache_prices_every_input_token_as_input() {
        let price = builtin_price("claude-sonnet-4-5").expect("priced");
        let usage = Usage {
            prompt_tokens: 10_000,
            completion_tokens: 1_000,
            total_tokens: 11_000,
            cached_tokens: 8_000,
            cache_write_tokens: 1_500,
            reasoning_tokens: 0,
        };
        // Paid: 500 x 3 + 8000 x 0.3 + 1500 x 3.75 + 1000 x 15 = 24 525 per 1e6.
        assert!((price.cost(&usage) - 0.024_525).abs() < 1e-12);
        // Without the cache: 10 000 x 3 + 1000 x 15 = 45 000 per 1e6.
        assert!((price.cost_without_cache(&usage) - 0.045).abs() < 1e-12);
    }

    #[test]
    fn price_flag_parses() {
        assert_eq!(Price::parse("2.5,10"), Ok(Price::flat(2.5, 10.0)));
        assert_eq!(
            Price::parse("3,15,0.3,3.75"),
            Ok(Price {
                input: 3.0,
                output: 15.0,
                cached_input: 0.3,
                cache_write: 3.75
            })
        );
        for bad in [
            "2.5",
            "a,b",
            "-1,2",
            "1,inf",
            "1,2,3",
            "1,2,3,4,5",
            "1,2,x,4",
        ] {
            assert!(Price::parse(bad).is_err(), "{bad}");
        }
    }
}
