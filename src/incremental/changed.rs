//! `--changed FILE`: the caller's list of what changed since the previous
//! build (a crawler knows what it wrote), instead of a walk and a `stat` of
//! every file. The list is trusted: threads it does not name are taken as
//! they were, without looking at their files. What the list names is looked
//! at: a thread folder (or a file in one) is discovered again (gone: the
//! thread is dropped; new: it is added), a folder above threads that is
//! gone drops them. Anything else a walk could see differently (a new
//! folder above threads, a path in no thread, there or not, discovery's own
//! report lines, a duplicate source id) means the corpus is walked as
//! without a list, and the summary says why: never a cache a full build
//! would not make from the same files.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use super::Fingerprints;
use crate::error::BuildError;
use crate::ingest::Progress;
use crate::ingest::discover::{ThreadDir, discover, is_thread_name, thread_dir};
use crate::ingest::fingerprint::{Fp, How, fingerprints};
use crate::ingest::layout::pheme::Pheme;
use crate::ingest::layout::{LAYOUTS, Layout};
use crate::read::Cache;

/// The paths a change list names, relative to the corpus root and
/// `/`-separated, or the error naming the list and the line.
pub(super) fn read_list(
    corpus: &Path,
    file: &Path,
    progress: &dyn Progress,
) -> Result<Vec<String>, BuildError> {
    let bad = |reason: String| BuildError::BadChangeList {
        file: file.to_path_buf(),
        reason,
    };
    let stdin = file == Path::new("-");
    if stdin && stdin_is_null() {
        // Rust reopens a closed standard input as /dev/null: a job started
        // without one would read "nothing changed" and keep every thread.
        return Err(bad(
            "standard input is /dev/null or was closed; for a list of no changes, give an \
             empty file"
                .into(),
        ));
    }
    let bytes = read_waiting(file, progress)?.map_err(|e| {
        bad(if stdin {
            format!("cannot read standard input: {e}")
        } else {
            format!("cannot read it: {e}")
        })
    })?;
    let root = PathBuf::from(super::canonical(corpus));
    let mut rels = Vec::new();
    for (n, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            continue;
        }
        let path = Path::new(OsStr::from_bytes(line));
        let at = |reason: String| bad(format!("line {}: {} {reason}", n + 1, path.display()));
        let outside = || at(format!("is outside the corpus root {}", corpus.display()));
        let inside = match within(corpus, &root, path) {
            Some(inside) => inside,
            None => return Err(outside()),
        };
        // `..` is taken lexically, as the walk would reach the path, unless
        // it steps back out of a symbolic link (where the file system goes
        // elsewhere: the walk does not follow links, so neither does this).
        let mut names: Vec<&str> = Vec::new();
        for c in inside.components() {
            match c {
                Component::Normal(name) => names.push(
                    name.to_str()
                        .ok_or_else(|| at("is not UTF-8".to_string()))?,
                ),
                Component::CurDir => {}
                Component::ParentDir => {
                    let here = corpus.join(names.join("/"));
                    if names.is_empty() {
                        return Err(outside());
                    }
                    if here.is_symlink() {
                        return Err(at(format!(
                            "steps back (..) out of the symbolic link {}; name the path \
                             without it",
                            here.display()
                        )));
                    }
                    names.pop();
                }
                _ => return Err(outside()),
            }
        }
        rels.push(names.join("/"));
    }
    Ok(rels)
}

/// `path` relative to the corpus root (`corpus` as given, or `root`, its
/// canonical form): a relative path as it is; an absolute one under either
/// spelling, or under another spelling of the root (a link to it, or the
/// folder a link given as the corpus points to): the ancestor that resolves
/// to the root. Only that ancestor is resolved, never a link below the
/// root, which the walk would not follow. `None`: outside.
fn within<'a>(corpus: &Path, root: &Path, path: &'a Path) -> Option<&'a Path> {
    if !path.is_absolute() {
        return Some(path);
    }
    if let Ok(rel) = path
        .strip_prefix(corpus)
        .or_else(|_| path.strip_prefix(root))
    {
        return Some(rel);
    }
    // The shortest such ancestor: a link inside the corpus back to its
    // root is a path below the root, as the walk sees it.
    let ancestors: Vec<&Path> = path.ancestors().collect();
    ancestors
        .into_iter()
        .rev()
        .find(|a| a.canonicalize().is_ok_and(|real| real == root))
        .and_then(|a| path.strip_prefix(a).ok())
}

