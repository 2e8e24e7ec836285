//! API keys in memory, and their redaction from anything that leaves the
//! process.
//!
//! A key is read from the environment into a [`Secret`], whose Debug and
//! Display print `*****`, so a config or a provider can be logged safely.
//! Text that came from outside (an upstream error body, a transport error)
//! passes through a [`Redactor`] before it is logged, printed or returned,
//! because upstreams do echo keys back.

use std::fmt;

#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: String) -> Secret {
        Secret(value)
    }

    /// The key itself, for the one place that needs it: an HTTP header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("*****")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("*****")
    }
}

/// Removes every known key, and anything shaped like a provider key, from
/// text.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    secrets: Vec<Secret>,
}

/// Prefixes of well-known key formats. A token that starts with one of these
/// and is long enough is redacted even when it is not a key we hold.
const KEY_PREFIXES: &[&str] = &[
    "sk-",
    "sk_",
    "gsk_",
    "nvapi-",
    "hf_",
    "AIza",
    "xai-",
    "csk-",
    "fw_",
    "pk-",
    "ghp_",
    "github_pat_",
    "r8_",
];

pub const MASK: &str = "[REDACTED]";

impl Redactor {
    pub fn new(secrets: impl IntoIterator<Item = Secret>) -> Redactor {
        let mut secrets: Vec<Secret> = secrets
            .into_iter()
            .filter(|s| s.expose().len() >= 4)
            .collect();
        // Longest first, so a key that contains another is masked whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.expose().len()));
        secrets.dedup();
        Redactor { secrets }
    }

    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in &self.secrets {
            let k = s.expose();
            if out.contains(k) {
                out = out.replace(k, MASK);
            }
            // Upstreams often echo a shortened key, such as "sk-abc...wxyz".
            if k.len() >= 12 {
                let head = &k[..k.len().min(8)];
                let tail = &k[k.len() - 4..];
                if out.contains(head) && out.contains(tail) {
                    out = out.replace(head, MASK).replace(tail, MASK);
                }
            }
        }
        mask_key_shaped(&out)
    }
}

/// Mask tokens that look like provider keys: a known prefix followed by at
/// least 12 key characters.
fn mask_key_shaped(text: &str) -> String {
    let is_key_char = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    'outer: while !rest.is_empty() {
        for p in KEY_PREFIXES {
            if rest.starts_with(p) && out.chars().last().is_none_or(|c| !is_key_char(c)) {
                let len = rest.find(|c: char| !is_key_char(c)).unwrap_or(rest.len());
                if len >= p.len() + 12 {
                    out.push_str(MASK);
                    rest = &rest[len..];
                    continue 'outer;
                }
            }
        }
        let c = rest.chars().next().unwrap();
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_key_and_its_abbreviation_are_masked() {
        let key = "canary-0123456789abcdefXYZ";
        let r = Redactor::new([Secret::new(key.into())]);
        let out = r.redact(&format!(
            "Incorrect API key provided: {key}. And again canary-0...fXYZ"
        ));
        assert!(!out.contains(key), "{out}");
        assert!(!out.contains("fXYZ"), "{out}");
        assert!(out.contains(MASK));
    }

    #[test]
    fn key_shaped_tokens_are_masked() {
        let r = Redactor::default();
        let out = r.redact("bad key gsk_abcdefghijklmnopqrstuv here; task-id sk-short");
        assert_eq!(out, "bad key [REDACTED] here; task-id sk-short");
    }

    #[test]
    fn debug_never_shows_the_value() {
        let s = Secret::new("hunter2-hunter2".into());
        assert_eq!(format!("{s:?} {s}"), "***** *****");
    }
}
