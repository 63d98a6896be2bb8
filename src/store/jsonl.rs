//! The JSONL store (SPEC 11): one file per session,
//! `<root>/cwd-<12 hex of sha256(cwd)>/<encoded id>.jsonl` (or `_no-cwd/`),
//! header on line 1, one event per line. The first append publishes a
//! complete, fsynced file with a hard link (never overwriting); later appends
//! write at the known end and fsync.
//!
//! An encoded id longer than `LITERAL_MAX` bytes names its file by a hash
//! (`stem`), so every file name stays within what file systems accept; the
//! header keeps the full id. The write lease of a session is the lock file
//! `<root>/.locks/<stem>.lock` (one per id, whatever its bucket).

use super::load::{self, Place, Repaired};
use super::regular::{self, open_read, open_regular};
use super::{persisted_collision, Backend, Batch, Holds, Key, Listed, LoadMode, Policy, Repairs};
use crate::error::{Code, CoreError, CoreResult};
use crate::executor;
use crate::log::{read_arriving, Cutter, Log, PIECE_BYTES};
use crate::session_header::SessionHeader;
use sha2::{Digest, Sha256};
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::mpsc;

pub struct JsonlBackend {
    root: PathBuf,
}

/// Where one session's log is. No descriptor is kept between operations:
/// a write opens the log, checks it is still the file the store left, and
/// closes it, so a store holds no descriptor per session it wrote (only
/// the lease, which on Linux is a lock of one byte of a file the store
/// keeps open once, see `lease`).
#[derive(Default)]
pub struct JsonlHandle {
    path: Option<PathBuf>,
    /// Bytes of the log that are durable and ours: the next write starts here.
    len: u64,
    /// The file's device and inode when the store read or wrote it.
    identity: Option<(u64, u64)>,
}

/// A file's device and inode.
#[cfg(unix)]
fn identity(m: &fs::Metadata) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Some((m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn identity(_m: &fs::Metadata) -> Option<(u64, u64)> {
    None
}

/// The longest encoded id that names its file literally: with `.jsonl`
/// and the temporary suffix the name stays far below the 255 bytes most
/// file systems allow.
pub const LITERAL_MAX: usize = 200;

/// The directory of the lock files, under the root (not a bucket name, so
/// `list` and `load` never look inside).
const LOCKS_DIR: &str = ".locks";

/// The file stem of an encoded id: the id itself, or for one longer than
/// `LITERAL_MAX`, `~~` and the SHA-256 of it in hex (66 bytes; `~~` never
/// occurs in an encoded id, so a stem names one id either way).
pub fn stem(file: &str) -> std::borrow::Cow<'_, str> {
    if file.len() <= LITERAL_MAX {
        return std::borrow::Cow::Borrowed(file);
    }
    let hex: String = Sha256::digest(file.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    std::borrow::Cow::Owned(format!("~~{hex}"))
}

/// The SPEC 11 file name encoding of an id, over its UTF-16 code units:
/// `[A-Za-z0-9._-]` stay, every other unit becomes `~XXXX`; `.` and `..`
/// are encoded whole. (JS refuses ids with a lone surrogate before they
/// reach here: a Rust string cannot hold one.)
pub fn encode_id(id: &str) -> String {
    match id {
        "." => return "~002E".into(),
        ".." => return "~002E~002E".into(),
        _ => {}
    }
    let mut out = String::with_capacity(id.len());
    for unit in id.encode_utf16() {
        match u8::try_from(unit) {
            Ok(b) if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') => {
                out.push(char::from(b))
            }
            _ => out.push_str(&format!("~{unit:04X}")),
        }
    }
    out
}

/// The lock file of the write lease of the log at `log` (a file named
/// `<stem>.jsonl` in a bucket of a store root); `None` for a file outside
/// a store's layout, which no store writes.
pub fn lease_path_of_log(log: &Path) -> Option<PathBuf> {
    let name = log.file_name()?.to_str()?.strip_suffix(".jsonl")?;
    let bucket = log.parent()?;
    if !bucket.file_name()?.to_str().is_some_and(is_bucket) {
        return None;
    }
    let root = bucket.parent()?;
    Some(root.join(LOCKS_DIR).join(format!("{}.lock", stem(name))))
}

/// Take the write lease of the log at `path` for a writer that is not a
/// store (`dsh-session repair`): `SESSION_IN_USE` while a store holds it;
/// `None` for a file outside a store's layout.
pub fn lease_log(path: &Path) -> CoreResult<Option<super::lease::Lease>> {
    let Some(lock) = lease_path_of_log(path) else {
        return Ok(None);
    };
    let subject = first_line(path)
        .and_then(|line| SessionHeader::from_line(line.strip_suffix('\r').unwrap_or(&line)).ok())
        .map_or_else(
            || format!("session log \"{}\"", path.display()),
            |h| super::lease::subject(h.id()),
        );
    super::lease::Leases::new()
        .take(&lock, &subject)
        .map(Some)
        .map_err(super::lease::Refused::into_error)
}

/// `LOG_REPLACED`: the log at `path` is not the file the store had open.
fn replaced(path: &Path, id: &str, what: &str) -> CoreError {
    CoreError::new(
        Code::LogReplaced,
        format!(
            "session log \"{}\" of session {} {what}; nothing was written (load the session again)",
            path.display(),
            crate::json::quote(id)
        ),
    )
}

const REMOVED: &str = "was removed while this store had it open";
const REPLACED: &str = "was replaced by another file while this store had it open";

/// Refuse to write through `file` unless it is still the log at `path`, as
/// long as this store left it (`len` bytes): a log renamed over or removed
/// under an open store would otherwise take acknowledged writes into a file
/// no load reads.
pub fn check_still_the_log(file: &File, path: &Path, len: u64, id: &str) -> CoreResult<()> {
    let open = file
        .metadata()
        .map_err(|e| CoreError::io("cannot stat session log", path, e))?;
    let now = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => return Err(replaced(path, id, REMOVED)),
        Err(e) => return Err(CoreError::io("cannot stat session log", path, e)),
    };
    if identity(&open) != identity(&now) {
        return Err(replaced(path, id, REPLACED));
    }
    if open.len() != len {
        return Err(replaced(
            path,
            id,
            &format!(
                "was changed outside this store (it holds {} bytes, this store left {len})",
                open.len()
            ),
        ));
    }
    Ok(())
}

