//! File-system primitives shared by every command: the data lock, the run
//! lock, atomic whole-file replacement, and positioned reads and writes that
//! work the same on Unix and Windows.
//!
//! Locks are advisory `flock`-style locks from `std::fs::File::lock`. The
//! kernel drops them when the holding process dies, so a lock left by a killed
//! process never blocks the next run; the pid written into a run-lock file is
//! only there to tell a person who holds it.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, LockedError, Result};

const DATA_LOCK: &str = ".llmprobe.lock";
const RUN_LOCK: &str = ".check.lock";

/// Read a small data file whole (the state files). `None` when there is
/// nothing to read: no file, no stats directory yet, or only white space.
/// Any other failure is the data error "cannot read" (exit 4).
pub fn read_data_file(path: &Path) -> Result<Option<Vec<u8>>> {
    match fs::read(path) {
        Ok(b) if b.iter().all(u8::is_ascii_whitespace) => Ok(None),
        Ok(b) => Ok(Some(b)),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(Error::unreadable(path, e)),
    }
}

/// A JSON data file read as `T` ([`read_data_file`]: missing or blank is
/// `None`); one that cannot be parsed is a [`DataError`](crate::error::DataError)
/// naming it, at the offset, with `why` saying what the file is and what
/// to do, and is left as it is.
pub fn read_json_file<T: serde::de::DeserializeOwned>(
    path: &Path,
    why: impl FnOnce(&serde_json::Error) -> String,
) -> Result<Option<T>> {
    let Some(bytes) = read_data_file(path)? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes).map(Some).map_err(|e| {
        crate::error::DataError::new(
            path,
            Some(crate::error::json_error_offset(&bytes, &e)),
            why(&e),
        )
        .into()
    })
}

/// The most a file a person writes for llmprobe (the config, a prompt
/// pool, an env file) may hold: far above any real one.
pub const TEXT_FILE_CAP: u64 = 16 << 20;

/// Read a file a person wrote, whole, up to `cap` bytes. A path to a
/// device (`/dev/zero`) or a file far larger than any config is an error
/// (`FileTooLarge`) after `cap` bytes, instead of a read that fills memory.
pub fn read_capped(path: &Path, cap: u64) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    File::open(path)?.take(cap + 1).read_to_end(&mut out)?;
    if out.len() as u64 > cap {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("larger than {} MiB, too large for this file", cap >> 20),
        ));
    }
    Ok(out)
}

/// [`read_capped`] at [`TEXT_FILE_CAP`], as UTF-8 text.
pub fn read_text_file(path: &Path) -> io::Result<String> {
    String::from_utf8(read_capped(path, TEXT_FILE_CAP)?)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text"))
}

/// Ignore SIGXFSZ, which the kernel sends to a process that writes past
/// its file size limit (`ulimit -f`, RLIMIT_FSIZE) and which kills it by
/// default, mid-write. Ignored, the write fails with EFBIG instead, and is
/// reported like a full disk (exit 7), with the file it was writing
/// rolled back. Called once, first thing in [`crate::run`].
pub fn ignore_file_size_signal() {
    #[cfg(unix)]
    // SAFETY: setting a standard signal's disposition to SIG_IGN installs
    // no handler and touches no memory; it is done before any thread starts.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

/// `p` made absolute against the working directory, for messages and
/// scheduled jobs; `p` as it is when the working directory cannot be read,
/// since a relative path still names the file.
pub fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Make sure the stats directory exists; when this creates it, say so on
/// stderr, whichever command it is (`check`, `route`, `state`, …), so that
/// a directory never appears unannounced.
pub fn ensure_dir(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    // What comes before the last `..` must exist: `x/../stats` names
    // `./stats` only if `x` is there, and making `x` would write where
    // nobody asked (`mkdir -p` would).
    let parts: Vec<_> = dir.components().collect();
    let up = parts
        .iter()
        .rposition(|c| *c == std::path::Component::ParentDir);
    if let Some(i) = up {
        let before: PathBuf = parts[..=i].iter().collect();
        if !before.is_dir() {
            let missing = before.parent().unwrap_or(&before);
            return Err(Error::io(
                format!("cannot create stats directory {}", absolute(dir).display()),
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!(
                        "{} does not exist, and a path through `..` is not made",
                        missing.display()
                    ),
                ),
            ));
        }
    }
    fs::create_dir_all(dir).map_err(|e| {
        Error::io(
            format!("cannot create stats directory {}", absolute(dir).display()),
            e,
        )
    })?;
    eprintln!("created stats directory {}", absolute(dir).display());
    Ok(())
}

