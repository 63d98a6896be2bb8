//! The write lease of one stored session: one writer per session, held from
//! a writer's first write (or writer's load) of the session until its store
//! closes, whatever the number of sessions, and released by the OS when the
//! process dies. Lock files are never removed: removing one while another
//! store waits on it would let two stores lock two different files of one
//! path.
//!
//! A session's lease is named by a lock path, `DIR/NAME.lock`. On Linux it
//! is an open-file-description lock (`F_OFD_SETLK`) of one byte of the file
//! `DIR/leases`, at an offset taken from the SHA-256 of `NAME`: a store
//! keeps one descriptor of that file however many sessions it writes, and
//! two stores of one process exclude each other as two processes do (the
//! lock belongs to each store's own open of the file). Elsewhere it is an
//! `flock` of `DIR/NAME.lock` itself, held open for as long as the lease is
//! (one descriptor per session written: the process's descriptor limit
//! bounds how many sessions one process writes at once there).
//!
//! Either way the holder writes its pid into `DIR/NAME.lock` after taking
//! the lease: a hint for the message of a refused party, never the lock.

use crate::error::{Code, CoreError};
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Why a lease was not taken.
#[derive(Debug)]
pub enum Refused {
    /// Another store (this process or another) holds it: `SESSION_IN_USE`.
    InUse(CoreError),
    /// The lock file could not be made or locked (a read-only directory, a
    /// file system without locks).
    Failed(CoreError),
}

impl Refused {
    pub fn into_error(self) -> CoreError {
        match self {
            Refused::InUse(e) | Refused::Failed(e) => e,
        }
    }
}

fn io(what: &str, path: &Path, e: std::io::Error) -> Refused {
    Refused::Failed(CoreError::io(what, path, e))
}

/// The leases one store takes: on Linux, the one open lock file of each
/// lock directory it has used (a store uses one).
#[derive(Default)]
pub struct Leases {
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    files: Mutex<HashMap<PathBuf, Arc<Ranges>>>,
}

/// One open lock file and the offsets this store holds in it: a
/// description's lock of a range it holds already would succeed again, so
/// a second take of a held lease is refused here.
#[derive(Debug)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
struct Ranges {
    file: File,
    held: Mutex<std::collections::HashSet<i64>>,
}

/// A held lease; dropping it releases the lock.
#[derive(Debug)]
pub struct Lease {
    #[cfg(target_os = "linux")]
    range: (Arc<Ranges>, i64),
    #[cfg(not(target_os = "linux"))]
    _file: File,
}

impl Leases {
    pub fn new() -> Leases {
        Leases::default()
    }

    /// Close the lock files (their leases were dropped with the sessions).
    pub fn clear(&self) {
        super::lock(&self.files).clear();
    }

    /// Take the lease named by the lock path `path` (its directory is
    /// created when missing) for the session `subject` names
    /// (`session "ID"`), or say who holds it.
    pub fn take(&self, path: &Path, subject: &str) -> Result<Lease, Refused> {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        if let Some(dir) = dir {
            fs::create_dir_all(dir).map_err(|e| io("cannot create lock directory", dir, e))?;
        }
        let lease = self.lock(path).map_err(|why| match why {
            Locking::Held => in_use(path, subject),
            Locking::Failed(e) => Refused::Failed(e),
        })?;
        // The pid is a hint for the refused party; a failure to write it
        // only makes that message vaguer. Written over the last one at a
        // fixed width, never truncated (truncating a file to zero and
        // rewriting it makes ext4 start writing it back on close).
        let pid = format!("{:>10}\n", std::process::id());
        if let Ok(mut hint) = open_lock_file(path) {
            let _ = hint.write_all(pid.as_bytes());
        }
        Ok(lease)
    }

    #[cfg(target_os = "linux")]
    fn lock(&self, path: &Path) -> Result<Lease, Locking> {
        let (ranges, offset) = self.range_of(path)?;
        let mut held = super::lock(&ranges.held);
        if held.contains(&offset) {
            return Err(Locking::Held);
        }
        match ofd_lock(&ranges.file, libc::F_OFD_SETLK, libc::F_WRLCK, offset) {
            Ok(_) => {
                held.insert(offset);
                drop(held);
                Ok(Lease {
                    range: (ranges, offset),
                })
            }
            Err(e) if is_conflict(&e) => Err(Locking::Held),
            Err(e) => Err(Locking::Failed(CoreError::io(
                "cannot lock",
                &ranges_file(path),
                e,
            ))),
        }
    }

