//! The Room of a task run (Story 013, "Flow"): who speaks, in which turn, what the Chair
//! decides, what each experiment recorded and the recipe — as signed facts and checked
//! transitions. Core drives it and stores its facts; ward signs them; nothing here does IO
//! or reads a clock. A passage's own bytes are `reach-passage`'s.

#![forbid(unsafe_code)]

pub mod chair;
pub mod fact;
pub mod recipe;
pub mod record;
pub mod room;
