//! The completion scripts and the manual page, read by the programs that
//! use them: bash and zsh check a script's syntax (bash also loads it), and
//! groff renders the page without a warning.

use crate::Test;
use crate::support::Env;
use crate::support::need::Need;

/// `llmprobe completions SHELL`, read by that shell.
fn completion_script_for(shell: &str) -> (Env, std::path::PathBuf) {
    let env = Env::new();
    let out = env.run(&["completions", shell]).ok().stdout;
    let file = env.write(&format!("llmprobe.{shell}"), &out);
    (env, file)
}

fn shell_ok(shell: &str, args: &[&str], file: &std::path::Path) -> String {
    let o = std::process::Command::new(shell)
        .args(args)
        .arg(file)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {shell}: {e}"));
    assert!(
        o.status.success(),
        "{shell} {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn bash_reads_and_loads_the_completion_script() {
    let (_env, file) = completion_script_for("bash");
    shell_ok("bash", &["-n"], &file);
    let said = shell_ok(
        "bash",
        &["-c", "source \"$0\" && complete -p llmprobe"],
        &file,
    );
    assert!(
        said.contains("_llmprobe") && said.trim_end().ends_with(" llmprobe"),
        "{said}"
    );
}

fn zsh_reads_the_completion_script() {
    let (_env, file) = completion_script_for("zsh");
    shell_ok("zsh", &["-n"], &file);
}

fn groff_renders_the_man_page_without_a_warning() {
    let env = Env::new();
    let page = env.run(&["man"]).ok().stdout;
    let file = env.write("llmprobe.1", &page);
    let o = std::process::Command::new("groff")
        .args(["-k", "-man", "-Tutf8", "-ww", "-P-cbou"])
        .arg(&file)
        .output()
        .expect("run groff");
    assert!(
        o.status.success() && o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = String::from_utf8_lossy(&o.stdout);
    for heading in [
        "LLMPROBE CHECK",
        "LLMPROBE STATE RESET",
        "LLMPROBE ROUTE",
        "EXAMPLES",
        "EXIT STATUS",
    ] {
        assert!(text.contains(heading), "{heading}");
    }
    // Examples are shown as written, not reflowed: an aligned line of
    // `check --help` comes out whole, and the synopsis names values.
    assert!(
        text.contains("  llmprobe check --dry-run --json             the same, as JSON\n"),
        "{text}"
    );
    assert!(text.contains("[-p|--provider NAME]..."), "{text}");
    assert!(!text.contains("EXTRA") && !text.contains("Examples:"));
}

pub fn tests() -> Vec<Test> {
    vec![
        Test::new(
            "tools::bash_reads_and_loads_the_completion_script",
            &[Need::Program("bash")],
            bash_reads_and_loads_the_completion_script,
        ),
        Test::new(
            "tools::zsh_reads_the_completion_script",
            &[Need::Program("zsh")],
            zsh_reads_the_completion_script,
        ),
        Test::new(
            "tools::groff_renders_the_man_page_without_a_warning",
            &[Need::Program("groff")],
            groff_renders_the_man_page_without_a_warning,
        ),
    ]
}
