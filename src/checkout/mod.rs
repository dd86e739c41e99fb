//! Stage 2: the repo cache and each task's leak-proof working copy:
//! mirrors and checkouts ([`RepoCache`], [`Checkout`], cache.rs), the
//! exact object store of each base (store.rs) and the thin packs fixed in
//! process (thin.rs).

mod cache;
mod store;
mod thin;

pub use cache::{
    BUILD_ARTEFACTS, Checkout, CheckoutError, GitError, Preparer, RepoCache, STAGED_PACKS,
    patch_paths,
};
pub use store::{BaseStore, FixedPacks, History, StoreDir, StoredPack, Verified};
