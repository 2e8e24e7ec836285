//! When `check` sends an alert, through the real binary: fake providers
//! on 127.0.0.1 whose models fail and recover on script (one request per
//! run, cycled), and a recording webhook (the generic `json+http://`
//! channel) on 127.0.0.1. What each channel's request looks like is
//! tests/notify.rs's; this file is about which runs send what, and what
//! `stats/notify_state.json` remembers.

use serde_json::Value;

use crate::support::offline;
use crate::support::{Env, Fake, PingServer, advance, check, clock_env, closed_port, config};

#[track_caller]
fn has(text: &str, needle: &str) {
    assert!(text.contains(needle), "no {needle:?} in:\n{text}");
}

/// The path of the webhook: a secret, which no output may show.
const HOOK_PATH: &str = "/hook/s3cr3t-path-7Qx";

/// A fake provider `f` with `models`, scripted by `scripts`, and a
/// recording webhook; the `--notify` URL for it.
fn setup(env: &Env, scripts: &[&str], models: &[&str]) -> (Fake, String, PingServer, String) {
    let fake = Fake::start(env, scripts);
    let cfg = config(env, &[fake.provider("f", "openai", models, "")]);
    let hook = PingServer::start();
    let url = json_url(&hook);
    (fake, cfg, hook, url)
}

/// Set `disable_after = 1` in the `[defaults]` of the config at `cfg`:
/// a model is disabled at its first hard failure.
fn disable_after_1(cfg: &str) {
    let text = std::fs::read_to_string(cfg)
        .unwrap()
        .replace("[defaults]\n", "[defaults]\ndisable_after = 1\n");
    std::fs::write(cfg, text).unwrap();
}

fn json_url(hook: &PingServer) -> String {
    format!("json+{}{HOOK_PATH}", hook.url.trim_end_matches('/'))
}

/// The flags that bring back the rules before `[notify] on`: every pause
/// alerted, at its first failing run. Most tests here are about pauses.
const EVERY_PAUSE: [&str; 4] = [
    "--notify-on",
    "paused,disabled,provider_down",
    "--notify-after",
    "1",
];

/// `--notify url` and [`EVERY_PAUSE`], then `more`.
fn every_pause<'a>(url: &'a str, more: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["--notify", url];
    args.extend(EVERY_PAUSE);
    args.extend(more);
    args
}

/// Every message the webhook got, as JSON.
fn messages(hook: &PingServer) -> Vec<Value> {
    hook.seen()
        .iter()
        .map(|p| {
            assert_eq!((p.method.as_str(), p.path.as_str()), ("POST", HOOK_PATH));
            serde_json::from_str(&p.body).unwrap_or_else(|e| panic!("{e}: {}", p.body))
        })
        .collect()
}

/// A message's changes as `kind subject from->to`.
fn said(msg: &Value) -> Vec<String> {
    msg["changes"]
        .as_array()
        .unwrap_or_else(|| panic!("no changes in {msg}"))
        .iter()
        .map(|c| {
            let subject = match c["model"].as_str() {
                Some(m) => format!("{}::{m}", c["provider"].as_str().unwrap()),
                None => c["provider"].as_str().unwrap().to_string(),
            };
            format!(
                "{} {subject} {}->{}",
                c["kind"].as_str().unwrap(),
                c["from"].as_str().unwrap(),
                c["to"].as_str().unwrap()
            )
        })
        .collect()
}

fn notify_state(env: &Env) -> String {
    std::fs::read_to_string(env.stats().join("notify_state.json")).unwrap_or_default()
}

/// `notify_state.json` marks nothing as alerted (said).
#[track_caller]
fn not_yet_alerted(env: &Env) {
    let state = notify_state(env);
    assert!(!state.contains("alerted"), "{state}");
}

