//! The status page through the real binary: `rollup --format html` (its
//! figures are `rollup --format json`'s, its public form holds no error
//! text, host, URL or key id) and `route --serve`'s `GET /status` (behind
//! the token, public with `[route] public_status`, live).

use serde_json::Value;

use crate::support::{
    Env, Fake, RouteServer, advance, ago, clock_env, eventually, http, page, route_config,
};

const H: i64 = 3600;
const D: i64 = 24 * H;

/// A host, a URL, a key and an account id that the public page must not
/// show.
const HOST: &str = "api.secret-host.example";
const KEY: &str = "sk-live-abcdefghijklmnop1234";
const ACCOUNT: &str = "acct-77a1b2c3";

fn entry(age: i64, provider: &str, model: &str, ok: bool, latency: u64, failure: &str) -> String {
    let err = if ok {
        String::new()
    } else {
        format!(r#","status":500,"error":"https://{HOST}/v1 said no to {KEY}""#)
    };
    format!(
        r#"{{"ts":"{}","provider":"{provider}","model":"{model}","ok":{},"latency_ms":{latency},"failure_type":"{failure}"{err}}}"#,
        ago(age),
        ok as u8
    )
}

/// Two providers over 100 days: probes in the last day, week, month and
/// quarter, one older than the 90-day window, a legacy averaged entry, a
/// disabled_skip row and a re-probe.
fn fixture(env: &Env) {
    let mut e = vec![
        entry(100 * D, "groq", "llama", false, 0, "timeout"),
        entry(60 * D + 5 * H, "groq", "llama", true, 900, ""),
        entry(20 * D + 5 * H, "groq", "llama", false, 0, "timeout"),
        entry(5 * D + 5 * H, "groq", "llama", true, 400, ""),
        entry(2 * H + 1800, "groq", "llama", true, 300, ""),
        entry(H + 1800, "groq", "llama", false, 0, "rate_limit"),
        entry(H + 1800, "groq", "llama-big", true, 1200, ""),
        entry(H + 1700, "mistral", "small", true, 640, ""),
        entry(H + 1600, "mistral", "large", false, 0, "disabled_skip"),
    ];
    // A legacy averaged entry: 10 probes, 5 passed.
    e.insert(
        2,
        format!(
            r#"{{"timestamp":"{}","provider":"mistral","model":"small","status":"averaged","latency_ms":100.0,"uptime":0.5,"sample_count":10}}"#,
            ago(10 * D + 5 * H)
        ),
    );
    e.push(format!(
        r#"{{"ts":"{}","provider":"mistral","model":"small","ok":1,"latency_ms":700,"failure_type":"","source":"reprobe"}}"#,
        ago(H + 1500)
    ));
    env.write(
        "stats/health_log.json",
        format!("[\n{}\n]\n", e.join(",\n")),
    );
    env.write(
        "stats/model_state.json",
        format!(
            r#"{{"groq::llama": {{"state": "paused", "reason": "timeout from https://{HOST}/accounts/{ACCOUNT} with {KEY}", "since": "{}", "consecutive_failures": 1}},
              "mistral::large": {{"state": "disabled", "reason": "wrong_answer", "since": "{}", "consecutive_failures": 3}}}}"#,
            ago(H),
            ago(3 * D)
        ),
    );
    env.write(
        "stats/capabilities.json",
        format!(
            r#"{{"groq::llama": {{"tools": {{"verdict": "no", "seen": "{}", "reason": "wrong_answer: called {HOST} <script>"}}, "json": {{"verdict": "yes", "seen": "{}"}}}}}}"#,
            ago(D),
            ago(D)
        ),
    );
    let until = (chrono::Utc::now() + chrono::Duration::hours(2)).to_rfc3339();
    let set = chrono::Utc::now().to_rfc3339();
    env.write(
        "stats/route_state.json",
        format!(
            r#"{{"version": 1, "cooldowns": {{"benches": [{{"target": "groq#key0:{ACCOUNT}::llama-big", "scope": "key_model", "until": "{until}", "reason": "rate_limit", "set_at": "{set}"}}]}}}}"#
        ),
    );
}