    /// The open lock file of `path`'s directory and the offset of `path`'s lease in it.
    #[cfg(target_os = "linux")]
    fn range_of(&self, path: &Path) -> Result<(Arc<Ranges>, i64), Locking> {
        let file = ranges_file(path);
        let mut files = super::lock(&self.files);
        let open = match files.get(&file) {
            Some(open) => open.clone(),
            None => {
                let opened = open_lock_file(&file).map_err(Locking::Failed)?;
                let open = Arc::new(Ranges {
                    file: opened,
                    held: Mutex::default(),
                });
                files.insert(file, open.clone());
                open
            }
        };
        Ok((open, offset_of(path)))
    }

    #[cfg(not(target_os = "linux"))]
    fn lock(&self, path: &Path) -> Result<Lease, Locking> {
        let file = open_lock_file(path).map_err(Locking::Failed)?;
        match file.try_lock() {
            Ok(()) => Ok(Lease { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) => Err(Locking::Held),
            Err(std::fs::TryLockError::Error(e)) => {
                Err(Locking::Failed(CoreError::io("cannot lock", path, e)))
            }
        }
    }
}

enum Locking {
    Held,
    Failed(CoreError),
}

/// A lock file, opened without blocking: anything but a regular file there
/// (a FIFO would hang the open) is refused `NOT_A_FILE`.
fn open_lock_file(path: &Path) -> Result<File, CoreError> {
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    super::regular::open_regular(path, &options)
        .map_err(|e| e.into_error("cannot open lock file", path))
}

fn in_use(path: &Path, subject: &str) -> Refused {
    let holder = match hinted_pid(path) {
        Some(pid) if pid == std::process::id() => {
            format!("another store of this process (pid {pid})")
        }
        Some(pid) => format!("process {pid}"),
        None => "another store".to_string(),
    };
    Refused::InUse(CoreError::new(
        Code::SessionInUse,
        format!(
            "{subject} is in use: its write lease is held by {holder} (lock file \"{}\"); \
             nothing was written",
            path.display()
        ),
    ))
}

/// The pid the last holder wrote into the lock file, when it reads as one.
fn hinted_pid(path: &Path) -> Option<u32> {
    let mut text = String::new();
    let mut file = super::regular::open_read(path).ok()?;
    file.seek(SeekFrom::Start(0)).ok()?;
    file.take(32).read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

/// The pid of the process holding the lease named by `path`, seen without
/// taking it (a probe that locked it, however briefly, could make a
/// writer's attempt fail); `None` when it is free or cannot be seen
/// (outside Linux).
pub fn holder(path: &Path) -> Option<u32> {
    #[cfg(target_os = "linux")]
    {
        let file = super::regular::open_read(&ranges_file(path)).ok()?;
        let held = ofd_lock(&file, libc::F_OFD_GETLK, libc::F_WRLCK, offset_of(path)).ok()?;
        if held == libc::F_UNLCK {
            return None;
        }
        hinted_pid(path)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = path;
        None
    }
}

/// `DIR/leases`, the file holding the leases of `DIR/NAME.lock`.
#[cfg(target_os = "linux")]
fn ranges_file(path: &Path) -> PathBuf {
    path.with_file_name("leases")
}

/// Where in `DIR/leases` the lease of `DIR/NAME` is: 62 bits of the
/// SHA-256 of `NAME` (two sessions sharing one would only refuse each
/// other: never two writers of one).
#[cfg(target_os = "linux")]
fn offset_of(path: &Path) -> i64 {
    use sha2::{Digest, Sha256};
    let name = path
        .file_name()
        .map(|n| n.as_encoded_bytes())
        .unwrap_or_default();
    let digest = Sha256::digest(name);
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    (u64::from_be_bytes(first) >> 2) as i64
}

/// `fcntl(cmd)` of one byte at `offset` with lock type `kind`; for
/// `F_OFD_GETLK`, the type found (`F_UNLCK` when free).
#[cfg(target_os = "linux")]
fn ofd_lock(
    file: &File,
    cmd: libc::c_int,
    kind: libc::c_int,
    offset: i64,
) -> std::io::Result<libc::c_int> {
    use std::os::fd::AsRawFd;
    // SAFETY: a zeroed `flock` is a valid value of the plain C struct.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = kind as libc::c_short;
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    lock.l_start = offset as libc::off_t;
    lock.l_len = 1;
    // SAFETY: the descriptor is open for `file`'s life, and `lock` a valid
    // `flock` the call reads (and, for F_OFD_GETLK, writes).
    let done = unsafe { libc::fcntl(file.as_raw_fd(), cmd, &mut lock) };
    if done == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(lock.l_type as libc::c_int)
}

#[cfg(target_os = "linux")]
fn is_conflict(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EACCES))
}

