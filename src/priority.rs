//! Helper-thread priorities: CPU-heavy load work runs below the JS thread,
//! so the event loop wins a core whenever it wants one.

/// Run `work` on a thread of its own at a lower priority and wait for it
/// (inline if no thread can be started); `None` if it panicked. For
/// CPU-heavy work started from the libuv pool: the JS thread then wins a
/// core whenever it wants one, so a long load never delays its timers, and
/// the pool thread (shared with the rest of the process) keeps its own
/// priority.
pub fn at_low_priority<T: Send>(work: impl FnOnce() -> T + Send) -> Option<T> {
    let mut work = Some(work);
    let mut out = None;
    let mut started = false;
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new().spawn_scoped(scope, || {
            lower_priority();
            work.take().map(|w| w())
        });
        if let Ok(handle) = spawned {
            started = true;
            out = handle.join().ok().flatten();
        }
    });
    if started {
        return out;
    }
    work.map(|w| w())
}

/// Let the JS thread win a core over this helper thread: at nice 10 it
/// uses what is idle (on Linux a thread's nice value is its own), never
/// above the process's own priority.
pub(crate) fn lower_priority() {
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

    #[cfg(target_os = "linux")]
    #[test]
    fn a_helper_thread_runs_at_nice_10_and_the_caller_keeps_its_own() {
        // SAFETY: getpriority has no memory effects.
        let own = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        let nice = std::thread::spawn(|| {
            lower_priority();
            // SAFETY: as above.
            unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
        })
        .join()
        .expect("helper thread");
        assert_eq!(nice, HELPER_NICE.max(own));
        // SAFETY: as above.
        assert_eq!(unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }, own);
    }
}
