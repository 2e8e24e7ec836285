//! check_answer and the capability probes' judges: see `llmprobe::fuzzing::files::answer_check`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| llmprobe::fuzzing::files::answer_check(data));
