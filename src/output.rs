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
    Fitted {
        table: styled_table(header),
        header: header.iter().map(|h| h.to_string()).collect(),
        optional: Vec::new(),
        width: width(),
    }
}

/// A table in llmprobe's style, with `header`, at its natural width.
fn styled_table(header: &[&str]) -> Table {
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
        let width = usize::from(width);
        let mut shown: Vec<usize> = (0..self.header.len()).collect();
        let mut hidden = Vec::new();
        for &column in &self.optional {
            if natural(&self.build(&shown, None)) <= width {
                break;
            }
            if let Some(at) = shown.iter().position(|c| *c == column) {
                shown.remove(at);
                hidden.push(self.header[column].as_str());
            }
        }
        let mut t = self.build(&shown, None);
        if natural(&t) > width {
            t = self.build(&shown, Some(width));
        }
        write!(f, "{t}")?;
        if !hidden.is_empty() {
            let note = format!(
                "hidden to fit {width} columns: {}; --wide, a wider terminal or --json shows them",
                hidden.join(", ")
            );
            write!(f, "\n{}", wrap(&note, width))?;
        }
        Ok(())
    }
}

impl Fitted {
    /// The table with only the `shown` columns; with a width, each column
    /// narrowed (the widest first) until the table fits, and its cells
    /// wrapped by [`wrap_cell`], which never breaks an identifier mid-word.
    fn build(&self, shown: &[usize], width: Option<usize>) -> Table {
        let rows: Vec<Vec<String>> = self
            .table
            .row_iter()
            .map(|r| {
                let cells: Vec<String> = r.cell_iter().map(|c| c.content()).collect();
                shown
                    .iter()
                    .map(|&c| cells.get(c).cloned().unwrap_or_default())
                    .collect()
            })
            .collect();
        let header: Vec<&str> = shown.iter().map(|&c| self.header[c].as_str()).collect();
        let mut t = styled_table(&header);
        let Some(width) = width else {
            t.add_rows(rows);
            return t;
        };
        let widest_line = |text: &str| text.lines().map(|l| l.chars().count()).max().unwrap_or(0);
        let mut widths: Vec<usize> = (0..shown.len())
            .map(|i| {
                rows.iter()
                    .map(|r| widest_line(&r[i]))
                    .chain([widest_line(header[i])])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        // What the borders and padding take: the table as it is, less its
        // cells' widths.
        let frame = natural(&{
            let mut t = styled_table(&header);
            t.add_rows(rows.clone());
            t
        }) - widths.iter().sum::<usize>();
        let least: Vec<usize> = header
            .iter()
            .map(|h| {
                h.split(' ')
                    .map(|w| w.chars().count())
                    .max()
                    .unwrap_or(0)
                    .max(6)
            })
            .collect();
        while frame + widths.iter().sum::<usize>() > width {
            let Some(i) = (0..widths.len())
                .filter(|&i| widths[i] > least[i])
                .max_by_key(|&i| (widths[i], std::cmp::Reverse(i)))
            else {
                break;
            };
            widths[i] -= 1;
        }
        t.set_header(
            header
                .iter()
                .zip(&widths)
                .map(|(h, w)| wrap_cell(h, *w))
                .collect::<Vec<_>>(),
        );
        for row in rows {
            t.add_row(
                row.iter()
                    .zip(&widths)
                    .map(|(c, w)| wrap_cell(c, *w))
                    .collect::<Vec<_>>(),
            );
        }
        t
    }
}

/// The width of a table's widest line.
fn natural(t: &Table) -> usize {
    t.to_string()
        .lines()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0)
}

/// A cell's text in lines of at most `width` characters, broken only
/// after a space or inside an identifier at `::`, `/`, `-` or `_` (the
/// mark stays on the first line); a piece with no such place that is
/// still too long ends in `…` (`--json` keeps the whole value).
pub fn wrap_cell(text: &str, width: usize) -> String {
    let width = width.max(2);
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        let first = out.len();
        let mut current = String::new();
        for piece in pieces(line) {
            let n = current.chars().count();
            let m = piece.trim_end().chars().count();
            if n > 0 && n + m > width {
                out.push(current.trim_end().to_string());
                current = String::new();
            }
            if current.is_empty() && piece.chars().count() > width {
                let mut cut: String = piece.chars().take(width - 1).collect();
                cut.push('…');
                out.push(cut);
                continue;
            }
            current.push_str(if current.is_empty() {
                piece.trim_start()
            } else {
                piece
            });
        }
        if !current.is_empty() || out.len() == first {
            out.push(current.trim_end().to_string());
        }
    }
    out.join("\n")
}

