// The source digest of a crate: shared, byte for byte, by a build script
// (`include!`d there) and the tests that prove what changes it; a copy is
// crates/pycompat/source_hash.rs (a test keeps the two identical). Plain std
// and no dependency, so that a build script compiles it in a moment.

/// A digest (16 hex digits) of the `.rs` files under `root` named by
/// `entries` (relative paths with `/`; a directory means every `.rs` file
/// below it), less those in `skip`, and the files and directories hashed
/// (for `cargo:rerun-if-changed`). Each file contributes its path relative
/// to `root` and its bytes with `\r\n` read as `\n`, in path order: the same
/// sources give the same digest on any machine and in any checkout, and no
/// time or absolute path enters it. An entry that is missing is an error:
/// a digest of fewer files would silently not cover them.
#[allow(dead_code)]
fn source_digest(
    root: &std::path::Path,
    entries: &[&str],
    skip: &[&str],
) -> std::io::Result<(String, Vec<std::path::PathBuf>)> {
    fn walk(
        root: &std::path::Path,
        rel: &str,
        skip: &[&str],
        out: &mut Vec<(String, std::path::PathBuf)>,
    ) -> std::io::Result<()> {
        let path = root.join(rel);
        if skip.contains(&rel) {
            return Ok(());
        }
        if std::fs::metadata(&path)?.is_dir() {
            for e in std::fs::read_dir(&path)? {
                let name = e?.file_name().into_string().map_err(|n| {
                    std::io::Error::other(format!("{rel}/{n:?}: not a UTF-8 file name"))
                })?;
                walk(root, &format!("{rel}/{name}"), skip, out)?;
            }
        } else if rel.ends_with(".rs") {
            out.push((rel.to_owned(), path));
        }
        Ok(())
    }
    let mut files = Vec::new();
    for e in entries {
        walk(root, e, skip, &mut files)
            .map_err(|err| std::io::Error::other(format!("{}: {err}", root.join(e).display())))?;
    }
    files.sort();
    files.dedup();
    // FNV-1a, 128 bits: no dependency; not a defence against forgery, only
    // against forgetting (any edit changes it).
    let mut h: u128 = 0x6c62272e07bb014262b821756295c58d;
    let mut add = |bytes: &[u8]| {
        for &b in bytes {
            h ^= u128::from(b);
            h = h.wrapping_mul(0x0000000001000000000000000000013b);
        }
    };
    for (rel, path) in &files {
        let text = std::fs::read(path)?;
        let mut normal = Vec::with_capacity(text.len());
        let mut i = 0;
        while i < text.len() {
            if !(text[i] == b'\r' && text.get(i + 1) == Some(&b'\n')) {
                normal.push(text[i]);
            }
            i += 1;
        }
        add(rel.as_bytes());
        add(&[0]);
        add(&(normal.len() as u64).to_le_bytes());
        add(&normal);
    }
    let folded = (h >> 64) as u64 ^ h as u64;
    let hashed = entries.iter().map(|e| root.join(e)).collect();
    Ok((format!("{folded:016x}"), hashed))
}
