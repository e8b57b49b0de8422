//! gensim's `deaccent` as RPDNN calls it: `unicodedata.normalize('NFC', ...)`
//! of the NFD form without category Mn, with Python 3.11's (Unicode 14.0)
//! decompositions, combining classes and compositions; Hangul is
//! algorithmic.

use std::sync::OnceLock;

use crate::class::{BlockSet, in_ranges, range_cmp};
use crate::tokens_tables as t;

/// The blocks with a decomposition, a char of category Mn, a non-zero
/// combining class or the second char of a composition.
fn norm_blocks() -> &'static BlockSet {
    static B: OnceLock<BlockSet> = OnceLock::new();
    B.get_or_init(|| {
        let mut b = BlockSet::new();
        for &(c, _, _) in t::DECOMP {
            b.insert(c, c);
        }
        for &(lo, hi) in t::MN {
            b.insert(lo, hi);
        }
        for &(lo, hi, _) in t::CCC {
            b.insert(lo, hi);
        }
        for &(_, c, _) in t::COMPOSE {
            b.insert(c, c);
        }
        b.insert(L_BASE, T_BASE + T_COUNT);
        b.insert(S_BASE, S_BASE + S_COUNT - 1);
        b
    })
}

/// Whether deaccent can change `s` (some char is in a block with
/// decompositions, marks or compositions).
pub(crate) fn needs_normalization(s: &str) -> bool {
    let m = norm_blocks();
    s.chars().any(|c| c as u32 >= 0xC0 && m.contains(c as u32))
}

#[inline]
fn ccc(c: u32) -> u8 {
    if c < 0x300 || !norm_blocks().contains(c) {
        return 0;
    }
    match t::CCC.binary_search_by(|&(lo, hi, _)| range_cmp(lo, hi, c)) {
        Ok(k) => t::CCC[k].2,
        Err(_) => 0,
    }
}

const S_BASE: u32 = 0xAC00;
const L_BASE: u32 = 0x1100;
const V_BASE: u32 = 0x1161;
const T_BASE: u32 = 0x11A7;
const L_COUNT: u32 = 19;
const V_COUNT: u32 = 21;
const T_COUNT: u32 = 28;
const N_COUNT: u32 = V_COUNT * T_COUNT;
const S_COUNT: u32 = L_COUNT * N_COUNT;

/// gensim's `deaccent`: NFC(NFD(s) without category Mn), into `out`.
pub(crate) fn deaccent(s: &str, scratch: &mut Vec<u32>, out: &mut String) {
    scratch.clear();
    let push = |c: u32, v: &mut Vec<u32>| {
        if c >= 0x300 && in_ranges(t::MN, c) {
            return;
        }
        v.push(c);
    };
    let norm = norm_blocks();
    for ch in s.chars() {
        let c = ch as u32;
        if c < 0xC0 || !norm.contains(c) {
            scratch.push(c);
        } else if (S_BASE..S_BASE + S_COUNT).contains(&c) {
            let si = c - S_BASE;
            push(L_BASE + si / N_COUNT, scratch);
            push(V_BASE + (si % N_COUNT) / T_COUNT, scratch);
            if !si.is_multiple_of(T_COUNT) {
                push(T_BASE + si % T_COUNT, scratch);
            }
        } else if let Ok(k) = t::DECOMP.binary_search_by_key(&c, |&(cp, _, _)| cp) {
            let (_, off, len) = t::DECOMP[k];
            for &d in &t::DECOMP_DATA[off as usize..off as usize + len as usize] {
                push(d, scratch);
            }
        } else {
            push(c, scratch);
        }
    }
    // Canonical ordering (stable by combining class within non-starter runs).
    let v = scratch;
    let mut i = 0;
    while i < v.len() {
        if ccc(v[i]) == 0 {
            i += 1;
            continue;
        }
        let start = i;
        while i < v.len() && ccc(v[i]) != 0 {
            i += 1;
        }
        if i - start > 1 {
            v[start..i].sort_by_key(|&c| ccc(c));
        }
    }
    // Canonical composition.
    let n = v.len();
    let mut w = 0usize; // write index
    let mut starter: Option<usize> = None; // index in the written prefix
    let mut last_ccc: i32 = -1;
    let mut r = 0usize;
    while r < n {
        let c = v[r];
        let cc = ccc(c) as i32;
        if let Some(si) = starter {
            let blocked = last_ccc != -1 && (last_ccc == 0 || last_ccc >= cc);
            // `last_ccc == -1` means the previous char is the starter itself.
            // Every second of a composition is >= U+0300 (checked by the generator).
            if !blocked
                && c >= 0x300
                && norm.contains(c)
                && let Some(comp) = compose(v[si], c)
            {
                v[si] = comp;
                r += 1;
                continue;
            }
        }
        if cc == 0 {
            starter = Some(w);
            last_ccc = -1;
        } else {
            last_ccc = cc;
        }
        v[w] = c;
        w += 1;
        r += 1;
    }
    v.truncate(w);
    for &c in v.iter() {
        out.push(char::from_u32(c).unwrap_or('\u{FFFD}'));
    }
}

fn compose(a: u32, b: u32) -> Option<u32> {
    if (L_BASE..L_BASE + L_COUNT).contains(&a) && (V_BASE..V_BASE + V_COUNT).contains(&b) {
        return Some(S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT);
    }
    if (S_BASE..S_BASE + S_COUNT).contains(&a)
        && (a - S_BASE).is_multiple_of(T_COUNT)
        && (T_BASE + 1..T_BASE + T_COUNT).contains(&b)
    {
        return Some(a + (b - T_BASE));
    }
    t::COMPOSE
        .binary_search_by(|&(x, y, _)| (x, y).cmp(&(a, b)))
        .ok()
        .map(|k| t::COMPOSE[k].2)
}
