//! The PostgreSQL store (issue 13): the SPEC 11 tables in one schema of a
//! PostgreSQL database, written through a small pool of synchronous
//! connections (the binding runs every call on the libuv pool).
//!
//! One writer per session across hosts: a writer holds a lease row
//! (`leases`: holder, epoch, expiry) taken in a transaction, and every
//! write transaction first renews that row `WHERE epoch = <its epoch>`; when
//! that updates no row, another store took the session over and the write
//! fails with `LEASE_LOST`, its rows never committed. Plain rows and
//! `INSERT ... ON CONFLICT` work through a transaction-mode pooler and on
//! engines without advisory locks; the expiry uses the server's clock.
//!
//! Rows become events with the SQLite store's splice and column checks, and
//! are repaired by the shared load (`store::load`).

mod conn;
mod schema;
mod tls;

use super::load::Repaired;
use super::rows::{
    columns, header_of, header_row, read_rows, values_text, Cell, Splicer, EVENT_COLUMNS,
    HEADER_COLUMNS,
};
use super::{
    continues, lock, persisted_collision, seq_taken, Backend, Batch, Holds, Key, Listed, LoadMode,
    Policy, Repairs,
};
use crate::error::{Code, CoreError, CoreResult};
use crate::session_header::SessionHeader;
use conn::{Conn, ConnectFailure, Failure, Params};
use schema::{schema_sql, schema_tables_sql, Found, TABLES};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tls::TlsOptions;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;
use tokio_postgres::{Config, Row};
use tokio_postgres_rustls::MakeRustlsConnect;

/// A connection idle in the pool this long is checked (one empty query)
/// before use: the server may have closed it (a restart, an idle timeout,
/// a pooler recycling it). Sooner, the check would cost a round trip per
/// operation of a busy store.
const IDLE_CHECK: Duration = Duration::from_secs(1);

/// How much longer than `statement_timeout` the client waits for an
/// answer: the server's own timeout answers first (a `PG` error naming it)
/// whenever the server is running at all.
const DEADLINE_MARGIN: Duration = Duration::from_millis(500);

/// The `schema_version` row of `dsh_meta` this build reads and writes.
pub const SCHEMA_VERSION: i64 = 1;
/// At most this much event text in one INSERT (`insert_events`).
const INSERT_BYTES: usize = 8 << 20;

/// The store's options (see `PostgresSessionStore` in index.d.ts).
#[derive(Debug, Clone)]
pub struct PgOptions {
    pub connection_string: String,
    pub schema: String,
    pub pool_size: usize,
    pub lease: Duration,
    pub statement_timeout: Duration,
    pub connect_timeout: Duration,
}

impl PgOptions {
    /// The defaults of `PostgresSessionStore`'s options (`schema`, `leaseMs`,
    /// `statementTimeoutMs`, `connectTimeoutMs`, `poolSize`): their one home
    /// (the CLI's addresses read `SCHEMA` through `postgresDefaultSchema()`).
    pub const SCHEMA: &'static str = "public";
    pub const LEASE: Duration = Duration::from_secs(30);
    pub const STATEMENT_TIMEOUT: Duration = Duration::from_secs(30);
    pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
    pub const POOL_SIZE: usize = 4;

    /// Options for `connection_string` and `schema`, every other one its default.
    pub fn new(connection_string: String, schema: String) -> PgOptions {
        PgOptions {
            connection_string,
            schema,
            pool_size: PgOptions::POOL_SIZE,
            lease: PgOptions::LEASE,
            statement_timeout: PgOptions::STATEMENT_TIMEOUT,
            connect_timeout: PgOptions::CONNECT_TIMEOUT,
        }
    }
}

/// What the store keeps per session: the epoch of the lease it holds.
#[derive(Debug, Default)]
pub struct PgHandle {
    epoch: Option<i64>,
    /// Why the load that made this handle left the session to another
    /// writer (`SESSION_IN_USE`), if it did.
    refused: Option<CoreError>,
    /// The lease was taken over: this handle never writes again.
    lost: bool,
}

struct PoolState {
    /// Idle connections and when each was returned.
    idle: Vec<(Conn, Instant)>,
    /// Connections open or being opened, idle ones included.
    open: usize,
    closed: bool,
}

/// A connection of the pool, returned to it when dropped (unless broken).
struct Pooled<'a> {
    backend: &'a PostgresBackend,
    conn: Option<Conn>,
    /// Idle in the pool for a while (the server may have closed it since).
    reused: bool,
}

impl Pooled<'_> {
    fn conn(&mut self) -> CoreResult<&mut Conn> {
        self.conn
            .as_mut()
            .ok_or_else(|| CoreError::new(Code::Closed, "session store is closed"))
    }
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        let mut state = lock(&self.backend.pool);
        match self.conn.take() {
            Some(conn) if conn.usable() && !state.closed => state.idle.push((conn, Instant::now())),
            _ => state.open = state.open.saturating_sub(1),
        }
        drop(state);
        self.backend.freed.notify_one();
    }
}

pub struct PostgresBackend {
    config: Config,
    tls: TlsOptions,
    /// The TLS configuration, built (its files read) on the first connection.
    connector: Mutex<Option<MakeRustlsConnect>>,
    options: PgOptions,
    /// The schema name quoted as an SQL identifier.
    schema: String,
    /// How messages name the database (no password).
    name: String,
    /// The host names a TLS message names (the first one).
    host_for_tls: String,
    /// This store's lease holder id (unique per store object) without its
    /// process space, host and pid.
    holder_base: String,
    holder: OnceLock<String>,
    host: String,
    pid: i64,
    pool: Mutex<PoolState>,
    freed: Condvar,
    /// Whether the schema was created or checked.
    ready: Mutex<bool>,
    /// Sessions whose lease this store lost: it never writes them again
    /// (a later load reads them as a reader).
    lost: Mutex<std::collections::HashSet<String>>,
    /// A reader (the CLI): creates nothing, takes no lease, writes nothing.
    read_only: bool,
}

/// A quoted SQL identifier.
fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The most bytes of a name PostgreSQL keeps (`NAMEDATALEN` - 1); it
/// truncates longer ones, so two schemas sharing their first 63 bytes
/// would be one.
const NAME_MAX_BYTES: usize = 63;

/// A schema name the store can use as given, refused before connecting
/// (the store and the CLI's readers both start here). The store derives no
/// other identifier from it: its tables and constraints have fixed names
/// inside the schema.
fn check_schema(schema: &str) -> CoreResult<()> {
    if schema.is_empty() || schema.contains('\0') {
        return Err(schema_refused());
    }
    if schema.len() > NAME_MAX_BYTES {
        return Err(CoreError::new(
            Code::InvalidArgument,
            format!(
                "PostgresSessionStore schema {} is {} bytes of UTF-8; PostgreSQL keeps at most {NAME_MAX_BYTES} bytes of a name (it would truncate this one)",
                quoted(schema),
                schema.len()
            ),
        ));
    }
    Ok(())
}

