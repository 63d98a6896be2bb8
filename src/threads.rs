//! The one place the addon starts threads: every helper thread is started
//! here (`scoped`, `detached`), named `dsh-...`, through
//! `std::thread::Builder`, so a failed start (a process at its thread
//! limit: `ulimit -u`, a pids cgroup) comes back to the caller with its
//! work, to run on the calling thread or to report as `INTERNAL`; it never
//! becomes a panic. A joined thread that panicked is an `INTERNAL` error
//! (`joined`). CPU-heavy helpers run below the JS thread (`Priority::Low`),
//! so the event loop wins a core whenever it wants one.

use crate::error::{Code, CoreError, CoreResult};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{Builder, JoinHandle, Scope, ScopedJoinHandle};

/// The priority a helper thread runs at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Priority {
    /// The caller's (the JS thread waits for the work).
    Caller,
    /// Nice 10: what is idle (the work runs while JS goes on).
    Low,
}

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
    priority: Priority,
    work: F,
) -> Result<ScopedJoinHandle<'scope, T>, NotStarted<F>>
where
    F: FnOnce() -> T + Send + 'scope,
    T: Send + 'scope,
{
    start(work, priority, |body| {
        Builder::new().name(name.into()).spawn_scoped(scope, body)
    })
}

/// Start `work` on a thread of its own named `name`.
pub fn detached<T, F>(
    name: &str,
    priority: Priority,
    work: F,
) -> Result<JoinHandle<T>, NotStarted<F>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    start(work, priority, |body| {
        Builder::new().name(name.into()).spawn(body)
    })
}

/// `spawn` a thread that runs `work`; when it cannot start, `work` comes
/// back (the standard library drops a closure it could not start, so the
/// thread takes `work` from a slot this call keeps).
fn start<'a, T: 'a, F: FnOnce() -> T + Send + 'a, H>(
    work: F,
    priority: Priority,
    spawn: impl FnOnce(Body<'a, T>) -> std::io::Result<H>,
) -> Result<H, NotStarted<F>> {
    let slot = Arc::new(Mutex::new(Some(work)));
    let theirs = slot.clone();
    let body: Body<'a, T> = Box::new(move || {
        let work = take(&theirs);
        drop(theirs);
        if priority == Priority::Low {
            lower_priority();
        }
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

/// Run `work` on a thread of its own at a lower priority and wait for it
/// (on this thread if none can be started); `None` if it panicked. For
/// CPU-heavy work started from the libuv pool: the JS thread then wins a
/// core whenever it wants one, so a long load never delays its timers, and
/// the pool thread (shared with the rest of the process) keeps its own
/// priority.
pub fn at_low_priority<T: Send>(work: impl FnOnce() -> T + Send) -> Option<T> {
    std::thread::scope(
        |scope| match scoped(scope, "dsh-load", Priority::Low, work) {
            Ok(handle) => handle.join().ok(),
            Err(not_started) => Some((not_started.work)()),
        },
    )
}

/// Let the JS thread win a core over this helper thread: at nice 10 it
/// uses what is idle (on Linux a thread's nice value is its own), never
/// above the process's own priority.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: getpriority and setpriority have no memory effects; 0 is this
    // thread on Linux.
    unsafe {
        let nice = HELPER_NICE.max(libc::getpriority(libc::PRIO_PROCESS, 0));
        libc::setpriority(libc::PRIO_PROCESS, 0, nice);
    }
}

#[cfg(target_os = "linux")]
const HELPER_NICE: i32 = 10;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_started_thread_runs_its_work_under_its_name() {
        let name = detached("dsh-test", Priority::Caller, || {
            std::thread::current().name().map(str::to_string)
        })
        .map_err(|n| n.error())
        .expect("started");
        assert_eq!(joined(name.join(), "the test"), Ok(Some("dsh-test".into())));
        let mut seen = 0;
        std::thread::scope(|scope| {
            let handle = scoped(scope, "dsh-test", Priority::Low, || seen += 1)
                .map_err(|n| n.error())
                .expect("started");
            joined(handle.join(), "the test").expect("joined");
        });
        assert_eq!(seen, 1);
        assert_eq!(at_low_priority(|| 7), Some(7));
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
        let handle = detached("dsh-test", Priority::Caller, || -> u8 { panic!("boom") })
            .map_err(|n| n.error())
            .expect("started");
        let e = joined(handle.join(), "the test thread").expect_err("panicked");
        assert_eq!(e.code(), "INTERNAL");
        assert_eq!(
            e.message(),
            "the test thread failed inside dsh-session-native (a bug): boom"
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_helper_thread_runs_at_nice_10_and_the_caller_keeps_its_own() {
        // SAFETY: getpriority has no memory effects.
        let own = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        let nice = std::thread::scope(|scope| {
            // SAFETY: as above.
            let handle = scoped(scope, "dsh-test", Priority::Low, || unsafe {
                libc::getpriority(libc::PRIO_PROCESS, 0)
            });
            handle.map_err(|n| n.error()).expect("started").join()
        })
        .expect("helper thread");
        assert_eq!(nice, HELPER_NICE.max(own));
        // SAFETY: as above.
        assert_eq!(unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }, own);
    }
}
