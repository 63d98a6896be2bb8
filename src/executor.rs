//! The one owner of the addon's helper threads. Every thread the addon
//! starts is started here, in two places, each bounded, named `dsh-...`,
//! through `std::thread::Builder` (a failed start, a process at its thread
//! limit: `ulimit -u`, a pids cgroup, is given back, never a panic):
//!
//! - the pool (`worker`): at most `MAX_WORKERS` threads, started as work
//!   comes and ended after `IDLE` without any. `queue` hands it a job that
//!   waits its turn beyond the bound (the PostgreSQL store's calls, which
//!   may wait on a network: never libuv's pool, whose four threads every
//!   `fs` call shares); `start` hands it work only when a worker is free
//!   now (the log's compressor, a `fromJsonl` read, a seed's checks), and
//!   gives the work back otherwise, for the caller to run itself or leave
//!   for later: such work is waited for by a caller that must not wait
//!   behind a network call. Its result is a `Task` that a later call takes
//!   (`try_take`) or waits for (`wait`);
//! - helpers of a scope (`scoped`): at most `MAX_SCOPED` at once, each a
//!   part of a read (a piece's back half, a compression) that borrows the
//!   caller's bytes and is joined before the scope ends; beyond the bound
//!   the work is given back and runs on the caller.
//!
//! Data structures hand work here and never start threads; no helper
//! changes its priority (a library leaves its host's scheduling alone). So
//! the addon has at most `MAX_WORKERS + MAX_SCOPED` helper threads.

use crate::error::{CoreError, CoreResult};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{Builder, Scope, ScopedJoinHandle};
use std::time::Duration;

/// The most pool threads at once.
pub const MAX_WORKERS: usize = 8;
/// The most scoped helpers at once.
pub const MAX_SCOPED: usize = 8;
/// A pool thread with no job for this long ends.
const IDLE: Duration = Duration::from_secs(30);

/// Work not started (no thread free under the bound, or none could start:
/// a process at its thread limit): given back to run on the calling
/// thread, or to leave for a later call. No failed start is an error.
pub struct NotStarted<F> {
    pub work: F,
}

/// A thread's result, or an `INTERNAL` error naming `what` when it panicked.
pub fn joined<T>(result: std::thread::Result<T>, what: &str) -> CoreResult<T> {
    result.map_err(|panic| CoreError::panicked(what, &*panic))
}

// ------------------------------------------------------------------ pool

type Job = Box<dyn FnOnce() + Send>;

struct Pool {
    jobs: VecDeque<Job>,
    /// Threads started and not ended.
    workers: usize,
    /// Threads waiting for a job.
    idle: usize,
}

static POOL: Mutex<Pool> = Mutex::new(Pool {
    jobs: VecDeque::new(),
    workers: 0,
    idle: 0,
});
static READY: Condvar = Condvar::new();

fn pool() -> MutexGuard<'static, Pool> {
    POOL.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Run `job` on the pool, after the jobs queued before it; `Err(job)` when
/// the pool has no thread and none can start (the caller runs it
/// elsewhere). A job catches its own panics (it settles a promise).
pub fn queue(job: Job) -> Result<(), Job> {
    let mut p = pool();
    p.jobs.push_back(job);
    if p.jobs.len() <= p.idle || p.workers >= MAX_WORKERS {
        drop(p);
        READY.notify_one();
        return Ok(());
    }
    match grow(p) {
        Ok(()) => Ok(()),
        Err(mut p) => {
            if p.workers > 0 {
                // The threads there are take it in turn.
                return Ok(());
            }
            // Another caller's job may be last now: any job will do, as
            // each settles its own promise wherever it runs.
            p.jobs.pop_back().map_or(Ok(()), Err)
        }
    }
}

/// Run `work` on a pool thread free now (an idle one, or one started for
/// it under the bound); otherwise `work` comes back.
pub fn start<T, F>(work: F) -> Result<Task<T>, NotStarted<F>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let mut p = pool();
    if p.jobs.len() >= p.idle && p.workers >= MAX_WORKERS {
        return Err(NotStarted { work });
    }
    let task = Task::new();
    let slot = Arc::new(Mutex::new(Some(work)));
    let (theirs, done) = (slot.clone(), task.0.clone());
    p.jobs.push_back(Box::new(move || {
        let work = take(&theirs);
        drop(theirs);
        if let Some(work) = work {
            let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
            *lock(&done.0) = Some(out);
            done.1.notify_all();
        }
    }));
    if p.jobs.len() <= p.idle {
        drop(p);
        READY.notify_one();
        return Ok(task);
    }
    match grow(p) {
        Ok(()) => Ok(task),
        Err(p) => {
            // The job stays queued (while `grow` let go of the lock, a
            // worker may have taken it, or later jobs come after it): the
            // work goes to whoever takes it from its slot first, a worker
            // running the job or this caller, and the job then finds its
            // slot empty and does nothing.
            drop(p);
            match take(&slot) {
                Some(work) => Err(NotStarted { work }),
                None => Ok(task),
            }
        }
    }
}

