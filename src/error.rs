//! The one error type of the core. Every variant carries the exact message the
//! contract (SPEC.md) quotes and a stable `code` that JavaScript sees as
//! `err.code`.

use thiserror::Error;

/// A rejected operation. Nothing was changed by the operation that returned it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CoreError {
    /// A value that does not survive `JSON.stringify` -> `JSON.parse` (SPEC 2).
    #[error("{0}")]
    NotLossless(String),
    /// A malformed event envelope or header record (SPEC 1, 3).
    #[error("{0}")]
    InvalidEnvelope(String),
    /// A malformed session header (SPEC 3).
    #[error("{0}")]
    InvalidHeader(String),
    /// `request/header-delta` or a `fallback` header (SPEC 7).
    #[error("{0}")]
    LegacyVocabulary(String),
    /// A surface transition that the fold rejects (SPEC 5).
    #[error("{0}")]
    Surface(String),
    /// A seed or log whose seqs are not contiguous from 0.
    #[error("{0}")]
    NotContiguous(String),
    /// An append from inside an observer of the same session (SPEC 4.4).
    #[error("{0}")]
    Reentrant(String),
    /// A development-check violation (SPEC 9).
    #[error("{0}")]
    Invariant(String),
    /// A fork boundary that is not a `turn/end` of the log.
    #[error("{0}")]
    InvalidBoundary(String),
    /// A stored log that cannot be loaded (SPEC 11).
    #[error("{0}")]
    CorruptLog(String),
    /// A header or database of a format this build does not read.
    #[error("{0}")]
    UnsupportedVersion(String),
    /// A session that is not stored.
    #[error("{0}")]
    NotFound(String),
    /// A session that is already tracked or stored.
    #[error("{0}")]
    AlreadyExists(String),
    /// An append batch that does not continue the stored log.
    #[error("{0}")]
    SeqMismatch(String),
    /// An argument of the wrong shape (an empty id, a bad address, ...).
    #[error("{0}")]
    InvalidArgument(String),
    /// A file-system failure, with the path it concerns.
    #[error("{0}")]
    Io(String),
    /// A SQLite failure, with the database it concerns.
    #[error("{0}")]
    Sqlite(String),
    /// A store used after `close()`.
    #[error("{0}")]
    Closed(String),
    /// A session whose write lease another store or process holds.
    #[error("{0}")]
    SessionInUse(String),
    /// A JSONL log renamed over, removed or changed under the store that has it open.
    #[error("{0}")]
    LogReplaced(String),
    /// A PostgreSQL writer whose lease another store took over: it may never write again.
    #[error("{0}")]
    LeaseLost(String),
    /// A PostgreSQL server that cannot be reached or refuses the connection.
    #[error("{0}")]
    PgConnect(String),
    /// A PostgreSQL failure (a statement timeout, a lost connection), with the database it concerns.
    #[error("{0}")]
    Pg(String),
    /// A failure inside this library (a block that does not decompress, a
    /// thread that panicked): a bug, never a made-up value.
    #[error("{0}")]
    Internal(String),
}

impl CoreError {
    /// The stable code JavaScript sees as `err.code`.
    pub fn code(&self) -> &'static str {
        match self {
            CoreError::NotLossless(_) => "NOT_LOSSLESS_JSON",
            CoreError::InvalidEnvelope(_) => "INVALID_EVENT",
            CoreError::InvalidHeader(_) => "INVALID_HEADER",
            CoreError::LegacyVocabulary(_) => "LEGACY_VOCABULARY",
            CoreError::Surface(_) => "INVALID_SURFACE",
            CoreError::NotContiguous(_) => "SEQ_NOT_CONTIGUOUS",
            CoreError::Reentrant(_) => "REENTRANT_APPEND",
            CoreError::Invariant(_) => "INVARIANT",
            CoreError::InvalidBoundary(_) => "INVALID_BOUNDARY",
            CoreError::CorruptLog(_) => "CORRUPT_LOG",
            CoreError::UnsupportedVersion(_) => "UNSUPPORTED_VERSION",
            CoreError::NotFound(_) => "SESSION_NOT_FOUND",
            CoreError::AlreadyExists(_) => "SESSION_ALREADY_EXISTS",
            CoreError::SeqMismatch(_) => "SEQ_MISMATCH",
            CoreError::InvalidArgument(_) => "INVALID_ARGUMENT",
            CoreError::Io(_) => "IO",
            CoreError::Sqlite(_) => "SQLITE",
            CoreError::Closed(_) => "STORE_CLOSED",
            CoreError::SessionInUse(_) => "SESSION_IN_USE",
            CoreError::LogReplaced(_) => "LOG_REPLACED",
            CoreError::LeaseLost(_) => "LEASE_LOST",
            CoreError::PgConnect(_) => "PG_CONNECT",
            CoreError::Pg(_) => "PG",
            CoreError::Internal(_) => "INTERNAL",
        }
    }

    /// The same error with its message wrapped by `f` (seed and load prefixes).
    pub fn map_message(self, f: impl FnOnce(String) -> String) -> CoreError {
        use CoreError::*;
        match self {
            NotLossless(m) => NotLossless(f(m)),
            InvalidEnvelope(m) => InvalidEnvelope(f(m)),
            InvalidHeader(m) => InvalidHeader(f(m)),
            LegacyVocabulary(m) => LegacyVocabulary(f(m)),
            Surface(m) => Surface(f(m)),
            NotContiguous(m) => NotContiguous(f(m)),
            Reentrant(m) => Reentrant(f(m)),
            Invariant(m) => Invariant(f(m)),
            InvalidBoundary(m) => InvalidBoundary(f(m)),
            CorruptLog(m) => CorruptLog(f(m)),
            UnsupportedVersion(m) => UnsupportedVersion(f(m)),
            NotFound(m) => NotFound(f(m)),
            AlreadyExists(m) => AlreadyExists(f(m)),
            SeqMismatch(m) => SeqMismatch(f(m)),
            InvalidArgument(m) => InvalidArgument(f(m)),
            Io(m) => Io(f(m)),
            Sqlite(m) => Sqlite(f(m)),
            Closed(m) => Closed(f(m)),
            SessionInUse(m) => SessionInUse(f(m)),
            LogReplaced(m) => LogReplaced(f(m)),
            LeaseLost(m) => LeaseLost(f(m)),
            PgConnect(m) => PgConnect(f(m)),
            Pg(m) => Pg(f(m)),
            Internal(m) => Internal(f(m)),
        }
    }
}

pub type CoreResult<T> = Result<T, CoreError>;
