//! Anthropic's and OpenAI's whole-reply readers and the error-body reader: see `llmprobe::fuzzing::wire::decode_anthropic`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| llmprobe::fuzzing::wire::decode_anthropic(data));
