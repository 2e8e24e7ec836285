//! `llmprobe demo`. (Skeleton.)

use crate::cli::{DemoArgs, GlobalArgs};
use crate::error::Result;

pub fn run(_g: &GlobalArgs, _args: DemoArgs) -> Result<u8> {
    Ok(0)
}
