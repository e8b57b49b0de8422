//! Writing a shard from runs of threads of other shards' archives, by
//! copying their archived bytes (a merge's re-pack, `crate::merge`).
//!
//! A shard's archive (`Shard`, `TextShard`) is a set of parallel arrays of
//! fixed-size, pointer-free records, one string arena, and a root of
//! relative pointers written last. A run of consecutive threads of one
//! shard is therefore a contiguous slice of each array and of the arena:
//! reactions, features, input keys and extended columns are copied as they
//! are; only what is shard-relative is rewritten (a thread's
//! `first_reaction`, the arena offsets of its spans). The root and every
//! alignment are rkyv's own: [`ShardGather`] and [`TextGather`] archive as
//! `ArchivedShard` and `ArchivedTextShard`, serialising each array in the
//! order and alignment rkyv's derive does, so the bytes equal those of
//! serialising the `Shard` a re-pack through `ThreadData` would have
//! filled (tested against it, `tests` below and the merge tests).
//!
//! Nothing is decoded into native records, and nothing the size of a
//! shard is allocated: the bytes go from the sources' maps to the writer.

use std::ops::Range;

use rkyv::rancor::Fallible;
use rkyv::ser::{Writer, WriterExt};
use rkyv::string::{ArchivedString, StringResolver};
use rkyv::vec::{ArchivedVec, VecResolver};
use rkyv::{Archive, Place, Serialize};

use super::{
    ArchivedShard, ArchivedSpan, ArchivedTextShard, ArchivedThreadRecord, ArchivedThreadSpans,
    ThreadRecord, ThreadSpans,
};

/// Consecutive threads `threads` of one shard (its two archives, checked).
#[derive(Clone)]
pub struct Run<'a> {
    /// The source shard's numbers.
    pub numbers: &'a ArchivedShard,
    /// The source shard's texts.
    pub text: &'a ArchivedTextShard,
    /// The threads, by index in the source shard.
    pub threads: Range<usize>,
}

impl std::fmt::Debug for Run<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Run")
            .field("threads", &self.threads)
            .finish()
    }
}

impl Run<'_> {
    /// The run's reactions, by index in the source shard.
    pub fn reactions(&self) -> Range<usize> {
        let ts = &self.numbers.threads;
        let first = |i: usize| {
            ts.get(i).map_or(self.numbers.reactions.len(), |t| {
                t.first_reaction.to_native() as usize
            })
        };
        if self.threads.is_empty() {
            return 0..0;
        }
        first(self.threads.start)..first(self.threads.end)
    }

    /// The run's bytes of the text arena.
    pub fn arena(&self) -> Range<usize> {
        if self.threads.is_empty() {
            return 0..0;
        }
        thread_arena(self.text, self.threads.start).start
            ..thread_arena(self.text, self.threads.end - 1).end
    }
}

/// A cache whose checked shards threads are copied from (the read half's
/// caches implement it; the writer only needs the archives).
pub trait Archives: Send + Sync + std::fmt::Debug {
    /// Shard `i`'s numbers and texts, checked.
    fn archives(&self, i: usize) -> Option<(&ArchivedShard, &ArchivedTextShard)>;

    /// [`archives`](Self::archives), or why they cannot be had (the file
    /// and what is wrong with it).
    fn checked(&self, i: usize) -> Result<(&ArchivedShard, &ArchivedTextShard), String> {
        self.archives(i)
            .ok_or_else(|| format!("shard {i} could not be read"))
    }
}

/// A thread to copy from an [`Archives`]: where it is, and what the writer
/// counts of it (its estimated size, where shards are cut).
#[derive(Clone, Debug)]
pub struct Carried {
    /// Its shard in the cache copied from.
    pub shard: usize,
    /// Its index in that shard.
    pub index: usize,
    /// Its source id.
    pub source_id: u64,
    /// Its reactions, and how many of them are retweets.
    pub reactions: usize,
    /// See `reactions`.
    pub retweets: usize,
    /// `ThreadData::estimated_bytes` of its re-pack.
    pub bytes: usize,
}

