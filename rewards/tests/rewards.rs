//! Integration tests of `rewardlab-rewards`: metric properties, the SWE-bench
//! data, commit mining against `git diff`, and CATM end to end against a stub
//! judge server.

mod rewards {
    pub mod catm;
    pub mod commits;
    pub mod mining;
    pub mod props;
    pub mod swebench;
}
