//! `route --serve`'s alerts through the real binary (docs/alerts.md,
//! "Route-side alerts"): a day-long bench said once and resolved when it
//! ends, degraded mode entered and left, an unreachable channel, and no
//! key or webhook path anywhere. Time is route's test clock: each step
//! moves it past the grace periods and the 3 s window, and the test polls
//! for what the server does then.

use serde_json::Value;

use crate::support::{
    Env, Fake, PingServer, RouteServer, advance, clock_env, closed_port, eventually, route_config,
};

/// The path of the webhook: a secret, which no output may show.
const HOOK_PATH: &str = "/hook/s3cr3t-route-9Zk";
/// The key of provider `f`, which no output may show.
const KEY: &str = "sk-route-alerts-0123456789abcdef";

/// Every message the webhook got, as JSON.
fn messages(hook: &PingServer) -> Vec<Value> {
    hook.seen()
        .iter()
        .map(|p| {
            assert_eq!((p.method.as_str(), p.path.as_str()), ("POST", HOOK_PATH));
            assert!(!p.body.contains(KEY), "the key in {}", p.body);
            serde_json::from_str(&p.body).unwrap_or_else(|e| panic!("{e}: {}", p.body))
        })
        .collect()
}

/// Wait until the webhook has `n` messages; all of them.
#[track_caller]
fn until_messages(hook: &PingServer, n: usize) -> Vec<Value> {
    eventually(&format!("{n} messages"), || {
        let m = messages(hook);
        if m.len() >= n {
            Ok(m)
        } else {
            Err(format!("{m:?}"))
        }
    })
}

/// Provider `f` (first by priority, one key) whose model answers 403, and
/// `g`, whose model answers: every request is served, by `g`.
fn bench_setup(env: &mut Env) -> (Fake, String) {
    env.env("F_KEY", KEY);
    let fake = Fake::start(env, &[]);
    let cfg = route_config(
        env,
        &[
            fake.provider(
                "f",
                "openai",
                &["forbidden"],
                "priority = 1\napi_key_env = \"F_KEY\"",
            ),
            fake.provider("g", "openai", &["ok"], "priority = 2"),
        ],
        "",
    );
    (fake, cfg)
}

/// Set route's clock `secs` from now (negative: back), as `advance` does
/// forward: a window opened at a clock an hour back cannot pass by itself
/// while the test looks.
fn set_clock(env: &Env, secs: i64) {
    std::fs::write(env.path().join("clock"), secs.to_string()).unwrap();
}

#[track_caller]
fn no_secret_in(text: &str) {
    for bad in [KEY, "s3cr3t"] {
        assert!(!text.contains(bad), "{bad} in:\n{text}");
    }
}

#[test]
fn a_day_long_bench_alerts_once_and_its_end_resolves_it() {
    let mut env = clock_env();
    let (fake, cfg) = bench_setup(&mut env);
    let hook = PingServer::start();
    let url = format!("json+{}{HOOK_PATH}", hook.url.trim_end_matches('/'));
    let log = env.path().join("route.err");
    set_clock(&env, -3600);
    let srv = RouteServer::start_logged(&env, &cfg, &["--notify", &url], &log);

    // A burst: the first request meets the 403 and benches f's key for a
    // day; every one is served by g.
    for _ in 0..5 {
        let r = srv.chat("auto", false);
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.header("x-routed-via"), "g::ok");
    }
    let forbidden = fake
        .seen()
        .iter()
        .filter(|s| s.model() == "forbidden")
        .count();
    assert_eq!(forbidden, 1, "the bench keeps f out");
    let v = srv.providers();
    assert_eq!(
        v["alerts"]["channels"],
        serde_json::json!([format!("json+{}", hook.url.trim_end_matches('/'))]),
        "{v}"
    );
    assert_eq!(v["alerts"]["pending"], 1, "{v}");
    // To the second, as the alert says it.
    let until = v["providers"][0]["cooldowns"][0]["until"]
        .as_str()
        .unwrap_or_else(|| panic!("{v}"))[..19]
        .to_string();

    // Past the window: one message, one change.
    advance(&env, 0);
    let got = until_messages(&hook, 1);
    let c = &got[0]["changes"][0];
    assert_eq!(got[0]["changes"].as_array().unwrap().len(), 1, "{got:?}");
    assert_eq!(c["kind"], "benched", "{c}");
    assert_eq!(c["provider"], "f");
    assert_eq!(c["model"], Value::Null);
    assert_eq!(c["reason"], "forbidden");
    assert_eq!(c["from"], "up");
    assert_eq!(c["to"], "benched");
    assert_eq!(c["until"], format!("{until}Z"), "{c}");
    let key = c["key"].as_str().unwrap();
    assert!(key.starts_with("#0:"), "{key}");
    assert!(c["error"].as_str().unwrap().contains("403"), "{c}");
    let id = c["id"].as_str().unwrap().to_string();
    assert!(id.starts_with(&format!("f{key}@")), "{id}");
    let title = got[0]["title"].as_str().unwrap();
    assert_eq!(title, format!("f{key} benched"));

    // More requests, later: the bench stands, nothing new is said.
    for _ in 0..3 {
        assert_eq!(srv.chat("auto", false).status, 200);
    }
    advance(&env, 60);

    // A day later the bench has ended: a resolved message, linked to the
    // alert, and the only other message sent.
    set_clock(&env, 86_400 - 3600 + 60);
    eventually("the bench's end seen", || {
        let v = srv.providers();
        match v["alerts"]["pending"] == 1 || messages(&hook).len() > 1 {
            true => Ok(()),
            false => Err(v.to_string()),
        }
    });
    advance(&env, 86_400);
    let got = until_messages(&hook, 2);
    assert_eq!(got.len(), 2, "{got:?}");
    let c = &got[1]["changes"][0];
    assert_eq!(c["kind"], "bench_ended", "{c}");
    assert_eq!(c["resolves"], id.as_str());
    assert_eq!(c["reason"], "its bench ended");
    assert!(got[1]["title"].as_str().unwrap().starts_with("Resolved: "));

    drop(srv);
    let err = std::fs::read_to_string(&log).unwrap();
    assert!(!err.contains("warning"), "{err}");
    no_secret_in(&err);
}

