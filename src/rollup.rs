//! `llmprobe rollup`. (Skeleton.)

use crate::cli::RollupArgs;
use crate::error::Result;
use crate::settings::Settings;

pub fn run(_s: &Settings, _args: RollupArgs) -> Result<u8> {
    Ok(0)
}
