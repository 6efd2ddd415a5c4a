//! Integration tests of rewardlab-models: one binary, a module per area.

mod models {
    mod common;
    mod oracle;
    mod paths;
    mod lora;
    mod rollout;
    mod adapters;
}
