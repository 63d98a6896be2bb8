//! One PostgreSQL connection whose every wait has a deadline. The async
//! client (tokio-postgres) runs on a current-thread runtime of the
//! connection's own, driven by the thread that sends a statement (as the
//! synchronous `postgres` crate does), inside `tokio::time::timeout`: a
//! server that accepts TCP and then says nothing (a stopped process, a
//! frozen VM, a partition) fails the wait instead of hanging it; the
//! kernel's acknowledgements and TCP keepalives never end such a wait.
//!
//! Statements are sent with explicit parameter types through the unnamed
//! statement (`query_typed`: one round trip, no named prepared statement
//! left on a server connection that a transaction-mode pooler hands to
//! other clients), and transaction control as simple queries.

use futures_util::TryStreamExt;
use std::time::Duration;
use tokio::runtime::{Builder, Runtime};
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, Config, NoTls, Row};

/// Why a wait on the server failed.
pub enum Failure {
    /// The server answered with an error (the connection is still usable;
    /// a transaction is aborted), or the connection broke.
    Pg(tokio_postgres::Error),
    /// No answer within the deadline: the connection is dropped (what it
    /// was waiting for may still happen on the server).
    TimedOut(Duration),
}

/// A statement's parameters: each value with its PostgreSQL type.
pub type Params<'a> = [(&'a (dyn ToSql + Sync), Type)];

pub struct Conn {
    client: Client,
    /// Drives the connection while this connection's owner waits on it;
    /// shutting it down ends the connection task and closes the socket.
    /// Always `Some` until dropped.
    rt: Option<Runtime>,
    /// A wait on it timed out, or it failed below the SQL level: never
    /// reused.
    broken: bool,
}

/// Why a connection could not be opened.
pub enum ConnectFailure {
    Pg(tokio_postgres::Error),
    TimedOut(Duration),
    Setup(String),
}

impl Conn {
    /// Connect (TCP, TLS, authentication) and run a first, empty query,
    /// all within `deadline`.
    pub fn open(
        config: &Config,
        tls: Option<tokio_postgres_rustls::MakeRustlsConnect>,
        deadline: Duration,
    ) -> Result<Conn, ConnectFailure> {
        let rt = Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| {
                ConnectFailure::Setup(format!("cannot start the connection's runtime: {e}"))
            })?;
        // The timer is made inside the runtime (it registers with its driver).
        let started = rt.block_on(async {
            tokio::time::timeout(deadline, async {
                let client = match tls {
                    None => {
                        let (client, connection) = config.connect(NoTls).await?;
                        tokio::spawn(async move {
                            let _ = connection.await;
                        });
                        client
                    }
                    Some(tls) => {
                        let (client, connection) = config.connect(tls).await?;
                        tokio::spawn(async move {
                            let _ = connection.await;
                        });
                        client
                    }
                };
                // Behind a pooler the server connection is made only now.
                client.batch_execute("").await?;
                Ok::<Client, tokio_postgres::Error>(client)
            })
            .await
        });
        match started {
            Ok(Ok(client)) => Ok(Conn {
                client,
                rt: Some(rt),
                broken: false,
            }),
            failed => {
                // Not waiting for a name lookup still running on the
                // runtime's blocking pool (its answer no longer matters).
                rt.shutdown_background();
                match failed {
                    Ok(Err(e)) => Err(ConnectFailure::Pg(e)),
                    _ => Err(ConnectFailure::TimedOut(deadline)),
                }
            }
        }
    }

    /// Whether it may go back to the pool.
    pub fn usable(&self) -> bool {
        !self.broken && !self.client.is_closed()
    }

    fn settle<T>(
        &mut self,
        out: Result<Result<T, tokio_postgres::Error>, tokio::time::error::Elapsed>,
        deadline: Duration,
    ) -> Result<T, Failure> {
        match out {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => {
                if e.as_db_error().is_none() {
                    self.broken = true;
                }
                Err(Failure::Pg(e))
            }
            Err(_) => {
                self.broken = true;
                Err(Failure::TimedOut(deadline))
            }
        }
    }

    fn parts(&self) -> Result<(&Client, &Runtime), Failure> {
        match &self.rt {
            Some(rt) => Ok((&self.client, rt)),
            None => Err(Failure::TimedOut(Duration::ZERO)),
        }
    }

    /// One statement with typed parameters; its rows.
    pub fn query(
        &mut self,
        sql: &str,
        params: &Params<'_>,
        deadline: Duration,
    ) -> Result<Vec<Row>, Failure> {
        let (client, rt) = self.parts()?;
        let out = rt.block_on(async {
            tokio::time::timeout(deadline, client.query_typed(sql, params)).await
        });
        self.settle(out, deadline)
    }

    /// One statement with typed parameters, each row handed to `each` as
    /// it arrives: a long result is never held whole (the server's rows
    /// wait in the socket meanwhile); how many rows there were.
    pub fn query_each(
        &mut self,
        sql: &str,
        params: &Params<'_>,
        deadline: Duration,
        mut each: impl FnMut(&Row),
    ) -> Result<usize, Failure> {
        let (client, rt) = self.parts()?;
        let out = rt.block_on(async {
            tokio::time::timeout(deadline, async {
                let rows = client
                    .query_typed_raw(sql, params.iter().map(|(v, t)| (*v, t.clone())))
                    .await?;
                let mut rows = std::pin::pin!(rows);
                let mut count = 0;
                while let Some(row) = rows.try_next().await? {
                    each(&row);
                    count += 1;
                }
                Ok(count)
            })
            .await
        });
        self.settle(out, deadline)
    }

    /// Statements without parameters, as one simple query.
    pub fn batch(&mut self, sql: &str, deadline: Duration) -> Result<(), Failure> {
        let (client, rt) = self.parts()?;
        let out =
            rt.block_on(async { tokio::time::timeout(deadline, client.batch_execute(sql)).await });
        self.settle(out, deadline)
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            // Never waits: not on a server that stopped answering, nor on
            // a blocking task of the runtime.
            rt.shutdown_background();
        }
    }
}
