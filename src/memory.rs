//! Giving freed memory back to the system.
//!
//! glibc's allocator keeps what a process frees in its heaps, to reuse it;
//! a live session's idle hand-over (texts copied in, transient buffers
//! freed) leaves free pages between the blocks it keeps, which stay
//! resident until something asks for them back. `release_free_memory`
//! asks: it returns the free pages of every heap (`malloc_trim`), in well
//! under a millisecond. Not after the compressor frees a log's raw blocks:
//! the next load reuses those, and returned pages cost it their faults.
//! Other allocators (musl, macOS, Windows) return memory on their own.

/// Return free heap pages to the system (glibc); elsewhere nothing to do.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}
