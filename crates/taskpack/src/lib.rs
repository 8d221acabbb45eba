//! reach-taskpack: signed task packs (skeleton; see issue #27).
