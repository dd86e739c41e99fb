//! `--shard K/N` ([`Shard`]): which tasks of the file a shard of a run
//! runs, read by the command line, kept in run.json, merged by `merge`.

/// `--shard K/N`: 1-based K of N.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

/// Why `--shard` cannot be read; the words follow clap's `invalid value
/// 'RAW' for '--shard <K/N>': `.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    #[error("{0:?} is not K/N (for example 2/4)")]
    NotKOfN(String),
    #[error("{0:?}: K is not a number")]
    K(String),
    #[error("{0:?}: N is not a number")]
    N(String),
    #[error("{0:?}: K must be between 1 and N, and N at least 1")]
    OutOfRange(String),
}

impl Shard {
    pub fn parse(raw: &str) -> Result<Shard, ShardError> {
        let (k, n) = raw
            .split_once('/')
            .ok_or_else(|| ShardError::NotKOfN(raw.to_owned()))?;
        let index: usize = k
            .trim()
            .parse()
            .map_err(|_| ShardError::K(raw.to_owned()))?;
        let count: usize = n
            .trim()
            .parse()
            .map_err(|_| ShardError::N(raw.to_owned()))?;
        if count == 0 || index == 0 || index > count {
            return Err(ShardError::OutOfRange(raw.to_owned()));
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
