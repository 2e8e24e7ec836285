//! Routing by need through the real binary: the three bands (known able,
//! unknown, known unable) from `stats/capabilities.json` and the refusals
//! route learns, context windows (catalog and learned) and the 400 that
//! names the largest, and what `/v1/models`, `/v1/providers` and
//! `route --status` show of them. The verdicts file is written here, as
//! `check` would write it; which upstream received each request is read
//! from `X-Routed-Via`, the trail and the fake's own request log.

use serde_json::{Value, json};

use crate::support::Test;
use crate::support::{
    Env, Fake, Http, RouteServer, advance, eventually, http, provider_view, route_config,
};

/// A tools request, in conversation `session` (so that affinity plays no
/// part).
fn tools(srv: &RouteServer, session: &str) -> Http {
    let body = json!({
        "model": "auto",
        "messages": [{"role": "user", "content": "What is 7 + 7? Use the tool."}],
        "tools": [{"type": "function", "function": {"name": "add", "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}
        }}}],
    });
    post(srv, "/v1/chat/completions", &body, session)
}

fn post(srv: &RouteServer, path: &str, body: &Value, session: &str) -> Http {
    http(
        "POST",
        &format!("{}{path}", srv.url),
        &[
            ("content-type", "application/json"),
            ("anthropic-version", "2023-06-01"),
            ("x-session-id", session),
        ],
        Some(&body.to_string()),
    )
}

fn chat(srv: &RouteServer, content: &str, session: &str) -> Http {
    let body = json!({"model": "auto", "messages": [{"role": "user", "content": content}]});
    post(srv, "/v1/chat/completions", &body, session)
}