/// `notify_state.json` never holds a URL, nor any part of one.
#[track_caller]
fn no_url_in_state(env: &Env, hook: &PingServer) {
    let text = notify_state(env);
    let host = hook.url.trim_start_matches("http://").trim_end_matches('/');
    for bad in ["http", "s3cr3t", host] {
        assert!(!text.contains(bad), "{bad} in notify_state.json:\n{text}");
    }
}

#[test]
fn a_state_change_alerts_once_and_its_recovery_resolves_it() {
    let env = Env::new();
    let (_fake, cfg, hook, url) = setup(&env, &["m=e500,e500,ok"], &["ok", "m"]);
    let notify = every_pause(&url, &[]);

    // Run 1: f::m paused: one message, one change.
    let r = check(&env, &cfg, &notify).ok();
    assert!(!r.stderr.contains("warning"), "{}", r.stderr);
    let got = messages(&hook);
    assert_eq!(got.len(), 1);
    assert_eq!(said(&got[0]), ["model_down f::m active->paused"]);
    let alert = &got[0]["changes"][0];
    assert_eq!(alert["reason"], "http_error");
    has(alert["error"].as_str().unwrap(), "500");
    let id = alert["id"].as_str().unwrap().to_string();
    no_url_in_state(&env, &hook);
    let state: Value = serde_json::from_str(&notify_state(&env)).unwrap();
    assert_eq!(state["models"]["f::m"]["alerted"], "paused");

    // Run 2: still paused: nothing.
    check(&env, &cfg, &notify).ok();
    assert_eq!(messages(&hook).len(), 1);

    // Not runs: --dry-run, --list, and a run that is not due send nothing.
    check(&env, &cfg, &["--notify", &url, "--dry-run"]).ok();
    check(&env, &cfg, &["--notify", &url, "--list"]).ok();
    check(&env, &cfg, &["--notify", &url, "--if-due", "1h"]).ok();
    assert_eq!(messages(&hook).len(), 1);

    // Run 3: back: a resolved message, linked to the alert.
    check(&env, &cfg, &notify).ok();
    let got = messages(&hook);
    assert_eq!(got.len(), 2);
    assert_eq!(said(&got[1]), ["model_recovered f::m paused->active"]);
    assert_eq!(got[1]["changes"][0]["resolves"], id.as_str());
    has(got[1]["title"].as_str().unwrap(), "Resolved");
    // Nothing stands any more.
    let state: Value = serde_json::from_str(&notify_state(&env)).unwrap();
    assert_eq!(state["models"], serde_json::json!({}), "{state}");
    no_url_in_state(&env, &hook);
}

#[test]
fn notify_after_waits_for_n_failing_runs_in_a_row() {
    let env = Env::new();
    let (_fake, cfg, hook, url) = setup(&env, &["m=e500"], &["ok", "m"]);
    let args = [
        "--notify",
        url.as_str(),
        "--notify-on",
        "paused",
        "--notify-after",
        "3",
    ];
    check(&env, &cfg, &args).ok();
    check(&env, &cfg, &args).ok();
    assert!(messages(&hook).is_empty(), "{:?}", hook.calls());
    let state: Value = serde_json::from_str(&notify_state(&env)).unwrap();
    assert_eq!(state["models"]["f::m"]["failed_runs"], 2);
    check(&env, &cfg, &args).ok();
    let got = messages(&hook);
    assert_eq!(got.len(), 1);
    assert_eq!(said(&got[0]), ["model_down f::m active->paused"]);
    assert_eq!(
        got[0]["changes"][0]["reason"],
        "http_error, 3 runs in a row"
    );
    check(&env, &cfg, &args).ok();
    assert_eq!(messages(&hook).len(), 1, "once, not once per run");
    // A bad N is refused.
    let r = check(&env, &cfg, &["--notify-after", "0"]).code(2);
    has(&r.stderr, "--notify-after");
}