/// The exclusive lock held while a data file in the stats directory is read
/// for modification and written. Dropping it releases the lock.
#[derive(Debug)]
pub struct DataLock {
    _file: File,
}

impl DataLock {
    /// Block until the data lock of `stats_dir` is ours.
    pub fn acquire(stats_dir: &Path) -> Result<DataLock> {
        ensure_dir(stats_dir)?;
        DataLock::lock_in(stats_dir)
    }

    /// [`DataLock::acquire`] for a run that made or found the stats
    /// directory when it started: a directory that is gone by now was
    /// removed during the run, with the run lock and whatever the run had
    /// recorded in it, and is not made again behind the user's back. The
    /// error (exit 7) names it.
    pub fn acquire_existing(stats_dir: &Path) -> Result<DataLock> {
        if !stats_dir.is_dir() {
            return Err(Error::io(
                format!(
                    "stats directory {} is gone (removed during the run); nothing more was recorded",
                    absolute(stats_dir).display()
                ),
                io::ErrorKind::NotFound.into(),
            ));
        }
        DataLock::lock_in(stats_dir)
    }

    fn lock_in(stats_dir: &Path) -> Result<DataLock> {
        let path = stats_dir.join(DATA_LOCK);
        let file = open_lock_file(&path)?;
        file.lock()
            .map_err(|e| Error::io(format!("cannot lock {}", path.display()), e))?;
        Ok(DataLock { _file: file })
    }
}

/// The lock that makes `check` runs exclusive. Held for a whole run; its
/// note (who holds it) is emptied when it is let go, so a note is always
/// the present holder's.
#[derive(Debug)]
pub struct RunLock {
    file: File,
}

/// The line a `check --paused` run adds to its run-lock note, by which a
/// plain `check` that finds the lock held knows to wait for it
/// ([`LockedError::paused`]).
const PAUSED_NOTE: &str = "check --paused";

/// Which kind of run holds (or takes) the run lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    /// A whole `check` run (and anything else that takes the lock).
    Check,
    /// A `check --paused` run: short, and probing only paused models.
    Paused,
    /// A look, not a run: `route --serve`'s re-prober takes the lock for
    /// an instant to learn whether a `check` runs, and lets go at once. It
    /// writes no note, so a `check` that meets it tries the lock again
    /// instead of exiting 3.
    Probe,
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // Still ours until the file closes, just after this.
        let _ = self.file.set_len(0);
    }
}

impl RunLock {
    /// Take the run lock of `stats_dir` without waiting, as a whole run.
    /// When another process holds it, the error says which.
    pub fn try_acquire(stats_dir: &Path) -> Result<RunLock> {
        RunLock::try_acquire_as(stats_dir, RunKind::Check)
    }

    /// [`RunLock::try_acquire`] for a run of `kind`, which the note in
    /// the lock file names for the next run that finds it held.
    pub fn try_acquire_as(stats_dir: &Path, kind: RunKind) -> Result<RunLock> {
        ensure_dir(stats_dir)?;
        let path = stats_dir.join(RUN_LOCK);
        let file = open_lock_file(&path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                // The holder writes its note just after taking the lock: a
                // run that lost the race by a hair may find it still empty,
                // so look again a few times before saying "unknown". A
                // holder that writes no note at all (a re-prober's look,
                // [`RunKind::Probe`]) lets go at once: try the lock again
                // each time, and take it when it is free.
                let mut holder = String::new();
                let mut free = false;
                for _ in 0..20 {
                    holder.clear();
                    let _ = File::open(&path).and_then(|mut f| f.read_to_string(&mut holder));
                    if !holder.trim().is_empty() {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    if file.try_lock().is_ok() {
                        free = true;
                        break;
                    }
                }
                if free {
                    return RunLock::noted(file, &path, kind);
                }
                let paused = holder.lines().any(|l| l.trim() == PAUSED_NOTE);
                let holder = holder.trim();
                let holder = if holder.is_empty() {
                    "holder unknown".to_string()
                } else {
                    holder.replace('\n', ", ")
                };
                return Err(LockedError {
                    path,
                    holder,
                    paused,
                }
                .into());
            }
            Err(fs::TryLockError::Error(e)) => {
                return Err(Error::io(format!("cannot lock {}", path.display()), e));
            }
        }
        RunLock::noted(file, &path, kind)
    }