fn env() -> Env {
    with_config(Env::new())
}

/// `env`, with the two providers' catalog.
fn with_config(mut env: Env) -> Env {
    let cfg = env.write(
        "llmprobe.toml",
        "include_default_catalog = false\n\n[[providers]]\nname = \"groq\"\ndialect = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodels = [\"llama\", \"llama-big\"]\n\n[[providers]]\nname = \"mistral\"\ndialect = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodels = [\"small\", \"large\"]\n",
    );
    env.env("LLMPROBE_CONFIG", cfg.to_str().unwrap());
    env
}

/// The value of attribute `name` in the first tag that starts with
/// `start`.
fn attr(html: &str, start: &str, name: &str) -> String {
    let at = html
        .find(start)
        .unwrap_or_else(|| panic!("no {start} in the page"));
    let tag = &html[at..at + html[at..].find('>').unwrap()];
    let key = format!(" {name}=\"");
    let v = &tag[tag
        .find(&key)
        .unwrap_or_else(|| panic!("no {name} in {tag}"))
        + key.len()..];
    v[..v.find('"').unwrap()].to_string()
}

/// The provider's section, up to the next one.
fn section<'a>(html: &'a str, provider: &str) -> &'a str {
    let start = html
        .find(&format!(
            "<section class=\"provider\" data-provider=\"{provider}\""
        ))
        .unwrap_or_else(|| panic!("no section for {provider}"));
    let end = html[start..].find("</section>").unwrap() + start;
    &html[start..end]
}

fn rollup_json(env: &Env, window: &str) -> Value {
    let out = env
        .run(&["rollup", "--format", "json", "--window", window])
        .ok()
        .stdout;
    serde_json::from_str(&out).unwrap()
}

fn provider_row<'a>(v: &'a Value, provider: &str) -> &'a Value {
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["provider"] == provider)
        .unwrap_or_else(|| panic!("no row {provider} in {v}"))
}

fn frac(v: &Value) -> String {
    v.as_f64().map(|u| format!("{u:.4}")).unwrap_or_default()
}

