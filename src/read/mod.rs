//! The read half: open a cache, validate it (all at once or file by file on
//! first use), and read it through zero-copy views into memory maps; and
//! the distinct texts of a field over a cache ([`texts`]: what an embedding
//! store embeds and a vocabulary counts).
//!
//! It depends on the [format](crate::format) and the [schema](crate::schema)
//! only, never on the build: a cache written by any build of the same format
//! version reads the same.

mod cache;
mod source;
pub mod texts;
mod validate;
mod view;

pub use cache::{Cache, LazyCache};
pub use source::ThreadSource;
pub use view::{NumView, ReactionNum, ReactionView, ThreadView, TokenList};
