//! What the read commands show: `rollup`'s and `brief`'s reports, and what
//! `state` and `brief` show of a model's capabilities ([`capview`]) and of
//! a paused model's next re-probe ([`nextprobe`]). The figures come from
//! [`crate::healthlog`]; the command files in `cmd/` check the flags, read
//! the files and call these.

pub mod brief;
pub mod capview;
pub mod nextprobe;
pub mod rollup;