/// Where thread `i` of a text shard starts in the arena and where the next
/// one starts (the arena's end for the last).
pub fn thread_arena(text: &ArchivedTextShard, i: usize) -> Range<usize> {
    let start = |i: usize| {
        text.threads
            .get(i)
            .map(|t| t.event.start.to_native() as usize)
    };
    start(i).unwrap_or(0)..start(i + 1).unwrap_or(text.arena.len())
}

/// Whether thread `i` of a checked shard is laid out as the writer lays it
/// out, so that its bytes can be copied: its reactions contiguous after the
/// previous thread's (checked at open already), its four texts back to
/// back from where the previous thread's region ended, then every reaction
/// text inside its own region. A cache any build of this library wrote
/// always is; one that passed the checks otherwise is re-packed the slow
/// way, which is what defines its bytes.
pub fn canonical(numbers: &ArchivedShard, text: &ArchivedTextShard, i: usize) -> bool {
    let (Some(t), Some(spans)) = (numbers.threads.get(i), text.threads.get(i)) else {
        return false;
    };
    let region = thread_arena(text, i);
    let expected_start = if i == 0 {
        0
    } else {
        thread_arena(text, i - 1).end
    };
    if region.start != expected_start || region.end < region.start {
        return false;
    }
    let mut at = region.start;
    for s in spans.all() {
        if s.is_none() || s.start.to_native() as usize != at {
            return false;
        }
        at += s.len.to_native() as usize;
    }
    if at > region.end {
        return false;
    }
    let first = t.first_reaction.to_native() as usize;
    let count = t.reaction_count.to_native() as usize;
    let Some(reactions) = text.reactions.get(first..first + count) else {
        return false;
    };
    reactions.iter().flatten().all(|s| {
        s.is_none() || {
            let (start, len) = (s.start.to_native() as usize, s.len.to_native() as usize);
            start >= at && start + len <= region.end
        }
    })
}

/// Bytes gathered before a write of patched records.
const PATCH_CHUNK: usize = 4096;

/// `T`'s archived values as bytes.
fn bytes_of<T: rkyv::Portable>(values: &[T]) -> &[u8] {
    // SAFETY: archived records are plain bytes (rkyv `Portable`: no
    // pointers, no interior mutability); reading them as bytes reads their
    // padding too, which rkyv's writer zeroed and which is copied as is.
    unsafe {
        std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
    }
}

/// Serialises a native value without out-of-line data as rkyv would an
/// element of a slice (padding zeroed), into `buf`.
fn push_resolved<T: Archive + Serialize<At>>(buf: &mut Vec<u8>, value: &T) {
    let resolver = match value.serialize(&mut At(0)) {
        Ok(r) => r,
        Err(never) => match never {},
    };
    let mut out = std::mem::MaybeUninit::<T::Archived>::zeroed();
    // SAFETY: `out` is zeroed (every byte initialised), aligned and sized
    // for one `T::Archived`; `resolve` fills it; its bytes are then read.
    unsafe {
        let place = Place::new_unchecked(0, out.as_mut_ptr());
        value.resolve(resolver, place);
        buf.extend_from_slice(place.as_slice());
    }
}

/// Writes, aligned for `T`, the concatenation of `pieces` (archived
/// `T`s) and returns where it starts: what serialising a `Vec<T>` of
/// those values writes.
fn write_slices<'s, A, S>(
    s: &mut S,
    pieces: impl Iterator<Item = &'s [A]>,
) -> Result<usize, S::Error>
where
    A: rkyv::Portable + 's,
    S: Fallible + Writer + ?Sized,
{
    let pos = s.align_for::<A>()?;
    for p in pieces {
        s.write(bytes_of(p))?;
    }
    Ok(pos)
}

