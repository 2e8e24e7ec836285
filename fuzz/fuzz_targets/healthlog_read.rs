//! The health log's forward readers (one thread and two) and its backward
//! tail reader over arbitrary bytes: see `llmprobe::fuzzing::files::healthlog_read`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| llmprobe::fuzzing::files::healthlog_read(data));