/// `[notify] after` is N for every run, the scheduled ones included, whose
/// command lines carry no `--notify-after`; the flag overrides it.
#[test]
fn notify_after_in_the_config_file_and_the_flag_over_it() {
    let env = Env::new();
    let (_fake, cfg, hook, url) = setup(&env, &["m=e500"], &["ok", "m"]);
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        format!("{text}\n[notify]\non = [\"paused\"]\nafter = 2\n"),
    )
    .unwrap();
    check(&env, &cfg, &["--notify", &url]).ok();
    assert!(messages(&hook).is_empty());
    check(&env, &cfg, &["--notify", &url]).ok();
    assert_eq!(messages(&hook).len(), 1, "the second run in a row");
    // The flag wins: alerted at the first failing run.
    let env2 = Env::new();
    let (_fake2, cfg2, hook2, url2) = setup(&env2, &["m=e500"], &["ok", "m"]);
    let text2 = std::fs::read_to_string(&cfg2).unwrap();
    std::fs::write(
        &cfg2,
        format!("{text2}\n[notify]\non = [\"paused\"]\nafter = 2\n"),
    )
    .unwrap();
    check(&env2, &cfg2, &["--notify", &url2, "--notify-after", "1"]).ok();
    assert_eq!(messages(&hook2).len(), 1);
    std::fs::write(&cfg, format!("{text}\n[notify]\nafter = 0\n")).unwrap();
    let r = check(&env, &cfg, &["--notify", &url]).code(2);
    has(&r.stderr, "notify.after = 0");
}

#[test]
fn a_flapping_model_alerts_once_per_change_of_direction() {
    let env = Env::new();
    let (_fake, cfg, hook, url) = setup(&env, &["m=e500,e500,ok,ok,e500,ok"], &["ok", "m"]);
    let mut per_run = Vec::new();
    for _ in 0..6 {
        let before = messages(&hook).len();
        check(&env, &cfg, &every_pause(&url, &[])).ok();
        let got = messages(&hook);
        per_run.push(
            got[before..]
                .iter()
                .flat_map(said)
                .collect::<Vec<_>>()
                .join("; "),
        );
    }
    assert_eq!(
        per_run,
        [
            "model_down f::m active->paused",
            "",
            "model_recovered f::m paused->active",
            "",
            "model_down f::m active->paused",
            "model_recovered f::m paused->active",
        ]
    );
    // With --notify-after 2 the same flapping never alerts: it never
    // failed two runs in a row since its last recovery.
    let env = Env::new();
    let (_fake, cfg, hook, url) = setup(&env, &["m=e500,ok"], &["ok", "m"]);
    for _ in 0..4 {
        check(
            &env,
            &cfg,
            &[
                "--notify",
                &url,
                "--notify-on",
                "paused",
                "--notify-after",
                "2",
            ],
        )
        .ok();
    }
    assert!(messages(&hook).is_empty(), "{:?}", hook.calls());
}

#[test]
fn a_provider_down_entirely_is_one_change_and_it_comes_back() {
    let env = Env::new();
    let (_fake, cfg, hook, url) = setup(&env, &["a=e500,ok", "b=e503"], &["a", "b"]);
    check(&env, &cfg, &every_pause(&url, &[])).ok();
    let got = messages(&hook);
    assert_eq!(got.len(), 1, "one message per run");
    assert_eq!(
        said(&got[0]),
        [
            "provider_down f up->down",
            "model_down f::a active->paused",
            "model_down f::b active->paused"
        ]
    );
    has(
        got[0]["changes"][0]["reason"].as_str().unwrap(),
        "all 2 probed models failed",
    );
    // One model answering is the provider back; `b` stays down, unsaid.
    check(&env, &cfg, &every_pause(&url, &[])).ok();
    let got = messages(&hook);
    assert_eq!(
        said(&got[1]),
        [
            "provider_recovered f down->up",
            "model_recovered f::a paused->active"
        ]
    );
}

