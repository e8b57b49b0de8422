//! The read half: open a cache, validate it (all at once or file by file on
//! first use), and read it through zero-copy views into memory maps.
//!
//! It depends on the [format](crate::format) and the [schema](crate::schema)
//! only, never on the build: a cache written by any build of the same format
//! version reads the same.

mod cache;
mod source;
mod validate;
mod view;

pub use cache::{Cache, LazyCache};
pub use source::ThreadSource;
pub use view::{NumView, ReactionNum, ReactionView, ThreadView, TokenList};
