//! Replacing what the operator points socialctx at, keeping what the
//! operator set on it: the one routine behind every output the project
//! writes (the command's `--report`, `stats --save`, plans, `export`,
//! `describe --html`, through the binding) and the metadata rule of the
//! directories it swaps (caches, embedding stores).
//!
//! As editors save and `rsync -a` copies: the new content is written to a
//! temporary file beside the target and renamed over it, so a reader sees
//! the old file or the new one, never a part; the new file takes the old
//! one's permission bits and group (and owner, where the writer may set
//! it), so a file restricted to a group stays restricted; a symbolic link
//! is written *through*: its target is replaced (atomically, beside the
//! target), and the link stays a link.
//!
//! Temporary files are named `.<name>.tmp-<pid>` (as builds name their
//! staging directories) and held under an exclusive lock for as long as
//! they are written, so the next writer of the same output removes what a
//! killed one left (a lock it can take is a dead writer's) and nothing a
//! live writer is writing.

use std::fs::{self, File, Metadata, TryLockError};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// `path` with symlinks in its last component followed (a chain of them,
/// relative ones resolved against their own directory): where a replacement
/// of `path` must go so that the link stays.
pub fn resolve_symlinks(path: &Path) -> io::Result<PathBuf> {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        match fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let link = fs::read_link(&p)?;
                p = match p.parent() {
                    Some(dir) if link.is_relative() => dir.join(link),
                    _ => link,
                };
            }
            _ => return Ok(p),
        }
    }
    // ELOOP, as the system says it: callers (the binding's OSError) see
    // its errno.
    Err(io::Error::from_raw_os_error(libc::ELOOP))
}

/// The file system's clock now: sets the mtime of the open file or
/// directory `f` to now (`UTIME_NOW`; the access time kept) and returns its
/// metadata, whose mtime is that time as the file system keeps it (the
/// kernel's coarse clock, in the file system's granularity; on NFS the
/// server's). The one way this project reads the clock that file times are
/// compared with (the incremental build's racy-clean rule, the store's
/// verified record): no stamp file is made that a kill could leave behind.
pub fn touch_now(f: &File) -> io::Result<Metadata> {
    use rustix::fs::{Timespec, Timestamps, UTIME_NOW, UTIME_OMIT, futimens};
    let now = Timestamps {
        last_access: Timespec {
            tv_sec: 0,
            tv_nsec: UTIME_OMIT,
        },
        last_modification: Timespec {
            tv_sec: 0,
            tv_nsec: UTIME_NOW,
        },
    };
    futimens(f, &now)?;
    f.metadata()
}

/// The descriptor `path` names when it is one of this process's own
/// (`/dev/stdin|stdout|stderr`, `/dev/fd/N`, `/proc/self/fd/N`,
/// `/proc/<our pid>/fd/N`, or a chain of links reaching one), duplicated.
fn own_descriptor(path: &Path) -> Option<std::os::fd::OwnedFd> {
    let fd_of = |p: &Path| -> Option<i32> {
        let s = p.to_str()?;
        match s {
            "/dev/stdin" => return Some(0),
            "/dev/stdout" => return Some(1),
            "/dev/stderr" => return Some(2),
            _ => {}
        }
        let pid = format!("/proc/{}/fd/", std::process::id());
        let n = ["/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/", &pid]
            .iter()
            .find_map(|prefix| s.strip_prefix(prefix))?;
        n.parse().ok()
    };
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        if let Some(fd) = fd_of(&p) {
            // SAFETY: fcntl with F_DUPFD_CLOEXEC only reads the number; a
            // closed one fails (-1), and a new descriptor is ours to own.
            let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
            return (dup >= 0).then(|| {
                // SAFETY: `dup` was just made by fcntl, open and unowned.
                unsafe { std::os::fd::FromRawFd::from_raw_fd(dup) }
            });
        }
        let link = fs::read_link(&p).ok()?;
        p = match p.parent() {
            Some(dir) if link.is_relative() => dir.join(link),
            _ => link,
        };
    }
    None
}

