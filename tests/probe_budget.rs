//! The probe budget and traffic evidence (issue 33), through the real
//! binary on the test clock: probes spend at most `probe_share` of each
//! known daily limit, are counted in the ledger route reads, and a model
//! route's traffic has just proven is not probed.

use serde_json::Value;

use crate::support::{
    Env, Fake, RouteServer, advance, check, clock_env, config, eventually, http, log_entries,
    usage_line,
};

/// `llmprobe --config CFG route --model MODEL "What is 2 + 2?"`.
fn route_once(env: &Env, cfg: &str, model: &str) {
    env.run(&["--config", cfg, "route", "--model", model, "What is 2 + 2?"])
        .ok();
}

/// `day_reset = "HH:MM"` twelve hours from now: no test's day window ends
/// while it runs, whatever the time of day.
fn far_reset() -> String {
    let at = chrono::Utc::now() + chrono::TimeDelta::hours(12);
    format!("day_reset = \"{}\"", at.format("%H:%M"))
}

/// A fake with one provider `p` of `models` under `limits` (a line such
/// as `limits = { rpd = 20 }`), its day window far from ending, on the
/// test clock; and the config.
fn budgeted(models: &[&str], limits: &str) -> (Env, Fake, String) {
    let env = clock_env();
    let fake = Fake::start(&env, &[]);
    let extra = format!("{limits}\n{}", far_reset());
    let cfg = config(&env, &[fake.provider("p", "openai", models, &extra)]);
    (env, fake, cfg)
}

fn json(env: &Env, cfg: &str) -> Value {
    let r = check(env, cfg, &["--json"]).ok();
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {}", r.stdout))
}

#[test]
fn twenty_requests_a_day_give_two_basic_probes_twelve_hours_apart() {
    let (env, fake, cfg) = budgeted(&["m"], "limits = { rpd = 20 }");
    // Three runs in a row send it one probe.
    check(&env, &cfg, &[]).ok();
    for _ in 0..2 {
        let r = check(&env, &cfg, &[]).ok();
        assert!(r.stdout.contains("budget: next probe"), "{}", r.stdout);
        assert!(
            r.stdout
                .contains("p::m: probed every 12h: 20 requests/day, probes use 2"),
            "{}",
            r.stdout
        );
    }
    assert_eq!(fake.seen().len(), 1);
    assert_eq!(
        log_entries(&env.log()).len(),
        1,
        "a budget skip is not a log entry"
    );
    // The budget's skip is in --json, with when the next probe may go.
    let v = json(&env, &cfg);
    assert_eq!(v["budget"][0]["model"], "p::m", "{v}");
    assert_eq!(v["budget"][0]["why"], "not due", "{v}");
    // Twelve hours on, the next slot: one more, then none again.
    advance(&env, 12 * 3600 + 60);
    check(&env, &cfg, &[]).ok();
    check(&env, &cfg, &[]).ok();
    assert_eq!(fake.seen().len(), 2);
}

#[test]
fn a_daily_cap_is_shared_by_every_probe_of_the_provider_and_new_models_wait() {
    // 40 a day for the whole provider: probes may use 4, whichever model
    // (the day's model-list fetch counts too, as every request to the
    // provider does); models never probed only half of them.
    let (env, fake, cfg) = budgeted(&["a", "b", "c"], "daily_cap = 40");
    let models = |from: usize| -> Vec<String> {
        fake.seen()[from..]
            .iter()
            .map(|s| s.model().to_string())
            .collect()
    };
    let v = json(&env, &cfg);
    assert_eq!(models(0), ["a"], "{v}");
    for (i, m) in ["p::b", "p::c"].iter().enumerate() {
        assert_eq!(v["budget"][i]["model"], *m, "{v}");
        assert_eq!(
            v["budget"][i]["why"], "daily_cap 2 of 40 used today, models never probed may use 2",
            "{v}"
        );
    }
    // A day and a half on, `a` is due again and goes first: the models in
    // use get the scarce budget before the new ones.
    advance(&env, 36 * 3600 + 60);
    let r = check(&env, &cfg, &[]).ok();
    assert_eq!(models(1), ["a"]);
    assert!(
        r.stdout
            .contains("budget: daily_cap 2 of 40 used today, models never probed may use 2"),
        "{}",
        r.stdout
    );
}

