//! One conversation thread: its event, source tweet, replies and retweets,
//! drawn from the thread's own streams and written to its folder.

use std::fs;
use std::path::{Path, PathBuf};

use crate::compose::{
    Earlier, ReplyCtx, news_user, pick_lang, random_user, reply, retweet, source_tweet,
};
use crate::data::{EVENTS, GLOBAL_NEWS, Vocab};
use crate::json::JsonWriter;
use crate::model::{Lang, Tweet, UserShape};
use crate::render::write_tweet;
use crate::rng::Rng;
use crate::{Error, PHEME_THREADS, Stats};

/// Everything a thread generator needs.
pub(crate) struct Ctx {
    pub(crate) out: PathBuf,
    /// Number of threads in the corpus.
    pub(crate) n: u64,
    pub(crate) seed: u64,
    pub(crate) retweets: f64,
    pub(crate) v: Vocab,
}

/// Replies per thread with any: a discretized log-normal (median 9.6, mean about 17).
const REPLIES_MEDIAN: f64 = 9.6;
const REPLIES_SIGMA: f64 = 1.1;
/// Share of threads without a reactions folder (PHEME: 677 of 6,425).
const NO_REACTIONS: f64 = 0.105;

fn event_of(j: u64) -> (usize, bool) {
    let mut start = 0;
    for (i, e) in EVENTS.iter().enumerate() {
        if j < start + e.threads {
            return (i, j - start < e.rumours);
        }
        start += e.threads;
    }
    (EVENTS.len() - 1, false)
}

pub(crate) fn make_dir(path: &Path) -> Result<(), Error> {
    fs::create_dir_all(path).map_err(|e| Error::create_dir(path, e))
}

/// Serializes `t` into `dir/<id>.json`, with a final newline half of the time.
fn emit(
    j: &mut JsonWriter,
    dir: &Path,
    t: &Tweet,
    newline: bool,
    stats: &mut Stats,
) -> Result<(), Error> {
    j.clear();
    write_tweet(j, t);
    if newline {
        j.newline();
    }
    let path = dir.join(format!("{}.json", t.id));
    fs::write(&path, j.as_str()).map_err(|e| Error::write(&path, e))?;
    stats.files += 1;
    stats.bytes += j.as_str().len() as u64;
    Ok(())
}

/// Strictly increasing times after `after`, in milliseconds, avoiding `taken`.
fn timeline(mut ms: Vec<i64>, after: i64, taken: &[i64]) -> Vec<i64> {
    ms.sort_unstable();
    let mut last = after;
    for t in &mut ms {
        *t = (*t).max(last + 1);
        while taken.binary_search(t).is_ok() {
            *t += 1;
        }
        last = *t;
    }
    ms
}

