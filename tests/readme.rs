//! Every command in the README, run as a user would paste it.
//!
//! Each line of each `sh` block runs in `sh`, in the order the README gives
//! it, in one scratch directory with a scratch `HOME`, `llmprobe` (this
//! build) first on `PATH`, and fake `crontab` and `systemctl` in front of
//! the machine's own. A `llmprobe.toml` in that directory points the
//! providers the README names (groq, gemini, openrouter) at a fake provider
//! on 127.0.0.1, so nothing leaves the machine; the lines themselves are
//! not changed, except where [`rule`] says why. The TOML block is read by
//! the binary, and the Python block is run with the OpenAI SDK in
//! tests/clients.rs.
//!
//! The install lines of `docs/commands.md` (completions, the manual page)
//! run the same way, in the same scratch home.
//!
//! A line with no rule runs as written: adding a command to the README
//! adds it to this test.

use std::path::PathBuf;
use std::process::Command;

use crate::support::{BIN, Env, Fake, doc_blocks, fake_tools};

/// What to do with one README command line.
#[derive(Debug, PartialEq)]
enum Rule {
    /// Run it as written.
    Run,
    /// Run this instead, for the reason given.
    Instead(String, &'static str),
    /// A server: start it, wait for its listening line, stop it.
    Serve,
    /// Only check its syntax (`sh -n`), for the reason given.
    Syntax(&'static str),
}

fn rule(line: &str) -> Rule {
    let cmd = line.split(" #").next().unwrap().trim();
    if cmd.contains("| Out-String | Invoke-Expression") {
        return Rule::Syntax("PowerShell, for a PowerShell profile");
    }
    if cmd == "cargo test" {
        return Rule::Syntax("it is the command running this test");
    }
    if cmd.starts_with("cargo install") {
        return Rule::Syntax("a release build takes minutes; .ci/run builds the same sources");
    }
    if cmd.ends_with(" --serve") {
        return Rule::Serve;
    }
    if cmd.starts_with("cargo run -- ") {
        return Rule::Instead(
            instead(cmd),
            "cargo run -- is this test's binary; cargo inside cargo test would wait on the build lock",
        );
    }
    Rule::Run
}

/// `cargo run -- ARGS` as `llmprobe ARGS`: the same binary.
fn instead(cmd: &str) -> String {
    match cmd.strip_prefix("cargo run -- ") {
        Some(rest) => format!("llmprobe {rest}"),
        None => cmd.to_string(),
    }
}

/// The scratch machine: fakes for the providers, tools and files the
/// README's lines expect.
struct Machine {
    env: Env,
    _fake: Fake,
    path: String,
    proxy: String,
}

impl Machine {
    fn new() -> Machine {
        let mut env = Env::new();
        let fake = Fake::start(&env, &[]);
        let tools = fake_tools(&mut env);
        let bin = env.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink(BIN, bin.join("llmprobe")).unwrap();
        let path = format!(
            "{}:{}:{}",
            bin.display(),
            tools.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        // The embedded groq, gemini and openrouter, each moved to the fake
        // and cut to one model; no spacing, so no line waits 90 s; the
        // server on a free port rather than 8080, which may be taken.
        let point = |name: &str, dialect: &str, model: &str| {
            let base = fake.provider(name, dialect, &[model], "");
            let base_url = base
                .lines()
                .find(|l| l.starts_with("base_url"))
                .unwrap()
                .to_string();
            format!("[[providers]]\nname = \"{name}\"\n{base_url}\nmodels = [\"{model}\"]\n")
        };
        env.write(
            "llmprobe.toml",
            format!(
                "[defaults]\nspacing_secs = 0\ntimeout_secs = 10\n\n[route]\nlisten = \"127.0.0.1:0\"\n\n{}\n{}\n{}",
                point("groq", "openai", "openai/gpt-oss-20b"),
                point("gemini", "gemini", "gemini-2.5-flash-lite"),
                point("openrouter", "openai", "meta-llama/llama-3.3-70b-instruct:free"),
            ) + "\n# Works without a key: would be probed on the internet.\n[[providers]]\nname = \"pollinations\"\nenabled = false\n",
        );
        // `schedule install --env-file ~/llmprobe/keys.env`.
        let home = env.home();
        env.write(
            "home/llmprobe/keys.env",
            "GROQ_API_KEY=sk-readme-0123456789\n",
        );
        assert!(home.join("llmprobe/keys.env").is_file());
        // `rollup --readme README.md` refreshes a README with the markers.
        env.write(
            "README.md",
            "# My models\n<!-- BRAIN_HEALTH_START -->\n<!-- BRAIN_HEALTH_END -->\n",
        );
        Machine {
            env,
            _fake: fake,
            path,
            proxy: crate::support::closed_port(),
        }
    }

    fn sh(&self, script: &str) -> Command {
        let mut c = Command::new("/bin/sh");
        c.args(["-c", script])
            .current_dir(self.env.path())
            .env_clear()
            .env("PATH", &self.path)
            .env("HOME", self.env.home())
            .env("XDG_CONFIG_HOME", self.env.home().join(".config"))
            .env("XDG_STATE_HOME", self.env.home().join(".local/state"))
            .env("XDG_RUNTIME_DIR", self.env.path().join("runtime"));
        for (k, v) in self.env.vars() {
            if k.starts_with("FAKE_") {
                c.env(k, v);
            }
        }
        // A safety net: anything not on loopback goes to a proxy nobody
        // listens on, so a line that reached for the network would fail
        // here rather than leave the machine.
        for k in ["HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"] {
            c.env(k, &self.proxy);
        }
        c
    }
}

#[test]
fn every_readme_command_works_as_written() {
    let m = Machine::new();
    // The `export` lines hold for the lines after them, as in a terminal.
    let mut exports = String::new();
    let mut ran = Vec::new();
    let files = ["README.md", "docs/commands.md"];
    for (file, start, block) in files.iter().flat_map(|f| {
        doc_blocks(f, "sh")
            .into_iter()
            .map(move |(n, b)| (*f, n, b))
    }) {
        for (n, line) in block.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = format!("{file}:{}: {line}", start + n);
            let script = match rule(line) {
                Rule::Syntax(why) => {
                    let o = m.sh("").args(["-n", "-c", line]).output().unwrap();
                    assert!(o.status.success(), "{at}: not valid sh ({why}): {o:?}");
                    continue;
                }
                Rule::Serve => {
                    serve(&m, &format!("{exports}exec {}", instead(line)), &at);
                    ran.push(line.to_string());
                    continue;
                }
                Rule::Instead(cmd, _why) => cmd,
                Rule::Run => line.to_string(),
            };
            if line.starts_with("export ") {
                exports.push_str(line);
                exports.push('\n');
            }
            let o = m.sh(&format!("{exports}{script}")).output().unwrap();
            assert!(
                o.status.success(),
                "{at}: exited {:?}\nstdout:\n{}\nstderr:\n{}",
                o.status.code(),
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            ran.push(line.to_string());
        }
    }
    // The lines that prove the walk did something: a check probed the
    // fakes, route answered, schedule installed and removed.
    for want in [
        "llmprobe check ",
        "llmprobe route \"What is 2+2?\"",
        "llmprobe schedule install",
        "llmprobe state disable",
        "llmprobe route --serve",
    ] {
        assert!(
            ran.iter().any(|l| l.starts_with(want)),
            "no README line starting {want:?} ran: {ran:#?}"
        );
    }
    // The install lines put their files where the shells and man look.
    let home = m.env.home();
    for f in [
        ".local/share/bash-completion/completions/llmprobe",
        ".zfunc/_llmprobe",
        ".config/fish/completions/llmprobe.fish",
        ".local/share/man/man1/llmprobe.1",
    ] {
        let len = std::fs::metadata(home.join(f)).map_or(0, |m| m.len());
        assert!(len > 0, "docs/commands.md: nothing installed at ~/{f}");
    }
    let log = crate::support::log_entries(&m.env.log());
    assert!(
        log.iter().filter(|e| e["ok"] == 1).count() == 3,
        "the three providers did not all pass: {log:?}"
    );
}

/// Start a README server line in the background, wait for its listening
/// line, and stop it.
fn serve(m: &Machine, script: &str, at: &str) {
    use std::io::BufRead;
    let mut child = m
        .sh(script)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let mut printed = Vec::new();
    let found = loop {
        match rx.recv_timeout(std::time::Duration::from_secs(120)) {
            Ok(l) if l.contains("listening on http://127.0.0.1:") => break true,
            Ok(l) => printed.push(l),
            Err(_) => break false,
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        found,
        "{at}: never said where it listens:\n{}",
        printed.join("\n")
    );
}

#[test]
fn the_readme_config_block_is_read_as_it_stands() {
    let env = Env::new();
    let blocks = doc_blocks("README.md", "toml");
    assert!(!blocks.is_empty(), "no toml block in the README");
    for (start, text) in blocks {
        let file: PathBuf = env.write(&format!("readme-{start}.toml"), &text);
        let r = env
            .run(&[
                "--config",
                file.to_str().unwrap(),
                "check",
                "--list",
                "--json",
            ])
            .ok();
        assert!(
            r.stdout.contains("my-vllm"),
            "README.md:{start}: the provider it adds is not listed:\n{}",
            r.stdout
        );
    }
}

/// Every `llmprobe.toml` example in docs/routing.md, the surfaces'
/// pages (the `[route]` settings, the aliases that map clients' model
/// names onto free models) and docs/alerts.md (`[notify]`) loads as it
/// stands over the embedded catalog.
/// A client's own config file shown there (Codex CLI's
/// `[model_providers.…]`) is not llmprobe's and is left out.
#[test]
fn the_routing_docs_config_blocks_load() {
    let env = Env::new();
    let mut loaded = 0;
    for doc in [
        "docs/routing.md",
        "docs/surfaces/anthropic.md",
        "docs/surfaces/responses.md",
        "docs/surfaces/completions.md",
        "docs/alerts.md",
    ] {
        for (start, text) in doc_blocks(doc, "toml") {
            if text.contains("[model_providers.") {
                continue;
            }
            let name = format!("{}-{start}.toml", doc.replace('/', "-"));
            let file: PathBuf = env.write(&name, &text);
            let r = env.run(&[
                "--config",
                file.to_str().unwrap(),
                "check",
                "--list",
                "--json",
            ]);
            assert_eq!(
                r.code, 0,
                "{doc}:{start} does not load:\n{}\n{}",
                r.stdout, r.stderr
            );
            loaded += 1;
        }
    }
    assert!(
        loaded >= 3,
        "too few llmprobe.toml blocks in the routing docs"
    );
}

#[test]
fn every_readme_rule_is_one_a_line_can_meet() {
    assert_eq!(rule("llmprobe brief"), Rule::Run);
    assert_eq!(
        rule("cargo test   # all"),
        Rule::Syntax("it is the command running this test")
    );
    assert_eq!(rule("llmprobe route --serve     # x"), Rule::Serve);
    assert!(matches!(rule("cargo run -- demo"), Rule::Instead(c, _) if c == "llmprobe demo"));
    assert_eq!(rule("cargo run -- demo --serve"), Rule::Serve);
    assert_eq!(
        instead("cargo run -- demo --serve"),
        "llmprobe demo --serve"
    );
}

/// The README's sample `brief` (its first `text` block) is what the binary
/// prints after four demo runs (`demo --fresh`, then `demo` three times),
/// less the per-model and capability tables: compared with the times,
/// dates and measured durations masked, and every other figure (uptime,
/// checks, states, results) exact. `scripts/readme-samples` (that is,
/// `LLMPROBE_BLESS=1` on this test) writes the fresh output into the README.
#[test]
fn the_readme_sample_is_the_demos_output() {
    let env = Env::new();
    let dir = env.path().join("demo");
    let dir = dir.to_str().unwrap();
    let mut last = String::new();
    for n in 0..4 {
        let mut args = vec!["demo", "--stats-dir", dir];
        if n == 0 {
            args.push("--fresh");
        }
        last = env.run(&args).ok().stdout;
    }
    let brief = last
        .split("== llmprobe brief ==\n")
        .nth(1)
        .expect("the demo prints brief")
        .split("\n\nRun the demo again")
        .next()
        .unwrap();
    // Paragraphs, less the two tables the README leaves out.
    let kept: Vec<&str> = brief
        .split("\n\n")
        .filter(|p| !p.starts_with("models (") && !p.starts_with("capabilities:"))
        .collect();
    let sample = format!("$ llmprobe brief\n{}\n", kept.join("\n\n").trim_end());
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    let open = "```text\n$ llmprobe brief\n";
    let start = readme
        .find(open)
        .expect("README: a ```text block of `$ llmprobe brief`")
        + 8;
    let end = start + readme[start..].find("```\n").expect("the block's end");
    if std::env::var_os("LLMPROBE_BLESS").is_some() {
        let fresh = format!("{}{sample}{}", &readme[..start], &readme[end..]);
        std::fs::write(&path, fresh).unwrap();
        return;
    }
    assert_eq!(
        shape(&readme[start..end]),
        shape(&sample),
        "README.md's sample brief is not what the demo prints now; \
         regenerate it with scripts/readme-samples. The demo printed:\n{sample}"
    );
}

/// Each line's words (table cells and their padding, and rule lines, as
/// words), with what differs from run to run masked: dates, times,
/// timestamps, durations in ms and minutes, and tokens/s.
fn shape(text: &str) -> Vec<Vec<String>> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    text.lines()
        .map(|line| {
            let words: Vec<&str> = line
                .split(|c: char| c == '|' || c.is_whitespace())
                .filter(|w| !w.is_empty())
                .collect();
            words
                .iter()
                .enumerate()
                .map(|(i, w)| {
                    let bare = w.trim_matches(|c| c == '(' || c == ')' || c == ',');
                    let masked = if bare.chars().all(|c| c == '-') {
                        "---"
                    } else if bare.len() == 10 && bare.as_bytes()[4] == b'-' {
                        "DATE"
                    } else if bare.len() == 20 && bare.ends_with('Z') {
                        "STAMP"
                    } else if bare.len() == 5 && bare.as_bytes()[2] == b':' {
                        "TIME"
                    } else if bare.strip_suffix("ms").is_some_and(digits) {
                        "#ms"
                    } else if bare.strip_suffix('m').is_some_and(digits) {
                        "#m"
                    } else if digits(bare) && words.get(i + 1) == Some(&"tok/s") {
                        "#"
                    } else {
                        w
                    };
                    masked.to_string()
                })
                .collect()
        })
        .collect()
}
