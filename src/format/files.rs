//! The names of everything a cache owns on disk, in one place: the files
//! inside the cache directory and, beside it, the lock file and the
//! temporary directories of builds in progress.
//!
//! ```text
//! PARENT/
//!   NAME/                       the published cache
//!     manifest.json
//!     report.jsonl
//!     shard-00000.rkyv  text-00000.rkyv  ...
//!     derived/                  files computed from the cache (kept by rebuilds)
//!   .NAME.lock                  held by the build writing NAME; stays beside a
//!                               cache (a killed build could not remove it; an
//!                               unlocked one is free), removed by a build that
//!                               leaves no cache
//!   .NAME.tmp-<pid>/            a build in progress (or a dead build's leftovers,
//!                               which the next build retires: the user's entries
//!                               moved back into NAME, never deleted)
//!   .NAME.tmp-old-<pid>/        the previous cache, parked during a two-rename publish
//! ```

use std::io;
use std::path::{Path, PathBuf};

/// Manifest file name inside a cache directory.
pub const MANIFEST_FILE: &str = "manifest.json";

/// Report file name inside a cache directory.
pub const REPORT_FILE: &str = "report.jsonl";

/// Directory inside a cache for files computed from it (statistics,
/// embeddings, incremental fingerprints): kept by every rebuild, except the
/// fingerprints files of superseded contents, which a publish removes.
pub const DERIVED_DIR: &str = "derived";

/// File name, inside [`DERIVED_DIR`], of the incremental-build fingerprints
/// of the cache content `content_id` (16 hex digits).
pub fn fingerprints_file(content_id: &str) -> String {
    format!("fingerprints-{content_id}.json")
}

/// The content id in a name made by [`fingerprints_file`], if `name` is one
/// (only exactly that shape: a user's `fingerprints-notes.json` is not).
pub fn fingerprints_id(name: &str) -> Option<&str> {
    let id = name.strip_prefix("fingerprints-")?.strip_suffix(".json")?;
    (id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit())).then_some(id)
}

/// File name of shard `n`'s numbers.
pub fn shard_file(n: usize) -> String {
    format!("shard-{n:05}.rkyv")
}

/// File name of shard `n`'s texts.
pub fn text_file(n: usize) -> String {
    format!("text-{n:05}.rkyv")
}

/// Whether `name` is a plain file name (no directory part), as every file
/// named in a manifest must be.
pub fn plain_name(name: &str) -> bool {
    Path::new(name).file_name().is_some_and(|n| n == name)
}

/// Where the files of the cache at one target path live.
#[derive(Clone, Debug)]
pub struct CacheFiles {
    target: PathBuf,
    parent: PathBuf,
    name: String,
}

impl CacheFiles {
    /// The files of a cache at `target`; fails when `target` has no usable
    /// final component (`/`, `..`).
    pub fn new(target: &Path) -> io::Result<CacheFiles> {
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "not a usable cache directory name",
                )
            })?;
        let parent = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        Ok(CacheFiles {
            target: target.to_path_buf(),
            parent,
            name,
        })
    }

    /// The cache directory itself.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// The directory that holds the cache, its lock and temporary directories.
    pub fn parent(&self) -> &Path {
        &self.parent
    }

    /// The lock file that guards builds of this cache.
    pub fn lock(&self) -> PathBuf {
        self.parent.join(format!(".{}.lock", self.name))
    }

    /// Prefix of every temporary directory of this cache.
    fn temp_prefix(&self) -> String {
        format!(".{}.tmp-", self.name)
    }

    /// The temporary directory a build by process `pid` writes.
    pub fn temp_dir(&self, pid: u32) -> PathBuf {
        self.parent.join(format!("{}{pid}", self.temp_prefix()))
    }

    /// Where a two-rename publish by process `pid` parks the old cache.
    pub fn parked_dir(&self, pid: u32) -> PathBuf {
        self.parent.join(format!("{}old-{pid}", self.temp_prefix()))
    }

    /// Whether a file name in [`parent`](Self::parent) is one of this
    /// cache's temporary directories (parked ones included).
    pub fn is_temp_name(&self, name: &str) -> bool {
        name.strip_prefix(&self.temp_prefix()).is_some_and(|rest| {
            let pid = rest.strip_prefix("old-").unwrap_or(rest);
            !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())
        })
    }

    /// Whether a file name in [`parent`](Self::parent) is a parked old cache.
    pub fn is_parked_name(&self, name: &str) -> bool {
        self.is_temp_name(name) && name[self.temp_prefix().len()..].starts_with("old-")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let l = CacheFiles::new(Path::new("out/cache")).unwrap();
        assert_eq!(l.lock(), Path::new("out/.cache.lock"));
        assert_eq!(l.temp_dir(12), Path::new("out/.cache.tmp-12"));
        assert_eq!(l.parked_dir(12), Path::new("out/.cache.tmp-old-12"));
        assert!(l.is_temp_name(".cache.tmp-12") && l.is_temp_name(".cache.tmp-old-3"));
        assert!(l.is_parked_name(".cache.tmp-old-3") && !l.is_parked_name(".cache.tmp-3"));
        // Only our own names: a user's file that merely starts alike is kept.
        assert!(!l.is_temp_name(".cache.tmp-notes") && !l.is_temp_name(".cache.tmp-"));
        assert!(!l.is_temp_name(".cache2.tmp-1"));
        assert_eq!(
            CacheFiles::new(Path::new("c")).unwrap().lock(),
            Path::new("./.c.lock")
        );
        assert!(CacheFiles::new(Path::new("/")).is_err());
        assert_eq!(shard_file(3), "shard-00003.rkyv");
        assert_eq!(text_file(3), "text-00003.rkyv");
        assert!(plain_name("a.rkyv") && !plain_name("../a") && !plain_name("d/a"));
        let f = fingerprints_file("0123456789abcdef");
        assert_eq!(fingerprints_id(&f), Some("0123456789abcdef"));
        assert_eq!(fingerprints_id("fingerprints-notes.json"), None);
        assert_eq!(
            fingerprints_id("fingerprints-0123456789abcdef.json.tmp-1"),
            None
        );
    }
}
