//! One passage of a task Room (Story 013, "Inference Classes"): the pack's prompt document
//! rendered ([`render`]) with the goal and the explicit evidence inputs ([`evidence`]), each
//! fenced and digest-bound ([`fence`]); the payload it travels as through the inference
//! boundary; and the quarantine ([`quarantine`]) that admits only a schema-valid candidate or
//! review. Nothing here does IO or reads a clock.

#![forbid(unsafe_code)]

pub mod evidence;
pub mod fence;
pub mod quarantine;
pub mod render;

pub use evidence::Evidence;
