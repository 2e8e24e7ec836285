//! Error types, one enum per concern, each mapped to an exit code.
//!
//! Messages are lowercase fragments that name the file, flag, provider or byte
//! offset at fault, so that they read well after "error: ".

use std::path::{Path, PathBuf};

use crate::exit;

/// A data file (health log, state file) that cannot be used. Whatever it is,
/// the file was left byte-identical.
#[derive(Debug, thiserror::Error)]
#[error("{}{}: {message}; the file was left untouched", path.display(), place(*offset, *line))]
pub struct DataError {
    pub path: PathBuf,
    pub offset: Option<u64>,
    /// The 1-based line of `offset`, where it was worked out.
    pub line: Option<u64>,
    pub message: String,
}

impl DataError {
    pub fn new(path: &Path, offset: Option<u64>, message: impl Into<String>) -> Self {
        DataError {
            path: path.to_path_buf(),
            offset,
            line: None,
            message: message.into(),
        }
    }

    /// Name the line of the offset too, counted in the file at `path`
    /// (read up to the offset; a file that cannot be read names none).
    pub fn with_line(mut self) -> Self {
        if let Some(off) = self.offset
            && let Ok(f) = std::fs::File::open(&self.path)
        {
            use std::io::{BufRead, BufReader, Read};
            let mut newlines = 0u64;
            let mut r = BufReader::new(f.take(off));
            while let Ok(buf) = r.fill_buf() {
                if buf.is_empty() {
                    break;
                }
                let n = buf.len();
                newlines += buf.iter().filter(|&&c| c == b'\n').count() as u64;
                r.consume(n);
            }
            self.line = Some(newlines + 1);
        }
        self
    }
}

/// ` (line 12, byte offset 1072)`, ` (byte offset 1072)`, or nothing.
fn place(offset: Option<u64>, line: Option<u64>) -> String {
    match (offset, line) {
        (Some(o), Some(l)) => format!(" (line {l}, byte offset {o})"),
        (Some(o), None) => format!(" (byte offset {o})"),
        _ => String::new(),
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
    /// The holder is a `check --paused` run, which a whole run waits for
    /// ([`crate::fsutil::RunLock::acquire_after_paused`]).
    pub paused: bool,
}

/// Every way a command can fail, one variant per concern, each with its
/// exit code ([`Error::exit_code`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad flags, config or prompts file, or nothing to do: exit 2.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A data file that cannot be read or parsed, left untouched: exit 4.
    #[error(transparent)]
    Data(#[from] DataError),
    /// Another `check` holds the run lock: exit 3.
    #[error(transparent)]
    Locked(#[from] LockedError),
    /// The system failed us (cannot create, write or lock a file, cannot
    /// start the runtime): exit 7.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// The HTTP client (its TLS backend) could not start: exit 7.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// Writing to stdout failed. A closed pipe is success; anything else is
    /// exit 7.
    #[error("cannot write to stdout: {0}")]
    Stdout(#[source] std::io::Error),
    /// A bug: part of the run panicked: exit 8.
    #[error("internal error: {0}; please report this")]
    Internal(String),
}

impl Error {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    /// A data file that could not be opened or read (exit 4, like a file
    /// that cannot be parsed).
    pub fn unreadable(path: &Path, source: std::io::Error) -> Self {
        DataError::new(path, None, format!("cannot read: {source}")).into()
    }

    pub fn config(msg: impl Into<String>) -> Self {
        Error::Config(ConfigError(msg.into()))
    }

    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Config(_) => exit::USAGE,
            Error::Data(_) => exit::DATA,
            Error::Locked(_) => exit::LOCKED,
            Error::Io { .. } | Error::Client(_) | Error::Stdout(_) => exit::IO,
            Error::Internal(_) => exit::INTERNAL,
        }
    }

    /// True when the error is a closed stdout pipe, which is not a failure
    /// (`llmprobe state | head`), as ripgrep treats it.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, Error::Stdout(e) if e.kind() == std::io::ErrorKind::BrokenPipe)
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

/// The HTTP client could not be built ([`crate::upstream::http::client`]).
#[derive(Debug, thiserror::Error)]
#[error("cannot start the HTTP client (TLS backend): {0}")]
pub struct ClientError(pub(crate) String);