/// Start one more pool thread (the caller checked the bound); the lock
/// back when none could start.
fn grow(mut p: MutexGuard<'static, Pool>) -> Result<(), MutexGuard<'static, Pool>> {
    p.workers += 1;
    drop(p);
    match Builder::new().name("dsh-worker".into()).spawn(worker) {
        Ok(_) => Ok(()),
        Err(_) => {
            let mut p = pool();
            p.workers -= 1;
            Err(p)
        }
    }
}

/// A pool thread: jobs in turn, until `IDLE` without one.
fn worker() {
    let mut p = pool();
    loop {
        if let Some(job) = p.jobs.pop_front() {
            drop(p);
            job();
            p = pool();
            continue;
        }
        p.idle += 1;
        let (next, timeout) = READY
            .wait_timeout(p, IDLE)
            .unwrap_or_else(PoisonError::into_inner);
        p = next;
        p.idle -= 1;
        if timeout.timed_out() && p.jobs.is_empty() {
            p.workers -= 1;
            return;
        }
    }
}

type Slot<T> = (Mutex<Option<std::thread::Result<T>>>, Condvar);

/// The result of work handed to the pool (`start`), once done.
pub struct Task<T>(Arc<Slot<T>>);

impl<T> std::fmt::Debug for Task<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Task")
    }
}

impl<T> Task<T> {
    fn new() -> Task<T> {
        Task(Arc::new((Mutex::new(None), Condvar::new())))
    }

    /// The result if the work is done (never waits); `INTERNAL` naming
    /// `what` if it panicked.
    pub fn try_take(&self, what: &str) -> Option<CoreResult<T>> {
        lock(&self.0 .0).take().map(|out| joined(out, what))
    }

