//! The write lease of one stored session: an exclusive, non-blocking
//! `flock` on a lock file of its own, held from a store's first write (or
//! load) of the session until `close()`, and released by the OS when the
//! process dies. A lock belongs to one open file description, so two store
//! objects of one process exclude each other as two processes do. Lock
//! files are never removed: removing one while another store waits on it
//! would let two stores lock two different files of one path.

use crate::error::{Code, CoreError};
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// A held lease; dropping it releases the lock.
#[derive(Debug)]
pub struct Lease {
    _file: File,
}

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

/// The pid the holder wrote into the lock file, when it reads as one.
fn holder_pid(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.take(32).read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

/// Take the lease of the lock file at `path` (its directory is created when
/// missing) for the session `subject` names (`session "ID"`), or say who
/// holds it.
pub fn acquire(path: &Path, subject: &str) -> Result<Lease, Refused> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).map_err(|e| io("cannot create lock directory", dir, e))?;
    }
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| io("cannot open lock file", path, e))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let holder = match holder_pid(&mut file) {
                Some(pid) if pid == std::process::id() => {
                    format!("another store of this process (pid {pid})")
                }
                Some(pid) => format!("process {pid}"),
                None => "another store".to_string(),
            };
            return Err(Refused::InUse(CoreError::new(
                Code::SessionInUse,
                format!(
                    "{subject} is in use: its write lease is held by {holder} (lock file \"{}\"); \
                 nothing was written",
                    path.display()
                ),
            )));
        }
        Err(TryLockError::Error(e)) => return Err(io("cannot lock", path, e)),
    }
    // The pid is a hint for the refused party; a failure to write it only
    // makes that message vaguer. Written over the last one at a fixed
    // width, never truncated (truncating a file to zero and rewriting it
    // makes ext4 start writing it back on close).
    let pid = format!("{:>10}\n", std::process::id());
    let _ = file
        .seek(SeekFrom::Start(0))
        .and_then(|_| file.write_all(pid.as_bytes()));
    Ok(Lease { _file: file })
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

    #[test]
    fn a_second_lease_of_one_file_is_refused_until_the_first_is_dropped() {
        let dir = std::env::temp_dir().join(format!("dsh-lease-{}", std::process::id()));
        let path = dir.join("locks").join("s.lock");
        let first = acquire(&path, "session \"s\"").unwrap();
        let err = acquire(&path, "session \"s\"").unwrap_err().into_error();
        assert_eq!(err.code(), "SESSION_IN_USE");
        let pid = std::process::id();
        assert!(
            err.to_string().starts_with(&format!(
                "session \"s\" is in use: its write lease is held by another store of this process (pid {pid})"
            )),
            "{err}"
        );
        drop(first);
        let again = acquire(&path, "session \"s\"").unwrap();
        drop(again);
        assert_eq!(fs::read_to_string(&path).unwrap(), format!("{pid:>10}\n"));
        fs::remove_dir_all(&dir).unwrap();
    }
}