#[test]
fn page_figures_are_rollups() {
    let env = env();
    fixture(&env);
    let before = chrono::Utc::now();
    let html = env.run(&["rollup", "--format", "html"]).ok().stdout;
    let after = chrono::Utc::now();
    assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
    assert!(!html.contains("http://") && !html.contains("https://"));
    for p in ["groq", "mistral"] {
        let s = section(&html, p);
        for (attr_name, window) in [
            ("data-uptime-24h", "24h"),
            ("data-uptime-7d", "7d"),
            ("data-uptime-30d", "30d"),
            ("data-uptime-window", "90d"),
        ] {
            let row = provider_row(&rollup_json(&env, window), p).clone();
            assert_eq!(
                attr(s, "<section", attr_name),
                frac(&row["uptime"]),
                "{p} {window}: {row}"
            );
            if window == "90d" {
                let samples = row["samples"].as_f64().unwrap() as i64;
                assert_eq!(
                    attr(s, "<section", "data-samples-window"),
                    samples.to_string()
                );
                // The bars add up to the window.
                let sum: f64 = page::bars(s).0.iter().map(|b| b.samples).sum();
                assert_eq!(sum as i64, samples, "{p}");
            }
        }
        // One bar per UTC day the 90 days touch: 91, the first partial
        // (groq, probed 100 days ago); from its first probe's day for
        // mistral, first probed 10 days ago: no history before, not drawn.
        let (bars, days) = page::bars(s);
        let built = page::built(&html).date_naive();
        if p == "groq" {
            assert_eq!(days, 91, "{p}");
            assert!(!s.contains("no-history"), "{s}");
        } else {
            let first = first_day(&env, p);
            assert_eq!(bars[0].day, first.format("%Y-%m-%d").to_string());
            assert_eq!(days as i64, (built - first).num_days() + 1, "{p}");
            assert!(
                s.contains(&format!(
                    "<p class=\"mut no-history\">Daily uptime per UTC day, from {}, the first probe (no history before), to {} (12 probes in the last 90 d):</p>",
                    first.format("%Y-%m-%d"),
                    built.format("%Y-%m-%d")
                )),
                "{s}"
            );
        }
        assert_eq!(bars.len(), days);
        assert!(bars.iter().all(|b| b.tabindex.as_deref() == Some("0")));
        // Each bar's day follows from the list's first day; the last is today's.
        page::assert_ends_today(&html, &bars, before, after);
    }
    // The legacy averaged entry counts 10 probes, 5 passed; the re-probe
    // counts, the disabled_skip row does not.
    let m = section(&html, "mistral");
    assert_eq!(attr(m, "<section", "data-samples-window"), "12");
    let averaged = page::bars(m)
        .0
        .into_iter()
        .find(|b| b.samples == 10.0)
        .unwrap_or_else(|| panic!("no bar of 10 probes: {m}"));
    assert_eq!(averaged.uptime_pct, Some(50.0), "{averaged:?}");
    assert_eq!(averaged.grade, "poor", "{averaged:?}");
    assert!(
        averaged.text.contains(": 50%, 10 probes, p95 "),
        "{averaged:?}"
    );
    assert!(m.contains(" class=\"g-poor\" tabindex=\"0\">"), "{m}");
    // A link past each provider's bars, to the next provider, then the end.
    assert!(
        html.contains("<a class=\"skip\" href=\"#p1\">Skip groq's "),
        "{html}"
    );
    assert!(m.contains("<a class=\"skip\" href=\"#end\">") && html.contains("<footer id=\"end\">"));
    // Each heading has its last 24 h's grade, as a class (its colour) and
    // in words; the header names the provider that is not ok.
    assert!(
        html.contains(
            "<h2 id=\"p0\" class=\"g-fair\">groq <span class=\"grade\">degraded</span></h2>"
        ),
        "{html}"
    );
    assert!(
        html.contains(
            "<h2 id=\"p1\" class=\"g-good\">mistral <span class=\"grade\">ok</span></h2>"
        ),
        "{html}"
    );
    assert!(
        html.contains("<p id=\"affected\">Degraded: <a href=\"#p0\">groq</a>.</p>"),
        "{html}"
    );
    // Per model: state with reason and since, the verdicts, the cooldown.
    assert!(
        m.contains("data-model=\"large\" data-state=\"disabled\""),
        "{m}"
    );
    assert!(m.contains("disabled: wrong_answer, since "), "{m}");
    let g = section(&html, "groq");
    assert!(
        g.contains("data-model=\"llama\" data-state=\"paused\""),
        "{g}"
    );
    assert!(g.contains("tools ✗ no") && g.contains("json ✔ yes") && g.contains("vision ? unknown"));
    // llama's newest probe: the rate limit, and when.
    let newest_llama = newest_of(&env, |e| e["model"] == "llama");
    assert!(
        g.contains(&format!(
            "<td>rate_limit (500) at {}</td>",
            newest_llama.format("%Y-%m-%d %H:%M UTC")
        )),
        "{g}"
    );
    assert!(g.contains("rate_limit until "), "{g}");
    // Escaped, and the key masked even in the full form.
    assert!(
        g.contains("&lt;script&gt;") && !html.contains("<script"),
        "{g}"
    );
    assert!(!html.contains(KEY), "a key on the page");
    assert_eq!(
        attr(&html, "<header", "data-state"),
        "degraded",
        "groq is at 2 of 3 in the last 24 h"
    );
    assert_eq!(
        attr(&html, "<time id=\"newest\"", "datetime"),
        rollup_json(&env, "all")["newest_probe"].as_str().unwrap(),
        "the newest probe"
    );
}

