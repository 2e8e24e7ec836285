//! Retry-After, retryDelay, "try again in" and the other wait readers: see `llmprobe::fuzzing::files::retry_hints`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| llmprobe::fuzzing::files::retry_hints(data));
