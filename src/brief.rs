//! `llmprobe brief`. (Skeleton.)

use crate::cli::BriefArgs;
use crate::error::Result;
use crate::settings::Settings;

pub fn run(_s: &Settings, _args: BriefArgs) -> Result<u8> {
    Ok(0)
}
