//! A scripted Hugging Face Hub on 127.0.0.1 for the dataset tests: the
//! part of the Hub's HTTP API a dataset download uses, answered from
//! dataset repos the test builds ([`Dataset`]), with the statuses,
//! `X-Error-Code`s and headers of the real Hub, and the faults a test
//! scripts. `hub_parity.rs` checks it against the real client,
//! `huggingface_hub`, so it cannot drift from what the Hub answers.
//!
//! What it serves, for each dataset repo:
//! - `GET /api/datasets/{id}[/revision/{rev}]`: the repo's info (`id`,
//!   `sha`, `siblings`, `cardData` with the card's `configs`, `gated`...);
//! - `GET /api/datasets/{id}/tree/{rev}[/{path}]?recursive=true`: its
//!   files and folders, paged by a `Link: <...>; rel="next"` header;
//! - `HEAD` and `GET /datasets/{id}/resolve/{rev}/{path}`: a file kept in
//!   git is answered here (`ETag` its blob's sha1, `X-Repo-Commit`,
//!   `Accept-Ranges`, `Range` -> 206); an LFS file is a 302 to a second
//!   listener, the "CDN" (another origin, as the Hub's is, so clients do
//!   not forward the token there), with `X-Linked-Etag` (its sha256) and
//!   `X-Linked-Size`;
//! - a branch `main`, the tags of each commit, and each commit's sha as
//!   revisions; a gated repo whose files need a granted token (`Bearer`).
//!
//! One thread a connection, one request a connection (`Connection:
//! close`), std only. Every request is logged ([`Seen`]) and a test can
//! block until one arrives ([`Hub::wait_for`]). Dropping the Hub closes
//! both listeners before it returns, so later requests are refused.
//!
//! It does not do: models or spaces, private repos, Xet storage, gzip,
//! multi-range requests, commits other than by [`Hub::publish`].
//!
//! The module's map: `repos.rs` the repos a test builds and what a commit
//! holds (hashes, LFS pointers, the card); `server.rs` the listeners, the
//! request log, the scripted faults and [`Hub`]'s API for tests;
//! `answers.rs` what the Hub answers each request, as the real one does.

mod answers;
mod repos;
mod server;

pub use repos::{Dataset, git_blob_sha1, lfs_pointer, sha256_hex};
pub use server::{Failure, Hub, Seen};
