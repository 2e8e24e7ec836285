//! The Messages surface's request parser (create and count_tokens), and the translation: see `llmprobe::fuzzing::wire::inbound_messages`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| llmprobe::fuzzing::wire::inbound_messages(data));
