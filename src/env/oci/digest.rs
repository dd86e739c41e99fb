//! An image's content address: a `sha256:<64 hex>` [`Digest`], checked
//! when parsed, and computed from bytes. Its own file because the
//! references (`reference.rs`) and the images they name (`source.rs`) both
//! carry one, and each of those two imports the other's type otherwise.

use sha2::{Digest as _, Sha256};

use super::OciError;

/// A `sha256:<64 hex>` digest, checked to be one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Digest(String);

impl Digest {
    pub(super) fn parse(text: &str) -> Result<Digest, OciError> {
        let hex = text
            .strip_prefix("sha256:")
            .ok_or_else(|| OciError::UnsupportedDigest {
                text: text.to_owned(),
            })?;
        if hex.len() != 64 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(OciError::MalformedDigest {
                text: text.to_owned(),
            });
        }
        Ok(Digest(text.to_owned()))
    }

    /// The digest of `bytes`.
    pub(super) fn of(bytes: &[u8]) -> Digest {
        Digest::from_hasher(Sha256::new_with_prefix(bytes))
    }

    pub(super) fn from_hasher(hasher: Sha256) -> Digest {
        let hex: String = hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Digest(format!("sha256:{hex}"))
    }

    /// The 64 hex digits: a file name.
    pub(super) fn hex(&self) -> &str {
        &self.0["sha256:".len()..]
    }
}

impl std::fmt::Display for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
