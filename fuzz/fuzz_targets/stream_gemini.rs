//! Gemini's stream mapper over fuzzed SSE: well-formed deltas, dense tool-call indexes: see `llmprobe::fuzzing::wire::stream_gemini`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| llmprobe::fuzzing::wire::stream_gemini(data));
