//! `route --serve --shared-state`: two instances, one Redis, one budget,
//! and status displays that show it. Each test starts its own
//! `redis-server` on a free loopback port ([`Redis`]). They run in the
//! `external` binary, which reports them as ignored where no redis-server
//! is installed (see `support::need`).

use serde_json::Value;

use crate::support::need::Need;
use crate::support::{
    Env, Fake, Redis, RouteServer, advance, chat_body, clock_env as env, eventually, http,
    provider_view, usage_line,
};

/// A config of `tables` only, and two instances sharing `redis`.
fn two_instances(
    env: &Env,
    redis: &Redis,
    tables: &[String],
) -> (String, RouteServer, RouteServer) {
    let cfg = env
        .write(
            "llmprobe.toml",
            format!(
                "include_default_catalog = false\n[defaults]\ntimeout_secs = 10\n\n{}",
                tables.join("\n")
            ),
        )
        .display()
        .to_string();
    let url = redis.url();
    let args = ["--shared-state", url.as_str()];
    let a = RouteServer::start(env, &cfg, &args);
    let b = RouteServer::start(env, &cfg, &args);
    (cfg, a, b)
}

fn chat(srv: &RouteServer, model: &str) -> crate::support::Http {
    http(
        "POST",
        &format!("{}/v1/chat/completions", srv.url),
        &[("content-type", "application/json")],
        Some(&chat_body(model, false)),
    )
}

fn get(srv: &RouteServer, path: &str) -> crate::support::Http {
    let r = http("GET", &format!("{}{path}", srv.url), &[], None);
    assert!([200, 503].contains(&r.status), "{path}: {}", r.status);
    r
}

fn shared_state(srv: &RouteServer) -> String {
    let r = get(srv, "/readyz");
    r.json()["shared_state"].as_str().unwrap_or("").to_string()
}

/// Poll until every instance's `/readyz` says it shares its state again
/// (exactly `ok`: "broken pipe" contains "ok" too).
fn wait_until_shared(servers: &[&RouteServer]) {
    for s in servers {
        eventually("shared_state \"ok\"", || {
            let got = shared_state(s);
            if got == "ok" { Ok(()) } else { Err(got) }
        });
    }
}

/// `GET /v1/providers`.
fn providers(srv: &RouteServer) -> Value {
    get(srv, "/v1/providers").json()
}

fn two_instances_share_one_budget_and_cooldowns_and_survive_redis_going_away() {
    let mut redis = Redis::start();
    let env = env();
    let fake = Fake::start(&env, &[]);
    let tables = [
        fake.provider("a", "openai", &["ok"], "limits = { rpm = 10 }"),
        fake.provider("c", "openai", &["rate-limit"], ""),
    ];
    let (_, a, b) = two_instances(&env, &redis, &tables);
    let calls = |m: &str| fake.seen().iter().filter(|s| s.model() == m).count();

    // 40 requests alternating within one minute of route's time: the
    // upstream gets exactly its 10.
    let mut served = 0;
    for i in 0..40 {
        let srv = if i % 2 == 0 { &a } else { &b };
        let r = chat(srv, "a::ok");
        match r.status {
            200 => served += 1,
            429 => assert!(
                r.header("x-fallback-trail").contains("limit:rpm"),
                "{:?}",
                r.headers
            ),
            s => panic!("status {s}: {}", r.body),
        }
    }
    assert_eq!(served, 10);
    assert_eq!(calls("ok"), 10);
    assert!(!env.stats().join("route_state.json").exists());

    // A cooldown set through one instance holds on the other at once.
    chat(&a, "c::rate-limit");
    assert_eq!(calls("rate-limit"), 1);
    let r = chat(&b, "c::rate-limit");
    assert!(
        r.header("x-fallback-trail").contains("cooldown:rate_limit"),
        "{:?}",
        r.headers
    );
    assert_eq!(calls("rate-limit"), 1);
    assert_eq!(shared_state(&a), "ok");

    // Redis goes away: both keep serving from local state.
    redis.kill();
    advance(&env, 61);
    for i in 0..6 {
        let srv = if i % 2 == 0 { &a } else { &b };
        let r = chat(srv, "a::ok");
        assert!([200, 429].contains(&r.status), "{}: {}", r.status, r.body);
    }
    assert!(calls("ok") > 10);
    for s in [&a, &b] {
        // The first request that failed to reach Redis switched to local.
        let got = shared_state(s);
        assert!(got.contains("unavailable"), "{got}");
        assert!(got.contains("serving from local state"), "{got}");
    }
    // It comes back: both pick it up again, and share one budget again.
    redis.restart();
    wait_until_shared(&[&a, &b]);
    advance(&env, 200);
    let before = calls("ok");
    let mut served = 0;
    for i in 0..14 {
        let srv = if i % 2 == 0 { &a } else { &b };
        if chat(srv, "a::ok").status == 200 {
            served += 1;
        }
    }
    assert_eq!(served, 10);
    assert_eq!(calls("ok") - before, 10);
}

