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

/// Let the JS thread win a core over this helper thread: it only uses what
/// is idle (on Linux a thread's nice value and time slice are its own).
///
/// Nice 10 alone leaves the JS thread waiting for the helper's time slice
/// to end (EEVDF, Linux 6.6+): a 1 ms timer then fired up to 5-7 ms late
/// while a load ran on both cores. A helper slice longer than the default
/// lets a waking default-slice thread preempt it at once (Linux 6.12+
/// wakes shorter slices first), which measured 1.3-2.9 ms; older kernels
/// ignore the slice of a fair-policy thread.
pub(crate) fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        // Never above the thread's own priority (a niced process stays so),
        // and the slice only under the normal policy (a batch, idle or
        // real-time process keeps its own).
        // SAFETY: getpriority, sched_getscheduler and setpriority have no
        // memory effects; 0 is this thread on Linux.
        let nice = HELPER_NICE.max(unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) });
        let normal = unsafe { libc::sched_getscheduler(0) } == libc::SCHED_OTHER;
        if !normal || set_helper_schedule(nice).is_err() {
            // SAFETY: as above.
            unsafe {
                libc::setpriority(libc::PRIO_PROCESS, 0, nice);
            }
        }
    }
}

#[cfg(target_os = "linux")]
const HELPER_NICE: i32 = 10;

/// The time slice a helper thread asks for (the kernel allows 0.1-100 ms;
/// the default is 0.75 ms times 1 + log2 of the cores, up to 3 ms).
#[cfg(target_os = "linux")]
const HELPER_SLICE_NS: u64 = 20_000_000;

/// `struct sched_attr` of sched_setattr(2), first version (48 bytes).
#[cfg(target_os = "linux")]
#[repr(C)]
#[derive(Default)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
}

/// This thread: normal policy, `nice`, a long time slice.
#[cfg(target_os = "linux")]
fn set_helper_schedule(nice: i32) -> std::io::Result<()> {
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: libc::SCHED_OTHER as u32,
        nice,
        runtime: HELPER_SLICE_NS,
        ..SchedAttr::default()
    };
    // SAFETY: the kernel reads `attr.size` bytes of a live, initialized
    // struct; pid 0 is the calling thread; flags must be 0.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn a_helper_thread_runs_at_nice_10_with_a_long_slice() {
        // SAFETY: getpriority and sched_getscheduler have no memory effects.
        let own = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        let own_policy = unsafe { libc::sched_getscheduler(0) } as u32;
        let (nice, attr) = std::thread::spawn(|| {
            lower_priority();
            let mut attr = SchedAttr::default();
            // SAFETY: the kernel writes at most `size` bytes into `attr`.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_sched_getattr,
                    0,
                    &mut attr as *mut SchedAttr,
                    std::mem::size_of::<SchedAttr>() as u32,
                    0,
                )
            };
            // SAFETY: getpriority has no memory effects.
            let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
            (nice, (r == 0).then_some(attr))
        })
        .join()
        .expect("helper thread");
        assert_eq!(nice, HELPER_NICE.max(own));
        if let Some(attr) = attr {
            assert_eq!(attr.nice, HELPER_NICE.max(own));
            // The policy is the process's own; only a normal one gets the
            // long slice (kernels before 6.12 keep none for it; later ones
            // show other policies' default slice).
            assert_eq!(attr.policy, own_policy);
            if own_policy == libc::SCHED_OTHER as u32 {
                assert!(
                    attr.runtime == HELPER_SLICE_NS || attr.runtime == 0,
                    "slice {}",
                    attr.runtime
                );
            } else {
                assert_ne!(attr.runtime, HELPER_SLICE_NS);
            }
        }
        // The JS thread (here: the test thread) keeps its own priority.
        // SAFETY: as above.
        assert_eq!(unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }, own);
    }
}