/// Generates thread `idx` of the corpus under `ctx.out`, with `j` as scratch.
pub(crate) fn gen_thread(ctx: &Ctx, idx: u64, j: &mut JsonWriter) -> Result<Stats, Error> {
    let v = &ctx.v;
    let mut rng = Rng::derive(ctx.seed, "thread", idx);
    let (ev_i, rumour) = event_of(idx * PHEME_THREADS / ctx.n);
    let ev = &EVENTS[ev_i];
    // A bijection of the thread index: unique low id bits for every thread.
    let low = idx.wrapping_mul(0x9E37_79B1) & 0x3F_FFFF;
    let shape = match rng.below(100) {
        0..=46 => UserShape::WithLocation,
        47..=96 => UserShape::Plain,
        _ => UserShape::Old,
    };
    let src_folder = if rng.chance(0.8) {
        "source-tweets"
    } else {
        "source-tweet"
    };
    let x = rng.unit();
    let src_secs = ev.start + (ev.window as f64 * x * x.sqrt()) as i64;
    let src_ms = src_secs * 1000 + rng.between(0, 999);
    let lang = pick_lang(&mut rng, ev);

    let src_user = if rng.chance(0.65) {
        let entry = if rng.chance(0.5) {
            rng.pick(ev.news)
        } else {
            rng.pick(GLOBAL_NEWS)
        };
        let news_lang = if ev.de > 0.5 && ev.news.contains(entry) {
            Lang::De
        } else {
            Lang::En
        };
        news_user(&mut rng, v, ctx.seed, entry, news_lang, src_secs, shape)
    } else {
        let mut u = random_user(&mut rng, v, src_secs, lang, shape);
        u.followers = u.followers * rng.between(5, 50) as u64 + 100;
        u
    };
    let source = source_tweet(&mut rng, v, ev_i, lang, src_user, src_ms, low);

    let replies = if rng.chance(NO_REACTIONS) {
        0
    } else {
        (rng.lognormal(REPLIES_MEDIAN, REPLIES_SIGMA).round() as u64).clamp(1, 5000)
    };
    let delays = (0..replies).map(|_| {
        src_ms
            + rng
                .lognormal(19.6 * 60_000.0, 2.2)
                .clamp(3_000.0, 15.0 * 86_400_000.0) as i64
    });
    let reply_ms = timeline(delays.collect(), src_ms, &[]);

    let label = if rumour { "rumours" } else { "non-rumours" };
    let dir = ctx
        .out
        .join(format!("{}-all-rnr-threads", ev.name))
        .join(label)
        .join(source.id.to_string());
    let mut stats = Stats {
        threads: 1,
        replies,
        ..Stats::ZERO
    };
    let sdir = dir.join(src_folder);
    make_dir(&sdir)?;
    emit(j, &sdir, &source, rng.chance(0.5), &mut stats)?;

    if replies > 0 {
        let rdir = dir.join("reactions");
        make_dir(&rdir)?;
        let c = ReplyCtx {
            v,
            ev: ev_i,
            source: &source,
        };
        let mut earlier: Vec<Earlier> = Vec::new();
        for &ms in &reply_ms {
            let secs = ms / 1000;
            let user = if rng.chance(0.03) {
                let mut u = source.user.clone();
                u.statuses += rng.below(20);
                u
            } else if !earlier.is_empty() && rng.chance(0.12) {
                let mut u = earlier[rng.below(earlier.len() as u64) as usize]
                    .user
                    .clone();
                u.statuses += rng.below(5);
                u
            } else {
                let ulang = if rng.chance(0.5) {
                    lang
                } else {
                    pick_lang(&mut rng, ev)
                };
                random_user(&mut rng, v, secs, ulang, shape)
            };
            let parent = if !earlier.is_empty() && rng.chance(0.25) {
                Some(&earlier[rng.below(earlier.len() as u64) as usize])
            } else {
                None
            };
            let t = reply(&mut rng, &c, parent, user, ms, low);
            emit(j, &rdir, &t, rng.chance(0.5), &mut stats)?;
            earlier.push(Earlier {
                id: t.id,
                user: t.user,
            });
        }
    }

    // Retweets come from their own stream, so that the replies are the same
    // whatever --retweets is.
    if ctx.retweets > 0.0 && replies > 0 {
        let mut rrng = Rng::derive(ctx.seed, "retweets", idx);
        let n = (ctx.retweets * replies as f64 + rrng.unit()) as u64;
        let delays = (0..n).map(|_| {
            src_ms
                + rrng
                    .lognormal(8.0 * 60_000.0, 1.8)
                    .clamp(1_000.0, 10.0 * 86_400_000.0) as i64
        });
        let rt_ms = timeline(delays.collect(), src_ms, &reply_ms);
        if n > 0 {
            let tdir = dir.join("retweets");
            make_dir(&tdir)?;
            for &ms in &rt_ms {
                let ulang = if rrng.chance(0.5) {
                    lang
                } else {
                    pick_lang(&mut rrng, ev)
                };
                let user = random_user(&mut rrng, v, ms / 1000, ulang, shape);
                let t = retweet(&mut rrng, v, &source, user, ms, low);
                emit(j, &tdir, &t, rrng.chance(0.5), &mut stats)?;
            }
        }
        stats.retweets = n;
    }
    Ok(stats)
}
