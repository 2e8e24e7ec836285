//! The command line as a newcomer meets it: where the config comes from, and
//! the examples in every `--help`.

use serde_json::Value;

use crate::support::Env;

/// A config with one provider named `name`, so that `providers` shows which
/// file was read.
fn config_naming(name: &str) -> String {
    format!(
        "include_default_catalog = false\n\n[[providers]]\nname = \"{name}\"\ndialect = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodels = [\"m\"]\n"
    )
}

/// The one provider `providers --json` lists, and the config it names.
fn used(env: &Env, args: &[&str]) -> (String, Value) {
    let mut a = args.to_vec();
    a.extend(["providers", "--json"]);
    let out = env.run(&a).ok();
    let v: Value =
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout));
    let providers = v["providers"].as_array().unwrap();
    let name = if providers.len() == 1 {
        providers[0]["provider"].as_str().unwrap().to_string()
    } else {
        format!("{} providers", providers.len())
    };
    (name, v["config"].clone())
}

#[test]
fn config_discovery_order_and_the_file_used_is_named() {
    let mut env = Env::new();
    // Nothing anywhere: the embedded catalog, and `check --list` says so.
    let (name, cfg) = used(&env, &[]);
    assert!(
        name.ends_with("providers") && name != "1 providers",
        "{name}"
    );
    assert_eq!(cfg["path"], Value::Null);
    assert_eq!(cfg["found_by"], "none: embedded catalog only");
    let out = env.run(&["check", "--list"]).ok();
    assert!(
        out.stdout.contains("config: none: embedded catalog only"),
        "{}",
        out.stdout
    );

    // 4b. $HOME/.config/llmprobe/llmprobe.toml, XDG_CONFIG_HOME unset.
    let home_file = env.write(
        "home/.config/llmprobe/llmprobe.toml",
        config_naming("from-home"),
    );
    let (name, cfg) = used(&env, &[]);
    assert_eq!(name, "from-home");
    assert_eq!(cfg["path"], home_file.to_str().unwrap());
    assert_eq!(cfg["found_by"], "user config directory");

    // 4a. $XDG_CONFIG_HOME wins over $HOME/.config; when it has no file,
    // nothing there is read (and HOME is not consulted: it is the fallback
    // for an unset XDG_CONFIG_HOME only).
    let xdg = env.path().join("xdg");
    env.env("XDG_CONFIG_HOME", xdg.to_str().unwrap());
    let (name, cfg) = used(&env, &[]);
    assert_eq!(cfg["path"], Value::Null, "{name}");
    let xdg_file = env.write("xdg/llmprobe/llmprobe.toml", config_naming("from-xdg"));
    let (name, cfg) = used(&env, &[]);
    assert_eq!(name, "from-xdg");
    assert_eq!(cfg["path"], xdg_file.to_str().unwrap());

    // 3. ./llmprobe.toml wins over the user config directory, and the text
    // listing names it under the table.
    let here = env.write("llmprobe.toml", config_naming("from-cwd"));
    let (name, cfg) = used(&env, &[]);
    assert_eq!(name, "from-cwd");
    assert_eq!(cfg["found_by"], "working directory");
    let out = env.run(&["check", "--list"]).ok();
    let line = format!("config: {} (working directory)", here.display());
    assert!(out.stdout.contains(&line), "{}", out.stdout);

    // 2. LLMPROBE_CONFIG wins over ./llmprobe.toml.
    let env_file = env.write("env.toml", config_naming("from-env"));
    env.env("LLMPROBE_CONFIG", env_file.to_str().unwrap());
    let (name, cfg) = used(&env, &[]);
    assert_eq!(name, "from-env");
    assert_eq!(cfg["found_by"], "LLMPROBE_CONFIG");

    // 1. --config wins over everything.
    let flag_file = env.write("flag.toml", config_naming("from-flag"));
    let (name, cfg) = used(&env, &["--config", flag_file.to_str().unwrap()]);
    assert_eq!(name, "from-flag");
    assert_eq!(cfg["found_by"], "--config");
}