/// `INVALID_ARGUMENT`: a schema option that is not a name PostgreSQL keeps
/// (the one home of that rule: the binding refuses a value that is not a
/// string with it too).
pub fn schema_refused() -> CoreError {
    CoreError::new(
        Code::InvalidArgument,
        "PostgresSessionStore schema must be a non-empty string without NUL",
    )
}

/// This machine's host name (lease holders name it).
fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates
    // what fits (the last byte stays 0).
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len() - 1) };
    if rc != 0 {
        return "unknown-host".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// Which kernel and PID namespace this process's pids belong to: the boot
/// id and the PID namespace's inode (`<boot id>.<inode>`), or `None` where
/// they cannot be read. Two processes whose pids can be compared (a holder
/// seen dead by `kill(pid, 0)` is dead) have the same one; a process of
/// another container sharing the host's name and network does not.
fn process_space() -> Option<&'static str> {
    static SPACE: OnceLock<Option<String>> = OnceLock::new();
    SPACE
        .get_or_init(|| {
            let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
            let ns = std::fs::read_link("/proc/self/ns/pid").ok()?;
            let ns = ns
                .to_str()?
                .strip_prefix("pid:[")?
                .strip_suffix(']')?
                .to_string();
            let boot = boot.trim();
            (!boot.is_empty() && ns.bytes().all(|b| b.is_ascii_digit()))
                .then(|| format!("{boot}.{ns}"))
        })
        .as_deref()
}

/// The process space a lease holder id names (after its last `@`).
fn space_of(holder: &str) -> Option<&str> {
    holder
        .rsplit_once('@')
        .map(|(_, s)| s)
        .filter(|s| !s.is_empty())
}

/// Whether process `pid` of this host still runs (a dead holder's lease is
/// taken over at once instead of after its expiry).
fn process_alive(pid: i64) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return true;
    };
    if pid <= 0 {
        return true;
    }
    // SAFETY: signal 0 only checks that the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

fn new_holder(host: &str, pid: i64) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{host}/{pid}/{nanos:x}.{n}")
}

/// The id and message of a session, as other stores' messages name it.
fn quoted(id: &str) -> String {
    crate::json::quote(id)
}

/// PostgreSQL text never holds U+0000: such an id is refused (the JSONL
/// and SQLite stores hold it; event texts escape it, so only ids matter).
fn check_id(id: &str) -> CoreResult<()> {
    if id.contains('\0') {
        return Err(CoreError::new(
            Code::InvalidArgument,
            format!(
                "session id {} contains U+0000, which PostgreSQL text cannot hold",
                quoted(id)
            ),
        ));
    }
    Ok(())
}

/// Who holds a lease, as a refusal names it.
struct Holder {
    /// The holder's id (its process space after `@`).
    id: String,
    host: String,
    pid: i64,
    epoch: i64,
    /// Seconds until it expires (negative: expired).
    expires_in: f64,
}

impl Holder {
    fn of(row: &Row) -> Holder {
        Holder {
            id: row.try_get(0).unwrap_or_default(),
            host: row.try_get(1).unwrap_or_default(),
            pid: row.try_get(2).unwrap_or_default(),
            epoch: row.try_get(3).unwrap_or_default(),
            expires_in: row.try_get(4).unwrap_or_default(),
        }
    }
}

/// An open transaction on a pooled connection: every statement waits at
/// most the statement deadline.
struct Tx<'a> {
    backend: &'a PostgresBackend,
    conn: &'a mut Conn,
}

impl Tx<'_> {
    fn query(&mut self, sql: &str, params: &Params<'_>) -> CoreResult<Vec<Row>> {
        let deadline = self.backend.statement_deadline();
        self.conn
            .query(sql, params, deadline)
            .map_err(|f| self.backend.fail(f))
    }

    /// `query`, each row handed to `each` as it arrives; how many rows.
    fn query_each(
        &mut self,
        sql: &str,
        params: &Params<'_>,
        each: impl FnMut(&Row),
    ) -> CoreResult<usize> {
        let deadline = self.backend.statement_deadline();
        self.conn
            .query_each(sql, params, deadline, each)
            .map_err(|f| self.backend.fail(f))
    }

    /// The first row, if any (every caller selects by a key).
    fn query_opt(&mut self, sql: &str, params: &Params<'_>) -> CoreResult<Option<Row>> {
        Ok(self.query(sql, params)?.into_iter().next())
    }

    fn query_one(&mut self, sql: &str, params: &Params<'_>) -> CoreResult<Row> {
        self.query_opt(sql, params)?.ok_or_else(|| {
            CoreError::new(
                Code::Pg,
                format!(
                    "{}: a statement that returns one row returned none",
                    self.backend.name
                ),
            )
        })
    }

    fn batch(&mut self, sql: &str) -> CoreResult<()> {
        let deadline = self.backend.statement_deadline();
        self.conn
            .batch(sql, deadline)
            .map_err(|f| self.backend.fail(f))
    }
}