#[test]
fn public_page_has_no_error_text_hosts_or_ids() {
    let env = env();
    fixture(&env);
    // A fine-tune on Fireworks: its id names the account.
    let tuned = format!("accounts/{ACCOUNT}/models/tuned");
    let mut log = std::fs::read_to_string(env.stats().join("health_log.json")).unwrap();
    log.truncate(log.rfind(']').unwrap());
    log.push_str(&format!(
        ",\n{}\n]\n",
        entry(H, "groq", &tuned, true, 300, "")
    ));
    env.write("stats/health_log.json", log);
    let full = env.run(&["rollup", "--format", "html"]).ok().stdout;
    assert!(
        full.contains(HOST),
        "the full form keeps redacted error text"
    );
    assert!(full.contains(&format!("data-model=\"{tuned}\"")), "{full}");
    let out = env.path().join("public.html");
    env.run(&[
        "rollup",
        "--format",
        "html",
        "--public",
        "--output",
        out.to_str().unwrap(),
    ])
    .ok();
    let html = std::fs::read_to_string(&out).unwrap();
    for leak in [HOST, KEY, ACCOUNT, "said no", "called", "/accounts/"] {
        assert!(!html.contains(leak), "{leak} in the public page");
    }
    // What is safe stays: states, class words, verdicts, the cooldown.
    assert!(html.contains("data-model=\"llama\" data-state=\"paused\""));
    assert!(html.contains("disabled: wrong_answer"));
    assert!(html.contains("tools ✗ no"));
    assert!(html.contains("rate_limit until ") && html.contains("one key&#39;s use of this model"));
    // The fine-tune is there, its account masked.
    assert!(
        html.contains("data-model=\"accounts/…/models/tuned\""),
        "{html}"
    );
}

#[test]
fn provider_and_exclude_choose_the_sections() {
    let env = env();
    fixture(&env);
    let only = env
        .run(&["rollup", "--format", "html", "--provider", "mistral"])
        .ok()
        .stdout;
    assert!(only.contains("data-provider=\"mistral\"") && !only.contains("data-provider=\"groq\""));
    let not = env
        .run(&[
            "rollup",
            "--format",
            "html",
            "--exclude",
            "mistral",
            "--window",
            "7d",
        ])
        .ok()
        .stdout;
    assert!(!not.contains("data-provider=\"mistral\"") && not.contains("data-provider=\"groq\""));
    let (bars, days) = page::bars(&not);
    assert_eq!(days, 8, "7 days touch 8 UTC days");
    assert_eq!(bars.len(), days);
}

/// The newest log entry `keep` keeps.
fn newest_of(env: &Env, keep: impl Fn(&Value) -> bool) -> chrono::DateTime<chrono::Utc> {
    crate::support::log_entries(&env.stats().join("health_log.json"))
        .iter()
        .filter(|e| keep(e))
        .filter_map(|e| e["ts"].as_str()?.parse().ok())
        .max()
        .expect("an entry")
}

/// The header speaks of the providers shown: their newest probe, and the
/// whole record's staleness judged on them alone.
#[test]
fn the_header_follows_provider_and_exclude() {
    let env = env();
    fixture(&env);
    let groq = env
        .run(&["rollup", "--format", "html", "--provider", "groq"])
        .ok()
        .stdout;
    let newest_groq = newest_of(&env, |e| e["provider"] == "groq");
    assert_eq!(
        attr(&groq, "<time id=\"newest\"", "datetime"),
        newest_groq.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
        "groq's newest probe, not mistral's newer re-probe"
    );
    // groq probed 5 hours ago, mistral 10 minutes ago: a page of groq
    // alone is a stale record; one of mistral alone is not.
    env.write(
        "stats/health_log.json",
        format!(
            "[\n{},\n{}\n]\n",
            entry(5 * H, "groq", "llama", true, 300, ""),
            entry(600, "mistral", "small", true, 300, "")
        ),
    );
    let stale = "STALE: NO PROBE IN THE LAST 2 HOURS";
    let groq = env
        .run(&["rollup", "--format", "html", "--exclude", "mistral"])
        .ok()
        .stdout;
    assert!(groq.contains(stale), "{groq}");
    let mistral = env
        .run(&["rollup", "--format", "html", "--provider", "mistral"])
        .ok()
        .stdout;
    assert!(!mistral.contains(stale), "{mistral}");
    assert!(!mistral.contains("class=\"stale-warning\""), "{mistral}");
}

