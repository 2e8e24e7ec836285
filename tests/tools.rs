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

/// `systemd-analyze verify --user` on `units`: it needs a runtime
/// directory, not a running systemd.
#[cfg(unix)]
fn systemd_verify(env: &Env, units: &[std::path::PathBuf]) -> std::process::Output {
    use std::os::unix::fs::PermissionsExt;
    let runtime = env.path().join("runtime");
    std::fs::create_dir_all(&runtime).unwrap();
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::create_dir_all(env.home()).unwrap();
    std::process::Command::new("systemd-analyze")
        .args(["verify", "--user", "--man=no"])
        .args(units)
        .env("HOME", env.home())
        .env("XDG_RUNTIME_DIR", &runtime)
        .env("XDG_CONFIG_HOME", env.path().join("xdg"))
        .output()
        .expect("run systemd-analyze")
}

/// The units `schedule install --with systemd` writes pass
/// `systemd-analyze verify`, and a broken copy does not.
#[cfg(unix)]
fn systemd_analyze_verifies_the_scheduled_units() {
    let mut env = Env::new();
    let _tools = crate::support::fake_tools(&mut env);
    env.env("GROQ_API_KEY", "sk-test-systemd-0123456789abcdef");
    let xdg = env.path().join("xdg");
    env.env("XDG_CONFIG_HOME", xdg.to_str().unwrap());
    env.write(
        "keys.env",
        "GROQ_API_KEY=sk-test-systemd-0123456789abcdef\n",
    );
    env.run(&[
        "schedule",
        "install",
        "--with",
        "systemd",
        "--env-file",
        "keys.env",
    ])
    .ok();
    let dir = xdg.join("systemd/user");
    let units = [
        dir.join("llmprobe-check.service"),
        dir.join("llmprobe-check.timer"),
    ];
    let v = systemd_verify(&env, &units);
    assert!(
        v.status.success() && v.stderr.is_empty(),
        "systemd-analyze verify: {}\n{}",
        v.status,
        String::from_utf8_lossy(&v.stderr)
    );
    // The verification can fail: a broken copy does.
    let s = std::fs::read_to_string(&units[0]).unwrap();
    let broken = env.write(
        "xdg/systemd/user/broken.service",
        s.replace("Type=oneshot", "Type=oneshot\nExecStart=relative/path"),
    );
    let v = systemd_verify(&env, std::slice::from_ref(&broken));
    assert!(!v.status.success(), "a broken unit passed verification");
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
        #[cfg(unix)]
        Test::new(
            "tools::systemd_analyze_verifies_the_scheduled_units",
            &[Need::Program("systemd-analyze")],
            systemd_analyze_verifies_the_scheduled_units,
        ),
    ]
}