/// `line` cut after each place it may break: a space, or an identifier's
/// `::`, `/`, `-` or `_`.
fn pieces(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let end = match bytes[i] {
            b':' if bytes.get(i + 1) == Some(&b':') => Some(i + 2),
            b' ' | b'/' | b'-' | b'_' => Some(i + 1),
            _ => None,
        };
        match end {
            Some(end) => {
                out.push(&line[start..end]);
                start = end;
                i = end;
            }
            None => i += 1,
        }
    }
    if start < line.len() {
        out.push(&line[start..]);
    }
    out
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

static WIDE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `--wide`: every table at its full width, whatever the terminal's.
pub fn set_wide(wide: bool) {
    WIDE.store(wide, std::sync::atomic::Ordering::Relaxed);
}

/// How wide a table may be: the terminal's width when stdout is a
/// terminal; else `COLUMNS` when it is set (a script that asks for a
/// width); else no limit, so that piped output keeps one line per row for
/// the programs that read it.
pub fn width() -> Option<u16> {
    if WIDE.load(std::sync::atomic::Ordering::Relaxed) {
        return None;
    }
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
            "hidden to fit 40 columns: NOTE; --wide, a wider terminal or --json shows them"
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
    fn identifiers_break_only_at_their_marks_or_end_in_an_ellipsis() {
        let id = "openrouter::meta-llama/llama-3.3-70b-instruct:free";
        let lines: Vec<String> = wrap_cell(id, 16).lines().map(String::from).collect();
        assert!(lines.len() > 1, "{lines:?}");
        assert_eq!(lines.concat(), id, "nothing lost or added: {lines:?}");
        for l in &lines[..lines.len() - 1] {
            assert!(l.chars().count() <= 16, "{lines:?}");
            assert!(
                l.ends_with("::") || l.ends_with(['/', '-', '_']),
                "a break inside a word: {lines:?}"
            );
        }
        // Words wrap at spaces, and the space is not kept at a line's end.
        assert_eq!(
            wrap_cell("error (401) hard 1/3", 12),
            "error (401)\nhard 1/3"
        );
        // A piece longer than the width with no place to break is cut.
        assert_eq!(wrap_cell("abcdefghijkl", 6), "abcde…");
        // Lines already in a cell stay lines.
        assert_eq!(wrap_cell("a\nb", 6), "a\nb");
    }

    #[test]
    fn a_table_that_must_wrap_never_breaks_a_model_name_mid_word() {
        let mut t = table(&["MODEL", "STATE", "REASON"]).with_width(Some(44));
        t.add_row([
            "openrouter::meta-llama/llama-3.3-70b-instruct:free",
            "disabled",
            "3 hard failures: error (401)",
        ]);
        let text = t.to_string();
        assert!(widest(&t) <= 44, "{text}");
        for word in [
            "openrouter::",
            "meta-",
            "llama/",
            "instruct:free",
            "disabled",
            "failures:",
        ] {
            assert!(text.contains(word), "{word} broken in\n{text}");
        }
    }

    #[test]
    fn no_width_means_no_change() {
        let mut t = wide().with_width(None);
        t.optional(&[1]);
        assert!(t.to_string().contains("a very long note that nobody needs"));
        assert_eq!(t.to_string(), t.table.to_string());
    }
}
