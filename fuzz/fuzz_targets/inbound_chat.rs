//! The chat completions surface's request parser, and the translation of what it accepts: see `llmprobe::fuzzing::wire::inbound_chat`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| llmprobe::fuzzing::wire::inbound_chat(data));