/// Whether standard input is the null device (or was closed at start,
/// which the standard library turns into the null device).
fn stdin_is_null() -> bool {
    use rustix::fs::{FileType, fstat, stat};
    match (fstat(std::io::stdin()), stat("/dev/null")) {
        (Ok(fd), Ok(null)) => {
            FileType::from_raw_mode(fd.st_mode) == FileType::CharacterDevice
                && fd.st_rdev == null.st_rdev
        }
        _ => false,
    }
}

/// The bytes of the list (`-`: standard input), read on a thread of its
/// own while this one watches `progress` for a cancel: a FIFO whose writer
/// never came, or a pipe a hung crawler never closes, must not make the
/// build deaf to Ctrl-C and SIGTERM (the reader is left blocked; the
/// process is ending or has moved on).
fn read_waiting(
    file: &Path,
    progress: &dyn Progress,
) -> Result<std::io::Result<Vec<u8>>, BuildError> {
    use std::sync::mpsc::{RecvTimeoutError, channel};
    let read = |file: &Path| {
        if file == Path::new("-") {
            let mut b = Vec::new();
            std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut b).map(|_| b)
        } else {
            std::fs::read(file)
        }
    };
    let (tx, rx) = channel();
    let owned = file.to_path_buf();
    let spawned = std::thread::Builder::new()
        .name("socialctx-change-list".into())
        .spawn(move || {
            let _ = tx.send(read(&owned));
        });
    if spawned.is_err() {
        return Ok(read(file));
    }
    loop {
        match rx.recv_timeout(std::time::Duration::from_millis(50)) {
            Ok(bytes) => return Ok(bytes),
            Err(RecvTimeoutError::Timeout) if progress.cancelled() => {
                return Err(BuildError::Cancelled);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                return Ok(Err(std::io::Error::other("its reader stopped")));
            }
        }
    }
}

/// The thread list and fingerprints of the corpus as the change list
/// `rels` says it is now: the old threads not named, with their old
/// fingerprints, and the named ones discovered and fingerprinted again.
/// `Err` says why the corpus must be walked instead.
pub(super) fn supply(
    corpus: &Path,
    rels: &[String],
    old: &Fingerprints,
    cache: &Cache,
    workers: usize,
    how: How,
) -> Result<(Vec<ThreadDir>, Vec<Fp>), String> {
    // Discovery's lines (unreadable folders, duplicates) are given again by
    // each walk, and only a walk knows whether they still hold.
    let own: usize = old.bad.values().map(Vec::len).sum();
    if cache.report().len() != own {
        return Err("the old cache's report has discovery's lines".into());
    }
    let known = &old.threads;
    let mut again: BTreeSet<String> = BTreeSet::new();
    for rel in rels {
        if rel.is_empty() {
            return Err("the change list names the corpus root".into());
        }
        // A path in a known thread: that thread.
        let mut prefix = rel.as_str();
        let mut found = false;
        loop {
            if known.contains_key(prefix) {
                again.insert(prefix.to_owned());
                found = true;
                break;
            }
            match prefix.rfind('/') {
                Some(i) => prefix = &prefix[..i],
                None => break,
            }
        }
        if found {
            continue;
        }
        // Hidden folders are never walked.
        if rel.split('/').any(|c| c.starts_with('.')) {
            continue;
        }
        let path = corpus.join(rel);
        let exists = std::fs::symlink_metadata(&path).is_ok();
        // A folder above known threads: gone, they go; there, a walk.
        let below = format!("{rel}/");
        let under: Vec<&str> = known.starting_with(&below).collect();
        if !under.is_empty() {
            if exists {
                return Err(format!(
                    "the change list names {rel}, a folder above threads"
                ));
            }
            again.extend(under.into_iter().map(str::to_owned));
            continue;
        }
        // A new thread: the outermost all-digit folder on the path.
        let mut end = 0;
        let mut thread = None;
        for c in rel.split('/') {
            end += c.len();
            if is_thread_name(OsStr::new(c)) {
                thread = Some(&rel[..end]);
                break;
            }
            end += 1;
        }
        match thread {
            Some(t) if std::fs::symlink_metadata(corpus.join(t)).is_ok() => {
                again.insert(t.to_owned());
            }
            // Made and removed between two builds, or a path relative to
            // another folder than the corpus root (a crawler's own): only
            // a walk can tell, and ignoring it kept an edited thread as it
            // was, silently.
            _ if !exists => {
                return Err(format!(
                    "the change list names {rel}, which does not exist under the corpus \
                     root and is in no thread (paths are relative to CORPUS_DIR)"
                ));
            }
            _ => return Err(format!("the change list names {rel}, in no thread")),
        }
    }
    let mut list = Vec::with_capacity(known.len() + again.len());
    let mut fps: Vec<Fp> = Vec::with_capacity(known.len() + again.len());
    for (rel, &hash) in known.iter().filter(|(r, _)| !again.contains(*r)) {
        list.push(unchanged(corpus, rel, old)?);
        fps.push(Fp {
            hash,
            // Trusted as unchanged: never racy, nothing to wait for.
            newest: i128::MIN,
            subsec: false,
            dev: None,
        });
    }
    let first_new = list.len();
    for rel in &again {
        if let Some(td) = rediscover(corpus, rel)? {
            list.push(td);
        }
    }
    fps.extend(fingerprints(&list[first_new..], workers, how));
    // Source-id order, as discovery gives it; a duplicate id is for a walk
    // to report.
    let mut order: Vec<usize> = (0..list.len()).collect();
    order.sort_by_key(|&i| list[i].source_id);
    if order
        .windows(2)
        .any(|w| list[w[0]].source_id == list[w[1]].source_id)
    {
        return Err("two threads have one source id".into());
    }
    permute(&mut list, &mut fps, order);
    Ok((list, fps))
}

