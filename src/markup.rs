//! Text put into markup: the one escape for HTML and XML content and
//! attribute values, used by the status page, the badge SVG and the Task
//! Scheduler XML, and its inverse for reading such a value back.

/// Text for HTML or XML content and attribute values (quoted with `"` or
/// `'`). `'` becomes `&#39;`, which HTML and XML both read.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// [`escape`] undone, and the other spellings of the same five
/// characters (`&apos;`, `&#x27;`) that an XML writer may use.
pub fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&#39;", "'")
        .replace("&#x27;", "'")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_five_characters_are_escaped_and_read_back() {
        let raw = r#"a&b<c>"d"'e &amp;"#;
        let e = escape(raw);
        assert_eq!(e, "a&amp;b&lt;c&gt;&quot;d&quot;&#39;e &amp;amp;");
        assert_eq!(unescape(&e), raw);
        assert_eq!(escape("plain"), "plain");
    }
}
