//! Badges through the real binary: `rollup --format badge` against
//! `rollup --format json`'s figures, its errors, and `route --serve`'s
//! `/badge/…` (auth, `[route] public_status`, the URL forms, the cache).
//! Every badge is read with a real XML parser.

use serde_json::Value;

use crate::support::{Env, Fake, RouteServer, Run, advance, ago, clock_env, http, route_config};

const MODEL_8B: &str = "llama-3.1-8b-instant";
const MODEL_70B: &str = "llama-3.3-70b-versatile";
/// A model id with the characters a URL path must carry: `/` and `:`.
const OR_MODEL: &str = "meta-llama/llama-3.3-70b-instruct:free";

/// One entry as llmprobe writes it.
fn entry(secs_ago: i64, provider: &str, model: &str, ok: bool, latency: u64) -> String {
    format!(
        r#"{{"ts":"{}","provider":"{provider}","model":"{model}","ok":{},"latency_ms":{latency},"failure_type":"{}"}}"#,
        ago(secs_ago),
        ok as u8,
        if ok { "" } else { "rate_limit" }
    )
}

/// groq's 8B model passes 3 of 4 in the last day (100, 300, 500 ms), its
/// 70B model 1 of 1 (2600 ms); openrouter's model passes once; `retired`,
/// a provider only the log knows, once; all but one entry (a failure of
/// the 8B model 3 days ago) inside 24 h.
fn log_lines() -> Vec<String> {
    vec![
        entry(3 * 86_400, "groq", MODEL_8B, false, 0),
        entry(5 * 3600, "groq", MODEL_8B, true, 100),
        entry(4 * 3600, "groq", MODEL_8B, false, 0),
        entry(3 * 3600, "groq", MODEL_8B, true, 300),
        entry(2 * 3600, "groq", MODEL_8B, true, 500),
        entry(2 * 3600, "groq", MODEL_70B, true, 2600),
        entry(3600, "openrouter", OR_MODEL, true, 812),
        entry(3600, "retired", "m", true, 90),
    ]
}

fn write_log(env: &Env, lines: &[String]) {
    env.write(
        "stats/health_log.json",
        format!("[\n{}\n]\n", lines.join(",\n")),
    );
}

/// The catalog: groq and openrouter with those models, and mistral, which
/// has no probes.
fn catalog(url: &str) -> Vec<String> {
    let p = |name: &str, models: &[&str]| {
        crate::support::provider_toml(name, "openai", &format!("{url}/v1"), models, "")
    };
    vec![
        p("groq", &[MODEL_8B, MODEL_70B]),
        p("openrouter", &[OR_MODEL]),
        p("mistral", &["mistral-small-latest"]),
    ]
}

/// A parsed badge: its visible texts, accessible name and message colour.
#[derive(Debug, PartialEq)]
struct Seen {
    label: String,
    message: String,
    aria: String,
    fill: String,
}

fn read_badge(svg: &str) -> Seen {
    let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("not XML: {e}\n{svg}"));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg", "{svg}");
    assert_eq!(root.attribute("role"), Some("img"), "{svg}");
    let texts: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text") && n.attribute("aria-hidden").is_none())
        .map(|n| n.text().unwrap_or(""))
        .collect();
    assert_eq!(texts.len(), 2, "{svg}");
    let title = root
        .children()
        .find(|n| n.has_tag_name("title"))
        .and_then(|n| n.text())
        .unwrap_or_else(|| panic!("no title in {svg}"));
    let aria = root.attribute("aria-label").unwrap().to_string();
    assert_eq!(title, aria);
    // The message's background: the rect that starts where the label ends.
    let fill = doc
        .descendants()
        .find(|n| n.has_tag_name("rect") && n.attribute("x").is_some())
        .and_then(|n| n.attribute("fill"))
        .unwrap()
        .to_string();
    Seen {
        label: texts[0].to_string(),
        message: texts[1].to_string(),
        aria,
        fill,
    }
}

fn json(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("{e}: {s}"))
}

fn row<'a>(v: &'a Value, provider: &str, model: Option<&str>) -> &'a Value {
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["provider"] == provider && r.get("model").and_then(Value::as_str) == model)
        .unwrap_or_else(|| panic!("no row {provider} {model:?} in {v}"))
}

/// An environment with the log and a config naming `url` as every
/// provider's base URL.
fn setup(env: &Env, url: &str, route: &str) -> String {
    write_log(env, &log_lines());
    route_config(env, &catalog(url), route)
}