/// Gives `new` (a file or directory about to replace one with metadata
/// `old`) the old one's permission bits and group, and its owner where this
/// process may set it (root). A group this user may not set is dropped
/// with the group's permission bits, so that the new file never grants a
/// group access the old one did not.
pub fn keep_metadata(new: &Path, old: &Metadata) -> io::Result<()> {
    use rustix::fs::{Gid, Mode, Uid, chmod, chown};
    let now = fs::symlink_metadata(new)?;
    let mut mode = old.mode() & 0o7777;
    let root = rustix::process::geteuid().is_root();
    let uid = (root && now.uid() != old.uid()).then(|| Uid::from_raw(old.uid()));
    if now.gid() != old.gid() || uid.is_some() {
        let gid = Gid::from_raw(old.gid());
        if let Err(e) = chown(new, uid, Some(gid)) {
            if e != rustix::io::Errno::PERM {
                return Err(e.into());
            }
            mode &= !0o070;
        }
    }
    // After chown, which clears set-id bits.
    chmod(new, Mode::from_raw_mode(mode))?;
    Ok(())
}

/// Whether `name` is one of the temporary files [`Replacement`] names for
/// an output called `output`: `.<output>.tmp-<pid>` or
/// `.<output>.tmp-<pid>-<n>`.
fn is_temp_of(name: &str, output: &str) -> bool {
    name.strip_prefix('.')
        .and_then(|r| r.strip_prefix(output))
        .and_then(|r| r.strip_prefix(".tmp-"))
        .is_some_and(|r| {
            let mut parts = r.split('-');
            let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
            parts.next().is_some_and(all_digits)
                && parts.next().is_none_or(all_digits)
                && parts.next().is_none()
        })
}

/// Removes the temporary files of `output` in `dir` that dead writers left:
/// a regular file of our name whose lock can be taken (a live writer holds
/// its own) and that is still the file at that name once locked. Returns
/// how many were removed; what cannot be looked at is left.
pub fn remove_stale_temps(dir: &Path, output: &str) -> usize {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !is_temp_of(&name.to_string_lossy(), output) {
            continue;
        }
        let path = entry.path();
        // No link followed, and a FIFO of that name cannot block the open.
        let flags = rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK;
        let Ok(file) = File::options()
            .read(true)
            .custom_flags(flags.bits() as i32)
            .open(&path)
        else {
            continue;
        };
        let Ok(held) = file.metadata() else { continue };
        if !held.is_file() || file.try_lock().is_err() {
            continue;
        }
        let same = fs::symlink_metadata(&path)
            .is_ok_and(|m| m.ino() == held.ino() && m.dev() == held.dev());
        if same && fs::remove_file(&path).is_ok() {
            removed += 1;
        }
        let _ = file.unlock();
    }
    removed
}

/// A file being written beside the output it will replace ([`begin`]),
/// put in place by [`commit`]; dropped uncommitted, it is removed.
///
/// [`begin`]: Replacement::begin
/// [`commit`]: Replacement::commit
#[derive(Debug)]
pub struct Replacement {
    target: PathBuf,
    tmp: PathBuf,
    file: Option<File>,
}

