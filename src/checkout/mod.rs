//! Stage 2: the repo cache and each task's leak-proof working copy:
//! mirrors and checkouts ([`RepoCache`], [`Checkout`], cache.rs), the
//! exact object store of each base (store.rs), the thin packs fixed in
//! process (thin.rs) and what can go wrong in all of them (error.rs).

mod cache;
mod error;
mod store;
mod thin;

pub use cache::{BUILD_ARTEFACTS, Checkout, Preparer, RepoCache, STAGED_PACKS, patch_paths};
pub use error::{CheckoutError, GitError, Leak, PackFault, StoreError};
pub use store::{BaseStore, FixedPacks, History, StoreDir, StoredPack, Verified};
