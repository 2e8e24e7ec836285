//! Every config the project shows or tests loads to what it loaded to
//! before the catalog was read in one serde pass (issue 32): the TOML
//! examples of `docs/` and `README.md`, the configs written in `tests/` and
//! `src/`, and configs that exercise each layering rule and each error.
//!
//! The corpus and what each config gave (a hash of the catalog's Debug, or
//! the error's text verbatim) were written by the loader before the change,
//! and are kept in `same_as_before.json`, so that the docs and tests can move
//! on without this test following them.
//! `LLMPROBE_BLESS=1 cargo test --lib catalog::same_as_before` gathers the
//! corpus again and rewrites the file: only do so when a change of result is
//! meant.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Catalog;

#[derive(Debug, Serialize, Deserialize)]
struct Case {
    from: String,
    toml: String,
    expect: String,
}

fn corpus_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/catalog/same_as_before.json")
}

/// `ok` and a hash of the whole catalog's Debug, or `err` and the message a
/// user sees.
fn outcome(text: &str) -> String {
    use sha2::{Digest, Sha256};
    match Catalog::from_toml_str(text, "c.toml") {
        Ok(c) => {
            let digest = Sha256::digest(format!("{c:?}").as_bytes());
            let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
            format!("ok {hex}")
        }
        Err(e) => format!("err {e}"),
    }
}

#[test]
fn every_config_loads_as_before() {
    if std::env::var_os("LLMPROBE_BLESS").is_some() {
        let cases: Vec<Case> = gather()
            .into_iter()
            .map(|(from, toml)| Case {
                expect: outcome(&toml),
                from,
                toml,
            })
            .collect();
        let json = serde_json::to_string_pretty(&cases).unwrap();
        std::fs::write(corpus_path(), json + "\n").unwrap();
    }
    let cases: Vec<Case> =
        serde_json::from_str(&std::fs::read_to_string(corpus_path()).unwrap()).unwrap();
    assert!(cases.len() > 100, "{} configs", cases.len());
    let differ: Vec<String> = cases
        .iter()
        .filter_map(|c| {
            let now = outcome(&c.toml);
            (now != c.expect).then(|| {
                format!(
                    "{}: was {}\nnow {now}\n{}",
                    c.from,
                    c.expect,
                    Catalog::from_toml_str(&c.toml, "c.toml")
                        .map(|c| format!("{c:#?}"))
                        .unwrap_or_default()
                )
            })
        })
        .collect();
    assert!(differ.is_empty(), "{}", differ.join("\n\n"));
}

/// The corpus: the fenced TOML of every doc, every string literal in Rust
/// under `tests/` and `src/` that reads as a catalog, and the cases below.
fn gather() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    let mut files = Vec::new();
    for dir in ["docs", "tests", "src"] {
        walk(&root.join(dir), &mut files);
    }
    files.push(root.join("README.md"));
    files.sort();
    for path in files {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let name = path.strip_prefix(root).unwrap().display().to_string();
        if name.ends_with("same_as_before.rs") {
            continue;
        }
        let found = match path.extension().and_then(|e| e.to_str()) {
            Some("md") => fenced_toml(&text),
            Some("rs") => rust_strings(&text)
                .into_iter()
                .filter(|s| looks_like_a_catalog(s))
                .collect(),
            Some("toml") if text.contains("[[providers]]") => vec![text.clone()],
            _ => Vec::new(),
        };
        for (i, toml) in found.into_iter().enumerate() {
            out.push((format!("{name}#{i}"), toml));
        }
    }
    for (i, toml) in LAYERING.iter().enumerate() {
        out.push((format!("layering#{i}"), toml.to_string()));
    }
    out
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn fenced_toml(md: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut block: Option<String> = None;
    for line in md.lines() {
        match &mut block {
            None if line.trim_start().starts_with("```toml") => block = Some(String::new()),
            Some(b) if line.trim_start().starts_with("```") => {
                out.push(std::mem::take(b));
                block = None;
            }
            Some(b) => {
                b.push_str(line);
                b.push('\n');
            }
            None => {}
        }
    }
    out
}