#[test]
fn a_paused_reprobe_that_brings_a_model_back_is_resolved() {
    let env = clock_env();
    let (_fake, cfg, hook, url) = setup(&env, &["m=e500,ok"], &["ok", "m"]);
    check(&env, &cfg, &every_pause(&url, &[])).ok();
    assert_eq!(
        said(&messages(&hook)[0]),
        ["model_down f::m active->paused"]
    );
    // Its first re-probe is due 5 minutes after the pause.
    advance(&env, 6 * 60);
    check(&env, &cfg, &every_pause(&url, &["--paused"])).ok();
    let got = messages(&hook);
    assert_eq!(got.len(), 2, "{:?}", hook.calls());
    assert_eq!(said(&got[1]), ["model_recovered f::m paused->active"]);
}

#[test]
fn an_unreachable_channel_warns_once_without_its_path_and_changes_no_exit_code() {
    let env = Env::new();
    let (_fake, cfg, hook, url) = setup(&env, &["m=e500"], &["ok", "m"]);
    let closed = closed_port();
    let dead = format!("json+{closed}{HOOK_PATH}");
    let r = check(&env, &cfg, &every_pause(&dead, &[])).ok();
    let warnings: Vec<&str> = r.stderr.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{}", r.stderr);
    // Named by its scheme and host only.
    has(warnings[0], &format!("json+{closed} failed"));
    assert!(!r.stderr.contains("s3cr3t"), "{}", r.stderr);
    assert!(!r.stdout.contains("s3cr3t"), "{}", r.stdout);
    // --fail-on-down's exit 1 stays exit 1.
    check(&env, &cfg, &every_pause(&dead, &["--fail-on-down"])).code(1);
    // The alert reached no channel, so it is not marked as sent: the next
    // run that still sees the model down says it, to a channel that works.
    not_yet_alerted(&env);
    check(&env, &cfg, &every_pause(&url, &[])).ok();
    let got = messages(&hook);
    assert_eq!(got.len(), 1);
    assert_eq!(said(&got[0]), ["model_down f::m active->paused"]);
}

#[test]
fn an_offline_run_sends_nothing_and_says_so_once() {
    // A dead proxy, as on a machine without a network; the webhook on
    // loopback would be reached directly, so nothing sent means none sent.
    let mut env = Env::new();
    let cfg = offline(&mut env, &["a", "b"]);
    let hook = PingServer::start();
    let url = json_url(&hook);
    let r = check(&env, &cfg, &["--notify", &url]).code(6);
    assert!(hook.seen().is_empty(), "{:?}", hook.calls());
    assert_eq!(
        r.stderr
            .matches("notify: offline run: no alert sent")
            .count(),
        1,
        "{}",
        r.stderr
    );
    assert!(!env.stats().join("notify_state.json").exists());
}

#[test]
fn no_key_reaches_a_message() {
    const KEY: &str = "sk-alerts-canary-5e1f0c9a7b3d2468";
    let mut env = Env::new();
    env.env("ALERT_KEY", KEY);
    let fake = Fake::start(&env, &[]);
    let cfg = config(
        &env,
        &[fake.provider(
            "k",
            "openai",
            &["echo-key", "unauthorized"],
            "api_key_env = \"ALERT_KEY\"",
        )],
    );
    // Disabled at the first hard failure: a change at once.
    disable_after_1(&cfg);
    let hook = PingServer::start();
    let url = json_url(&hook);
    // A disable alerts at once, --notify-after or not; the provider,
    // down for one run of 3, waits.
    check(&env, &cfg, &["--notify", &url, "--notify-after", "3"]).ok();
    let got = messages(&hook);
    assert_eq!(got.len(), 1);
    assert_eq!(
        said(&got[0]),
        [
            "model_down k::echo-key active->disabled",
            "model_down k::unauthorized active->disabled"
        ]
    );
    // The key did reach the upstream, which echoed it in its error.
    assert!(fake.seen().iter().all(|r| r.auth));
    let body = &hook.seen()[0].body;
    assert!(
        !body.contains(KEY) && !body.contains("5e1f0c9a"),
        "the key is in the message:\n{body}"
    );
    has(body, "401");
    assert!(!notify_state(&env).contains(KEY));
}

