//! Validation: the only code that turns file bytes into archived shards.
//!
//! A file passes when its size matches the manifest, its [footer] is ours
//! and of this version, its xxh3 matches both the footer and the manifest,
//! rkyv's bytecheck accepts the archive, and the invariants the views rely on
//! hold (ids in order, reaction ranges in bounds, one feature row per
//! reaction, texts aligned with numbers, spans on character boundaries).
//! What passes is wrapped in [`CheckedNumbers`] or [`CheckedText`], whose
//! constructors are the checks: the unchecked rkyv access in their getters is
//! reachable only through a value that was validated.
//!
//! [footer]: crate::format::footer

use std::fs::File;
use std::path::Path;

use memmap2::Mmap;
use xxhash_rust::xxh3::xxh3_64;
use zerocopy::{FromBytes, IntoBytes};

use crate::error::OpenError;
use crate::format::files::{MANIFEST_FILE, plain_name};
use crate::format::footer::{self, Footer, FooterError};
use crate::format::manifest::{FileInfo, Manifest, ShardInfo, hex64};
use crate::format::report::{BadInput, read_jsonl};
use crate::format::{
    ArchivedShard, ArchivedSpan, ArchivedTextShard, FORMAT_NAME, FORMAT_VERSION, PARENT_SOURCE,
};
use crate::schema::{
    FEATURE_NAMES, Feature, FeatureVec, Label, ParentHow, REACTION_COLUMNS, ReactionKind,
    THREAD_COLUMNS,
};

type Result<T, E = OpenError> = std::result::Result<T, E>;

#[cfg(not(target_endian = "little"))]
compile_error!("socialctx caches store little-endian f32; big-endian targets are not supported");

/// A checked, memory-mapped archive file.
pub(super) struct Mapped {
    map: Mmap,
    archive_len: usize,
}

impl Mapped {
    fn bytes(&self) -> &[u8] {
        &self.map[..self.archive_len]
    }
}

/// A shard's numbers file that passed every check.
pub(super) struct CheckedNumbers(Mapped);

impl CheckedNumbers {
    /// Maps and fully checks the numbers file at `path`; `columns` is the
    /// manifest's number of extra (reaction, thread) columns.
    pub(super) fn open(
        file: &File,
        path: &Path,
        info: &ShardInfo,
        columns: (usize, usize),
    ) -> Result<Self> {
        map_numbers(file, path, info, columns).map(CheckedNumbers)
    }

    /// The archived shard.
    pub(super) fn shard(&self) -> &ArchivedShard {
        // SAFETY: `open` ran `rkyv::access` (bytecheck) and `check_shard` on
        // exactly these bytes, and the map is read-only over a file that is
        // never modified after publication.
        unsafe { rkyv::access_unchecked::<ArchivedShard>(self.0.bytes()) }
    }
}

/// A shard's text file that passed every check.
pub(super) struct CheckedText(Mapped);

impl CheckedText {
    /// Maps and fully checks the text file at `path`.
    pub(super) fn open(file: &File, path: &Path, info: &ShardInfo) -> Result<Self> {
        map_text(file, path, info).map(CheckedText)
    }

    /// The archived texts.
    pub(super) fn texts(&self) -> &ArchivedTextShard {
        // SAFETY: as in `CheckedNumbers::shard`, validated by `map_text`.
        unsafe { rkyv::access_unchecked::<ArchivedTextShard>(self.0.bytes()) }
    }
}

/// Views a shard's feature block as native `f32` rows (zero-copy).
pub(super) fn feature_rows(shard: &ArchivedShard) -> Option<&[FeatureVec]> {
    <[FeatureVec]>::ref_from_bytes(shard.features.as_slice().as_bytes()).ok()
}

/// Opens the cache directory itself. Every file is then opened relative to
/// this handle, so that one open reads one generation of the cache even if a
/// build publishes the next one meanwhile (the swap renames directories; a
/// handle keeps naming the one it opened).
pub(super) fn open_dir(dir: &Path) -> Result<File> {
    use rustix::fs::{CWD, Mode, OFlags, openat};
    match openat(
        CWD,
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => Ok(File::from(fd)),
        Err(rustix::io::Errno::NOENT) => Err(OpenError::CacheMissing(dir.to_path_buf())),
        Err(e) => Err(OpenError::io(dir, e.into())),
    }
}