#[cfg(target_os = "linux")]
impl Drop for Lease {
    fn drop(&mut self) {
        let (ranges, offset) = &self.range;
        let mut held = super::lock(&ranges.held);
        // Unlocking a range this description holds cannot conflict; if it
        // failed, the lock goes with the store's descriptor.
        let _ = ofd_lock(&ranges.file, libc::F_OFD_SETLK, libc::F_UNLCK, *offset);
        held.remove(offset);
    }
}

/// `session "ID"`, how lease messages name a session.
pub fn subject(id: &str) -> String {
    format!("session {}", crate::json::quote(id))
}

/// A file name for a lock that stays short whatever the key: the key's
/// SHA-256 in hex.
pub fn hashed_name(key: &str) -> PathBuf {
    use sha2::{Digest, Sha256};
    let hex: String = Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    PathBuf::from(format!("{hex}.lock"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("dsh-lease-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_second_lease_of_one_session_is_refused_until_the_first_is_dropped() {
        let dir = scratch("one");
        let path = dir.join("locks").join("s.lock");
        let (mine, other) = (Leases::new(), Leases::new());
        let first = mine.take(&path, "session \"s\"").unwrap();
        let err = other.take(&path, "session \"s\"").unwrap_err().into_error();
        assert_eq!(err.code(), "SESSION_IN_USE");
        let pid = std::process::id();
        assert!(
            err.to_string().starts_with(&format!(
                "session \"s\" is in use: its write lease is held by another store of this process (pid {pid})"
            )),
            "{err}"
        );
        // One store's own second attempt is refused too: a lease is taken once.
        assert!(mine.take(&path, "session \"s\"").is_err());
        if cfg!(target_os = "linux") {
            assert_eq!(holder(&path), Some(pid));
        }
        drop(first);
        assert_eq!(holder(&path), None);
        let again = other.take(&path, "session \"s\"").unwrap();
        drop(again);
        assert_eq!(fs::read_to_string(&path).unwrap(), format!("{pid:>10}\n"));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn many_leases_of_one_store_share_one_descriptor_and_stay_held() {
        let dir = scratch("many");
        let leases = Leases::new();
        let held: Vec<Lease> = (0..2000)
            .map(|i| leases.take(&dir.join(format!("{i}.lock")), "s").unwrap())
            .collect();
        if cfg!(target_os = "linux") {
            assert_eq!(crate::store::lock(&leases.files).len(), 1);
        }
        // Every one is still held against another store, the first too.
        let other = Leases::new();
        for i in [0, 1, 999, 1999] {
            assert!(matches!(
                other.take(&dir.join(format!("{i}.lock")), "s"),
                Err(Refused::InUse(_))
            ));
        }
        drop(held);
        assert!(other.take(&dir.join("0.lock"), "s").is_ok());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_where_a_lock_file_goes_is_refused_at_once() {
        let dir = scratch("fifo");
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.lock");
        let fifo = if cfg!(target_os = "linux") {
            dir.join("leases")
        } else {
            path.clone()
        };
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let err = Leases::new().take(&path, "s").unwrap_err().into_error();
        assert_eq!(err.code(), "NOT_A_FILE", "{err}");
        assert_eq!(holder(&path), None);
        fs::remove_dir_all(&dir).unwrap();
    }
}
