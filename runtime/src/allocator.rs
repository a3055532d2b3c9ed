//! The C allocator's thresholds for a process that writes a join's output, set once at start
//! by the `skewjoin` binary.
//!
//! glibc's malloc serves a large block with a mapping of its own and trims a heap's free top
//! back to the system, and it raises those thresholds as it goes, a block at a time. A written
//! join allocates and frees blocks of a megabyte or more all the time (each column of each
//! batch it assembles, each page the Parquet writer compresses), and freed, their pages went
//! back to the system, to be faulted in and zeroed again by the next batch: TPC-H SF1's orders
//! x lineitem written as a left join took 420,000 minor faults, against 197,000 with the fixed
//! thresholds here, and 4 % less time (BENCHMARKS.md). Blocks below 32 MiB (as high as glibc's
//! own threshold would rise) come from the heaps, and up to 256 MiB of a heap's free top is kept
//! for the next batch.
//!
//! A counted join, which holds its records and frees little until it ends, gains nothing from
//! them: lineitem x orders counted took 2.02 and 2.09 s without and with them (9 alternating
//! runs), so they are set only where the output is written. Only the binary sets them: a library
//! does not change the allocator of the process that embeds it. A user who sets either
//! threshold in `GLIBC_TUNABLES` keeps their own.

/// The largest block served from a heap rather than a mapping of its own: the most glibc's
/// dynamic threshold rises to on 64-bit machines (`DEFAULT_MMAP_THRESHOLD_MAX`). 64 MiB (which
/// glibc 2.36 accepts too) measured the same within the spread.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD_BYTES: libc::c_int = 32 << 20;

/// Free bytes at the top of a heap that are kept rather than given back to the system.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_THRESHOLD_BYTES: libc::c_int = 256 << 20;

/// Fixes glibc's mapping and trimming thresholds for this process (see the module's
/// documentation), unless `GLIBC_TUNABLES` sets either. Does nothing with other C libraries.
/// Call it in `main` before any other thread starts.
pub fn tune_for_batches() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let tunables = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
        if tunables.contains("malloc.mmap_threshold") || tunables.contains("malloc.trim_threshold")
        {
            return;
        }
        // SAFETY: mallopt only sets the allocator's parameters; it is called before this
        // process starts other threads. A value glibc refuses leaves its default in place,
        // which costs only time, so the result is not checked.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES);
            libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES);
        }
    }
}
