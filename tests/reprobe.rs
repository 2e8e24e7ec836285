//! `route --serve`'s re-prober end to end: the real binary, fake providers
//! on 127.0.0.1, route's clock moved through the test clock file. Every
//! "not yet" is asserted after the re-prober has looked (its rounds are
//! counted in `/metrics`), never after a sleep; every "now" is polled for
//! with a cap.

use serde_json::{Value, json};

use crate::support::Test;
use crate::support::{
    Env, Fake, RouteServer, advance, ago, check, clock_env, eventually, http, log_entries,
    route_config, usage_line,
};

/// How many requests the fake received for `model`.
fn calls(fake: &Fake, model: &str) -> usize {
    fake.seen().iter().filter(|s| s.model() == model).count()
}

/// The value of one sample of route's `/metrics` (0 when absent).
fn metric(srv: &RouteServer, sample: &str) -> f64 {
    let m = http("GET", &format!("{}/metrics", srv.url), &[], None);
    m.body
        .lines()
        .find_map(|l| l.strip_prefix(sample)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

fn reprobes(srv: &RouteServer, kind: &str, result: &str) -> f64 {
    metric(
        srv,
        &format!("llmprobe_route_reprobes_total{{kind=\"{kind}\",result=\"{result}\"}}"),
    )
}

/// Wait until the re-prober has finished two more rounds: whatever was
/// due when this was called has been looked at.
fn rounds_pass(srv: &RouteServer) {
    let start = metric(srv, "llmprobe_route_reprobe_rounds_total");
    eventually("two more re-prober rounds", || {
        let now = metric(srv, "llmprobe_route_reprobe_rounds_total");
        if now >= start + 2.0 {
            Ok(())
        } else {
            Err(format!("{now} rounds (from {start})"))
        }
    });
}

fn states(env: &Env) -> Value {
    serde_json::from_str(&std::fs::read_to_string(env.state_file()).unwrap_or("{}".into())).unwrap()
}

/// Pause `models` (`provider::model`) by hand, as paused by a 429 now.
fn write_paused(env: &Env, models: &[&str]) {
    let mut m = serde_json::Map::new();
    for k in models {
        m.insert(
            k.to_string(),
            json!({"state": "paused", "reason": "rate_limit", "since": ago(0), "consecutive_failures": 1}),
        );
    }
    env.write("stats/model_state.json", Value::Object(m).to_string());
}

fn reprobe_entries(env: &Env) -> Vec<Value> {
    if !env.log().exists() {
        return Vec::new();
    }
    log_entries(&env.log())
        .into_iter()
        .filter(|e| e["source"] == "reprobe")
        .collect()
}

#[test]
fn a_paused_model_is_back_within_one_interval_after_its_fake_recovers() {
    let env = clock_env();
    // The check's probe and the first re-probe get a 429; then it answers.
    let fake = Fake::start(&env, &["m=rate-limit,rate-limit,ok,ok,ok,ok,ok,ok"]);
    let cfg = route_config(
        &env,
        &[
            fake.provider("a", "openai", &["m"], "priority = 1"),
            fake.provider("z", "openai", &["ok"], "priority = 2"),
        ],
        "[route]\naffinity_secs = 0\n",
    );
    check(&env, &cfg, &["--provider", "a"]).code(0);
    assert_eq!(states(&env)["a::m"]["state"], "paused");
    assert_eq!(calls(&fake, "m"), 1);
    let srv = RouteServer::start(&env, &cfg, &[]);
    assert_eq!(srv.chat("auto", false).header("x-routed-via"), "z::ok");

    // Not before its slot: 5 minutes after the pause.
    advance(&env, 200);
    rounds_pass(&srv);
    assert_eq!(calls(&fake, "m"), 1, "re-probed before its slot");

    // The first slot: a 429 again, recorded as check records it.
    advance(&env, 302);
    eventually("the first re-probe", || match reprobe_entries(&env).len() {
        1 => Ok(()),
        n => Err(format!("{n} re-probe entries")),
    });
    let e = &reprobe_entries(&env)[0];
    assert_eq!(
        (e["model"].as_str(), e["ok"].as_u64()),
        (Some("m"), Some(0)),
        "{e}"
    );
    assert_eq!(states(&env)["a::m"]["state"], "paused");
    assert_eq!(calls(&fake, "m"), 2);
    assert_eq!(reprobes(&srv, "paused", "fail"), 1.0);

    // The wait doubles: nothing at 14 minutes…
    advance(&env, 780);
    rounds_pass(&srv);
    assert_eq!(
        calls(&fake, "m"),
        2,
        "the second slot is 15 min after the pause"
    );

    // …and the fake, recovered since its second request, passes at 15:
    // within one interval (10 min) of recovering.
    advance(&env, 902);
    eventually("the model active again", || {
        let s = states(&env);
        if s["a::m"]["state"] == "active" {
            Ok(s)
        } else {
            Err(s.to_string())
        }
    });
    let s = states(&env);
    assert!(s["a::m"]["recovered_at"].is_string(), "{s}");
    let entries = reprobe_entries(&env);
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[1]["ok"], 1, "{}", entries[1]);
    assert_eq!(reprobes(&srv, "paused", "pass"), 1.0);
    eventually("traffic to the model again", || {
        let via = srv.chat("auto", false).header("x-routed-via").to_string();
        if via == "a::m" { Ok(()) } else { Err(via) }
    });
}

#[test]
fn re_probes_of_one_provider_keep_its_spacing_and_an_unreachable_one_records_nothing() {
    let env = clock_env();
    let fake = Fake::start(&env, &[]);
    let down = crate::support::closed_port();
    let cfg = route_config(
        &env,
        &[
            fake.provider("a", "openai", &["p1", "p2"], "spacing_secs = 600"),
            crate::support::provider_toml("gone", "openai", &format!("{down}/v1"), &["x"], ""),
        ],
        "",
    );
    write_paused(&env, &["a::p1", "a::p2", "gone::x"]);
    let srv = RouteServer::start(&env, &cfg, &[]);
    advance(&env, 302);
    eventually(
        "the first model re-probed",
        || match states(&env)["a::p1"]["state"].as_str() {
            Some("active") => Ok(()),
            s => Err(format!("{s:?}")),
        },
    );
    eventually("the unreachable model tried", || {
        match reprobes(&srv, "paused", "unreachable") {
            1.0 => Ok(()),
            n => Err(n.to_string()),
        }
    });
    rounds_pass(&srv);
    assert_eq!(
        calls(&fake, "p2"),
        0,
        "one provider's re-probes are spacing apart"
    );
    // The unreachable one: nothing in the log, its entry untouched.
    let entries = reprobe_entries(&env);
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0]["model"], "p1");
    assert_eq!(states(&env)["gone::x"]["state"], "paused");
    assert!(states(&env)["gone::x"].get("recovered_at").is_none());
    assert_eq!(states(&env)["gone::x"]["consecutive_failures"], 1);

    advance(&env, 302 + 400);
    rounds_pass(&srv);
    assert_eq!(calls(&fake, "p2"), 0);
    advance(&env, 302 + 610);
    eventually("the second model re-probed after the spacing", || {
        match states(&env)["a::p2"]["state"].as_str() {
            Some("active") => Ok(()),
            s => Err(format!("{s:?}")),
        }
    });
    assert_eq!(calls(&fake, "p1"), 1);
    assert_eq!(calls(&fake, "p2"), 1);
}

