//! The `--window` of `rollup` and `brief`: how far back from now a summary
//! looks. `24h`, `7d`, `30d`, `all`, or any duration such as `36h` or `90m`.
//!
//! Parsing happens before any file is read, so a bad value is a usage error
//! (exit 2) that names the flag.

use crate::error::{Error, Result};

/// A validated window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// The length in seconds; `None` for `all`.
    pub secs: Option<i64>,
    /// The text the user gave, normalised (`24h`, `all`), for labels.
    pub label: String,
}

impl Window {
    pub fn parse(s: &str) -> Result<Window> {
        Window::parse_as(s, "--window")
    }

    /// [`Window::parse`], naming the value `what` in the error (`window`
    /// for a URL's query).
    pub fn parse_as(s: &str, what: &str) -> Result<Window> {
        let t = s.trim().to_ascii_lowercase();
        if t == "all" {
            return Ok(Window {
                secs: None,
                label: "all".into(),
            });
        }
        let bad = || {
            Error::config(format!(
                "invalid {what} '{s}': expected all or a duration such as 24h, 7d, 36h, 90m, 2w"
            ))
        };
        let split = t.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        let (num, unit) = t.split_at(split);
        let n: i64 = num.parse().map_err(|_| bad())?;
        let mult = match unit {
            "s" => 1,
            "m" | "min" => 60,
            "h" => 3600,
            "d" => 86_400,
            "w" => 7 * 86_400,
            _ => return Err(bad()),
        };
        let secs = n.checked_mul(mult).filter(|&v| v > 0).ok_or_else(bad)?;
        Ok(Window {
            secs: Some(secs),
            label: t,
        })
    }

    /// The first second inside the window, for a window ending at `now`.
    pub fn start(&self, now: i64) -> i64 {
        match self.secs {
            Some(s) => now - s,
            None => i64::MIN,
        }
    }

    /// "Last 24h", "All time": for headings.
    pub fn title(&self) -> String {
        match self.secs {
            None => "All time".into(),
            Some(_) => format!("Last {}", self.label),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_all() {
        assert_eq!(Window::parse("24h").unwrap().secs, Some(86_400));
        assert_eq!(Window::parse("7d").unwrap().secs, Some(7 * 86_400));
        assert_eq!(Window::parse("30d").unwrap().secs, Some(30 * 86_400));
        assert_eq!(Window::parse("36h").unwrap().secs, Some(36 * 3600));
        assert_eq!(Window::parse("90m").unwrap().secs, Some(5400));
        assert_eq!(Window::parse("ALL").unwrap().secs, None);
        assert_eq!(Window::parse("all").unwrap().start(5), i64::MIN);
        assert_eq!(Window::parse("1h").unwrap().start(7200), 3600);
        for bad in [
            "",
            "h",
            "24",
            "0h",
            "-1h",
            "24x",
            "1.5h",
            "99999999999999999999d",
        ] {
            let e = Window::parse(bad).unwrap_err().to_string();
            assert!(e.contains("--window"), "{bad}: {e}");
        }
    }
}