#[test]
fn a_named_config_must_exist_and_a_discovered_one_is_read() {
    let mut env = Env::new();
    let out = env.run(&["--config", "nope.toml", "providers"]).code(2);
    assert!(
        out.stderr.contains("nope.toml") && out.stderr.contains("--config"),
        "{}",
        out.stderr
    );
    env.env("LLMPROBE_CONFIG", "gone.toml");
    let out = env.run(&["providers"]).code(2);
    assert!(
        out.stderr.contains("gone.toml") && out.stderr.contains("LLMPROBE_CONFIG"),
        "{}",
        out.stderr
    );

    // The newcomer's case: a typo in ./llmprobe.toml is no longer ignored.
    let env = Env::new();
    env.write("llmprobe.toml", "[defaults]\nspacing = 5\n");
    let out = env.run(&["check", "--dry-run"]).code(2);
    assert!(
        out.stderr.contains("llmprobe.toml") && out.stderr.contains("spacing"),
        "{}",
        out.stderr
    );
}

#[test]
fn demo_says_whether_it_continues_and_fresh_starts_over() {
    let env = Env::new();
    let first = env.run(&["demo", "--spacing", "0"]).ok().stdout;
    let stats = env.stats();
    assert_eq!(
        first.lines().next().unwrap(),
        format!("llmprobe demo: a fresh start in {}", stats.display()),
        "{first}"
    );
    // The closing hint works for someone who ran `cargo run`.
    assert!(first.contains("cargo run -- demo"), "{first}");
    let entries = crate::support::log_entries(&env.log()).len();
    assert!(entries > 0);
    let second = env.run(&["demo", "--spacing", "0"]).ok().stdout;
    assert_eq!(
        second.lines().next().unwrap(),
        format!(
            "llmprobe demo: continuing 1 earlier demo run in {} (--fresh starts over)",
            stats.display()
        ),
        "{second}"
    );
    assert_eq!(crate::support::log_entries(&env.log()).len(), 2 * entries);
    // Each run adds one capability probe per provider that lists any: by
    // now acme's two listed models each have a verdict, and the chatty one
    // answered in text where a tool call was asked.
    let verdicts: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(stats.join("capabilities.json")).unwrap())
            .unwrap();
    assert_eq!(verdicts["acme::acme-8b"]["tools"]["verdict"], "yes");
    assert_eq!(verdicts["acme::acme-chatty"]["tools"]["verdict"], "no");
    assert!(second.contains("acme::acme-chatty tools ✗"), "{second}");
    assert!(
        second.contains("| acme::acme-chatty    | tools ✗"),
        "brief's capability column: {second}"
    );
    // The count keeps up once a model is disabled and runs add fewer
    // entries than there are models.
    for n in 2..=5 {
        let out = env.run(&["demo", "--spacing", "0"]).ok().stdout;
        assert!(
            out.starts_with(&format!(
                "llmprobe demo: continuing {n} earlier demo runs in "
            )),
            "run {}: {out}",
            n + 1
        );
    }
    let fresh = env.run(&["demo", "--fresh", "--spacing", "0"]).ok().stdout;
    assert!(
        fresh.starts_with("llmprobe demo: a fresh start in "),
        "{fresh}"
    );
    assert_eq!(crate::support::log_entries(&env.log()).len(), entries);
}

#[test]
fn demo_keeps_each_users_files_in_their_own_state_directory() {
    // Two users (two homes) on one machine, no --stats-dir: each gets a
    // fresh start in their own ~/.local/state, named by its absolute path,
    // and neither continues the other's runs.
    let env = Env::new();
    for user in ["alice", "bob"] {
        let home = env.path().join(user);
        let out = env
            .command(&["demo", "--spacing", "0"])
            .env_remove("LLMPROBE_STATS_DIR")
            .env("HOME", &home)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let dir = home.join(".local/state/llmprobe/demo");
        assert_eq!(
            stdout.lines().next().unwrap(),
            format!("llmprobe demo: a fresh start in {}", dir.display()),
            "{stdout}"
        );
        assert!(dir.join("health_log.json").is_file());
    }
    assert!(!env.stats().exists());
}