/// A name in neither the catalog nor the log, in --provider or --exclude,
/// is a usage error naming the flag and the known names, in every format
/// that takes them; a name the log alone knows is fine.
#[test]
fn an_unknown_provider_or_exclude_is_refused() {
    let env = env();
    fixture(&env);
    let mut log = std::fs::read_to_string(env.stats().join("health_log.json")).unwrap();
    log.truncate(log.rfind(']').unwrap());
    log.push_str(&format!(
        ",\n{}\n]\n",
        entry(H, "retired", "old", true, 300, "")
    ));
    env.write("stats/health_log.json", log);
    for format in ["html", "md", "json", "csv", "prom"] {
        for flag in ["--provider", "--exclude"] {
            let r = env
                .run(&["rollup", "--format", format, flag, "grok"])
                .code(2);
            assert!(
                r.stderr
                    .contains(&format!("{flag}: unknown provider \"grok\""))
                    && r.stderr.contains("known providers: groq, mistral, retired"),
                "{format} {flag}: {}",
                r.stderr
            );
            assert!(r.stdout.is_empty(), "{format} {flag}: {}", r.stdout);
        }
        // Known to the log only, or to the catalog only: shown or left out.
        env.run(&["rollup", "--format", format, "--provider", "retired"])
            .ok();
        env.run(&["rollup", "--format", format, "--exclude", "groq"])
            .ok();
    }
}

/// A window the page cannot draw one bar a day for is a usage error,
/// not an allocation: at most 400 days, and `all` over a log that goes
/// back further.
#[test]
fn a_window_too_long_for_the_page_is_refused() {
    let env = env();
    fixture(&env);
    for w in ["401d", "1000000d", "100000000000d", "60w"] {
        let r = env
            .run(&["rollup", "--format", "html", "--window", w])
            .code(2);
        assert!(
            r.stderr.contains(&format!("--window {w}")) && r.stderr.contains("at most 400 days"),
            "{w}: {}",
            r.stderr
        );
        assert!(r.stdout.is_empty());
    }
    let html = env
        .run(&["rollup", "--format", "html", "--window", "400d"])
        .ok()
        .stdout;
    // A window of 401 days (a bar is 1/401 of the row), whose bars start
    // at groq's first probe, 100 days ago: no history before.
    assert!(
        html.contains(".bars>li{flex-basis:calc((100% + 1px)/401 - 1px)}"),
        "{html}"
    );
    let (bars, _) = page::bars(&html);
    assert_eq!(
        bars[0].day,
        first_day(&env, "groq").format("%Y-%m-%d").to_string()
    );
    // `all`, over a log whose first entry is 500 days old.
    let mut log = std::fs::read_to_string(env.stats().join("health_log.json")).unwrap();
    log.replace_range(
        ..2,
        &format!("[\n{},\n", entry(500 * D, "groq", "llama", true, 300, "")),
    );
    env.write("stats/health_log.json", log);
    let r = env
        .run(&["rollup", "--format", "html", "--window", "all"])
        .code(2);
    assert!(
        r.stderr.contains("--window all:") && r.stderr.contains("pass --window 400d or less"),
        "{}",
        r.stderr
    );
    // The other formats take any window, as before.
    env.run(&["rollup", "--format", "json", "--window", "all"])
        .ok();
}

