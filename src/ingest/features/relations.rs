//! Extended per-reaction features from `who-follows-whom.dat`: whether the
//! reaction's author follows the source's author, is followed by them, or
//! both.
//!
//! The file has one `follower<TAB>followee` pair of user ids per line. A
//! thread without the file has unknown relations (NaN). (The reference's loop
//! overwrites its flags on every line, so only the file's last line counts;
//! we implement the intended meaning: a relation holds if any line says so.)

use std::collections::HashSet;

use crate::ingest::parse::parse_id;

/// The follow edges of one thread.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FollowGraph {
    edges: HashSet<(u64, u64)>,
}

impl FollowGraph {
    /// Parses the file; returns the graph and, for each line that is not two
    /// decimal ids separated by whitespace, its 1-based number.
    ///
    /// ```
    /// use socialctx::internals::features::relations::FollowGraph;
    /// let (g, bad) = FollowGraph::parse(b"1\t2\n2\t3\nnot a line\n");
    /// assert!(g.follows(1, 2) && !g.follows(2, 1));
    /// assert_eq!(bad, vec![3]);
    /// ```
    pub fn parse(bytes: &[u8]) -> (FollowGraph, Vec<usize>) {
        let mut g = FollowGraph::default();
        let mut bad = Vec::new();
        for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let mut parts = line
                .split(|b| b.is_ascii_whitespace())
                .filter(|p| !p.is_empty())
                .map(|p| std::str::from_utf8(p).ok().and_then(parse_id));
            match (parts.next(), parts.next(), parts.next()) {
                (Some(Some(a)), Some(Some(b)), None) => {
                    g.edges.insert((a, b));
                }
                _ => bad.push(i + 1),
            }
        }
        (g, bad)
    }

    /// Whether `follower` follows `followee`.
    pub fn follows(&self, follower: u64, followee: u64) -> bool {
        self.edges.contains(&(follower, followee))
    }

    /// Number of edges.
    pub fn len(&self) -> usize {
        self.edges.len()
    }

    /// True when there is no edge.
    pub fn is_empty(&self) -> bool {
        self.edges.is_empty()
    }
}
