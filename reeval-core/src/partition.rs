//! `--partition hash:K/N` and `count:K/N`: one part of a run split across
//! machines, spelled and meant as cargo-nextest's. The unit split is the cell
//! (eval × harness spec): every cell lands in exactly one of the N parts.
//!
//! - `hash:K/N`: a cell is in part `1 + h mod N`, where `h` is the first 8
//!   bytes (big-endian) of the SHA-256 of `<eval>\0<harness spec>`. It
//!   depends on nothing but the cell's own name, so it is the same on every
//!   machine, platform and reeval version, and adding or removing other
//!   evals moves no cell.
//! - `count:K/N`: the cells selected (after filters, `--skip`, `--tag`,
//!   `--rerun-failed`), sorted by eval and harness, are dealt out in turn:
//!   the i-th (from 0) goes to part `1 + i mod N`. The parts are as even as
//!   can be, but every part must select the same cells for them to add up.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest, Sha256};

/// How cells are dealt into parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionKind {
    /// By a stable hash of the cell's name.
    Hash,
    /// By the cell's place in the sorted list of the cells selected.
    Count,
}

/// One part of a partitioned run: part `part` of `of` (`hash:2/3`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partition {
    /// How cells are dealt.
    pub kind: PartitionKind,
    /// This part, counting from 1.
    pub part: u32,
    /// How many parts there are.
    pub of: u32,
}

/// A partition spec that does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PartitionError {
    /// Neither `hash:` nor `count:`.
    #[error("`{0}` must begin with `hash:` or `count:` (like hash:1/3)")]
    Kind(String),
    /// Not `K/N` with whole numbers.
    #[error("`{0}` is not KIND:K/N with whole numbers K and N (like hash:1/3)")]
    Shape(String),
    /// No parts at all.
    #[error("`{0}` has no parts: N must be at least 1")]
    NoParts(String),
    /// A part that is not one of the N.
    #[error("`{spec}` names part {part}, but the parts are 1 to {of}")]
    NoSuchPart {
        /// The spec as given.
        spec: String,
        /// The part it names.
        part: u32,
        /// How many parts there are.
        of: u32,
    },
}

impl FromStr for Partition {
    type Err = PartitionError;

    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let trimmed = spec.trim();
        let (kind, rest) = if let Some(rest) = trimmed.strip_prefix("hash:") {
            (PartitionKind::Hash, rest)
        } else if let Some(rest) = trimmed.strip_prefix("count:") {
            (PartitionKind::Count, rest)
        } else {
            return Err(PartitionError::Kind(spec.to_string()));
        };
        let shape = || PartitionError::Shape(spec.to_string());
        let (part, of) = rest.split_once('/').ok_or_else(shape)?;
        let number = |s: &str| s.parse::<u32>().map_err(|_| shape());
        let (part, of) = (number(part)?, number(of)?);
        if of == 0 {
            return Err(PartitionError::NoParts(spec.to_string()));
        }
        if part == 0 || part > of {
            return Err(PartitionError::NoSuchPart { spec: spec.to_string(), part, of });
        }
        Ok(Partition { kind, part, of })
    }
}

impl fmt::Display for PartitionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PartitionKind::Hash => "hash",
            PartitionKind::Count => "count",
        })
    }
}

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}/{}", self.kind, self.part, self.of)
    }
}

