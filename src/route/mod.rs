//! `llmprobe route`: send each request to a model that works now.
//!
//! - [`choose`] turns the requested model into ordered candidates, from the
//!   catalog, the model states and recent [`health`];
//! - the [`engine`] tries them in turn within the attempt budget, skips what
//!   would exceed a [`crate::usage::limits`] budget, and benches what fails through
//!   [`crate::route::cooldown`], in [`shared`] state (Redis) when several
//!   instances run as one;
//! - the engine answers in [`domain`] terms, and each inbound
//!   [`surface`] (Chat Completions, Messages, Responses, Completions)
//!   parses its API's requests and renders the answers in its shape;
//!   [`serve`] mounts the surfaces over axum;
//! - under `--serve`, the [`prober`] re-probes paused models and heuristic
//!   benches in the background, so they come back in minutes, and
//!   [`alerts`] tells the alert channels of day-long benches and degraded
//!   mode.

pub mod affinity;
pub mod alerts;
pub mod ask;
pub mod choose;
pub mod cooldown;
pub mod degraded;
pub mod domain;
pub mod engine;
pub mod health;
pub mod items;
pub mod metrics;
pub mod persist;
pub mod prober;
pub mod providers;
pub mod reach;
pub mod send;
pub mod serve;
pub mod shared;
pub mod speed;
pub mod surface;
pub mod verdicts;