impl PostgresBackend {
    pub fn new(options: PgOptions) -> CoreResult<PostgresBackend> {
        check_schema(&options.schema)?;
        let (rest, tls) = tls::split(&options.connection_string)?;
        let mut config = Config::from_str(&rest).map_err(|e| {
            CoreError::new(Code::InvalidArgument, format!(
                "PostgresSessionStore connectionString is not a valid PostgreSQL connection string: {e}"
            ))
        })?;
        config.ssl_mode(tls.client_mode());
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(options.connect_timeout);
        }
        // A server that vanishes without closing the connection is noticed
        // by TCP keepalives; one that stops answering, by the deadlines.
        config
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(10))
            .keepalives_interval(Duration::from_secs(5))
            .keepalives_retries(3)
            .tcp_user_timeout(options.statement_timeout + options.connect_timeout);
        let hosts: Vec<String> = config
            .get_hosts()
            .iter()
            .zip(config.get_ports().iter().chain(std::iter::repeat(&5432)))
            .map(|(h, p)| match h {
                tokio_postgres::config::Host::Tcp(h) => format!("{h}:{p}"),
                #[cfg(unix)]
                tokio_postgres::config::Host::Unix(path) => format!("{}:{p}", path.display()),
            })
            .collect();
        let host_for_tls = match config.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
            _ => "localhost".to_string(),
        };
        let name = format!(
            "PostgreSQL database \"{}\" on {} (schema \"{}\")",
            config.get_dbname().or(config.get_user()).unwrap_or(""),
            if hosts.is_empty() {
                "localhost".to_string()
            } else {
                hosts.join(",")
            },
            options.schema
        );
        let host = host_name();
        let pid = i64::from(std::process::id());
        Ok(PostgresBackend {
            schema: ident(&options.schema),
            holder_base: new_holder(&host, pid),
            holder: OnceLock::new(),
            host,
            pid,
            name,
            host_for_tls,
            config,
            tls,
            connector: Mutex::new(None),
            pool: Mutex::new(PoolState {
                idle: Vec::new(),
                open: 0,
                closed: false,
            }),
            freed: Condvar::new(),
            ready: Mutex::new(false),
            lost: Mutex::new(std::collections::HashSet::new()),
            read_only: false,
            options,
        })
    }

    /// A reader of the store's tables (`dsh-session` commands): it checks
    /// their version and reads; a schema without them holds no session.
    pub fn reader(options: PgOptions) -> CoreResult<PostgresBackend> {
        Ok(PostgresBackend {
            read_only: true,
            ..PostgresBackend::new(options)?
        })
    }

    /// This store's lease holder id: unique per store object, naming its
    /// host, pid and process space (`host/pid/unique@space`).
    fn holder(&self) -> &str {
        self.holder.get_or_init(|| match process_space() {
            Some(space) => format!("{}@{space}", self.holder_base),
            None => self.holder_base.clone(),
        })
    }

    /// Whether a lease holder is a process whose pid this process can
    /// check: the same kernel (boot) and PID namespace.
    fn same_space(&self, h: &Holder) -> bool {
        matches!((space_of(&h.id), process_space()), (Some(a), Some(b)) if a == b)
    }

    /// Session `id` read and repaired in memory, with how many rows it
    /// has; `None` when it is not stored. Writes nothing.
    pub fn read_log(&self, id: &str) -> CoreResult<Option<(Repaired, usize)>> {
        check_id(id)?;
        self.tx_then(|tx| self.read(tx, id), false)
    }

    /// How long the client waits for the answer to one statement.
    fn statement_deadline(&self) -> Duration {
        self.options.statement_timeout + DEADLINE_MARGIN
    }

    /// How long opening a connection may take, all of it: the connect
    /// timeout (the URL's `connect_timeout`, else `connectTimeoutMs`) for
    /// each host the connection string names.
    fn connect_deadline(&self) -> Duration {
        let each = self
            .config
            .get_connect_timeout()
            .copied()
            .unwrap_or(self.options.connect_timeout);
        each * self.config.get_hosts().len().max(1) as u32
    }

    /// A PostgreSQL error as a `CoreError` naming the database.
    fn err(&self, e: tokio_postgres::Error) -> CoreError {
        if let Some(db) = e.as_db_error() {
            if db.code() == &SqlState::QUERY_CANCELED || db.code() == &SqlState::LOCK_NOT_AVAILABLE
            {
                return CoreError::new(
                    Code::Pg,
                    format!(
                        "{}: statement timed out after {} ms ({})",
                        self.name,
                        self.options.statement_timeout.as_millis(),
                        db.message()
                    ),
                );
            }
            return CoreError::new(
                Code::Pg,
                format!(
                    "{}: {} (SQLSTATE {})",
                    self.name,
                    db.message(),
                    db.code().code()
                ),
            );
        }
        CoreError::new(Code::Pg, format!("{}: {}", self.name, with_sources(&e)))
    }

    /// A failed wait as a `CoreError`.
    fn fail(&self, f: Failure) -> CoreError {
        match f {
            Failure::Pg(e) => self.err(e),
            Failure::TimedOut(after) => CoreError::new(Code::Pg, self.no_answer(after)),
        }
    }

    fn no_answer(&self, after: Duration) -> String {
        format!(
            "{}: no answer from the server within {} ms (statementTimeoutMs {} plus {} ms); the connection was dropped",
            self.name,
            after.as_millis(),
            self.options.statement_timeout.as_millis(),
            DEADLINE_MARGIN.as_millis()
        )
    }

    /// A new connection: TCP, TLS, authentication and a first query, all
    /// within the connect deadline.
    fn connect(&self) -> CoreResult<Conn> {
        let cannot = |why: String| {
            CoreError::new(
                Code::PgConnect,
                format!("cannot connect to {}: {why}", self.name),
            )
        };
        let connector = {
            let mut cached = lock(&self.connector);
            match &*cached {
                Some(c) => Some(c.clone()),
                None => match self.tls.connector() {
                    Ok(Some(c)) => {
                        *cached = Some(c.clone());
                        Some(c)
                    }
                    Ok(None) => None,
                    Err(e) => return Err(cannot(e.to_string())),
                },
            }
        };
        let deadline = self.connect_deadline();
        Conn::open(&self.config, connector, deadline).map_err(|f| match f {
            ConnectFailure::Pg(e) => cannot(match self.tls.explain(&e, &self.host_for_tls) {
                Some(why) => why,
                None => with_sources(&e),
            }),
            ConnectFailure::TimedOut(after) => cannot(format!(
                "no answer within {} ms (connectTimeoutMs covers TCP, TLS, authentication and a first query)",
                after.as_millis()
            )),
            ConnectFailure::Setup(why) => cannot(why),
        })
    }

    /// A connection: an idle one, a new one while the pool has room, else
    /// the first one returned (waiting at most a statement and a connect).
    fn get(&self) -> CoreResult<Pooled<'_>> {
        let wait = self.statement_deadline() + self.connect_deadline();
        let deadline = Instant::now() + wait;
        let mut state = lock(&self.pool);
        loop {
            if state.closed {
                return Err(CoreError::new(Code::Closed, "session store is closed"));
            }
            if let Some((conn, since)) = state.idle.pop() {
                return Ok(Pooled {
                    backend: self,
                    conn: Some(conn),
                    reused: since.elapsed() >= IDLE_CHECK,
                });
            }
            if state.open < self.options.pool_size {
                state.open += 1;
                drop(state);
                return self.opened();
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(CoreError::new(
                    Code::Pg,
                    format!(
                        "{}: no pooled connection was free within {} ms (poolSize {})",
                        self.name,
                        wait.as_millis(),
                        self.options.pool_size
                    ),
                ));
            }
            state = self
                .freed
                .wait_timeout(state, deadline - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }

    /// A new connection counted in the pool's `open` already.
    fn opened(&self) -> CoreResult<Pooled<'_>> {
        match self.connect() {
            Ok(conn) => Ok(Pooled {
                backend: self,
                conn: Some(conn),
                reused: false,
            }),
            Err(e) => {
                let mut state = lock(&self.pool);
                state.open = state.open.saturating_sub(1);
                drop(state);
                self.freed.notify_one();
                Err(e)
            }
        }
    }

    /// A new connection, never an idle one (replacing a stale one).
    fn get_new(&self) -> CoreResult<Pooled<'_>> {
        {
            let mut state = lock(&self.pool);
            if state.closed {
                return Err(CoreError::new(Code::Closed, "session store is closed"));
            }
            // The idle ones are as old as the stale one: drop them too.
            state.open = state.open.saturating_sub(state.idle.len());
            state.idle.clear();
            if state.open >= self.options.pool_size {
                drop(state);
                return self.get();
            }
            state.open += 1;
        }
        self.opened()
    }

    /// Run `f` in a transaction (statement and lock timeouts set for it
    /// alone) and commit; an error rolls it back.
    fn tx<T>(&self, f: impl FnOnce(&mut Tx<'_>) -> CoreResult<T>) -> CoreResult<T> {
        self.tx_then(f, true)
    }

    /// A pooled connection that answers: one idle for a while is checked
    /// first, and replaced once when the server closed it meanwhile. A
    /// check with no answer fails (`PG`): the server is not answering.
    fn live(&self) -> CoreResult<Pooled<'_>> {
        let mut conn = self.get()?;
        if conn.reused {
            // Closed: an I/O error, or the server's last word on it (a
            // connection exception, an administrator's shutdown or kill).
            let deadline = self.statement_deadline();
            let stale = match conn.conn()?.batch("", deadline) {
                Ok(()) => false,
                Err(Failure::TimedOut(after)) => {
                    return Err(CoreError::new(Code::Pg, self.no_answer(after)))
                }
                Err(Failure::Pg(e)) => match e.as_db_error().map(|db| db.code().code()) {
                    None => true,
                    Some(code) if code.starts_with("08") || code.starts_with("57P") => true,
                    Some(_) => return Err(self.err(e)),
                },
            };
            if stale {
                conn.conn = None;
                drop(conn);
                conn = self.get_new()?;
            }
        }
        Ok(conn)
    }

    /// `tx`; without `commit`, roll back (a read that must write nothing).
    /// A COMMIT whose answer is lost (the connection broke or the deadline
    /// passed after it was sent) is a `PG` error saying the outcome is
    /// unknown: the server may have committed.
    fn tx_then<T>(
        &self,
        f: impl FnOnce(&mut Tx<'_>) -> CoreResult<T>,
        commit: bool,
    ) -> CoreResult<T> {
        let mut pooled = self.live()?;
        let conn = pooled.conn()?;
        self.ensure_schema(conn)?;
        let mut tx = Tx {
            backend: self,
            conn,
        };
        let ms = self.options.statement_timeout.as_millis();
        tx.batch(&format!(
            "BEGIN; SET LOCAL statement_timeout = {ms}; SET LOCAL lock_timeout = {ms}"
        ))?;
        let out = match f(&mut tx) {
            Ok(out) => out,
            Err(e) => {
                // A broken connection is dropped, not rolled back.
                if tx.conn.usable() {
                    let _ = tx.batch("ROLLBACK");
                }
                return Err(e);
            }
        };
        if !commit {
            tx.batch("ROLLBACK")?;
            return Ok(out);
        }
        match tx.conn.batch("COMMIT", self.statement_deadline()) {
            Ok(()) => Ok(out),
            Err(Failure::Pg(e)) if e.as_db_error().is_some() => Err(self.err(e)),
            Err(f) => {
                let why = match f {
                    Failure::Pg(e) => format!("the connection failed: {}", with_sources(&e)),
                    Failure::TimedOut(after) => {
                        format!("no answer within {} ms", after.as_millis())
                    }
                };
                Err(CoreError::new(Code::Pg, format!(
                    "{}: the outcome of COMMIT is unknown ({why}); the write may or may not be stored",
                    self.name
                )))
            }
        }
    }

    /// Create the schema's tables on first use, or check the version of
    /// those there: `dsh_meta.schema_version` must be `SCHEMA_VERSION`.
    fn ensure_schema(&self, conn: &mut Conn) -> CoreResult<()> {
        let mut ready = lock(&self.ready);
        if *ready {
            return Ok(());
        }
        // Two stores creating one schema at once: one of them may fail on
        // the catalog's unique index; the second try sees the first's work.
        let mut tries = 0;
        loop {
            tries += 1;
            let mut tx = Tx {
                backend: self,
                conn: &mut *conn,
            };
            match self.create_schema(&mut tx) {
                Ok(()) => break,
                Err(e) => {
                    if tx.conn.usable() {
                        let _ = tx.batch("ROLLBACK");
                    }
                    match e {
                        e if e.kind() == Code::Pg
                            && tries < 3
                            && !self.read_only
                            && conn.usable() =>
                        {
                            continue
                        }
                        e => return Err(e),
                    }
                }
            }
        }
        *ready = true;
        Ok(())
    }

    /// The store's tables present in the schema, with their columns.
    fn found(&self, tx: &mut Tx<'_>) -> CoreResult<Found> {
        let rows = tx.query(
            "SELECT c.relname::text, c.relkind::text, a.attname::text, format_type(a.atttypid, a.atttypmod) \
             FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped \
             WHERE n.nspname = $1 AND c.relname IN ('dsh_meta', 'sessions', 'events', 'leases') \
             ORDER BY c.relname, a.attnum",
            &[(&self.options.schema, Type::TEXT)],
        )?;
        let mut found = Found::default();
        for row in &rows {
            let table: String = row.try_get(0).unwrap_or_default();
            let kind: String = row.try_get(1).unwrap_or_default();
            let column: Option<(String, String)> = row
                .try_get::<_, Option<String>>(2)
                .ok()
                .flatten()
                .zip(row.try_get::<_, Option<String>>(3).ok().flatten());
            found.add(table, kind.chars().next().unwrap_or('?'), column);
        }
        Ok(found)
    }

    fn foreign_error(&self, (table, shown): (String, String)) -> CoreError {
        CoreError::new(Code::UnsupportedVersion, format!(
            "{} holds a table \"{table}\" that is not this store's ({shown}); nothing was created in it: use another schema",
            self.name
        ))
    }

    fn create_schema(&self, tx: &mut Tx<'_>) -> CoreResult<()> {
        let s = &self.schema;
        let ms = self.options.statement_timeout.as_millis();
        tx.batch(&format!("BEGIN; SET LOCAL statement_timeout = {ms}"))?;
        // Nothing is created before the schema's tables are known to be
        // this store's, or absent.
        let found = self.found(tx)?;
        if let Some(foreign) = found.foreign(Some("dsh_meta")) {
            return Err(self.foreign_error(foreign));
        }
        let version: Option<String> = if found.has("dsh_meta") {
            tx.query_opt(
                &format!("SELECT value FROM {s}.dsh_meta WHERE key = 'schema_version'"),
                &[],
            )?
            .and_then(|r| r.try_get(0).ok())
        } else {
            None
        };
        match version {
            Some(v) if v.trim() == SCHEMA_VERSION.to_string() => {
                if let Some(foreign) = found.foreign(None) {
                    return Err(self.foreign_error(foreign));
                }
                if found.len() < TABLES.len() && !self.read_only {
                    // Stamped, a table dropped since: made again.
                    tx.batch(&schema_tables_sql(s))?;
                }
            }
            Some(v) => {
                return Err(CoreError::new(Code::UnsupportedVersion, format!(
                    "session database {} has schema version {v}, incompatible with this build ({SCHEMA_VERSION})",
                    self.name
                )))
            }
            None if self.read_only => {
                return Err(CoreError::new(Code::NotFound, format!(
                    "{} holds no session store tables",
                    self.name
                )))
            }
            None => {
                if let Some(foreign) = found.foreign(None) {
                    return Err(self.foreign_error(foreign));
                }
                let exists = tx
                    .query_opt(
                        "SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1",
                        &[(&self.options.schema, Type::TEXT)],
                    )?
                    .is_some();
                if !exists {
                    tx.batch(&format!("CREATE SCHEMA IF NOT EXISTS {s}"))?;
                }
                tx.batch(&schema_sql(s))?;
            }
        }
        tx.batch("COMMIT")
    }

    /// The header of session `id`, or `None`.
    fn header(&self, tx: &mut Tx<'_>, id: &str) -> CoreResult<Option<SessionHeader>> {
        let row = tx.query_opt(
            &format!(
                "SELECT {HEADER_COLUMNS} FROM {}.sessions WHERE id = $1",
                self.schema
            ),
            &[(&id, Type::TEXT)],
        )?;
        let Some(row) = row else {
            return Ok(None);
        };
        header_of(id, header_columns(&row, 0)).map(Some)
    }

    /// Read session `id` and repair it in memory; `None` when not stored.
    fn read(&self, tx: &mut Tx<'_>, id: &str) -> CoreResult<Option<(Repaired, usize)>> {
        let Some(header) = self.header(tx, id)? else {
            return Ok(None);
        };
        let select = format!(
            "SELECT {EVENT_COLUMNS} FROM {}.events WHERE session_id = $1 ORDER BY seq",
            self.schema
        );
        let params: &Params<'_> = &[(&id, Type::TEXT)];
        // The rows are folded as they arrive, never all held at once.
        let splice = |tx: &mut &mut Tx<'_>, splicer: &mut Splicer| {
            tx.query_each(&select, params, |row| splicer.push(values(row)))
                .map(drop)
        };
        let records = |tx: &mut &mut Tx<'_>| {
            let rows = tx.query(&select, params)?;
            Ok(rows.iter().map(|r| values_text(values(r))).collect())
        };
        read_rows(id, header, &mut { tx }, splice, records).map(Some)
    }

    /// Take the lease of session `id` for this store (a new epoch), or say
    /// who holds it (`SESSION_IN_USE`). A lease whose expiry passed is
    /// taken over, and so is one whose holder is provably dead: a process
    /// of this kernel and PID namespace (its holder id says so) that no
    /// longer runs. Any other holder, another host's or another
    /// container's, is waited out to its expiry.
    fn acquire(&self, tx: &mut Tx<'_>, id: &str) -> CoreResult<i64> {
        let s = &self.schema;
        let ms = self.options.lease.as_millis() as i64;
        let holder = self.holder();
        let taken = tx.query_opt(
            &format!(
                "INSERT INTO {s}.leases AS l (session_id, holder, host, pid, epoch, expires_at) \
                 VALUES ($1, $2, $3, $4, 1, clock_timestamp() + $5::bigint * interval '1 millisecond') \
                 ON CONFLICT (session_id) DO UPDATE SET holder = excluded.holder, host = excluded.host, \
                   pid = excluded.pid, epoch = l.epoch + 1, expires_at = excluded.expires_at \
                 WHERE l.holder = excluded.holder OR l.expires_at <= clock_timestamp() \
                 RETURNING epoch"
            ),
            &[
                (&id, Type::TEXT),
                (&holder, Type::TEXT),
                (&self.host, Type::TEXT),
                (&self.pid, Type::INT8),
                (&ms, Type::INT8),
            ],
        )?;
        if let Some(row) = taken {
            return row.try_get(0).map_err(|e| self.err(e));
        }
        let current = self.holder_of(tx, id)?;
        if let Some(h) = &current {
            if self.same_space(h) && h.pid != self.pid && !process_alive(h.pid) {
                let taken = tx.query_opt(
                    &format!(
                        "UPDATE {s}.leases SET holder = $2, host = $3, pid = $4, epoch = epoch + 1, \
                           expires_at = clock_timestamp() + $5::bigint * interval '1 millisecond' \
                         WHERE session_id = $1 AND epoch = $6 RETURNING epoch"
                    ),
                    &[
                        (&id, Type::TEXT),
                        (&holder, Type::TEXT),
                        (&self.host, Type::TEXT),
                        (&self.pid, Type::INT8),
                        (&ms, Type::INT8),
                        (&h.epoch, Type::INT8),
                    ],
                )?;
                if let Some(row) = taken {
                    return row.try_get(0).map_err(|e| self.err(e));
                }
            }
        }
        Err(self.in_use(id, current.as_ref()))
    }

    fn holder_of(&self, tx: &mut Tx<'_>, id: &str) -> CoreResult<Option<Holder>> {
        Ok(tx
            .query_opt(
                &format!(
                    "SELECT holder, host, pid, epoch, \
                       extract(epoch FROM expires_at - clock_timestamp())::float8 \
                     FROM {}.leases WHERE session_id = $1",
                    self.schema
                ),
                &[(&id, Type::TEXT)],
            )?
            .map(|r| Holder::of(&r)))
    }

    fn describe(&self, h: &Holder) -> String {
        let who = if h.pid == self.pid && h.host == self.host && self.same_space(h) {
            format!("another store of this process (pid {})", h.pid)
        } else {
            format!("process {} on host {}", h.pid, quoted(&h.host))
        };
        format!("{who}, epoch {}", h.epoch)
    }

    fn in_use(&self, id: &str, holder: Option<&Holder>) -> CoreError {
        let holder = holder.map_or_else(
            || "another store".to_string(),
            |h| {
                format!(
                    "{} (lease row in {}, expires in {:.0} s)",
                    self.describe(h),
                    self.name,
                    h.expires_in.max(0.0)
                )
            },
        );
        CoreError::new(
            Code::SessionInUse,
            format!(
                "session {} is in use: its write lease is held by {holder}; nothing was written",
                quoted(id)
            ),
        )
    }

    /// Make sure this store may write session `id` in `tx`: renew its
    /// lease (the fence: the update names its epoch), or take it when the
    /// session was read without it and storage is still what was read.
    fn fence(
        &self,
        tx: &mut Tx<'_>,
        id: &str,
        handle: &mut PgHandle,
        stored: u64,
    ) -> CoreResult<i64> {
        if handle.lost || lock(&self.lost).contains(id) {
            handle.lost = true;
            return Err(self.lost(tx, id, None));
        }
        let Some(epoch) = handle.epoch else {
            // Read while another store held it: take the lease now, and
            // write only if storage holds exactly what was read.
            let epoch = self.acquire(tx, id)?;
            let s = &self.schema;
            let row = tx.query_one(
                &format!(
                    "SELECT count(*)::bigint, coalesce(max(seq) + 1, 0)::bigint FROM {s}.events WHERE session_id = $1"
                ),
                &[(&id, Type::TEXT)],
            )?;
            let (count, next): (i64, i64) = (
                row.try_get(0).map_err(|e| self.err(e))?,
                row.try_get(1).map_err(|e| self.err(e))?,
            );
            if count != next || next as u64 != stored {
                return Err(CoreError::new(Code::SeqMismatch, format!(
                    "append seq mismatch for {}: the database holds {count} events where this store read {stored} \
                     (it read the session while another store wrote it); load it again",
                    quoted(id)
                )));
            }
            return Ok(epoch);
        };
        let holder = self.holder();
        let lease_ms = self.options.lease.as_millis() as i64;
        let renewed = tx.query(
            &format!(
                "UPDATE {}.leases SET expires_at = clock_timestamp() + $4::bigint * interval '1 millisecond' \
                 WHERE session_id = $1 AND holder = $2 AND epoch = $3 RETURNING 1",
                self.schema
            ),
            &[
                (&id, Type::TEXT),
                (&holder, Type::TEXT),
                (&epoch, Type::INT8),
                (&lease_ms, Type::INT8),
            ],
        )?;
        if renewed.len() == 1 {
            return Ok(epoch);
        }
        handle.lost = true;
        lock(&self.lost).insert(id.to_string());
        Err(self.lost(tx, id, Some(epoch)))
    }

    fn lost(&self, tx: &mut Tx<'_>, id: &str, epoch: Option<i64>) -> CoreError {
        let now = self
            .holder_of(tx, id)
            .ok()
            .flatten()
            .map_or_else(|| "no store".to_string(), |h| self.describe(&h));
        CoreError::new(
            Code::LeaseLost,
            format!(
                "session {}: this store's write lease{} was taken over (now held by {now}); \
             this store never writes the session again (a new store can), and nothing was written",
                quoted(id),
                epoch.map_or_else(String::new, |e| format!(" (epoch {e})"))
            ),
        )
    }

    fn insert_events(
        &self,
        tx: &mut Tx<'_>,
        id: &str,
        texts: &[impl AsRef<str>],
    ) -> CoreResult<()> {
        // A statement per part of at most INSERT_BYTES of text (a turn's
        // flush is one): a whole million-event batch in one statement
        // would be copied whole into its columns and its message.
        let mut from = 0;
        while from < texts.len() {
            let mut to = from + 1;
            let mut bytes = texts[from].as_ref().len();
            while to < texts.len() && bytes + texts[to].as_ref().len() <= INSERT_BYTES {
                bytes += texts[to].as_ref().len();
                to += 1;
            }
            self.insert_part(tx, id, &texts[from..to])?;
            from = to;
        }
        Ok(())
    }

    /// One INSERT of `texts` (see `insert_events`).
    fn insert_part(&self, tx: &mut Tx<'_>, id: &str, texts: &[impl AsRef<str>]) -> CoreResult<()> {
        let rows = texts
            .iter()
            .map(|t| columns(t.as_ref()))
            .collect::<CoreResult<Vec<_>>>()?;
        let seqs: Vec<i64> = rows.iter().map(|c| c.seq).collect();
        let types: Vec<&str> = rows.iter().map(|c| c.ty.as_str()).collect();
        let times: Vec<i64> = rows.iter().map(|c| c.time).collect();
        let data: Vec<&str> = rows.iter().map(|c| c.data).collect();
        let sources: Vec<Option<&str>> = rows
            .iter()
            .map(|c| c.source_event_seqs.as_deref())
            .collect();
        let ops: Vec<Option<&str>> = rows.iter().map(|c| c.surface_op.as_deref()).collect();
        // One statement for the whole batch (one round trip).
        tx.conn
            .query(
                &format!(
                    "INSERT INTO {}.events (session_id, {EVENT_COLUMNS}) \
                     SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[])",
                    self.schema
                ),
                &[
                    (&id, Type::TEXT),
                    (&seqs, Type::INT8_ARRAY),
                    (&types, Type::TEXT_ARRAY),
                    (&times, Type::INT8_ARRAY),
                    (&data, Type::TEXT_ARRAY),
                    (&sources, Type::TEXT_ARRAY),
                    (&ops, Type::TEXT_ARRAY),
                ],
                self.statement_deadline(),
            )
            .map_err(|f| match f {
                Failure::Pg(e) => match e.as_db_error() {
                    Some(db) if db.code() == &SqlState::UNIQUE_VIOLATION => {
                        // "Key (session_id, seq)=(ID, SEQ) already exists."
                        let seq = db
                            .detail()
                            .and_then(|d| d.strip_suffix(") already exists."))
                            .and_then(|d| d.rsplit_once(", "))
                            .and_then(|(_, seq)| seq.parse::<u64>().ok());
                        match seq {
                            Some(seq) => seq_taken(id, seq),
                            None => CoreError::new(Code::SeqMismatch, format!(
                                "append seq mismatch for {}: the database already holds one of seqs {}..={}",
                                quoted(id),
                                seqs.first().copied().unwrap_or(0),
                                seqs.last().copied().unwrap_or(0)
                            )),
                        }
                    }
                    _ => self.err(e),
                },
                f => self.fail(f),
            })?;
        Ok(())
    }

    /// Release this store's leases (best effort: they expire anyway).
    fn release(&self) {
        if self.read_only || !*lock(&self.ready) {
            return;
        }
        let holder = self.holder();
        let _ = self.tx(|tx| {
            tx.query(
                &format!(
                    "UPDATE {}.leases SET expires_at = '-infinity' WHERE holder = $1",
                    self.schema
                ),
                &[(&holder, Type::TEXT)],
            )
        });
    }

    /// Run `sql` on a pooled connection in a transaction (tests).
    #[cfg(test)]
    pub fn execute(&self, sql: &str) -> CoreResult<()> {
        self.tx(|tx| tx.batch(sql))
    }
}

