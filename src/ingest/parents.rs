//! Each reaction's parent in the thread's propagation tree, as `FEATURES.md`
//! ("Propagation tree") defines it: the tweet its `in_reply_to_status_id`
//! names, else its nearest stored ancestor in `structure.json`, else the
//! source. A parent is always the source or an earlier reply of the same
//! thread, so the parents form a tree whose edges point back in the thread's
//! order (what graph batches rely on).

use std::collections::{HashMap, VecDeque};

use super::parse::{Reason, parse_id};
use crate::format::PARENT_SOURCE;
use crate::schema::{ParentHow, ReactionKind};

type Value<'t, 'i> = simd_json::tape::Value<'t, 'i>;

/// `structure.json` read for parents: every id it names, with the nearest
/// id-named key enclosing its first occurrence (breadth first: the
/// shallowest, then the first in document order); `None` at the top level.
///
/// An object's repeated key is read as Python's `json` reads it: the last
/// value, at the first key's place. Every id's first occurrence is shallower
/// than its enclosing id's, so following [`up`](Self::up) always ends.
///
/// ```
/// use socialctx::internals::parse::TweetReader;
/// use socialctx::internals::parents::structure;
/// let mut r = TweetReader::new();
/// let json = br#"{"1": {"2": {"x": {"3": []}}, "4": {"2": []}}}"#;
/// let s = r.parse_bytes(json, structure).unwrap().unwrap();
/// assert_eq!((s.up(1), s.up(2), s.up(3), s.up(5)), (Some(None), Some(Some(1)), Some(Some(2)), None));
/// ```
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Structure {
    up: HashMap<u64, Option<u64>>,
}

impl Structure {
    /// `None` if `id` is not in the tree, else its enclosing id (`None` at the top).
    pub fn up(&self, id: u64) -> Option<Option<u64>> {
        self.up.get(&id).copied()
    }
}

/// Reads a parsed `structure.json` (see [`Structure`]).
pub fn structure(root: Value<'_, '_>) -> Result<Structure, Reason> {
    let top = root
        .as_object()
        .ok_or_else(|| "structure.json is not a JSON object".to_string())?;
    let mut up = HashMap::new();
    let mut queue = VecDeque::from([(top, None::<u64>)]);
    let mut entries: Vec<(&str, Value<'_, '_>)> = Vec::new();
    let mut place: HashMap<&str, usize> = HashMap::new();
    while let Some((obj, enclosing)) = queue.pop_front() {
        entries.clear();
        place.clear();
        for (key, child) in obj.iter() {
            match place.get(key) {
                Some(&i) => entries[i].1 = child,
                None => {
                    place.insert(key, entries.len());
                    entries.push((key, child));
                }
            }
        }
        for &(key, child) in &entries {
            let id = parse_id(key);
            if let Some(id) = id {
                up.entry(id).or_insert(enclosing);
            }
            if let Some(o) = child.as_object() {
                queue.push_back((o, id.or(enclosing)));
            }
        }
    }
    Ok(Structure { up })
}

/// What [`assign`] needs of one reaction, in the thread's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Node {
    /// Tweet id.
    pub id: u64,
    /// Reply or retweet.
    pub kind: ReactionKind,
    /// The tweet it names as the one it answers, if any.
    pub in_reply_to: Option<u64>,
}

