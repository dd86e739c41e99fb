//! Stage 2: the repo cache and each task's leak-proof working copy:
//! mirrors and checkouts ([`RepoCache`], [`Checkout`], cache.rs), a repo's
//! folder at a commit exported into the cache ([`repo_folder`], folder.rs),
//! the exact object store of each base (store.rs), the thin packs fixed in
//! process (thin.rs) and what can go wrong in all of them (error.rs).

mod cache;
mod error;
mod folder;
mod store;
mod thin;

pub(crate) use cache::{
    BUILD_ARTEFACTS, Checkout, RepoCache, STAGED_PACKS, missing_repo_path, patch_paths,
};
pub(crate) use error::{CheckoutError, GitError};
pub(crate) use folder::repo_folder;
pub(crate) use store::{History, Verified};