#[test]
fn demo_fresh_never_deletes_real_data() {
    let env = Env::new();
    let log = "[\n{\"ts\":\"2026-05-02T10:00:00Z\",\"provider\":\"groq\",\"model\":\"m\",\"ok\":1,\"latency_ms\":5,\"failure_type\":\"\"}\n]\n";
    env.write("stats/health_log.json", log);
    let r = env.run(&["demo", "--fresh", "--spacing", "0"]).code(2);
    assert!(r.stderr.contains("health_log.json"), "{}", r.stderr);
    assert_eq!(std::fs::read_to_string(env.log()).unwrap(), log);
}

/// Split an example line as a shell would: words, with '…' and "…" quoting.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            (None, c) => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    words
}

/// The commands in the `Examples:` section of a help text: lines that start
/// with `llmprobe`, without the description after two spaces, and without a
/// pipe or redirection into another program.
fn examples(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Examples:"))
        .map(str::trim)
        .take_while(|l| !l.is_empty())
        .filter(|l| l.starts_with("llmprobe "))
        .map(|l| {
            let cmd = l.split("  ").next().unwrap();
            let cmd = cmd.split(" | ").next().unwrap();
            cmd.split(" > ").next().unwrap().trim().to_string()
        })
        .collect()
}

#[test]
fn every_help_example_runs_as_written() {
    let mut env = Env::new();
    let fake = crate::support::Fake::start(&env, &[]);
    // The providers the examples name, all on the loopback fake; no
    // spacing, so that no example waits.
    let cfg = format!(
        "include_default_catalog = false\n[defaults]\nspacing_secs = 0\ntimeout_secs = 5\n\n{}\n{}",
        fake.provider(
            "groq",
            "openai",
            &["openai/gpt-oss-20b"],
            "api_key_env = \"GROQ_API_KEY\""
        ),
        fake.provider(
            "mistral",
            "openai",
            &["mistral-small-latest"],
            "api_key_env = \"MISTRAL_API_KEY\""
        ),
    );
    env.write("llmprobe.toml", cfg);
    env.env("GROQ_API_KEY", "k").env("MISTRAL_API_KEY", "k");
    // `schedule` examples install and remove jobs: through fake crontab,
    // systemctl and schtasks, never the machine's own; systemd units go to
    // the test's home. keys.env is the example's env file.
    #[cfg(unix)]
    let _tools = crate::support::fake_tools(&mut env);
    env.write("keys.env", "GROQ_API_KEY=k\n");
    // `notify` examples send to a local recorder: the configured channel,
    // and in place of the example's own 127.0.0.1:8080.
    let hook = crate::support::PingServer::start();
    env.env("LLMPROBE_NOTIFY", &format!("json+{}/configured", hook.url));
    // Data for the read commands, and a README with both marker pairs.
    env.run(&["check"]).ok();
    env.write(
        "README.md",
        "# x\n<!-- BRAIN_HEALTH_START -->\n<!-- BRAIN_HEALTH_END -->\n<!-- H -->\n<!-- /H -->\n",
    );

    let mut seen = 0;
    for sub in [
        "",
        "check",
        "providers",
        "rollup",
        "brief",
        "state",
        "route",
        "schedule",
        "schedule install",
        "schedule show",
        "schedule uninstall",
        "notify",
        "notify test",
        "demo",
        "completions",
        "man",
    ] {
        #[cfg(not(unix))]
        if sub.starts_with("schedule") {
            continue;
        }
        let mut args: Vec<&str> = sub.split_whitespace().collect();
        args.push("--help");
        let help = env.run(&args).ok().stdout;
        let list = examples(&help);
        assert!(!list.is_empty(), "`{sub} --help` has no example:\n{help}");
        for ex in list {
            let mut words = shell_words(&ex);
            assert_eq!(words.remove(0), "llmprobe");
            if words.iter().any(|w| w == "--serve") {
                // A server runs until stopped; tests/route.rs covers it.
                continue;
            }
            if let Some(i) = words.iter().position(|w| w == "--output") {
                // Written where node_exporter reads it; here, in the test
                // directory.
                words[i + 1] = "llmprobe.prom".into();
            }
            for w in &mut words {
                if w.contains("://127.0.0.1:8080") {
                    *w = w.replace("http://127.0.0.1:8080", &hook.url);
                }
            }
            let demo = words.first().map(String::as_str) == Some("demo");
            if demo {
                words.extend(["--spacing".into(), "0".into()]);
            }
            let w: Vec<&str> = words.iter().map(String::as_str).collect();
            let mut cmd = env.command(&w);
            if demo {
                // The demo's own directory, as it has by default: never the
                // stats directory of real data.
                cmd.env("LLMPROBE_STATS_DIR", env.path().join("demo-stats"));
            }
            let r = cmd.output().unwrap();
            let code = r.status.code().unwrap_or(-1);
            assert!(
                code != 2 && code >= 0,
                "`{ex}` exited {code}:\n{}\n{}",
                String::from_utf8_lossy(&r.stdout),
                String::from_utf8_lossy(&r.stderr)
            );
            seen += 1;
        }
    }
    assert!(seen >= 64, "{seen}");
    // Every `notify` example delivered: none ran against nothing.
    let calls = hook.calls();
    assert!(calls.len() >= 4, "{calls:?}");
    assert!(calls.contains(&"POST /hook".to_string()), "{calls:?}");
}