fn looks_like_a_catalog(s: &str) -> bool {
    ["[[providers]]", "[defaults]", "include_default_catalog"]
        .iter()
        .any(|k| s.contains(k))
}

/// The string literals of Rust source, raw or not, unescaped; a format
/// string's `{name}` becomes `1` and its `{{` `{`, so that a template
/// still reads as a config (its result, whatever it is, is compared).
fn rust_strings(src: &str) -> Vec<String> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i] == b'\'' {
            // A char literal or a lifetime: skip a quoted quote.
            if b.get(i + 1) == Some(&b'\\') || b.get(i + 2) == Some(&b'\'') {
                i += 3;
                while i < b.len() && b[i - 1] != b'\'' {
                    i += 1;
                }
            } else {
                i += 1;
            }
        } else if b[i] == b'r' && matches!(b.get(i + 1), Some(b'#' | b'"')) && !ident(b, i) {
            let mut hashes = 0;
            let mut j = i + 1;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                i += 1;
                continue;
            }
            let close = format!("\"{}", "#".repeat(hashes));
            let body = j + 1;
            let end = src[body..].find(&close).map_or(b.len(), |e| body + e);
            out.push(templated(&src[body..end]));
            i = end + close.len();
        } else if b[i] == b'"' {
            let mut s = String::new();
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                if b[j] == b'\\' {
                    match b.get(j + 1) {
                        Some(b'n') => s.push('\n'),
                        Some(b't') => s.push('\t'),
                        Some(b'\n') => {
                            j += 1;
                            while b.get(j + 1).is_some_and(|c| c.is_ascii_whitespace()) {
                                j += 1;
                            }
                        }
                        Some(&c) => s.push(c as char),
                        None => {}
                    }
                    j += 2;
                    continue;
                }
                let ch = src[j..].chars().next().unwrap();
                s.push(ch);
                j += ch.len_utf8();
            }
            out.push(templated(&s));
            i = j + 1;
        } else {
            i += 1;
        }
    }
    out
}

fn ident(b: &[u8], i: usize) -> bool {
    i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
}

