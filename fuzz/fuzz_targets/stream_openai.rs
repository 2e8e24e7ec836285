//! OpenAI's stream mapper over fuzzed SSE (plain and native): well-formed deltas: see `llmprobe::fuzzing::wire::stream_openai`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| llmprobe::fuzzing::wire::stream_openai(data));
