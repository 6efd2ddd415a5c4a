//! Thread-count hygiene for candle on the CPU.
//!
//! candle 0.11 asks `candle_core::utils::get_num_threads()` on every matmul,
//! and that function is not cached: unless `RAYON_NUM_THREADS` is set it
//! looks for a CPU mask in the environment, then reads and parses
//! `/proc/cpuinfo` (`num_cpus::get_physical`). With the tiny model's many
//! small matmuls that was half of decode time (perf: `show_cpuinfo`,
//! `vsnprintf`, string scanning), so a process that runs the model sets the
//! variable once, before any thread starts.

/// Sets `RAYON_NUM_THREADS` to the available parallelism unless it is set,
/// so candle (and rayon's global pool) read the thread count from the
/// environment instead of `/proc/cpuinfo` on every matmul.
///
/// # Safety
///
/// Call it at the start of `main`, before any other thread exists: it
/// writes the process environment, which is unsound while another thread may
/// read it.
pub unsafe fn set_thread_count_env() {
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        // SAFETY: the caller guarantees no other thread runs yet.
        unsafe { std::env::set_var("RAYON_NUM_THREADS", n.to_string()) };
    }
}