#[test]
fn an_unparseable_notify_state_is_left_alone_and_stops_the_run() {
    let env = Env::new();
    let (fake, cfg, hook, url) = setup(&env, &["m=e500"], &["ok", "m"]);
    let path = env.write("stats/notify_state.json", "{\"version\": 1, \"models\": [");
    let before = std::fs::read(&path).unwrap();
    let r = check(&env, &cfg, &["--notify", &url]).code(4);
    has(&r.stderr, "notify_state.json");
    assert_eq!(std::fs::read(&path).unwrap(), before, "left byte for byte");
    // Stopped before the first probe, and nothing sent.
    assert!(fake.seen().is_empty());
    assert!(hook.seen().is_empty());
    // Without a channel the file is not needed, and not read.
    check(&env, &cfg, &[]).ok();
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn without_a_channel_nothing_is_written() {
    let env = Env::new();
    let (_fake, cfg, _hook, _url) = setup(&env, &["m=e500"], &["ok", "m"]);
    check(&env, &cfg, &[]).ok();
    assert!(!env.stats().join("notify_state.json").exists());
}

/// `schedule install` refuses `--notify` and `--ping-url` (a literal URL
/// in a crontab line or a unit is a secret anyone who can read the job
/// reads), and the job it installs takes LLMPROBE_NOTIFY from its env
/// file: the crontab line, run by `sh` as cron would, alerts the webhook.
#[cfg(unix)]
#[test]
fn the_scheduled_job_takes_its_alert_urls_from_the_env_file_never_from_flags() {
    use std::os::unix::fs::PermissionsExt;
    let mut env = clock_env();
    let tools = crate::support::fake_tools(&mut env);
    let (_fake, cfg, hook, url) = setup(&env, &["m=e500"], &["ok", "m"]);
    // The job's command line has no --notify-on: the file's rules hold.
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        format!("{text}\n[notify]\non = [\"paused\", \"disabled\"]\nafter = 1\n"),
    )
    .unwrap();
    for (flag, var) in [
        ("--notify", "LLMPROBE_NOTIFY=URL"),
        ("--ping-url", "LLMPROBE_PING_URL=URL"),
    ] {
        let r = env
            .run(&["--config", &cfg, "schedule", "install", flag, &url])
            .code(2);
        has(&r.stderr, flag);
        has(&r.stderr, var);
        has(&r.stderr, "env file");
        assert!(!r.stderr.contains("s3cr3t"), "{}", r.stderr);
    }
    let r = env
        .run(&[
            "--config",
            &cfg,
            "schedule",
            "install",
            "--with",
            "task-scheduler",
            "--notify",
            &url,
            "--ping-url",
            &url,
        ])
        .code(2);
    has(&r.stderr, "--notify and --ping-url");
    has(
        &r.stderr,
        "setx LLMPROBE_NOTIFY \"URL\" and setx LLMPROBE_PING_URL \"URL\"",
    );
    assert!(!r.stderr.contains("s3cr3t"), "{}", r.stderr);
    assert!(!tools.crontab.exists(), "nothing installed");

    let keys = env.write("keys.env", format!("LLMPROBE_NOTIFY={url}\n"));
    std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(0o600)).unwrap();
    env.run(&[
        "--config",
        &cfg,
        "schedule",
        "install",
        "--env-file",
        "keys.env",
    ])
    .ok();
    let crontab = std::fs::read_to_string(&tools.crontab).unwrap();
    assert!(!crontab.contains("s3cr3t"), "{crontab}");
    let entry = crontab.lines().find(|l| l.starts_with("*/")).unwrap();
    let line = entry.splitn(6, ' ').nth(5).unwrap();
    // cron's environment: no LLMPROBE_NOTIFY of its own.
    let mut job = std::process::Command::new("sh");
    job.arg("-c").arg(line).env_clear();
    for (k, v) in env.vars() {
        job.env(k, v);
    }
    job.env("HOME", env.home());
    let mut child = job.spawn().unwrap();
    // `--jitter 5m`: once it says it waits, move the clock past the wait.
    let log = env.stats().join("check.log");
    crate::support::eventually("the job waits or ends", || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        match (text.contains("waiting"), child.try_wait().unwrap()) {
            (false, None) => Err(text),
            _ => Ok(()),
        }
    });
    advance(&env, 600);
    let status = child.wait().unwrap();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(status.success(), "{text}");
    let got = messages(&hook);
    assert_eq!(got.len(), 1, "{text}");
    assert_eq!(said(&got[0]), ["model_down f::m active->paused"]);
}

