//! Threads of the addon's own for store work that waits on a network (the
//! PostgreSQL store): such a call may wait up to its deadline on a server
//! that does not answer, and on libuv's pool (4 threads by default) four of
//! them would hold up every `fs` call and every other store of the process
//! meanwhile. The pool grows to as many threads as calls wait at once and
//! shrinks back when they idle.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

type Job = Box<dyn FnOnce() + Send>;

/// A thread with no job for this long ends.
const IDLE: Duration = Duration::from_secs(30);

struct Queue {
    jobs: VecDeque<Job>,
    /// Threads waiting for a job.
    idle: usize,
}

static QUEUE: Mutex<Queue> = Mutex::new(Queue {
    jobs: VecDeque::new(),
    idle: 0,
});
static READY: Condvar = Condvar::new();

fn lock() -> MutexGuard<'static, Queue> {
    QUEUE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Run `job` on a thread of this pool; `Err(job)` when no thread can be
/// started (the caller runs it elsewhere).
pub fn spawn(job: Job) -> Result<(), Job> {
    let mut queue = lock();
    queue.jobs.push_back(job);
    if queue.jobs.len() <= queue.idle {
        drop(queue);
        READY.notify_one();
        return Ok(());
    }
    drop(queue);
    let started = crate::threads::detached("dsh-store-net", work);
    match started {
        Ok(_) => Ok(()),
        Err(_) => lock().jobs.pop_back().map_or(Ok(()), Err),
    }
}

fn work() {
    let mut queue = lock();
    loop {
        if let Some(job) = queue.jobs.pop_front() {
            drop(queue);
            // A panic is caught by the job itself (it settles its promise).
            job();
            queue = lock();
            continue;
        }
        queue.idle += 1;
        let (next, timeout) = READY
            .wait_timeout(queue, IDLE)
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        queue = next;
        queue.idle -= 1;
        if timeout.timed_out() && queue.jobs.is_empty() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{mpsc, Arc};
    use std::time::Instant;

    #[test]
    fn as_many_jobs_wait_at_once_as_were_spawned() {
        // Each job waits until all six run: a pool that did not grow to six
        // threads would leave some waiting until the bound.
        let started = Arc::new(AtomicUsize::new(0));
        let (done, finished) = mpsc::channel();
        for _ in 0..6 {
            let started = started.clone();
            let done = done.clone();
            let job: Job = Box::new(move || {
                started.fetch_add(1, Ordering::SeqCst);
                let bound = Instant::now() + Duration::from_secs(10);
                while started.load(Ordering::SeqCst) < 6 && Instant::now() < bound {
                    std::thread::sleep(Duration::from_millis(1));
                }
                let _ = done.send(started.load(Ordering::SeqCst));
            });
            assert!(spawn(job).is_ok());
        }
        for _ in 0..6 {
            assert_eq!(finished.recv_timeout(Duration::from_secs(20)), Ok(6));
        }
    }
}