/// Each reaction's parent (a position in `nodes`, or
/// [`ReactionNum::PARENT_SOURCE`](crate::ReactionNum::PARENT_SOURCE)) and
/// how it was found, for the reactions of one thread in the thread's
/// `(created_at, id)` order.
///
/// ```
/// use socialctx::internals::parents::{Node, assign};
/// use socialctx::{ParentHow, ReactionKind, ReactionNum};
/// const PARENT_SOURCE: u32 = ReactionNum::PARENT_SOURCE;
/// let reply = |id, to| Node { id, kind: ReactionKind::Reply, in_reply_to: to };
/// let got = assign(1, &[reply(2, Some(1)), reply(3, Some(2)), reply(4, Some(9))], None);
/// assert_eq!(got, [(PARENT_SOURCE, ParentHow::InReplyTo), (0, ParentHow::InReplyTo),
///                  (PARENT_SOURCE, ParentHow::Defaulted)]);
/// ```
pub fn assign(
    source_id: u64,
    nodes: &[Node],
    structure: Option<&Structure>,
) -> Vec<(u32, ParentHow)> {
    let mut position: HashMap<u64, u32> = HashMap::with_capacity(nodes.len());
    for (i, n) in nodes.iter().enumerate() {
        if n.kind == ReactionKind::Reply {
            position.entry(n.id).or_insert(i as u32);
        }
    }
    // The source, or a reply stored before reaction `i`.
    let usable = |id: u64, i: usize| {
        if id == source_id {
            Some(PARENT_SOURCE)
        } else {
            position.get(&id).copied().filter(|&p| (p as usize) < i)
        }
    };
    let defaulted = (PARENT_SOURCE, ParentHow::Defaulted);
    nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            if n.kind == ReactionKind::Retweet {
                return defaulted;
            }
            if let Some(p) = n.in_reply_to.and_then(|t| usable(t, i)) {
                return (p, ParentHow::InReplyTo);
            }
            let Some(s) = structure else {
                return defaulted;
            };
            let start = n
                .in_reply_to
                .and_then(|t| s.up(t))
                .or_else(|| s.up(n.id))
                .flatten();
            let mut cur = start;
            while let Some(c) = cur {
                if let Some(p) = usable(c, i) {
                    return (p, ParentHow::Structure);
                }
                cur = s.up(c).flatten();
            }
            defaulted
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::parse::TweetReader;

    fn tree(json: &str) -> Structure {
        TweetReader::new()
            .parse_bytes(json.as_bytes(), structure)
            .unwrap()
            .unwrap()
    }

    fn reply(id: u64, to: Option<u64>) -> Node {
        Node {
            id,
            kind: ReactionKind::Reply,
            in_reply_to: to,
        }
    }

    const S: u32 = PARENT_SOURCE;
    use ParentHow::{Defaulted as D, InReplyTo as R, Structure as T};

    /// A tweet named twice in `structure.json` (a cycle written as a tree)
    /// takes its shallowest place, and walking up always ends.
    #[test]
    fn repeated_ids_take_the_shallowest_place() {
        let s = tree(r#"{"1": {"2": {"3": {"2": {"3": []}}}}, "3": {"1": []}}"#);
        assert_eq!(s.up(1), Some(None));
        assert_eq!(s.up(3), Some(None));
        assert_eq!(s.up(2), Some(Some(1)));
        // A repeated key: the last value, at the first place.
        let s = tree(r#"{"1": {"2": {"5": []}, "3": [], "2": {"6": []}}}"#);
        assert_eq!((s.up(5), s.up(6)), (None, Some(Some(2))));
        assert!(
            TweetReader::new()
                .parse_bytes(b"[]", structure)
                .unwrap()
                .is_err()
        );
    }

    /// The rule's branches: in_reply_to to a stored earlier reply, to a later
    /// one, to itself, to a retweet, to a missing tweet (structure from it,
    /// else from the reply's own place), and a cycle in the structure.
    #[test]
    fn rule_branches() {
        let rt = Node {
            id: 7,
            kind: ReactionKind::Retweet,
            in_reply_to: Some(2),
        };
        let s = tree(r#"{"1": {"2": {"3": {"9": {"4": []}}}, "5": {"6": []}}}"#);
        let nodes = [
            reply(2, Some(1)),  // the source
            reply(3, Some(2)),  // an earlier reply
            reply(4, Some(9)),  // missing: 9's ancestors in the structure: 3
            rt,                 // a retweet: the source
            reply(6, Some(7)),  // names a retweet; own place: 5 (missing), 1
            reply(8, Some(8)),  // itself; not in the structure
            reply(5, Some(10)), // later reply 10; 10 unknown, own place: 1
            reply(10, None),    // no in_reply_to, not in the structure
        ];
        let got = assign(1, &nodes, Some(&s));
        assert_eq!(
            got,
            [
                (S, R),
                (0, R),
                (1, T),
                (S, D),
                (S, T),
                (S, D),
                (S, T),
                (S, D)
            ]
        );
        // In a structure where 2 sits under 3, in_reply_to 3 -> 2 -> 3 cannot loop.
        let s = tree(r#"{"1": {"3": {"2": {"3": []}}}}"#);
        let got = assign(1, &[reply(2, Some(3)), reply(3, Some(2))], Some(&s));
        assert_eq!(got, [(S, T), (0, R)]);
    }
}