/// A disable whose message reached no channel is said at the next run,
/// although a disabled model is no longer probed; once, in whole seconds.
#[test]
fn a_disable_that_reached_no_channel_is_said_at_the_next_run() {
    let env = Env::new();
    let (_fake, cfg, hook, url) = setup(&env, &[], &["ok", "unauthorized"]);
    disable_after_1(&cfg);
    let dead = format!("json+{}{HOOK_PATH}", closed_port());
    let r = check(&env, &cfg, &["--notify", &dead]).ok();
    has(&r.stderr, "warning: notify");
    not_yet_alerted(&env);
    // The next run probes f::ok only; the disable is said now.
    check(&env, &cfg, &["--notify", &url]).ok();
    let got = messages(&hook);
    assert_eq!(got.len(), 1, "{:?}", hook.calls());
    assert_eq!(
        said(&got[0]),
        ["model_down f::unauthorized active->disabled"]
    );
    // Why: as model_state.json gives it.
    let states: Value =
        serde_json::from_str(&std::fs::read_to_string(env.state_file()).unwrap()).unwrap();
    assert_eq!(
        got[0]["changes"][0]["reason"],
        states["f::unauthorized"]["reason"]
    );
    let state: Value = serde_json::from_str(&notify_state(&env)).unwrap();
    let at = state["models"]["f::unauthorized"]["alerted_at"]
        .as_str()
        .unwrap();
    assert!(
        at.len() == "2026-12-02T10:00:00Z".len() && at.ends_with('Z'),
        "whole seconds: {at}"
    );
    // Once: the run after says nothing.
    check(&env, &cfg, &["--notify", &url]).ok();
    assert_eq!(messages(&hook).len(), 1);
}

/// Turning alerts on (no `notify_state.json` yet) does not page for a
/// model disabled long before: it is taken as said. A disable after that
/// is said.
#[test]
fn a_first_run_with_alerts_takes_models_already_disabled_as_said() {
    let env = Env::new();
    let (_fake, cfg, hook, url) = setup(&env, &[], &["ok", "unauthorized"]);
    disable_after_1(&cfg);
    // Disabled by a run before alerts were set up.
    check(&env, &cfg, &[]).ok();
    assert!(!env.stats().join("notify_state.json").exists());
    check(&env, &cfg, &["--notify", &url]).ok();
    assert!(messages(&hook).is_empty(), "{:?}", hook.calls());
    let state: Value = serde_json::from_str(&notify_state(&env)).unwrap();
    assert_eq!(state["models"]["f::unauthorized"]["alerted"], "disabled");
    check(&env, &cfg, &["--notify", &url]).ok();
    assert!(messages(&hook).is_empty(), "{:?}", hook.calls());
}