/// The six values of an `events` row as the SQLite splice reads them; a
/// value of an unexpected type (a table altered by hand) is NULL, which no
/// required column accepts (a damaged record).
fn values(row: &Row) -> [Cell<'_>; 6] {
    let int = |i: usize| row.try_get::<_, i64>(i).map_or(Cell::Null, Cell::Int);
    let text = |i: usize| {
        row.try_get::<_, Option<&str>>(i)
            .ok()
            .flatten()
            .map_or(Cell::Null, |s| Cell::Text(s.as_bytes()))
    };
    [int(0), text(1), int(2), text(3), text(4), text(5)]
}

/// The repair primitives in a load's transaction (under the lease row).
struct TxRepairs<'a, 'c> {
    of: &'a PostgresBackend,
    tx: &'a mut Tx<'c>,
    id: &'a str,
}

impl Repairs for TxRepairs<'_, '_> {
    fn truncate(&mut self, repaired: &Repaired) -> CoreResult<()> {
        self.tx
            .query(
                &format!(
                    "DELETE FROM {}.events WHERE session_id = $1 AND seq >= $2",
                    self.of.schema
                ),
                &[
                    (&self.id, Type::TEXT),
                    (&(repaired.preserved as i64), Type::INT8),
                ],
            )
            .map(drop)
    }

