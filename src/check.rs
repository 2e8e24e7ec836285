//! `llmprobe check`. (Skeleton.)

use crate::cli::CheckArgs;
use crate::error::Result;
use crate::settings::Settings;

pub fn run(_s: &Settings, _args: CheckArgs) -> Result<u8> {
    Ok(0)
}

pub fn list(_s: &Settings, _json: bool) -> Result<u8> {
    Ok(0)
}
