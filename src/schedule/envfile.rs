//! `--env-file`: the file a scheduled job takes its keys from. cron sources
//! it with `set -a` and systemd reads it as `EnvironmentFile=`, so it must
//! be what both read the same way: `NAME=value` lines, comments starting
//! with `#`, blank lines. Only the names are read back here; no value is
//! ever printed, not even in an error, which names the line instead.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

#[derive(Debug, Clone)]
pub struct EnvFile {
    /// Absolute.
    pub path: PathBuf,
    /// The variables it sets, in file order.
    pub names: Vec<String>,
    /// Things to tell the user (a file others can read).
    pub warnings: Vec<String>,
}

/// Check the env file at `path`: it exists, and every line is a comment,
/// blank, or `NAME=value`.
pub fn read(path: &Path) -> Result<EnvFile> {
    let abs = crate::fsutil::absolute(path);
    let shown = abs.display();
    let bytes = crate::fsutil::read_capped(&abs, crate::fsutil::TEXT_FILE_CAP)
        .map_err(|e| Error::config(format!("--env-file {shown}: cannot read it: {e}")))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| Error::config(format!("--env-file {shown}: not UTF-8 text")))?;
    let mut names = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let name = t.split_once('=').map(|(n, _)| n).unwrap_or("");
        if !crate::catalog::is_env_name(name) {
            return Err(Error::config(format!(
                "--env-file {shown}, line {}: not a NAME=value line; write one NAME=value \
                 per line, without `export` (cron and systemd both read this file)",
                i + 1
            )));
        }
        names.push(name.to_string());
    }
    let warnings = open_to_others(&abs)
        .map(|mode| {
            vec![format!(
                "{shown} holds keys and other users can read it (mode {mode:o}): chmod 600 {shown}"
            )]
        })
        .unwrap_or_default();
    Ok(EnvFile {
        path: abs,
        names,
        warnings,
    })
}

/// The file's permission bits when users other than its owner may read
/// or write it (Unix; elsewhere there are no such bits).
#[cfg(unix)]
fn open_to_others(path: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
    (mode & 0o077 != 0).then_some(mode)
}

#[cfg(not(unix))]
fn open_to_others(_: &Path) -> Option<u32> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_only_and_errors_name_the_line_not_the_value() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("keys.env");
        std::fs::write(&p, "# keys\n\nGROQ_API_KEY=sk-secret-1\n  _X=\"a b\"\n").unwrap();
        let f = read(&p).unwrap();
        assert_eq!(f.names, ["GROQ_API_KEY", "_X"]);
        std::fs::write(&p, "A=1\nexport GROQ_API_KEY=sk-secret-2\n").unwrap();
        let err = read(&p).unwrap_err().to_string();
        assert!(
            err.contains("line 2") && err.contains("--env-file"),
            "{err}"
        );
        assert!(!err.contains("sk-secret"), "{err}");
        let err = read(&dir.path().join("none.env")).unwrap_err();
        assert_eq!(err.exit_code(), crate::exit::USAGE);
        assert!(err.to_string().contains("none.env"), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn a_file_others_can_read_is_a_warning() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("keys.env");
        std::fs::write(&p, "A=1\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(read(&p).unwrap().warnings[0].contains("chmod 600"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(read(&p).unwrap().warnings.is_empty());
    }
}
