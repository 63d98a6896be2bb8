//! Opening a SQLite database without writing to it: the SQLite store's
//! open of a database this process cannot write (a read-only file system,
//! a backup or snapshot mounted read-only, no write permission), and the
//! `dsh-session` reads (`inspect::with_sqlite`). Nothing here writes the
//! database, sets its journal mode or stamps its schema.
//!
//! A WAL database can be read read-only when its `-wal` and `-shm` files
//! exist and are readable, or when they can be created beside it. On
//! read-only media with neither, SQLite refuses ("unable to open database
//! file"); then, if the `-wal` is missing or empty (every commit is in the
//! database file, as a store that closed cleanly leaves it), the database
//! is opened `immutable`: SQLite reads the file alone, taking no lock.
//! A `-wal` that holds commits without a `-shm` is refused (`READ_ONLY`):
//! `immutable` would ignore those commits, and a read must not miss them.

use super::{schema_version, sql_err};
use crate::error::{Code, CoreError, CoreResult};
use crate::store::regular;
use rusqlite::{Connection, OpenFlags};
use std::path::Path;

/// Why this process cannot write the existing database at `path` (an OS
/// error: "Read-only file system", "Permission denied"), checked on the
/// file and on its directory (where SQLite makes its journal or `-wal`);
/// `None` when it can, or when nothing is there yet.
#[cfg(unix)]
pub fn unwritable(path: &str) -> Option<std::io::Error> {
    use std::os::unix::ffi::OsStrExt;
    if path == ":memory:" || path.is_empty() || std::fs::metadata(path).is_err() {
        return None;
    }
    let dir = match Path::new(path).parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    [Path::new(path), dir].into_iter().find_map(|p| {
        let c = std::ffi::CString::new(p.as_os_str().as_bytes()).ok()?;
        // SAFETY: `c` is a NUL-terminated path that outlives the call.
        (unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0).then(std::io::Error::last_os_error)
    })
}

#[cfg(not(unix))]
pub fn unwritable(path: &str) -> Option<std::io::Error> {
    let m = std::fs::metadata(path).ok()?;
    m.permissions().readonly().then(|| {
        std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "the file is read-only",
        )
    })
}

/// `READ_ONLY`: a write to the database at `path`, which this process
/// cannot write (`why`).
pub fn refused(path: &str, why: &str) -> CoreError {
    CoreError::new(
        Code::ReadOnly,
        format!(
            "session database at \"{path}\" is read-only ({why}): it is read, never written; nothing was written"
        ),
    )
}

/// `path` as a SQLite `file:` URI (`?`, `#` and `%` escaped).
pub fn file_uri(path: &str) -> String {
    let mut uri = String::from("file:");
    for c in path.chars() {
        match c {
            '?' => uri.push_str("%3f"),
            '#' => uri.push_str("%23"),
            '%' => uri.push_str("%25"),
            c => uri.push(c),
        }
    }
    uri
}

/// `NOT_A_FILE` when the database path holds something other than a
/// regular file (a FIFO there would hang SQLite's first read).
pub fn check_file(path: &str) -> CoreResult<()> {
    if path == ":memory:" || path.is_empty() {
        return Ok(());
    }
    regular::check_target(Path::new(path))
        .map_err(|e| e.into_error("cannot stat session database", Path::new(path)))
}

/// Whether the database's `-wal` file is missing or empty: every commit
/// is in the database file.
fn wal_is_empty(path: &str) -> bool {
    match std::fs::metadata(format!("{path}-wal")) {
        Ok(m) => m.len() == 0,
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

const FLAGS: OpenFlags = OpenFlags::SQLITE_OPEN_READ_ONLY.union(OpenFlags::SQLITE_OPEN_NO_MUTEX);

/// The database at `path` opened `immutable` (read-only, no lock taken,
/// nothing created beside it, the `-wal` ignored).
pub fn open_immutable(path: &str) -> rusqlite::Result<Connection> {
    let uri = format!("{}?immutable=1", file_uri(path));
    Connection::open_with_flags(uri, FLAGS | OpenFlags::SQLITE_OPEN_URI)
}

/// Open the database at `path` read-only (see the module's comment): a
/// plain read-only connection, else `immutable` when the `-wal` holds no
/// commit; its schema version checked.
pub fn open(path: &str) -> CoreResult<Connection> {
    check_file(path)?;
    let conn = match Connection::open_with_flags(path, FLAGS).and_then(|c| {
        // The first read is where a WAL database without a usable `-shm` fails.
        c.pragma_query_value(None, "user_version", |r| r.get::<_, i64>(0))?;
        Ok(c)
    }) {
        Ok(conn) => conn,
        Err(_) if wal_is_empty(path) => open_immutable(path).map_err(|e| sql_err(path, e))?,
        Err(e) => {
            return Err(CoreError::new(
                Code::ReadOnly,
                format!(
                    "session database at \"{path}\" cannot be read read-only: its -wal file holds \
                     commits, and SQLite reads them only with a -shm file, which this process can \
                     neither open nor create there ({e}); copy the database with its -wal file to a \
                     writable place to read it"
                ),
            ))
        }
    };
    conn.busy_timeout(super::BUSY_TIMEOUT)
        .map_err(|e| sql_err(path, e))?;
    schema_version(&conn, path)?;
    Ok(conn)
}

/// Whether the database file at `path` is in WAL mode (header bytes 18
/// and 19, the read and write versions, are 2).
fn is_wal(path: &str) -> bool {
    use std::io::Read;
    let mut head = [0u8; 20];
    regular::open_read(Path::new(path))
        .ok()
        .and_then(|mut f| f.read_exact(&mut head).ok())
        .is_some_and(|()| head[18] == 2 && head[19] == 2)
}

/// What changes when a writer commits to the database file: its size,
/// modification time and inode.
fn file_stamp(path: &str) -> Option<(u64, std::time::SystemTime, u64)> {
    let m = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let ino = std::os::unix::fs::MetadataExt::ino(&m);
    #[cfg(not(unix))]
    let ino = 0;
    Some((m.len(), m.modified().ok()?, ino))
}

/// Read the SQLite database at `path` with `read`, creating nothing beside
/// it when it can. A read-only connection to a WAL database creates its
/// `-wal` and `-shm` files and, unable to checkpoint, leaves them. So a WAL
/// database with no `-wal` (every commit is in the main file, no writer has
/// it open) is read `immutable`, and the read is kept only if no writer
/// came meanwhile (still no `-wal`, the file unchanged); otherwise, and for
/// a database a writer has open or in rollback-journal mode, it is read
/// through `open`.
pub fn with_sqlite<T>(path: &str, read: impl Fn(&Connection) -> CoreResult<T>) -> CoreResult<T> {
    check_file(path)?;
    let wal = format!("{path}-wal");
    if is_wal(path) && !Path::new(&wal).exists() {
        let before = file_stamp(path);
        if let Ok(conn) = open_immutable(path) {
            let result = read(&conn);
            drop(conn);
            if !Path::new(&wal).exists() && before.is_some() && file_stamp(path) == before {
                return result;
            }
        }
    }
    read(&open(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_uris_escape_what_sqlite_reads_as_a_query() {
        assert_eq!(file_uri("/a b/c?d#e%f.db"), "file:/a b/c%3fd%23e%25f.db");
    }
}