/// Write `stats/capabilities.json` atomically, as `check` does.
fn write_caps(env: &Env, v: &Value) {
    std::fs::create_dir_all(env.stats()).unwrap();
    let tmp = env.stats().join("capabilities.json.tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(v).unwrap()).unwrap();
    std::fs::rename(&tmp, env.stats().join("capabilities.json")).unwrap();
}

/// An RFC 3339 time `secs` from the wall clock now.
fn ts(secs: i64) -> String {
    (chrono::Utc::now() + chrono::TimeDelta::seconds(secs))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Requests the fake received for `model` that declared tools.
fn tool_calls(fake: &Fake, model: &str) -> usize {
    fake.seen()
        .iter()
        .filter(|s| s.model() == model)
        .filter(|s| s.body.as_ref().is_some_and(|b| b.get("tools").is_some()))
        .count()
}

#[test]
fn tools_go_to_the_known_able_first_then_the_unknown_and_never_the_known_unable() {
    let (env, fake, cfg) = Test::new()
        .provider("a", "openai", &["ok"], "priority = 1")
        .provider("b", "openai", &["ok"], "priority = 2")
        .provider("c", "openai", &["no-tools"], "priority = 3")
        .provider("d", "openai", &["ok"], "priority = 4")
        .config();
    write_caps(
        &env,
        &json!({
            "a::ok": {"tools": {"verdict": "no", "seen": ts(-3600), "reason": "wrong_answer: text"}},
            "c::no-tools": {"tools": {"verdict": "yes", "seen": ts(-3600)}},
            "d::ok": {"tools": {"verdict": "yes", "seen": ts(-3600)}},
        }),
    );
    let srv = RouteServer::start(&env, &cfg, &[]);

    // Known able first (c, then d), before b, which nobody knows about;
    // a, known unable, is skipped. c refuses tools after all.
    let r = tools(&srv, "s1");
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("x-routed-via"), "d::ok");
    assert_eq!(
        r.header("x-fallback-trail"),
        "a::ok=skip:tools, c::no-tools=unsupported"
    );
    assert_eq!(r.header("x-fallback-attempts"), "1", "a skip is no attempt");
    assert_eq!(r.json()["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(
        (tool_calls(&fake, "no-tools"), tool_calls(&fake, "ok")),
        (1, 1)
    );

    // c's refusal is newer than its probe: skipped from now on.
    let r = tools(&srv, "s2");
    assert_eq!(r.header("x-routed-via"), "d::ok");
    assert_eq!(
        r.header("x-fallback-trail"),
        "a::ok=skip:tools, c::no-tools=skip:tools"
    );
    assert_eq!(r.header("x-fallback-attempts"), "0");
    assert_eq!(
        (tool_calls(&fake, "no-tools"), tool_calls(&fake, "ok")),
        (1, 2)
    );

    // A plain request keeps today's order: a first.
    let r = chat(&srv, "What is 7 + 7?", "s3");
    assert_eq!(r.header("x-routed-via"), "a::ok");
    assert_eq!(r.header("x-fallback-trail"), "none");

    // With d known unable too, the unknown b serves.
    advance(&env, 120);
    write_caps(
        &env,
        &json!({
            "a::ok": {"tools": {"verdict": "no", "seen": ts(-3600)}},
            "c::no-tools": {"tools": {"verdict": "yes", "seen": ts(-3600)}},
            "d::ok": {"tools": {"verdict": "no", "seen": ts(60)}},
        }),
    );
    eventually("b, unknown, serves once d is known unable", || {
        let r = tools(&srv, "s4");
        match r.header("x-routed-via") {
            "b::ok" => Ok(r),
            via => Err(format!("via {via}: {}", r.header("x-fallback-trail"))),
        }
    });

    // A probe of c newer than the refusal lifts it: c is tried again (and
    // refuses again, so it is marked again; b serves).
    write_caps(
        &env,
        &json!({
            "a::ok": {"tools": {"verdict": "no", "seen": ts(-3600)}},
            "c::no-tools": {"tools": {"verdict": "yes", "seen": ts(60)}},
            "d::ok": {"tools": {"verdict": "no", "seen": ts(60)}},
        }),
    );
    let r = eventually("c tried again after a newer probe", || {
        let r = tools(&srv, "s5");
        let trail = r.header("x-fallback-trail").to_string();
        if trail.contains("c::no-tools=unsupported") {
            Ok(r)
        } else {
            Err(trail)
        }
    });
    assert_eq!(r.header("x-routed-via"), "b::ok");
    assert_eq!(tool_calls(&fake, "no-tools"), 2);
}

#[test]
fn a_long_prompt_goes_past_a_window_too_small_and_none_fitting_names_the_largest() {
    let (env, fake, cfg) = Test::new()
        .provider("s", "openai", &["context-window:1000"], "priority = 1")
        .provider("l", "anthropic", &["context-window:3000"], "priority = 2")
        .config();
    let srv = RouteServer::start(&env, &cfg, &[]);
    let medium = format!("{} What is 7 + 7?", "word ".repeat(1600));
    // s says its window is 1000 tokens: learned, and l, whose window fits,
    // serves.
    let r = chat(&srv, &medium, "m1");
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("x-routed-via"), "l::context-window:3000");
    assert_eq!(
        r.header("x-fallback-trail"),
        "s::context-window:1000=context_length"
    );
    assert_eq!(r.header("x-fallback-attempts"), "1");
    // Learned: the next long prompt is not sent to s.
    let r = chat(&srv, &medium, "m2");
    assert_eq!(r.header("x-routed-via"), "l::context-window:3000");
    assert_eq!(
        r.header("x-fallback-trail"),
        "s::context-window:1000=skip:context"
    );
    assert_eq!(r.header("x-fallback-attempts"), "0");
    let small_calls = fake
        .seen()
        .iter()
        .filter(|s| s.model() == "context-window:1000")
        .count();
    assert_eq!(small_calls, 1);

    // Longer than either: l says 3000, and none is left.
    let long = format!("{} What is 7 + 7?", "word ".repeat(4000));
    let r = chat(&srv, &long, "l1");
    assert_eq!(r.status, 400, "{}", r.body);
    let e = &r.json()["error"];
    assert_eq!(e["code"], "context_length_exceeded", "{}", r.body);
    let message = e["message"].as_str().unwrap();
    assert!(
        message.starts_with("no active model can hold a prompt of about 50")
            && message.ends_with(
                " tokens; the largest context window among them is 3000 tokens (l::context-window:3000)"
            ),
        "{message}"
    );
    assert_eq!(
        r.header("x-fallback-trail"),
        "s::context-window:1000=skip:context, l::context-window:3000=context_length"
    );
    // The same through the Anthropic surface, in its shape: both windows
    // known now, nothing is sent.
    let before = fake.seen().len();
    let body = json!({"model": "auto", "max_tokens": 64,
        "messages": [{"role": "user", "content": long}]});
    let r = post(&srv, "/v1/messages", &body, "l2");
    assert_eq!(r.status, 400, "{}", r.body);
    let v = r.json();
    assert_eq!(v["type"], "error", "{v}");
    assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
    assert_eq!(v["error"]["message"], message, "{v}");
    assert_eq!(fake.seen().len(), before, "nothing sent");

    // The learned windows, with their source and expiry.
    let models = http("GET", &format!("{}/v1/models", srv.url), &[], None).json();
    let entry = |id: &str| {
        models["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no {id} in {models}"))
    };
    let l = entry("l::context-window:3000");
    assert_eq!(
        (&l["context_length"], &l["context_length_source"]),
        (&json!(3000), &json!("learned")),
        "{l}"
    );
    let providers = srv.providers();
    let p = provider_view(&providers, "l");
    assert_eq!(p["windows"][0]["tokens"], 3000, "{p}");
    assert_eq!(p["windows"][0]["source"], "learned", "{p}");
    assert!(p["windows"][0]["until"].is_string(), "{p}");
    assert_eq!(p["learned"][0]["model"], "context-window:3000", "{p}");
    assert_eq!(p["learned"][0]["what"], "context_window", "{p}");
    assert_eq!(p["learned"][0]["limit"], 3000, "{p}");
    // route --status reads what the server saves (within a second of a
    // change, and at shutdown).
    let v = eventually("the server saves what it learned", || {
        let out = env
            .run(&["--config", &cfg, "route", "--status", "--json"])
            .ok()
            .stdout;
        let v: Value = serde_json::from_str(&out).unwrap();
        let windows = provider_view(&v, "s")["windows"].clone();
        if windows.is_array() { Ok(v) } else { Err(out) }
    });
    let s = provider_view(&v, "s");
    assert_eq!(s["windows"][0]["tokens"], 1000, "{s}");
    assert_eq!(s["windows"][0]["source"], "learned", "{s}");
    drop(srv);
    let text = env
        .run(&["--config", &cfg, "route", "--status"])
        .ok()
        .stdout;
    assert!(
        text.contains("s::context-window:1000") && text.contains("context window 1000 tokens"),
        "{text}"
    );
}

