//! Degraded mode through the real binary (docs/routing.md): entry and exit
//! with their grace periods on the test clock, `/readyz` and
//! `/v1/providers`, the last resort's order and its evidence in the state
//! file, and `[route] last_resort_paused = false`.

use serde_json::Value;

use crate::support::{
    Env, Fake, Http, RouteServer, advance, clock_env, eventually, http, route_config,
};

/// Four providers: `a` (priority 4, the last) with two active models that
/// fail with a 500, and `b`, `c`, `d` (priorities 1 to 3) with one model
/// each that answers.
fn setup(env: &Env) -> (Fake, String) {
    let fake = Fake::start(env, &["fail1=e500", "fail2=e500"]);
    let cfg = route_config(
        env,
        &[
            fake.provider("a", "openai", &["fail1", "fail2"], "priority = 4"),
            fake.provider("b", "openai", &["ok"], "priority = 1"),
            fake.provider("c", "openai", &["ok"], "priority = 2"),
            fake.provider("d", "openai", &["ok"], "priority = 3"),
        ],
        "",
    );
    (fake, cfg)
}

fn state(env: &Env, cfg: &str, verb: &str, models: &[&str]) {
    for m in models {
        env.run(&["--config", cfg, "state", verb, m]).ok();
    }
}

fn readyz(srv: &RouteServer) -> Http {
    http("GET", &format!("{}/readyz", srv.url), &[], None)
}

/// Poll `/readyz` until `want` holds of (status code, body).
#[track_caller]
fn readyz_until(srv: &RouteServer, what: &str, want: impl Fn(u16, &Value) -> bool) -> Value {
    eventually(what, || {
        let r = readyz(srv);
        let body = r.json();
        if want(r.status, &body) {
            Ok(body)
        } else {
            Err(format!("{} {body}", r.status))
        }
    })
}

fn calls(fake: &Fake, model: &str) -> usize {
    fake.seen().iter().filter(|s| s.model() == model).count()
}

fn entry(env: &Env, key: &str) -> Value {
    let text = std::fs::read_to_string(env.state_file()).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    v[key].clone()
}