/// A shard's numbers, from runs of source shards: archives as
/// [`ArchivedShard`].
#[derive(Debug)]
pub struct ShardGather<'a> {
    /// The runs, in order.
    pub runs: &'a [Run<'a>],
    /// Extended columns per reaction and per thread (0, 0 when not extended).
    pub columns: (usize, usize),
}

/// Positions of the gathered arrays: threads, reactions, features, inputs,
/// the reaction columns' table, the thread columns' table.
#[doc(hidden)]
pub struct GatherResolver([usize; 6]);

impl ShardGather<'_> {
    fn counts(&self) -> (usize, usize) {
        self.runs.iter().fold((0, 0), |(t, r), run| {
            (t + run.threads.len(), r + run.reactions().len())
        })
    }
}

impl Archive for ShardGather<'_> {
    type Archived = ArchivedShard;
    type Resolver = GatherResolver;

    fn resolve(&self, resolver: Self::Resolver, out: Place<Self::Archived>) {
        let (threads_n, reactions_n) = self.counts();
        let [t, r, f, i, rc, tc] = resolver.0.map(VecResolver::from_pos);
        rkyv::munge::munge!(let ArchivedShard { threads, reactions, features, inputs, reaction_columns, thread_columns } = out);
        ArchivedVec::resolve_from_len(threads_n, t, threads);
        ArchivedVec::resolve_from_len(reactions_n, r, reactions);
        ArchivedVec::resolve_from_len(reactions_n, f, features);
        ArchivedVec::resolve_from_len(reactions_n, i, inputs);
        ArchivedVec::resolve_from_len(self.columns.0, rc, reaction_columns);
        ArchivedVec::resolve_from_len(self.columns.1, tc, thread_columns);
    }
}

/// One archived column of `len` values at `pos` (the table entry of a
/// `Vec<Vec<f32>>`).
struct Column {
    len: usize,
}

impl Archive for Column {
    type Archived = ArchivedVec<rkyv::Archived<f32>>;
    type Resolver = VecResolver;
    fn resolve(&self, resolver: VecResolver, out: Place<Self::Archived>) {
        ArchivedVec::resolve_from_len(self.len, resolver, out);
    }
}

/// Writes `n` gathered columns (each a `Vec<f32>` of the runs' values)
/// and their table, as serialising a `Vec<Vec<f32>>` does.
fn write_columns<'r, S: Fallible + Writer + ?Sized>(
    s: &mut S,
    n: usize,
    column: impl Fn(usize) -> Vec<&'r [rkyv::Archived<f32>]>,
) -> Result<usize, S::Error> {
    let mut table = Vec::with_capacity(n);
    for c in 0..n {
        let pieces = column(c);
        let len = pieces.iter().map(|p| p.len()).sum();
        let pos = write_slices(s, pieces.into_iter())?;
        table.push((len, pos));
    }
    let pos = s.align_for::<ArchivedVec<rkyv::Archived<f32>>>()?;
    for (len, at) in table {
        // SAFETY: aligned just above for the table's entries, and `at` is
        // where this column's values were written.
        unsafe { s.resolve_aligned(&Column { len }, VecResolver::from_pos(at))? };
    }
    Ok(pos)
}