/// Opens the file `name` of the cache directory `dir` (opened at `dir_path`)
/// read-only without blocking (a FIFO put in place of a shard must not hang
/// `open`), and only if it is a regular file.
pub(super) fn open_file(dir: &File, dir_path: &Path, name: &str) -> Result<File> {
    use rustix::fs::{Mode, OFlags, openat};
    let path = dir_path.join(name);
    let fd = openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .map_err(|e| OpenError::io(&path, e.into()))?;
    let file = File::from(fd);
    let meta = file.metadata().map_err(|e| OpenError::io(&path, e))?;
    if !meta.is_file() {
        return Err(OpenError::corrupt(&path, "not a regular file"));
    }
    Ok(file)
}

/// Reads and checks the manifest; also returns the xxh3 of its bytes (the
/// cache's content id: builds are deterministic, so equal content, equal id).
pub(super) fn read_manifest(dir_file: &File, dir: &Path) -> Result<(Manifest, u64)> {
    let path = dir.join(MANIFEST_FILE);
    let mut bytes = Vec::new();
    match open_file(dir_file, dir, MANIFEST_FILE) {
        Ok(mut f) => {
            std::io::Read::read_to_end(&mut f, &mut bytes).map_err(|e| OpenError::io(&path, e))?;
        }
        Err(OpenError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Err(OpenError::CacheMissing(dir.to_path_buf()));
        }
        Err(e) => return Err(e),
    }
    // The format and version first, from only those two fields: another
    // version's manifest may lack or add fields, and must be reported as
    // that version ("rebuild"), not as a corrupt file.
    #[derive(serde::Deserialize)]
    struct Header {
        format: String,
        format_version: u32,
    }
    if let Ok(h) = serde_json::from_slice::<Header>(&bytes)
        && h.format == FORMAT_NAME
        && h.format_version != FORMAT_VERSION
    {
        return Err(OpenError::UnsupportedVersion {
            path,
            found: h.format_version,
            expected: FORMAT_VERSION,
        });
    }
    let manifest: Manifest = serde_json::from_slice(&bytes)
        .map_err(|e| OpenError::corrupt(&path, format!("manifest is not valid: {e}")))?;
    if manifest.format != FORMAT_NAME {
        return Err(OpenError::corrupt(
            &path,
            format!("format is {:?}, expected {FORMAT_NAME:?}", manifest.format),
        ));
    }
    if manifest.format_version != FORMAT_VERSION {
        return Err(OpenError::UnsupportedVersion {
            path,
            found: manifest.format_version,
            expected: FORMAT_VERSION,
        });
    }
    if manifest
        .feature_names
        .iter()
        .map(String::as_str)
        .ne(FEATURE_NAMES)
    {
        return Err(OpenError::corrupt(
            &path,
            "feature names differ from this library's",
        ));
    }
    // Views find a column by its name in the manifest: the names must be
    // this library's, in its order (or none, for a build without them).
    let ours = |names: &[String], known: &[&str]| {
        names.is_empty() || names.iter().map(String::as_str).eq(known.iter().copied())
    };
    if !ours(&manifest.reaction_columns, &REACTION_COLUMNS)
        || !ours(&manifest.thread_columns, &THREAD_COLUMNS)
        || manifest.reaction_columns.is_empty() != manifest.thread_columns.is_empty()
    {
        return Err(OpenError::corrupt(
            &path,
            format!(
                "extra column names are not this library's (reaction columns {:?}, thread columns {:?}; expected none, or {REACTION_COLUMNS:?} and {THREAD_COLUMNS:?})",
                manifest.reaction_columns, manifest.thread_columns
            ),
        ));
    }
    if manifest.replies.checked_add(manifest.retweets) != Some(manifest.reactions) {
        return Err(OpenError::corrupt(
            &path,
            format!(
                "replies ({}) and retweets ({}) do not add up to the reactions ({})",
                manifest.replies, manifest.retweets, manifest.reactions
            ),
        ));
    }
    if !plain_name(&manifest.report.file) {
        return Err(OpenError::corrupt(
            &path,
            format!(
                "report {:?} is not a plain file name inside the cache",
                manifest.report.file
            ),
        ));
    }
    let mut prev_last: Option<u64> = None;
    for info in &manifest.shards {
        if info.threads == 0
            || info.first_source_id > info.last_source_id
            || prev_last.is_some_and(|p| p >= info.first_source_id)
            || !plain_name(&info.numbers.file)
            || !plain_name(&info.text.file)
        {
            return Err(OpenError::corrupt(
                &path,
                format!(
                    "shard {:?} is empty, out of order or not a plain file name",
                    info.numbers.file
                ),
            ));
        }
        prev_last = Some(info.last_source_id);
    }
    // Checked sums: huge per-shard counts must not wrap around to the totals.
    let total = |count: fn(&ShardInfo) -> u64| {
        manifest
            .shards
            .iter()
            .try_fold(0u64, |sum, s| sum.checked_add(count(s)))
    };
    if total(|s| s.threads) != Some(manifest.threads)
        || total(|s| s.reactions) != Some(manifest.reactions)
        || usize::try_from(manifest.threads).is_err()
    {
        return Err(OpenError::corrupt(&path, "totals do not match the shards"));
    }
    // Last of the manifest's own checks, so that an edited but parseable
    // manifest meets the specific check it fails first: the bytes must be
    // exactly what a writer makes of this content. Every other file is
    // under a checksum the manifest records; this makes the manifest itself
    // tamper-evident too (a cut newline, an added space, a flipped bit that
    // still parses), which matters because its bytes are the content id.
    if manifest.to_bytes().as_deref().ok() != Some(&bytes[..]) {
        return Err(OpenError::corrupt(
            &path,
            "not byte for byte as written (damaged or edited by hand)",
        ));
    }
    // The checksum covers what no other check does (the build options).
    if manifest.checksum != manifest.expected_checksum() {
        return Err(OpenError::corrupt(
            &path,
            "does not match its checksum (damaged or edited by hand)",
        ));
    }
    Ok((manifest, xxh3_64(&bytes)))
}

