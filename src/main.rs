/// mimalloc rather than the system allocator: `route --serve` allocates and
/// frees many small buffers per request (headers, JSON values), and glibc's
/// malloc and free were about 13% of its CPU time at full load.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    llmprobe::run(std::env::args_os())
}