impl<S: Fallible + Writer + ?Sized> Serialize<S> for ShardGather<'_> {
    fn serialize(&self, s: &mut S) -> Result<GatherResolver, S::Error> {
        // Threads: each record with `first_reaction` renumbered.
        let pos_t = s.align_for::<ArchivedThreadRecord>()?;
        let mut buf = Vec::with_capacity(PATCH_CHUNK + 64);
        let mut next = 0u32;
        for run in self.runs {
            for t in &run.numbers.threads[run.threads.clone()] {
                let native = thread_record(t, next);
                next += native.reaction_count;
                push_resolved(&mut buf, &native);
                if buf.len() >= PATCH_CHUNK {
                    s.write(&buf)?;
                    buf.clear();
                }
            }
        }
        s.write(&buf)?;
        let pos_r = write_slices(
            s,
            self.runs
                .iter()
                .map(|r| &r.numbers.reactions.as_slice()[r.reactions()]),
        )?;
        let pos_f = write_slices(
            s,
            self.runs
                .iter()
                .map(|r| &r.numbers.features.as_slice()[r.reactions()]),
        )?;
        let pos_i = write_slices(
            s,
            self.runs
                .iter()
                .map(|r| &r.numbers.inputs.as_slice()[r.reactions()]),
        )?;
        let pos_rc = write_columns(s, self.columns.0, |c| {
            self.runs
                .iter()
                .map(|r| &r.numbers.reaction_columns[c].as_slice()[r.reactions()])
                .collect()
        })?;
        let pos_tc = write_columns(s, self.columns.1, |c| {
            self.runs
                .iter()
                .map(|r| &r.numbers.thread_columns[c].as_slice()[r.threads.clone()])
                .collect()
        })?;
        Ok(GatherResolver([pos_t, pos_r, pos_f, pos_i, pos_rc, pos_tc]))
    }
}

/// A thread's record as the writer makes it, its reactions starting at
/// `first_reaction` of the new shard.
fn thread_record(t: &ArchivedThreadRecord, first_reaction: u32) -> ThreadRecord {
    ThreadRecord {
        source_id: t.source_id.to_native(),
        source_created_at: t.source_created_at.to_native(),
        first_reaction,
        reaction_count: t.reaction_count.to_native(),
        label_code: t.label_code,
    }
}

/// A shard's texts, from runs of source shards (each thread
/// [`canonical`]): archives as [`ArchivedTextShard`].
pub struct TextGather<'a> {
    /// The runs, in order.
    pub runs: &'a [Run<'a>],
    /// A string of at least the arena's length (any bytes): only its
    /// length is used, to resolve the arena's out-of-line string.
    pub ruler: &'a str,
}

impl std::fmt::Debug for TextGather<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextGather")
            .field("runs", &self.runs)
            .finish()
    }
}

/// Positions of the gathered text arrays: the arena's resolver, thread
/// spans, reaction spans.
#[doc(hidden)]
pub struct TextGatherResolver(StringResolver, usize, usize);

impl TextGather<'_> {
    fn arena_len(&self) -> usize {
        self.runs.iter().map(|r| r.arena().len()).sum()
    }
    fn counts(&self) -> (usize, usize) {
        self.runs.iter().fold((0, 0), |(t, r), run| {
            (t + run.threads.len(), r + run.reactions().len())
        })
    }
    /// The arena when it is short enough to be stored inline (rkyv copies
    /// such a string into its root).
    fn short_arena(&self) -> String {
        self.runs
            .iter()
            .map(|r| &r.text.arena.as_str()[r.arena()])
            .collect()
    }
}

impl Archive for TextGather<'_> {
    type Archived = ArchivedTextShard;
    type Resolver = TextGatherResolver;

    fn resolve(&self, resolver: Self::Resolver, out: Place<Self::Archived>) {
        let (threads_n, reactions_n) = self.counts();
        let len = self.arena_len();
        rkyv::munge::munge!(let ArchivedTextShard { arena, threads, reactions } = out);
        if len <= rkyv::string::repr::INLINE_CAPACITY {
            ArchivedString::resolve_from_str(&self.short_arena(), resolver.0, arena);
        } else {
            // Out of line, only the length of the string is read.
            ArchivedString::resolve_from_str(&self.ruler[..len], resolver.0, arena);
        }
        ArchivedVec::resolve_from_len(threads_n, VecResolver::from_pos(resolver.1), threads);
        ArchivedVec::resolve_from_len(reactions_n, VecResolver::from_pos(resolver.2), reactions);
    }
}

/// A serializer that only knows its position: makes the arena's
/// `StringResolver` for bytes already written.
pub struct At(usize);