    /// The lock just taken on `file`, with the note of a run of `kind`.
    fn noted(mut file: File, path: &Path, kind: RunKind) -> Result<RunLock> {
        // Say who we are for the benefit of a second run, in one write so
        // that a reader sees all of it or none. The lock itself is what
        // excludes; the note tells a person who holds it, and a whole run
        // whether to wait (a `check --paused` holder). A look writes none.
        let note = match kind {
            RunKind::Probe => return Ok(RunLock { file }),
            RunKind::Check => String::new(),
            RunKind::Paused => format!("{PAUSED_NOTE}\n"),
        };
        let note = format!(
            "pid {}, started {}\n{note}",
            std::process::id(),
            crate::time::now_rfc3339(),
        );
        file.set_len(0)
            .and_then(|_| file.write_all(note.as_bytes()))
            .and_then(|_| file.flush())
            .map_err(|e| Error::io(format!("cannot write {}", path.display()), e))?;
        Ok(RunLock { file })
    }

    /// Take the run lock of `stats_dir` for a whole run, waiting while a
    /// `check --paused` run holds it (it is short, and the two are started
    /// together by a schedule), polling every [`PAUSED_POLL`], for `max`
    /// at the most. `waiting` is called once, when the wait begins. A lock
    /// held by any other run, or still held after `max`, is the
    /// [`LockedError`] at once.
    pub fn acquire_after_paused(
        stats_dir: &Path,
        max: std::time::Duration,
        waiting: impl FnOnce(&LockedError),
    ) -> Result<RunLock> {
        let start = std::time::Instant::now();
        let mut waiting = Some(waiting);
        loop {
            match RunLock::try_acquire(stats_dir) {
                Err(Error::Locked(e)) if e.paused && start.elapsed() < max => {
                    if let Some(w) = waiting.take() {
                        w(&e);
                    }
                    std::thread::sleep(PAUSED_POLL);
                }
                other => return other,
            }
        }
    }
}

/// How often [`RunLock::acquire_after_paused`] tries the lock again.
pub const PAUSED_POLL: std::time::Duration = std::time::Duration::from_millis(250);

fn open_lock_file(path: &Path) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| Error::io(format!("cannot open lock file {}", path.display()), e))
}

/// Replace `path` with `bytes` atomically: write a temporary file in the same
/// directory, fsync it, rename it over `path`, then fsync the directory. A
/// reader sees the old file or the new one, never a mix. The caller holds the
/// data lock.
///
/// The temporary name is unique per process and call
/// (`.{name}.tmp.{pid}.{counter}.{random}`) and created with `create_new`, so
/// two writers (threads of one process, or processes that do not share the
/// lock) never write into each other's temporary file; a stale one left by a
/// crash is never reused.
pub fn atomic_write(path: &Path, bytes: &[u8], _lock: &DataLock) -> Result<()> {
    atomic_write_unlocked(path, bytes)
}

/// [`atomic_write`] for files outside the stats directory's lock (a README, a
/// Prometheus textfile), where the rename alone is the guarantee.
pub fn atomic_write_unlocked(path: &Path, bytes: &[u8]) -> Result<()> {
    atomic_replace(path, bytes, None)
}

/// [`atomic_write_unlocked`] keeping a file's `permissions` (the file it
/// replaces, read before): the temporary file has them before a byte is
/// written, so the new file is never readable by more than the old one.
pub fn atomic_write_with_permissions(
    path: &Path,
    bytes: &[u8],
    permissions: fs::Permissions,
) -> Result<()> {
    atomic_replace(path, bytes, Some(permissions))
}

