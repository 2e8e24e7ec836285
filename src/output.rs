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
/// when piped or under NO_COLOR; and as wide as [`width`] allows. It
/// dereferences to the comfy-table [`Table`] for adding rows, and fits
/// itself to the width when it is shown.
pub fn table(header: &[&str]) -> Fitted {
    let mut t = Table::new();
    if styled() {
        t.load_style(presets::UTF8_FULL_CONDENSED);
    } else {
        t.load_style(presets::ASCII_MARKDOWN);
        t.force_no_tty();
    }
    t.set_content_arrangement(ContentArrangement::Disabled);
    t.set_header(header.iter().copied());
    Fitted {
        table: t,
        header: header.iter().map(|h| h.to_string()).collect(),
        optional: Vec::new(),
        width: width(),
    }
}

/// A table that fits a width, by one rule for every table llmprobe
/// prints: when its rows are wider than the width, the columns marked
/// [`optional`](Fitted::optional) are dropped first, in the order given,
/// and then cells wrap. A line under the table names the columns it hid,
/// and how to see them.
pub struct Fitted {
    table: Table,
    header: Vec<String>,
    optional: Vec<usize>,
    width: Option<u16>,
}

impl Fitted {
    /// Columns (by index) that may be left out on a narrow terminal, the
    /// least useful first.
    pub fn optional(&mut self, columns: &[usize]) -> &mut Fitted {
        self.optional = columns.to_vec();
        self
    }

    /// Fit to `width` columns instead of the terminal's (for tests).
    #[cfg(test)]
    pub fn with_width(mut self, width: Option<u16>) -> Fitted {
        self.width = width;
        self
    }
}

impl std::ops::Deref for Fitted {
    type Target = Table;
    fn deref(&self) -> &Table {
        &self.table
    }
}

impl std::ops::DerefMut for Fitted {
    fn deref_mut(&mut self) -> &mut Table {
        &mut self.table
    }
}

impl std::fmt::Display for Fitted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Some(width) = self.width else {
            return write!(f, "{}", self.table);
        };
        let mut t = self.table.clone();
        let natural = |t: &Table| {
            t.to_string()
                .lines()
                .map(|l| l.chars().count())
                .max()
                .unwrap_or(0)
        };
        let mut hidden = Vec::new();
        for &column in &self.optional {
            if natural(&t) <= usize::from(width) {
                break;
            }
            if let Some(c) = t.column_mut(column) {
                c.set_constraint(comfy_table::ColumnConstraint::Hidden);
                hidden.push(self.header.get(column).map_or("", String::as_str));
            }
        }
        if natural(&t) > usize::from(width) {
            t.set_width(width);
            t.set_content_arrangement(ContentArrangement::Dynamic);
        }
        write!(f, "{t}")?;
        if !hidden.is_empty() {
            let note = format!(
                "hidden to fit {width} columns: {}; a wider terminal, COLUMNS=200 or --json shows them",
                hidden.join(", ")
            );
            write!(f, "\n{}", wrap(&note, usize::from(width)))?;
        }
        Ok(())
    }
}

/// `text` wrapped at spaces to lines of at most `width` characters (a
/// word longer than that stands alone on its line).
fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = 0;
    for word in text.split(' ') {
        let n = word.chars().count();
        if line > 0 && line + 1 + n > width {
            out.push('\n');
            line = 0;
        } else if line > 0 {
            out.push(' ');
            line += 1;
        }
        out.push_str(word);
        line += n;
    }
    out
}

/// How wide a table may be: the terminal's width when stdout is a
/// terminal; else `COLUMNS` when it is set (a script that asks for a
/// width); else no limit, so that piped output keeps one line per row for
/// the programs that read it.
pub fn width() -> Option<u16> {
    let columns = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<u16>().ok())
        .filter(|w| *w >= 20);
    if std::io::stdout().is_terminal() {
        return columns.or_else(|| Table::new().width());
    }
    columns
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wide() -> Fitted {
        let mut t = table(&["NAME", "NOTE", "STATUS"]).with_width(Some(40));
        t.add_row([
            "groq",
            "a very long note that nobody needs on a narrow screen",
            "ok",
        ]);
        t
    }

    fn widest(t: &Fitted) -> usize {
        t.to_string()
            .lines()
            .map(|l| l.chars().count())
            .max()
            .unwrap()
    }

    #[test]
    fn a_table_wider_than_the_width_drops_optional_columns_first() {
        let mut t = wide();
        t.optional(&[1]);
        let text = t.to_string();
        let (table, note) = text.split_at(text.find("hidden").expect("a note"));
        assert!(
            !table.contains("NOTE") && table.contains("STATUS"),
            "{text}"
        );
        assert!(widest(&t) <= 40, "{text}");
        // One line per row: nothing needed wrapping once NOTE was gone.
        assert_eq!(table.lines().count(), 3, "{text}");
        // Below it, which columns went and how to see them, within the
        // width too.
        assert_eq!(
            note.split_whitespace().collect::<Vec<_>>().join(" "),
            "hidden to fit 40 columns: NOTE; a wider terminal, COLUMNS=200 or --json shows them"
        );
    }

    #[test]
    fn a_table_that_fits_says_nothing_of_hidden_columns() {
        let mut t = table(&["NAME", "STATUS"]).with_width(Some(40));
        t.add_row(["groq", "ok"]);
        t.optional(&[1]);
        assert!(!t.to_string().contains("hidden"), "{t}");
    }

    #[test]
    fn without_optional_columns_cells_wrap_to_fit() {
        let t = wide();
        let text = t.to_string();
        assert!(widest(&t) <= 40, "{text}");
        assert!(text.contains("NOTE") && text.lines().count() > 3, "{text}");
    }

    #[test]
    fn no_width_means_no_change() {
        let mut t = wide().with_width(None);
        t.optional(&[1]);
        assert!(t.to_string().contains("a very long note that nobody needs"));
        assert_eq!(t.to_string(), t.table.to_string());
    }
}