#[test]
fn empty_stats_dir_says_no_data() {
    let env = Env::new();
    let out = env.path().join("status.html");
    let r = env
        .run(&[
            "rollup",
            "--format",
            "html",
            "--output",
            out.to_str().unwrap(),
        ])
        .ok();
    assert!(r.stderr.contains("no probes recorded"), "{}", r.stderr);
    let html = std::fs::read_to_string(&out).unwrap();
    assert_eq!(attr(&html, "<header", "data-state"), "no_data");
    assert!(html.contains("class=\"no-data\""));
    assert!(
        html.contains("no cooldowns recorded (no route_state.json)."),
        "{html}"
    );
}

fn status(srv: &RouteServer, token: Option<&str>) -> crate::support::Http {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth
        .as_deref()
        .map(|a| vec![("authorization", a)])
        .unwrap_or_default();
    http("GET", &format!("{}/status", srv.url), &headers, None)
}

#[test]
fn served_status_needs_the_token_and_follows_the_states() {
    let mut env = with_config(clock_env());
    env.env("ROUTE_TOKEN", "s3cret-token");
    fixture(&env);
    let fake = Fake::start(&env, &[]);
    let cfg = route_config(
        &env,
        &[fake.provider("groq", "openai", &["llama", "llama-big"], "")],
        "[route]\nauth_token_env = \"ROUTE_TOKEN\"\n",
    );
    // No paused model for route's re-prober to bring back meanwhile.
    env.write("stats/model_state.json", "{}");
    let log = env.path().join("route.log");
    let srv = RouteServer::start_logged(&env, &cfg, &[], &log);
    let said = format!(
        "route: status page: {0}/status, badges: {0}/badge/PROVIDER.svg (needs the token)",
        srv.url
    );
    assert_eq!(status(&srv, None).status, 401);
    assert_eq!(status(&srv, Some("wrong")).status, 401);
    let r = status(&srv, Some("s3cret-token"));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("content-type"), "text/html; charset=utf-8");
    assert!(
        r.body
            .contains("data-model=\"llama\" data-state=\"active\""),
        "{}",
        r.body
    );
    // The full form for a token holder: the verdict's reason.
    assert!(r.body.contains(HOST));
    // The cooldown route holds (loaded from route_state.json at start).
    assert!(r.body.contains("rate_limit until "), "{}", r.body);
    // A person disables the model. The page is kept 5 s of route's clock
    // (src/route/serve/status_page.rs's unit tests show it is never built
    // per request, without waiting on a real clock); once it is older
    // than that, the next request builds it again, with the model
    // disabled.
    env.write(
        "stats/model_state.json",
        r#"{"groq::llama": {"state": "disabled", "reason": "wrong_answer", "since": "2026-01-01T00:00:00Z", "consecutive_failures": 3}}"#,
    );
    let mut secs = 0;
    eventually("the page shows llama disabled", || {
        secs += 6;
        advance(&env, secs);
        let r = status(&srv, Some("s3cret-token"));
        if r.body
            .contains("data-model=\"llama\" data-state=\"disabled\"")
            && r.body.contains("disabled: wrong_answer")
        {
            Ok(())
        } else {
            Err(r
                .body
                .lines()
                .filter(|l| l.contains("data-model"))
                .collect::<Vec<_>>()
                .join("\n"))
        }
    });
    drop(srv);
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert!(stderr.lines().any(|l| l == said), "{said}\n{stderr}");
}

