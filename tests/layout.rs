//! The code's shape: no import cycle between modules of `src/`.
//!
//! Modules form a tree. A reference from one module to another (`crate::a::b`,
//! `super::c`) is an edge between the two siblings below their nearest common
//! ancestor: `crate::route::engine` using `crate::route::providers` is an edge
//! `engine → status` inside `route`, and `crate::route::engine` using
//! `crate::upstream::classify` is an edge `route → upstream` at the top. A
//! module using its own ancestors or descendants adds no edge. Any strongly
//! connected set of two or more siblings is a cycle, and fails the test with
//! the files that make it.
//!
//! Comments, doc links and `#[cfg(test)]` blocks are left out: tests may
//! reach anywhere, and a doc link is not a dependency.
//!
//! And: no code outside `upstream/dialect/` names a `Dialect` variant, so
//! none compares with one or matches on one; what differs between
//! dialects is asked of the dialect (`dialect::wire(d)`, its `Facts`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type ModPath = Vec<String>;

/// Every module file below `src/` (the library; `main.rs` is the binary).
fn module_files(src: &Path) -> Vec<(ModPath, PathBuf)> {
    let mut out = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().and_then(|e| e.to_str()) != Some("rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap();
            let mut parts: ModPath = rel
                .iter()
                .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
                .collect();
            match parts.last().map(String::as_str) {
                Some("main") if parts.len() == 1 => continue,
                Some("lib") if parts.len() == 1 => parts.clear(),
                Some("mod") => {
                    parts.pop();
                }
                // A test module in a file of its own.
                Some("tests") => continue,
                _ => {}
            }
            out.push((parts, path));
        }
    }
    out
}

/// The code of a file, line by line, without comments and without
/// `#[cfg(test)]` items; each line with the inline modules (`mod m { … }`)
/// it stands in.
fn code_of(text: &str) -> Vec<(Vec<String>, String)> {
    let mut out = Vec::new();
    let mut skip_depth: Option<i32> = None;
    let mut depth = 0i32;
    let mut inline: Vec<(String, i32)> = Vec::new();
    let mut pending_cfg_test = false;
    for line in text.lines() {
        let code = match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        };
        let trimmed = code.trim();
        if trimmed.starts_with("#[cfg(test)]") {
            pending_cfg_test = true;
            continue;
        }
        let opens = code.matches('{').count() as i32;
        let closes = code.matches('}').count() as i32;
        if pending_cfg_test && !trimmed.is_empty() {
            pending_cfg_test = false;
            if opens > closes {
                skip_depth = Some(depth);
            } else {
                // A one-line item (`mod tests;`, a `use`).
                depth += opens - closes;
                continue;
            }
        }
        let before = depth;
        depth += opens - closes;
        if let Some(d) = skip_depth {
            if depth <= d {
                skip_depth = None;
            }
            continue;
        }
        let words: Vec<&str> = trimmed.split_whitespace().collect();
        let at = words.iter().position(|w| *w == "mod");
        if let Some(i) = at
            && words.get(i + 2) == Some(&"{")
            && words[..i].iter().all(|w| w.starts_with("pub"))
        {
            inline.push((words[i + 1].to_string(), before));
        }
        let path: Vec<String> = inline.iter().map(|(n, _)| n.clone()).collect();
        out.push((path, code.to_string()));
        while inline.last().is_some_and(|(_, d)| depth <= *d) {
            inline.pop();
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The module paths a file's code names: `crate::a::b::…`, `super::…` and
/// `self::…` paths, made absolute. Brace groups (`crate::a::{b, c}`) name
/// each member.
fn references(code: &str, me: &ModPath) -> Vec<ModPath> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !is_ident(chars[i]) || (i > 0 && (is_ident(chars[i - 1]) || chars[i - 1] == ':')) {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && is_ident(chars[i]) {
            i += 1;
        }
        let word: String = chars[start..i].iter().collect();
        if !matches!(word.as_str(), "crate" | "super" | "self") {
            continue;
        }
        // The module whose items the path starts from.
        let mut base: ModPath = match word.as_str() {
            "crate" => Vec::new(),
            _ => {
                // `super` in module a::b (a/b.rs) is a; in module a
                // (a/mod.rs) it is the crate root.
                let mut b = me.clone();
                if word == "super" {
                    b.pop();
                }
                b
            }
        };
        let mut segs: Vec<String> = Vec::new();
        loop {
            if !(i + 1 < chars.len() && chars[i] == ':' && chars[i + 1] == ':') {
                break;
            }
            i += 2;
            if i < chars.len() && chars[i] == '{' {
                // A group: each member is a path of its own.
                let close = chars[i..].iter().position(|&c| c == '}').map(|p| p + i);
                let Some(close) = close else { break };
                let inner: String = chars[i + 1..close].iter().collect();
                for member in inner.split(',') {
                    let first: String =
                        member.trim().chars().take_while(|&c| is_ident(c)).collect();
                    if !first.is_empty() && first != "self" {
                        let mut p = base.clone();
                        p.extend(segs.iter().cloned());
                        p.push(first);
                        out.push(p);
                    }
                }
                i = close + 1;
                break;
            }
            let s = i;
            while i < chars.len() && is_ident(chars[i]) {
                i += 1;
            }
            let seg: String = chars[s..i].iter().collect();
            if seg == "super" && segs.is_empty() {
                base.pop();
                continue;
            }
            if seg.is_empty() {
                break;
            }
            segs.push(seg);
        }
        base.extend(segs);
        out.push(base);
    }
    out
}

/// The longest prefix of `path` that is a module.
fn resolve(path: &ModPath, modules: &BTreeSet<ModPath>) -> Option<ModPath> {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| modules.contains(p))
}

