//! Records the git commit the binary is built from, for `llmprobe
//! --version`, as the compile-time variable `LLMPROBE_COMMIT`:
//!
//! - `LLMPROBE_COMMIT` from the environment, when a packager sets it;
//! - else the `sha1` in `.cargo_vcs_info.json`, which `cargo package` writes
//!   into every crates.io tarball (a tarball has no `.git`, and may be
//!   unpacked inside some other repository, whose commit would be wrong);
//! - else `git rev-parse --short=12 HEAD`, with `-dirty` when the sources
//!   compiled into the binary differ from that commit;
//! - else `unknown`.
//!
//! It re-runs when HEAD moves: `.git/HEAD`, the branch it points to and
//! `packed-refs` are found with `git rev-parse --git-path`, which also works
//! in a worktree, whose `.git` is a file pointing elsewhere. It also re-runs
//! when the compiled sources change, so that `-dirty` stays true.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What goes into the binary; a change elsewhere (tests, docs) does not
/// make it dirty.
const SOURCES: &[&str] = &["src", "prompts", "build.rs", "Cargo.toml", "Cargo.lock"];

fn main() {
    println!("cargo:rerun-if-env-changed=LLMPROBE_COMMIT");
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let commit = std::env::var("LLMPROBE_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| vcs_info(&dir))
        .or_else(|| from_git(&dir))
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=LLMPROBE_COMMIT={commit}");
}

/// The commit recorded by `cargo package`.
fn vcs_info(dir: &Path) -> Option<String> {
    let p = dir.join(".cargo_vcs_info.json");
    let text = std::fs::read_to_string(&p).ok()?;
    println!("cargo:rerun-if-changed={}", p.display());
    let rest = &text[text.find("\"sha1\"")? + 6..];
    let start = rest.find('"')? + 1;
    let sha: String = rest[start..]
        .chars()
        .take_while(char::is_ascii_hexdigit)
        .collect();
    (sha.len() >= 12).then(|| sha[..12].to_string())
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn from_git(dir: &Path) -> Option<String> {
    // Only this package's own repository: not one it was unpacked into.
    let top = git(dir, &["rev-parse", "--show-toplevel"])?;
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if !same(Path::new(&top), dir) {
        return None;
    }
    let sha = git(dir, &["rev-parse", "--short=12", "HEAD"])?;
    let mut watch = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
        watch.push(branch);
    }
    for name in watch {
        if let Some(p) = git(dir, &["rev-parse", "--git-path", &name]) {
            let p = dir.join(p);
            // A path that does not exist would make cargo re-run this on
            // every build.
            if p.exists() {
                println!("cargo:rerun-if-changed={}", p.display());
            }
        }
    }
    for s in SOURCES {
        println!("cargo:rerun-if-changed={s}");
    }
    let mut diff = vec!["diff", "--quiet", "HEAD", "--"];
    diff.extend_from_slice(SOURCES);
    // `git diff` exits 1 when something differs; it never writes the index.
    // New files not yet added count too.
    let changed = Command::new("git")
        .args(&diff)
        .current_dir(dir)
        .status()
        .is_ok_and(|s| s.code() == Some(1));
    let mut others = vec!["ls-files", "--others", "--exclude-standard", "--"];
    others.extend_from_slice(SOURCES);
    let untracked = git(dir, &others).is_some_and(|out| !out.is_empty());
    let dirty = changed || untracked;
    Some(if dirty { format!("{sha}-dirty") } else { sha })
}
