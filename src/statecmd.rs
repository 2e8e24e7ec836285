//! `llmprobe statecmd`. (Skeleton.)

use crate::cli::StateArgs;
use crate::error::Result;
use crate::settings::Settings;

pub fn run(_s: &Settings, _args: StateArgs) -> Result<u8> {
    Ok(0)
}