/// The directory a session's log lives in, by its header's cwd.
pub fn bucket_name(cwd: Option<&str>) -> String {
    match cwd {
        None => "_no-cwd".to_string(),
        Some(cwd) => {
            let digest = Sha256::digest(cwd.as_bytes());
            let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
            format!("cwd-{hex}")
        }
    }
}

fn is_bucket(name: &str) -> bool {
    name == "_no-cwd"
        || name
            .strip_prefix("cwd-")
            .is_some_and(|h| h.len() == 12 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// An encoded id is `[A-Za-z0-9._~-]+` and never `.` or `..` (the JS side
/// encodes); anything else is refused before it reaches a path.
fn check_file_name(file: &str) -> CoreResult<()> {
    let ok = !file.is_empty()
        && file != "."
        && file != ".."
        && file
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'~'));
    if ok {
        Ok(())
    } else {
        Err(CoreError::new(
            Code::InvalidArgument,
            format!(
                "invalid encoded session file name {}",
                crate::json::quote(file)
            ),
        ))
    }
}

fn cwd_of(header: &SessionHeader) -> Option<String> {
    header.text("cwd")
}

#[cfg(unix)]
fn write_all_at(file: &File, buf: &[u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, buf, offset)
}

#[cfg(windows)]
fn write_all_at(file: &File, mut buf: &[u8], mut offset: u64) -> std::io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !buf.is_empty() {
        let n = file.seek_write(buf, offset)?;
        if n == 0 {
            return Err(std::io::Error::new(
                ErrorKind::WriteZero,
                "failed to write whole buffer",
            ));
        }
        buf = &buf[n..];
        offset += n as u64;
    }
    Ok(())
}

/// Make a directory entry change durable.
#[cfg(unix)]
fn sync_dir(dir: &Path) -> CoreResult<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| CoreError::io("cannot sync directory", dir, e))
}

#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> CoreResult<()> {
    Ok(())
}

/// A JSONL file split into its header and event records.
pub struct Split<'a> {
    pub header: SessionHeader,
    /// Byte offset just after the header line's newline.
    pub header_end: usize,
    /// Each record's text, `None` when it is not UTF-8 or is a final line
    /// without its newline (torn).
    pub records: Vec<Option<&'a str>>,
    /// Byte offset just after each record (its newline included).
    pub ends: Vec<usize>,
}

