//! Fuzz entry points for files and probe answers.

use std::io::Write;
use std::path::PathBuf;

use crate::healthlog::read::{self, Record, Sink};
use crate::healthlog::tail::{self, Tail};

/// A scratch file of this process's own, rewritten for every input (the
/// file-based readers need a path). Kept in memory-backed `/dev/shm` where
/// there is one.
fn scratch(data: &[u8]) -> PathBuf {
    let dir = if cfg!(target_os = "linux") && std::path::Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let path = dir.join(format!("llmprobe-fuzz-{}.json", std::process::id()));
    let mut f = std::fs::File::create(&path).expect("create the fuzz scratch file");
    f.write_all(data).expect("write the fuzz scratch file");
    path
}

/// Counts what a forward read saw.
#[derive(Default)]
struct Count(u64);

impl Sink for Count {
    fn record(&mut self, _r: &Record<'_>) {
        self.0 += 1;
    }
    fn merge(&mut self, later: Self) {
        self.0 += later.0;
    }
}

/// The health log's readers over one file: the forward reader (one thread
/// and two must agree), and the backward tail reader, which must either
/// give up (`NotLineForm`) or hand out exactly the entries the forward read
/// counted.
pub fn healthlog_read(data: &[u8]) {
    let path = scratch(data);
    let one = read::read_all_with(&path, Count::default, false);
    let two = read::read_all_with(&path, Count::default, true);
    match (&one, &two) {
        (Ok((a, sa)), Ok((b, sb))) => {
            assert_eq!(a.0, b.0, "one-thread and two-thread reads disagree");
            assert_eq!(sa, sb, "one-thread and two-thread summaries disagree");
        }
        (Err(_), Err(_)) => {}
        _ => panic!("one reader failed where the other did not"),
    }
    let mut back = 0u64;
    let tail = tail::read_backward(&path, |_| {
        back += 1;
        true
    });
    if let (Ok((forward, _)), Ok(Tail::Done { .. })) = (&one, &tail) {
        assert_eq!(
            forward.0, back,
            "the tail reader and the forward reader disagree"
        );
    }
}
