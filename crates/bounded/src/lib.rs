//! reach-bounded (being written).