/// Split a JSONL log into its header and records.
pub fn split<'a>(bytes: &'a [u8]) -> CoreResult<Split<'a>> {
    let header_less = || CoreError::new(Code::CorruptLog, "empty or header-less session log");
    let whole = std::str::from_utf8(bytes).ok();
    let newline = |from: usize| match whole {
        Some(t) => t[from..].find('\n').map(|i| from + i),
        None => bytes[from..]
            .iter()
            .position(|&b| b == b'\n')
            .map(|i| from + i),
    };
    let text_of = |line: &'a [u8]| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        std::str::from_utf8(line).ok()
    };
    // A final line without its newline is torn, the header line included.
    let Some(first_end) = newline(0) else {
        return Err(header_less());
    };
    let first = &bytes[..first_end];
    if first.iter().all(u8::is_ascii_whitespace) {
        return Err(header_less());
    }
    let header = text_of(first)
        .ok_or_else(|| {
            CoreError::new(
                Code::CorruptLog,
                "corrupt session log: first line is not a session header",
            )
        })
        .and_then(SessionHeader::from_line)?;
    let header_end = first_end + 1;
    let mut records = Vec::new();
    let mut ends = Vec::new();
    let mut pos = header_end;
    while pos < bytes.len() {
        match newline(pos) {
            Some(end) => {
                records.push(text_of(&bytes[pos..end]));
                pos = end + 1;
                ends.push(pos);
            }
            None => {
                records.push(None);
                ends.push(bytes.len());
                pos = bytes.len();
            }
        }
    }
    Ok(Split {
        header,
        header_end,
        records,
        ends,
    })
}

/// Whether the fast path can take this log: it ends with a complete line
/// that is not blank. (`from_jsonl` tolerates blank lines at the end, which
/// a store drops as a torn tail, and rejects them anywhere else.)
fn ends_with_event(bytes: &[u8]) -> bool {
    let Some(body) = bytes.strip_suffix(b"\n") else {
        return false;
    };
    let last = body
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(body, |i| &body[i + 1..]);
    !last.iter().all(u8::is_ascii_whitespace)
}

/// Repair-load a JSONL log (SPEC 11) of session `id` (by default the id its
/// header names): the repaired log, the byte length of the kept part the
/// repair truncates the file to, and how many event records the file holds
/// (a torn tail included).
pub fn repair_bytes(bytes: &[u8], id: Option<&str>) -> CoreResult<(Repaired, u64, usize)> {
    if ends_with_event(bytes) {
        if let Ok(log) = Log::from_jsonl(bytes) {
            return whole(log, bytes.len(), id);
        }
    }
    repair_lines(bytes, id)
}

/// `repair_bytes` of the log in `file` (read from its start), as it is
/// read: a log whose every line is a complete, valid event (no torn or
/// blank line) is folded piece by piece while the rest is read
/// (`read_folding`); any other is read again whole and repaired line by
/// line. The repaired log, the byte length of its kept part, and the bytes
/// the file held.
fn read_repaired(file: &File, path: &Path, id: &str) -> CoreResult<(Repaired, u64, u64)> {
    let failed = |e| CoreError::io("cannot read session log", path, e);
    let (read, produced) = read_folding(file);
    let (ends, len) = produced.map_err(failed)?;
    if let (Ok(log), true) = (read, ends) {
        let (repaired, committed, _) = whole(log, len as usize, Some(id))?;
        return Ok((repaired, committed, len));
    }
    let mut bytes = Vec::new();
    let mut file = file;
    file.seek(SeekFrom::Start(0))
        .and_then(|_| file.read_to_end(&mut bytes))
        .map_err(failed)?;
    let (repaired, committed, _) = repair_lines(&bytes, Some(id))?;
    Ok((repaired, committed, bytes.len() as u64))
}

/// Bytes the loading thread asks the file for at a time.
const READ_BYTES: usize = 256 << 10;

