//! The SSE framing of upstream streams (map_byte_stream): the same items whole, cut at fuzzed points and byte by byte; an endless line or invalid UTF-8 ends the stream: see `llmprobe::fuzzing::wire::sse_stream`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| llmprobe::fuzzing::wire::sse_stream(data));