#[test]
fn benches_the_upstream_timed_are_never_probed_early_and_guessed_ones_are() {
    let env = clock_env();
    let fake = Fake::start(
        &env,
        &[
            "flaky=e500,e500,e500,ok,ok,ok",
            "still=e503",
            "ladder=ok",
            "waits=ok",
        ],
    );
    let cfg = route_config(
        &env,
        &[
            fake.provider("a", "openai", &["ladder", "waits"], ""),
            fake.provider("c", "openai", &["flaky"], ""),
            fake.provider("d", "openai", &["still"], ""),
        ],
        "",
    );
    // Two 10-minute rate-limit benches: one a step of the ladder (route's
    // guess), one the upstream's own Retry-After; and one ladder bench whose
    // probe will fail.
    let bench = |model: &str, heuristic: bool| {
        let mut b = json!({
            "target": model, "scope": "key_model", "until": ago(-600),
            "reason": "rate_limit", "set_at": ago(0),
        });
        if heuristic {
            b["heuristic"] = json!(true);
        }
        b
    };
    env.write(
        "stats/route_state.json",
        json!({"version": 1, "cooldowns": {"benches": [
            bench("a::ladder", true), bench("a::waits", false), bench("d::still", true),
        ]}})
        .to_string(),
    );
    let srv = RouteServer::start(&env, &cfg, &[]);
    // A model that fails three times is benched for 10 minutes: a guess.
    for _ in 0..3 {
        srv.chat("c::flaky", false);
    }
    assert_eq!(srv.chat("c::flaky", false).status, 429, "benched");
    assert_eq!(calls(&fake, "flaky"), 3);

    // Not before half of each has passed.
    advance(&env, 200);
    rounds_pass(&srv);
    let sent = |fake: &Fake| ["ladder", "waits", "flaky", "still"].map(|m| calls(fake, m));
    assert_eq!(
        sent(&fake),
        [0, 0, 3, 0],
        "probed before half of a bench passed"
    );

    advance(&env, 302);
    eventually("the guessed benches probed", || {
        match (
            calls(&fake, "ladder"),
            calls(&fake, "flaky"),
            calls(&fake, "still"),
        ) {
            (1, 4, 1) => Ok(()),
            seen => Err(format!("{seen:?}")),
        }
    });
    rounds_pass(&srv);
    assert_eq!(
        calls(&fake, "waits"),
        0,
        "a Retry-After bench was probed early"
    );
    assert_eq!(reprobes(&srv, "bench", "pass"), 2.0);
    assert_eq!(reprobes(&srv, "bench", "fail"), 1.0);
    // The passes lifted their benches; the rest stand.
    assert_eq!(
        srv.chat("a::ladder", false).header("x-routed-via"),
        "a::ladder"
    );
    assert_eq!(
        srv.chat("c::flaky", false).header("x-routed-via"),
        "c::flaky"
    );
    assert_eq!(srv.chat("a::waits", false).status, 429);
    assert_eq!(srv.chat("d::still", false).status, 429);
    // Probed once only, and quietly: nothing in the log or the states.
    advance(&env, 420);
    rounds_pass(&srv);
    assert_eq!(calls(&fake, "still"), 1, "a bench is probed once");
    assert!(!env.log().exists(), "a bench probe wrote the log");
    assert!(!env.state_file().exists(), "a bench probe wrote the states");
    // And the failed probe added no ladder hit (route saves its state on
    // SIGTERM, which only unix sends).
    #[cfg(unix)]
    {
        assert_eq!(srv.terminate(), 0);
        let saved: Value = serde_json::from_str(
            &std::fs::read_to_string(env.stats().join("route_state.json")).unwrap(),
        )
        .unwrap();
        assert!(saved["cooldowns"].get("ladder").is_none(), "{saved}");
    }
}

