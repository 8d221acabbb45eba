//! The Room of a task run (Story 013, "Flow"): who speaks, what they are given, what comes
//! back, and what the Chair decides — as data and checked transitions. Core drives it and
//! stores its facts; ward signs them; nothing here does IO or reads a clock.
//!
//! The prompt side ([`fence`], [`evidence`], [`render`], [`passage`]) turns a pack's prompt
//! document, the goal and the explicit evidence inputs into the exact bytes one passage
//! carries, and quarantines what comes back. The Room side ([`fact`], [`room`], [`chair`],
//! [`record`], [`recipe`]) is the signed history: turns, proposals, reviews, Chair
//! decisions, experiments and the recipe.

#![forbid(unsafe_code)]

// ---- the prompt side (fence, evidence, render, passage) ----
pub mod evidence;
pub mod fence;
pub mod passage;
pub mod render;

// ---- the Room side (fact, room, chair, record, recipe) ----
pub mod chair;
pub mod fact;
pub mod recipe;
pub mod record;
pub mod room;