/// Read `file` from where it is, in pieces of whole lines, on a thread of
/// its own while this one folds each piece as it arrives (the read and the
/// fold overlap; `read_arriving`). The log, or why the fold refused it;
/// and from the reading thread whether the file ends with a complete line
/// that is not blank (`ends_with_event`), and its bytes.
fn read_folding(file: &File) -> (CoreResult<Log>, std::io::Result<(bool, u64)>) {
    let (send, pieces) = mpsc::channel();
    let read_pieces = move || {
        // Taken in: the fold ends when this returns.
        let send = send;
        let mut cutter = Cutter::new(PIECE_BYTES);
        let mut buf = vec![0u8; READ_BYTES];
        let (mut ends, mut len) = (false, 0u64);
        let mut file = file;
        loop {
            let n = match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            len += n as u64;
            cutter.push(&buf[..n], |piece| {
                ends = ends_with_event(&piece);
                // A fold that is gone has failed: its error is reported.
                let _ = send.send(piece);
            });
        }
        let rest = cutter.rest();
        if !rest.is_empty() {
            ends = ends_with_event(&rest);
            let _ = send.send(rest);
        }
        Ok((ends, len))
    };
    if file.metadata().is_ok_and(|m| m.len() < PIECE_BYTES as u64) {
        // One piece: nothing to overlap, so no thread.
        let produced = read_pieces();
        return (read_arriving(&pieces), produced);
    }
    std::thread::scope(|scope| {
        let reader = match executor::scoped(scope, "dsh-store-read", read_pieces) {
            Ok(reader) => reader,
            Err(not_started) => {
                // No thread could start: the file is read first, here (its
                // pieces wait in the channel), then folded.
                let produced = (not_started.work)();
                return (read_arriving(&pieces), produced);
            }
        };
        let read = read_arriving(&pieces);
        let produced = reader
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the JSONL reading thread failed")));
        (read, produced)
    })
}

/// The repair of a log read whole (`len` bytes): only closers remain.
fn whole(log: Log, len: usize, id: Option<&str>) -> CoreResult<(Repaired, u64, usize)> {
    let id = id.unwrap_or(log.header().id()).to_string();
    let records = log.len();
    Ok((load::complete(&id, log)?, len as u64, records))
}

/// The line-by-line repair, for a log with a torn, blank or invalid line.
fn repair_lines(bytes: &[u8], id: Option<&str>) -> CoreResult<(Repaired, u64, usize)> {
    let Split {
        header,
        header_end,
        records,
        ends,
    } = split(bytes)?;
    let id = id.unwrap_or(header.id()).to_string();
    let repaired = load::repair(&id, header, &records, Place::Line)?;
    let committed = match repaired.preserved {
        0 => header_end,
        n => ends[n - 1],
    };
    Ok((repaired, committed as u64, records.len()))
}

/// The repair primitives on a log file read whole (`len` bytes, the kept
/// records ending at byte `committed`), checked first to be still the log
/// the load read; the load syncs what they wrote. Idempotent: after a crash
/// in between, the next load repairs the same way.
pub struct FileRepairs<'a> {
    file: &'a File,
    path: &'a Path,
    id: &'a str,
    committed: u64,
    /// The file's length: what was read, then what the repair left.
    len: u64,
    /// Whether anything was written (to sync).
    written: bool,
}

impl<'a> FileRepairs<'a> {
    pub fn new(file: &'a File, path: &'a Path, id: &'a str, committed: u64, len: u64) -> Self {
        FileRepairs {
            file,
            path,
            id,
            committed,
            len,
            written: false,
        }
    }

    /// Make what was written durable; the file's length then.
    pub fn finish(self) -> CoreResult<u64> {
        if self.written {
            self.file.sync_data().map_err(self.failed())?;
        }
        Ok(self.len)
    }

    fn first_write(&mut self) -> CoreResult<()> {
        if !self.written {
            check_still_the_log(self.file, self.path, self.len, self.id)?;
            self.written = true;
        }
        Ok(())
    }

    fn failed(&self) -> impl Fn(std::io::Error) -> CoreError + '_ {
        |e| CoreError::io("cannot repair session log", self.path, e)
    }
}

impl Repairs for FileRepairs<'_> {
    fn truncate(&mut self, _repaired: &Repaired) -> CoreResult<()> {
        self.first_write()?;
        self.file.set_len(self.committed).map_err(self.failed())?;
        self.len = self.committed;
        Ok(())
    }

    fn insert(&mut self, closers: &[String]) -> CoreResult<()> {
        self.first_write()?;
        if self.len != self.committed {
            // Whatever follows the kept records is not the log's.
            self.file.set_len(self.committed).map_err(self.failed())?;
            self.len = self.committed;
        }
        let mut lines = String::new();
        for c in closers {
            lines.push_str(c);
            lines.push('\n');
        }
        write_all_at(self.file, lines.as_bytes(), self.len).map_err(self.failed())?;
        self.len += lines.len() as u64;
        Ok(())
    }
}