#[test]
fn degraded_mode_entered_alerts_once_and_leaving_it_resolves_it() {
    let mut env = clock_env();
    let fake = Fake::start(&env, &[]);
    let cfg = route_config(
        &env,
        &["b", "c", "d", "e"].map(|p| fake.provider(p, "openai", &["ok"], "")),
        "",
    );
    let hook = PingServer::start();
    env.env(
        "LLMPROBE_NOTIFY",
        &format!("json+{}{HOOK_PATH}", hook.url.trim_end_matches('/')),
    );
    let srv = RouteServer::start(&env, &cfg, &[]);
    let state = |verb: &str| {
        for m in ["b::ok", "c::ok", "d::ok"] {
            env.run(&["--config", &cfg, "state", verb, m]).ok();
        }
    };
    let mode_until = |what: &str, want: &str, changing: bool| {
        eventually(what, || {
            let v = srv.providers();
            let ok = v["mode"] == want && v["mode_counts"]["changing_to"].is_string() == changing;
            if ok { Ok(v) } else { Err(v.to_string()) }
        })
    };

    // Three of four providers paused: degraded after its grace.
    state("pause");
    mode_until("the pauses seen", "ready", true);
    advance(&env, 61);
    mode_until("degraded", "degraded", false);
    advance(&env, 70);
    let got = until_messages(&hook, 1);
    let c = &got[0]["changes"][0];
    assert_eq!(c["kind"], "degraded", "{c}");
    assert_eq!(c["provider"], Value::Null, "{c}");
    assert_eq!(
        (c["from"].as_str(), c["to"].as_str()),
        (Some("ready"), Some("degraded"))
    );
    assert_eq!(
        c["reason"],
        "1 of 4 providers have an active model, below 0.5"
    );
    assert_eq!(got[0]["title"], "route degraded");
    let id = c["id"].as_str().unwrap().to_string();

    // Back: ready after its grace, and a resolved message.
    state("enable");
    mode_until("the resumes seen", "degraded", true);
    advance(&env, 70 + 121);
    mode_until("ready", "ready", false);
    advance(&env, 70 + 131);
    let got = until_messages(&hook, 2);
    assert_eq!(got.len(), 2, "{got:?}");
    let c = &got[1]["changes"][0];
    assert_eq!(c["kind"], "ready", "{c}");
    assert_eq!(c["resolves"], id.as_str());
    assert_eq!(got[1]["title"], "Resolved: route ready");
}

#[test]
fn an_unreachable_channel_costs_one_warning_and_requests_are_served() {
    let mut env = clock_env();
    let (_fake, cfg) = bench_setup(&mut env);
    let closed = closed_port();
    let url = format!("json+{closed}{HOOK_PATH}");
    let log = env.path().join("route.err");
    let srv = RouteServer::start_logged(&env, &cfg, &["--notify", &url], &log);
    assert_eq!(srv.chat("auto", false).status, 200);
    advance(&env, 5);
    let label = format!("json+{closed}");
    let line = format!("warning: notify: the alert to {label} failed (");
    eventually("the warning", || {
        let err = std::fs::read_to_string(&log).unwrap();
        match err.contains(&line) {
            true => Ok(()),
            false => Err(err),
        }
    });
    // Requests go on being served.
    for _ in 0..3 {
        assert_eq!(srv.chat("auto", false).status, 200);
    }
    drop(srv);
    let err = std::fs::read_to_string(&log).unwrap();
    assert_eq!(err.matches(&line).count(), 1, "{err}");
    let warning = err.lines().find(|l| l.contains(&line)).unwrap();
    assert!(warning.ends_with("; routing goes on"), "{warning}");
    no_secret_in(&err);
}

/// What waits for its window at SIGTERM is sent before the server exits.
#[cfg(unix)]
#[test]
fn a_pending_alert_is_sent_at_shutdown() {
    let mut env = clock_env();
    let (_fake, cfg) = bench_setup(&mut env);
    let hook = PingServer::start();
    let url = format!("json+{}{HOOK_PATH}", hook.url.trim_end_matches('/'));
    let srv = RouteServer::start(&env, &cfg, &["--notify", &url]);
    // Route's clock an hour back: the window cannot pass before the end.
    std::fs::write(env.path().join("clock"), "-3600").unwrap();
    assert_eq!(srv.chat("auto", false).status, 200);
    assert_eq!(srv.providers()["alerts"]["pending"], 1);
    assert!(messages(&hook).is_empty(), "the window is still open");
    assert_eq!(srv.terminate(), 0);
    let got = messages(&hook);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["changes"][0]["kind"], "benched");
}
