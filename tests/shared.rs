//! `route --serve --shared-state`: two instances, one Redis, one budget,
//! and status displays that show it. Each test starts its own
//! `redis-server` on a free loopback port ([`Redis`]). They run in the
//! `external` binary, which reports them as ignored where no redis-server
//! is installed (see `support::need`).

use serde_json::{Value, json};

use crate::support::need::Need;
use crate::support::{
    Env, Fake, Redis, RouteServer, advance, clock_env as env, eventually, http, provider_view,
    usage_line,
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
        let r = srv.chat("a::ok", false);
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
    a.chat("c::rate-limit", false);
    assert_eq!(calls("rate-limit"), 1);
    let r = b.chat("c::rate-limit", false);
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
        let r = srv.chat("a::ok", false);
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
        if srv.chat("a::ok", false).status == 200 {
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
    assert_eq!(a.chat("l::learn", false).status, 200);
    let learned = eventually("B knows the learned rpm", || {
        let v = b.providers();
        match usage_line(&v, "l", "rpm") {
            Some(u) if u["limit"] == 3 && u["learned"] == true => Ok(u.clone()),
            _ => Err(provider_view(&v, "l").to_string()),
        }
    });
    assert_eq!(learned["scope"], "l::learn", "{learned}");
    // Counted from now on, by both: B takes the three, then is refused
    // without sending, and so is A.
    for _ in 0..3 {
        let r = b.chat("l::learn", false);
        assert_eq!(r.status, 200, "{}", r.body);
    }
    for srv in [&b, &a] {
        let r = srv.chat("l::learn", false);
        assert_eq!(r.status, 429, "{}", r.body);
        assert!(
            r.header("x-fallback-trail").contains("l::learn=limit:rpm"),
            "{:?}",
            r.headers
        );
    }
    assert_eq!(calls("learn"), 4, "one by A, three by B");
    let v = a.providers();
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
        let r = srv.chat("t::ok", false);
        assert_eq!(r.status, 200, "request {i}: {}", r.body);
        let used = r.json()["usage"]["total_tokens"].as_u64().unwrap();
        assert!(used < 100, "{used}");
        total += used;
        eventually("the other instance sees the corrected tokens", || {
            let v = other.providers();
            let seen = |kind| usage_line(&v, "t", kind).map(|u| u["used"].clone());
            if seen("tpm") == Some(total.into()) && seen("tpd") == Some(total.into()) {
                Ok(())
            } else {
                Err(provider_view(&v, "t")["usage"].to_string())
            }
        });
    }
    assert_eq!(calls("ok"), 5);
    let v = b.providers();
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
    assert_eq!(a.chat("c::forbidden", false).status, 429);
    let v = b.providers();
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
    let v = b.providers();
    assert_eq!(v["state"], "local (redis unavailable)", "{v}");
    assert_eq!(v["counts"]["cooldowns"], 0, "{v}");
    assert_eq!(metric(&b, "llmprobe_route_cooldowns_active"), "0");
    let v = a.providers();
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
    let v = b.providers();
    assert_eq!(
        (&v["state"], &v["counts"]["cooldowns"]),
        (&"redis".into(), &0.into()),
        "{v}"
    );
    assert_eq!(a.chat("c::forbidden", false).status, 429);
    let v = b.providers();
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
        a.chat("c::flaky", false);
    }
    assert_eq!(calls(), 3);
    let r = b.chat("c::flaky", false);
    assert!(
        r.header("x-fallback-trail")
            .contains("cooldown:repeated_failures"),
        "{:?}",
        r.headers
    );
    advance(&env, 302);
    eventually("the bench probed and lifted everywhere", || {
        let r = b.chat("c::flaky", false);
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

/// Route's traffic is evidence across a fleet: two instances serve a
/// model three times between them, and the one `check --shared-state`
/// does not probe it, nor log anything for it.
fn the_fleets_traffic_spares_a_probe_of_a_model_it_proved() {
    let redis = Redis::start();
    let env = env();
    let fake = Fake::start(&env, &[]);
    let url = redis.url();
    let tables = [fake.provider("p", "openai", &["m", "n"], "")];
    let (cfg, a, b) = two_instances(&env, &redis, &tables);
    let check = |extra: &[&str]| {
        let mut args = vec!["--shared-state", url.as_str(), "--spacing", "0"];
        args.extend_from_slice(extra);
        crate::support::check(&env, &cfg, &args).ok()
    };
    check(&[]);
    advance(&env, 60);
    for srv in [&a, &b, &a] {
        assert_eq!(srv.chat("p::m", false).status, 200);
    }
    eventually("three successes in Redis", || {
        let n = redis.inline("ZCARD llmprobe:traffic:ok:p::m");
        if n.trim() == ":3" { Ok(()) } else { Err(n) }
    });
    advance(&env, 3600);
    let before = fake.seen().len();
    let r = check(&[]);
    assert!(r.stdout.contains("traffic: 3 ok since"), "{}", r.stdout);
    let models: Vec<String> = fake.seen()[before..]
        .iter()
        .map(|s| s.model().to_string())
        .collect();
    assert_eq!(models, ["n"]);
    let entries = crate::support::log_entries(&env.log());
    assert_eq!(entries.iter().filter(|e| e["model"] == "m").count(), 1);
    // `brief`, told where the shared state is, counts the fleet's proof.
    let brief = env
        .command(&["--config", &cfg, "brief"])
        .env("LLMPROBE_CHECK_SHARED_STATE", &url)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&brief.stdout);
    assert!(text.contains("p::m: 3 ok since"), "{text}");
}

/// `day_reset = "HH:MM"` twelve hours from now: no day window ends while
/// a test runs.
fn far_reset() -> String {
    let at = chrono::Utc::now() + chrono::TimeDelta::hours(12);
    format!("day_reset = \"{}\"", at.format("%H:%M"))
}

/// One ledger across a fleet: the routers' counts in Redis hold a `check
/// --shared-state`'s probes back, and its probes show in every router's
/// `used_by_probes`.
fn a_shared_check_counts_its_probes_where_the_routers_count() {
    let redis = Redis::start();
    let env = env();
    let fake = Fake::start(&env, &[]);
    let url = redis.url();
    let tables = [
        fake.provider(
            "p",
            "openai",
            &["m"],
            &format!("limits = {{ rpd = 20 }}\n{}", far_reset()),
        ),
        fake.provider(
            "q",
            "openai",
            &["m"],
            &format!("limits = {{ rpd = 100 }}\n{}", far_reset()),
        ),
    ];
    let (cfg, a, b) = two_instances(&env, &redis, &tables);
    // Traffic took p's first two requests of the day, through Redis.
    assert_eq!(a.chat("p::m", false).status, 200);
    assert_eq!(b.chat("p::m", false).status, 200);
    let r = crate::support::check(&env, &cfg, &["--shared-state", &url, "--spacing", "0"]).ok();
    assert!(
        r.stdout.contains("budget: rpd 2 of 20 used today"),
        "{}",
        r.stdout
    );
    // q's probe went, and both routers count it, as a probe.
    for srv in [&a, &b] {
        eventually("the probe in the shared usage", || {
            let v = srv.providers();
            let u = usage_line(&v, "q", "rpd").cloned().ok_or(v.to_string())?;
            match (u["used"].as_u64(), u["used_by_probes"].as_u64()) {
                (Some(1), Some(1)) => Ok(()),
                _ => Err(u.to_string()),
            }
        });
    }
    let v = a.providers();
    let u = usage_line(&v, "p", "rpd").unwrap();
    assert_eq!(
        (u["used"].as_u64(), u["used_by_probes"].as_u64()),
        (Some(2), Some(0)),
        "{u}"
    );
}

/// A shared `check` counts each probe once: in Redis, where it reads the
/// day's use, and in its file, which it then does not add.
fn a_shared_check_spends_its_whole_allowance_not_half() {
    let redis = Redis::start();
    let env = env();
    let fake = Fake::start(&env, &[]);
    let url = redis.url();
    // 40 a day, probes may use 4: 6 h slots from a day that starts now.
    let reset = chrono::Utc::now().format("%H:%M");
    let tables = [fake.provider(
        "q",
        "openai",
        &["m"],
        &format!("limits = {{ rpd = 40 }}\nday_reset = \"{reset}\""),
    )];
    let (cfg, a, _b) = two_instances(&env, &redis, &tables);
    for hours in [0, 6, 12, 18] {
        advance(&env, hours * 3600 + 60);
        let before = fake.seen().len();
        let args = ["--shared-state", url.as_str(), "--spacing", "0"];
        crate::support::check(&env, &cfg, &args).ok();
        assert_eq!(fake.seen().len() - before, 1, "the probe at +{hours}h went");
    }
    let v = a.providers();
    let u = usage_line(&v, "q", "rpd").unwrap();
    assert_eq!(
        (u["used"].as_u64(), u["used_by_probes"].as_u64()),
        (Some(4), Some(4)),
        "{u}"
    );
}

/// The tests of this file, for the `external` harness.
/// Route's measured speed is shared: what one instance measured orders the
/// other's candidates before it has sent anything itself, through the
/// periodic merge (no round trip per request).
fn two_instances_share_measured_speed() {
    let redis = Redis::start();
    let env = env();
    let fake = Fake::start(&env, &["slow=ok:400", "fast=ok"]);
    // `slow` is first in the catalog: unmeasured, an instance tries it first.
    let tables = [fake.provider("p", "openai", &["slow", "fast"], "")];
    let (_, a, b) = two_instances(&env, &redis, &tables);
    // Each request its own conversation: affinity plays no part.
    let chat = |srv: &RouteServer, session: &str| {
        let r = http(
            "POST",
            &format!("{}/v1/chat/completions", srv.url),
            &[
                ("content-type", "application/json"),
                ("x-session-id", session),
            ],
            Some(&crate::support::chat_body("auto", false)),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        r.header("x-routed-via").to_string()
    };
    for i in 0..3 {
        chat(&a, &format!("a{i}"));
    }
    let seen_slow = || fake.seen().iter().filter(|s| s.model() == "slow").count();
    assert_eq!(seen_slow(), 1, "a measured slow once, then kept to fast");
    // b takes a's figures at its next merge (shown in /v1/providers).
    eventually("b has a's figures", || {
        let v = get(&b, "/v1/providers").json();
        let speed = provider_view(&v, "p")["speed"].clone();
        let slow = speed
            .as_array()
            .and_then(|a| a.iter().find(|m| m["model"] == "slow"))
            .cloned();
        match slow {
            Some(m) if m["ttft_ms"].as_f64().unwrap_or(0.0) >= 300.0 => Ok(()),
            _ => Err(speed.to_string()),
        }
    });
    // b has sent nothing yet; its first request goes to fast.
    assert_eq!(chat(&b, "b0"), "p::fast");
    assert_eq!(seen_slow(), 1);
}

pub fn tests() -> Vec<crate::Test> {
    let needs = &[Need::Redis];
    vec![
        crate::Test::new(
            "shared::two_instances_share_measured_speed",
            needs,
            two_instances_share_measured_speed,
        ),
        crate::Test::new(
            "shared::a_shared_check_spends_its_whole_allowance_not_half",
            needs,
            a_shared_check_spends_its_whole_allowance_not_half,
        ),
        crate::Test::new(
            "shared::a_shared_check_counts_its_probes_where_the_routers_count",
            needs,
            a_shared_check_counts_its_probes_where_the_routers_count,
        ),
        crate::Test::new(
            "shared::the_fleets_traffic_spares_a_probe_of_a_model_it_proved",
            needs,
            the_fleets_traffic_spares_a_probe_of_a_model_it_proved,
        ),
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
        crate::Test::new(
            "shared::one_check_feeds_two_routers_through_the_shared_record",
            needs,
            one_check_feeds_two_routers_through_the_shared_record,
        ),
        crate::Test::new(
            "shared::a_pause_reaches_the_routers_while_check_still_runs",
            needs,
            a_pause_reaches_the_routers_while_check_still_runs,
        ),
        crate::Test::new(
            "shared::a_degraded_mode_success_leaves_the_shared_record_alone",
            needs,
            a_degraded_mode_success_leaves_the_shared_record_alone,
        ),
        crate::Test::new(
            "shared::a_paused_run_publishes_its_changes_but_not_a_fresh_age",
            needs,
            a_paused_run_publishes_its_changes_but_not_a_fresh_age,
        ),
        crate::Test::new(
            "shared::instances_sharing_redis_say_each_alert_once_between_them",
            needs,
            instances_sharing_redis_say_each_alert_once_between_them,
        ),
        crate::Test::new(
            "shared::a_shared_record_needs_a_redis_url",
            &[],
            a_shared_record_needs_a_redis_url,
        ),
        crate::Test::new(
            "shared::responses_items_from_one_instance_resolve_on_the_other_when_shared",
            needs,
            responses_items_from_one_instance_resolve_on_the_other_when_shared,
        ),
        crate::Test::new(
            "shared::a_shared_item_store_needs_a_redis_url",
            &[],
            a_shared_item_store_needs_a_redis_url,
        ),
    ]
}

/// `POST /v1/responses` with `body` through `srv`.
fn respond(srv: &RouteServer, body: &Value) -> crate::support::Http {
    http(
        "POST",
        &format!("{}/v1/responses", srv.url),
        &[("content-type", "application/json")],
        Some(&body.to_string()),
    )
}

/// A served reply's `response` object, plain or streamed (the last
/// event's).
fn response_of(r: &crate::support::Http) -> Value {
    assert_eq!(r.status, 200, "{}", r.body);
    if !r.header("content-type").starts_with("text/event-stream") {
        return r.json();
    }
    let last = r
        .body
        .split("\n\n")
        .filter_map(|b| b.lines().find_map(|l| l.strip_prefix("data: ")))
        .last()
        .unwrap_or_else(|| panic!("{}", r.body));
    let v: Value = serde_json::from_str(last).unwrap();
    assert_eq!(v["type"], "response.completed", "{}", r.body);
    v["response"].clone()
}

/// With `item_store_shared = true`, a message item and a response
/// returned by instance A (streamed or not) resolve on instance B as soon
/// as A's client has them, and a chain that crosses instances walks back
/// through Redis; with sharing off, B does not know them.
fn responses_items_from_one_instance_resolve_on_the_other_when_shared() {
    let mut redis = Redis::start();
    let env = env();
    let fake = Fake::start(&env, &[]);
    let url = redis.url();
    // Shared last: it ends by stopping Redis.
    for shared in [false, true] {
        let cfg = env
            .write(
                "llmprobe.toml",
                format!(
                    "include_default_catalog = false\n[route]\nitem_store_shared = {shared}\n\
                     [defaults]\ntimeout_secs = 10\n\n{}",
                    fake.provider("o", "openai", &["ok"], "")
                ),
            )
            .display()
            .to_string();
        let args = ["--shared-state", url.as_str()];
        let a = RouteServer::start(&env, &cfg, &args);
        let b = RouteServer::start(&env, &cfg, &args);
        for stream in [false, true] {
            let first = response_of(&respond(
                &a,
                &json!({"model": "o::ok", "input": "What is 1 + 1?", "stream": stream}),
            ));
            assert_eq!(first["output_text"], "2", "{first}");
            let msg = first["output"][0]["id"].as_str().unwrap().to_string();
            // B, at once: the item by reference.
            let r = respond(
                &b,
                &json!({"model": "o::ok", "stream": stream, "input": [
                    {"role": "user", "content": "What is 1 + 1?"},
                    {"type": "item_reference", "id": msg},
                    {"role": "user", "content": "What is 2 + 2?"},
                ]}),
            );
            if !shared {
                assert_eq!(r.status, 400, "{}", r.body);
                assert_eq!(r.json()["error"]["code"], "item_not_found", "{}", r.body);
                let r = respond(
                    &b,
                    &json!({"model": "o::ok", "input": "More?", "previous_response_id": first["id"]}),
                );
                assert_eq!(r.status, 400, "{}", r.body);
                continue;
            }
            assert_eq!(response_of(&r)["output_text"], "4", "{}", r.body);
            // B, by previous_response_id; then A again, after B's turn.
            let second = response_of(&respond(
                &b,
                &json!({"model": "o::ok", "input": "What is 2 + 2?", "stream": stream,
                        "previous_response_id": first["id"]}),
            ));
            assert_eq!(second["output_text"], "4", "{second}");
            let third = response_of(&respond(
                &a,
                &json!({"model": "o::ok", "input": "What is 3 + 3?", "stream": stream,
                        "previous_response_id": second["id"]}),
            ));
            assert_eq!(third["output_text"], "6", "{third}");
            let last = fake.seen().pop().unwrap().body.unwrap().to_string();
            for said in [
                "What is 1 + 1?",
                "\"2\"",
                "What is 2 + 2?",
                "\"4\"",
                "What is 3 + 3?",
            ] {
                assert!(last.contains(said), "{said}: {last}");
            }
        }
        if shared {
            // Redis goes away: an item only A holds cannot be found from
            // B, and B's 400 says why.
            let only_a = response_of(&respond(
                &a,
                &json!({"model": "o::ok", "input": "What is 5 + 5?"}),
            ));
            let msg = only_a["output"][0]["id"].as_str().unwrap().to_string();
            redis.kill();
            let r = respond(
                &b,
                &json!({"model": "o::ok", "input": [
                    {"role": "user", "content": "What is 5 + 5?"},
                    {"type": "item_reference", "id": msg},
                    {"role": "user", "content": "And 6 + 6?"},
                ]}),
            );
            assert_eq!(r.status, 400, "{}", r.body);
            let m = r.json()["error"]["message"].as_str().unwrap().to_string();
            assert!(m.contains("does not answer"), "{m}");
            return;
        }
    }
}

/// `item_store_shared = true` without a Redis URL is refused, by name.
fn a_shared_item_store_needs_a_redis_url() {
    let env = env();
    let cfg = env
        .write(
            "llmprobe.toml",
            "include_default_catalog = false\n[route]\nitem_store_shared = true\n",
        )
        .display()
        .to_string();
    let r = env
        .run(&[
            "--config",
            &cfg,
            "route",
            "--serve",
            "--listen",
            "127.0.0.1:0",
        ])
        .code(2);
    assert!(
        r.stderr.contains("item_store_shared = true"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("shared_state"), "{}", r.stderr);
    let mut env = env;
    env.env("LLMPROBE_ROUTE_ITEM_STORE_SHARED", "true");
    let r = env.run(&["route", "--status"]).code(2);
    assert!(
        r.stderr.contains("LLMPROBE_ROUTE_ITEM_STORE_SHARED"),
        "{}",
        r.stderr
    );
}

/// Poll `srv`'s `/v1/providers` until `ok` holds of it.
fn providers_until(srv: &RouteServer, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    eventually(what, || {
        let v = srv.providers();
        if ok(&v) { Ok(v) } else { Err(v.to_string()) }
    })
}

fn paused_models(v: &Value) -> Value {
    provider_view(v, "p")["models"]["paused"].clone()
}

/// The test: one `check --shared-state`, two `route --serve
/// --record shared` with empty stats directories. A model paused through
/// `check` gets no traffic from either; with Redis gone both keep routing
/// on the last record and say so; when Redis and `check` are back, both
/// catch up.
fn one_check_feeds_two_routers_through_the_shared_record() {
    let mut redis = Redis::start();
    let env = env();
    // flaky: the first check's probe, one request through each router,
    // then a 503 for the second check's probe; then again.
    let fake = Fake::start(&env, &["flaky=ok,ok,ok,e503"]);
    let url = redis.url();
    let table = fake.provider(
        "p",
        "openai",
        &["good", "flaky"],
        "model_info = { \"good\" = { capabilities = [\"tools\"] } }",
    );
    let base = format!(
        "include_default_catalog = false\n[defaults]\nspacing_secs = 0\ntimeout_secs = 10\n\n{table}"
    );
    let cfg = env.write("llmprobe.toml", &base).display().to_string();
    // The second config publishes through `[check] shared_state`.
    let cfg_check = env
        .write(
            "check.toml",
            format!("{base}\n[check]\nshared_state = \"{url}\"\n"),
        )
        .display()
        .to_string();
    let flaky = || fake.seen().iter().filter(|s| s.model() == "flaky").count();

    let r = crate::support::check(&env, &cfg, &["--shared-state", &url]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(flaky(), 1);

    let empty_a = env.path().join("stats-a");
    let empty_b = env.path().join("stats-b");
    let start = |dir: &std::path::Path| {
        let dir = dir.display().to_string();
        RouteServer::start(
            &env,
            &cfg,
            &[
                "--shared-state",
                &url,
                "--record",
                "shared",
                "--stats-dir",
                &dir,
            ],
        )
    };
    let (a, b) = (start(&empty_a), start(&empty_b));
    for srv in [&a, &b] {
        let v = providers_until(srv, "the record read", |v| v["record"]["status"] == "fresh");
        assert_eq!(v["record"]["source"], "shared", "{v}");
        assert!(v["record"]["as_of"].is_string(), "{v}");
        // Recent health and capability verdicts came from Redis: these
        // stats directories hold nothing.
        assert_eq!(provider_view(&v, "p")["uptime_24h"], 1.0, "{v}");
        assert_eq!(v["capabilities"]["models"], 1, "{v}");
        let r = srv.chat("p::flaky", false);
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.header("x-routed-via"), "p::flaky");
    }
    assert_eq!(flaky(), 3);
    assert!(!empty_a.join("model_state.json").exists());

    // check pauses flaky (a 503); both routers hear of it.
    let r = crate::support::check(&env, &cfg_check, &[]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(flaky(), 4);
    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(env.state_file()).unwrap()).unwrap();
    assert_eq!(state["p::flaky"]["state"], "paused", "{state}");
    for srv in [&a, &b] {
        providers_until(srv, "the pause reaches the router", |v| {
            paused_models(v) == serde_json::json!(["flaky"])
        });
    }
    // Neither sends it anything now, pinned or not.
    for srv in [&a, &b] {
        for _ in 0..3 {
            let r = srv.chat("p::flaky", false);
            assert_eq!(r.status, 503, "{}", r.body);
            assert!(r.body.contains("no_active_models"), "{}", r.body);
            let r = srv.chat("auto", false);
            assert_eq!(r.status, 200, "{}", r.body);
            assert_eq!(r.header("x-routed-via"), "p::good");
        }
    }
    assert_eq!(flaky(), 4, "no router sent flaky anything after the pause");
    let v = a.providers();
    assert_eq!(provider_view(&v, "p")["uptime_24h"], 0.75, "{v}");

    // Not refreshed for twice the interval (1 h by default): stale, and
    // said so, never silently fresh; routing goes on with it.
    advance(&env, 2 * 3600 + 1);
    for srv in [&a, &b] {
        let v = srv.providers();
        assert_eq!(v["record"]["status"], "stale", "{v}");
        assert_eq!(v["record"]["stale_after_secs"], 7200, "{v}");
        assert_eq!(paused_models(&v), serde_json::json!(["flaky"]), "{v}");
        let r = get(srv, "/readyz");
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.json()["record"]["status"], "stale", "{}", r.body);
    }

    // Redis goes away: both keep routing on the last record, and say so.
    redis.kill();
    for srv in [&a, &b] {
        let r = srv.chat("p::flaky", false);
        assert_eq!(r.status, 503, "still paused: {}", r.body);
        let r = srv.chat("auto", false);
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.header("x-routed-via"), "p::good");
        let v = providers_until(srv, "the router says Redis is away", |v| {
            v["record"]["status"] == "unreachable"
        });
        assert_eq!(paused_models(&v), serde_json::json!(["flaky"]), "{v}");
        assert!(v["record"]["as_of"].is_string(), "{v}");
        let r = get(srv, "/readyz");
        assert_eq!(r.status, 200, "still ready: {}", r.body);
        let j = r.json();
        assert_eq!(j["record"]["status"], "unreachable", "{j}");
        assert!(
            j["record"]["note"]
                .as_str()
                .unwrap()
                .contains("routing on the record as of"),
            "{j}"
        );
    }
    assert_eq!(flaky(), 4);
    // A check meanwhile records as always, warns, and exits as it would.
    let r = crate::support::check(&env, &cfg_check, &[]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("Redis"), "{}", r.stderr);
    assert_eq!(flaky(), 5, "the paused model was probed");
    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(env.state_file()).unwrap()).unwrap();
    assert_eq!(state["p::flaky"]["state"], "active", "{state}");

    // Redis is back, empty: the routers keep the last record until the
    // next check publishes, then catch up (flaky recovered).
    redis.restart();
    for srv in [&a, &b] {
        let v = providers_until(srv, "the router sees an empty Redis", |v| {
            v["record"]["status"] == "missing"
        });
        assert_eq!(paused_models(&v), serde_json::json!(["flaky"]), "{v}");
    }
    // The script's next answer for flaky is ok.
    let r = crate::support::check(&env, &cfg_check, &[]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    for srv in [&a, &b] {
        providers_until(srv, "the router catches up", |v| {
            v["record"]["status"] == "fresh" && paused_models(v).is_null()
        });
    }
    let r = a.chat("p::flaky", false);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(flaky(), 7);
}

/// A state change is published as `check` writes it, not when the run
/// ends: with ten minutes between its two probes, the router hears of the
/// first one's pause while `check` still waits for the second.
fn a_pause_reaches_the_routers_while_check_still_runs() {
    let redis = Redis::start();
    let env = env();
    let fake = Fake::start(&env, &["flaky=e503"]);
    let url = redis.url();
    let cfg = env
        .write(
            "llmprobe.toml",
            format!(
                "include_default_catalog = false\n[defaults]\nspacing_secs = 600\ntimeout_secs = 10\n\n{}",
                fake.provider("p", "openai", &["flaky", "good"], "")
            ),
        )
        .display()
        .to_string();
    let empty = env.path().join("stats-a").display().to_string();
    let a = RouteServer::start(
        &env,
        &cfg,
        &[
            "--shared-state",
            &url,
            "--record",
            "shared",
            "--stats-dir",
            &empty,
        ],
    );
    providers_until(&a, "the router sees no record", |v| {
        v["record"]["status"] == "missing"
    });
    // No record read yet: nothing says which models are active, so the
    // router is not ready and routes nothing.
    let r = get(&a, "/readyz");
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(r.json()["reason"], "no_record", "{}", r.body);
    let r = a.chat("auto", false);
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(r.json()["error"]["code"], "no_record", "{}", r.body);
    assert!(
        !fake
            .seen()
            .iter()
            .any(|s| ["flaky", "good"].contains(&s.model())),
        "routed without a record"
    );
    let mut check = env
        .command(&["--config", &cfg, "check", "--shared-state", &url])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    let v = providers_until(&a, "the pause reaches the router", |v| {
        paused_models(v) == serde_json::json!(["flaky"])
    });
    assert_eq!(v["record"]["status"], "fresh", "{v}");
    assert!(
        check.try_wait().unwrap().is_none(),
        "check is still waiting to probe good"
    );
    let r = get(&a, "/readyz");
    assert_ne!(r.json()["reason"], "no_record", "{}", r.body);
    assert_eq!(
        fake.seen().iter().filter(|s| s.model() == "good").count(),
        0
    );
    let _ = check.kill();
    let _ = check.wait();
}

/// The shared record without Redis is refused, by name; a bad `[check]
/// shared_state` is named too.
fn a_shared_record_needs_a_redis_url() {
    let env = env();
    let cfg = env
        .write(
            "llmprobe.toml",
            "include_default_catalog = false\n[route]\nrecord = \"shared\"\n",
        )
        .display()
        .to_string();
    let r = env.run(&["--config", &cfg, "route", "--status"]).code(2);
    assert!(r.stderr.contains("record = \"shared\""), "{}", r.stderr);
    assert!(r.stderr.contains("shared_state"), "{}", r.stderr);
    let cfg = env
        .write(
            "bad.toml",
            "include_default_catalog = false\n[check]\nshared_state = \"http://h:1\"\n",
        )
        .display()
        .to_string();
    let r = env.run(&["--config", &cfg, "check"]).code(2);
    assert!(r.stderr.contains("check.shared_state"), "{}", r.stderr);
    let r = env.run(&["check", "--shared-state", "http://h:1"]).code(2);
    assert!(r.stderr.contains("--shared-state"), "{}", r.stderr);
}

/// With a shared record, a paused model that serves in degraded mode is
/// not recorded by the router: the local state file (here the one `check`
/// writes, in the same stats directory) is left as it is, and the router
/// keeps routing on the fleet's record, where the model is still paused.
fn a_degraded_mode_success_leaves_the_shared_record_alone() {
    let redis = Redis::start();
    let env = env();
    // Each passes or fails `check`'s probe, then does the other when routed.
    let fake = Fake::start(
        &env,
        &["a1=ok,e500", "b1=e503,ok,ok,ok", "c1=e503,ok", "d1=e503,ok"],
    );
    let url = redis.url();
    let tables = [
        fake.provider("a", "openai", &["a1"], "priority = 4"),
        fake.provider("b", "openai", &["b1"], "priority = 1"),
        fake.provider("c", "openai", &["c1"], "priority = 2"),
        fake.provider("d", "openai", &["d1"], "priority = 3"),
    ];
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
    let r = crate::support::check(&env, &cfg, &["--shared-state", &url]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let before = std::fs::read_to_string(env.state_file()).unwrap();
    let srv = RouteServer::start(&env, &cfg, &["--shared-state", &url, "--record", "shared"]);
    srv.wait_grace_begun();
    advance(&env, 61);
    eventually("degraded", || {
        let r = get(&srv, "/readyz");
        if r.json()["status"] == "degraded" {
            Ok(())
        } else {
            Err(r.body)
        }
    });
    let r = srv.chat("auto", false);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("x-routed-via"), "b::b1");
    assert_eq!(
        r.header("x-fallback-trail"),
        "a::a1=server_error, b::b1=last-resort:paused"
    );
    // Still paused for this router: the next request goes the same way.
    let r = srv.chat("b::b1", false);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("x-fallback-trail"), "b::b1=last-resort:paused");
    let v = srv.providers();
    assert_eq!(
        provider_view(&v, "b")["models"]["paused"],
        serde_json::json!(["b1"]),
        "{v}"
    );
    assert_eq!(
        std::fs::read_to_string(env.state_file()).unwrap(),
        before,
        "the router wrote the local state file"
    );
}