/// The first line of a file, when it is complete and short enough to be a header.
fn first_line(path: &Path) -> Option<String> {
    const LIMIT: usize = 16 << 20;
    let mut file = open_read(path).ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = file.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        if let Some(i) = chunk[..n].iter().position(|&b| b == b'\n') {
            buf.extend_from_slice(&chunk[..i]);
            return String::from_utf8(buf).ok();
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > LIMIT {
            return None;
        }
    }
}

fn read_dir_entries(dir: &Path) -> CoreResult<Vec<fs::DirEntry>> {
    match fs::read_dir(dir) {
        Ok(entries) => entries
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| CoreError::io("cannot read directory", dir, e)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(CoreError::io("cannot read directory", dir, e)),
    }
}

impl JsonlBackend {
    pub fn new(root: PathBuf) -> JsonlBackend {
        JsonlBackend { root }
    }

    /// Where the log of a session with this cwd and encoded id lives.
    pub fn locate(&self, cwd: Option<&str>, file: &str) -> CoreResult<PathBuf> {
        check_file_name(file)?;
        Ok(self
            .root
            .join(bucket_name(cwd))
            .join(format!("{}.jsonl", stem(file))))
    }

    fn buckets(&self) -> CoreResult<Vec<PathBuf>> {
        let mut out: Vec<PathBuf> = read_dir_entries(&self.root)?
            .into_iter()
            .filter(|e| e.file_name().to_str().is_some_and(is_bucket))
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .collect();
        out.sort();
        Ok(out)
    }