/// `llmprobe --config CFG rollup --format badge EXTRA…`.
fn rollup_badge(env: &Env, cfg: &str, extra: &[&str]) -> Run {
    let mut a = vec!["--config", cfg, "rollup", "--format", "badge"];
    a.extend_from_slice(extra);
    env.run(&a)
}

#[test]
fn badge_figures_are_rollup_json_figures() {
    let env = Env::new();
    let cfg = setup(&env, "http://127.0.0.1:9", "");
    let rollup = |extra: &[&str]| {
        let mut a = vec!["--config", &cfg, "rollup"];
        a.extend_from_slice(extra);
        env.run(&a).ok().stdout
    };
    let badge = |extra: &[&str]| {
        let mut a = vec!["--format", "badge"];
        a.extend_from_slice(extra);
        read_badge(&rollup(&a))
    };
    for window in ["24h", "7d"] {
        let v = json(&rollup(&[
            "--format", "json", "--by", "model", "--window", window,
        ]));
        let p = json(&rollup(&["--format", "json", "--window", window]));
        // Uptime: the provider's and the model's, as rollup rounds them.
        let g = badge(&["--provider", "groq", "--window", window]);
        let groq_up = row(&p, "groq", None)["uptime"].as_f64().unwrap();
        let want = if window == "24h" { 0.8 } else { 4.0 / 6.0 };
        assert!((groq_up - want).abs() < 1e-9, "{p}");
        let want_text = if window == "24h" { "80%" } else { "66.7%" };
        assert_eq!(g.message, want_text, "{g:?}");
        assert_eq!(g.label, format!("groq uptime {window}"));
        assert_eq!(g.aria, format!("groq uptime {window}: {want_text}"));
        let m = badge(&[
            "--provider",
            "groq",
            "--model",
            MODEL_8B,
            "--window",
            window,
        ]);
        let up = row(&v, "groq", Some(MODEL_8B))["uptime"].as_f64().unwrap();
        assert_eq!(
            m.message,
            if window == "24h" { "75%" } else { "60%" },
            "{up}"
        );
        assert_eq!(m.label, format!("groq::{MODEL_8B} uptime {window}"));
        // Latency: the median of the probes that got a response.
        let median = row(&v, "groq", Some(MODEL_8B))["median_latency_ms"]
            .as_f64()
            .unwrap_or_else(|| panic!("no median in {v}"));
        assert!((median - 300.0).abs() <= 300.0 * 0.02, "{median}");
        let l = badge(&[
            "--provider",
            "groq",
            "--model",
            &format!("groq::{MODEL_8B}"),
            "--metric",
            "latency",
            "--window",
            window,
        ]);
        assert_eq!(l.message, format!("{} ms", median.round()));
        assert_eq!(l.label, format!("groq::{MODEL_8B} latency {window}"));
    }
    // Colours follow the grades: 80% is fair, 100% good, a slow median
    // (2.6 s) fair, no data grey; the text says it either way.
    let fair = badge(&["--provider", "groq"]);
    let good = badge(&["--provider", "openrouter"]);
    assert_eq!(good.message, "100%");
    let slow = badge(&[
        "--provider",
        "groq",
        "--model",
        MODEL_70B,
        "--metric",
        "latency",
    ]);
    assert_eq!(slow.message, "2600 ms");
    assert_eq!(slow.fill, fair.fill, "{slow:?} {fair:?}");
    let none = badge(&["--provider", "mistral"]);
    assert_eq!(none.message, "no data");
    let mut fills = vec![&fair.fill, &good.fill, &none.fill];
    fills.dedup();
    assert_eq!(fills.len(), 3, "{fills:?}");
    // A provider only the log knows (retired from the catalog) has one.
    assert_eq!(badge(&["--provider", "retired"]).message, "100%");
    // All time.
    assert_eq!(
        badge(&["--provider", "groq", "--window", "all"]).label,
        "groq uptime all time"
    );
}

#[test]
fn badge_output_is_written_whole_and_stdout_stays_empty() {
    let env = Env::new();
    let cfg = setup(&env, "http://127.0.0.1:9", "");
    let r = rollup_badge(
        &env,
        &cfg,
        &[
            "--provider",
            "openrouter",
            "--model",
            OR_MODEL,
            "--output",
            "or.svg",
        ],
    )
    .ok();
    assert_eq!(r.stdout, "");
    let svg = std::fs::read_to_string(env.path().join("or.svg")).unwrap();
    let b = read_badge(&svg);
    assert_eq!(b.label, format!("openrouter::{OR_MODEL} uptime 24h"));
    assert_eq!(b.message, "100%");
    // No temporary file is left beside it.
    let names: Vec<String> = std::fs::read_dir(env.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("or.svg"))
        .collect();
    assert_eq!(names, ["or.svg"]);
}

