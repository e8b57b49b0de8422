//! RPDNN's `preprocessing_tweet_text` (see FEATURES.md, "Texts for embedding"):
//! the reply tokens fed to ELMo, bit for bit with Python 3.11 + nltk 3.10.4.
//!
//! NOT PORTED YET: the port (tables generated from Python, a DFA path and a
//! backtracking path for look-arounds) is in progress (issue 14). Until
//! [`PORTED`] is true, builds store no reply tokens (readers see `None`) and
//! `dump --tokens` refuses to run, rather than give wrong tokens.

/// Whether [`Tokenizer::reply_tokens`] is the bit-exact port. While false,
/// no reply tokens are stored.
pub const PORTED: bool = false;

/// A reusable list of tokens: one string buffer plus token end offsets, so a
/// worker reuses its allocations across tweets.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tokens {
    text: String,
    ends: Vec<u32>,
}

impl Tokens {
    /// Removes every token, keeping the allocations.
    pub fn clear(&mut self) {
        self.text.clear();
        self.ends.clear();
    }
    /// Appends one token.
    pub fn push(&mut self, token: &str) {
        self.text.push_str(token);
        self.ends.push(self.text.len() as u32);
    }
    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.ends.len()
    }
    /// No tokens.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
    /// Token `i`.
    pub fn get(&self, i: usize) -> Option<&str> {
        let end = *self.ends.get(i)? as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        Some(&self.text[start..end])
    }
    /// The tokens in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        (0..self.len()).map(|i| self.get(i).unwrap())
    }
}

/// Per-worker tokenizer state (compiled patterns are shared; scratch buffers are not).
#[derive(Debug, Default)]
pub struct Tokenizer {}

impl Tokenizer {
    /// A tokenizer with empty scratch buffers.
    pub fn new() -> Self {
        Self::default()
    }

    /// `preprocessing_tweet_text(text)`: `out` is cleared, then holds the tokens
    /// (empty when the reference returns `[]`).
    pub fn reply_tokens(&mut self, text: &str, out: &mut Tokens) {
        let _ = text;
        out.clear();
    }

    /// nltk 3.10.4 `TweetTokenizer().tokenize(text)` alone (default options).
    pub fn tweet_tokenize(&mut self, text: &str, out: &mut Tokens) {
        let _ = text;
        out.clear();
    }
}
