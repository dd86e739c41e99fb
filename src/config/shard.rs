//! `--shard K/N` ([`Shard`]): which tasks of the file a shard of a run
//! runs, read by the command line, kept in run.json, merged by `merge`.

/// `--shard K/N`: 1-based K of N.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

/// Why `--shard` cannot be read: the value as given, and what is wrong
/// with it. The words follow clap's `invalid value 'RAW' for '--shard
/// <K/N>': `.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{raw:?}{why}")]
pub struct ShardError {
    pub raw: String,
    pub why: ShardFault,
}

/// What is wrong with a `--shard` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ShardFault {
    #[error(" is not K/N (for example 2/4)")]
    NotKOfN,
    #[error(": K is not a number")]
    K,
    #[error(": N is not a number")]
    N,
    #[error(": K must be between 1 and N, and N at least 1")]
    OutOfRange,
}

impl Shard {
    pub fn parse(raw: &str) -> Result<Shard, ShardError> {
        let fault = |why| ShardError {
            raw: raw.to_owned(),
            why,
        };
        let (k, n) = raw
            .split_once('/')
            .ok_or_else(|| fault(ShardFault::NotKOfN))?;
        let index: usize = k.trim().parse().map_err(|_| fault(ShardFault::K))?;
        let count: usize = n.trim().parse().map_err(|_| fault(ShardFault::N))?;
        if count == 0 || index == 0 || index > count {
            return Err(fault(ShardFault::OutOfRange));
        }
        Ok(Shard { index, count })
    }

    /// Whether the task at 0-based position `i` of the file belongs to this shard.
    pub fn contains(&self, i: usize) -> bool {
        i % self.count == self.index - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_parsing_and_membership() {
        let shard = Shard::parse("2/3").expect("valid");
        let members: Vec<usize> = (0..7).filter(|i| shard.contains(*i)).collect();
        assert_eq!(members, vec![1, 4]);
        for bad in ["0/3", "4/3", "1/0", "x/2", "3", "1/y"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
    }
}