impl Replacement {
    /// Starts replacing `path` (through symlinks: their final target is
    /// replaced): removes what dead writers of it left, creates and locks
    /// a temporary file beside it. Fails for a directory, or where the file
    /// cannot be made.
    pub fn begin(path: &Path) -> io::Result<Replacement> {
        // `/dev/stdout`, `/dev/fd/N`, `/proc/self/fd/N` (or a link to one)
        // name a descriptor this process holds: written through it, so a
        // shell's `>> log` appends (renaming over the file it points to
        // would replace the operator's log with this output alone).
        if let Some(fd) = own_descriptor(path) {
            return Ok(Replacement {
                target: path.to_path_buf(),
                tmp: PathBuf::new(),
                file: Some(File::from(fd)),
            });
        }
        // A device, FIFO or socket (`--report /dev/stderr`, a pipe named
        // by /proc/self/fd) cannot be replaced: it is written to, as it is.
        if let Ok(m) = fs::metadata(path)
            && !m.is_file()
            && !m.is_dir()
        {
            let file = File::options().write(true).open(path)?;
            return Ok(Replacement {
                target: path.to_path_buf(),
                tmp: PathBuf::new(),
                file: Some(file),
            });
        }
        let target = resolve_symlinks(path)?;
        if fs::metadata(&target).is_ok_and(|m| m.is_dir()) {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                "it is a directory",
            ));
        }
        let name = target
            .file_name()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file name"))?
            .to_string_lossy()
            .into_owned();
        let dir = match target.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        remove_stale_temps(&dir, &name);
        let pid = std::process::id();
        for n in 0u32.. {
            let tmp = dir.join(if n == 0 {
                format!(".{name}.tmp-{pid}")
            } else {
                format!(".{name}.tmp-{pid}-{n}")
            });
            // Owner-only while written when it replaces a file (commit
            // gives it the old one's bits): a `chmod 600` output's content
            // is never readable by others in the temporary file, nor in
            // what a killed writer leaves.
            let mut options = File::options();
            options
                .read(true)
                .write(true)
                .create_new(true)
                .custom_flags(rustix::fs::OFlags::CLOEXEC.bits() as i32);
            if fs::symlink_metadata(&target).is_ok() {
                options.mode(0o600);
            }
            let file = match options.open(&tmp) {
                Ok(f) => f,
                // Another thread of this process writes the same output.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 1000 => continue,
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!(
                            "{e}: {} must be writable, as the output is written beside it \
                             and renamed into place whole",
                            dir.display()
                        ),
                    ));
                }
                Err(e) => return Err(e),
            };
            match file.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => continue,
                Err(TryLockError::Error(e)) => {
                    let _ = fs::remove_file(&tmp);
                    return Err(e);
                }
            }
            // A cleaner may have taken it between create and lock: then it
            // is no longer at its name, and we make another.
            let held = file.metadata()?;
            if !fs::symlink_metadata(&tmp).is_ok_and(|m| m.ino() == held.ino()) {
                continue;
            }
            return Ok(Replacement {
                target,
                tmp,
                file: Some(file),
            });
        }
        unreachable!("the loop returns")
    }

    /// The file to write the new content to.
    pub fn file(&mut self) -> &mut File {
        self.file.as_mut().expect("open until committed")
    }

    /// The file that is replaced (symlinks followed).
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// The temporary file being written (empty when the output is a
    /// device or pipe, written in place).
    pub fn temp_path(&self) -> &Path {
        &self.tmp
    }

    /// Syncs the new content, gives it the metadata of the file it
    /// replaces (if any), renames it over that file and syncs the
    /// directory. On failure the temporary file is removed and the target
    /// is as it was.
    pub fn commit(mut self) -> io::Result<()> {
        if self.tmp.as_os_str().is_empty() {
            // Written in place (not a regular file); nothing to rename.
            self.file = None;
            return Ok(());
        }
        let file = self.file.as_ref().expect("open until committed");
        file.sync_all()?;
        if let Ok(old) = fs::metadata(&self.target) {
            keep_metadata(&self.tmp, &old)?;
        }
        fs::rename(&self.tmp, &self.target)?;
        let file = self.file.take();
        if let Some(f) = file {
            let _ = f.unlock();
        }
        // Durable rename; a failure here leaves the new file in place.
        if let Some(dir) = self.target.parent().filter(|d| !d.as_os_str().is_empty()) {
            let _ = File::open(dir).and_then(|d| d.sync_all());
        }
        Ok(())
    }
}