impl Fallible for At {
    type Error = rkyv::rancor::Panic;
}

impl rkyv::ser::Positional for At {
    fn pos(&self) -> usize {
        self.0
    }
}

impl<E> Writer<E> for At {
    fn write(&mut self, _: &[u8]) -> Result<(), E> {
        Ok(())
    }
}

impl<S: Fallible + Writer + ?Sized> Serialize<S> for TextGather<'_> {
    fn serialize(&self, s: &mut S) -> Result<TextGatherResolver, S::Error> {
        let len = self.arena_len();
        // The arena: a `String` writes its bytes where the writer is (no
        // alignment), unless short enough to be inline.
        let arena = if len <= rkyv::string::repr::INLINE_CAPACITY {
            ArchivedString::serialize_from_str(&self.short_arena(), &mut At(s.pos()))
        } else {
            let pos = s.pos();
            for r in self.runs {
                s.write(&r.text.arena.as_str().as_bytes()[r.arena()])?;
            }
            ArchivedString::serialize_from_str(&self.ruler[..len], &mut At(pos))
        };
        let arena = match arena {
            Ok(a) => a,
            Err(never) => match never {},
        };
        // Spans: shifted by where their thread's region moved.
        let mut buf = Vec::with_capacity(PATCH_CHUNK + 64);
        let pos_t = s.align_for::<ArchivedThreadSpans>()?;
        let mut out_at = 0usize;
        for r in self.runs {
            let shift = out_at as i64 - r.arena().start as i64;
            for t in &r.text.threads[r.threads.clone()] {
                let [e, l, u, x] = t.all().map(|sp| span(sp, shift));
                push_resolved(
                    &mut buf,
                    &ThreadSpans {
                        event: e,
                        label: l,
                        source_user_id: u,
                        source_text: x,
                    },
                );
                if buf.len() >= PATCH_CHUNK {
                    s.write(&buf)?;
                    buf.clear();
                }
            }
            out_at += r.arena().len();
        }
        s.write(&buf)?;
        buf.clear();
        let pos_r = s.align_for::<[ArchivedSpan; 3]>()?;
        let mut out_at = 0usize;
        for r in self.runs {
            let shift = out_at as i64 - r.arena().start as i64;
            for spans in &r.text.reactions[r.reactions()] {
                push_resolved(&mut buf, &spans.each_ref().map(|sp| span(sp, shift)));
                if buf.len() >= PATCH_CHUNK {
                    s.write(&buf)?;
                    buf.clear();
                }
            }
            out_at += r.arena().len();
        }
        s.write(&buf)?;
        Ok(TextGatherResolver(arena, pos_t, pos_r))
    }
}

