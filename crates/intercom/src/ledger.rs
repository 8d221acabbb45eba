//! Persisting an outbound task through the Phylactery's Intercom task/outbox table (feature
//! `ledger`). In progress.