    fn insert(&mut self, closers: &[String]) -> CoreResult<()> {
        self.of.insert_events(self.tx, self.id, closers)
    }
}

impl Backend for PostgresBackend {
    type Handle = PgHandle;

    fn exists(&self, key: &Key) -> CoreResult<bool> {
        check_id(&key.id)?;
        self.tx_then(|tx| Ok(self.header(tx, &key.id)?.is_some()), false)
    }

    /// Sessions are fenced by the lease row (see the module), not a lock file.
    fn lease_path(&self, _key: &Key) -> Option<std::path::PathBuf> {
        None
    }

    fn let_go(&self, key: &Key, handle: &PgHandle) {
        let Some(epoch) = handle.epoch else {
            return;
        };
        let holder = self.holder().to_string();
        // Best effort, as `release`: a lease not let go of expires.
        let _ = self.tx(|tx| {
            tx.query(
                &format!(
                    "UPDATE {}.leases SET expires_at = '-infinity' \
                     WHERE session_id = $1 AND holder = $2 AND epoch = $3",
                    self.schema
                ),
                &[
                    (&key.id.as_str(), Type::TEXT),
                    (&holder.as_str(), Type::TEXT),
                    (&epoch, Type::INT8),
                ],
            )
        });
    }

    fn refusal(&self, handle: &PgHandle) -> Option<CoreError> {
        handle.refused.clone()
    }

