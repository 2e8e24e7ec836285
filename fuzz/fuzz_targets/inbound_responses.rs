//! The Responses surface's request parser, and the translation: see `llmprobe::fuzzing::wire::inbound_responses`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| llmprobe::fuzzing::wire::inbound_responses(data));
