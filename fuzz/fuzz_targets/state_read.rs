//! The state file's reader and its atomic write-back: see `llmprobe::fuzzing::files::state_read`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| llmprobe::fuzzing::files::state_read(data));
