//! The config, prompt pool and env file readers; errors never quote a key: see `llmprobe::fuzzing::files::config_parse`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| llmprobe::fuzzing::files::config_parse(data));
