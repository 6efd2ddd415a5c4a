//! Integration tests of rewardlab-models: one binary, a module per area.

mod models {
    mod adapters;
    mod common;
    mod lora;
    mod oracle;
    mod paths;
    mod rollout;
}
