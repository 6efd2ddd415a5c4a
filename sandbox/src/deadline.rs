//! A point in time after which a tool call stops working.
//!
//! Tools check the deadline inside their loops (per file, per chunk, per match) rather than
//! racing a timer against the work, so a timed-out call both returns promptly and actually stops.

use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug)]
pub(crate) struct Deadline {
    start: Instant,
    budget: Duration,
}

impl Deadline {
    pub(crate) fn after(budget: Duration) -> Self {
        Deadline { start: Instant::now(), budget }
    }

    pub(crate) fn expired(&self) -> bool {
        self.start.elapsed() >= self.budget
    }

    pub(crate) fn budget(&self) -> Duration {
        self.budget
    }
}