fn learned_limits_and_token_corrections_reach_the_other_instance() {
    let redis = Redis::start();
    let mut env = env();
    env.env("K1", "sk-shared-secret-0123456789");
    // `learn` answers with headers announcing 3 requests a minute.
    let fake = Fake::start(&env, &["learn=rpm-headers:3"]);
    let tables = [
        // What a request without max_tokens reserves (4,096 by default).
        "[route]\nreserve_max_tokens = 1024\n".to_string(),
        fake.provider("l", "openai", &["learn"], ""),
        fake.provider(
            "t",
            "openai",
            &["ok"],
            "api_key_env = \"K1\"\nlimits = { tpm = 3000, tpd = 100000 }",
        ),
    ];
    let (_, a, b) = two_instances(&env, &redis, &tables);
    let calls = |m: &str| fake.seen().iter().filter(|s| s.model() == m).count();

    // Learned limits. Nothing is configured on l: A's first answer teaches
    // rpm = 3, and B, which has sent nothing, comes to know it.
    assert_eq!(chat(&a, "l::learn").status, 200);
    let learned = eventually("B knows the learned rpm", || {
        let v = providers(&b);
        match usage_line(&v, "l", "rpm") {
            Some(u) if u["limit"] == 3 && u["learned"] == true => Ok(u.clone()),
            _ => Err(provider_view(&v, "l").to_string()),
        }
    });
    assert_eq!(learned["scope"], "l::learn", "{learned}");
    // Counted from now on, by both: B takes the three, then is refused
    // without sending, and so is A.
    for _ in 0..3 {
        let r = chat(&b, "l::learn");
        assert_eq!(r.status, 200, "{}", r.body);
    }
    for srv in [&b, &a] {
        let r = chat(srv, "l::learn");
        assert_eq!(r.status, 429, "{}", r.body);
        assert!(
            r.header("x-fallback-trail").contains("l::learn=limit:rpm"),
            "{:?}",
            r.headers
        );
    }
    assert_eq!(calls("learn"), 4, "one by A, three by B");
    let v = providers(&a);
    let u = usage_line(&v, "l", "rpm").unwrap();
    assert_eq!((&u["used"], &u["limit"]), (&3.into(), &3.into()), "{u}");

    // Token corrections. A request counts as ~1,035 tokens (its characters
    // ÷ 4 plus reserve_max_tokens) until the upstream says what it used, far less: with
    // tpm = 3000 only the corrections let a third request through. Each
    // one lands in Redis just after the reply, so the other instance is
    // polled until it shows the corrected total.
    let mut total = 0;
    for i in 0..5 {
        let (srv, other) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
        let r = chat(srv, "t::ok");
        assert_eq!(r.status, 200, "request {i}: {}", r.body);
        let used = r.json()["usage"]["total_tokens"].as_u64().unwrap();
        assert!(used < 100, "{used}");
        total += used;
        eventually("the other instance sees the corrected tokens", || {
            let v = providers(other);
            let seen = |kind| usage_line(&v, "t", kind).map(|u| u["used"].clone());
            if seen("tpm") == Some(total.into()) && seen("tpd") == Some(total.into()) {
                Ok(())
            } else {
                Err(provider_view(&v, "t")["usage"].to_string())
            }
        });
    }
    assert_eq!(calls("ok"), 5);
    let v = providers(&b);
    assert_eq!(v["state"], "redis", "{v}");
    assert!(!v.to_string().contains("shared-secret"), "{v}");
    let tpm = usage_line(&v, "t", "tpm").unwrap();
    assert!(
        tpm["scope"].as_str().unwrap().starts_with("t#key0:"),
        "{tpm}"
    );
    assert_eq!(
        (&tpm["limit"], &tpm["learned"]),
        (&3000.into(), &false.into())
    );
}