/// Maps `path` and checks its footer and checksum against `info`.
fn map_archive(file: &File, path: &Path, info: &FileInfo) -> Result<Mapped> {
    let bad = |reason: String| OpenError::corrupt(path, reason);
    let file_len = file.metadata().map_err(|e| OpenError::io(path, e))?.len();
    if file_len != info.bytes {
        return Err(bad(format!(
            "file is {file_len} bytes, the manifest says {} (truncated or replaced)",
            info.bytes
        )));
    }
    if file_len < footer::LEN as u64 {
        return Err(bad("file is too short to hold a footer".into()));
    }
    // SAFETY: the file is opened read-only and cache files are never modified
    // after publication: builds write a new directory and swap it in.
    // Populate: one pass of read-ahead faults instead of one fault per page
    // during the checksum.
    let map = unsafe { memmap2::MmapOptions::new().populate().map(file) }
        .map_err(|e| OpenError::io(path, e))?;
    let footer = match Footer::decode(&map) {
        Ok(f) => f,
        Err(FooterError::Version(found)) => {
            return Err(OpenError::UnsupportedVersion {
                path: path.to_path_buf(),
                found,
                expected: FORMAT_VERSION,
            });
        }
        Err(FooterError::Flags) => return Err(bad("footer has unknown flags set".into())),
        Err(FooterError::Magic) => {
            return Err(bad(
                "footer magic is missing (not a socialctx cache file)".into()
            ));
        }
        Err(FooterError::TooShort) => {
            return Err(bad("file is too short to hold a footer".into()));
        }
    };
    let archive_len = footer.archive_len;
    if archive_len != file_len - footer::LEN as u64 {
        return Err(bad(format!(
            "footer says the archive is {archive_len} bytes, the file holds {}",
            file_len - footer::LEN as u64
        )));
    }
    let archive_len = archive_len as usize;
    let stored = footer.xxh3;
    let actual = xxh3_64(&map[..archive_len]);
    if actual != stored || hex64(actual) != info.xxh3 {
        return Err(bad(format!(
            "checksum mismatch: content {}, footer {}, manifest {}",
            hex64(actual),
            hex64(stored),
            info.xxh3
        )));
    }
    Ok(Mapped { map, archive_len })
}