    /// Whether a `Repair` or `Continue` load writes depends on the lease
    /// row it takes (there is no lock file): when another store holds it,
    /// the load is a reader's and `refusal` says why.
    fn load(
        &self,
        key: &Key,
        handle: &mut PgHandle,
        mode: LoadMode,
        policy: Policy<'_>,
    ) -> CoreResult<Option<Repaired>> {
        let id = key.id.as_str();
        check_id(&key.id)?;
        let read_only =
            |this: &Self| this.tx_then(|tx| Ok(this.read(tx, id)?.map(|(r, _)| r)), false);
        if mode == LoadMode::Read {
            return read_only(self);
        }
        // As the writer when the lease is free: the repair is made durable.
        let taken = self.tx(|tx| {
            if self.header(tx, id)?.is_none() {
                return Ok(None);
            }
            if lock(&self.lost).contains(id) {
                return Ok(Some(Err(self.lost(tx, id, None))));
            }
            let epoch = match self.acquire(tx, id) {
                Ok(epoch) => epoch,
                Err(e) if e.kind() == Code::SessionInUse => return Ok(Some(Err(e))),
                Err(e) => return Err(e),
            };
            let Some((repaired, _)) = self.read(tx, id)? else {
                return Ok(None);
            };
            policy(&repaired, &mut TxRepairs { of: self, tx, id })?;
            Ok(Some(Ok((epoch, repaired))))
        })?;
        match taken {
            None => Ok(None),
            Some(Ok((epoch, loaded))) => {
                *handle = PgHandle {
                    epoch: Some(epoch),
                    ..PgHandle::default()
                };
                Ok(Some(loaded))
            }
            // Another store writes it: the repair stays in memory, and
            // nothing is written (one statement reads a committed prefix).
            Some(Err(refused)) => {
                *handle = PgHandle {
                    refused: Some(refused),
                    ..PgHandle::default()
                };
                read_only(self)
            }
        }
    }