/// A `capabilities.json` route cannot parse costs the verdicts and one
/// warning, however many pages are built, and is left as it is.
#[test]
fn served_status_warns_once_about_a_bad_capabilities_file() {
    let env = with_config(clock_env());
    fixture(&env);
    let bad = "{\"groq::llama\": {";
    env.write("stats/capabilities.json", bad);
    let fake = Fake::start(&env, &[]);
    let cfg = route_config(
        &env,
        &[fake.provider("groq", "openai", &["llama", "llama-big"], "")],
        "[route]\npublic_status = true\n",
    );
    let log = env.path().join("route.log");
    let srv = RouteServer::start_logged(&env, &cfg, &[], &log);
    for secs in [0, 6, 12] {
        advance(&env, secs);
        let r = status(&srv, None);
        assert_eq!(r.status, 200, "{}", r.body);
        assert!(r.body.contains("data-model=\"llama\""), "{}", r.body);
        assert!(
            !r.body.contains("tools ✗ no"),
            "no verdicts from a bad file"
        );
    }
    drop(srv);
    let stderr = std::fs::read_to_string(&log).unwrap();
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("/status") && l.contains("capabilities.json"))
        .collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(warnings[0].starts_with("warning: "), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(env.stats().join("capabilities.json")).unwrap(),
        bad
    );
}

#[test]
fn public_status_serves_the_public_form_without_a_token() {
    let mut env = env();
    env.env("ROUTE_TOKEN", "s3cret-token");
    fixture(&env);
    let fake = Fake::start(&env, &[]);
    let cfg = route_config(
        &env,
        &[fake.provider("groq", "openai", &["llama", "llama-big"], "")],
        "[route]\nauth_token_env = \"ROUTE_TOKEN\"\npublic_status = true\n",
    );
    let log = env.path().join("route.log");
    let srv = RouteServer::start_logged(&env, &cfg, &[], &log);
    let r = status(&srv, None);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("data-provider=\"groq\""));
    assert!(
        r.body.contains("cooldowns from route (live)."),
        "{}",
        r.body
    );
    for leak in [HOST, KEY, ACCOUNT] {
        assert!(!r.body.contains(leak), "{leak} in the public page");
    }
    // The API itself still needs the token.
    assert_eq!(
        http("GET", &format!("{}/v1/models", srv.url), &[], None).status,
        401
    );
    let said = format!(
        "route: status page: {0}/status, badges: {0}/badge/PROVIDER.svg (public: [route] public_status = true)",
        srv.url
    );
    drop(srv);
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert!(stderr.lines().any(|l| l == said), "{said}\n{stderr}");
}

#[test]
fn window_all_counts_the_whole_log() {
    let env = env();
    fixture(&env);
    let html = env
        .run(&["rollup", "--format", "html", "--window", "all"])
        .ok()
        .stdout;
    let all = rollup_json(&env, "all");
    for p in ["groq", "mistral"] {
        let s = section(&html, p);
        let row = provider_row(&all, p);
        assert_eq!(
            attr(s, "<section", "data-uptime-window"),
            frac(&row["uptime"])
        );
        let samples = row["samples"].as_f64().unwrap() as i64;
        assert_eq!(
            attr(s, "<section", "data-samples-window"),
            samples.to_string()
        );
        // From the first entry's day (100 days ago; mistral's own first
        // probe, 10 days ago, for mistral) to the day the page was built.
        let first = match p {
            "groq" => ago_of_first(&env)
                .as_str()
                .unwrap()
                .parse::<chrono::DateTime<chrono::Utc>>()
                .unwrap()
                .date_naive(),
            _ => first_day(&env, p),
        };
        assert_eq!(
            attr(s, "<ol class=\"bars\"", "data-first-day"),
            first.format("%Y-%m-%d").to_string()
        );
        let built = page::built(&html).date_naive();
        let days: usize = attr(s, "<ol class=\"bars\"", "data-days").parse().unwrap();
        assert_eq!(days as i64, (built - first).num_days() + 1, "{p}");
        if p == "groq" {
            assert!((built - first).num_days() >= 100, "{first} {built}");
        }
    }
}

