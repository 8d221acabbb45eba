//! reach-plan: the closed vocabulary of task-pack plans (skeleton; see issue #27).
