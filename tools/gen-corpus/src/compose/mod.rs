//! Drawing accounts, texts and tweets from a thread's random stream.

mod text;
mod tweet;
mod user;

pub(crate) use self::text::pick_lang;
pub(crate) use self::tweet::{Earlier, ReplyCtx, reply, retweet, source_tweet};
pub(crate) use self::user::{news_user, random_user};
