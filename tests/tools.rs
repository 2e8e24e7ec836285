//! The completion scripts and the manual page, read by the programs that
//! use them: bash and zsh check a script's syntax (bash also loads it, and
//! completes with it against the real binary), and groff renders the page
//! without a warning. And `check`'s progress lines on a terminal, which
//! `script` provides.

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

/// Bash, with the script loaded, completing `words` (the last one is the
/// word under the cursor) as it does on Tab: COMP_WORDS and COMP_CWORD set,
/// the completion function called, COMPREPLY read. `vars` are exported.
fn bash_completes(
    env: &Env,
    file: &std::path::Path,
    words: &[&str],
    vars: &[(&str, &str)],
) -> Vec<String> {
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let script = format!(
        "source \"$0\" || exit 9\n\
         COMP_WORDS=(llmprobe {})\nCOMP_CWORD={}\nCOMP_TYPE=9\n\
         _clap_complete_llmprobe llmprobe {} {}\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        quoted.join(" "),
        words.len(),
        quoted.last().unwrap(),
        quoted
            .get(words.len().wrapping_sub(2))
            .map_or("llmprobe", String::as_str),
    );
    let mut cmd = std::process::Command::new("bash");
    cmd.arg("-c").arg(&script).arg(file);
    cmd.current_dir(env.path()).env_clear();
    cmd.env("PATH", std::env::var_os("PATH").unwrap_or_default());
    cmd.env("HOME", env.home());
    cmd.envs(vars.iter().copied());
    let o = cmd.output().expect("run bash");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success() && stderr.is_empty(),
        "{words:?}: {stderr}"
    );
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// The loaded bash script, run as on Tab against the real binary, offers
/// the providers of the config on the line, else of LLMPROBE_CONFIG.
fn bash_completes_names_from_the_users_config() {
    let (env, file) = completion_script_for("bash");
    let cfg = |name: &str| {
        format!(
            "include_default_catalog = false\n[[providers]]\nname = \"{name}\"\n\
             dialect = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodels = [\"m\"]\n"
        )
    };
    env.write("mine.toml", cfg("only-in-mine"));
    env.write("env.toml", cfg("only-in-env"));
    let got = bash_completes(
        &env,
        &file,
        &["check", "--config", "mine.toml", "--provider", ""],
        &[],
    );
    assert_eq!(got, ["only-in-mine"]);
    let got = bash_completes(
        &env,
        &file,
        &["check", "-p", "only"],
        &[("LLMPROBE_CONFIG", "env.toml")],
    );
    assert_eq!(got, ["only-in-env"]);
    // No config: the embedded catalog's names.
    let got = bash_completes(&env, &file, &["check", "-p", "openr"], &[]);
    assert_eq!(got, ["openrouter"]);
    // Subcommands, without the hidden ones.
    let got = bash_completes(&env, &file, &["sch"], &[]);
    assert_eq!(got, ["schedule"]);
    let got = bash_completes(&env, &file, &["schedule", ""], &[]);
    assert!(got.iter().any(|c| c == "install"), "{got:?}");
    assert!(!got.iter().any(|c| c == "templates"), "{got:?}");
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

/// `check` on a terminal (`script` gives it one): each result is printed
/// as it lands, above the progress lines, which count the results so far
/// (off a terminal they print nothing: `check_stop::a_run_off_a_terminal_prints_no_progress`).
#[cfg(unix)]
fn check_on_a_terminal_shows_each_result_as_it_lands() {
    let env = Env::new();
    let fake = crate::support::Fake::start(&env, &[]);
    let cfg = crate::support::config(
        &env,
        &[fake.provider("f", "openai", &["ok", "wrong"], "spacing_secs = 3")],
    );
    let line = format!(
        "{} --config {cfg} --stats-dir {} check",
        crate::support::BIN,
        env.stats().display()
    );
    let o = std::process::Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .current_dir(env.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", env.home())
        .env("TERM", "xterm")
        .output()
        .expect("run script");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}");
    for want in [
        "f::ok: ok, ",
        "1 ok · 0 failed · next: wrong in ",
        "s (2/2)",
        "f::wrong: wrong_answer (200), ",
        "1/2 probes passed",
    ] {
        assert!(out.contains(want), "{want:?} not in:\n{out}");
    }
}

pub fn tests() -> Vec<Test> {
    vec![
        Test::new(
            "tools::bash_reads_and_loads_the_completion_script",
            &[Need::Program("bash")],
            bash_reads_and_loads_the_completion_script,
        ),
        Test::new(
            "tools::bash_completes_names_from_the_users_config",
            &[Need::Program("bash")],
            bash_completes_names_from_the_users_config,
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
        #[cfg(unix)]
        Test::new(
            "tools::check_on_a_terminal_shows_each_result_as_it_lands",
            &[Need::Program("script")],
            check_on_a_terminal_shows_each_result_as_it_lands,
        ),
    ]
}
