//! Anthropic's stream mapper over fuzzed SSE (plain and JSON mode): well-formed deltas, dense tool-call indexes: see `llmprobe::fuzzing::wire::stream_anthropic`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| llmprobe::fuzzing::wire::stream_anthropic(data));
