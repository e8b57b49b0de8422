//! Sets of code points as the generated tables give them: sorted, disjoint,
//! inclusive ranges, searched by bisection, with an ASCII bitmask in front
//! ([`Class`]) or a per-block summary that skips the search ([`BlockSet`]).

/// Where the inclusive range `lo..=hi` lies relative to `c`, for binary
/// searches over sorted, disjoint ranges.
#[inline]
pub(crate) fn range_cmp(lo: u32, hi: u32, c: u32) -> core::cmp::Ordering {
    if hi < c {
        core::cmp::Ordering::Less
    } else if lo > c {
        core::cmp::Ordering::Greater
    } else {
        core::cmp::Ordering::Equal
    }
}

/// Binary search for `c` in sorted, disjoint, inclusive ranges.
#[inline]
pub(crate) fn in_ranges(ranges: &[(u32, u32)], c: u32) -> bool {
    ranges
        .binary_search_by(|&(lo, hi)| range_cmp(lo, hi, c))
        .is_ok()
}

/// A probed class with an ASCII bitmask in front of its ranges.
#[derive(Debug)]
pub(crate) struct Class {
    pub(crate) ascii: u128,
    ranges: &'static [(u32, u32)],
}

impl Class {
    pub(crate) fn new(ranges: &'static [(u32, u32)]) -> Self {
        let mut ascii = 0u128;
        for &(lo, hi) in ranges {
            for c in lo..=hi.min(127) {
                ascii |= 1 << c;
            }
        }
        Class { ascii, ranges }
    }
    #[inline]
    pub(crate) fn has(&self, c: char) -> bool {
        let c = c as u32;
        if c < 128 {
            (self.ascii >> c) & 1 != 0
        } else {
            in_ranges(self.ranges, c)
        }
    }
}

/// The char at byte `i` of `s`, if `i` is a char boundary inside `s`.
#[inline]
pub(crate) fn char_at(s: &str, i: usize) -> Option<char> {
    s.get(i..).and_then(|r| r.chars().next())
}

/// End of the run of `cls` chars starting at byte `i`.
#[inline]
pub(crate) fn run_end(s: &str, mut i: usize, cls: &Class) -> usize {
    while let Some(c) = char_at(s, i) {
        if !cls.has(c) {
            break;
        }
        i += c.len_utf8();
    }
    i
}

/// One bit per 256-code-point block (4352 blocks): whether any code point
/// of the block is in the set, so that most chars skip a table search.
#[derive(Debug)]
pub(crate) struct BlockSet([u64; 68]);

impl BlockSet {
    pub(crate) const fn new() -> Self {
        BlockSet([0; 68])
    }
    /// Marks the blocks of `lo..=hi`.
    pub(crate) fn insert(&mut self, lo: u32, hi: u32) {
        for k in (lo >> 8)..=(hi >> 8) {
            self.0[(k >> 6) as usize] |= 1 << (k & 63);
        }
    }
    /// Whether the block of `c` has a member.
    #[inline]
    pub(crate) fn contains(&self, c: u32) -> bool {
        let k = c >> 8;
        (self.0[(k >> 6) as usize] >> (k & 63)) & 1 != 0
    }
}