/// Puts `a[order[k]]` (and `b[order[k]]`) at `k`, in place, by following
/// the permutation's cycles: the list and fingerprints of every thread are
/// not copied into new vectors (at 256k threads that copy was ~90 MB of
/// the build's peak).
fn permute<A, B>(a: &mut [A], b: &mut [B], mut order: Vec<usize>) {
    for i in 0..order.len() {
        let mut j = i;
        loop {
            let k = std::mem::replace(&mut order[j], j);
            if k == i || k == j {
                break;
            }
            a.swap(j, k);
            b.swap(j, k);
            j = k;
        }
    }
}

/// The [`ThreadDir`] of an unchanged thread, from what the fingerprints
/// kept of its discovery.
fn unchanged(corpus: &Path, rel: &str, old: &Fingerprints) -> Result<ThreadDir, String> {
    let entries = *old
        .dirs
        .get(rel)
        .ok_or_else(|| format!("the fingerprints do not say what {rel} holds"))?;
    let name = old.layouts.get(rel).map_or(Pheme.name(), String::as_str);
    let layout = LAYOUTS
        .iter()
        .position(|l| l.name() == name)
        .ok_or_else(|| format!("{rel} is of layout {name}, which this build does not know"))?;
    thread_dir(corpus, &corpus.join(rel), entries, layout as u8)
        .map_err(|b| format!("{}: {}", b.path, b.reason))
}

/// A named thread folder discovered again: `None` if it is gone or no
/// thread now; `Err` where only a walk can say what it is.
fn rediscover(corpus: &Path, rel: &str) -> Result<Option<ThreadDir>, String> {
    let path: PathBuf = corpus.join(rel);
    // Every folder on the way must be one (a walk follows no symlink).
    let mut at = corpus.to_path_buf();
    for c in rel.split('/') {
        at.push(c);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            _ => return Err(format!("{rel} is not a folder a walk would enter")),
        }
    }
    let found = discover(&path, 1).map_err(|e| e.to_string())?;
    if !found.bad.is_empty() {
        return Err(format!(
            "discovery reports {} in {rel}",
            found.bad[0].reason
        ));
    }
    match found.threads.as_slice() {
        [] => Ok(None),
        [td] if td.rel == "." => Ok(Some(ThreadDir {
            rel: rel.to_owned(),
            ..td.clone()
        })),
        _ => Err(format!("{rel} holds other threads")),
    }
}

/// Per-thread what discovery found (`ThreadDir::entries`) and its layout
/// by name where it is not PHEME's, as the fingerprints keep them.
pub(super) fn layout_name(td: &ThreadDir) -> Option<&'static str> {
    let name = td.layout().name();
    (name != Pheme.name()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::permute;

    #[test]
    fn permute_puts_each_element_where_the_order_says() {
        // Every permutation of 5 elements (and the empty one).
        let mut orders: Vec<Vec<usize>> = vec![vec![]];
        let mut all = vec![vec![0usize]];
        for n in 2..=5 {
            all = all
                .into_iter()
                .flat_map(|p| {
                    (0..n).map(move |at| {
                        let mut q = p.clone();
                        q.insert(at, n - 1);
                        q
                    })
                })
                .collect();
        }
        orders.extend(all);
        for order in orders {
            let want: Vec<char> = order.iter().map(|&i| (b'a' + i as u8) as char).collect();
            let mut a: Vec<char> = (0..order.len()).map(|i| (b'a' + i as u8) as char).collect();
            let mut b: Vec<usize> = (0..order.len()).collect();
            permute(&mut a, &mut b, order.clone());
            assert_eq!(a, want, "{order:?}");
            assert_eq!(b, order);
        }
    }
}
