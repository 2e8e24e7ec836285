//! Benchmark: the cost of appending one entry to a 1,000,000-entry health log
//! against appending to an empty one, through the real append path (lock,
//! tail search, write, fsync). Run by `scripts/bench-check`.
//!
//! Usage: bench_append [ENTRIES] [ROUNDS]

use std::io::Write;
use std::time::Instant;

use llmprobe::fsutil::DataLock;
use llmprobe::healthlog;
use llmprobe::outcome::{Entry, FailureType, Outcome, Timing};

fn entry(i: u64) -> Entry {
    let o = Outcome {
        failure: i.is_multiple_of(7).then_some(FailureType::Timeout),
        latency_ms: 200 + i % 900,
        status: i.is_multiple_of(7).then_some(504),
        error: None,
        unreachable: false,
        retry_at: None,
        model_gone: false,
        timing: Timing {
            ttft_ms: (!i.is_multiple_of(7)).then_some(80 + i % 300),
            ..Timing::default()
        },
    };
    Entry::new(
        format!(
            "2026-{:02}-{:02}T{:02}:00:00Z",
            1 + i % 12,
            1 + i % 28,
            i % 24
        ),
        ["groq", "gemini", "mistral", "cerebras"][(i % 4) as usize],
        &format!("model-{}", i % 25),
        &o,
    )
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn time_appends(dir: &std::path::Path, path: &std::path::Path, rounds: usize) -> f64 {
    let lock = DataLock::acquire(dir).unwrap();
    let mut times = Vec::with_capacity(rounds);
    for i in 0..rounds {
        let e = [entry(i as u64)];
        let t = Instant::now();
        healthlog::append(path, &e, &lock).unwrap();
        times.push(t.elapsed().as_secs_f64() * 1e6);
    }
    median(times)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().map(|s| s.parse().unwrap()).unwrap_or(1_000_000);
    let rounds: usize = args.next().map(|s| s.parse().unwrap()).unwrap_or(41);
    let tmp = tempfile::tempdir().unwrap();

    let big = tmp.path().join("big");
    std::fs::create_dir_all(&big).unwrap();
    let big_log = big.join("health_log.json");
    {
        let mut w = std::io::BufWriter::new(std::fs::File::create(&big_log).unwrap());
        w.write_all(b"[\n").unwrap();
        for i in 0..n {
            if i > 0 {
                w.write_all(b",\n").unwrap();
            }
            serde_json::to_writer(&mut w, &entry(i)).unwrap();
        }
        w.write_all(b"\n]\n").unwrap();
        // Flush the generated data to disk now, so that the first timed
        // fsync does not pay for it.
        w.into_inner().unwrap().sync_all().unwrap();
    }
    let size = std::fs::metadata(&big_log).unwrap().len();

    let small = tmp.path().join("small");
    std::fs::create_dir_all(&small).unwrap();
    let small_log = small.join("health_log.json");

    // Interleave to share the machine's noise fairly.
    let mut empty_us = Vec::new();
    let mut big_us = Vec::new();
    for _ in 0..3 {
        std::fs::write(&small_log, b"").unwrap();
        empty_us.push(time_appends(&small, &small_log, rounds));
        big_us.push(time_appends(&big, &big_log, rounds));
    }
    let (e, b) = (median(empty_us), median(big_us));
    let entries =
        serde_json::from_slice::<Vec<serde_json::Value>>(&std::fs::read(&big_log).unwrap())
            .map(|v| v.len())
            .unwrap_or(0);
    println!("append_empty_us={e:.1}");
    println!("append_1m_us={b:.1}");
    println!("append_ratio={:.2}", b / e);
    println!("big_log_bytes={size} big_log_entries_after={entries}");
}