/// Maps and fully checks a shard's numbers file.
fn map_numbers(
    file: &File,
    path: &Path,
    info: &ShardInfo,
    columns: (usize, usize),
) -> Result<Mapped> {
    let mapped = map_archive(file, path, &info.numbers)?;
    let shard = rkyv::access::<ArchivedShard, rkyv::rancor::BoxedError>(mapped.bytes())
        .map_err(|e| OpenError::corrupt(path, format!("archive does not validate: {e}")))?;
    check_entry(shard, info).map_err(|r| entry_disagrees(path, r))?;
    check_shard(shard).map_err(|r| OpenError::corrupt(path, r))?;
    if (shard.reaction_columns.len(), shard.thread_columns.len()) != columns {
        return Err(OpenError::corrupt(
            path,
            "number of extra columns differs from the manifest",
        ));
    }
    Ok(mapped)
}

/// Maps and fully checks a shard's text file.
fn map_text(file: &File, path: &Path, info: &ShardInfo) -> Result<Mapped> {
    let mapped = map_archive(file, path, &info.text)?;
    let text = rkyv::access::<ArchivedTextShard, rkyv::rancor::BoxedError>(mapped.bytes())
        .map_err(|e| OpenError::corrupt(path, format!("archive does not validate: {e}")))?;
    if text.threads.len() as u64 != info.threads || text.reactions.len() as u64 != info.reactions {
        return Err(entry_disagrees(
            path,
            format!(
                "the file holds texts of {} threads and {} reactions, the entry says {} and {}",
                text.threads.len(),
                text.reactions.len(),
                info.threads,
                info.reactions
            ),
        ));
    }
    // Every span must address whole characters of the arena, so that the
    // views can slice it without checks.
    let arena = text.arena.as_str();
    let ok = |s: &ArchivedSpan, nullable: bool| {
        if nullable && s.is_none() {
            return true;
        }
        let (start, len) = (s.start.to_native(), s.len.to_native());
        let (start, end) = (start as usize, start as usize + len as usize);
        end <= arena.len() && arena.is_char_boundary(start) && arena.is_char_boundary(end)
    };
    let threads_ok = text
        .threads
        .iter()
        .all(|t| t.all().iter().all(|s| ok(s, false)));
    let reactions_ok = text
        .reactions
        .iter()
        .all(|[t, d, k]| ok(t, false) && ok(d, true) && ok(k, true));
    if !threads_ok || !reactions_ok {
        return Err(OpenError::corrupt(path, "a text span is out of bounds"));
    }
    Ok(mapped)
}

/// The invariants the views rely on, so that a consistent-looking but wrong
/// archive can never index out of bounds or return another thread's data.
/// A shard whose checksum matches its manifest entry is the very file that
/// entry describes: where the entry's other fields disagree with it, the
/// entry is what is damaged, and the error names the manifest.
fn entry_disagrees(path: &Path, reason: impl std::fmt::Display) -> OpenError {
    let file = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    OpenError::corrupt(
        path.with_file_name(MANIFEST_FILE),
        format!(
            "its entry for {file} disagrees with that file (whose checksum it matches): {reason}"
        ),
    )
}

/// The shard's counts and source-id range against its manifest entry.
fn check_entry(shard: &ArchivedShard, info: &ShardInfo) -> Result<(), String> {
    let (threads, reactions) = (shard.threads.len(), shard.reactions.len());
    if threads as u64 != info.threads || reactions as u64 != info.reactions {
        return Err(format!(
            "the file holds {threads} threads and {reactions} reactions, the entry says {} and {}",
            info.threads, info.reactions
        ));
    }
    let first = shard.threads.first().map_or(0, |t| t.source_id.to_native());
    let last = shard.threads.last().map_or(0, |t| t.source_id.to_native());
    if threads > 0 && (first != info.first_source_id || last != info.last_source_id) {
        return Err(format!(
            "the file's source ids run {first}..{last}, the entry says {}..{}",
            info.first_source_id, info.last_source_id
        ));
    }
    Ok(())
}

