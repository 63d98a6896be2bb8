//! The one place the addon starts threads: every helper thread is started
//! here (`scoped`, `detached`), named `dsh-...`, through
//! `std::thread::Builder`, so a failed start (a process at its thread
//! limit: `ulimit -u`, a pids cgroup) comes back to the caller with its
//! work, to run on the calling thread or to report as `INTERNAL`; it never
//! becomes a panic. A joined thread that panicked is an `INTERNAL` error
//! (`joined`). Helpers run at the priority of the thread that starts them:
//! a library changes no thread's priority.

use crate::error::{Code, CoreError, CoreResult};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{Builder, JoinHandle, Scope, ScopedJoinHandle};

/// A thread that could not be started: its work, given back to run on the
/// calling thread, and why (`error`).
pub struct NotStarted<F> {
    pub work: F,
    io: std::io::Error,
}

impl<F> NotStarted<F> {
    /// The failed start as an `INTERNAL` error.
    pub fn error(&self) -> CoreError {
        cannot_start(&self.io)
    }
}

/// `INTERNAL`: no thread could be started (`e` the OS's answer, kept as
/// the source).
pub fn cannot_start(e: &std::io::Error) -> CoreError {
    let error = CoreError::new(
        Code::Internal,
        format!(
            "cannot start a helper thread ({e}): the process may be at its thread limit \
             (ulimit -u or a pids cgroup)"
        ),
    );
    match e.raw_os_error() {
        Some(errno) => error.with_source(std::io::Error::from_raw_os_error(errno)),
        None => error,
    }
}

/// A thread's result, or an `INTERNAL` error naming `what` when it panicked.
pub fn joined<T>(result: std::thread::Result<T>, what: &str) -> CoreResult<T> {
    result.map_err(|panic| CoreError::panicked(what, &*panic))
}

/// Start `work` on a thread of `scope` named `name`.
pub fn scoped<'scope, T, F>(
    scope: &'scope Scope<'scope, '_>,
    name: &str,
    work: F,
) -> Result<ScopedJoinHandle<'scope, T>, NotStarted<F>>
where
    F: FnOnce() -> T + Send + 'scope,
    T: Send + 'scope,
{
    start(work, |body| {
        Builder::new().name(name.into()).spawn_scoped(scope, body)
    })
}

/// Start `work` on a thread of its own named `name`.
pub fn detached<T, F>(name: &str, work: F) -> Result<JoinHandle<T>, NotStarted<F>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    start(work, |body| Builder::new().name(name.into()).spawn(body))
}

/// `spawn` a thread that runs `work`; when it cannot start, `work` comes
/// back (the standard library drops a closure it could not start, so the
/// thread takes `work` from a slot this call keeps).
fn start<'a, T: 'a, F: FnOnce() -> T + Send + 'a, H>(
    work: F,
    spawn: impl FnOnce(Body<'a, T>) -> std::io::Result<H>,
) -> Result<H, NotStarted<F>> {
    let slot = Arc::new(Mutex::new(Some(work)));
    let theirs = slot.clone();
    let body: Body<'a, T> = Box::new(move || {
        let work = take(&theirs);
        drop(theirs);
        match work {
            Some(work) => work(),
            None => unreachable!("a started thread's work is taken by it alone"),
        }
    });
    match spawn(body) {
        Ok(handle) => Ok(handle),
        Err(io) => match take(&slot) {
            Some(work) => Err(NotStarted { work, io }),
            None => unreachable!("a thread that did not start took its work"),
        },
    }
}

type Body<'a, T> = Box<dyn FnOnce() -> T + Send + 'a>;

fn take<F>(slot: &Mutex<Option<F>>) -> Option<F> {
    slot.lock().unwrap_or_else(PoisonError::into_inner).take()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_started_thread_runs_its_work_under_its_name() {
        let name = detached("dsh-test", || {
            std::thread::current().name().map(str::to_string)
        })
        .map_err(|n| n.error())
        .expect("started");
        assert_eq!(joined(name.join(), "the test"), Ok(Some("dsh-test".into())));
        let mut seen = 0;
        std::thread::scope(|scope| {
            let handle = scoped(scope, "dsh-test", || seen += 1)
                .map_err(|n| n.error())
                .expect("started");
            joined(handle.join(), "the test").expect("joined");
        });
        assert_eq!(seen, 1);
    }

    #[test]
    fn a_failed_start_is_internal_and_names_the_thread_limit() {
        let e = cannot_start(&std::io::Error::from_raw_os_error(libc::EAGAIN));
        assert_eq!(e.code(), "INTERNAL");
        assert_eq!(e.os_error(), Some(libc::EAGAIN));
        assert!(
            e.message().starts_with("cannot start a helper thread (")
                && e.message().ends_with(
                    "): the process may be at its thread limit (ulimit -u or a pids cgroup)"
                ),
            "{}",
            e.message()
        );
    }

    #[test]
    fn a_thread_that_panicked_is_internal_when_joined() {
        let handle = detached("dsh-test", || -> u8 { panic!("boom") })
            .map_err(|n| n.error())
            .expect("started");
        let e = joined(handle.join(), "the test thread").expect_err("panicked");
        assert_eq!(e.code(), "INTERNAL");
        assert_eq!(
            e.message(),
            "the test thread failed inside dsh-session-native (a bug): boom"
        );
    }
}