#[test]
fn check_dry_run_json_is_json() {
    let mut env = Env::new();
    env.write(
        "llmprobe.toml",
        config_naming("p") + "api_key_env = \"P_KEY\"\n",
    );
    // Nothing to probe is an error, with or without --json.
    let r = env.run(&["check", "--dry-run", "--json"]).code(2);
    assert!(r.stderr.contains("p: skipped: set P_KEY"), "{}", r.stderr);
    env.env("P_KEY", "k");
    let v: Value = serde_json::from_str(&env.run(&["check", "--dry-run", "--json"]).ok().stdout)
        .expect("JSON");
    assert_eq!(v["probes"][0]["model"], "m");
    assert_eq!(v["probes"][0]["starts_at_secs"], 0.0);
}

#[test]
fn version_names_the_commit_it_was_built_from() {
    let env = Env::new();
    for flag in ["--version", "-V"] {
        let out = env.run(&[flag]).ok().stdout;
        let rest = out
            .strip_prefix(&format!("llmprobe {} (commit ", env!("CARGO_PKG_VERSION")))
            .and_then(|r| r.strip_suffix(")\n"))
            .unwrap_or_else(|| panic!("{out:?}"));
        let sha = rest.strip_suffix("-dirty").unwrap_or(rest);
        assert!(
            sha == "unknown" || (sha.len() == 12 && sha.chars().all(|c| c.is_ascii_hexdigit())),
            "{out}"
        );
        // Built from a git checkout: its HEAD.
        let head = std::process::Command::new("git")
            .args(["rev-parse", "--short=12", "HEAD"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output();
        if let Ok(h) = head
            && h.status.success()
            && std::env::var_os("LLMPROBE_COMMIT").is_none()
        {
            assert_eq!(sha, String::from_utf8_lossy(&h.stdout).trim(), "{out}");
        }
    }
}

#[test]
fn completions_for_every_shell_register_the_dynamic_completer() {
    let env = Env::new();
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let out = env.run(&["completions", shell]).ok().stdout;
        // The script asks the binary at each Tab: this one, by its full
        // path, as it is not the `llmprobe` on PATH.
        assert!(out.contains("LLMPROBE_COMPLETE"), "{shell}: {out}");
        assert!(out.contains(crate::support::BIN), "{shell}: {out}");
        assert!(!out.contains("fake-provider"), "{shell}: a hidden command");
        // bash and zsh reading the script, and bash completing with it:
        // tests/tools.rs (the external harness, which says so where a shell
        // is missing).
    }
    let r = env.run(&["completions", "tcsh"]).code(2);
    assert!(r.stderr.contains("tcsh"), "{}", r.stderr);
}

/// When the `llmprobe` on PATH is this binary (here a link to it), the
/// script calls it by name, so that an installed copy keeps working after
/// an upgrade.
#[cfg(unix)]
#[test]
fn completions_call_llmprobe_by_name_when_path_finds_this_binary() {
    let mut env = Env::new();
    let bin = env.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(crate::support::BIN, bin.join("llmprobe")).unwrap();
    env.env("PATH", bin.to_str().unwrap());
    let out = env.run(&["completions", "bash"]).ok().stdout;
    assert!(out.contains("\"llmprobe\" -- \"${words[@]}\""), "{out}");
    assert!(!out.contains(crate::support::BIN), "{out}");
}

/// What the shell offers for the word at `index` of `words`, asked the way
/// the bash script asks (see `llmprobe completions bash`): the words after
/// `--`, the index and the separator in the environment.
fn complete(env: &Env, index: usize, words: &[&str]) -> Vec<String> {
    let mut args = vec!["--", "llmprobe"];
    args.extend(words);
    let index = index.to_string();
    let o = env
        .command(&args)
        .env("LLMPROBE_COMPLETE", "bash")
        .env("_CLAP_COMPLETE_INDEX", &index)
        .env("_CLAP_COMPLETE_COMP_TYPE", "9")
        .env("_CLAP_COMPLETE_SPACE", "true")
        .env("_CLAP_IFS", "\n")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success() && stderr.is_empty(),
        "{words:?}: {stderr}"
    );
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn completion_offers_the_names_of_the_config_the_line_would_read() {
    let mut env = Env::new();
    let cfg = |name: &str| {
        config_naming(name).replace("models = [\"m\"]", "models = [\"m-of-x\"]")
            + "[aliases]\nquick = [\""
            + name
            + "::m-of-x\"]\n"
    };
    env.write("mine.toml", cfg("only-in-mine"));
    env.write("env.toml", cfg("only-in-env"));
    env.write("broken.toml", "[[providers]\nname = ");
    // No config anywhere: the embedded catalog.
    let got = complete(&env, 3, &["check", "--provider", ""]);
    assert!(got.iter().any(|n| n == "openrouter"), "{got:?}");
    assert!(!got.iter().any(|n| n == "only-in-mine"), "{got:?}");
    // --config on the line, before or after the subcommand, in either
    // spelling.
    for words in [
        &["check", "--config", "mine.toml", "--provider", ""][..],
        &["--config=mine.toml", "state", "-p", "only"],
    ] {
        let got = complete(&env, words.len(), words);
        assert_eq!(got, ["only-in-mine"], "{words:?}");
    }
    // route --model: auto, the aliases, the keys and the ids.
    let got = complete(&env, 5, &["route", "--config", "mine.toml", "--model", ""]);
    assert_eq!(got, ["auto", "m-of-x", "only-in-mine::m-of-x", "quick"]);
    // check --model and state enable: no aliases there.
    let got = complete(&env, 5, &["check", "--config", "mine.toml", "-m", ""]);
    assert_eq!(got, ["m-of-x", "only-in-mine::m-of-x"]);
    // (A positional: its flags are offered too.)
    let mut got = complete(&env, 5, &["--config", "mine.toml", "state", "enable", ""]);
    got.retain(|c| !c.starts_with('-'));
    assert_eq!(got, ["only-in-mine::m-of-x"]);
    // LLMPROBE_CONFIG, unless the line names a file.
    env.env("LLMPROBE_CONFIG", "env.toml");
    assert_eq!(
        complete(&env, 3, &["check", "--provider", ""]),
        ["only-in-env"]
    );
    assert_eq!(
        complete(&env, 5, &["check", "--config", "mine.toml", "-p", ""]),
        ["only-in-mine"]
    );
    // A broken or missing file: the embedded catalog, and not a word on
    // stderr (`complete` checks).
    for file in ["broken.toml", "missing.toml"] {
        let got = complete(&env, 5, &["check", "--config", file, "-p", "openr"]);
        assert_eq!(got, ["openrouter"], "{file}");
    }
    // A file argument still completes file names.
    assert_eq!(complete(&env, 2, &["--config", "mi"]), ["mine.toml"]);
}

#[test]
fn completion_finds_the_config_of_the_working_directory() {
    let env = Env::new();
    env.write("llmprobe.toml", config_naming("only-here"));
    assert_eq!(complete(&env, 3, &["check", "-p", ""]), ["only-here"]);
}

#[test]
fn completion_leaves_hidden_subcommands_out() {
    let env = Env::new();
    let top = complete(&env, 1, &[""]);
    for visible in ["check", "route", "schedule", "completions"] {
        assert!(top.iter().any(|c| c == visible), "{visible}: {top:?}");
    }
    assert!(!top.iter().any(|c| c == "fake-provider"), "{top:?}");
    // Even where nothing visible matches, which is when clap_complete
    // would offer a hidden command.
    assert!(complete(&env, 1, &["fake"]).is_empty());
    let schedule = complete(&env, 2, &["schedule", ""]);
    assert!(schedule.iter().any(|c| c == "install"), "{schedule:?}");
    assert!(!schedule.iter().any(|c| c == "templates"), "{schedule:?}");
    assert!(complete(&env, 2, &["schedule", "t"]).is_empty());
}

#[test]
fn the_man_page_is_roff_and_renders() {
    let env = Env::new();
    let page = env.run(&["man"]).ok().stdout;
    let first = page
        .lines()
        .find(|l| l.starts_with(".TH ") || l.starts_with(".SH "))
        .unwrap();
    assert!(first.starts_with(".TH LLMPROBE 1 "), "{first}");
    // groff rendering it: tests/tools.rs (the external harness).
}

#[test]
fn verbose_adds_diagnostics_and_routine_output_stays_as_it_was() {
    let mut env = Env::new();
    let fake = crate::support::Fake::start(&env, &[]);
    let cfg = env.write(
        "llmprobe.toml",
        format!(
            "include_default_catalog = false\n[defaults]\nspacing_secs = 0\n\n{}",
            fake.provider("f", "openai", &["ok", "wrong", "rate-limit"], "")
        ),
    );
    let cfg = cfg.to_str().unwrap();
    let quiet = env.run(&["--config", cfg, "check", "--dry-run"]).ok();
    let loud = env
        .run(&["-vv", "--config", cfg, "check", "--dry-run"])
        .ok();
    assert_eq!(quiet.stdout, loud.stdout);
    assert_eq!(quiet.stderr, "");
    assert!(loud.stderr.contains("config file"), "{}", loud.stderr);
    assert!(loud.stderr.contains("llmprobe.toml"), "{}", loud.stderr);

    // Each probe and state change at debug level; the table as ever.
    let r = env.run(&["--config", cfg, "check", "-vv"]).ok();
    assert!(r.stdout.contains("1/3 probes passed"), "{}", r.stdout);
    for needle in [
        "probe sent",
        "probe answered",
        "wrong_answer",
        "state change",
    ] {
        assert!(r.stderr.contains(needle), "{needle}:\n{}", r.stderr);
    }
    // -v alone: what happens, not each probe.
    let r = env.run(&["-v", "--config", cfg, "check"]).ok();
    assert!(r.stderr.contains("config file"), "{}", r.stderr);
    assert!(!r.stderr.contains("probe sent"), "{}", r.stderr);
    // -q, and no flag at all: nothing on stderr for a good run.
    let r = env.run(&["--config", cfg, "check", "-q"]).ok();
    assert_eq!(r.stderr, "");
    let r = env.run(&["--config", cfg, "check"]).ok();
    assert_eq!(r.stderr, "");
    env.run(&["-v", "-q", "providers"]).code(2);
    // RUST_LOG, when set, decides.
    env.env("RUST_LOG", "llmprobe::check=debug");
    let r = env.run(&["--config", cfg, "check"]).ok();
    assert!(r.stderr.contains("probe answered"), "{}", r.stderr);
    assert!(!r.stderr.contains("config file"), "{}", r.stderr);
}

/// The hand-written cron lines of docs/scheduling.md, run the way cron
/// runs them: `sh -c` with a bare environment (only HOME), keys from a file
/// of `NAME=value` lines, and a binary that is not on cron's `PATH`. The
/// key must reach the provider.
#[cfg(unix)]
#[test]
fn the_documented_cron_lines_export_the_keys_and_find_the_binary() {
    let env = Env::new();
    let fake = crate::support::Fake::start(&env, &[]);
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/scheduling.md"),
    )
    .unwrap();
    let lines: Vec<&str> = doc
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("*/10 * * * *") || l.starts_with("0 * * * *"))
        .collect();
    assert!(!lines.is_empty(), "no cron line in docs/scheduling.md");
    let home = env.path().join("cronhome");
    let dir = home.join("llmprobe");
    std::fs::create_dir_all(home.join(".cargo/bin")).unwrap();
    std::os::unix::fs::symlink(crate::support::BIN, home.join(".cargo/bin/llmprobe")).unwrap();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("keys.env"), "CRON_KEY=sk-cron-0123456789\n").unwrap();
    let provider = fake.provider("p", "openai", &["ok"], "api_key_env = \"CRON_KEY\"");
    std::fs::write(
        dir.join("llmprobe.toml"),
        format!("include_default_catalog = false\n[defaults]\nspacing_secs = 0\n\n{provider}"),
    )
    .unwrap();
    for (i, line) in lines.iter().enumerate() {
        // Cron's five time fields, then the command; its monitor and its
        // node_exporter directory are not on this machine, and the test
        // does not wait out a random jitter.
        let command = line
            .split_whitespace()
            .skip(5)
            .collect::<Vec<_>>()
            .join(" ");
        let command = command
            .replace("https://hc-ping.com/<uuid>", &crate::support::closed_port())
            .replace(" --jitter 5m", "")
            .replace("/var/lib/node_exporter/textfile/", "");
        let out = std::process::Command::new("/bin/sh")
            .args(["-c", &command])
            .env_clear()
            .env("HOME", &home)
            .output()
            .unwrap();
        assert!(out.status.success(), "{command}: {out:?}");
        let seen = fake.seen();
        assert_eq!(seen.len(), i + 1, "{command}: {seen:?}");
        assert!(
            seen[i].auth,
            "the key did not reach the provider: {command}"
        );
    }
}