    /// The result, waiting for it.
    pub fn wait(self, what: &str) -> CoreResult<T> {
        let mut out = lock(&self.0 .0);
        loop {
            if let Some(done) = out.take() {
                return joined(done, what);
            }
            out = self.0 .1.wait(out).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

// ---------------------------------------------------------------- scoped

/// Scoped helpers running now.
static SCOPED: AtomicUsize = AtomicUsize::new(0);

/// Start `work` on a helper of `scope` named `name`, under `MAX_SCOPED`;
/// otherwise `work` comes back, to run on the caller.
pub fn scoped<'scope, T, F>(
    scope: &'scope Scope<'scope, '_>,
    name: &str,
    work: F,
) -> Result<ScopedJoinHandle<'scope, T>, NotStarted<F>>
where
    F: FnOnce() -> T + Send + 'scope,
    T: Send + 'scope,
{
    if SCOPED.fetch_add(1, Ordering::AcqRel) >= MAX_SCOPED {
        SCOPED.fetch_sub(1, Ordering::AcqRel);
        return Err(NotStarted { work });
    }
    let slot = Arc::new(Mutex::new(Some(work)));
    let theirs = slot.clone();
    let body = move || {
        let work = take(&theirs);
        drop(theirs);
        // Released however the work ends.
        let _running = Running;
        match work {
            Some(work) => work(),
            None => unreachable!("a started thread's work is taken by it alone"),
        }
    };
    match Builder::new().name(name.into()).spawn_scoped(scope, body) {
        Ok(handle) => Ok(handle),
        Err(_) => {
            SCOPED.fetch_sub(1, Ordering::AcqRel);
            match take(&slot) {
                Some(work) => Err(NotStarted { work }),
                None => unreachable!("a thread that did not start took its work"),
            }
        }
    }
}

/// A scoped helper running (see `SCOPED`).
struct Running;

impl Drop for Running {
    fn drop(&mut self) {
        SCOPED.fetch_sub(1, Ordering::AcqRel);
    }
}

fn take<F>(slot: &Mutex<Option<F>>) -> Option<F> {
    lock(slot).take()
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::mpsc;
    use std::time::Instant;

    /// `start` of `work`, again while the pool is busy (tests that run
    /// meanwhile may hold every worker for a while).
    fn started<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Task<T> {
        let bound = Instant::now() + Duration::from_secs(30);
        let mut work = work;
        loop {
            match start(work) {
                Ok(task) => return task,
                Err(not) if Instant::now() < bound => {
                    work = not.work;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(_) => panic!("the pool stayed busy"),
            }
        }
    }

    #[test]
    fn started_work_runs_on_a_named_pool_thread_and_its_result_is_taken() {
        let task = started(|| std::thread::current().name().map(str::to_string));
        assert_eq!(task.wait("the test"), Ok(Some("dsh-worker".into())));
        // A scoped helper: again while the bound is reached (the bound's
        // own test may hold every slot for a while).
        let bound = Instant::now() + Duration::from_secs(30);
        let name = loop {
            let name = std::thread::scope(|scope| {
                let work = || std::thread::current().name().map(str::to_string);
                let handle = scoped(scope, "dsh-test", work).ok()?;
                Some(joined(handle.join(), "the test").expect("joined"))
            });
            match name {
                Some(name) => break name,
                None if Instant::now() < bound => std::thread::sleep(Duration::from_millis(1)),
                None => panic!("the scoped helpers stayed busy"),
            }
        };
        assert_eq!(name, Some("dsh-test".into()));
    }

    #[test]
    fn work_that_panicked_is_internal_when_taken() {
        let task = started(|| -> u8 { panic!("boom") });
        let e = task.wait("the test work").expect_err("panicked");
        assert_eq!(e.code(), "INTERNAL");
        assert_eq!(
            e.message(),
            "the test work failed inside dsh-session-native (a bug): boom"
        );
    }

    #[test]
    fn the_pool_is_bounded_queues_beyond_it_and_gives_back_what_cannot_start_now() {
        // Jobs that hold their thread until released: never more than
        // `MAX_WORKERS` run at once, the rest wait in the queue, and
        // `start` gives its work back while all are busy.
        let release = Arc::new(AtomicBool::new(false));
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let (done, finished) = mpsc::channel();
        let jobs = MAX_WORKERS + 4;
        for _ in 0..jobs {
            let (release, running, most, done) =
                (release.clone(), running.clone(), most.clone(), done.clone());
            let job: Job = Box::new(move || {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                let bound = Instant::now() + Duration::from_secs(20);
                while !release.load(Ordering::SeqCst) && Instant::now() < bound {
                    std::thread::sleep(Duration::from_millis(1));
                }
                running.fetch_sub(1, Ordering::SeqCst);
                let _ = done.send(());
            });
            assert!(queue(job).is_ok());
        }
        let bound = Instant::now() + Duration::from_secs(20);
        while running.load(Ordering::SeqCst) < MAX_WORKERS && Instant::now() < bound {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(running.load(Ordering::SeqCst), MAX_WORKERS);
        assert!(start(|| 1).is_err(), "no worker free: given back");
        release.store(true, Ordering::SeqCst);
        for _ in 0..jobs {
            assert_eq!(finished.recv_timeout(Duration::from_secs(20)), Ok(()));
        }
        assert_eq!(most.load(Ordering::SeqCst), MAX_WORKERS);
    }

    #[test]
    fn scoped_helpers_are_bounded_and_give_their_work_back_beyond() {
        let started = AtomicUsize::new(0);
        let given_back = AtomicUsize::new(0);
        let release = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let mut handles = Vec::new();
            for _ in 0..MAX_SCOPED + 3 {
                let work = || {
                    let bound = Instant::now() + Duration::from_secs(20);
                    while !release.load(Ordering::SeqCst) && Instant::now() < bound {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                };
                match scoped(scope, "dsh-test", work) {
                    Ok(h) => {
                        started.fetch_add(1, Ordering::SeqCst);
                        handles.push(h);
                    }
                    Err(_) => {
                        given_back.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
            release.store(true, Ordering::SeqCst);
            for h in handles {
                joined(h.join(), "the test").expect("joined");
            }
        });
        // Other tests may hold scoped helpers meanwhile: at most the bound.
        assert!(started.load(Ordering::SeqCst) <= MAX_SCOPED);
        assert!(given_back.load(Ordering::SeqCst) >= 3);
    }
}
