//! Appending one entry to a log of any content, under the real data lock: see `llmprobe::fuzzing::files::healthlog_append`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| llmprobe::fuzzing::files::healthlog_append(data));
