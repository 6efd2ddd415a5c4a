//! Integration tests of rewardlab-sandbox. Every test builds its own throwaway git
//! repositories in temp dirs with the `git` CLI, so they are hermetic.

mod sandbox {
    mod cache;
    mod escape;
    pub mod helpers;
    mod index;
    mod limits;
    mod memo;
    mod oracle;
    mod security;
    mod store;
    mod turns;
}