#[cfg(unix)]
#[test]
fn a_running_check_makes_the_slot_skip_and_a_check_during_a_re_probe_runs() {
    let (env, fake, cfg) = Test::new()
        .scripts(&["p=slow:3000", "slow=slow:4000"])
        .provider("a", "openai", &["p"], "")
        .provider("s", "openai", &["slow"], "")
        .provider("t", "openai", &["ok"], "")
        .config();
    write_paused(&env, &["a::p"]);
    let srv = RouteServer::start(&env, &cfg, &[]);
    // A check holds the run lock while its slow probe runs.
    let running = env
        .command(&["--config", &cfg, "check", "--provider", "s"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    eventually("the check's probe in flight", || {
        match calls(&fake, "slow") {
            1 => Ok(()),
            n => Err(n.to_string()),
        }
    });
    advance(&env, 302);
    eventually("the slot skipped", || {
        match reprobes(&srv, "paused", "skipped") {
            1.0 => Ok(()),
            n => Err(n.to_string()),
        }
    });
    assert_eq!(calls(&fake, "p"), 0, "re-probed while a check ran");
    let out = running.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));

    // The next slot (15 min): a check that starts while the re-probe is in
    // flight is not refused for a lock.
    advance(&env, 902);
    eventually("the re-probe in flight", || match calls(&fake, "p") {
        1 => Ok(()),
        n => Err(n.to_string()),
    });
    check(&env, &cfg, &["--provider", "t"]).code(0);
    eventually(
        "the re-probe recorded",
        || match states(&env)["a::p"]["state"].as_str() {
            Some("active") => Ok(()),
            s => Err(format!("{s:?}")),
        },
    );
    assert_eq!(reprobe_entries(&env).len(), 1);
}

