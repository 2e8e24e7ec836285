//! The map is true: `docs/ARCHITECTURE.md` names every file under `src/`,
//! by its path below `src/` in backticks (`route/engine/run.rs`), and every
//! `.rs` file it names exists, so a newcomer reading it finds each room and
//! no room that was pulled down.

use std::collections::BTreeSet;
use std::path::Path;

/// Every `.rs` file below `dir`, as a path relative to `dir` with `/`.
fn rust_files(dir: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(dir).unwrap();
                let parts: Vec<String> = rel
                    .iter()
                    .map(|p| p.to_string_lossy().into_owned())
                    .collect();
                out.insert(parts.join("/"));
            }
        }
    }
    out
}

/// Every `code span` of a Markdown text.
fn code_spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The files below `src/` that the text does not name, and the `.rs`
/// paths it names that exist neither below `src/` nor below the root.
fn check(
    text: &str,
    files: &BTreeSet<String>,
    exists: impl Fn(&str) -> bool,
) -> (Vec<String>, Vec<String>) {
    let spans: BTreeSet<&str> = code_spans(text)
        .into_iter()
        .map(|s| s.strip_prefix("src/").unwrap_or(s))
        .collect();
    let unnamed = files
        .iter()
        .filter(|f| !spans.contains(f.as_str()))
        .cloned()
        .collect();
    let phantom = spans
        .iter()
        .filter(|s| {
            s.ends_with(".rs")
                && !s.contains(char::is_whitespace)
                && !files.contains(**s)
                && !exists(s)
        })
        .map(|s| s.to_string())
        .collect();
    (unnamed, phantom)
}

#[test]
fn architecture_names_every_file_under_src_and_no_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = root.join("docs/ARCHITECTURE.md");
    let text = std::fs::read_to_string(&doc).unwrap();
    let files = rust_files(&root.join("src"));
    assert!(files.len() > 100, "{} files under src/", files.len());
    let (unnamed, phantom) = check(&text, &files, |p| root.join(p).is_file());
    assert!(
        unnamed.is_empty(),
        "docs/ARCHITECTURE.md does not name these files under src/ (name each by its path below src/, in backticks): {unnamed:?}"
    );
    assert!(
        phantom.is_empty(),
        "docs/ARCHITECTURE.md names files that do not exist: {phantom:?}"
    );
}

#[test]
fn the_check_finds_a_missing_and_a_phantom_file() {
    let files: BTreeSet<String> = ["a.rs", "b/c.rs"].map(String::from).into();
    let (unnamed, phantom) = check("`a.rs` and `src/gone.rs`, `tests/here.rs`", &files, |p| {
        p == "tests/here.rs"
    });
    assert_eq!(unnamed, vec!["b/c.rs"]);
    assert_eq!(phantom, vec!["gone.rs"]);
}