fn check_shard(shard: &ArchivedShard) -> Result<(), String> {
    let (threads, reactions) = (shard.threads.len(), shard.reactions.len());
    if shard.features.len() != reactions {
        return Err(format!(
            "{} feature rows for {reactions} reactions",
            shard.features.len()
        ));
    }
    let Some(rows) = feature_rows(shard) else {
        return Err("feature block is misaligned".into());
    };
    if shard.inputs.len() != reactions {
        return Err(format!(
            "{} input keys for {reactions} reactions",
            shard.inputs.len()
        ));
    }
    if shard.reaction_columns.iter().any(|c| c.len() != reactions)
        || shard.thread_columns.iter().any(|c| c.len() != threads)
    {
        return Err("an extra column has the wrong length".into());
    }
    let mut next_reaction = 0u64;
    let mut prev_id: Option<u64> = None;
    for t in shard.threads.iter() {
        let id = t.source_id.to_native();
        if prev_id.is_some_and(|p| p >= id) {
            return Err(format!("source ids out of order at {id}"));
        }
        prev_id = Some(id);
        let (first, count) = (
            u64::from(t.first_reaction.to_native()),
            u64::from(t.reaction_count.to_native()),
        );
        if first != next_reaction || first + count > reactions as u64 {
            return Err(format!("thread {id} has a bad reaction range"));
        }
        next_reaction = first + count;
        if Label::from_code(t.label_code).is_none() {
            return Err(format!(
                "thread {id} has label code {}, not -1, 0 or 1",
                t.label_code
            ));
        }
        // The loader's time window and "earliest max_cxt" rely on this order.
        let range = &shard.reactions[first as usize..(first + count) as usize];
        if let Some(w) = range.windows(2).find(|w| {
            (w[0].created_at.to_native(), w[0].id.to_native())
                > (w[1].created_at.to_native(), w[1].id.to_native())
        }) {
            return Err(format!(
                "thread {id}: reaction {} is out of (created_at, id) order",
                w[1].id.to_native()
            ));
        }
        // Graph batches rely on every parent being the source or an earlier reply.
        if let Some((_, r)) = range.iter().enumerate().find(|&(i, r)| {
            let p = r.parent.to_native();
            let parent_ok = p == PARENT_SOURCE
                || ((p as usize) < i && range[p as usize].kind == ReactionKind::Reply as u8);
            !parent_ok || ParentHow::from_u8(r.parent_how).is_none()
        }) {
            return Err(format!(
                "thread {id}: reaction {} has a bad parent",
                r.id.to_native()
            ));
        }
    }
    if next_reaction != reactions as u64 {
        return Err("reactions not covered by any thread".into());
    }
    if shard
        .reactions
        .iter()
        .any(|r| ReactionKind::from_u8(r.kind).is_none())
    {
        return Err("a reaction has an unknown kind".into());
    }
    if let Some((r, _)) = shard.reactions.iter().zip(rows).find(|(r, f)| {
        let reply = ReactionKind::from_u8(r.kind) == Some(ReactionKind::Reply);
        f[Feature::CType] != if reply { 1.0 } else { 0.0 }
    }) {
        return Err(format!(
            "reaction {}: its kind contradicts its c_type feature",
            r.id.to_native()
        ));
    }
    // Branch-free so that it vectorises: this runs over every feature of the
    // shard when it is first used.
    const EXPONENT: u32 = 0x7f80_0000;
    let non_finite = rows
        .iter()
        .flatten()
        .fold(false, |any, x| any | (x.to_bits() & EXPONENT == EXPONENT));
    if non_finite {
        return Err("a feature is not finite (NaN or infinite)".into());
    }
    Ok(())
}

/// Reads and checks the bad-input report of a cache.
pub(super) fn read_report(
    mut file: &File,
    path: &Path,
    manifest: &Manifest,
) -> Result<Vec<BadInput>> {
    let mut bytes = Vec::new();
    std::io::Seek::rewind(&mut file).map_err(|e| OpenError::io(path, e))?;
    std::io::Read::read_to_end(&mut file, &mut bytes).map_err(|e| OpenError::io(path, e))?;
    if bytes.len() as u64 != manifest.report.bytes || hex64(xxh3_64(&bytes)) != manifest.report.xxh3
    {
        return Err(OpenError::corrupt(
            path,
            "size or checksum differs from the manifest",
        ));
    }
    let report = read_jsonl(&bytes).map_err(|e| OpenError::corrupt(path, e.to_string()))?;
    if report.len() as u64 != manifest.skipped {
        return Err(OpenError::corrupt(
            path,
            "line count differs from the manifest",
        ));
    }
    Ok(report)
}
