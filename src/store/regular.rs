//! The one way a store (or the CLI's reads) opens a file: only a regular
//! file is accepted, and checking that never blocks. A FIFO, a socket or a
//! device put where a log or a database should be would otherwise hang the
//! open (a FIFO without a reader or writer blocks `open(2)` forever) or be
//! read as if it were a log. The file is opened with `O_NONBLOCK` (an open
//! that would block fails at once instead), `fstat`ed, refused with
//! `NOT_A_FILE` naming what is there, and only then switched back to
//! blocking, so reads and writes of a regular file behave as they always did.

use crate::error::{Code, CoreError};
use std::fs::{self, File, OpenOptions};
use std::io::ErrorKind;
use std::path::Path;

/// Why `open_regular` did not open the file.
#[derive(Debug)]
pub enum OpenError {
    /// The open itself failed (no such file, no permission, ...).
    Io(std::io::Error),
    /// Something other than a regular file is there (`NOT_A_FILE`).
    NotAFile(CoreError),
}

impl OpenError {
    /// The error as a store reports it: `IO` as `<what> "<path>": <error>`.
    pub fn into_error(self, what: &str, path: &Path) -> CoreError {
        match self {
            OpenError::Io(e) => CoreError::io(what, path, e),
            OpenError::NotAFile(e) => e,
        }
    }

    /// Whether nothing is at the path.
    pub fn is_not_found(&self) -> bool {
        matches!(self, OpenError::Io(e) if e.kind() == ErrorKind::NotFound)
    }
}

/// What a file type is, in a message ("a FIFO", "a directory", ...).
fn kind_of(t: fs::FileType) -> &'static str {
    if t.is_dir() {
        return "a directory";
    }
    if t.is_symlink() {
        return "a symbolic link";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_socket() {
            return "a socket";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
    }
    "a file of another kind"
}

/// `NOT_A_FILE`: `path` holds something of type `t`, not a regular file.
pub fn not_a_file(path: &Path, t: fs::FileType) -> CoreError {
    CoreError::new(
        Code::NotAFile,
        format!(
            "\"{}\" is {}, not a regular file; nothing was read or written",
            path.display(),
            kind_of(t)
        ),
    )
}

/// `NOT_A_FILE` when what `path` names (a symbolic link followed) exists and
/// is not a regular file. Never opens it (a SQLite database path is checked
/// so before SQLite opens it).
pub fn check_target(path: &Path) -> Result<(), OpenError> {
    match fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(m) => Err(OpenError::NotAFile(not_a_file(path, m.file_type()))),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(OpenError::Io(e)),
    }
}

/// Open `path` with `options`, without blocking, and only if it is a
/// regular file (a symbolic link to one is followed); the file is then
/// blocking as any other. (Windows opens do not block on what is there.)
pub fn open_regular(path: &Path, options: &OpenOptions) -> Result<File, OpenError> {
    let mut options = options.clone();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = match options.open(path) {
        Ok(f) => f,
        Err(e) => {
            // A FIFO without a reader refuses a non-blocking write open
            // (ENXIO), a socket any open, a directory a write open: say
            // what is there rather than the open's errno.
            return Err(match fs::metadata(path) {
                Ok(m) if !m.is_file() => OpenError::NotAFile(not_a_file(path, m.file_type())),
                _ => OpenError::Io(e),
            });
        }
    };
    let meta = file.metadata().map_err(OpenError::Io)?;
    if !meta.is_file() {
        return Err(OpenError::NotAFile(not_a_file(path, meta.file_type())));
    }
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        let fd = file.as_raw_fd();
        // SAFETY: `fd` is the open descriptor `file` owns for this whole block.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
            return Err(OpenError::Io(std::io::Error::last_os_error()));
        }
    }
    Ok(file)
}

/// `open_regular` for reading.
pub fn open_read(path: &Path) -> Result<File, OpenError> {
    open_regular(path, OpenOptions::new().read(true))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("dsh-regular-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn refused(r: Result<File, OpenError>) -> String {
        match r {
            Err(OpenError::NotAFile(e)) => {
                assert_eq!(e.code(), "NOT_A_FILE");
                e.message().to_string()
            }
            Err(OpenError::Io(e)) => panic!("an IO error, not NOT_A_FILE: {e}"),
            Ok(_) => panic!("opened"),
        }
    }

    #[test]
    fn refuses_what_is_not_a_regular_file_without_blocking() {
        let dir = scratch("kinds");
        let fifo = dir.join("log.jsonl");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // Neither a read open nor a write open of a FIFO with no peer blocks.
        let message = refused(open_read(&fifo));
        assert_eq!(
            message,
            format!(
                "\"{}\" is a FIFO, not a regular file; nothing was read or written",
                fifo.display()
            )
        );
        assert!(refused(open_regular(&fifo, OpenOptions::new().write(true))).contains("a FIFO"));
        assert!(refused(open_regular(
            &fifo,
            OpenOptions::new().read(true).write(true)
        ))
        .contains("a FIFO"));
        assert!(refused(open_read(&dir)).contains("is a directory"));
        assert!(refused(open_regular(&dir, OpenOptions::new().write(true))).contains("a directory"));
        assert!(refused(open_read(Path::new("/dev/null"))).contains("a character device"));
        assert!(matches!(check_target(&fifo), Err(OpenError::NotAFile(_))));
        assert!(matches!(check_target(&dir), Err(OpenError::NotAFile(_))));
        let link = dir.join("link");
        std::os::unix::fs::symlink(&fifo, &link).unwrap();
        assert!(refused(open_read(&link)).contains("a FIFO"));
        let entry = fs::symlink_metadata(&link).unwrap().file_type();
        assert!(not_a_file(&link, entry)
            .message()
            .contains("a symbolic link"));
        let missing = open_read(&dir.join("missing")).unwrap_err();
        assert!(missing.is_not_found());
        assert!(check_target(&dir.join("missing")).is_ok());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_regular_file_is_opened_blocking_and_reads_and_writes_as_usual() {
        use std::os::fd::AsRawFd;
        let dir = scratch("regular");
        let path = dir.join("log.jsonl");
        fs::write(&path, b"one\n").unwrap();
        let mut file = open_regular(&path, OpenOptions::new().read(true).append(true)).unwrap();
        let flags = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETFL) };
        assert_eq!(flags & libc::O_NONBLOCK, 0);
        file.write_all(b"two\n").unwrap();
        let mut text = String::new();
        open_read(&path).unwrap().read_to_string(&mut text).unwrap();
        assert_eq!(text, "one\ntwo\n");
        // A symbolic link to a regular file is followed.
        let link = dir.join("link");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert!(open_read(&link).is_ok());
        fs::remove_dir_all(&dir).unwrap();
    }
}