#[test]
fn routed_requests_count_against_the_probes_allowance() {
    let (env, fake, cfg) = budgeted(&["m"], "limits = { rpd = 20 }");
    // Traffic took the first two requests of the day: what is left (18)
    // is traffic's reserve, and no probe eats into it.
    route_once(&env, &cfg, "p::m");
    route_once(&env, &cfg, "p::m");
    // A dry run says so first, and sends nothing.
    let dry = check(&env, &cfg, &["--dry-run"]).ok();
    assert!(
        dry.stdout
            .contains("not probed p::m: budget: rpd 2 of 20 used today, probes may use 2"),
        "{}",
        dry.stdout
    );
    let r = check(&env, &cfg, &[]).ok();
    assert!(
        r.stdout
            .contains("budget: rpd 2 of 20 used today, probes may use 2; next "),
        "{}",
        r.stdout
    );
    assert_eq!(fake.seen().len(), 2, "only the routed requests reached it");
}

#[test]
fn a_running_router_sees_a_checks_probes_and_neither_loses_the_others_counts() {
    let (env, _fake, cfg) = budgeted(&["m"], "limits = { rpd = 100 }");
    let srv = RouteServer::start(&env, &cfg, &[]);
    assert_eq!(srv.chat("p::m", false).status, 200);
    check(&env, &cfg, &[]).ok();
    let line = eventually("route sees the probe", || {
        let v = srv.providers();
        let u = usage_line(&v, "p", "rpd").cloned().ok_or(v.to_string())?;
        if u["used"] == 2 {
            Ok(u)
        } else {
            Err(u.to_string())
        }
    });
    assert_eq!(line["used_by_probes"], 1, "{line}");
    // /metrics says the same, and the probe spend of the provider.
    let metrics = http("GET", &format!("{}/metrics", srv.url), &[], None).body;
    for want in [
        "llmprobe_route_limit_used{provider=\"p\",scope=\"p::m\",kind=\"rpd\"} 2",
        "llmprobe_route_limit_used_by_probes{provider=\"p\",scope=\"p::m\",kind=\"rpd\"} 1",
        // The probe, and check's fetch of the provider's model list.
        "llmprobe_route_probe_requests_today{provider=\"p\"} 2",
    ] {
        assert!(metrics.contains(want), "{want} not in:\n{metrics}");
    }
    // Route saves its own counts; they keep the probe's out of its file,
    // and the check's file keeps route's out: both still add up.
    assert_eq!(srv.chat("p::m", false).status, 200);
    // Read from the files alone, as a one-shot `route --status` does once
    // the router has saved: 3 in all, 1 of them the probe's.
    eventually("the files add up", || {
        let r = env.run(&["--config", &cfg, "route", "--status", "--json"]);
        let v: Value = serde_json::from_str(&r.stdout).map_err(|e| e.to_string())?;
        let u = usage_line(&v, "p", "rpd").cloned().ok_or(v.to_string())?;
        match (u["used"].as_u64(), u["used_by_probes"].as_u64()) {
            (Some(3), Some(1)) => Ok(()),
            _ => Err(u.to_string()),
        }
    });
    drop(srv);
}

#[test]
fn an_active_model_served_three_times_is_not_probed_and_gets_no_log_entry() {
    let env = clock_env();
    let fake = Fake::start(&env, &[]);
    let cfg = config(&env, &[fake.provider("p", "openai", &["m", "n"], "")]);
    check(&env, &cfg, &[]).ok();
    advance(&env, 60);
    for _ in 0..3 {
        route_once(&env, &cfg, "p::m");
    }
    advance(&env, 3600);
    let before = fake.seen().len();
    let r = check(&env, &cfg, &[]).ok();
    assert!(r.stdout.contains("traffic: 3 ok since"), "{}", r.stdout);
    let seen: Vec<String> = fake.seen()[before..]
        .iter()
        .map(|s| s.model().to_string())
        .collect();
    assert_eq!(
        seen,
        ["n"],
        "only the model traffic did not prove was probed"
    );
    let entries = log_entries(&env.log());
    assert_eq!(
        entries.iter().filter(|e| e["model"] == "m").count(),
        1,
        "traffic writes no log entry"
    );
    // A failure in traffic makes the next probe due at once; a paused
    // model is always probed, traffic or not.
    env.run(&["--config", &cfg, "state", "pause", "p::m"]).ok();
    let before = fake.seen().len();
    check(&env, &cfg, &[]).ok();
    assert!(
        fake.seen()[before..].iter().any(|s| s.model() == "m"),
        "the paused model was probed"
    );
}

