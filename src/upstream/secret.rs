//! API keys in memory, and their redaction from anything that leaves the
//! process.
//!
//! A key is read from the environment into a [`Secret`], whose Debug and
//! Display print `*****`, so a config or a provider can be logged safely.
//! Text that came from outside (an upstream error body, a transport error)
//! passes through a [`Redactor`] before it is logged, printed or returned,
//! because upstreams do echo keys back.

use std::borrow::Cow;
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
/// All but "AIza" contain '-' or '_' ([`Redactor::might_mask`] relies on it).
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

    /// One that also masks `secret` (a probe adds its own provider's key, so
    /// redaction never depends on the caller's list being complete). When
    /// this one already masks it, as it usually does, it is this one.
    pub fn with(&self, secret: Option<&Secret>) -> Cow<'_, Redactor> {
        match secret {
            Some(s) if s.expose().len() >= 4 && !self.secrets.contains(s) => {
                let mut all = self.secrets.clone();
                all.push(s.clone());
                Cow::Owned(Redactor::new(all))
            }
            _ => Cow::Borrowed(self),
        }
    }

    pub fn redact(&self, text: &str) -> String {
        self.redact_cow(text).into_owned()
    }

    /// [`redact`](Redactor::redact) that does not copy text with nothing to
    /// mask. It first asks cheaply whether any rule could apply: each rule
    /// needs a key, a piece of one at least 3 characters long at each end,
    /// or a known key prefix to be present.
    pub fn redact_cow<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if self.might_mask(text) {
            Cow::Owned(self.mask(text))
        } else {
            Cow::Borrowed(text)
        }
    }

    fn might_mask(&self, text: &str) -> bool {
        // Every prefix but "AIza" has a '-' or '_' in it: one pass over the
        // bytes rules them all out for most text.
        let has_separator = text.bytes().any(|b| b == b'-' || b == b'_');
        (has_separator && KEY_PREFIXES.iter().any(|p| text.contains(p)))
            || text.contains("AIza")
            || self.secrets.iter().any(|s| {
                let k = s.expose();
                // The whole key, or (for the abbreviation rules, which need
                // 3+ characters of the key at each end) its first and last
                // three characters.
                text.contains(k)
                    || (text.contains(char_prefix(k, 3)) && text.contains(char_suffix(k, 3)))
            })
    }

    fn mask(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in &self.secrets {
            let k = s.expose();
            if out.contains(k) {
                out = out.replace(k, MASK);
            }
            out = mask_abbreviations(&out, k);
            // Upstreams often echo a shortened key, such as
            // "sk-proj-****…wxyz": the first 8 and last 4 characters.
            if k.chars().count() >= 12 {
                let head = char_prefix(k, 8);
                let tail = char_suffix(k, 4);
                if out.contains(head) && out.contains(tail) {
                    out = out.replace(head, MASK).replace(tail, MASK);
                }
            }
        }
        mask_key_shaped(&out)
    }
}

fn char_prefix(s: &str, n: usize) -> &str {
    s.char_indices().nth(n).map_or(s, |(i, _)| &s[..i])
}

fn char_suffix(s: &str, n: usize) -> &str {
    let count = s.chars().count();
    if count <= n {
        return s;
    }
    s.char_indices().nth(count - n).map_or(s, |(i, _)| &s[i..])
}

/// Characters provider keys are made of.
fn is_key_char(c: char) -> bool {
    c.is_alphanumeric() || c == '-' || c == '_'
}