/// On save, `notify_state.json` forgets models and providers the catalog
/// no longer has, and keeps those a `--provider` run merely left out.
#[test]
fn notify_state_forgets_what_the_catalog_dropped_not_what_the_run_left_out() {
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let cfg = config(
        &env,
        &[
            fake.provider("f", "openai", &["ok"], ""),
            fake.provider("g", "openai", &["m", "n"], ""),
        ],
    );
    let hook = PingServer::start();
    let url = json_url(&hook);
    let standing = serde_json::json!({"failed_runs": 2, "alerted": "paused",
                                      "alerted_at": "2026-12-02T10:00:00Z"});
    env.write(
        "stats/notify_state.json",
        serde_json::json!({
            "version": 1,
            "models": {"g::m": standing, "gone::x": standing, "f::retired": standing},
            "providers": {"g": {"failed_runs": 1}, "gone": standing},
        })
        .to_string(),
    );
    check(&env, &cfg, &["--provider", "f", "--notify", &url]).ok();
    assert!(hook.seen().is_empty(), "{:?}", hook.calls());
    let state: Value = serde_json::from_str(&notify_state(&env)).unwrap();
    assert_eq!(
        state["models"],
        serde_json::json!({"g::m": standing}),
        "{state}"
    );
    assert_eq!(
        state["providers"],
        serde_json::json!({"g": {"failed_runs": 1}}),
        "{state}"
    );
}

#[test]
fn notify_after_without_a_channel_warns() {
    let env = Env::new();
    let (_fake, cfg, _hook, _url) = setup(&env, &["m=e500"], &["ok", "m"]);
    let r = check(&env, &cfg, &["--notify-after", "2"]).ok();
    has(
        &r.stderr,
        "warning: notify: --notify-after 2 has no effect: no alert channel is configured",
    );
    let r = check(&env, &cfg, &["--notify-on", "paused"]).ok();
    has(
        &r.stderr,
        "warning: notify: --notify-on paused has no effect: no alert channel is configured",
    );
    assert!(!env.stats().join("notify_state.json").exists());
    // With a channel, no such warning.
    let (_fake, cfg, _hook, url) = setup(&env, &["m=e500"], &["ok", "m"]);
    let r = check(&env, &cfg, &["--notify-after", "2", "--notify", &url]).ok();
    assert!(!r.stderr.contains("has no effect"), "{}", r.stderr);
}

/// An ntfy channel on the recording server, whose priority is a header.
fn ntfy_url(hook: &PingServer) -> String {
    format!("ntfy+{}/topic-s3cr3t", hook.url.trim_end_matches('/'))
}

/// Each ntfy push as `title [priority]`.
fn pushes(hook: &PingServer) -> Vec<String> {
    hook.seen()
        .iter()
        .filter(|p| p.path == "/topic-s3cr3t")
        .map(|p| {
            format!(
                "{} [{}]",
                p.header("title").unwrap_or_default(),
                p.header("priority").unwrap_or_default()
            )
        })
        .collect()
}

/// The state `model_state.json` gives `key`.
fn state_of(env: &Env, key: &str) -> String {
    let states: Value =
        serde_json::from_str(&std::fs::read_to_string(env.state_file()).unwrap()).unwrap();
    states[key]["state"]
        .as_str()
        .unwrap_or("active")
        .to_string()
}

/// By default a 429 pauses a model and pushes nothing, run after run: a
/// rate limit is routine on a free tier, and comes back by itself. Asked
/// for (`--notify-on paused`), the pause is pushed, at low priority.
#[test]
fn by_default_a_429_pushes_nothing() {
    let env = Env::new();
    let (_fake, cfg, hook, _) = setup(&env, &["limited=rate-limit"], &["ok", "limited"]);
    let url = ntfy_url(&hook);
    check(&env, &cfg, &["--notify", &url]).ok();
    // The 429 was met: the model is paused, and nothing is pushed.
    assert_eq!(state_of(&env, "f::limited"), "paused");
    assert!(hook.seen().is_empty(), "{:?}", pushes(&hook));
    // Nor at the runs after, still limited.
    for _ in 0..2 {
        check(&env, &cfg, &["--notify", &url]).ok();
    }
    assert!(hook.seen().is_empty(), "{:?}", pushes(&hook));
    // The old rules: said at once, and not urgent.
    check(&env, &cfg, &["--notify", &url, "--notify-on", "paused"]).ok();
    assert_eq!(pushes(&hook), ["f::limited paused [low]"]);
    // A name that is not one is refused, with the names that are.
    let r = check(&env, &cfg, &["--notify", &url, "--notify-on", "pause"]).code(2);
    has(&r.stderr, "--notify-on");
    has(&r.stderr, "paused, disabled, provider_down");
}

