//! Gemini's whole-reply reader and the error-body reader: see `llmprobe::fuzzing::wire::decode_gemini`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| llmprobe::fuzzing::wire::decode_gemini(data));
