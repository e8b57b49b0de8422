//! Token vocabularies counted from the stored tokens in one pass, for the
//! models that index tokens (BiGCN's bag of words, AllenNLP's embedders).
//!
//! AllenNLP's `Vocabulary.from_instances` holds whole datasets in memory to
//! count tokens; here the counts are a map from tokens borrowed from the
//! cache's memory map, so memory grows with the distinct tokens only.
//! [`Vocabulary::save`] writes AllenNLP's vocabulary directory
//! (`Vocabulary.from_files` loads it).

use rayon::prelude::*;
use rustc_hash::FxHashMap;
use std::io::Write;
use std::path::Path;

use super::selection::Kinds;
use crate::error::LoadError;
use crate::read::ThreadSource;
use crate::read::texts::TextField;

/// AllenNLP's out-of-vocabulary token (index 1 of a padded namespace;
/// index 0 is its padding token, `@@PADDING@@`, which files never hold).
const OOV_TOKEN: &str = "@@UNKNOWN@@";

/// Tokens of one text field with their counts, most frequent first (ties
/// by the token's code points, so the order is the same everywhere).
///
/// Indices follow AllenNLP's padded namespaces: 0 is `@@PADDING@@`,
/// 1 is `@@UNKNOWN@@`, token `i` of [`tokens`](Self::tokens) is `i + 2`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vocabulary {
    field: TextField,
    tokens: Vec<String>,
    counts: Vec<u64>,
    /// Token → index, built once: every lookup ([`index`](Self::index),
    /// token ids, bags of words) borrows the token from the memory map.
    index: FxHashMap<String, u32>,
}

impl Vocabulary {
    /// Index of AllenNLP's padding token, `@@PADDING@@`: what token-id
    /// buffers are padded with.
    pub const PADDING_ID: u32 = 0;

    /// Index of AllenNLP's unknown token, `@@UNKNOWN@@`: the index of every
    /// token the vocabulary does not hold.
    pub const UNKNOWN_ID: u32 = 1;

    /// Counts the tokens of `field` over the reactions of `kinds` of the
    /// threads at `positions` (all when `None`), keeps those seen at least
    /// `min_count` times and, with `max_size`, the `max_size` most frequent
    /// of them.
    pub fn count<C: ThreadSource + Sync + ?Sized>(
        cache: &C,
        field: TextField,
        kinds: Kinds,
        positions: Option<&[usize]>,
        min_count: u64,
        max_size: Option<usize>,
    ) -> Result<Self, LoadError> {
        let all: Vec<usize>;
        let positions = match positions {
            Some(p) => p,
            None => {
                all = (0..cache.len()).collect();
                &all
            }
        };
        // One map per rayon job over a run of threads, merged at the end:
        // the tokens stay borrowed from the map, and the result does not
        // depend on how the work was split (it is sorted below).
        let count_run = |run: &[usize]| -> Result<FxHashMap<&str, u64>, LoadError> {
            let mut counts: FxHashMap<&str, u64> = FxHashMap::default();
            for &pos in run {
                let t = cache
                    .thread(pos)?
                    .ok_or(LoadError::NoSuchThread { position: pos })?;
                for r in t.reactions().filter(|r| kinds.includes(r.kind())) {
                    if let Some(tokens) = field.tokens_of(&r) {
                        for tok in tokens.iter() {
                            *counts.entry(tok).or_insert(0) += 1;
                        }
                    }
                }
            }
            Ok(counts)
        };
        let runs = positions.len().div_ceil(512).max(1);
        let counts = positions
            .par_chunks(positions.len().div_ceil(runs).max(1))
            .map(count_run)
            .try_reduce(FxHashMap::default, |mut a, b| {
                let (small, mut big) = if a.len() < b.len() { (a, b) } else { (b, a) };
                for (tok, n) in small {
                    *big.entry(tok).or_insert(0) += n;
                }
                a = big;
                Ok(a)
            })?;
        let mut sorted: Vec<(&str, u64)> = counts
            .into_iter()
            .filter(|&(_, c)| c >= min_count.max(1))
            .collect();
        sorted.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        if let Some(max) = max_size {
            sorted.truncate(max);
        }
        let tokens = sorted.iter().map(|(t, _)| (*t).to_owned()).collect();
        let counts = sorted.iter().map(|&(_, c)| c).collect();
        Ok(Self::indexed(field, tokens, counts))
    }

    /// The vocabulary of `tokens` already in count order: ids from 2, after
    /// padding and unknown.
    fn indexed(field: TextField, tokens: Vec<String>, counts: Vec<u64>) -> Self {
        let index = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i as u32 + 2))
            .collect();
        Vocabulary {
            field,
            tokens,
            counts,
            index,
        }
    }

    /// The vocabulary of `tokens` with their `counts`, as [`tokens`](Self::tokens)
    /// and [`counts`](Self::counts) return them (how a pickled vocabulary is
    /// remade). Fails, naming the reason, for unequal lengths, a repeated
    /// token or an order other than [`count`](Self::count)'s.
    pub fn from_parts(
        field: TextField,
        tokens: Vec<String>,
        counts: Vec<u64>,
    ) -> Result<Self, String> {
        if tokens.len() != counts.len() {
            return Err(format!(
                "{} tokens for {} counts",
                tokens.len(),
                counts.len()
            ));
        }
        for i in 1..tokens.len() {
            let in_order = counts[i - 1] > counts[i]
                || (counts[i - 1] == counts[i] && tokens[i - 1] < tokens[i]);
            if !in_order {
                return Err(format!(
                    "tokens {:?} and {:?} are not in count order (most frequent first, ties by the token)",
                    tokens[i - 1],
                    tokens[i]
                ));
            }
        }
        Ok(Self::indexed(field, tokens, counts))
    }

    /// The text field the tokens were counted on (and that token ids and
    /// bags of words read).
    pub fn field(&self) -> TextField {
        self.field
    }

    /// The tokens, most frequent first.
    pub fn tokens(&self) -> &[String] {
        &self.tokens
    }

    /// Their counts.
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// Number of tokens (padding and unknown not counted).
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether no token was kept.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// AllenNLP's index of `token`: 2 and up for a known token, 1 (the
    /// unknown token) otherwise.
    pub fn index(&self, token: &str) -> u32 {
        self.index.get(token).copied().unwrap_or(Self::UNKNOWN_ID)
    }

    /// Writes AllenNLP's vocabulary directory: `non_padded_namespaces.txt`
    /// (`*tags`, `*labels`, AllenNLP's defaults) and `<namespace>.txt` (the
    /// unknown token, then the tokens in index order, one per line, a
    /// newline inside a token written as `@@NEWLINE@@`). Each file is
    /// written beside and renamed into place.
    pub fn save(&self, dir: &Path, namespace: &str) -> Result<(), LoadError> {
        std::fs::create_dir_all(dir).map_err(|e| LoadError::io(dir, e))?;
        let write = |name: &str, body: &[u8]| -> Result<(), LoadError> {
            let path = dir.join(name);
            crate::output::replace_file(&path, |f| f.write_all(body))
                .map_err(|e| LoadError::io(&path, e))
        };
        write("non_padded_namespaces.txt", b"*tags\n*labels\n")?;
        let mut body = String::with_capacity(self.tokens.iter().map(|t| t.len() + 1).sum());
        body.push_str(OOV_TOKEN);
        body.push('\n');
        for t in &self.tokens {
            body.push_str(&t.replace('\n', "@@NEWLINE@@"));
            body.push('\n');
        }
        write(&format!("{namespace}.txt"), body.as_bytes())
    }
}