#[test]
fn badge_window_ends_at_the_test_clock() {
    let env = clock_env();
    let cfg = setup(&env, "http://127.0.0.1:9", "");
    let badge = |env: &Env| {
        let r = rollup_badge(env, &cfg, &["--provider", "openrouter"]).ok();
        read_badge(&r.stdout).message
    };
    assert_eq!(badge(&env), "100%");
    // Two days on, openrouter's one probe (an hour ago) is out of the 24 h
    // window: the badge says so, as `rollup` would at that time.
    advance(&env, 2 * 86_400);
    assert_eq!(badge(&env), "no data");
}

#[test]
fn badge_errors_name_what_is_wrong() {
    let env = Env::new();
    let cfg = setup(&env, "http://127.0.0.1:9", "");
    let run = |extra: &[&str]| rollup_badge(&env, &cfg, extra);
    let r = run(&["--provider", "nope"]).code(2);
    assert!(
        r.stderr.contains("unknown provider \"nope\"") && r.stderr.contains("groq, mistral"),
        "{}",
        r.stderr
    );
    assert_eq!(r.stdout, "");
    let r = run(&["--provider", "groq", "--model", "llama-9"]).code(2);
    assert!(
        r.stderr
            .contains("unknown model \"llama-9\" of provider \"groq\""),
        "{}",
        r.stderr
    );
    // The hint names a command that lists a provider's models.
    assert!(
        r.stderr
            .contains("`llmprobe providers` lists each provider's models")
            && !r.stderr.contains("check --list"),
        "{}",
        r.stderr
    );
    // A model of another provider is not this one's.
    run(&["--provider", "groq", "--model", OR_MODEL]).code(2);
    let r = run(&[]).code(2);
    assert!(r.stderr.contains("needs --provider"), "{}", r.stderr);
    let r = run(&["--provider", "groq", "--provider", "mistral"]).code(2);
    assert!(r.stderr.contains("groq, mistral"), "{}", r.stderr);
    let r = run(&["--provider", "groq", "--by", "model"]).code(2);
    assert!(r.stderr.contains("--model M"), "{}", r.stderr);
    let r = run(&["--provider", "groq", "--exclude", "mistral"]).code(2);
    assert!(r.stderr.contains("--exclude"), "{}", r.stderr);
    let r = run(&["--provider", "groq", "--window", "7x"]).code(2);
    assert!(r.stderr.contains("invalid --window '7x'"), "{}", r.stderr);
    // --model and --metric are the badge's alone.
    let r = env
        .run(&["--config", &cfg, "rollup", "--metric", "latency"])
        .code(2);
    assert!(r.stderr.contains("--metric"), "{}", r.stderr);
    // An unreadable log is left alone, with exit 4.
    env.write(
        "stats/health_log.json",
        "[\n{\"ts\": 1, \"provider\": }\n,{}\n]\n",
    );
    let r = run(&["--provider", "groq", "--output", "x.svg"]).code(4);
    assert!(r.stderr.contains("health_log.json"), "{}", r.stderr);
    assert!(!env.path().join("x.svg").exists());
}

fn get(srv: &RouteServer, path: &str, token: Option<&str>) -> crate::support::Http {
    let bearer = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = bearer
        .iter()
        .map(|b| ("authorization", b.as_str()))
        .collect();
    http("GET", &format!("{}{path}", srv.url), &headers, None)
}

#[test]
fn served_badges_need_the_token_unless_the_status_is_public() {
    let mut env = clock_env();
    env.env("ROUTE_TOKEN", "s3cret-token");
    let fake = Fake::start(&env, &[]);
    let cfg = setup(
        &env,
        &fake.url,
        "[route]\nauth_token_env = \"ROUTE_TOKEN\"\n",
    );
    let srv = RouteServer::start(&env, &cfg, &[]);
    for token in [None, Some("wrong")] {
        let r = get(&srv, "/badge/groq.svg", token);
        assert_eq!(r.status, 401, "{token:?}: {}", r.body);
        assert!(!r.body.contains("<svg"), "{}", r.body);
    }
    let r = get(&srv, "/badge/groq.svg", Some("s3cret-token"));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(read_badge(&r.body).message, "80%");
    drop(srv);
    let cfg = setup(
        &env,
        &fake.url,
        "[route]\nauth_token_env = \"ROUTE_TOKEN\"\npublic_status = true\n",
    );
    let srv = RouteServer::start(&env, &cfg, &[]);
    let r = get(&srv, "/badge/groq.svg", None);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(read_badge(&r.body).message, "80%");
    // Only the badges (and the page) open up: the API still needs the token.
    assert_eq!(get(&srv, "/v1/models", None).status, 401);
}