#[test]
fn models_list_the_context_length_and_capabilities_clients_read() {
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let cfg = route_config(
        &env,
        &[
            fake.provider(
                "a",
                "openai",
                &["ok"],
                "model_info = { \"ok\" = { context_window = 8192 } }",
            ),
            fake.provider("b", "openai", &["ok"], ""),
        ],
        "",
    );
    write_caps(
        &env,
        &json!({"a::ok": {
            "tools": {"verdict": "yes", "seen": ts(-60)},
            "json": {"verdict": "no", "seen": ts(-60), "reason": "wrong_answer: not JSON"},
        }}),
    );
    let srv = RouteServer::start(&env, &cfg, &[]);
    let v = http("GET", &format!("{}/v1/models", srv.url), &[], None).json();
    let data = v["data"].as_array().unwrap();
    let a = data.iter().find(|m| m["id"] == "a::ok").unwrap();
    assert_eq!(a["object"], "model");
    assert_eq!(a["owned_by"], "a");
    assert_eq!(a["context_length"], 8192);
    assert_eq!(a["context_length_source"], "catalog");
    assert_eq!(
        a["capabilities"],
        json!({"tools": "yes", "json": "no", "vision": "unknown"})
    );
    assert_eq!(a["supported_parameters"], json!(["tools", "tool_choice"]));
    let b = data.iter().find(|m| m["id"] == "b::ok").unwrap();
    assert!(b.get("context_length").is_none(), "unknown: omitted: {b}");
    assert_eq!(
        b["capabilities"],
        json!({"tools": "unknown", "json": "unknown", "vision": "unknown"})
    );
    assert_eq!(b["supported_parameters"], json!([]));
    let auto = data.iter().find(|m| m["id"] == "auto").unwrap();
    assert!(auto.get("capabilities").is_none(), "{auto}");
    // One model carries the same; Anthropic's shape stays its own.
    let one = http("GET", &format!("{}/v1/models/a::ok", srv.url), &[], None).json();
    assert_eq!(one["context_length"], 8192, "{one}");
    assert_eq!(one["capabilities"]["tools"], "yes", "{one}");
    let anth = http(
        "GET",
        &format!("{}/v1/models", srv.url),
        &[("anthropic-version", "2023-06-01")],
        None,
    )
    .json();
    let a = anth["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "a::ok")
        .unwrap();
    assert_eq!(a["type"], "model");
    assert!(a.get("context_length").is_none(), "{a}");
}

#[test]
fn a_rewritten_verdicts_file_is_picked_up_and_a_broken_one_changes_nothing() {
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let cfg = route_config(
        &env,
        &[
            // b first by priority: only a kept "yes" puts a before it.
            fake.provider("a", "openai", &["ok"], "priority = 2"),
            fake.provider("b", "openai", &["ok"], "priority = 1"),
        ],
        "",
    );
    write_caps(
        &env,
        &json!({"a::ok": {"tools": {"verdict": "no", "seen": ts(-60)}}}),
    );
    let srv = RouteServer::start(&env, &cfg, &[]);
    assert_eq!(tools(&srv, "r1").header("x-routed-via"), "b::ok");
    write_caps(
        &env,
        &json!({"a::ok": {"tools": {"verdict": "yes", "seen": ts(-30)}}}),
    );
    eventually("the server reads the rewritten verdicts", || {
        match tools(&srv, "r2").header("x-routed-via") {
            "a::ok" => Ok(()),
            via => Err(format!("via {via}")),
        }
    });
    // A file that does not parse: shown, left alone, and routing goes on
    // with the verdicts read before.
    // Written whole (renamed into place), so the server never reads half.
    let path = env.stats().join("capabilities.json");
    let tmp = env.stats().join("capabilities.json.tmp");
    std::fs::write(&tmp, "{\"a::ok\": {\"tools\": {\"verdict\": \"maybe\"}}}").unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    let problem = eventually("the broken file is shown", || {
        let v = srv.providers();
        match v["capabilities"]["error"].as_str() {
            Some(e) => Ok(e.to_string()),
            None => Err(v["capabilities"].to_string()),
        }
    });
    assert!(problem.contains("capabilities.json"), "{problem}");
    assert_eq!(tools(&srv, "r3").header("x-routed-via"), "a::ok");
    assert!(std::fs::read_to_string(&path).unwrap().contains("maybe"));
    // The one-shot command routes on it too, and says so once.
    let r = env.run(&["--config", &cfg, "route", "What is 7 + 7?"]).ok();
    assert_eq!(r.stdout.trim(), "14");
    assert_eq!(
        r.stderr.matches("capabilities.json").count(),
        1,
        "{}",
        r.stderr
    );
    let status = env.run(&["--config", &cfg, "route", "--status"]).ok();
    assert!(
        status.stdout.contains("capabilities: ") && status.stdout.contains("capabilities.json"),
        "{}",
        status.stdout
    );
    assert!(std::fs::read_to_string(&path).unwrap().contains("maybe"));
}