    /// The stored log of `key` in any bucket.
    fn find(&self, key: &Key) -> CoreResult<Option<PathBuf>> {
        check_file_name(&key.file)?;
        let mut names = vec![format!("{}.jsonl", stem(&key.file))];
        // A long id's log written literally by an earlier build, when its
        // name fits a file system at all.
        if key.file.len() > LITERAL_MAX && key.file.len() + 6 <= 255 {
            names.push(format!("{}.jsonl", key.file));
        }
        let mut found = Vec::new();
        for bucket in self.buckets()? {
            for name in &names {
                let path = bucket.join(name);
                match fs::symlink_metadata(&path) {
                    Ok(m) if m.is_file() => found.push(path),
                    // Say what is there rather than that nothing is.
                    Ok(m) => return Err(regular::not_a_file(&path, m.file_type())),
                    Err(e) if e.kind() == ErrorKind::NotFound => {}
                    Err(e) => return Err(CoreError::io("cannot stat session log", &path, e)),
                }
            }
        }
        match found.len() {
            0 => Ok(None),
            1 => Ok(found.pop()),
            _ => Err(CoreError::new(
                Code::CorruptLog,
                format!(
                    "session {} has more than one log: {}",
                    crate::json::quote(&key.id),
                    found
                        .iter()
                        .map(|p| format!("\"{}\"", p.display()))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
        }
    }

    /// Create `dir` (and the root) when missing, durably.
    fn ensure_dir(&self, dir: &Path) -> CoreResult<()> {
        if dir.is_dir() {
            return Ok(());
        }
        let root_existed = self.root.is_dir();
        fs::create_dir_all(dir).map_err(|e| CoreError::io("cannot create directory", dir, e))?;
        if !root_existed {
            if let Some(parent) = self.root.parent().filter(|p| !p.as_os_str().is_empty()) {
                sync_dir(parent)?;
            }
        }
        sync_dir(&self.root)
    }
}

impl Backend for JsonlBackend {
    type Handle = JsonlHandle;

    fn exists(&self, key: &Key) -> CoreResult<bool> {
        Ok(self.find(key)?.is_some())
    }

    fn lease_path(&self, key: &Key) -> Option<PathBuf> {
        Some(
            self.root
                .join(LOCKS_DIR)
                .join(format!("{}.lock", stem(&key.file))),
        )
    }

    fn load(
        &self,
        key: &Key,
        handle: &mut JsonlHandle,
        mode: LoadMode,
        policy: Policy<'_>,
    ) -> CoreResult<Option<Repaired>> {
        let Some(path) = self.find(key)? else {
            return Ok(None);
        };
        // The load reads through the descriptor a repair writes with, so
        // what it read is the file it changes (a read-only file is read; a
        // write then fails).
        let writable = match open_regular(&path, OpenOptions::new().read(true).write(true)) {
            Ok(f) => Some(f),
            Err(regular::OpenError::NotAFile(e)) => return Err(e),
            Err(regular::OpenError::Io(_)) => None,
        };
        let file = match writable {
            Some(f) => f,
            None => open_read(&path).map_err(|e| e.into_error("cannot open session log", &path))?,
        };
        if handle.identity.is_some()
            && file.metadata().ok().as_ref().and_then(identity) != handle.identity
        {
            return Err(replaced(&path, &key.id, REPLACED));
        }
        let (repaired, committed, len) = read_repaired(&file, &path, &key.id)?;
        // A reader's first write checks the file is still as read (length
        // and identity: `FileRepairs::first_write`).
        let mut writes = FileRepairs::new(&file, &path, &key.id, committed, len);
        policy(&repaired, &mut writes)?;
        let len = writes.finish()?;
        if mode != LoadMode::Read {
            if let Some(dir) = path.parent() {
                // A first append killed after publishing its log leaves its
                // temporary file; the lease says no one is writing it now.
                let _ = fs::remove_file(dir.join(format!("{}.jsonl.tmp", stem(&key.file))));
                if mode == LoadMode::Continue {
                    // A writer reading again after a failed write: the log's
                    // directory entry may not be durable yet (a first
                    // append whose directory fsync failed after publishing).
                    sync_dir(dir)?;
                }
            }
        }
        *handle = JsonlHandle {
            path: Some(path),
            identity: file.metadata().ok().as_ref().and_then(identity),
            len,
        };
        Ok(Some(repaired))
    }

    fn create_log(
        &self,
        key: &Key,
        header: &SessionHeader,
        batch: &Batch,
        handle: &mut JsonlHandle,
    ) -> CoreResult<()> {
        let path = self.locate(cwd_of(header).as_deref(), &key.file)?;
        let dir = path.parent().unwrap_or(&self.root).to_path_buf();
        self.ensure_dir(&dir)?;
        // One temporary name per session: the writer holds the session's
        // lease, so one left here is a killed first append's; remove it.
        let tmp = dir.join(format!("{}.jsonl.tmp", stem(&key.file)));
        match fs::remove_file(&tmp) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(CoreError::io("cannot remove stale temporary file", &tmp, e)),
        }
        let mut head = header.line();
        head.push('\n');
        let file = open_regular(
            &tmp,
            OpenOptions::new().read(true).write(true).create_new(true),
        )
        .map_err(|e| e.into_error("cannot create session log", &tmp))?;
        let written = write_all_at(&file, head.as_bytes(), 0)
            .and_then(|()| write_all_at(&file, batch.lines.as_bytes(), head.len() as u64))
            .and_then(|()| file.sync_all())
            .map_err(|e| CoreError::io("cannot write session log", &tmp, e))
            .and_then(|()| match fs::hard_link(&tmp, &path) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == ErrorKind::AlreadyExists => Err(persisted_collision(&key.id)),
                Err(e) => Err(CoreError::io("cannot publish session log", &path, e)),
            });
        let removed = fs::remove_file(&tmp);
        written?;
        removed.map_err(|e| CoreError::io("cannot remove temporary file", &tmp, e))?;
        sync_dir(&dir)?;
        *handle = JsonlHandle {
            path: Some(path),
            identity: file.metadata().ok().as_ref().and_then(identity),
            len: (head.len() + batch.lines.len()) as u64,
        };
        Ok(())
    }

    /// The stored length is the store's: the lease and the file's identity
    /// and byte length (`check_still_the_log`) say the file is as it left it.
    fn append(
        &self,
        key: &Key,
        batch: &Batch,
        handle: &mut JsonlHandle,
    ) -> CoreResult<Result<(), Holds>> {
        let path = match &handle.path {
            Some(p) => p.clone(),
            None => self.find(key)?.ok_or_else(|| super::not_found(&key.id))?,
        };
        let file = match open_regular(&path, OpenOptions::new().write(true)) {
            Ok(f) => f,
            Err(e) if e.is_not_found() && handle.identity.is_some() => {
                return Err(replaced(&path, &key.id, REMOVED))
            }
            Err(e) => return Err(e.into_error("cannot open session log", &path)),
        };
        // The file at the path must be the one the store read or wrote,
        // ending where the store left it.
        let opened = file.metadata().ok().as_ref().and_then(identity);
        if handle.identity.is_some() && opened != handle.identity {
            return Err(replaced(&path, &key.id, REPLACED));
        }
        check_still_the_log(&file, &path, handle.len, &key.id)?;
        let result =
            write_all_at(&file, batch.lines.as_bytes(), handle.len).and_then(|()| file.sync_data());
        match result {
            Ok(()) => {
                handle.identity = opened;
                handle.path = Some(path);
                handle.len += batch.lines.len() as u64;
                Ok(Ok(()))
            }
            Err(e) => {
                // Leave no partial batch behind (a load would drop it as a
                // torn tail anyway).
                let _ = file.set_len(handle.len);
                Err(CoreError::io("cannot append to session log", &path, e))
            }
        }
    }

    fn list(&self) -> CoreResult<Vec<Listed>> {
        let mut out = Vec::new();
        for bucket in self.buckets()? {
            for entry in read_dir_entries(&bucket)? {
                let name = entry.file_name();
                let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(".jsonl")) else {
                    continue;
                };
                if check_file_name(stem).is_err() || !entry.file_type().is_ok_and(|t| t.is_file()) {
                    continue;
                }
                // A file whose first line is not a v0 header is not listed
                // (load reports what is wrong with it).
                let Some(header) = first_line(&entry.path()).and_then(|line| {
                    SessionHeader::from_line(line.strip_suffix('\r').unwrap_or(&line)).ok()
                }) else {
                    continue;
                };
                // A file is listed only under the name its header's id
                // encodes to (literally, or hashed when long).
                let encoded = encode_id(header.id());
                if self::stem(&encoded) != stem && encoded != stem {
                    continue;
                }
                out.push(Listed { header });
            }
        }
        Ok(out)
    }

