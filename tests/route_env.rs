//! `[route]` settings and `daily_cap`s from the environment
//! (`LLMPROBE_ROUTE_<KEY>`, `LLMPROBE_DAILY_CAP_<PROVIDER>`), where
//! `route --status` says each value came from, and SIGHUP on a running
//! `route --serve`: the real binary against fake providers on 127.0.0.1.

use serde_json::Value;

use crate::support::Test;
use crate::support::{Env, Fake, RouteServer, Run, clock_env as env, http, route_config as config};

const Q: &str = "What is 7 + 7? Reply with only the number.";

/// `llmprobe --config CFG route ARGS…` with `vars` set for this run only.
fn route(env: &Env, cfg: &str, vars: &[(&str, &str)], args: &[&str]) -> Run {
    let mut all = vec!["--config", cfg, "route"];
    all.extend_from_slice(args);
    let o = env
        .command(&all)
        .envs(vars.iter().copied())
        .output()
        .expect("run llmprobe");
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// `--status --json`'s `settings`, as `setting -> (value, source)`.
fn settings(v: &Value) -> std::collections::BTreeMap<String, (Value, String)> {
    v["settings"]
        .as_array()
        .unwrap_or_else(|| panic!("no settings in {v}"))
        .iter()
        .map(|s| {
            (
                s["setting"].as_str().unwrap().to_string(),
                (
                    s["value"].clone(),
                    s["source"].as_str().unwrap().to_string(),
                ),
            )
        })
        .collect()
}

fn setting(v: &Value, name: &str) -> (Value, String) {
    settings(v)
        .remove(name)
        .unwrap_or_else(|| panic!("no {name} in {}", v["settings"]))
}

fn calls(fake: &Fake, model: &str) -> usize {
    fake.seen().iter().filter(|s| s.model() == model).count()
}

#[test]
fn the_environment_overrides_the_file_and_a_flag_the_environment() {
    let (env, fake, cfg) = Test::new()
        .provider("a", "openai", &["e500"], "priority = 1")
        .provider("b", "openai", &["e500"], "priority = 2")
        .provider("c-3", "openai", &["e500"], "priority = 3\ndaily_cap = 50")
        .extra("[route]\nmax_attempts = 3\nbudget_secs = 30\nreserve_max_tokens = 100\n")
        .config();
    let vars = [
        ("LLMPROBE_ROUTE_MAX_ATTEMPTS", "1"),
        ("LLMPROBE_ROUTE_BUDGET_SECS", "20"),
        ("LLMPROBE_DAILY_CAP_C_3", "7"),
    ];
    let st = route(&env, &cfg, &vars, &["--status", "--json", "--budget", "10"]).ok();
    let v: Value = serde_json::from_str(&st.stdout).unwrap();
    let s = |name: &str| setting(&v, name);
    assert_eq!(
        s("route.max_attempts"),
        (1.into(), "env LLMPROBE_ROUTE_MAX_ATTEMPTS".into())
    );
    assert_eq!(s("route.budget_secs"), (10.0.into(), "flag".into()));
    assert_eq!(
        s("route.reserve_max_tokens"),
        (100.into(), "llmprobe.toml".into())
    );
    assert_eq!(
        s("route.idle_timeout_secs"),
        (60.0.into(), "default".into())
    );
    assert_eq!(s("route.auth_token_env"), (Value::Null, "default".into()));
    assert_eq!(
        s("providers.c-3.daily_cap"),
        (7.into(), "env LLMPROBE_DAILY_CAP_C_3".into())
    );
    // Only the caps that are set are listed.
    assert!(!settings(&v).contains_key("providers.a.daily_cap"), "{v}");
    // The table says the same.
    let st = route(&env, &cfg, &vars, &["--status"]).ok();
    let row = |name: &str| {
        st.stdout
            .lines()
            .find(|l| l.contains(&format!(" {name} ")))
            .unwrap_or_else(|| panic!("no {name} in\n{}", st.stdout))
            .to_string()
    };
    assert!(row("route.max_attempts").contains("env LLMPROBE_ROUTE_MAX_ATTEMPTS"));
    assert!(
        row("route.budget_secs").contains("| 20.0 "),
        "{}",
        st.stdout
    );
    assert!(row("route.reserve_max_tokens").contains("llmprobe.toml"));
    assert!(
        row("providers.c-3.daily_cap").contains("| 7 "),
        "{}",
        st.stdout
    );
    // Behaviour: the environment's one attempt, then the flag's two, over
    // the file's three.
    let r = route(&env, &cfg, &vars, &[Q]).code(5);
    assert_eq!(calls(&fake, "e500"), 1, "{}", r.stderr);
    let r = route(&env, &cfg, &vars, &["--max-attempts", "2", Q]).code(5);
    assert_eq!(calls(&fake, "e500"), 3, "{}", r.stderr);
    let r = route(&env, &cfg, &[], &[Q]).code(5);
    assert_eq!(calls(&fake, "e500"), 6, "{}", r.stderr);
}

#[test]
fn a_daily_cap_from_the_environment_limits_the_server() {
    let mut env = env();
    let fake = Fake::start(&env, &[]);
    let cfg = config(
        &env,
        &[fake.provider("github-models", "openai", &["ok"], "")],
        "",
    );
    env.env("LLMPROBE_DAILY_CAP_GITHUB_MODELS", "1");
    let srv = RouteServer::start(&env, &cfg, &[]);
    let r = srv.chat("auto", false);
    assert_eq!(r.status, 200, "{}", r.body);
    let r = srv.chat("auto", false);
    assert_eq!(r.status, 429, "{}", r.body);
    assert!(
        r.header("x-fallback-trail").contains("limit:daily_cap"),
        "{:?}",
        r.header("x-fallback-trail")
    );
    assert_eq!(calls(&fake, "ok"), 1);
    // /v1/providers carries the settings and their sources too.
    let p = http("GET", &format!("{}/v1/providers", srv.url), &[], None);
    assert_eq!(
        setting(&p.json(), "providers.github-models.daily_cap"),
        (1.into(), "env LLMPROBE_DAILY_CAP_GITHUB_MODELS".into())
    );
}

#[test]
fn bad_and_unknown_variables_are_config_errors_that_name_them() {
    let (env, fake, cfg) = Test::new().provider("groq", "openai", &["ok"], "").config();
    let r = route(
        &env,
        &cfg,
        &[("LLMPROBE_ROUTE_BUDGET_SECS", "soon")],
        &["--status"],
    )
    .code(2);
    assert!(
        r.stderr.contains(
            "LLMPROBE_ROUTE_BUDGET_SECS=\"soon\": expected a number (as [route] budget_secs in llmprobe.toml)"
        ),
        "{}",
        r.stderr
    );
    let r = route(
        &env,
        &cfg,
        &[("LLMPROBE_ROUTE_MAX_ATTEMPTS", "500")],
        &["--status"],
    )
    .code(2);
    assert!(
        r.stderr.contains(
            "LLMPROBE_ROUTE_MAX_ATTEMPTS=\"500\": 500 is out of range: expected 1 to 100"
        ),
        "{}",
        r.stderr
    );
    let r = route(
        &env,
        &cfg,
        &[("LLMPROBE_DAILY_CAP_GROQ", "0")],
        &["--status"],
    )
    .code(2);
    assert!(
        r.stderr.contains("LLMPROBE_DAILY_CAP_GROQ=\"0\""),
        "{}",
        r.stderr
    );
    // A typo does not pass silently.
    let r = route(&env, &cfg, &[("LLMPROBE_ROUTE_BUDGET", "20")], &[Q]).code(2);
    assert!(
        r.stderr.contains(
            "unknown variable LLMPROBE_ROUTE_BUDGET: it sets no [route] key. Did you mean LLMPROBE_ROUTE_BUDGET_SECS?"
        ),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("LLMPROBE_ROUTE_AFFINITY_SECS"),
        "{}",
        r.stderr
    );
    let r = route(&env, &cfg, &[("LLMPROBE_DAILY_CAP_GROK", "20")], &[Q]).code(2);
    assert!(
        r.stderr.contains(
            "unknown variable LLMPROBE_DAILY_CAP_GROK: it names no provider of the catalog. Did you mean LLMPROBE_DAILY_CAP_GROQ?"
        ),
        "{}",
        r.stderr
    );
    assert!(fake.seen().is_empty(), "nothing was sent");
}

#[test]
fn two_providers_with_one_variable_are_a_config_error() {
    let (env, _fake, cfg) = Test::new()
        .provider("github-models", "openai", &["ok"], "")
        .provider("github_models", "openai", &["ok"], "")
        .config();
    let r = route(&env, &cfg, &[], &["--status"]).code(2);
    assert!(
        r.stderr.contains(
            "providers \"github-models\" and \"github_models\" both take the variable LLMPROBE_DAILY_CAP_GITHUB_MODELS"
        ),
        "{}",
        r.stderr
    );
}

/// SIGHUP does not end `route --serve`: it says the configuration is read
/// at start only, and keeps serving with the one it has.
#[cfg(unix)]
#[test]
fn sighup_keeps_the_server_and_says_to_restart() {
    use std::io::BufRead;
    let (env, _fake, cfg) = Test::new().provider("a", "openai", &["ok"], "").config();
    let mut child = RouteServer::command(&env, &cfg, &[])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start route");
    let (tx, rx) = std::sync::mpsc::channel();
    for pipe in [
        Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().unwrap()),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
    }
    drop(tx);
    let wait_for = |what: &str| loop {
        let l = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("route --serve never printed {what:?}"));
        if l.contains(what) {
            break l;
        }
    };
    let line = wait_for("listening on");
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap()
        .trim_end_matches("/v1")
        .to_string();
    let pid = child.id().to_string();
    std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap();
    wait_for(
        "route: SIGHUP: llmprobe.toml is read at start only; restart route --serve to apply changes (the running configuration is kept)",
    );
    // Still serving, with the configuration it started with.
    let r = http(
        "POST",
        &format!("{url}/v1/chat/completions"),
        &[("content-type", "application/json")],
        Some(&crate::support::chat_body("auto", false)),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("x-routed-via"), "a::ok");
    assert!(child.try_wait().unwrap().is_none(), "still running");
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(0));
}
