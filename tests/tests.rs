//! The integration tests: one binary, each test driving the real `llmprobe`
//! executable in its own temporary directory, against fake providers on
//! 127.0.0.1.

#[cfg(unix)]
mod abuse;
mod alerts;
mod architecture;
mod badges;
mod bands;
mod capabilities_show;
mod check;
mod check_capabilities;
mod check_hooks;
mod check_paused;
mod check_stop;
mod cli;
mod degraded;
mod discovery;
mod faults;
mod layout;
mod notify;
mod probe_budget;
mod probe_stream;
mod read_cmds;
#[cfg(unix)]
mod readme;
mod reprobe;
mod route;
mod route_alerts;
mod route_env;
mod route_speed;
#[cfg(unix)]
mod schedule;
mod security;
mod stale;
mod status_page;
mod support;
mod surfaces_anthropic;
mod surfaces_misc;
mod surfaces_responses;
