//! The time llmprobe decides by: route's cooldowns and limits, check's
//! `--if-due` and `--jitter`, brief's staleness warnings. In production it is
//! the system clock; a test moves it forward by writing seconds into the file named by
//! `LLMPROBE_TEST_CLOCK_FILE`, so that cooldown expiry is tested without
//! waiting, through the real binary.

use std::path::PathBuf;

use chrono::{DateTime, TimeDelta, Utc};

#[derive(Debug, Clone, Default)]
pub struct Clock {
    offset_file: Option<PathBuf>,
}

impl Clock {
    /// The system clock, shifted by the test offset file if the variable
    /// names one.
    pub fn from_env() -> Clock {
        Clock {
            offset_file: std::env::var_os("LLMPROBE_TEST_CLOCK_FILE").map(PathBuf::from),
        }
    }

    /// A clock shifted by the seconds in `file`, as the variable would make
    /// it (for unit tests).
    #[cfg(test)]
    pub fn with_offset_file(file: PathBuf) -> Clock {
        Clock {
            offset_file: Some(file),
        }
    }

    pub fn now(&self) -> DateTime<Utc> {
        let now = Utc::now();
        match &self.offset_file {
            None => now,
            Some(p) => {
                let secs = std::fs::read_to_string(p)
                    .ok()
                    .and_then(|s| s.trim().parse::<f64>().ok())
                    .unwrap_or(0.0);
                now + TimeDelta::milliseconds((secs * 1000.0) as i64)
            }
        }
    }
}