/// `demo --serve`: the demo's check, then route over its fakes. Each line
/// it prints to paste works against it: the curl line (run by `sh` where
/// curl is installed, else the same request from the test), and the
/// one-shot `route` line; Ctrl-C (SIGINT) stops it with exit 0. (The
/// OpenAI SDK line: tests/clients.rs.)
#[cfg(unix)]
#[test]
fn demo_serve_routes_over_the_fakes_and_its_printed_lines_work() {
    let env = Env::new();
    let demo = crate::support::DemoServer::start(&env);
    let curl = demo.line("curl -s http");
    let url = curl.split_whitespace().nth(2).unwrap();
    let content = |body: &str| {
        let v: serde_json::Value =
            serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
        v["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    if crate::support::need::on_path("curl").is_some() {
        let out = std::process::Command::new("sh")
            .args(["-c", &curl])
            .output()
            .unwrap();
        let answer = content(&String::from_utf8_lossy(&out.stdout));
        assert!(answer.trim_end().ends_with('4'), "{answer}");
    }
    let r = crate::support::http(
        "POST",
        url,
        &[("content-type", "application/json")],
        Some(r#"{"model":"auto","messages":[{"role":"user","content":"What is 6 times 7?"}]}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(content(&r.body).trim_end().ends_with("42"), "{}", r.body);
    // The one-shot line, as printed.
    let words = printed_route(&demo, "What is 12 * 7?");
    let args: Vec<&str> = words.iter().map(String::as_str).collect();
    let out = env.run(&args).ok();
    assert!(out.stdout.trim_end().ends_with("84"), "{}", out.stdout);
    assert_eq!(demo.interrupt(), 0);
}

/// The one-shot `route` line a `demo --serve` printed (the one that
/// holds `with`), as the test runs it: its paths are absolute; from a
/// checkout, as here, it says `cargo run --`, and the test runs the built
/// binary in its place.
#[cfg(unix)]
fn printed_route(demo: &crate::support::DemoServer, with: &str) -> Vec<String> {
    let line = demo
        .printed
        .iter()
        .map(|l| l.trim())
        .find(|l| l.starts_with("cargo run -- --config") && l.contains(with))
        .unwrap_or_else(|| {
            panic!(
                "no route line with {with:?} in:\n{}",
                demo.printed.join("\n")
            )
        })
        .to_string();
    let words = shell_words(&line);
    assert_eq!(words[..3], ["cargo", "run", "--"], "{line}");
    words[3..].to_vec()
}

/// A newcomer's first question through `demo --serve` is answered by a
/// plain model, not the demo's reasoning one, whose thinking
/// (`<think>…</think>`) would come first: the demo's config puts its
/// provider after the others for `auto`. The reasoning model is still
/// there, by name, and the demo says so and prints the line that asks it.
#[cfg(unix)]
#[test]
fn demo_serve_answers_first_from_a_plain_model_and_names_the_reasoning_one() {
    let env = Env::new();
    let demo = crate::support::DemoServer::start(&env);
    let curl = demo.line("curl -s http");
    let url = curl.split_whitespace().nth(2).unwrap();
    let body = curl
        .split_once("-d '")
        .and_then(|(_, b)| b.strip_suffix('\''))
        .unwrap_or_else(|| panic!("{curl}"));
    assert!(
        body.contains("\"model\":\"auto\"") && body.contains("What is 2+2?"),
        "{body}"
    );
    let ask = |body: &str| {
        let r = crate::support::http(
            "POST",
            url,
            &[("content-type", "application/json")],
            Some(body),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        let answer = r.json()["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .to_string();
        (answer, r.header("x-routed-via").to_string())
    };
    // The printed request, as a newcomer sends it, and again.
    for _ in 0..3 {
        let (answer, via) = ask(body);
        assert_eq!(answer, "4", "via {via}");
        assert_ne!(via, "acme::acme-70b-reasoner");
    }
    // By name, the reasoning model answers with its thinking first.
    let (answer, via) = ask(&body.replace("\"auto\"", "\"acme::acme-70b-reasoner\""));
    assert_eq!(via, "acme::acme-70b-reasoner");
    assert!(
        answer.starts_with("<think>") && answer.ends_with('4'),
        "{answer}"
    );
    // The demo says why, and how to reach it: its printed line works.
    let said = demo.printed.join("\n");
    assert!(
        said.contains(
            "the reasoning model, by name: it answers with its thinking first (<think>…</think>)"
        ),
        "{said}"
    );
    let args = printed_route(&demo, "acme::acme-70b-reasoner");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = env.run(&args).ok();
    assert!(
        out.stdout.starts_with("<think>") && out.stdout.trim_end().ends_with('4'),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr.contains("acme::acme-70b-reasoner"),
        "{}",
        out.stderr
    );
    assert_eq!(demo.interrupt(), 0);
}

/// Each serving demo writes its config to a file of its own
/// (`demo-PORT.toml`), so the one-shot `route` line it printed keeps
/// working while it runs, whatever other demos do meanwhile: here a
/// second `demo --serve` in the same directory (which once rewrote the
/// shared `demo.toml` with its own fakes' ports, dead once it stopped)
/// and a plain `demo`. Each removes its own file when it stops, and only
/// its own.
#[cfg(unix)]
#[test]
fn demo_serves_printed_route_line_outlives_other_demos() {
    let env = Env::new();
    let first = crate::support::DemoServer::start(&env);
    let first_line = printed_route(&first, "What is 12 * 7?");
    let config_of = |words: &[String]| std::path::PathBuf::from(&words[1]);
    let first_config = config_of(&first_line);
    assert!(first_config.exists(), "{first_config:?}");
    let second = crate::support::DemoServer::start(&env);
    let second_config = config_of(&printed_route(&second, "What is 12 * 7?"));
    assert_ne!(first_config, second_config, "each its own file");
    env.run(&["demo", "--spacing", "0"]).ok();
    assert_eq!(second.interrupt(), 0);
    assert!(!second_config.exists(), "{second_config:?} left behind");
    assert!(
        first_config.exists(),
        "the second demo removed the first's {first_config:?}"
    );
    let args: Vec<&str> = first_line.iter().map(String::as_str).collect();
    let out = env.run(&args).ok();
    assert!(out.stdout.trim_end().ends_with("84"), "{}", out.stdout);
    assert_eq!(first.interrupt(), 0);
    assert!(!first_config.exists(), "{first_config:?} left behind");
    assert!(!env.stats().join("demo.toml").exists());
}