fn templated(s: &str) -> String {
    let has_placeholder = s.char_indices().any(|(i, c)| {
        c == '{'
            && s[i + 1..].split('}').next().is_some_and(|p| {
                p.len() < 30
                    && p.chars()
                        .all(|c| c.is_alphanumeric() || c == '_' || c == ':' || c == '?')
            })
    });
    if !(has_placeholder || s.contains("{{")) {
        return s.to_string();
    }
    let mut out = String::new();
    let mut rest = s;
    while let Some(at) = rest.find(['{', '}']) {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if tail.starts_with("{{") || tail.starts_with("}}") {
            out.push_str(&tail[..1]);
            rest = &tail[2..];
        } else if let Some(close) = tail.find('}').filter(|_| tail.starts_with('{')) {
            // A placeholder that opens a quoted value is most often a URL.
            match out.ends_with('"') {
                true => out.push_str("http://127.0.0.1:1"),
                false => out.push('1'),
            }
            rest = &tail[close + 1..];
        } else {
            out.push_str(&tail[..1]);
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    // A placeholder on a line of its own stood for lines of config.
    out.lines()
        .filter(|l| l.trim() != "1")
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Each layering rule and each error a provider table can give.
const LAYERING: &[&str] = &[
    "",
    "include_default_catalog = false\n",
    // A user table overrides key by key; a table-valued key is replaced whole.
    "[[providers]]\nname = \"groq\"\nlimits = { rpd = 5 }\nheaders = { \"X-A\" = \"b\" }\n",
    "[[providers]]\nname = \"groq\"\nmodel_limits = { \"openai/gpt-oss-20b\" = { rpm = 1 } }\n",
    "[[providers]]\nname = \"groq\"\nmodel_info = { \"openai/gpt-oss-20b\" = { context_window = 10 } }\n",
    "[[providers]]\nname = \"cloudflare\"\nurl_vars = { account_id = \"MY_ACCOUNT\" }\n",
    "[[providers]]\nname = \"cloudflare\"\nbase_url = \"https://x.example/v1\"\n",
    "[[providers]]\nname = \"groq\"\napi_key_env = [\"A\", \"B\"]\nkey_optional = true\n",
    "[[providers]]\nname = \"groq\"\napi_key_env = \"\"\n",
    "[[providers]]\nname = \"groq\"\ndialect = \"anthropic\"\nsystem_messages = \"in-place\"\n",
    "[[providers]]\nname = \"gemini\"\nsystem_messages = \"in-place\"\n",
    "[[providers]]\nname = \"openai\"\nsystem_messages = \"fold\"\n",
    "[[providers]]\nname = \"openai\"\nsystem_messages = \"sideways\"\n",
    "[[providers]]\nname = \"ollama\"\nenabled = true\nhost_env = \"MY_HOST\"\n",
    "[[providers]]\nname = \"groq\"\ncapabilities = false\npriority = -3\ndaily_cap = 7\n",
    "[[providers]]\nname = \"groq\"\nspacing_secs = 0.5\ntimeout_secs = 9\nmax_tokens = 99\n",
    "[defaults]\nspacing_secs = 1\ntimeout_secs = 2\nmax_tokens = 3\ndisable_after = 4\ncapability_max_tokens = 5\n",
    "[defaults]\nspacing_secs = -1\n",
    "[defaults]\ntimeout_secs = 0\n",
    "[defaults]\nmax_tokens = 0\n",
    "[defaults]\ndisable_after = 0\n",
    "[defaults]\ncapability_max_tokens = 40000\n",
    // Trimming models keeps the side tables of the models left, unless the
    // user gives the side table too.
    "[[providers]]\nname = \"groq\"\nmodels = [\"openai/gpt-oss-20b\"]\n",
    "[[providers]]\nname = \"groq\"\nmodels = [\"openai/gpt-oss-20b\"]\nmodel_info = {}\n",
    "[[providers]]\nname = \"groq\"\nmodels = [\"openai/gpt-oss-20b\"]\nmodel_limits = {}\n",
    "[[providers]]\nname = \"groq\"\nmodels = [\"new\"]\nmodel_info = { \"openai/gpt-oss-20b\" = {} }\n",
    // The same name twice: the second layers over the first.
    "[[providers]]\nname = \"groq\"\npriority = 1\n[[providers]]\nname = \"groq\"\nmodels = [\"x\"]\n",
    "include_default_catalog = false\n[[providers]]\nname = \"a\"\ndialect = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\nmodels = [\"m\"]\n[[providers]]\nname = \"a\"\nmodels = [\"n\"]\npriority = 3\n",
    "include_default_catalog = false\n[[providers]]\nname = \"a\"\ndialect = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\nmodels = [\"m\"]\nenabled = false\n[[providers]]\nname = \"b\"\ndialect = \"gemini\"\nbase_url = \"http://127.0.0.1:1/v1\"\nmodels = [\"m\"]\nrequests_header_window = \"day\"\nday_reset = \"08:00\"\n",
    // Errors.
    "[[providers]]\nmodels = [\"x\"]\n",
    "[[providers]]\nname = \"groq\"\nmodelz = []\n",
    "[[providers]]\nname = \"groq\"\npriority = \"x\"\n",
    "[[providers]]\nname = \"groq\"\napi_key_env = 5\n",
    "[[providers]]\nname = \"groq\"\nmodels = [\"a\", 1]\n",
    "[[providers]]\nname = \"groq\"\ndialect = \"klingon\"\n",
    "[[providers]]\nname = \"groq\"\nlimits = { rpm = -1 }\n",
    "[[providers]]\nname = \"groq\"\nmodel_info = { \"x\" = { window = 1 } }\n",
    "[[providers]]\nname = \"groq\"\nmodel_info = { \"openai/gpt-oss-20b\" = { capabilities = [\"telepathy\"] } }\n",
    "[[providers]]\nname = \"new\"\nmodels = [\"m\"]\n",
    "[[providers]]\nname = \"new\"\ndialect = \"openai\"\nmodels = [\"m\"]\n",
    "[[providers]]\nname = \"new\"\ndialect = \"openai\"\nbase_url = \"ftp://x\"\nmodels = [\"m\"]\n",
    "[[providers]]\nname = \"new\"\ndialect = \"openai\"\nbase_url = \"http://x/{a}\"\nurl_vars = { b = \"B\" }\nmodels = [\"m\"]\n",
    "[[providers]]\nname = \"new\"\ndialect = \"openai\"\nbase_url = \"http://x\"\n",
    "[[providers]]\nname = \"new\"\ndialect = \"openai\"\nbase_url = \"http://x\"\nenabled = false\n",
    "[[providers]]\nname = \"new\"\ndialect = \"openai\"\nbase_url = \"http://x\"\nmodels = [\" \"]\n",
    "[[providers]]\nname = \"\"\ndialect = \"openai\"\nbase_url = \"http://x\"\nmodels = [\"m\"]\n",
    "[[providers]]\nname = \"a::b\"\ndialect = \"openai\"\nbase_url = \"http://x\"\nmodels = [\"m\"]\n",
    "[[providers]]\nname = \"groq\"\nspacing_secs = 4000\n",
    "[[providers]]\nname = \"groq\"\ntimeout_secs = 0\n",
    "[[providers]]\nname = \"groq\"\nmax_tokens = 0\n",
    "[[providers]]\nname = \"groq\"\nhost_env = \" \"\n",
    "[[providers]]\nname = \"groq\"\nlimits = { tpm = 0 }\n",
    "[[providers]]\nname = \"groq\"\nkey_limits = { rpd = 0 }\n",
    "[[providers]]\nname = \"groq\"\ndaily_cap = 0\n",
    "[[providers]]\nname = \"groq\"\nmodel_limits = { \"nope\" = { rpm = 1 } }\n",
    "[[providers]]\nname = \"groq\"\nmodel_limits = { \"openai/gpt-oss-20b\" = { rpm = 0 } }\n",
    "[[providers]]\nname = \"groq\"\nmodel_info = { \"nope\" = { context_window = 1 } }\n",
    "[[providers]]\nname = \"groq\"\nmodel_info = { \"openai/gpt-oss-20b\" = { max_output_tokens = 0 } }\n",
    "[[providers]]\nname = \"groq\"\nmodel_info = { \"openai/gpt-oss-20b\" = { deprecated = \"2027-01-14\", successor = \"openai/gpt-oss-120b\" } }\n",
    "[[providers]]\nname = \"groq\"\nmodel_info = { \"openai/gpt-oss-20b\" = { deprecated = \"2027-13-01\" } }\n",
    "[[providers]]\nname = \"groq\"\nmodel_info = { \"openai/gpt-oss-20b\" = { deprecated = 2027-01-14 } }\n",
    "[[providers]]\nname = \"groq\"\nmodel_info = { \"openai/gpt-oss-20b\" = { successor = \"\" } }\n",
    "[[providers]]\nname = \"groq\"\nday_reset = \"25:00\"\n",
    "[[providers]]\nname = \"groq\"\nrequests_header_window = \"hour\"\n",
    "[[providers]]\nname = \"groq\"\nmodels = []\n",
    "[[providers]]\nname = \"groq\"\nspacing_secs = 4000\nmax_tokens = 0\nday_reset = \"x\"\n",
    "[[providers]]\nname = \"new\"\nspacing_secs = 4000\nmax_tokens = 0\n",
    "[[providers]]\nname = \"groq\"\n[[providers]]\nname = \"groq\"\nmodels = []\n",
    "providers = 5\n",
    "[providers]\nname = \"groq\"\n",
];
