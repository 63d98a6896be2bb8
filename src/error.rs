//! The one error type of the core, in the manner of rust-csv and redb: a
//! stable code (what JavaScript sees as `err.code`), the message the contract
//! quotes, where (the line of a JSONL log, when the error is about one), and
//! the I/O error behind it. `binding::js_error` is the one conversion into a
//! JavaScript error.

use std::sync::Arc;

/// The stable codes. Each names a kind of failure callers may branch on;
/// the message says what was wrong and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// A value that does not survive `JSON.stringify` -> `JSON.parse` (SPEC 2).
    NotLossless,
    /// A malformed event envelope (SPEC 1, 3).
    InvalidEnvelope,
    /// A malformed session header (SPEC 3).
    InvalidHeader,
    /// `request/header-delta` or a `fallback` header (SPEC 7).
    LegacyVocabulary,
    /// A surface transition that the fold rejects (SPEC 5).
    Surface,
    /// A seed or log whose seqs are not contiguous from 0.
    NotContiguous,
    /// An append from inside an observer of the same session (SPEC 4.4).
    Reentrant,
    /// A development-check violation (SPEC 9).
    Invariant,
    /// A fork boundary that is not a `turn/end` of the log.
    InvalidBoundary,
    /// The service's fork at an event other than a `turn/end` (SPEC 12.6).
    OpenTurn,
    /// A stored log that cannot be loaded (SPEC 11).
    CorruptLog,
    /// A header or database of a format this build does not read.
    UnsupportedVersion,
    /// A session that is not stored.
    NotFound,
    /// A session that is already tracked or stored, or another history.
    AlreadyExists,
    /// A batch that does not continue the stored log.
    SeqMismatch,
    /// An argument of the wrong shape (an empty id, a bad address, ...).
    InvalidArgument,
    /// A file-system failure, with the path it concerns.
    Io,
    /// A SQLite failure, with the database it concerns.
    Sqlite,
    /// A store used after `close()`.
    Closed,
    /// A session whose write lease another store or process holds.
    SessionInUse,
    /// A JSONL log renamed over, removed or changed under the store.
    LogReplaced,
    /// A path a store opens that holds something other than a regular file
    /// (a FIFO, a directory, a socket, a device).
    NotAFile,
    /// A write to a store whose database this process cannot write (a
    /// read-only file system, no write permission): it is only read.
    ReadOnly,
    /// A PostgreSQL writer whose lease another store took over.
    LeaseLost,
    /// A PostgreSQL server that cannot be reached or refuses the connection.
    PgConnect,
    /// A PostgreSQL failure (a statement timeout, a lost connection).
    Pg,
    /// A text longer than a JavaScript string can hold.
    TooLarge,
    /// A failure inside this library (a block that does not decompress, a
    /// thread that panicked): a bug, never a made-up value.
    Internal,
}

impl Code {
    /// Every code, in the order of the declaration (`index.d.ts` lists the same).
    pub const ALL: [Code; 28] = [
        Code::NotLossless,
        Code::InvalidEnvelope,
        Code::InvalidHeader,
        Code::LegacyVocabulary,
        Code::Surface,
        Code::NotContiguous,
        Code::Reentrant,
        Code::Invariant,
        Code::InvalidBoundary,
        Code::OpenTurn,
        Code::CorruptLog,
        Code::UnsupportedVersion,
        Code::NotFound,
        Code::AlreadyExists,
        Code::SeqMismatch,
        Code::InvalidArgument,
        Code::Io,
        Code::Sqlite,
        Code::Closed,
        Code::SessionInUse,
        Code::LogReplaced,
        Code::NotAFile,
        Code::ReadOnly,
        Code::LeaseLost,
        Code::PgConnect,
        Code::Pg,
        Code::TooLarge,
        Code::Internal,
    ];