/// Strongly connected sets of two or more nodes (Tarjan).
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<String, usize>,
        low: BTreeMap<String, usize>,
        stack: Vec<String>,
        on: BTreeSet<String>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit(t: &mut T, v: &str) {
        t.index.insert(v.to_string(), t.next);
        t.low.insert(v.to_string(), t.next);
        t.next += 1;
        t.stack.push(v.to_string());
        t.on.insert(v.to_string());
        let succ: Vec<String> = t.edges.get(v).into_iter().flatten().cloned().collect();
        for w in succ {
            if !t.index.contains_key(&w) {
                visit(t, &w);
                let lw = t.low[&w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(&w) {
                let iw = t.index[&w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut scc = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on.remove(&w);
                let done = w == v;
                scc.push(w);
                if done {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                t.out.push(scc);
            }
        }
    }
    let mut t = T {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    let nodes: Vec<String> = edges.keys().cloned().collect();
    for v in nodes {
        if !t.index.contains_key(&v) {
            visit(&mut t, &v);
        }
    }
    t.out
}

fn name(p: &[String]) -> String {
    if p.is_empty() {
        "crate".to_string()
    } else {
        p.join("::")
    }
}

#[test]
fn src_has_no_module_import_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = module_files(&src);
    let modules: BTreeSet<ModPath> = files.iter().map(|(m, _)| m.clone()).collect();
    // Per parent: sibling → siblings it uses, and the files behind each edge.
    let mut edges: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    let mut why: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for (me, path) in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let refs = code_of(&text).into_iter().flat_map(|(inline, line)| {
            let mut here = me.clone();
            here.extend(inline);
            references(&line, &here)
        });
        for r in refs {
            let Some(target) = resolve(&r, &modules) else {
                continue;
            };
            let common = me.iter().zip(&target).take_while(|(a, b)| a == b).count();
            if common == me.len() || common == target.len() {
                continue; // an ancestor or a descendant
            }
            let parent = name(&me[..common]);
            let from = name(&me[..=common]);
            let to = name(&target[..=common]);
            edges
                .entry(parent)
                .or_default()
                .entry(from.clone())
                .or_default()
                .insert(to.clone());
            why.entry((from, to))
                .or_default()
                .insert(path.strip_prefix(&src).unwrap().display().to_string());
        }
    }
    let mut found = Vec::new();
    for level in edges.values() {
        for scc in cycles(level) {
            let members: BTreeSet<&String> = scc.iter().collect();
            let mut lines = vec![format!("cycle: {}", scc.join(" ↔ "))];
            for ((from, to), files) in &why {
                if members.contains(from) && members.contains(to) {
                    let files: Vec<&str> = files.iter().map(String::as_str).collect();
                    lines.push(format!("  {from} → {to} (in {})", files.join(", ")));
                }
            }
            found.push(lines.join("\n"));
        }
    }
    assert!(
        found.is_empty(),
        "src/ has module import cycles; break each by moving the shared piece to the module both can use:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_cycle_finder_finds_cycles() {
    // The finder itself can fail: a two-module cycle and a three-module one
    // are found, a chain is not.
    let mut e: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut add = |a: &str, b: &str| {
        e.entry(a.into()).or_default().insert(b.into());
    };
    add("a", "b");
    add("b", "a");
    add("c", "d");
    add("d", "e");
    add("e", "c");
    add("x", "y");
    let found = cycles(&e);
    assert_eq!(found.len(), 2, "{found:?}");
    let me: ModPath = vec!["route".into(), "engine".into()];
    let refs = references(
        "use super::status::{Snapshot, view};\nuse crate::upstream::{classify::X, http};\nlet _ = super::super::cooldown::Target;",
        &me,
    );
    assert!(refs.contains(&vec!["route".into(), "status".into(), "Snapshot".into()]));
    assert!(refs.contains(&vec!["upstream".into(), "classify".into()]));
    assert!(refs.contains(&vec!["upstream".into(), "http".into()]));
    assert!(refs.contains(&vec!["cooldown".into(), "Target".into()]));
    let lines = code_of(
        "use crate::a;\n// use crate::b;\n#[cfg(test)]\nmod tests {\n    use crate::c;\n}\npub mod m {\n    use super::e;\n}\nuse crate::d;\n",
    );
    let code: String = lines.iter().map(|(_, l)| l.as_str()).collect();
    assert!(code.contains("crate::a") && code.contains("crate::d"));
    assert!(!code.contains("crate::b") && !code.contains("crate::c"));
    let in_m = lines.iter().find(|(_, l)| l.contains("super::e")).unwrap();
    assert_eq!(in_m.0, vec!["m".to_string()]);
    let after = lines.iter().find(|(_, l)| l.contains("crate::d")).unwrap();
    assert!(after.0.is_empty());
}

/// The `Dialect::Variant`s (or `Dialect::{…}`, `Dialect::*`) a line of code
/// names.
fn dialect_variants(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("Dialect::") {
        let before = rest[..i].chars().next_back();
        let after = &rest[i + "Dialect::".len()..];
        rest = after;
        if before.is_some_and(is_ident) {
            continue; // `MyDialect::`, not this enum
        }
        let name: String = after.chars().take_while(|c| is_ident(*c)).collect();
        let mut chars = name.chars();
        let variant = chars.next().is_some_and(|c| c.is_ascii_uppercase())
            && chars.next().is_some_and(|c| c.is_ascii_lowercase());
        if variant || after.starts_with('{') || after.starts_with('*') {
            out.push(format!(
                "Dialect::{}",
                if variant { &name } else { &after[..1] }
            ));
        }
    }
    out
}

/// Outside `upstream/dialect/`, code never names a `Dialect` variant: a
/// comparison with one (`dialect == Dialect::Anthropic`) or a match on one
/// is a dialect's fact kept in the wrong place; ask the dialect instead
/// (`Facts` in `upstream/dialect/mod.rs`: `carries`, `fate`,
/// `default_max_tokens`, `json_mode`, `passes_through`, …). Allowed:
/// - `upstream/dialect/` itself, where each fact lives;
/// - the fake provider (`src/fake.rs`, `src/fake/`), whose job is to play
///   each dialect's server: its dispatcher picks a responder per dialect;
/// - `src/fuzzing/`, harness code built only for the fuzz targets, which
///   names the dialects to fuzz each one;
/// - tests (`#[cfg(test)]` blocks, `tests.rs` and `tests/` files), which
///   name the dialect they test.
#[test]
fn no_dialect_variant_is_named_outside_the_dialects() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let allowed = |rel: &Path| {
        let s = rel.to_string_lossy().replace('\\', "/");
        s.starts_with("upstream/dialect/")
            || s == "fake.rs"
            || s.starts_with("fake/")
            || s.starts_with("fuzzing/")
            || rel.iter().any(|p| p == "tests" || p == "tests.rs")
    };
    let mut found = Vec::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let rel = path.strip_prefix(&src).unwrap();
            if path.extension().and_then(|e| e.to_str()) != Some("rs") || allowed(rel) {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for (_, line) in code_of(&text) {
                for v in dialect_variants(&line) {
                    found.push(format!("src/{}: {v} in `{}`", rel.display(), line.trim()));
                }
            }
        }
    }
    found.sort();
    assert!(
        found.is_empty(),
        "a Dialect variant named outside src/upstream/dialect/; ask the dialect (dialect::wire(d), its Facts) instead:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_dialect_finder_finds_variants() {
    assert_eq!(
        dialect_variants("if d == crate::upstream::dialect::Dialect::Openai {"),
        ["Dialect::Openai"]
    );
    assert_eq!(
        dialect_variants("Dialect::Anthropic | Dialect::Gemini => 1,"),
        ["Dialect::Anthropic", "Dialect::Gemini"]
    );
    assert_eq!(dialect_variants("use Dialect::*;"), ["Dialect::*"]);
    assert!(dialect_variants("Dialect::iter().map(Dialect::as_str)").is_empty());
    assert!(dialect_variants("Dialect::VARIANTS; MyDialect::Openai").is_empty());
}