fn what_an_upstream_said_a_model_cannot_take_reaches_the_other_instances() {
    let redis = Redis::start();
    let env = env();
    let fake = Fake::start(&env, &[]);
    let cfg = env
        .write(
            "llmprobe.toml",
            format!(
                "include_default_catalog = false\n[defaults]\ntimeout_secs = 10\n\n{}\n{}",
                fake.provider("a", "openai", &["context-length"], "priority = 1"),
                fake.provider("b", "openai", &["ok"], "priority = 2"),
            ),
        )
        .display()
        .to_string();
    let url = redis.url();
    let args = ["--shared-state", url.as_str()];
    // About 10,000 tokens: over the 8,192 the fake's 400 states.
    let long = serde_json::json!({
        "model": "auto",
        "messages": [{"role": "user", "content": "x".repeat(40_000)}],
    })
    .to_string();
    let post = |srv: &RouteServer| {
        http(
            "POST",
            &format!("{}/v1/chat/completions", srv.url),
            &[("content-type", "application/json")],
            Some(&long),
        )
    };
    let a = RouteServer::start(&env, &cfg, &args);
    let r = post(&a);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.header("x-fallback-trail"),
        "a::context-length=context_length"
    );
    // An instance started later knows the window without sending.
    let b = RouteServer::start(&env, &cfg, &args);
    let r = post(&b);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.header("x-fallback-trail"),
        "a::context-length=skip:context"
    );
    assert_eq!(r.header("x-fallback-attempts"), "0");
    let calls = fake
        .seen()
        .iter()
        .filter(|s| s.model() == "context-length")
        .count();
    assert_eq!(calls, 1);
}

fn status_displays_show_the_shared_state_and_say_when_they_cannot() {
    let mut redis = Redis::start();
    let env = env();
    let fake = Fake::start(&env, &[]);
    let tables = [
        fake.provider("a", "openai", &["ok"], ""),
        fake.provider("c", "openai", &["forbidden"], ""),
    ];
    let (cfg, a, b) = two_instances(&env, &redis, &tables);
    let url = redis.url();
    let status = |args: &[&str]| {
        let mut all = vec!["--config", cfg.as_str(), "route", "--status"];
        all.extend_from_slice(args);
        env.run(&all).ok()
    };
    let metric = |srv: &RouteServer, name: &str| -> String {
        let m = get(srv, "/metrics").body;
        m.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} in\n{m}"))
            .to_string()
    };

    // A 403 through A benches c for a day (no test outlives it); B never
    // sent to c, yet all its displays show the bench.
    assert_eq!(chat(&a, "c::forbidden").status, 429);
    let v = providers(&b);
    assert_eq!(v["state"], "redis", "{v}");
    let c = provider_view(&v, "c");
    assert_eq!(c["status"], "cooling_down", "{v}");
    assert_eq!(c["cooldowns"][0]["reason"], "forbidden", "{v}");
    assert!(c["resume_at"].is_string(), "{v}");
    assert_eq!(v["counts"]["cooldowns"], 1, "{v}");
    assert_eq!(v["counts"]["routable_models"], 1, "{v}");
    assert_eq!(metric(&b, "llmprobe_route_cooldowns_active"), "1");
    assert_eq!(metric(&b, "llmprobe_route_routable_models"), "1");
    let r = get(&b, "/readyz").json();
    assert_eq!(
        (&r["routable_models"], &r["state"]),
        (&1.into(), &"redis".into()),
        "{r}"
    );
    // route --status, pointed at the same Redis, shows it too; without
    // it, only this machine's (empty) route_state.json.
    let st = status(&["--shared-state", &url]);
    assert!(st.stdout.contains("forbidden until"), "{}", st.stdout);
    assert!(st.stdout.contains("state: redis"), "{}", st.stdout);
    let st = status(&["--shared-state", &url, "--json"]);
    let j: Value = serde_json::from_str(&st.stdout).unwrap();
    assert_eq!(
        (&j["counts"]["cooldowns"], &j["state"]),
        (&1.into(), &"redis".into())
    );
    let st = status(&["--json"]);
    let j: Value = serde_json::from_str(&st.stdout).unwrap();
    assert_eq!(
        (&j["counts"]["cooldowns"], &j["state"]),
        (&0.into(), &"local".into())
    );

    // Redis goes away: each instance shows its own state and says so. B
    // never saw the bench; A set it.
    redis.kill();
    let v = providers(&b);
    assert_eq!(v["state"], "local (redis unavailable)", "{v}");
    assert_eq!(v["counts"]["cooldowns"], 0, "{v}");
    assert_eq!(metric(&b, "llmprobe_route_cooldowns_active"), "0");
    let v = providers(&a);
    assert_eq!(v["state"], "local (redis unavailable)", "{v}");
    assert_eq!(v["counts"]["cooldowns"], 1, "{v}");
    let r = get(&b, "/readyz");
    assert_eq!(r.status, 200, "still ready: {}", r.body);
    let r = r.json();
    assert_eq!(r["state"], "local (redis unavailable)", "{r}");
    assert!(
        r["shared_state"]
            .as_str()
            .unwrap()
            .contains("serving from local state"),
        "{r}"
    );
    let st = status(&["--shared-state", &url]);
    let said = format!("{}{}", st.stdout, st.stderr);
    assert!(said.contains("cannot connect to Redis"), "{said}");
    assert!(said.contains("state: local (redis unavailable)"), "{said}");

    // Redis is back (empty: it kept nothing). Both show it again, and a
    // bench set through A is again B's to see.
    redis.restart();
    wait_until_shared(&[&a, &b]);
    let v = providers(&b);
    assert_eq!(
        (&v["state"], &v["counts"]["cooldowns"]),
        (&"redis".into(), &0.into()),
        "{v}"
    );
    assert_eq!(chat(&a, "c::forbidden").status, 429);
    let v = providers(&b);
    assert_eq!(provider_view(&v, "c")["status"], "cooling_down", "{v}");
    assert_eq!(metric(&b, "llmprobe_route_cooldowns_active"), "1");
    assert_eq!(
        fake.seen()
            .iter()
            .filter(|s| s.model() == "forbidden")
            .count(),
        2
    );
}

