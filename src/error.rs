//! Error types, one enum per concern, each mapped to an exit code.
//!
//! Messages are lowercase fragments that name the file, flag, provider or byte
//! offset at fault, so that they read well after "error: ".

use std::path::{Path, PathBuf};

use crate::exit;

/// A data file (health log, state file) that cannot be used. Whatever it is,
/// the file was left byte-identical.
#[derive(Debug, thiserror::Error)]
#[error("{}{}: {message}; the file was left untouched", path.display(), offset.map(|o| format!(" (byte offset {o})")).unwrap_or_default())]
pub struct DataError {
    pub path: PathBuf,
    pub offset: Option<u64>,
    pub message: String,
}

impl DataError {
    pub fn new(path: &Path, offset: Option<u64>, message: impl Into<String>) -> Self {
        DataError {
            path: path.to_path_buf(),
            offset,
            message: message.into(),
        }
    }
}

/// A bad configuration, prompts file or command line value.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// Another `check` holds the run lock.
#[derive(Debug, thiserror::Error)]
#[error("another check is already running ({holder}); lock file {}", path.display())]
pub struct LockedError {
    pub path: PathBuf,
    pub holder: String,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Data(#[from] DataError),
    #[error(transparent)]
    Locked(#[from] LockedError),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    pub fn config(msg: impl Into<String>) -> Self {
        Error::Config(ConfigError(msg.into()))
    }

    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Config(_) => exit::USAGE,
            Error::Data(_) => exit::DATA,
            Error::Locked(_) => exit::LOCKED,
            Error::Io { .. } => exit::DATA,
        }
    }

    /// True when the error is a closed stdout pipe, which is not a failure
    /// (`llmprobe state | head`).
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::BrokenPipe)
    }
}

/// The byte offset in `bytes` where serde_json reported `e` (it reports a
/// 1-based line and column).
pub fn json_error_offset(bytes: &[u8], e: &serde_json::Error) -> u64 {
    let mut off = 0usize;
    for (i, l) in bytes.split(|&c| c == b'\n').enumerate() {
        if i + 1 == e.line() {
            return (off + e.column().saturating_sub(1).min(l.len())) as u64;
        }
        off += l.len() + 1;
    }
    bytes.len() as u64
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
