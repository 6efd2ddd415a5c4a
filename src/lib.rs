//! rewardlab: design, check and compile reward and advantage functions for
//! agentic RL, and run GRPO studies over them. The work is done by the member
//! crates; this package owns the binaries, the end-to-end tests and the benches.