    fn close(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    type Summary = Result<(usize, bool, u64, String), String>;

    /// What `read_repaired` made of `bytes` (in a file), and what the
    /// whole-buffer repair makes of them: kept records, whether torn, the
    /// kept length, a digest of the log's texts; or the error.
    fn both_reads(bytes: &[u8]) -> [Summary; 2] {
        let summary = |r: CoreResult<(Repaired, u64)>| {
            r.map(|(r, committed)| {
                let texts: Vec<String> = (0..r.log.len())
                    .map(|i| r.log.text(i).unwrap().to_string())
                    .collect();
                let digest = Sha256::digest(texts.join("\n").as_bytes());
                (r.preserved, r.torn, committed, format!("{digest:x}"))
            })
            .map_err(|e| e.to_string())
        };
        let dir = std::env::temp_dir().join(format!("dsh-read-repaired-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{}.jsonl", bytes.len()));
        fs::write(&path, bytes).unwrap();
        let file = File::open(&path).unwrap();
        let read = read_repaired(&file, &path, "s");
        fs::remove_file(&path).unwrap();
        if let Ok((_, _, len)) = &read {
            assert_eq!(*len, bytes.len() as u64);
        }
        [
            summary(read.map(|(r, committed, _)| (r, committed))),
            summary(repair_bytes(bytes, Some("s")).map(|(r, committed, _)| (r, committed))),
        ]
    }

    #[test]
    fn a_log_folded_as_it_is_read_repairs_as_the_whole_file_does() {
        // Over three pieces of PIECE_BYTES, so the fold takes pieces as they
        // arrive and the defects land in later pieces.
        let mut log = String::from(r#"{"type":"session","version":0,"id":"s","createdAt":1}"#);
        log.push('\n');
        let mut seq = 0;
        while log.len() < 3 * PIECE_BYTES + 1000 {
            log.push_str(&format!(
                r#"{{"type":"user/message","seq":{seq},"time":1,"data":{{"content":[{{"type":"text","text":"é {seq}"}}],"source":{{"kind":"user"}}}},"surfaceOp":"append"}}"#
            ));
            log.push_str(if seq % 5 == 0 { "\r\n" } else { "\n" });
            seq += 1;
        }
        let whole = log.as_bytes().to_vec();
        let torn = [&whole[..], br#"{"type":"user/mess"#].concat();
        let blank = [&whole[..], b"\n  \n"].concat();
        let no_newline = whole[..whole.len() - 1].to_vec();
        let mut invalid = whole.clone();
        invalid[2 * PIECE_BYTES + 10] = 0xff;
        // A line of a later piece that is not JSON, or not a valid event.
        let at = 2 * PIECE_BYTES + memchr::memchr(b'\n', &whole[2 * PIECE_BYTES..]).unwrap();
        let mut unparsable = whole.clone();
        unparsable[at + 1] = b'#';
        let mut invalid_event = whole.clone();
        invalid_event[at + 10] = b'#';
        // Shorter than a piece: read on the load's thread alone.
        let short_end = memchr::memchr(b'\n', &whole[10_000..]).unwrap() + 10_001;
        let short = whole[..short_end].to_vec();
        let short_torn = whole[..short_end + 20].to_vec();
        for (name, bytes) in [
            ("short", short),
            ("short torn", short_torn),
            ("whole", whole),
            ("torn", torn),
            ("blank", blank),
            ("no newline", no_newline),
            ("invalid UTF-8", invalid),
            ("unparsable", unparsable),
            ("invalid event", invalid_event),
        ] {
            let [read, repaired] = both_reads(&bytes);
            assert_eq!(read, repaired, "{name}");
            if name != "invalid event" {
                let kept = read.as_ref().map_or(0, |r| r.0);
                assert!(kept > 50, "{name}: {kept} records kept");
            }
        }
    }

    #[test]
    fn buckets_hash_the_cwd() {
        // sha256("/work") = 0f6a4b...; the bucket keeps 12 hex digits.
        let name = bucket_name(Some("/work"));
        assert!(name.starts_with("cwd-") && name.len() == 16);
        assert!(is_bucket(&name));
        assert_eq!(bucket_name(None), "_no-cwd");
    }

    #[test]
    fn long_encoded_ids_name_their_files_by_hash() {
        assert_eq!(encode_id("a/b~é😀"), "a~002Fb~007E~00E9~D83D~DE00");
        assert_eq!(
            (encode_id("."), encode_id("..")),
            ("~002E".into(), "~002E~002E".into())
        );
        let literal = "a".repeat(LITERAL_MAX);
        assert_eq!(stem(&literal), literal.as_str());
        let long = "a".repeat(LITERAL_MAX + 1);
        let hashed = stem(&long);
        assert!(hashed.starts_with("~~") && hashed.len() == 66);
        assert!(check_file_name(&hashed).is_ok());
        assert_ne!(stem(&"b".repeat(LITERAL_MAX + 1)), hashed);
        // The CLI finds the same lock file for a log as the store does.
        let root = Path::new("/r");
        let log = root.join("_no-cwd").join(format!("{hashed}.jsonl"));
        assert_eq!(
            lease_path_of_log(&log),
            Some(root.join(LOCKS_DIR).join(format!("{hashed}.lock")))
        );
        let literal_log = root.join("cwd-0123456789ab").join(format!("{long}.jsonl"));
        assert_eq!(
            lease_path_of_log(&literal_log),
            Some(root.join(LOCKS_DIR).join(format!("{hashed}.lock")))
        );
        assert_eq!(lease_path_of_log(Path::new("/tmp/x.jsonl")), None);
    }

    #[test]
    fn refuses_file_names_that_are_not_encoded_ids() {
        for bad in ["", ".", "..", "a/b", "a\\b", "a\0b", "é"] {
            assert!(check_file_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_file_name("~002E~002E").is_ok());
    }

    #[test]
    fn splits_records_and_marks_a_torn_final_line() {
        let text =
            b"{\"type\":\"session\",\"version\":0,\"id\":\"s\",\"createdAt\":1}\nA\r\n\xff\nB";
        let p = split(text).unwrap();
        assert_eq!(p.records, vec![Some("A"), None, None]);
        assert_eq!(p.ends, vec![p.header_end + 3, p.header_end + 5, text.len()]);
        assert_eq!(
            split(b"").err().map(|e| e.to_string()).as_deref(),
            Some("empty or header-less session log")
        );
        assert_eq!(
            split(b"{}\n").err().map(|e| e.to_string()).as_deref(),
            Some("corrupt session log: first line is not a session header")
        );
    }
}