/// Mask tokens like "sk-abc...wxyz", "sk-a…wxyz" or "canary-7***0a1b": a
/// prefix of `key` (3+ chars), a run of `.`, `…`, `*` or `x`, then a suffix
/// of `key` (3+ chars).
fn mask_abbreviations(text: &str, key: &str) -> String {
    if key.chars().count() < 8 {
        return text.to_string();
    }
    let is_mark = |c: char| matches!(c, '.' | '…' | '*');
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find(is_mark) {
        let (before, from_mark) = rest.split_at(pos);
        let mark_len = from_mark
            .find(|c: char| !is_mark(c))
            .unwrap_or(from_mark.len());
        let after = &from_mark[mark_len..];
        // The key characters touching the marker on each side.
        let head_start = before.rfind(|c: char| !is_key_char(c)).map_or(0, |i| {
            i + before[i..].chars().next().map_or(1, char::len_utf8)
        });
        let head = &before[head_start..];
        let tail = &after[..after.find(|c: char| !is_key_char(c)).unwrap_or(after.len())];
        let abbreviates = mark_len > 0
            && head.chars().count() >= 3
            && tail.chars().count() >= 3
            && key.starts_with(head)
            && key.ends_with(tail);
        if abbreviates {
            out.push_str(&before[..head_start]);
            out.push_str(MASK);
            rest = &after[tail.len()..];
        } else {
            out.push_str(before);
            out.push_str(&from_mark[..mark_len]);
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Mask tokens that look like provider keys: a known prefix followed by at
/// least 12 key characters.
fn mask_key_shaped(text: &str) -> String {
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
        let Some(c) = rest.chars().next() else {
            break;
        };
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fast_path_rules_out_only_text_with_nothing_to_mask() {
        // might_mask's shortcut holds only if this does.
        for p in KEY_PREFIXES {
            assert!(*p == "AIza" || p.contains(['-', '_']), "{p}");
        }
        let key = "canary-0123456789abcdefXYZ";
        let r = Redactor::new([Secret::new(key.into())]);
        for clean in ["14", "chatcmpl-123", "The answer is 14.", ""] {
            assert!(matches!(r.redact_cow(clean), Cow::Borrowed(_)), "{clean}");
        }
        for dirty in [
            key.to_string(),
            "can...XYZ".to_string(),
            "AIzaSyA1234567890abcdefghij".to_string(),
            "token sk-proj-abcdefghijklmnop".to_string(),
        ] {
            let out = r.redact_cow(&dirty);
            assert!(matches!(out, Cow::Owned(_)), "{dirty}");
            assert!(out.contains(MASK), "{dirty} -> {out}");
        }
    }

    #[test]
    fn with_a_key_already_masked_is_the_same_redactor() {
        let known = Secret::new("canary-0123456789abcdefXYZ".into());
        let r = Redactor::new([known.clone()]);
        assert!(matches!(r.with(Some(&known)), Cow::Borrowed(_)));
        assert!(matches!(r.with(None), Cow::Borrowed(_)));
        let other = Secret::new("other-key-9876543210".into());
        let both = r.with(Some(&other));
        assert!(matches!(both, Cow::Owned(_)));
        assert!(both.redact("x other-key-9876543210 y").contains(MASK));
    }

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
    fn short_abbreviations_are_masked() {
        let key = "sk-abcdef0123456789wxyz";
        let r = Redactor::new([Secret::new(key.into())]);
        for echoed in [
            "key sk-abc...wxyz is invalid",
            "key sk-a…wxyz is invalid",
            "key \"sk-ab****************wxyz\" is invalid",
        ] {
            let out = r.redact(echoed);
            assert!(!out.contains("wxyz"), "{out}");
            assert!(out.contains("is invalid"), "{out}");
        }
        // Dots in ordinary prose are left alone.
        assert_eq!(r.redact("wait... then retry."), "wait... then retry.");
    }

    #[test]
    fn non_ascii_keys_do_not_panic() {
        let key = "ключ-ключ-ключ-ключ";
        let r = Redactor::new([Secret::new(key.into())]);
        assert_eq!(r.redact(&format!("got {key}")), format!("got {MASK}"));
        let head: String = key.chars().take(8).collect();
        let tail: String = key.chars().skip(15).collect();
        assert!(!r.redact(&format!("{head}...{tail}")).contains(&tail));
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
