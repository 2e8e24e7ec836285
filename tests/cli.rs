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
