//! The x-ratelimit-* and anthropic-ratelimit-* header readers: see `llmprobe::fuzzing::files::ratelimit_headers`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| llmprobe::fuzzing::files::ratelimit_headers(data));