#[test]
fn degraded_mode_comes_and_goes_with_its_grace_and_paused_models_serve_as_a_last_resort() {
    let env = clock_env();
    let (fake, cfg) = setup(&env);
    let srv = RouteServer::start(&env, &cfg, &[]);
    let body = readyz_until(&srv, "ready with four active providers", |s, b| {
        s == 200 && b["status"] == "ready" && b["active_providers"] == 4
    });
    assert_eq!(body["providers"], 4, "{body}");

    // Three of four providers lose their only model: below half.
    state(&env, &cfg, "pause", &["b::ok", "c::ok", "d::ok"]);
    readyz_until(&srv, "the pauses seen, still ready", |s, b| {
        s == 200 && b["status"] == "ready" && b["active_providers"] == 1
    });
    let v = srv.providers();
    assert_eq!(v["mode"], "ready", "{v}");
    assert_eq!(v["mode_counts"]["changing_to"], "degraded", "{v}");
    assert_eq!(v["mode_counts"]["active_providers"], 1, "{v}");
    // Not before 60 s of the condition.
    advance(&env, 30);
    let r = readyz(&srv);
    assert_eq!(r.json()["status"], "ready", "{}", r.body);
    advance(&env, 61);
    let body = readyz_until(&srv, "degraded after 60 s", |s, b| {
        s == 200 && b["status"] == "degraded"
    });
    assert_eq!(body["providers"], 4, "{body}");
    assert_eq!(body["active_providers"], 1, "{body}");
    assert_eq!(body["last_resort_models"], 3, "{body}");
    assert_eq!(body["routable_models"], 2, "{body}");
    let v = srv.providers();
    assert_eq!(v["mode"], "degraded", "{v}");
    assert_eq!(v["mode_counts"]["providers"], 4, "{v}");

    // The active provider fails (a 500 passes over its other model): the
    // paused ones come after it, though their providers rank first, and
    // the first serves.
    let r = srv.chat("auto", false);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("x-routed-via"), "b::ok");
    assert_eq!(
        r.header("x-fallback-trail"),
        "a::fail1=server_error, b::ok=last-resort:paused"
    );
    assert_eq!(r.header("x-fallback-attempts"), "1");
    assert_eq!((calls(&fake, "fail1"), calls(&fake, "ok")), (1, 1));
    // The success is evidence: active again, by route's own write, and
    // no probe in the log.
    let e = eventually("b::ok active again", || {
        let e = entry(&env, "b::ok");
        if e["state"] == "active" {
            Ok(e)
        } else {
            Err(e.to_string())
        }
    });
    assert_eq!(e["reason"], "served in degraded mode", "{e}");
    assert_eq!(e["consecutive_failures"], 0, "{e}");
    assert!(e["recovered_at"].is_string(), "{e}");
    assert_eq!(e["since"], e["recovered_at"], "{e}");
    assert!(!env.log().exists(), "route wrote the health log");
    assert_eq!(entry(&env, "c::ok")["state"], "paused");

    // Another surface, pinned to a paused model (no active candidate at
    // all): the last resort serves it too.
    let r = http(
        "POST",
        &format!("{}/v1/responses", srv.url),
        &[("content-type", "application/json")],
        Some(r#"{"model": "c::ok", "input": "What is 2+2?"}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("x-routed-via"), "c::ok");
    assert_eq!(r.header("x-fallback-trail"), "c::ok=last-resort:paused");
    eventually("c::ok active again", || {
        let e = entry(&env, "c::ok");
        (e["reason"] == "served in degraded mode")
            .then_some(())
            .ok_or(e.to_string())
    });

    // Three of four active again: still degraded until 120 s have passed.
    readyz_until(&srv, "the recoveries seen", |_, b| {
        b["active_providers"] == 3
    });
    advance(&env, 61 + 60);
    let r = readyz(&srv);
    assert_eq!(r.json()["status"], "degraded", "{}", r.body);
    advance(&env, 61 + 121);
    readyz_until(&srv, "ready after 120 s", |s, b| {
        s == 200 && b["status"] == "ready" && b["active_providers"] == 3
    });
}

#[test]
fn with_nothing_active_the_paused_keep_it_ready_and_with_nothing_routable_it_is_503() {
    let env = clock_env();
    let (_fake, cfg) = setup(&env);
    state(
        &env,
        &cfg,
        "pause",
        &["a::fail1", "a::fail2", "b::ok", "c::ok", "d::ok"],
    );
    let srv = RouteServer::start(&env, &cfg, &[]);
    // No active model: 503 as before, until degraded mode begins.
    let body = readyz_until(&srv, "503 at first", |s, _| s == 503);
    assert_eq!(body["reason"], "no_active_models", "{body}");
    advance(&env, 61);
    let body = readyz_until(&srv, "degraded, serving from paused models", |s, b| {
        s == 200 && b["status"] == "degraded"
    });
    assert_eq!(body["reason"], "no_active_models", "{body}");
    assert_eq!(body["last_resort_models"], 5, "{body}");
    assert_eq!(body["active_providers"], 0, "{body}");
    // Nothing routable at all: 503 with the reason.
    state(
        &env,
        &cfg,
        "disable",
        &["a::fail1", "a::fail2", "b::ok", "c::ok", "d::ok"],
    );
    let body = readyz_until(&srv, "503 with everything disabled", |s, _| s == 503);
    assert_eq!(body["status"], "not_ready", "{body}");
    assert_eq!(body["reason"], "no_active_models", "{body}");
}

#[test]
fn last_resort_paused_false_never_tries_a_paused_model() {
    let mut env = clock_env();
    env.env("LLMPROBE_ROUTE_LAST_RESORT_PAUSED", "false");
    let (fake, cfg) = setup(&env);
    state(&env, &cfg, "pause", &["b::ok", "c::ok", "d::ok"]);
    let srv = RouteServer::start(&env, &cfg, &[]);
    srv.wait_grace_begun();
    advance(&env, 61);
    let body = readyz_until(&srv, "degraded", |s, b| {
        s == 200 && b["status"] == "degraded"
    });
    assert_eq!(body["last_resort_models"], 0, "{body}");
    let r = srv.chat("auto", false);
    assert_eq!(r.status, 502, "{}", r.body);
    assert_eq!(r.header("x-fallback-trail"), "a::fail1=server_error");
    assert_eq!(calls(&fake, "ok"), 0);
    assert_eq!(entry(&env, "b::ok")["state"], "paused");
    // Pinned to a paused model: refused as before.
    let r = srv.chat("b::ok", false);
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(r.json()["error"]["code"], "no_active_models");
}

/// A paused model whose pause came with a wait (`retry_at`) still to come
/// is passed over by the last resort (`cooldown:retry_at` in the trail),
/// and not counted as usable by `/readyz`.
#[test]
fn the_last_resort_waits_for_a_paused_models_retry_at() {
    let env = clock_env();
    let (fake, cfg) = setup(&env);
    let paused = |retry_at: Option<String>| {
        let mut e = serde_json::json!({"state": "paused", "reason": "rate_limit",
            "since": crate::support::ago(0), "consecutive_failures": 1});
        if let Some(r) = retry_at {
            e["retry_at"] = r.into();
        }
        e
    };
    env.write(
        "stats/model_state.json",
        serde_json::json!({
            "b::ok": paused(Some(crate::support::ago(-3600))),
            "c::ok": paused(None),
            "d::ok": paused(None),
        })
        .to_string(),
    );
    let srv = RouteServer::start(&env, &cfg, &[]);
    srv.wait_grace_begun();
    advance(&env, 61);
    let body = readyz_until(&srv, "degraded", |s, b| {
        s == 200 && b["status"] == "degraded"
    });
    assert_eq!(body["last_resort_models"], 2, "{body}");
    let r = srv.chat("auto", false);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("x-routed-via"), "c::ok");
    assert_eq!(
        r.header("x-fallback-trail"),
        "a::fail1=server_error, b::ok=cooldown:retry_at, c::ok=last-resort:paused"
    );
    assert_eq!(calls(&fake, "ok"), 1);
    assert_eq!(entry(&env, "b::ok")["state"], "paused");
}