#[test]
fn served_badges_are_rollups_badges_and_cache_their_figures() {
    let env = clock_env();
    let fake = Fake::start(&env, &[]);
    let cfg = setup(&env, &fake.url, "");
    let srv = RouteServer::start(&env, &cfg, &[]);
    let cli = |extra: &[&str]| rollup_badge(&env, &cfg, extra).ok().stdout;
    let served = |path: &str| {
        let r = get(&srv, path, None);
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        assert_eq!(r.header("content-type"), "image/svg+xml; charset=utf-8");
        assert_eq!(r.header("cache-control"), "max-age=60");
        r.body
    };
    // The same bytes as rollup's, for every URL form.
    assert_eq!(served("/badge/groq.svg"), cli(&["--provider", "groq"]));
    assert_eq!(
        served("/badge/groq.svg?window=7d&metric=latency"),
        cli(&[
            "--provider",
            "groq",
            "--window",
            "7d",
            "--metric",
            "latency"
        ])
    );
    let or = cli(&["--provider", "openrouter", "--model", OR_MODEL]);
    assert_eq!(read_badge(&or).message, "100%");
    for path in [
        "/badge/openrouter/meta-llama%2Fllama-3.3-70b-instruct%3Afree.svg",
        "/badge/openrouter/meta-llama/llama-3.3-70b-instruct:free.svg",
        "/badge/openrouter/openrouter%3A%3Ameta-llama%2Fllama-3.3-70b-instruct%3Afree.svg",
    ] {
        assert_eq!(served(path), or, "{path}");
    }
    assert_eq!(
        read_badge(&served("/badge/mistral.svg?window=all")).message,
        "no data"
    );
    // What cannot be drawn: a plain-text reason.
    for (path, status, says) in [
        ("/badge/groq.svg?window=7x", 400, "invalid window '7x'"),
        // Only the windows route caches: a new one per request would be a
        // read of the log per request.
        (
            "/badge/groq.svg?window=36h",
            400,
            "one of 24h, 7d, 30d, 90d, all",
        ),
        (
            "/badge/groq.svg?metric=speed",
            400,
            "invalid metric 'speed'",
        ),
        ("/badge/nope.svg", 404, "unknown provider \"nope\""),
        (
            "/badge/groq/llama-9.svg",
            404,
            "unknown model \"llama-9\" of provider \"groq\"",
        ),
        ("/badge/groq.png", 404, "/badge/PROVIDER/MODEL.svg"),
        ("/badge/groq/.svg", 404, "/badge/PROVIDER.svg"),
    ] {
        let r = get(&srv, path, None);
        assert_eq!(r.status, status, "{path}: {}", r.body);
        assert!(r.body.contains(says), "{path}: {}", r.body);
        assert!(r.header("content-type").starts_with("text/plain"), "{path}");
    }
    // Figures are cached for 10 s of route's clock (the cache's unit tests
    // in src/route/serve/badge.rs show it without a real clock); once
    // that has run out, a new failure shows.
    let mut lines = log_lines();
    lines.push(entry(60, "groq", MODEL_8B, false, 0));
    write_log(&env, &lines);
    advance(&env, 11);
    let after = read_badge(&served("/badge/groq.svg"));
    assert_eq!(after.message, "66.7%", "{after:?}");
    // A log that cannot be parsed: a 500 that names no local path, and
    // the log left as it is.
    let bad = "[\n{\"ts\": 1, \"provider\": }\n,{}\n]\n";
    env.write("stats/health_log.json", bad);
    advance(&env, 22);
    let r = get(&srv, "/badge/groq.svg", None);
    assert_eq!(r.status, 500, "{}", r.body);
    assert!(r.body.contains("cannot read the health log"), "{}", r.body);
    assert!(!r.body.contains("health_log.json"), "{}", r.body);
    assert_eq!(
        std::fs::read_to_string(env.path().join("stats/health_log.json")).unwrap(),
        bad
    );
}
