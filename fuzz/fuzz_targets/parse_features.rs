//! Arbitrary bytes as a tweet file: as a reaction against a fixed valid
//! source tweet, and as a source tweet against a fixed valid reaction.
//! Parsing, field extraction and the 28 features must never panic.

#![no_main]

use std::cell::RefCell;

use libfuzzer_sys::fuzz_target;
use pycompat as pytext;
use pycompat::parse_created_at;
use socialctx::ReactionKind;
use socialctx::internals::features;
use socialctx::internals::layout::pheme::{reaction_fields, source_fields};
use socialctx::internals::parse::TweetReader;

/// A real PHEME source tweet and one of its replies.
static SOURCE: &[u8] = include_bytes!(
    "../../tests/fixtures/real/pheme-rnr/corpus/charliehebdo/non-rumours/552784600502915072/source-tweet/552784600502915072.json"
);
static REACTION: &[u8] = include_bytes!(
    "../../tests/fixtures/real/pheme-rnr/corpus/charliehebdo/non-rumours/552784600502915072/reactions/552785249420447745.json"
);

const KINDS: [ReactionKind; 2] = [ReactionKind::Reply, ReactionKind::Retweet];

/// Readers for the fixed source, the fixed reaction, and the input as
/// either; reused across runs, as a build's workers reuse theirs.
struct Readers([TweetReader; 4]);

thread_local! {
    static READERS: RefCell<Readers> = RefCell::new(Readers(std::array::from_fn(|_| TweetReader::new())));
}

fuzz_target!(|data: &[u8]| {
    READERS.with_borrow_mut(|Readers([src, rea, as_reaction, as_source])| {
        // Parsed on every run (cheap) so that nothing needs to be leaked.
        let fixed_source = &src.parse_bytes(SOURCE, source_fields).unwrap().unwrap();
        let fixed_reaction = &rea.parse_bytes(REACTION, reaction_fields).unwrap().unwrap();
        // The bytes as a reply or retweet in the fixed thread.
        let reaction = as_reaction.parse_bytes(data, |v| {
            let r = reaction_fields(v)?;
            for kind in KINDS {
                let _ = features::compute(&r, fixed_source, kind);
            }
            Ok::<_, String>(r)
        });
        // The bytes as the source tweet of the fixed reply, and of
        // themselves as a reply.
        let _ = as_source.parse_bytes(data, |v| {
            let s = source_fields(v)?;
            for kind in KINDS {
                let _ = features::compute(fixed_reaction, &s, kind);
                if let Ok(Ok(r)) = &reaction {
                    let _ = features::compute(r, &s, kind);
                }
            }
            Ok::<_, String>(())
        });
    });

    // The text helpers and the timestamp parser on the raw text.
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = parse_created_at(s);
        let _ = pytext::count_words(s);
        let _ = pytext::py_strip(s);
        let _ = pytext::has_token(s);
        let _ = pytext::char_len(s);
        let (text, name) = s.split_at(
            s.char_indices()
                .nth(s.chars().count() / 2)
                .map_or(0, |(i, _)| i),
        );
        let _ = pytext::context_len(text, name);
    }
});