fn atomic_replace(path: &Path, bytes: &[u8], permissions: Option<fs::Permissions>) -> Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    let tmp = dir.join(temp_name(&name));
    // The message names the file the caller asked for, and says that it
    // was left as it was: the temporary file is an implementation detail.
    let ctx = |what: &str| {
        format!(
            "cannot write {} ({what} its temporary file {} failed; the file was left as it was)",
            path.display(),
            temp_shown(&tmp)
        )
    };
    let mut created = false;
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| Error::io(ctx("creating"), e))?;
        created = true;
        if let Some(p) = permissions {
            f.set_permissions(p)
                .map_err(|e| Error::io(ctx("setting the permissions of"), e))?;
        }
        f.write_all(bytes)
            .map_err(|e| Error::io(ctx("writing"), e))?;
        f.sync_all().map_err(|e| Error::io(ctx("syncing"), e))?;
        drop(f);
        fs::rename(&tmp, path).map_err(|e| Error::io(ctx("renaming"), e))
    })();
    // Only remove a file this call created: when `create_new` failed, the
    // name belongs to someone else.
    if result.is_err() && created {
        let _ = fs::remove_file(&tmp);
    }
    result?;
    // Persist the rename itself. Not every platform can open a directory.
    if let Ok(d) = File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// The temporary file's name alone (its directory is the file's).
fn temp_shown(tmp: &Path) -> String {
    tmp.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `.{name}.tmp.{pid}.{counter}.{random}`: the pid and counter make it
/// unique within this machine's live processes; the random part guards
/// against a pid reused after a crash left a temporary file behind.
fn temp_name(name: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let r: u32 = rand::random();
    format!(".{name}.tmp.{}.{n}.{r:08x}", std::process::id())
}

// Positioned I/O. Every reader and writer of the health log addresses the
// file by offset and never by its cursor, so one `File` can be read by two
// threads at once (see `healthlog::read`). Unix has `pread`/`pwrite`, which
// leave the cursor alone. Windows has `seek_read`/`seek_write`, which pass
// the offset with the call (so each call is still positioned, whatever other
// threads do) but leave the cursor after the bytes transferred; that is why
// nothing here, nor any caller, may rely on the cursor of a file it uses
// these helpers on.

/// Read up to `buf.len()` bytes at `off`; 0 means end of file.
#[cfg(unix)]
pub fn read_at(file: &File, buf: &mut [u8], off: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, off)
}

/// Read up to `buf.len()` bytes at `off`; 0 means end of file.
#[cfg(windows)]
pub fn read_at(file: &File, buf: &mut [u8], off: u64) -> io::Result<usize> {
    std::os::windows::fs::FileExt::seek_read(file, buf, off)
}

/// Write up to `bytes.len()` bytes at `off`.
#[cfg(unix)]
fn write_at(file: &File, bytes: &[u8], off: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::write_at(file, bytes, off)
}

/// Write up to `bytes.len()` bytes at `off`.
#[cfg(windows)]
fn write_at(file: &File, bytes: &[u8], off: u64) -> io::Result<usize> {
    std::os::windows::fs::FileExt::seek_write(file, bytes, off)
}