/// `check --paused --shared-state` publishes what its re-probes changed,
/// but does not make the record look refreshed: only a scheduled run says
/// the job is alive, so a dead hourly job still shows as stale.
fn a_paused_run_publishes_its_changes_but_not_a_fresh_age() {
    let redis = Redis::start();
    let env = env();
    // m: a 503 pauses it, then it answers.
    let fake = Fake::start(&env, &["m=e503,ok"]);
    let url = redis.url();
    let table = fake.provider("p", "openai", &["good", "m"], "");
    let cfg = env
        .write(
            "llmprobe.toml",
            format!(
                "include_default_catalog = false\n[defaults]\nspacing_secs = 0\ntimeout_secs = 10\n\n{table}"
            ),
        )
        .display()
        .to_string();
    let r = crate::support::check(&env, &cfg, &["--shared-state", &url]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let dir = env.path().join("stats-a").display().to_string();
    let srv = RouteServer::start(
        &env,
        &cfg,
        &[
            "--shared-state",
            &url,
            "--record",
            "shared",
            "--stats-dir",
            &dir,
        ],
    );
    let v = providers_until(&srv, "the router reads the pause", |v| {
        paused_models(v) == serde_json::json!(["m"])
    });
    let as_of = v["record"]["as_of"].clone();
    assert!(as_of.is_string(), "{v}");

    // Past m's first re-probe slot, and past the record's age limit.
    advance(&env, 2 * 3600 + 1);
    let r = crate::support::check(&env, &cfg, &["--paused", "--shared-state", &url]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(env.state_file()).unwrap()).unwrap();
    assert_eq!(state["p::m"]["state"], "active", "{state}");
    let v = providers_until(&srv, "the recovery reaches the router", |v| {
        provider_view(v, "p")["models"]["active"] == serde_json::json!(["good", "m"])
    });
    assert_eq!(
        v["record"]["as_of"], as_of,
        "a paused run leaves the age: {v}"
    );
    assert_eq!(v["record"]["status"], "stale", "{v}");
}

/// Two instances enter and leave degraded mode together (one state file,
/// one clock): one message for each change, not one per instance, and the
/// resolved message resolves the alert whichever instance sent each.
fn instances_sharing_redis_say_each_alert_once_between_them() {
    let redis = Redis::start();
    let mut env = env();
    let hook = crate::support::PingServer::start();
    env.env(
        "LLMPROBE_NOTIFY",
        &format!("json+{}/hook", hook.url.trim_end_matches('/')),
    );
    let fake = Fake::start(&env, &[]);
    let tables = ["b", "c", "d", "e"].map(|p| fake.provider(p, "openai", &["ok"], ""));
    let (cfg, a, b) = two_instances(&env, &redis, &tables);
    let state = |verb: &str| {
        for m in ["b::ok", "c::ok", "d::ok"] {
            env.run(&["--config", &cfg, "state", verb, m]).ok();
        }
    };
    let both = |what: &str, ok: &dyn Fn(&Value) -> bool| {
        for s in [&a, &b] {
            providers_until(s, what, ok);
        }
    };
    // (messages, said elsewhere), over both instances.
    let said = || {
        [&a, &b].iter().fold((0, 0), |(m, e), s| {
            let v = s.providers();
            (
                m + v["alerts"]["messages"].as_u64().unwrap(),
                e + v["alerts"]["said_elsewhere"].as_u64().unwrap(),
            )
        })
    };
    let said_until = |want: (u64, u64)| {
        eventually("the claims settled", || {
            let got = said();
            if got == want {
                Ok(())
            } else {
                Err(format!("{got:?}"))
            }
        })
    };
    let hook_until = |n: usize| {
        eventually("the webhook's messages", || {
            let got: Vec<Value> = hook
                .seen()
                .iter()
                .map(|p| serde_json::from_str(&p.body).unwrap())
                .collect();
            if got.len() >= n {
                Ok(got)
            } else {
                Err(format!("{got:?}"))
            }
        })
    };

    state("pause");
    both("the pauses seen", &|v| {
        v["mode_counts"]["changing_to"] == "degraded"
    });
    advance(&env, 61);
    both("degraded", &|v| v["mode"] == "degraded");
    advance(&env, 70);
    said_until((1, 1));
    let got = hook_until(1);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["changes"][0]["kind"], "degraded");
    let id = got[0]["changes"][0]["id"].as_str().unwrap().to_string();

    state("enable");
    both("the enables seen", &|v| {
        v["mode_counts"]["changing_to"] == "ready"
    });
    advance(&env, 70 + 121);
    both("ready", &|v| v["mode"] == "ready");
    advance(&env, 70 + 131);
    said_until((2, 2));
    let got = hook_until(2);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[1]["changes"][0]["kind"], "ready");
    assert_eq!(got[1]["changes"][0]["resolves"], id.as_str());
}