/// A disable is pushed at once at default priority (it needs a person);
/// the model back, enabled by hand, is a resolved push at low priority.
#[test]
fn a_disable_pushes_at_default_priority_and_its_recovery_at_low() {
    let env = Env::new();
    let (_fake, cfg, hook, _) = setup(&env, &["d=unauthorized,ok"], &["ok", "d"]);
    disable_after_1(&cfg);
    let url = ntfy_url(&hook);
    check(&env, &cfg, &["--notify", &url]).ok();
    assert_eq!(state_of(&env, "f::d"), "disabled");
    assert_eq!(pushes(&hook), ["f::d disabled [default]"]);
    let body = &hook.seen()[0].body;
    has(body, "f::d: active → disabled");
    has(body, "401");
    assert_eq!(hook.seen()[0].header("tags"), Some("warning"));
    env.run(&["--config", &cfg, "state", "enable", "f::d"]).ok();
    check(&env, &cfg, &["--notify", &url]).ok();
    assert_eq!(
        pushes(&hook),
        ["f::d disabled [default]", "Resolved: f::d active [low]"]
    );
    assert_eq!(hook.seen()[1].header("tags"), Some("white_check_mark"));
}

/// A provider whose every model fails is pushed at high priority at its
/// second run down, once; one with a single model too. Each one back is
/// a resolved push at low priority. Its paused models say nothing.
#[test]
fn a_provider_down_two_runs_pushes_high_and_its_recovery_low() {
    let env = Env::new();
    let fake = Fake::start(&env, &["a=e503,e503,e503,ok", "b=e503", "x=e503,e503,ok"]);
    let cfg = config(
        &env,
        &[
            fake.provider("f", "openai", &["a", "b"], ""),
            fake.provider("g", "openai", &["x"], ""),
        ],
    );
    let hook = PingServer::start();
    let url = ntfy_url(&hook);
    let json = json_url(&hook);
    let notify = ["--notify", url.as_str(), "--notify", json.as_str()];
    // Run 1: both down, once: nothing yet.
    check(&env, &cfg, &notify).ok();
    assert!(hook.seen().is_empty(), "{:?}", pushes(&hook));
    // Run 2: down two runs in a row: one message, both providers, high.
    check(&env, &cfg, &notify).ok();
    assert_eq!(pushes(&hook), ["2 providers down [high]"]);
    let got = messages_of(&hook);
    assert_eq!(got.len(), 1);
    assert_eq!(
        said(&got[0]),
        ["provider_down f up->down", "provider_down g up->down"]
    );
    assert_eq!(got[0]["priority"], "high");
    has(
        got[0]["changes"][0]["reason"].as_str().unwrap(),
        "all 2 probed models failed: http_error, 2 runs in a row",
    );
    // Run 3: g back; f still down, said once already.
    check(&env, &cfg, &notify).ok();
    let got = messages_of(&hook);
    assert_eq!(got.len(), 2);
    assert_eq!(said(&got[1]), ["provider_recovered g down->up"]);
    assert_eq!(got[1]["priority"], "low");
    // Run 4: f back (a answers; b, never alerted, stays down unsaid).
    check(&env, &cfg, &notify).ok();
    let got = messages_of(&hook);
    assert_eq!(got.len(), 3);
    assert_eq!(said(&got[2]), ["provider_recovered f down->up"]);
    assert_eq!(
        pushes(&hook),
        [
            "2 providers down [high]",
            "Resolved: g up [low]",
            "Resolved: f up [low]"
        ]
    );
}

/// The JSON messages among a hook's requests (the others are ntfy's).
fn messages_of(hook: &PingServer) -> Vec<Value> {
    hook.seen()
        .iter()
        .filter(|p| p.path == HOOK_PATH)
        .map(|p| serde_json::from_str(&p.body).unwrap())
        .collect()
}