/// Read exactly `buf.len()` bytes at `off`, or fail with `UnexpectedEof`.
pub fn read_exact_at(file: &File, mut buf: &mut [u8], mut off: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match read_at(file, buf, off) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "file ended before the bytes expected",
                ));
            }
            Ok(n) => {
                buf = &mut buf[n..];
                off += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Write all of `bytes` at `off`.
pub fn write_all_at(file: &File, mut bytes: &[u8], mut off: u64) -> io::Result<()> {
    while !bytes.is_empty() {
        match write_at(file, bytes, off) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                bytes = &bytes[n..];
                off += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::{Seek, SeekFrom};

    use super::*;

    #[test]
    fn a_look_at_the_run_lock_writes_no_note_and_a_whole_run_writes_one() {
        let dir = tempfile::tempdir().unwrap();
        let note = || std::fs::read_to_string(dir.path().join(RUN_LOCK)).unwrap();
        let look = RunLock::try_acquire_as(dir.path(), RunKind::Probe).unwrap();
        assert_eq!(note(), "");
        // A look that does not let go is still a holder: a run that tried
        // again and again gives up, with no holder to name.
        match RunLock::try_acquire(dir.path()) {
            Err(Error::Locked(e)) => {
                assert_eq!(e.holder, "holder unknown");
                assert!(!e.paused);
            }
            other => panic!("{other:?}"),
        }
        drop(look);
        let run = RunLock::try_acquire(dir.path()).unwrap();
        assert!(note().starts_with(&format!("pid {}", std::process::id())));
        assert!(matches!(
            RunLock::try_acquire_as(dir.path(), RunKind::Probe),
            Err(Error::Locked(_))
        ));
        drop(run);
        assert_eq!(note(), "", "emptied when released");
    }

    #[test]
    fn positioned_io_ignores_and_survives_the_cursor() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        write_all_at(&file, b"hello, world", 0).unwrap();
        write_all_at(&file, b"W", 7).unwrap();
        // Wherever the cursor is, positioned reads see the offset asked for.
        file.seek(SeekFrom::Start(3)).unwrap();
        let mut buf = [0u8; 5];
        read_exact_at(&file, &mut buf, 7).unwrap();
        assert_eq!(&buf, b"World");
        read_exact_at(&file, &mut buf, 0).unwrap();
        assert_eq!(&buf, b"hello");
        assert_eq!(read_at(&file, &mut buf, 12).unwrap(), 0);
        let err = read_exact_at(&file, &mut buf, 10).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn two_threads_read_one_file_at_their_own_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..1u32 << 16).map(|i| (i % 251) as u8).collect();
        fs::write(&path, &data).unwrap();
        let file = File::open(&path).unwrap();
        let half = data.len() / 2;
        std::thread::scope(|s| {
            for part in [0..half, half..data.len()] {
                let (file, data) = (&file, &data);
                s.spawn(move || {
                    for at in part.clone().step_by(509) {
                        let mut b = [0u8; 7];
                        let n = b.len().min(part.end - at);
                        read_exact_at(file, &mut b[..n], at as u64).unwrap();
                        assert_eq!(&b[..n], &data[at..at + n]);
                    }
                });
            }
        });
    }

    fn temp_files(dir: &Path) -> Vec<String> {
        fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".tmp."))
            .collect()
    }

    #[test]
    fn temporary_names_are_unique_per_call() {
        let a = temp_name("model_state.json");
        let b = temp_name("model_state.json");
        assert_ne!(a, b);
        let pid = std::process::id().to_string();
        assert!(
            a.starts_with(&format!(".model_state.json.tmp.{pid}.")),
            "{a}"
        );
    }

    #[test]
    fn concurrent_writers_never_collide() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model_state.json");
        // Different sizes, so a mix of the two would show.
        let payloads: [Vec<u8>; 2] = [vec![b'a'; 200_000], vec![b'b'; 70_000]];
        fs::write(&path, &payloads[0]).unwrap();
        std::thread::scope(|s| {
            for p in &payloads {
                let path = &path;
                s.spawn(move || {
                    for _ in 0..50 {
                        atomic_write_unlocked(path, p).expect("no writer fails");
                    }
                });
            }
            // A reader sees one complete file or the other, never a mix.
            let (path, payloads) = (&path, &payloads);
            s.spawn(move || {
                for _ in 0..200 {
                    let got = fs::read(path).unwrap();
                    assert!(payloads.contains(&got), "torn read of {} bytes", got.len());
                }
            });
        });
        let got = fs::read(&path).unwrap();
        assert!(payloads.contains(&got));
        assert_eq!(temp_files(dir.path()), Vec::<String>::new());
    }

    #[test]
    fn a_failed_write_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        // A rename over a non-empty directory fails.
        let path = dir.path().join("taken");
        fs::create_dir(&path).unwrap();
        fs::write(path.join("inside"), "x").unwrap();
        let err = atomic_write_unlocked(&path, b"new").unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("renaming its temporary file"), "{msg}");
        assert!(
            msg.contains(&format!("cannot write {}", path.display())),
            "{msg}"
        );
        assert_eq!(err.exit_code(), crate::exit::IO);
        assert_eq!(temp_files(dir.path()), Vec::<String>::new());
        assert_eq!(fs::read(path.join("inside")).unwrap(), b"x");
    }
}