/// A heuristic bench one instance set (and the other met through Redis) is
/// probed halfway and lifted for every instance, in Redis too.
fn a_lifted_bench_is_lifted_for_every_instance() {
    let redis = Redis::start();
    let env = env();
    let fake = Fake::start(&env, &["flaky=e500,e500,e500,ok,ok,ok,ok,ok"]);
    let tables = [fake.provider("c", "openai", &["flaky"], "")];
    let (_, a, b) = two_instances(&env, &redis, &tables);
    let calls = || fake.seen().iter().filter(|s| s.model() == "flaky").count();
    for _ in 0..3 {
        chat(&a, "c::flaky");
    }
    assert_eq!(calls(), 3);
    let r = chat(&b, "c::flaky");
    assert!(
        r.header("x-fallback-trail")
            .contains("cooldown:repeated_failures"),
        "{:?}",
        r.headers
    );
    advance(&env, 302);
    eventually("the bench probed and lifted everywhere", || {
        let r = chat(&b, "c::flaky");
        match r.header("x-routed-via") {
            "c::flaky" => Ok(()),
            _ => Err(format!("{} {:?}", r.status, r.headers)),
        }
    });
    // Three failures, one probe by each instance that holds the bench (b
    // met it through Redis), and b's request.
    let probes = calls() - 3 - 1;
    assert!((1..=2).contains(&probes), "{probes} probes");
}

/// The tests of this file, for the `external` harness.
pub fn tests() -> Vec<crate::Test> {
    let needs = &[Need::Redis];
    vec![
        crate::Test::new(
            "shared::two_instances_share_one_budget_and_cooldowns_and_survive_redis_going_away",
            needs,
            two_instances_share_one_budget_and_cooldowns_and_survive_redis_going_away,
        ),
        crate::Test::new(
            "shared::learned_limits_and_token_corrections_reach_the_other_instance",
            needs,
            learned_limits_and_token_corrections_reach_the_other_instance,
        ),
        crate::Test::new(
            "shared::what_an_upstream_said_a_model_cannot_take_reaches_the_other_instances",
            needs,
            what_an_upstream_said_a_model_cannot_take_reaches_the_other_instances,
        ),
        crate::Test::new(
            "shared::a_lifted_bench_is_lifted_for_every_instance",
            needs,
            a_lifted_bench_is_lifted_for_every_instance,
        ),
        crate::Test::new(
            "shared::status_displays_show_the_shared_state_and_say_when_they_cannot",
            needs,
            status_displays_show_the_shared_state_and_say_when_they_cannot,
        ),
    ]
}