/// The UTC day of `provider`'s oldest log entry (`ts`, or a legacy
/// entry's `timestamp`).
fn first_day(env: &Env, provider: &str) -> chrono::NaiveDate {
    crate::support::log_entries(&env.stats().join("health_log.json"))
        .iter()
        .filter(|e| e["provider"] == provider)
        .filter_map(|e| e.get("ts").or(e.get("timestamp"))?.as_str()?.parse().ok())
        .map(|t: chrono::DateTime<chrono::Utc>| t.date_naive())
        .min()
        .expect("an entry")
}

/// A provider probed for the first time today has no history yet: the
/// page says so, and draws today's bar alone, not 90 empty days before
/// it; one probed since two days ago has three bars, and no history
/// before them. A provider with older history keeps all 91.
#[test]
fn a_new_provider_has_no_history_yet_instead_of_empty_days() {
    let env = env();
    env.write(
        "stats/health_log.json",
        format!(
            "[\n{}\n]\n",
            [
                entry(100 * D, "groq", "llama", true, 300, ""),
                entry(2 * D, "mistral", "small", true, 300, ""),
                entry(60, "groq", "llama", true, 300, ""),
                entry(60, "mistral", "small", true, 300, ""),
                entry(30, "newbie", "m", false, 0, "timeout"),
            ]
            .join(",\n")
        ),
    );
    // A third provider in the catalog.
    let catalog = std::fs::read_to_string(env.path().join("llmprobe.toml")).unwrap();
    env.write(
        "llmprobe.toml",
        format!("{catalog}\n[[providers]]\nname = \"newbie\"\ndialect = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodels = [\"m\"]\n"),
    );
    let html = env.run(&["rollup", "--format", "html"]).ok().stdout;
    let built = page::built(&html);
    let today = built.format("%Y-%m-%d").to_string();
    let n = section(&html, "newbie");
    let (bars, days) = page::bars(n);
    assert_eq!((days, bars.len()), (1, 1), "{n}");
    assert_eq!(bars[0].day, today);
    assert!(
        n.contains("<p class=\"mut no-history\">No history yet: the first probe was today (1 probe). One bar a day from here on, for the last 90 d:</p>"),
        "{n}"
    );
    assert!(n.contains("Skip newbie's 1 days"), "{n}");
    let m = section(&html, "mistral");
    let (bars, _) = page::bars(m);
    let first = first_day(&env, "mistral");
    assert_eq!(bars[0].day, first.format("%Y-%m-%d").to_string(), "{m}");
    assert_eq!(
        bars.len() as i64,
        (built.date_naive() - first).num_days() + 1,
        "{m}"
    );
    assert!(m.contains("(no history before)"), "{m}");
    let g = section(&html, "groq");
    assert_eq!(page::bars(g).1, 91);
    assert!(!g.contains("no-history"), "{g}");
    // newbie's only probe failed: down, named in the header.
    assert!(
        n.contains("<h2 id=\"p2\" class=\"g-poor\">newbie <span class=\"grade\">down</span></h2>"),
        "{n}"
    );
    assert!(
        html.contains("<p id=\"affected\">Down: <a href=\"#p2\">newbie</a>.</p>"),
        "{html}"
    );
}

/// The log's first entry's `ts`.
fn ago_of_first(env: &Env) -> Value {
    crate::support::log_entries(&env.stats().join("health_log.json"))[0]["ts"].clone()
}

#[test]
fn a_bad_route_state_costs_the_cooldowns_only() {
    let env = env();
    fixture(&env);
    let bad = "{\"version\": 1, \"cooldowns\": [";
    env.write("stats/route_state.json", bad);
    let r = env.run(&["rollup", "--format", "html"]).ok();
    assert!(r.stderr.contains("route_state.json"), "{}", r.stderr);
    assert!(r.stdout.contains("data-provider=\"groq\""));
    assert!(!r.stdout.contains("rate_limit until "));
    // Left as it was.
    assert_eq!(
        std::fs::read_to_string(env.stats().join("route_state.json")).unwrap(),
        bad
    );
}