#[test]
fn no_re_probes_of_paused_models_when_turned_off() {
    let (env, fake, cfg) = Test::new()
        .provider("a", "openai", &["p"], "")
        .extra("[route]\nreprobe_paused_secs = 0\n")
        .config();
    write_paused(&env, &["a::p"]);
    let srv = RouteServer::start(&env, &cfg, &[]);
    advance(&env, 3 * 3600);
    rounds_pass(&srv);
    assert_eq!(calls(&fake, "p"), 0);
    assert_eq!(states(&env)["a::p"]["state"], "paused");
}

/// The re-prober takes a model's last probe from the log: a slot another
/// process already covered (here a `check --paused` probe a minute ago,
/// after the first slot) is not probed again when route starts; the next
/// slot, counted from that probe, is.
#[test]
fn a_slot_the_log_already_covers_is_not_re_probed_when_route_starts() {
    let (env, fake, cfg) = Test::new().provider("a", "openai", &["p"], "").config();
    // Paused 10 min ago; its first slot (5 min) was probed 1 min ago by
    // someone else: the next slot is at 15 min, 5 min from now.
    env.write(
        "stats/model_state.json",
        json!({"a::p": {"state": "paused", "reason": "rate_limit", "since": ago(600), "consecutive_failures": 2}})
            .to_string(),
    );
    env.write(
        "stats/health_log.json",
        format!(
            "[\n{}\n]\n",
            json!({"ts": ago(60), "provider": "a", "model": "p", "ok": 0, "latency_ms": 3, "failure_type": "rate_limit"})
        ),
    );
    let srv = RouteServer::start(&env, &cfg, &[]);
    rounds_pass(&srv);
    assert_eq!(calls(&fake, "p"), 0, "re-probed a slot the log covered");
    advance(&env, 302);
    eventually(
        "the next slot re-probed",
        || match states(&env)["a::p"]["state"].as_str() {
            Some("active") => Ok(()),
            s => Err(format!("{s:?}")),
        },
    );
    assert_eq!(calls(&fake, "p"), 1);
}

/// A re-probe's explicit wait is dated on route's clock, as its `ts` is:
/// under a test clock hours ahead, the state's `retry_at` is `ts + wait`.
#[test]
fn a_re_probes_retry_after_is_dated_from_its_own_ts() {
    let (env, _fake, cfg) = Test::new()
        .scripts(&["p=retry-after:120"])
        .provider("a", "openai", &["p"], "")
        .config();
    write_paused(&env, &["a::p"]);
    let srv = RouteServer::start(&env, &cfg, &[]);
    advance(&env, 7200);
    eventually("the re-probe recorded", || {
        match reprobe_entries(&env).len() {
            1 => Ok(()),
            n => Err(format!("{n} re-probe entries")),
        }
    });
    rounds_pass(&srv);
    let ts = reprobe_entries(&env)[0]["ts"].as_str().unwrap().to_string();
    let at = |s: &str| chrono::DateTime::parse_from_rfc3339(s).unwrap();
    let s = states(&env);
    let retry_at = s["a::p"]["retry_at"]
        .as_str()
        .unwrap_or_else(|| panic!("{s}"));
    assert_eq!(
        at(retry_at) - at(&ts),
        chrono::TimeDelta::seconds(120),
        "ts {ts}, retry_at {retry_at}"
    );
}

#[test]
fn a_re_probe_sent_twice_counts_both_requests() {
    let env = clock_env();
    // The provider refuses `stream`: the re-probe goes again, whole.
    let fake = Fake::start(&env, &["m=no-stream"]);
    let cfg = route_config(
        &env,
        &[fake.provider("a", "openai", &["m"], "limits = { rpd = 1 }")],
        "[route]\naffinity_secs = 0\n",
    );
    write_paused(&env, &["a::m"]);
    let srv = RouteServer::start(&env, &cfg, &[]);
    advance(&env, 302);
    eventually("the re-probe", || match reprobe_entries(&env).len() {
        1 => Ok(()),
        n => Err(format!("{n} re-probe entries")),
    });
    assert_eq!(calls(&fake, "m"), 2, "streamed, then whole");
    let line = eventually("route counts both requests", || {
        let v = srv.providers();
        let u = usage_line(&v, "a", "rpd").cloned().ok_or(v.to_string())?;
        if u["used_by_probes"] == 2 {
            Ok(u)
        } else {
            Err(u.to_string())
        }
    });
    assert_eq!(line["used"], 2, "{line}");
}