    fn create_log(
        &self,
        key: &Key,
        header: &SessionHeader,
        batch: &Batch,
        handle: &mut PgHandle,
    ) -> CoreResult<()> {
        let id = key.id.as_str();
        check_id(&key.id)?;
        let texts: Vec<&str> = batch.texts().collect();
        let h = header_row(header);
        let epoch = self.tx(|tx| {
            let created = tx.query(
                &format!(
                    "INSERT INTO {}.sessions (id, {HEADER_COLUMNS}) \
                     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING RETURNING 1",
                    self.schema
                ),
                &[
                    (&id, Type::TEXT),
                    (&h.version, Type::INT8),
                    (&h.created_at, Type::INT8),
                    (&h.cwd, Type::TEXT),
                    (&h.parent_session, Type::TEXT),
                    (&h.seed_length, Type::INT8),
                ],
            )?;
            if created.is_empty() {
                // Stored already: by a writer that still holds it (two
                // intents for one new id: the first to write won), or not.
                return Err(match self.acquire(tx, id) {
                    Err(e) if e.kind() == Code::SessionInUse => e,
                    _ => persisted_collision(id),
                });
            }
            let epoch = self.acquire(tx, id)?;
            self.insert_events(tx, id, &texts)?;
            Ok(epoch)
        })?;
        *handle = PgHandle {
            epoch: Some(epoch),
            ..PgHandle::default()
        };
        Ok(())
    }

