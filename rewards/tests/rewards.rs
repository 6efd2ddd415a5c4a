//! Integration tests of `rewardlab-rewards`: metric properties, the SWE-bench
//! data, commit mining against `git diff`, CATM end to end against a stub
//! judge server, and the shipped reward files against the real schema
//! (lints, verification, rendering, generated CUDA).

mod rewards {
    pub mod catm;
    pub mod codegen;
    pub mod commits;
    pub mod leakage;
    pub mod mining;
    pub mod props;
    pub mod reward_files;
    pub mod swebench;
}
