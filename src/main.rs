fn main() -> std::process::ExitCode {
    llmprobe::run(std::env::args_os())
}
