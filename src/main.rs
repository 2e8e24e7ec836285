/// mimalloc rather than the system allocator: `route --serve` allocates and
/// frees many small buffers per request (headers, JSON values), and glibc's
/// malloc and free were about 13% of its CPU time at full load.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    // A shell asking for completions (see `llmprobe completions`) gets only
    // them, before anything can write to stdout.
    llmprobe::complete_if_asked();
    llmprobe::run(std::env::args_os())
}
