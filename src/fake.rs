//! A scriptable fake LLM provider on 127.0.0.1. (Skeleton.)

use crate::cli::{FakeArgs, GlobalArgs};
use crate::error::Result;

pub fn run(_g: &GlobalArgs, _args: FakeArgs) -> Result<u8> {
    Ok(0)
}