/// The stable hash of a cell, as `hash:` deals it (see the module note).
pub fn cell_hash(eval: &str, harness: &str) -> u64 {
    let digest = Sha256::new()
        .chain_update(eval.as_bytes())
        .chain_update([0])
        .chain_update(harness.as_bytes())
        .finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

impl Partition {
    /// The cells of `cells` (eval, harness spec) in this part, sorted and
    /// without repeats. Every cell of `cells` is in exactly one part of the N.
    pub fn select(&self, cells: &[(String, String)]) -> Vec<(String, String)> {
        let mut sorted: Vec<&(String, String)> = cells.iter().collect();
        sorted.sort();
        sorted.dedup();
        sorted
            .into_iter()
            .enumerate()
            .filter(|(i, (eval, harness))| self.part_of(*i, eval, harness) == self.part)
            .map(|(_, cell)| cell.clone())
            .collect()
    }

    /// The part (from 1) of the cell `eval` × `harness`, the `index`-th (from
    /// 0) of the sorted cells selected.
    pub fn part_of(&self, index: usize, eval: &str, harness: &str) -> u32 {
        let n = u64::from(self.of);
        let slot = match self.kind {
            PartitionKind::Hash => cell_hash(eval, harness) % n,
            PartitionKind::Count => index as u64 % n,
        };
        slot as u32 + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cells(evals: usize, harnesses: &[&str]) -> Vec<(String, String)> {
        (0..evals)
            .flat_map(|e| harnesses.iter().map(move |h| (format!("eval_{e:03}"), h.to_string())))
            .collect()
    }

    #[test]
    fn every_cell_is_in_exactly_one_part() {
        let all = cells(50, &["shell", "shell:alt", "claude-code:sonnet"]);
        for kind in ["hash", "count"] {
            for of in 1..=7u32 {
                let mut seen: Vec<(String, String)> = Vec::new();
                let mut sizes = Vec::new();
                for part in 1..=of {
                    let p: Partition = format!("{kind}:{part}/{of}").parse().unwrap();
                    let mine = p.select(&all);
                    sizes.push(mine.len());
                    seen.extend(mine);
                }
                seen.sort();
                let mut want = all.clone();
                want.sort();
                assert_eq!(seen, want, "{kind}:_/{of}: every cell once");
                if kind == "count" {
                    // Dealt in turn: the parts differ by one cell at most.
                    let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
                    assert!(max - min <= 1, "count:_/{of}: {sizes:?}");
                } else if of > 1 {
                    assert!(
                        sizes.iter().all(|&n| n > 0),
                        "hash:_/{of} spreads 150 cells: {sizes:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn count_deals_the_sorted_cells_in_turn_and_hash_ignores_the_others() {
        let all: Vec<(String, String)> = ["c", "a", "d", "b", "e"]
            .iter()
            .map(|e| (e.to_string(), "shell".to_string()))
            .collect();
        let names = |p: &str| -> Vec<String> {
            p.parse::<Partition>().unwrap().select(&all).into_iter().map(|(e, _)| e).collect()
        };
        assert_eq!(names("count:1/2"), ["a", "c", "e"]);
        assert_eq!(names("count:2/2"), ["b", "d"]);
        assert_eq!(names("count:3/3"), ["c"]);
        // A cell's hash part does not depend on which other cells are selected.
        let p: Partition = "hash:2/3".parse().unwrap();
        for (e, h) in &all {
            let alone = p.select(&[(e.clone(), h.clone())]);
            assert_eq!(alone.len() == 1, names("hash:2/3").contains(e), "{e}");
        }
    }

    #[test]
    fn the_hash_is_fixed_across_machines_and_versions() {
        // SHA-256 of "greets\0shell": pinned, so a change of hash is a visible break.
        assert_eq!(cell_hash("greets", "shell"), 0x7e49_7e90_293f_9a45);
        let p: Partition = "hash:1/3".parse().unwrap();
        assert_eq!(p.part_of(0, "greets", "shell"), (0x7e49_7e90_293f_9a45_u64 % 3) as u32 + 1);
        // The harness is part of the cell's name.
        assert_ne!(cell_hash("greets", "shell"), cell_hash("greets", "shell:alt"));
        assert_ne!(cell_hash("ab", "c"), cell_hash("a", "bc"));
    }

    #[test]
    fn specs_read_as_nextest_spells_them_and_bad_ones_say_why() {
        let p: Partition = "hash:2/3".parse().unwrap();
        assert_eq!(p, Partition { kind: PartitionKind::Hash, part: 2, of: 3 });
        assert_eq!(p.to_string(), "hash:2/3");
        assert_eq!("count:1/1".parse::<Partition>().unwrap().to_string(), "count:1/1");
        let err = |s: &str| s.parse::<Partition>().unwrap_err().to_string();
        assert_eq!(err("hash:0/3"), "`hash:0/3` names part 0, but the parts are 1 to 3");
        assert_eq!(err("hash:4/3"), "`hash:4/3` names part 4, but the parts are 1 to 3");
        assert_eq!(err("foo:1/2"), "`foo:1/2` must begin with `hash:` or `count:` (like hash:1/3)");
        assert_eq!(err("hash:1/0"), "`hash:1/0` has no parts: N must be at least 1");
        for bad in ["hash:1", "hash:a/3", "count:1/-3", "hash:/3", "hash:1/3/4"] {
            assert!(err(bad).contains("is not KIND:K/N"), "{bad}: {}", err(bad));
        }
    }
}