    fn append(
        &self,
        key: &Key,
        batch: &Batch,
        handle: &mut PgHandle,
    ) -> CoreResult<Result<(), Holds>> {
        let id = key.id.as_str();
        check_id(&key.id)?;
        let texts: Vec<&str> = batch.texts().collect();
        let mut held = None;
        let epoch = self.tx(|tx| {
            let epoch = self.fence(tx, id, handle, batch.first_seq)?;
            // In the transaction that writes (the lease row is locked by
            // the fence): the batch continues the stored log.
            let stored: i64 = tx
                .query_one(
                    &format!(
                        "SELECT coalesce(max(seq) + 1, 0)::bigint FROM {}.events WHERE session_id = $1",
                        self.schema
                    ),
                    &[(&id, Type::TEXT)],
                )?
                .try_get(0)
                .map_err(|e| self.err(e))?;
            if let Err(holds) = continues(batch.first_seq, stored as u64) {
                // Rolled back, the fence's renewal too: the store says why.
                held = Some(holds);
                return Err(CoreError::new(Code::SeqMismatch, "rolled back"));
            }
            self.insert_events(tx, id, &texts)?;
            Ok(epoch)
        });
        if let Some(holds) = held {
            return Ok(Err(holds));
        }
        let epoch = epoch?;
        handle.epoch = Some(epoch);
        handle.refused = None;
        Ok(Ok(()))
    }

    fn list(&self) -> CoreResult<Vec<Listed>> {
        self.tx_then(
            |tx| {
                let rows = tx.query(
                    &format!("SELECT id, {HEADER_COLUMNS} FROM {}.sessions", self.schema),
                    &[],
                )?;
                Ok(rows
                    .iter()
                    .filter_map(|row| {
                        let id: String = row.try_get(0).ok()?;
                        let header = header_of(&id, header_columns(row, 1)).ok()?;
                        Some(Listed { header })
                    })
                    .collect())
            },
            false,
        )
    }

    fn close(&self) {
        self.release();
        let mut state = lock(&self.pool);
        state.closed = true;
        state.idle.clear();
        drop(state);
        self.freed.notify_all();
    }
}

/// The header columns (version, created_at, cwd, parent_session,
/// seed_length) of a `sessions` row, from column `first` on, as `header_of`
/// reads them.
fn header_columns(row: &Row, first: usize) -> [Cell<'_>; 5] {
    let int = |i: usize| {
        row.try_get::<_, Option<i64>>(first + i)
            .ok()
            .flatten()
            .map_or(Cell::Null, Cell::Int)
    };
    let text = |i: usize| {
        row.try_get::<_, Option<&str>>(first + i)
            .ok()
            .flatten()
            .map_or(Cell::Null, |s| Cell::Text(s.as_bytes()))
    };
    [int(0), int(1), text(2), text(3), int(4)]
}

/// An error's message followed by those of its sources, `: `-separated.
fn with_sources(e: &dyn std::error::Error) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_quoted_and_nul_ids_refused() {
        assert_eq!(ident("a\"b"), "\"a\"\"b\"");
        assert_eq!(
            check_id("a\0b").unwrap_err().to_string(),
            "session id \"a\\u0000b\" contains U+0000, which PostgreSQL text cannot hold"
        );
        assert!(check_id("a/b é").is_ok());
        assert!(schema_sql("\"s\"").contains("PRIMARY KEY (session_id, seq)"));
    }

    #[test]
    fn schema_names_past_63_bytes_are_refused() {
        assert!(check_schema(&"s".repeat(63)).is_ok());
        assert!(check_schema(&format!("{}a", "é".repeat(31))).is_ok());
        let refused = check_schema(&format!("{}ab", "é".repeat(31))).unwrap_err();
        assert_eq!(refused.code(), "INVALID_ARGUMENT");
        assert!(refused.message().contains(" is 64 bytes of UTF-8; "));
        for bad in ["", "a\0b"] {
            assert_eq!(
                check_schema(bad).unwrap_err().message(),
                "PostgresSessionStore schema must be a non-empty string without NUL"
            );
        }
    }

    /// A backend on the test server (`DSH_TEST_PG_URL`, set by .ci/run) in
    /// a schema of its own; `None` (the test is skipped) without one.
    fn test_backend(label: &str) -> Option<PostgresBackend> {
        let Ok(url) = std::env::var("DSH_TEST_PG_URL") else {
            eprintln!(
                "skipped: DSH_TEST_PG_URL is unset (bash .ci/run starts a server and sets it)"
            );
            return None;
        };
        let schema = format!("rust_{label}_{}", std::process::id());
        let backend = PostgresBackend::new(PgOptions {
            connection_string: url,
            schema: schema.clone(),
            pool_size: 2,
            lease: Duration::from_secs(30),
            statement_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(5),
        })
        .unwrap();
        backend
            .execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", ident(&schema)))
            .unwrap();
        *lock(&backend.ready) = false;
        Some(backend)
    }

    fn batch(from: u64, to: u64) -> Batch {
        Batch {
            first_seq: from,
            count: (to - from) as usize,
            lines: (from..to)
                .map(|seq| format!("{{\"type\":\"x\",\"seq\":{seq},\"time\":1,\"data\":{{}}}}\n"))
                .collect(),
        }
    }

    #[test]
    fn a_taken_seq_is_named_and_nothing_of_the_batch_is_stored() {
        let Some(b) = test_backend("taken") else {
            return;
        };
        let key = Key {
            id: "m".into(),
            file: String::new(),
        };
        let mut handle = PgHandle::default();
        b.create_log(
            &key,
            &SessionHeader::minimal("m", 1.0),
            &batch(0, 1),
            &mut handle,
        )
        .unwrap();
        // Another client took seq 35, inside the batch 1..80.
        b.execute(&format!(
            "INSERT INTO {}.events (session_id, seq, type, time, data) VALUES ('m', 35, 'x', 1, '{{}}')",
            b.schema
        ))
        .unwrap();
        // Caught by the append's check of the stored length (in the
        // writing transaction), before the key would name seq 35; the
        // store words it (SEQ_MISMATCH, expected 36 ... got 1).
        assert_eq!(
            b.append(&key, &batch(1, 80), &mut handle).unwrap(),
            Err(Holds(36))
        );
        let count = b
            .tx(|tx| {
                let row =
                    tx.query_one(&format!("SELECT count(*) FROM {}.events", b.schema), &[])?;
                row.try_get::<_, i64>(0).map_err(|e| b.err(e))
            })
            .unwrap();
        assert_eq!(count, 2);
        b.close();
    }
}
