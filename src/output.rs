//! Printing to stdout: tables that respect `NO_COLOR` and a non-TTY stdout,
//! and writes whose closed-pipe error surfaces as [`Error`] so that
//! `llmprobe state | head` ends quietly with success.

use std::io::{IsTerminal, Write};

use comfy_table::{ContentArrangement, Table, presets};

use crate::error::{Error, Result};

/// Write `text` to stdout. A closed pipe comes back as an error that
/// [`crate::run`] treats as success.
pub fn print(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|_| out.flush())
        .map_err(Error::Stdout)
}

pub fn println(text: &str) -> Result<()> {
    let mut s = String::with_capacity(text.len() + 1);
    s.push_str(text);
    s.push('\n');
    print(&s)
}

/// Print a value as pretty JSON.
pub fn print_json(value: &impl serde::Serialize) -> Result<()> {
    let s = serde_json::to_string_pretty(value).expect("serialisable");
    println(&s)
}

/// Whether styling (colour, box drawing) suits stdout.
pub fn styled() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// A table with the house style: UTF-8 borders on a terminal, plain ASCII
/// when piped or under NO_COLOR.
pub fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    if styled() {
        t.load_style(presets::UTF8_FULL_CONDENSED);
    } else {
        t.load_style(presets::ASCII_MARKDOWN);
        t.force_no_tty();
    }
    t.set_content_arrangement(ContentArrangement::Disabled);
    t.set_header(header.iter().copied());
    t
}
