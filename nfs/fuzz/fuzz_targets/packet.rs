#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| nf_fuzz_targets::run("packet", data));