#[test]
fn a_model_probed_every_12_hours_by_design_is_not_stale_at_hour_3_and_the_views_say_so() {
    let (env, _fake, cfg) = budgeted(&["m"], "limits = { rpd = 20 }");
    check(&env, &cfg, &[]).ok();
    advance(&env, 3 * 3600);
    let brief = env.run(&["--config", &cfg, "brief"]).ok();
    assert!(!brief.stdout.contains("STALE"), "{}", brief.stdout);
    assert!(!brief.stdout.contains("is stale"), "{}", brief.stdout);
    assert!(
        brief
            .stdout
            .contains("p::m: probed every 12h: 20 requests/day, probes use 2"),
        "{}",
        brief.stdout
    );
    let state = env.run(&["--config", &cfg, "state"]).ok();
    assert!(
        state
            .stdout
            .contains("p::m: probed every 12h: 20 requests/day, probes use 2"),
        "{}",
        state.stdout
    );
    let page = env
        .run(&["--config", &cfg, "rollup", "--format", "html"])
        .ok();
    assert!(
        page.stdout
            .contains("<small class=\"cadence\">probed every 12h"),
        "the status page says the cadence"
    );
    // Three cadences without a probe (one may go to a capability probe):
    // stale, and said against the cadence.
    advance(&env, 37 * 3600);
    let brief = env.run(&["--config", &cfg, "brief"]).ok();
    assert!(
        brief
            .stdout
            .contains("STALE: NO PROBE IN THE LAST 36 HOURS"),
        "{}",
        brief.stdout
    );
}

#[test]
fn brief_counts_the_models_routes_traffic_has_proven() {
    let env = clock_env();
    let fake = Fake::start(&env, &[]);
    let cfg = config(&env, &[fake.provider("p", "openai", &["m"], "")]);
    check(&env, &cfg, &[]).ok();
    // Three hours without a probe, but route serves it and the hourly
    // `check` leaves it to the traffic: not stale.
    advance(&env, 3 * 3600);
    for _ in 0..3 {
        route_once(&env, &cfg, "p::m");
    }
    let r = check(&env, &cfg, &[]).ok();
    assert!(r.stdout.contains("traffic: 3 ok since"), "{}", r.stdout);
    let brief = env.run(&["--config", &cfg, "brief"]).ok();
    assert!(!brief.stdout.contains("STALE"), "{}", brief.stdout);
    assert!(!brief.stdout.contains("is stale"), "{}", brief.stdout);
    // With no `check` since, three more hours are stale: a stopped
    // scheduler is not hidden by traffic.
    advance(&env, 6 * 3600);
    for _ in 0..3 {
        route_once(&env, &cfg, "p::m");
    }
    let stale = env.run(&["--config", &cfg, "brief"]).ok();
    assert!(stale.stdout.contains("STALE"), "{}", stale.stdout);
    assert!(
        brief
            .stdout
            .contains("proven by route's traffic since the last probe (1 model"),
        "{}",
        brief.stdout
    );
    assert!(
        brief.stdout.contains("p::m: 3 ok since"),
        "{}",
        brief.stdout
    );
    let v: Value =
        serde_json::from_str(&env.run(&["--config", &cfg, "brief", "--json"]).ok().stdout).unwrap();
    assert_eq!(v["proven_by_traffic"][0]["model"], "p::m", "{v}");
}

#[test]
fn a_routed_failure_makes_the_probe_due_at_once_and_a_paused_model_is_probed_every_run() {
    let env = clock_env();
    // The probe passes, the routed request gets a 503, the probes after
    // pass.
    let fake = Fake::start(&env, &["m=ok,e503,ok,ok,ok"]);
    let extra = format!("limits = {{ rpd = 40 }}\n{}", far_reset());
    let cfg = config(&env, &[fake.provider("p", "openai", &["m"], &extra)]);
    check(&env, &cfg, &[]).ok();
    advance(&env, 60);
    check(&env, &cfg, &[]).ok();
    assert_eq!(fake.seen().len(), 1, "not due again in its 6 h slot");
    env.run(&[
        "--config",
        &cfg,
        "route",
        "--model",
        "p::m",
        "What is 2 + 2?",
    ]);
    assert_eq!(fake.seen().len(), 2);
    advance(&env, 120);
    check(&env, &cfg, &[]).ok();
    assert_eq!(fake.seen().len(), 3, "the routed failure made it due");
    // Paused, it is probed at every run while the allowance (4) lasts.
    env.run(&["--config", &cfg, "state", "pause", "p::m"]).ok();
    advance(&env, 180);
    check(&env, &cfg, &[]).ok();
    assert_eq!(fake.seen().len(), 4, "a paused model is due every run");
    env.run(&["--config", &cfg, "state", "pause", "p::m"]).ok();
    advance(&env, 240);
    let r = check(&env, &cfg, &[]).ok();
    assert_eq!(fake.seen().len(), 4, "the allowance is spent");
    assert!(
        r.stdout
            .contains("budget: rpd 4 of 40 used today, probes may use 4"),
        "{}",
        r.stdout
    );
}
