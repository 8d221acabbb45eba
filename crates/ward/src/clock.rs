//! The desk's injected time (the shared `reach-clock`).

pub use reach_clock::{Clock, ManualClock, SystemClock, UnixMillis};