    /// The code as JavaScript sees it.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::NotLossless => "NOT_LOSSLESS_JSON",
            Code::InvalidEnvelope => "INVALID_EVENT",
            Code::InvalidHeader => "INVALID_HEADER",
            Code::LegacyVocabulary => "LEGACY_VOCABULARY",
            Code::Surface => "INVALID_SURFACE",
            Code::NotContiguous => "SEQ_NOT_CONTIGUOUS",
            Code::Reentrant => "REENTRANT_APPEND",
            Code::Invariant => "INVARIANT",
            Code::InvalidBoundary => "INVALID_BOUNDARY",
            Code::OpenTurn => "OPEN_TURN",
            Code::CorruptLog => "CORRUPT_LOG",
            Code::UnsupportedVersion => "UNSUPPORTED_VERSION",
            Code::NotFound => "SESSION_NOT_FOUND",
            Code::AlreadyExists => "SESSION_ALREADY_EXISTS",
            Code::SeqMismatch => "SEQ_MISMATCH",
            Code::InvalidArgument => "INVALID_ARGUMENT",
            Code::Io => "IO",
            Code::Sqlite => "SQLITE",
            Code::Closed => "STORE_CLOSED",
            Code::SessionInUse => "SESSION_IN_USE",
            Code::LogReplaced => "LOG_REPLACED",
            Code::NotAFile => "NOT_A_FILE",
            Code::ReadOnly => "READ_ONLY",
            Code::LeaseLost => "LEASE_LOST",
            Code::PgConnect => "PG_CONNECT",
            Code::Pg => "PG",
            Code::TooLarge => "TOO_LARGE",
            Code::Internal => "INTERNAL",
        }
    }
}

/// A rejected operation. Nothing was changed by the operation that returned it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct CoreError {
    code: Code,
    message: String,
    /// The 1-based line of a JSONL log the error is about.
    line: Option<usize>,
    #[source]
    source: Option<Arc<std::io::Error>>,
}

impl PartialEq for CoreError {
    fn eq(&self, other: &CoreError) -> bool {
        (self.code, &self.message, self.line) == (other.code, &other.message, other.line)
    }
}

impl CoreError {
    pub fn new(code: Code, message: impl Into<String>) -> CoreError {
        CoreError {
            code,
            message: message.into(),
            line: None,
            source: None,
        }
    }

    /// `IO`: `<what> "<path>": <the error>`, keeping the error as the source.
    pub fn io(what: &str, path: &std::path::Path, e: std::io::Error) -> CoreError {
        CoreError {
            code: Code::Io,
            message: format!("{what} \"{}\": {e}", path.display()),
            line: None,
            source: Some(Arc::new(e)),
        }
    }

    /// `INTERNAL`: `what` panicked (a bug), with the panic's message.
    pub fn panicked(what: &str, panic: &(dyn std::any::Any + Send)) -> CoreError {
        let why = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        CoreError::new(
            Code::Internal,
            format!("{what} failed inside dsh-session-native (a bug): {why}"),
        )
    }

    /// The same error with `e` as its source (its `errno` reaches JS).
    pub fn with_source(mut self, e: std::io::Error) -> CoreError {
        self.source = Some(Arc::new(e));
        self
    }

    /// The same error, about line `line` of a JSONL log.
    pub fn at_line(mut self, line: usize) -> CoreError {
        self.line = Some(line);
        self
    }

    /// The stable code JavaScript sees as `err.code`.
    pub fn code(&self) -> &'static str {
        self.code.as_str()
    }

    pub fn kind(&self) -> Code {
        self.code
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    pub fn line(&self) -> Option<usize> {
        self.line
    }

    /// The OS error behind an `IO` error (`EACCES`, `ENOSPC`, ...), when known.
    pub fn os_error(&self) -> Option<i32> {
        self.source.as_ref().and_then(|e| e.raw_os_error())
    }

    /// The same error with its message wrapped by `f` (seed and load prefixes).
    pub fn map_message(mut self, f: impl FnOnce(String) -> String) -> CoreError {
        self.message = f(self.message);
        self
    }
}

pub type CoreResult<T> = Result<T, CoreError>;
