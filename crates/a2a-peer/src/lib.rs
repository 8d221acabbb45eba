//! A2A 1.0 peer for tests (in progress).