/// A span moved by `shift` bytes (NONE stays NONE).
fn span(s: &ArchivedSpan, shift: i64) -> super::Span {
    if s.is_none() {
        super::Span::NONE
    } else {
        super::Span {
            start: (i64::from(s.start.to_native()) + shift) as u32,
            len: s.len.to_native(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{InputKeys, ReactionRecord, Shard, Span, TextShard};
    use crate::schema::{REACTION_EXTRA, THREAD_EXTRA};

    /// A small deterministic generator.
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self, n: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) % n.max(1)
        }
        fn text(&mut self, max: u64) -> String {
            (0..self.next(max + 1))
                .map(|_| ['a', 'é', '\n', ' ', '😀'][self.next(5) as usize])
                .collect()
        }
    }

    /// A shard of `threads` threads laid out as the writer lays it out.
    fn shard(g: &mut Lcg, threads: usize, extended: bool, first_id: u64) -> (Shard, TextShard) {
        let (mut s, mut t) = (Shard::default(), TextShard::default());
        if extended {
            s.reaction_columns = vec![Vec::new(); REACTION_EXTRA];
            s.thread_columns = vec![Vec::new(); THREAD_EXTRA];
        }
        for i in 0..threads {
            let n = g.next(4) as u32;
            s.threads.push(ThreadRecord {
                source_id: first_id + i as u64 * 3,
                source_created_at: g.next(1 << 40) as i64 - (1 << 39),
                first_reaction: s.reactions.len() as u32,
                reaction_count: n,
                label_code: g.next(3) as i8 - 1,
            });
            let a = &mut t.arena;
            let spans = ThreadSpans {
                event: Span::push(a, &g.text(3)),
                label: Span::push(a, &g.text(2)),
                source_user_id: Span::push(a, &g.text(2)),
                source_text: Span::push(a, &g.text(6)),
            };
            t.threads.push(spans);
            for _ in 0..n {
                s.reactions.push(ReactionRecord {
                    id: g.next(u64::MAX),
                    created_at: g.next(1 << 40) as i64,
                    user_key: g.next(u64::MAX),
                    parent: g.next(5) as u32,
                    kind: g.next(2) as u8,
                    parent_how: g.next(3) as u8,
                });
                s.features
                    .push(std::array::from_fn(|_| g.next(1000) as f32 / 7.0));
                s.inputs.push(InputKeys {
                    reply: [g.next(u64::MAX), g.next(9)],
                    description: [g.next(9), g.next(u64::MAX)],
                    reply_tokens: g.next(9) as u32,
                    description_tokens: g.next(9) as u32,
                });
                let span = |g: &mut Lcg, a: &mut String| {
                    if g.next(4) == 0 {
                        Span::NONE
                    } else {
                        Span::push(a, &g.text(5))
                    }
                };
                let r = [
                    span(g, &mut t.arena),
                    span(g, &mut t.arena),
                    span(g, &mut t.arena),
                ];
                t.reactions.push(r);
                for c in &mut s.reaction_columns {
                    c.push(g.next(100) as f32 - 50.5);
                }
            }
            for c in &mut s.thread_columns {
                c.push(g.next(100) as f32);
            }
        }
        (s, t)
    }

    /// What a re-pack writes for `runs` of native shards: the records
    /// copied, `first_reaction` renumbered, texts moved with their spans.
    fn repacked(runs: &[(&Shard, &TextShard, Range<usize>)], extended: bool) -> (Shard, TextShard) {
        let (mut s, mut t) = (Shard::default(), TextShard::default());
        if extended {
            s.reaction_columns = vec![Vec::new(); REACTION_EXTRA];
            s.thread_columns = vec![Vec::new(); THREAD_EXTRA];
        }
        for (ns, nt, range) in runs {
            for i in range.clone() {
                let mut rec = ns.threads[i];
                let r =
                    rec.first_reaction as usize..(rec.first_reaction + rec.reaction_count) as usize;
                rec.first_reaction = s.reactions.len() as u32;
                s.threads.push(rec);
                s.reactions.extend_from_slice(&ns.reactions[r.clone()]);
                s.features.extend_from_slice(&ns.features[r.clone()]);
                s.inputs.extend_from_slice(&ns.inputs[r.clone()]);
                for (c, src) in s.reaction_columns.iter_mut().zip(&ns.reaction_columns) {
                    c.extend_from_slice(&src[r.clone()]);
                }
                for (c, src) in s.thread_columns.iter_mut().zip(&ns.thread_columns) {
                    c.push(src[i]);
                }
                let start = nt.threads[i].event.start;
                let end = nt
                    .threads
                    .get(i + 1)
                    .map_or(nt.arena.len(), |x| x.event.start as usize);
                let shift = t.arena.len() as i64 - i64::from(start);
                let mv = |sp: Span| {
                    if sp == Span::NONE {
                        sp
                    } else {
                        Span {
                            start: (i64::from(sp.start) + shift) as u32,
                            len: sp.len,
                        }
                    }
                };
                t.arena.push_str(&nt.arena[start as usize..end]);
                let ts = nt.threads[i];
                t.threads.push(ThreadSpans {
                    event: mv(ts.event),
                    label: mv(ts.label),
                    source_user_id: mv(ts.source_user_id),
                    source_text: mv(ts.source_text),
                });
                t.reactions
                    .extend(nt.reactions[r].iter().map(|x| x.map(mv)));
            }
        }
        (s, t)
    }

    fn bytes<T>(v: &T) -> rkyv::util::AlignedVec
    where
        T: for<'a> Serialize<
            rkyv::api::high::HighSerializer<
                rkyv::util::AlignedVec,
                rkyv::ser::allocator::ArenaHandle<'a>,
                rkyv::rancor::Error,
            >,
        >,
    {
        rkyv::to_bytes::<rkyv::rancor::Error>(v).unwrap()
    }

    /// Gathered runs serialise to the bytes of the re-packed shard, for
    /// runs of every shape: whole shards, parts, threads without reactions
    /// or texts, arenas short enough to be inline, with and without the
    /// extended columns.
    #[test]
    fn gathered_runs_are_the_repacked_bytes() {
        let mut g = Lcg(7);
        for round in 0..300 {
            let extended = round % 2 == 0;
            let (a, b) = (g.next(6) as usize + 1, g.next(6) as usize + 1);
            let (sa, ta) = shard(&mut g, a, extended, 10);
            let (sb, tb) = shard(&mut g, b, extended, 1000);
            let (na, xa) = (bytes(&sa), bytes(&ta));
            let (nb, xb) = (bytes(&sb), bytes(&tb));
            let an = rkyv::access::<ArchivedShard, rkyv::rancor::Error>(&na).unwrap();
            let at = rkyv::access::<ArchivedTextShard, rkyv::rancor::Error>(&xa).unwrap();
            let bn = rkyv::access::<ArchivedShard, rkyv::rancor::Error>(&nb).unwrap();
            let bt = rkyv::access::<ArchivedTextShard, rkyv::rancor::Error>(&xb).unwrap();
            for i in 0..a {
                assert!(canonical(an, at, i), "round {round} thread {i}");
            }
            let ra = g.next(a as u64) as usize..a;
            let rb = 0..g.next(b as u64 + 1) as usize;
            let runs = [
                Run {
                    numbers: an,
                    text: at,
                    threads: ra.clone(),
                },
                Run {
                    numbers: bn,
                    text: bt,
                    threads: rb.clone(),
                },
            ];
            let (ws, wt) = repacked(&[(&sa, &ta, ra), (&sb, &tb, rb)], extended);
            let columns = if extended {
                (REACTION_EXTRA, THREAD_EXTRA)
            } else {
                (0, 0)
            };
            let ruler = "\0".repeat(wt.arena.len());
            assert_eq!(
                bytes(&ShardGather {
                    runs: &runs,
                    columns
                })
                .as_slice(),
                bytes(&ws).as_slice(),
                "numbers, round {round}"
            );
            assert_eq!(
                bytes(&TextGather {
                    runs: &runs,
                    ruler: &ruler
                })
                .as_slice(),
                bytes(&wt).as_slice(),
                "texts, round {round} (arena {} bytes)",
                wt.arena.len()
            );
        }
    }

    /// A thread whose texts are not where the writer puts them is not
    /// copied (a merge re-packs it instead).
    #[test]
    fn texts_laid_out_otherwise_are_not_canonical() {
        let mut g = Lcg(3);
        let (s, mut t) = shard(&mut g, 3, false, 1);
        t.threads[1].label.start += 1;
        let (n, x) = (bytes(&s), bytes(&t));
        let an = rkyv::access::<ArchivedShard, rkyv::rancor::Error>(&n).unwrap();
        let at = rkyv::access::<ArchivedTextShard, rkyv::rancor::Error>(&x).unwrap();
        assert!(canonical(an, at, 0));
        assert!(!canonical(an, at, 1));
    }
}