impl Drop for Replacement {
    fn drop(&mut self) {
        if let Some(f) = self.file.take()
            && !self.tmp.as_os_str().is_empty()
        {
            let _ = fs::remove_file(&self.tmp);
            let _ = f.unlock();
        }
    }
}

/// Replaces `path` with what `write` writes, atomically and keeping its
/// metadata (see the module's documentation).
pub fn replace_file(
    path: &Path,
    write: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    let mut r = Replacement::begin(path)?;
    write(r.file())?;
    r.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names() {
        assert!(is_temp_of(".out.json.tmp-12", "out.json"));
        assert!(is_temp_of(".out.json.tmp-12-3", "out.json"));
        assert!(!is_temp_of(".out.json.tmp-old-12", "out.json"));
        assert!(!is_temp_of(".out.json.tmp-", "out.json"));
        assert!(!is_temp_of(".out.json.tmp-1-2-3", "out.json"));
        assert!(!is_temp_of(".out.jsonx.tmp-1", "out.json"));
        assert!(!is_temp_of("out.json.tmp-1", "out.json"));
    }

    #[test]
    fn a_live_writers_temp_is_kept_and_a_dead_ones_removed() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("o");
        let live = Replacement::begin(&out).unwrap();
        // A dead writer's: no lock held.
        fs::write(d.path().join(".o.tmp-999999999"), b"x").unwrap();
        // Not ours: another name.
        fs::write(d.path().join(".o.tmp-old-1"), b"x").unwrap();
        // Our name, but a FIFO: left, and the look does not block.
        rustix::fs::mknodat(
            rustix::fs::CWD,
            d.path().join(".o.tmp-1"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        assert_eq!(remove_stale_temps(d.path(), "o"), 1);
        assert!(live.temp_path().exists());
        assert!(d.path().join(".o.tmp-old-1").exists());
        drop(live);
        let names: Vec<_> = fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        let mut names = names;
        names.sort();
        assert_eq!(names, [".o.tmp-1", ".o.tmp-old-1"]);
    }

    /// `--report /dev/stderr` and other non-files are written as they are
    /// (no temporary file can replace a device or a pipe).
    #[test]
    fn a_device_is_written_in_place() {
        let r = Replacement::begin(Path::new("/dev/null")).unwrap();
        assert_eq!(r.temp_path(), Path::new(""));
        r.commit().unwrap();
        assert!(Path::new("/dev/null").exists());
    }

    /// The new content of a `chmod 640` output is not readable by others
    /// while it is written (it had the umask's 644 until commit), and the
    /// committed file has the old bits.
    #[test]
    fn the_temporary_file_of_a_restricted_output_is_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("o");
        fs::write(&out, b"old").unwrap();
        fs::set_permissions(&out, fs::Permissions::from_mode(0o640)).unwrap();
        let mut r = Replacement::begin(&out).unwrap();
        io::Write::write_all(r.file(), b"secret").unwrap();
        let mode = fs::metadata(r.temp_path()).unwrap().mode() & 0o777;
        assert_eq!(mode & 0o077, 0, "{mode:o}");
        r.commit().unwrap();
        assert_eq!(fs::metadata(&out).unwrap().mode() & 0o777, 0o640);
    }

    #[test]
    fn mode_kept_and_symlink_written_through() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("real");
        fs::write(&real, b"old").unwrap();
        fs::set_permissions(&real, fs::Permissions::from_mode(0o640)).unwrap();
        let link = d.path().join("link");
        std::os::unix::fs::symlink("real", &link).unwrap();
        replace_file(&link, |f| io::Write::write_all(f, b"new")).unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read(&real).unwrap(), b"new");
        assert_eq!(fs::metadata(&real).unwrap().mode() & 0o7777, 0o640);
        let n = fs::read_dir(d.path()).unwrap().count();
        assert_eq!(n, 2, "no temporary file left");
    }
}
