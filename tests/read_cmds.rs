//! `rollup`, `brief` and `state` through the real binary: figures on new,
//! legacy and mixed logs, windows, out-of-order clocks, the README block,
//! torn and damaged logs, and hand overrides of model states.

use std::time::Duration;

use serde_json::Value;

use crate::support::{Env, ago, compat_log};

/// A catalog of three small providers, so that listings are predictable.
const CONFIG: &str = r#"
include_default_catalog = false

[[providers]]
name = "groq"
dialect = "openai"
base_url = "http://127.0.0.1:9/v1"
api_key_env = "GROQ_API_KEY"
models = ["llama-3.1-8b-instant", "llama-3.3-70b-versatile"]

[[providers]]
name = "mistral"
dialect = "openai"
base_url = "http://127.0.0.1:9/v1"
api_key_env = "MISTRAL_API_KEY"
models = ["mistral-small-latest", "mistral-large-latest"]

[[providers]]
name = "cohere"
dialect = "openai"
base_url = "http://127.0.0.1:9/v1"
api_key_env = "COHERE_API_KEY"
models = ["command-r"]
"#;

fn env() -> Env {
    let mut e = Env::new();
    let cfg = e.write("llmprobe.toml", CONFIG);
    e.env("LLMPROBE_CONFIG", cfg.to_str().unwrap());
    e
}

const H: i64 = 3600;

/// One entry as llmprobe writes it.
fn e(secs_ago: i64, provider: &str, model: &str, ok: bool, latency: u64, failure: &str) -> String {
    format!(
        r#"{{"ts":"{}","provider":"{provider}","model":"{model}","ok":{},"latency_ms":{latency},"failure_type":"{failure}"}}"#,
        ago(secs_ago),
        ok as u8
    )
}

fn log_of(lines: &[String]) -> String {
    if lines.is_empty() {
        return "[\n]\n".into();
    }
    format!("[\n{}\n]\n", lines.join(",\n"))
}

fn json(stdout: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn row<'a>(v: &'a Value, provider: &str) -> &'a Value {
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["provider"] == provider && r.get("model").is_none())
        .unwrap_or_else(|| panic!("no row {provider} in {v}"))
}

fn close(a: &Value, b: f64, tol: f64) -> bool {
    (a.as_f64().unwrap_or(f64::NAN) - b).abs() <= tol
}

/// A typical small log: groq 3 of 4 passing in the last day plus an old
/// failure, mistral all passing, and a disabled_skip row.
fn sample_log() -> String {
    log_of(&[
        e(72 * H, "groq", "llama-3.1-8b-instant", false, 0, "timeout"),
        e(20 * H + 1800, "groq", "llama-3.1-8b-instant", true, 100, ""),
        e(
            10 * H + 1800,
            "groq",
            "llama-3.3-70b-versatile",
            true,
            200,
            "",
        ),
        e(
            5 * H + 1800,
            "groq",
            "llama-3.1-8b-instant",
            false,
            0,
            "rate_limit",
        ),
        e(H + 1800, "groq", "llama-3.1-8b-instant", true, 300, ""),
        e(H + 1800, "mistral", "mistral-small-latest", true, 640, ""),
        e(
            H + 1700,
            "mistral",
            "mistral-large-latest",
            false,
            0,
            "disabled_skip",
        ),
    ])
}

#[test]
fn rollup_figures_over_windows_and_groups() {
    let env = env();
    env.write("stats/health_log.json", sample_log());
    let v = json(&env.run(&["rollup", "--format", "json"]).ok().stdout);
    let g = row(&v, "groq");
    assert_eq!(g["samples"], 4.0);
    assert_eq!(g["uptime"], 0.75);
    assert_eq!(g["avg_latency_ms"], 200.0);
    assert!(close(&g["p95_latency_ms"], 300.0, 5.0), "{g}");
    assert_eq!(g["status"], "degraded");
    // disabled_skip is not a sample: mistral has one probe, not two.
    let m = row(&v, "mistral");
    assert_eq!(m["samples"], 1.0);
    assert_eq!(m["uptime"], 1.0);
    assert_eq!(v["window"], "24h");

    let v = json(
        &env.run(&["rollup", "--format", "json", "--window", "7d"])
            .ok()
            .stdout,
    );
    assert_eq!(row(&v, "groq")["samples"], 5.0);
    assert_eq!(row(&v, "groq")["uptime"], 0.6);
    assert_eq!(row(&v, "groq")["status"], "degraded");

    let v = json(
        &env.run(&["rollup", "--format", "json", "--window", "6h"])
            .ok()
            .stdout,
    );
    assert_eq!(row(&v, "groq")["samples"], 2.0);
    assert_eq!(row(&v, "groq")["uptime"], 0.5);
    assert_eq!(row(&v, "groq")["status"], "down");

    let v = json(
        &env.run(&["rollup", "--format", "json", "--by", "model"])
            .ok()
            .stdout,
    );
    let rows = v["rows"].as_array().unwrap();
    let small = rows
        .iter()
        .find(|r| r["model"] == "llama-3.1-8b-instant")
        .unwrap();
    assert_eq!(small["samples"], 3.0);
    assert!(close(&small["uptime"], 2.0 / 3.0, 1e-9));
    // The skipped mistral model still gets a row, with no samples.
    let large = rows
        .iter()
        .find(|r| r["model"] == "mistral-large-latest")
        .unwrap();
    assert_eq!(large["samples"], 0.0);
    assert!(large["uptime"].is_null());
    assert_eq!(large["status"], "no_samples");
}

#[test]
fn rollup_markdown_csv_and_prom() {
    let env = env();
    env.write("stats/health_log.json", sample_log());
    let md = env.run(&["rollup"]).ok().stdout;
    assert!(md.contains("## Provider Health (Last 24h)"), "{md}");
    assert!(
        md.contains("| **groq** | ⚠️ | 75% | — · 75% · 60% | 200ms | 300ms | 4 |"),
        "{md}"
    );
    assert!(
        md.contains("| **mistral** | ✅ | 100% | — · 100% · 100% | 640ms | 640ms | 1 |"),
        "{md}"
    );
    assert!(md.contains("✅ ≥90% uptime · ⚠️ 60–90% · ❌ <60%"), "{md}");
    // Highest uptime first: mistral (100%, 640 ms) before the faster groq
    // (75%, 200 ms).
    assert!(
        md.find("**mistral**").unwrap() < md.find("**groq**").unwrap(),
        "{md}"
    );
    // No streamed probe in this log: no first-token column.
    assert!(!md.contains("TTFT") && !md.contains("Tokens/s"), "{md}");
    // Trend: 24 hourly buckets; groq's last bucket with data passed.
    assert!(md.contains("24 buckets of 1h"), "{md}");
    let groq = md.lines().find(|l| l.contains("**groq**")).unwrap();
    let spark = groq.rsplit('|').nth(1).unwrap().trim();
    assert_eq!(spark.chars().count(), 24, "{spark}");
    assert_eq!(spark.chars().filter(|c| *c == '█').count(), 3, "{spark}");
    assert_eq!(spark.chars().filter(|c| *c == '▁').count(), 1, "{spark}");
    assert!(md.contains("Last checked: "), "{md}");

    let md = env.run(&["rollup", "--no-trend"]).ok().stdout;
    assert!(!md.contains("Trend"), "{md}");
    assert!(
        md.contains("| **groq** | ⚠️ | 75% | — · 75% · 60% | 200ms | 300ms | 4 |\n"),
        "{md}"
    );

    let csv = env.run(&["rollup", "--format", "csv"]).ok().stdout;
    let mut lines = csv.lines();
    assert_eq!(
        lines.next().unwrap(),
        "provider,samples,uptime_pct,avg_latency_ms,p95_latency_ms,status,last_probe,uptime_1h_pct,uptime_24h_pct,uptime_7d_pct,median_ttft_ms,tokens_per_s"
    );
    assert!(
        lines.next().unwrap().starts_with("groq,4,75.0,200.0,"),
        "{csv}"
    );

    let out = env.path().join("metrics.prom");
    let r = env.run(&[
        "rollup",
        "--format",
        "prom",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert_eq!(r.ok().stdout, "");
    let prom = std::fs::read_to_string(&out).unwrap();
    assert!(
        prom.contains("# TYPE llmprobe_uptime_ratio gauge"),
        "{prom}"
    );
    assert!(
        prom.contains("llmprobe_uptime_ratio{provider=\"groq\",window=\"24h\"} 0.75\n"),
        "{prom}"
    );
    assert!(prom.contains("llmprobe_samples{provider=\"groq\",window=\"24h\"} 4\n"));
    assert!(prom.contains("llmprobe_latency_avg_seconds{provider=\"groq\",window=\"24h\"} 0.2\n"));
    // Written by rename: no temporary file is left behind.
    let names: Vec<String> = std::fs::read_dir(env.path())
        .unwrap()
        .map(|d| d.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.contains(".tmp")), "{names:?}");
}

#[test]
fn empty_missing_and_old_logs_say_no_samples() {
    let env = env();
    // Missing log.
    let md = env.run(&["rollup"]).ok().stdout;
    assert!(md.contains("No samples"), "{md}");
    assert!(!md.contains("100%") && !md.contains("NaN"), "{md}");
    let v = json(&env.run(&["rollup", "--format", "json"]).ok().stdout);
    assert_eq!(v["rows"].as_array().unwrap().len(), 0);
    // Empty array.
    env.write("stats/health_log.json", "[\n]\n");
    assert!(env.run(&["rollup"]).ok().stdout.contains("No samples"));
    // Only old data: the window is empty.
    env.write(
        "stats/health_log.json",
        log_of(&[e(50 * H, "groq", "llama-3.1-8b-instant", true, 100, "")]),
    );
    let md = env.run(&["rollup"]).ok().stdout;
    // The window is empty; the week still holds the old probe.
    assert!(
        md.contains("| **groq** | — | no samples | — · — · 100% | — | — | 0 |"),
        "{md}"
    );
    assert!(!md.contains("| 100% |") && !md.contains("NaN"), "{md}");
    let v = json(&env.run(&["rollup", "--format", "json"]).ok().stdout);
    assert!(row(&v, "groq")["uptime"].is_null());
    let prom = env.run(&["rollup", "--format", "prom"]).ok().stdout;
    assert!(!prom.contains("llmprobe_uptime_ratio{"), "{prom}");
    assert!(prom.contains("llmprobe_samples{provider=\"groq\",window=\"24h\"} 0\n"));
    let csv = env.run(&["rollup", "--format", "csv"]).ok().stdout;
    assert!(csv.contains("\ngroq,0,,,,no_samples,"), "{csv}");
    // And the brief on it: stale, no samples, never healthy.
    let b = env.run(&["brief"]).ok().stdout;
    assert!(b.contains("!!! STALE: NO PROBE IN THE LAST 2 HOURS"), "{b}");
    assert!(b.contains("no samples in the last 24h"), "{b}");
    assert!(!b.contains("[ OK ]"), "{b}");
}

#[test]
fn sparse_logs_and_odd_entries() {
    let env = env();
    // One entry a week, some legacy, one without provider, one unknown field.
    let lines = vec![
        e(21 * 24 * H, "groq", "llama-3.1-8b-instant", true, 100, ""),
        r#"{"quality": 1.0, "response": "4"}"#.to_string(),
        e(
            14 * 24 * H,
            "groq",
            "llama-3.1-8b-instant",
            false,
            0,
            "error",
        ),
        format!(
            r#"{{"timestamp": "{}", "provider": "groq", "model": "llama-3.1-8b-instant", "status": "ok", "latency_ms": 300, "quality": 1.0, "response": "4"}}"#,
            ago(7 * 24 * H)
        ),
        format!(
            r#"{{"ts":"{}","provider":"groq","model":"llama-3.1-8b-instant","ok":1,"latency_ms":500,"failure_type":"","note":"hand-added, \"quoted\""}}"#,
            ago(H)
        ),
    ];
    env.write("stats/health_log.json", log_of(&lines));
    let r = env
        .run(&["rollup", "--format", "json", "--window", "30d"])
        .ok();
    let v = json(&r.stdout);
    let g = row(&v, "groq");
    assert_eq!(g["samples"], 4.0);
    assert_eq!(g["uptime"], 0.75);
    assert_eq!(g["avg_latency_ms"], 300.0);
    assert_eq!(v["skipped_entries"], 1);
    assert!(r.stderr.contains("skipped 1 entries"), "{}", r.stderr);
    let v = json(
        &env.run(&["rollup", "--format", "json", "--window", "10d"])
            .ok()
            .stdout,
    );
    assert_eq!(row(&v, "groq")["samples"], 2.0);
    assert_eq!(row(&v, "groq")["uptime"], 1.0);
}

#[test]
fn legacy_only_log_is_weighted_by_sample_count() {
    let env = env();
    let log = format!(
        r#"[
  {{
    "timestamp": "{}",
    "provider": "groq",
    "model": "llama-3.1-8b-instant",
    "status": "averaged",
    "latency_ms": 100.0,
    "quality": 1.0,
    "uptime": 0.5,
    "sample_count": 10,
    "rollup": "24h"
  }},
  {{
    "timestamp": "{}",
    "provider": "groq",
    "model": "llama-3.1-8b-instant",
    "status": "degraded",
    "latency_ms": 300,
    "quality": 0.0,
    "response": "5"
  }},
  {{
    "timestamp": "{}",
    "provider": "groq",
    "model": "llama-3.3-70b-versatile",
    "status": "ok",
    "latency_ms": 500,
    "quality": 1.0,
    "response": "4"
  }}
]
"#,
        ago(30 * H),
        ago(3 * H),
        // Well inside the 2 h staleness limit, so the test cannot race it.
        ago(H)
    );
    env.write("stats/health_log.json", log);
    let v = json(
        &env.run(&["rollup", "--format", "json", "--window", "all"])
            .ok()
            .stdout,
    );
    let g = row(&v, "groq");
    assert_eq!(g["samples"], 12.0);
    assert_eq!(g["passed"], 6.0);
    assert_eq!(g["uptime"], 0.5);
    // (100 × 10 + 300 + 500) / 12
    assert_eq!(g["avg_latency_ms"], 150.0);
    let v = json(&env.run(&["rollup", "--format", "json"]).ok().stdout);
    assert_eq!(row(&v, "groq")["samples"], 2.0);
    assert_eq!(row(&v, "groq")["uptime"], 0.5);
    // brief reads a pretty-printed log forward; a wrong answer is not DOWN.
    let b = json(&env.run(&["brief", "--json"]).ok().stdout);
    let p = &b["providers"][0];
    assert_eq!(p["provider"], "groq");
    assert_eq!(p["checks"], 2.0);
    assert_eq!(p["status"], "poor");
    assert_eq!(b["stale"], false);
}

#[test]
fn slightly_out_of_order_clocks() {
    let env = env();
    let m = "llama-3.1-8b-instant";
    // File order is not time order. Reading back from the end, the entry
    // 24.5 h old (just outside the window) must not stop the brief before
    // the in-window entry behind it.
    env.write(
        "stats/health_log.json",
        log_of(&[
            e(30 * H, "groq", m, false, 0, "error"),
            e(23 * H, "groq", m, true, 100, ""),
            e(24 * H + 1800, "groq", m, false, 0, "error"),
            e(H, "groq", m, true, 200, ""),
            e(23 * H + 3000, "groq", m, true, 300, ""),
        ]),
    );
    let b = json(&env.run(&["brief", "--json"]).ok().stdout);
    let p = &b["providers"][0];
    assert_eq!(p["checks"], 3.0, "{b}");
    assert_eq!(p["uptime"], 1.0);
    assert_eq!(p["avg_latency_ms"], 200.0);
    // The last check is the newest by time, not the last line.
    let last = chrono::DateTime::parse_from_rfc3339(p["last_check"].as_str().unwrap()).unwrap();
    let want = chrono::Utc::now().timestamp() - H;
    assert!((last.timestamp() - want).abs() < 120, "{b}");
    let v = json(&env.run(&["rollup", "--format", "json"]).ok().stdout);
    assert_eq!(row(&v, "groq")["samples"], 3.0);
    assert_eq!(row(&v, "groq")["uptime"], 1.0);
}

/// An independent, load-everything reading of the compat log.
fn compat_figures() -> Vec<(String, f64, f64, f64)> {
    let all: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(compat_log()).unwrap()).unwrap();
    let mut out: Vec<(String, f64, f64, f64, f64)> = Vec::new();
    for e in &all {
        let p = e["provider"].as_str().unwrap().to_string();
        let (n, ok) = if e["status"] == "averaged" {
            let n = e["sample_count"].as_f64().unwrap();
            (n, e["uptime"].as_f64().unwrap() * n)
        } else {
            (1.0, if e["status"] == "ok" { 1.0 } else { 0.0 })
        };
        let lat = e["latency_ms"].as_f64().unwrap();
        let i = match out.iter().position(|o| o.0 == p) {
            Some(i) => i,
            None => {
                out.push((p, 0.0, 0.0, 0.0, 0.0));
                out.len() - 1
            }
        };
        out[i].1 += n;
        out[i].2 += ok;
        if lat > 0.0 {
            out[i].3 += lat * n;
            out[i].4 += n;
        }
    }
    out.into_iter()
        .map(|(p, n, ok, ls, lw)| (p, n, ok / n, if lw > 0.0 { ls / lw } else { f64::NAN }))
        .collect()
}

#[test]
fn the_real_old_log_with_window_all() {
    let env = env();
    std::fs::create_dir_all(env.stats()).unwrap();
    std::fs::copy(compat_log(), env.log()).unwrap();
    let v = json(
        &env.run(&["rollup", "--window", "all", "--format", "json"])
            .ok()
            .stdout,
    );
    // By hand: groq is 12 averaged entries and per-sample entries, all up.
    let g = row(&v, "groq");
    assert_eq!(g["samples"], 88.0);
    assert_eq!(g["uptime"], 1.0);
    assert!(close(&g["avg_latency_ms"], 273.6, 0.05), "{g}");
    // ollama: 17 of 27 passed.
    let o = row(&v, "ollama");
    assert_eq!(o["samples"], 27.0);
    assert!(close(&o["uptime"], 17.0 / 27.0, 1e-9), "{o}");
    assert!(close(&o["avg_latency_ms"], 36161.65, 0.1), "{o}");
    // gemini: 87 of 93, cloudflare: 35 of 38.
    assert!(close(&row(&v, "gemini")["uptime"], 87.0 / 93.0, 1e-9));
    assert!(close(&row(&v, "cloudflare")["uptime"], 35.0 / 38.0, 1e-9));
    // And every provider agrees with the independent reading.
    let want = compat_figures();
    assert_eq!(v["rows"].as_array().unwrap().len(), want.len());
    for (p, n, up, lat) in want {
        let r = row(&v, &p);
        assert!(close(&r["samples"], n, 1e-9), "{p}: {r}");
        assert!(close(&r["uptime"], up, 1e-9), "{p}: {r}");
        if lat.is_nan() {
            assert!(r["avg_latency_ms"].is_null(), "{p}: {r}");
        } else {
            assert!(close(&r["avg_latency_ms"], lat, 0.05), "{p}: {r}");
        }
    }
    assert_eq!(v["newest_probe"], "2026-05-02T05:07:17Z");
    assert_eq!(v["skipped_entries"], 0);
    // The `all` trend spans the log's own history (April to May), not up to
    // today: groq has data in the first and in the last bucket.
    let trend = g["trend"].as_array().unwrap();
    assert_eq!(trend.len(), 24);
    assert_eq!(trend[0], 1.0, "{g}");
    assert_eq!(trend[23], 1.0, "{g}");
    let md = env.run(&["rollup", "--window", "all"]).ok().stdout;
    assert!(md.contains("Last checked: 2026-05-02 05:07 UTC"), "{md}");
    // 17 of 27: 62.96%, rounded.
    assert!(md.contains("| **ollama** | ⚠️ | 63.0% |"), "{md}");
    // The brief of the old log is stale, and grades ollama as the README
    // block does: fair (60–90%), not poor, so no uptime advisory.
    let b = env.run(&["brief", "--window", "all"]).ok().stdout;
    assert!(b.contains("!!! STALE"), "{b}");
    assert!(
        b.contains("[WARN] | ollama") && b.contains("| 63.0% "),
        "{b}"
    );
    assert!(!b.contains("avoid ollama: uptime"), "{b}");
}

/// A user who moves from the old tool sees its history under the embedded
/// catalog's provider names, whatever models it named: xAI's entries carry
/// the model `n/a`, and many old model ids are gone from the catalog.
#[test]
fn the_old_tools_history_is_grouped_under_our_provider_names() {
    use std::collections::{BTreeMap, BTreeSet};
    let env = Env::new();
    std::fs::create_dir_all(env.stats()).unwrap();
    std::fs::copy(compat_log(), env.log()).unwrap();
    let old: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(compat_log()).unwrap()).unwrap();
    // Probes per provider, read independently from the old file.
    let mut samples: BTreeMap<String, f64> = BTreeMap::new();
    for e in &old {
        let n = e["sample_count"].as_f64().unwrap_or(1.0);
        *samples
            .entry(e["provider"].as_str().unwrap().to_string())
            .or_default() += n;
    }
    let ours: BTreeSet<String> = json(&env.run(&["providers", "--json"]).ok().stdout)["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["provider"].as_str().unwrap().to_string())
        .collect();
    let names = |rows: &Value, count: &str| -> BTreeMap<String, f64> {
        rows.as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let p = r["provider"].as_str().unwrap().to_string();
                assert!(ours.contains(&p), "{p} is not a catalog provider");
                (p, r[count].as_f64().unwrap())
            })
            .collect()
    };
    let rollup = json(
        &env.run(&["rollup", "--window", "all", "--json"])
            .ok()
            .stdout,
    );
    assert_eq!(names(&rollup["rows"], "samples"), samples);
    let brief = json(&env.run(&["brief", "--window", "all", "--json"]).ok().stdout);
    assert_eq!(names(&brief["providers"], "checks"), samples);
    // xAI's rows, model `n/a` and no latency (the old tool logged 0), are
    // xai's history.
    let x = row(&rollup, "xai");
    assert!(x["samples"].as_f64().unwrap() > 0.0, "{x}");
    assert_eq!(x["uptime"], 1.0, "{x}");
    assert!(x["avg_latency_ms"].is_null(), "{x}");
    let by_model = json(
        &env.run(&["rollup", "--window", "all", "--by", "model", "--json"])
            .ok()
            .stdout,
    );
    let xai_models: Vec<&str> = by_model["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["provider"] == "xai")
        .map(|r| r["model"].as_str().unwrap())
        .collect();
    assert_eq!(xai_models, ["n/a"]);
}

#[test]
fn readme_block_round_trip() {
    let env = env();
    env.write("stats/health_log.json", sample_log());
    let old_block =
        std::fs::read_to_string(compat_log().with_file_name("the-brain-readme-health-block.md"))
            .unwrap();
    let readme = env.write(
        "README.md",
        format!("# the-brain\n\nIntro.\n\n{old_block}\n## Usage\n\nMore.\n"),
    );
    let r = env.run(&["rollup", "--readme", "README.md"]).ok();
    assert!(r.stdout.contains("updated"), "{}", r.stdout);
    let first = std::fs::read(&readme).unwrap();
    let text = String::from_utf8(first.clone()).unwrap();
    assert!(
        text.starts_with("# the-brain\n\nIntro.\n\n<!-- BRAIN_HEALTH_START -->\n*Last checked: ")
    );
    assert!(
        text.ends_with("<!-- BRAIN_HEALTH_END -->\n\n## Usage\n\nMore.\n"),
        "{text}"
    );
    assert!(text.contains("| **groq** | ⚠️ | 75% |"), "{text}");
    assert!(!text.contains("26786ms"), "the old table is gone: {text}");
    // Back-date the file, so any rewrite would show in its mtime without
    // waiting for the clock to tick.
    let mtime = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    std::fs::File::options()
        .write(true)
        .open(&readme)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let r = env.run(&["rollup", "--readme", "README.md"]).ok();
    assert!(r.stdout.contains("unchanged"), "{}", r.stdout);
    assert_eq!(std::fs::read(&readme).unwrap(), first);
    assert_eq!(
        std::fs::metadata(&readme).unwrap().modified().unwrap(),
        mtime
    );

    // Custom markers.
    let other = env.write("OTHER.md", "a\n<!-- S -->\nx\n<!-- E -->\nb\n");
    env.run(&[
        "rollup",
        "--readme",
        "OTHER.md",
        "--markers",
        "<!-- S -->",
        "<!-- E -->",
    ])
    .ok();
    let t = std::fs::read_to_string(&other).unwrap();
    assert!(t.starts_with("a\n<!-- S -->\n*Last checked") && t.ends_with("<!-- E -->\nb\n"));

    // Missing or unbalanced markers: exit 2, file untouched.
    for bad in [
        "no markers here\n",
        "<!-- BRAIN_HEALTH_START -->\nonly a start\n",
        "<!-- BRAIN_HEALTH_END -->\n<!-- BRAIN_HEALTH_START -->\n",
        "<!-- BRAIN_HEALTH_START -->\n<!-- BRAIN_HEALTH_START -->\n<!-- BRAIN_HEALTH_END -->\n",
    ] {
        let p = env.write("BAD.md", bad);
        let r = env.run(&["rollup", "--readme", "BAD.md"]).code(2);
        assert!(
            r.stderr.contains("BAD.md") && r.stderr.contains("marker"),
            "{}",
            r.stderr
        );
        assert_eq!(std::fs::read_to_string(&p).unwrap(), bad);
    }
    env.run(&["rollup", "--readme", "MISSING.md"]).code(2);
    env.run(&["rollup", "--readme", "README.md", "--format", "json"])
        .code(2);
    let r = env
        .run(&["rollup", "--readme", "README.md", "--json"])
        .code(2);
    assert!(r.stderr.contains("drop --json"), "{}", r.stderr);
    env.run(&["rollup", "--json", "--format", "csv"]).code(2);
}

#[test]
fn torn_tail_is_tolerated() {
    let env = env();
    let full = sample_log();
    let cut = &full[..full.len() - 40];
    env.write("stats/health_log.json", cut);
    let r = env
        .run(&["rollup", "--format", "json", "--window", "7d"])
        .ok();
    assert!(r.stderr.contains("torn tail"), "{}", r.stderr);
    let v = json(&r.stdout);
    assert_eq!(row(&v, "groq")["samples"], 5.0);
    // The last complete mistral entry is there; the torn skip row is not.
    assert_eq!(row(&v, "mistral")["samples"], 1.0);
    assert!(v["torn_tail_bytes"].as_u64().unwrap() > 0);
    let b = json(&env.run(&["brief", "--json"]).ok().stdout);
    assert_eq!(b["providers"].as_array().unwrap().len(), 2);
    env.run(&["state"]).ok();
    assert_eq!(std::fs::read_to_string(env.log()).unwrap(), cut);
}

#[test]
fn damaged_log_is_a_data_error_and_untouched() {
    let env = env();
    let good = sample_log();
    // Damage in the middle, and damage near the end (where brief reads).
    let middle = good.replacen("\"ok\":1", "\"ok\":tru", 1);
    let mut lines: Vec<&str> = good.lines().collect();
    let n = lines.len();
    lines[n - 3] = "{\"ts\": nul},";
    let end = lines.join("\n");
    for bad in [middle, end, "{\"not\": \"an array\"}".to_string()] {
        env.write("stats/health_log.json", &bad);
        for args in [
            &["rollup"][..],
            &["rollup", "--format", "prom"],
            &["brief"],
            &["state"],
        ] {
            let r = env.run(args).code(4);
            assert!(
                r.stderr.contains("health_log.json") && r.stderr.contains("byte offset"),
                "{args:?}: {}",
                r.stderr
            );
        }
        assert_eq!(std::fs::read_to_string(env.log()).unwrap(), bad);
    }
}

#[test]
fn brief_icons_advisories_and_rotation() {
    let env = env();
    let mut lines = Vec::new();
    // groq: 20 of 20 → OK. mistral: 4 of 5 → WARN (80%). cohere: last probe
    // errors on its only model → DOWN. Each was probed within 2 hours, so
    // none is stale.
    for i in 0..20 {
        lines.push(e(
            (20 - i) * H,
            "groq",
            "llama-3.1-8b-instant",
            true,
            100 + i as u64,
            "",
        ));
    }
    for i in 0..5 {
        let ok = i != 2;
        lines.push(e(
            (5 - i) * H,
            "mistral",
            "mistral-small-latest",
            ok,
            500,
            if ok { "" } else { "timeout" },
        ));
    }
    lines.push(e(5 * H, "cohere", "command-r", true, 700, ""));
    lines.push(e(3 * H, "cohere", "command-r", true, 700, ""));
    lines.push(e(1800, "cohere", "command-r", false, 0, "error"));
    env.write("stats/health_log.json", log_of(&lines));
    env.write(
        "stats/model_state.json",
        r#"{
  "mistral::mistral-large-latest": {"state": "paused", "reason": "timeout", "since": "2026-05-02T15:00:00Z", "consecutive_failures": 1},
  "groq::llama-3.3-70b-versatile": {"state": "disabled", "reason": "error", "since": "2026-05-01T10:00:00Z", "consecutive_failures": 3},
  "groq::llama-3.1-8b-instant": {"state": "active", "consecutive_failures": 0}
}"#,
    );
    let out = env.run(&["brief"]).ok().stdout;
    assert!(!out.contains("STALE"), "{out}");
    let line = |p: &str| {
        out.lines()
            .find(|l| l.contains(&format!("| {p} ")))
            .unwrap()
            .to_string()
    };
    assert!(
        line("groq").contains("[ OK ]") && line("groq").contains("| 100% "),
        "{out}"
    );
    assert!(
        line("mistral").contains("[WARN]") && line("mistral").contains("| 80% "),
        "{out}"
    );
    assert!(line("cohere").contains("[DOWN]"), "{out}");
    // 2 of 3: rounded, not truncated.
    assert!(line("cohere").contains("66.7%"), "{out}");
    // Not below 60%, so only the failed last probe is a reason to avoid it.
    assert!(
        out.contains("ROUTING ADVISORY: avoid cohere: last probe failed: error at "),
        "{out}"
    );
    assert_eq!(out.matches("ROUTING ADVISORY").count(), 1, "{out}");
    assert!(
        out.contains("mistral::mistral-large-latest | paused   | timeout | 2026-05-02T15:00:00Z"),
        "{out}"
    );
    assert!(
        out.contains("groq::llama-3.3-70b-versatile | disabled | error"),
        "{out}"
    );
    assert!(
        !out.contains("groq::llama-3.1-8b-instant |"),
        "active models are not out of rotation: {out}"
    );

    let v = json(&env.run(&["brief", "--json"]).ok().stdout);
    assert_eq!(v["stale"], false);
    assert_eq!(v["window"], "24h");
    let ps = v["providers"].as_array().unwrap();
    let get = |p: &str| ps.iter().find(|x| x["provider"] == p).unwrap();
    assert_eq!(get("groq")["status"], "ok");
    assert_eq!(get("groq")["checks"], 20.0);
    assert_eq!(get("groq")["avg_latency_ms"], 109.5);
    assert_eq!(get("mistral")["status"], "warn");
    assert_eq!(get("cohere")["status"], "down");
    assert_eq!(get("cohere")["last_result"], "error");
    assert_eq!(v["out_of_rotation"].as_array().unwrap().len(), 2);
    assert_eq!(v["advisories"][0]["provider"], "cohere");

    // Below 60%: POOR and an advisory, even if the last probe passed.
    lines.push(e(
        1750,
        "mistral",
        "mistral-small-latest",
        false,
        0,
        "timeout",
    ));
    lines.push(e(
        1700,
        "mistral",
        "mistral-small-latest",
        false,
        0,
        "timeout",
    ));
    lines.push(e(
        1600,
        "mistral",
        "mistral-small-latest",
        false,
        0,
        "wrong_answer",
    ));
    lines.push(e(1500, "mistral", "mistral-small-latest", true, 0, ""));
    env.write("stats/health_log.json", log_of(&lines));
    let out = env.run(&["brief"]).ok().stdout;
    assert!(
        out.contains("ROUTING ADVISORY: avoid mistral: uptime 55.6% over 24h"),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.contains("[POOR]") && l.contains("mistral")),
        "{out}"
    );

    // No probe for 3 hours: stale, loudly.
    env.write(
        "stats/health_log.json",
        log_of(&[e(3 * H, "groq", "llama-3.1-8b-instant", true, 100, "")]),
    );
    let out = env.run(&["brief"]).ok().stdout;
    assert!(
        out.contains("!!! STALE: NO PROBE IN THE LAST 2 HOURS"),
        "{out}"
    );
    assert_eq!(
        json(&env.run(&["brief", "--json"]).ok().stdout)["stale"],
        true
    );
    // An empty log is stale too.
    std::fs::remove_file(env.log()).unwrap();
    assert!(
        env.run(&["brief"])
            .ok()
            .stdout
            .contains("NO PROBES RECORDED")
    );
}

#[test]
fn state_listing() {
    let env = env();
    env.write("stats/health_log.json", sample_log());
    env.write(
        "stats/model_state.json",
        r#"{"mistral::mistral-large-latest": {"state": "paused", "reason": "timeout", "since": "2026-05-02T15:00:00Z", "consecutive_failures": 1},
            "gone::old-model": {"state": "disabled", "reason": "error", "consecutive_failures": 3}}"#,
    );
    let v = json(&env.run(&["state", "--json"]).ok().stdout);
    let rows = v.as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["model"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        vec![
            "groq::llama-3.1-8b-instant",
            "groq::llama-3.3-70b-versatile",
            "mistral::mistral-small-latest",
            "mistral::mistral-large-latest",
            "cohere::command-r",
            "gone::old-model",
        ]
    );
    // No keys are set, yet every catalog model is listed.
    let small = &rows[0];
    assert_eq!(small["state"], "active");
    assert_eq!(small["last_probe"]["result"], "ok");
    assert_eq!(small["last_probe"]["latency_ms"], 300.0);
    assert_eq!(rows[2]["last_probe"]["latency_ms"], 640.0);
    // disabled_skip is not a probe.
    assert!(rows[3]["last_probe"].is_null());
    assert_eq!(rows[3]["state"], "paused");
    assert_eq!(rows[3]["consecutive_failures"], 1);
    assert!(rows[4]["last_probe"].is_null());
    assert_eq!(rows[5]["in_catalog"], false);

    let t = env.run(&["state"]).ok().stdout;
    assert!(t.contains("| groq::llama-3.1-8b-instant "), "{t}");
    assert!(t.contains("| ok 300ms, "), "{t}");
    assert!(
        t.contains("| gone::old-model (not in catalog) | disabled "),
        "{t}"
    );
    let t = env.run(&["state", "--state", "paused"]).ok().stdout;
    // A header, its rule, one row, when the paused model is next
    // re-probed (two lines), and a note naming the log it searched.
    assert_eq!(t.lines().count(), 6, "{t}");
    assert!(
        t.contains("\npaused:\n  mistral::mistral-large-latest: re-probe due"),
        "{t}"
    );
    assert!(t.contains("no probes recorded in "), "{t}");
    assert!(t.contains("mistral::mistral-large-latest"));
    let v = json(
        &env.run(&["state", "--provider", "groq", "--json"])
            .ok()
            .stdout,
    );
    assert_eq!(v.as_array().unwrap().len(), 2);
    // Last probe from a pretty-printed legacy log, read forward.
    std::fs::copy(compat_log(), env.log()).unwrap();
    let v = json(
        &env.run(&["state", "--provider", "groq", "--json"])
            .ok()
            .stdout,
    );
    assert_eq!(v[0]["last_probe"]["ts"], "2026-05-02T05:00:39Z");
}

#[test]
fn state_changes() {
    let env = env();
    let key = "groq::llama-3.1-8b-instant";
    let r = env
        .run(&["state", "pause", key, "--reason", "flaky upstream"])
        .ok();
    assert_eq!(
        r.stdout,
        format!("{key}: active → paused (reason: flaky upstream; failures: 0)\n")
    );
    // A hand-edited field and a failure count survive, then enable clears
    // the count.
    let mut v = json(&std::fs::read_to_string(env.state_file()).unwrap());
    v[key]["consecutive_failures"] = 2.into();
    v[key]["note"] = "kept".into();
    env.write("stats/model_state.json", v.to_string());
    let r = env.run(&["state", "disable", key]).ok();
    assert_eq!(
        r.stdout,
        format!("{key}: paused → disabled (reason: disabled by hand; failures: 2)\n")
    );
    let v = json(&std::fs::read_to_string(env.state_file()).unwrap());
    assert_eq!(v[key]["state"], "disabled");
    assert_eq!(v[key]["note"], "kept");
    let r = env.run(&["state", "enable", key]).ok();
    assert!(
        r.stdout.starts_with(&format!("{key}: disabled → active")),
        "{}",
        r.stdout
    );
    let v = json(&std::fs::read_to_string(env.state_file()).unwrap());
    assert_eq!(v[key]["consecutive_failures"], 0);
    assert_eq!(v[key]["state"], "active");

    env.run(&["state", "pause", "cohere::command-r"]).ok();
    let r = env.run(&["state", "reset", "cohere::command-r"]).ok();
    assert_eq!(r.stdout, "cohere::command-r: paused → active (reset)\n");
    env.run(&["state", "disable", "cohere::command-r"]).ok();
    let r = env.run(&["state", "reset", "--all"]).ok();
    assert!(
        r.stdout
            .contains(&format!("{key}: active → active (reset)")),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("cohere::command-r: disabled → active (reset)"),
        "{}",
        r.stdout
    );
    assert_eq!(
        json(&std::fs::read_to_string(env.state_file()).unwrap()),
        serde_json::json!({})
    );
}

#[test]
fn global_flags_work_around_state_subcommands() {
    let env = env();
    let key = "groq::llama-3.1-8b-instant";
    let other = env.path().join("other");
    let other_s = other.to_str().unwrap();
    env.run(&["state", "--stats-dir", other_s, "pause", key])
        .ok();
    env.run(&["state", "disable", key, "--stats-dir", other_s])
        .ok();
    env.run(&["--stats-dir", other_s, "state", "enable", key])
        .ok();
    let v = json(&std::fs::read_to_string(other.join("model_state.json")).unwrap());
    assert_eq!(v[key]["state"], "active");
    assert!(!env.state_file().exists());
    // Listing filters make no sense on a change.
    let r = env.run(&["state", "pause", key, "--json"]).code(2);
    assert!(r.stderr.contains("--json"), "{}", r.stderr);
}

#[test]
fn unknown_model_suggests_and_writes_nothing() {
    let env = env();
    let r = env
        .run(&["state", "disable", "grok::llama-3.1-8b-instnt"])
        .code(2);
    assert!(
        r.stderr
            .contains("unknown model 'grok::llama-3.1-8b-instnt'"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("did you mean groq::llama-3.1-8b-instant"),
        "{}",
        r.stderr
    );
    let r = env.run(&["state", "pause", "mistral-small-latst"]).code(2);
    assert!(
        r.stderr
            .contains("did you mean mistral::mistral-small-latest"),
        "{}",
        r.stderr
    );
    env.run(&["state", "reset", "nope::nothing-like-it-at-all"])
        .code(2);
    // Nothing was created: not the state file, not even the stats directory.
    assert!(!env.stats().exists());
}

#[test]
fn bad_state_file_is_a_data_error_and_untouched() {
    let env = env();
    let bad = "{\"groq::llama-3.1-8b-instant\": {\"state\": \"sleeping\"}}";
    env.write("stats/model_state.json", bad);
    for args in [
        &["state"][..],
        &["state", "enable", "groq::llama-3.1-8b-instant"],
        &["state", "reset", "groq::llama-3.1-8b-instant"],
        &["brief"],
    ] {
        let r = env.run(args).code(4);
        assert!(
            r.stderr.contains("model_state.json"),
            "{args:?}: {}",
            r.stderr
        );
    }
    assert_eq!(std::fs::read_to_string(env.state_file()).unwrap(), bad);
}

#[test]
fn usage_errors_and_help() {
    let env = env();
    let r = env.run(&["rollup", "--window", "yesterday"]).code(2);
    assert!(r.stderr.contains("--window"), "{}", r.stderr);
    env.run(&["brief", "--window", "0h"]).code(2);
    env.run(&["rollup", "--markers", "a", "b"]).code(2);
    for cmd in ["rollup", "brief", "state"] {
        let h = env.run(&[cmd, "--help"]).ok().stdout;
        assert!(h.contains("Examples:"), "{cmd}: {h}");
    }
}

#[test]
fn closed_stdout_pipe_is_not_an_error() {
    let env = env();
    // Enough rows that the output outgrows the pipe buffer.
    let mut lines = Vec::new();
    for i in 0..3000 {
        lines.push(e(H, "groq", &format!("model-{i:04}"), true, 100, ""));
    }
    env.write("stats/health_log.json", log_of(&lines));
    let mut child = env
        .command(&["rollup", "--by", "model"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn nothing_found_names_the_resolved_path() {
    let env = env();
    // A relative --stats-dir is shown resolved, so that a wrong working
    // directory is obvious.
    let want = env.path().join("elsewhere").join("health_log.json");
    let want = want.to_str().unwrap();
    let b = env.run(&["--stats-dir", "elsewhere", "brief"]).ok().stdout;
    assert!(
        b.contains(&format!(
            "NO PROBES RECORDED in {want} (the file does not exist)"
        )),
        "{b}"
    );
    let v = json(
        &env.run(&["--stats-dir", "elsewhere", "brief", "--json"])
            .ok()
            .stdout,
    );
    assert_eq!(v["health_log"], want);
    let r = env.run(&["--stats-dir", "elsewhere", "rollup"]).ok();
    assert!(
        r.stderr.contains(&format!(
            "no probes recorded in {want} (the file does not exist)"
        )),
        "{}",
        r.stderr
    );
    // The Markdown block itself never carries a local path.
    assert!(!r.stdout.contains(want), "{}", r.stdout);
    let s = env.run(&["--stats-dir", "elsewhere", "state"]).ok().stdout;
    assert!(
        s.contains(&format!(
            "no probes recorded in {want} (the file does not exist)"
        )),
        "{s}"
    );
    // An empty log is not a missing one.
    env.write("stats/health_log.json", "[\n]\n");
    let b = env.run(&["brief"]).ok().stdout;
    let log = env.log();
    assert!(
        b.contains(&format!(
            "NO PROBES RECORDED in {} (it holds no probes)",
            log.display()
        )),
        "{b}"
    );
}

#[test]
fn state_listing_tells_unprobed_keyless_and_off_models_apart() {
    let mut env = Env::new();
    let cfg = env.write(
        "llmprobe.toml",
        format!(
            "{CONFIG}\n[[providers]]\nname = \"offp\"\nenabled = false\ndialect = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodels = [\"m\"]\n"
        ),
    );
    env.env("LLMPROBE_CONFIG", cfg.to_str().unwrap());
    env.env("GROQ_API_KEY", "x").env("COHERE_API_KEY", "x");
    env.write(
        "stats/health_log.json",
        log_of(&[e(H, "groq", "llama-3.1-8b-instant", true, 100, "")]),
    );
    env.write(
        "stats/model_state.json",
        r#"{"groq::llama-3.3-70b-versatile": {"state": "paused", "reason": "timeout"},
            "mistral::mistral-large-latest": {"state": "disabled", "reason": "error"}}"#,
    );
    let t = env.run(&["state"]).ok().stdout;
    let cell = |model: &str| {
        let line = t
            .lines()
            .find(|l| l.starts_with(&format!("| {model} ")))
            .unwrap_or_else(|| panic!("no {model} in\n{t}"));
        line.split('|').nth(2).unwrap().trim().to_string()
    };
    assert_eq!(cell("groq::llama-3.1-8b-instant"), "active");
    assert_eq!(cell("groq::llama-3.3-70b-versatile"), "paused");
    assert_eq!(cell("cohere::command-r"), "active (never probed)");
    assert_eq!(
        cell("mistral::mistral-small-latest"),
        "skipped: no key (set MISTRAL_API_KEY)"
    );
    assert_eq!(cell("mistral::mistral-large-latest"), "disabled (no key)");
    assert_eq!(cell("offp::m"), "off (disabled in config)");

    // JSON keeps `state` as it was and adds `status`.
    let v = json(&env.run(&["state", "--json"]).ok().stdout);
    let get = |model: &str| {
        let r = v
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["model"] == model)
            .unwrap();
        (r["state"].as_str().unwrap(), r["status"].as_str().unwrap())
    };
    assert_eq!(get("groq::llama-3.1-8b-instant"), ("active", "active"));
    assert_eq!(get("groq::llama-3.3-70b-versatile"), ("paused", "paused"));
    assert_eq!(get("cohere::command-r"), ("active", "never_probed"));
    assert_eq!(get("mistral::mistral-small-latest"), ("active", "no_key"));
    assert_eq!(
        get("mistral::mistral-large-latest"),
        ("disabled", "disabled")
    );
    assert_eq!(get("offp::m"), ("active", "off"));
}

#[test]
fn state_reset_needs_a_model_or_all() {
    let env = env();
    env.run(&["state", "pause", "cohere::command-r"]).ok();
    let r = env.run(&["state", "reset"]).code(2);
    assert!(
        r.stderr.contains("provider::model") && r.stderr.contains("--all"),
        "{}",
        r.stderr
    );
    env.run(&["state", "reset", "cohere::command-r", "--all"])
        .code(2);
    // Nothing was reset by the refusals.
    let v = json(&std::fs::read_to_string(env.state_file()).unwrap());
    assert_eq!(v["cohere::command-r"]["state"], "paused");
    let r = env.run(&["state", "reset", "--all"]).ok();
    assert_eq!(r.stdout, "cohere::command-r: paused → active (reset)\n");
}

#[test]
fn state_reset_all_moves_a_corrupt_state_file_aside() {
    let env = env();
    // Not JSON, not even UTF-8: kept byte for byte all the same.
    let bad: &[u8] = b"{\"groq::llama-3.1-8b-instant\": {\"state\": \"paused\",\xff\n";
    env.write("stats/model_state.json", bad);
    let r = env.run(&["state"]).code(4);
    assert!(
        r.stderr.contains("model_state.json") && r.stderr.contains("llmprobe state reset --all"),
        "{}",
        r.stderr
    );
    assert_eq!(std::fs::read(env.state_file()).unwrap(), bad);
    let r = env.run(&["state", "reset", "--all"]).ok();
    let aside: Vec<_> = std::fs::read_dir(env.stats())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("model_state.json.corrupt-")
        })
        .collect();
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert_eq!(std::fs::read(&aside[0]).unwrap(), bad);
    assert!(
        r.stdout.contains(aside[0].to_str().unwrap()),
        "{}",
        r.stdout
    );
    // A fresh start: every model active, and the commands work again.
    assert!(!env.state_file().exists());
    let v = json(&env.run(&["state", "--json"]).ok().stdout);
    assert!(v.as_array().unwrap().iter().all(|r| r["state"] == "active"));
    // A second corrupt file in the same second does not overwrite the first.
    env.write("stats/model_state.json", "[");
    env.run(&["state", "reset", "--all"]).ok();
    let n = std::fs::read_dir(env.stats())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_str()
                .unwrap()
                .contains(".corrupt-")
        })
        .count();
    assert_eq!(n, 2);
    assert_eq!(std::fs::read(&aside[0]).unwrap(), bad);
}

#[test]
fn a_damaged_log_says_what_to_do_next() {
    let env = env();
    let bad = "[\n{\"ts\": 1, \"provider\": }\n,{}\n]\n";
    env.write("stats/health_log.json", bad);
    for args in [&["brief"][..], &["rollup"], &["state"]] {
        let r = env.run(args).code(4);
        assert!(
            r.stderr.contains("health_log.json") && r.stderr.contains("move it aside"),
            "{args:?}: {}",
            r.stderr
        );
    }
    assert_eq!(std::fs::read_to_string(env.log()).unwrap(), bad);
}

#[test]
fn percentages_round_and_counts_are_integers() {
    let env = env();
    // cohere: 2 of 3 passed.
    env.write(
        "stats/health_log.json",
        log_of(&[
            e(3 * H, "cohere", "command-r", true, 100, ""),
            e(2 * H, "cohere", "command-r", false, 0, "timeout"),
            e(H, "cohere", "command-r", true, 100, ""),
        ]),
    );
    let md = env.run(&["rollup"]).ok().stdout;
    assert!(md.contains("| **cohere** | ⚠️ | 66.7% |"), "{md}");
    let csv = env.run(&["rollup", "--format", "csv"]).ok().stdout;
    assert!(csv.contains("cohere,3,66.7,"), "{csv}");
    let b = env.run(&["brief"]).ok().stdout;
    assert!(b.contains("| 66.7% "), "{b}");

    let text = env.run(&["rollup", "--format", "json"]).ok().stdout;
    assert!(text.contains("\"samples\": 3,"), "{text}");
    let v = json(&text);
    let r = row(&v, "cohere");
    assert!(r["samples"].is_u64() && r["passed"].is_u64(), "{r}");
    assert_eq!(r["passed"], 2);
    let v = json(&env.run(&["brief", "--json"]).ok().stdout);
    assert!(v["providers"][0]["checks"].is_u64(), "{v}");
    let prom = env.run(&["rollup", "--format", "prom"]).ok().stdout;
    assert!(
        prom.contains("llmprobe_samples{provider=\"cohere\",window=\"24h\"} 3\n"),
        "{prom}"
    );
}

/// A model that only the health log knows (the catalog dropped it, and it
/// never left `active`) can still be disabled, as `brief` shows it.
#[test]
fn state_disable_accepts_a_model_known_from_the_log() {
    let env = Env::new();
    let log = "[\n{\"ts\":\"2026-05-02T10:00:00Z\",\"provider\":\"acme\",\"model\":\"acme-8b\",\"ok\":1,\"latency_ms\":5,\"failure_type\":\"\"}\n]\n";
    env.write("stats/health_log.json", log);
    env.write("llmprobe.toml", "include_default_catalog = false\n");
    env.run(&["state", "disable", "acme::acme-8b", "--reason", "retired"])
        .ok();
    let state = std::fs::read_to_string(env.state_file()).unwrap();
    assert!(
        state.contains("\"acme::acme-8b\"") && state.contains("disabled"),
        "{state}"
    );
    // A name nobody knows is still refused, and the log is left as it was.
    let r = env.run(&["state", "disable", "acme::acme-9b"]).code(2);
    assert!(
        r.stderr.contains("did you mean acme::acme-8b"),
        "{}",
        r.stderr
    );
    assert_eq!(std::fs::read_to_string(env.log()).unwrap(), log);
}

/// `rollup --readme` on a file without markers says which two lines to
/// paste, and leaves the file as it was.
#[test]
fn rollup_readme_without_markers_prints_the_lines_to_paste() {
    let env = Env::new();
    env.write("README.md", "# My project\n");
    let r = env.run(&["rollup", "--readme", "README.md"]).code(2);
    assert!(
        r.stderr.contains("Paste these two lines")
            && r.stderr
                .contains("\n<!-- BRAIN_HEALTH_START -->\n<!-- BRAIN_HEALTH_END -->"),
        "{}",
        r.stderr
    );
    assert_eq!(
        std::fs::read_to_string(env.path().join("README.md")).unwrap(),
        "# My project\n"
    );
}

#[test]
fn next_reprobes_of_pauses_without_a_time_and_with_route_reprobes_off() {
    let mut env = env();
    // Paused by hand (no `since`): one probed two minutes ago, one never.
    let probed = ago(120);
    env.write(
        "stats/health_log.json",
        log_of(&[e(120, "groq", "llama-3.1-8b-instant", false, 5, "timeout")]),
    );
    let retry_at = ago(-1200);
    env.write(
        "stats/model_state.json",
        format!(
            r#"{{"groq::llama-3.1-8b-instant": {{"state": "paused", "reason": "timeout", "consecutive_failures": 1}},
                "groq::llama-3.3-70b-versatile": {{"state": "paused", "reason": "manual", "consecutive_failures": 0}},
                "mistral::mistral-large-latest": {{"state": "paused", "reason": "rate_limit", "since": "{probed}", "consecutive_failures": 0, "retry_at": "{retry_at}"}}}}"#
        ),
    );
    let secs = |ts: &str| {
        chrono::DateTime::parse_from_rfc3339(ts)
            .unwrap()
            .with_timezone(&chrono::Utc)
    };
    let next = |v: &Value, model: &str| -> Value {
        v.as_array()
            .unwrap()
            .iter()
            .find(|r| r["model"] == model)
            .unwrap_or_else(|| panic!("no row {model}: {v}"))["next_reprobe"]
            .clone()
    };
    // Its last probe stands for the pause; never probed: due at once.
    let v = json(&env.run(&["state", "--json"]).ok().stdout);
    let at = next(&v, "groq::llama-3.1-8b-instant");
    assert_eq!(
        secs(at.as_str().unwrap()),
        secs(&probed) + chrono::Duration::seconds(300),
        "{v}"
    );
    assert_eq!(
        secs(next(&v, "groq::llama-3.3-70b-versatile").as_str().unwrap()).timestamp(),
        0
    );
    let t = env.run(&["state"]).ok().stdout;
    assert!(
        t.contains("\n  groq::llama-3.1-8b-instant: next re-probe "),
        "{t}"
    );
    assert!(
        t.contains(
            "\n  groq::llama-3.3-70b-versatile: re-probe due (by route --serve or check --paused)"
        ),
        "{t}"
    );

    // Route's re-probes off: check --paused alone, on each run or once the
    // Retry-After passes.
    env.env("LLMPROBE_ROUTE_REPROBE_PAUSED_SECS", "0");
    let off = "route --serve does not re-probe ([route] reprobe_paused_secs = 0)";
    for cmd in ["state", "brief"] {
        let t = env.run(&[cmd]).ok().stdout;
        for m in [
            "groq::llama-3.1-8b-instant",
            "groq::llama-3.3-70b-versatile",
        ] {
            assert!(
                t.contains(&format!(
                    "\n  {m}: check --paused re-probes it on each run; {off}\n"
                )),
                "{cmd}:\n{t}"
            );
        }
        let line = t
            .lines()
            .find(|l| l.starts_with("  mistral::mistral-large-latest: "))
            .unwrap_or_else(|| panic!("{cmd}:\n{t}"));
        assert!(
            line.starts_with(
                "  mistral::mistral-large-latest: check --paused re-probes it once the provider's Retry-After passes, "
            ) && line.ends_with(&format!("; {off}")),
            "{line}"
        );
    }
    let v = json(&env.run(&["state", "--json"]).ok().stdout);
    assert!(next(&v, "groq::llama-3.1-8b-instant").is_null(), "{v}");
    assert_eq!(next(&v, "mistral::mistral-large-latest"), retry_at.as_str());
}

/// An entry of a streamed probe: `e` with its `ttft_ms`.
fn streamed(secs_ago: i64, provider: &str, model: &str, latency: u64, ttft: u64) -> String {
    e(secs_ago, provider, model, true, latency, "").replace(
        r#""failure_type":"""#,
        &format!(r#""failure_type":"","ttft_ms":{ttft}"#),
    )
}

#[test]
fn every_report_shows_first_token_speed_and_uptime_over_hour_day_and_week() {
    let mut env = env();
    env.env("COLUMNS", "200");
    env.write(
        "stats/health_log.json",
        log_of(&[
            // A week ago: only the 7 d span holds this failure.
            e(
                5 * 24 * H,
                "groq",
                "llama-3.1-8b-instant",
                false,
                0,
                "timeout",
            ),
            streamed(20 * H, "groq", "llama-3.1-8b-instant", 900, 300),
            streamed(2 * H, "groq", "llama-3.1-8b-instant", 700, 100),
            // Within the hour: a pass read whole (a provider that does not
            // stream) has no first token, and a failure.
            e(1800, "groq", "llama-3.1-8b-instant", true, 500, ""),
            e(1200, "groq", "llama-3.3-70b-versatile", false, 0, "timeout"),
            streamed(1500, "mistral", "mistral-small-latest", 640, 210),
        ]),
    );
    env.write(
        "stats/capabilities.json",
        r#"{"groq::llama-3.1-8b-instant": {"speed": {"verdict": "yes", "seen": "2026-12-07T10:00:00Z",
             "ttft_ms": 120, "output_tokens": 180, "tokens_per_s": 240.5}},
           "groq::llama-3.3-70b-versatile": {"speed": {"verdict": "yes", "seen": "2026-12-07T10:00:00Z",
             "ttft_ms": 400, "output_tokens": 180, "tokens_per_s": 60.5}}}"#,
    );

    // rollup: Markdown, JSON, CSV.
    let md = env.run(&["rollup"]).ok().stdout;
    assert!(
        md.contains("| TTFT |") && md.contains("| Tokens/s |"),
        "{md}"
    );
    // groq: 1 h 1 of 2, 24 h 3 of 4, 7 d 3 of 5; first token the median
    // of 300 and 100 (nearest rank; the whole read has none); tokens/s the median of its
    // two models' latest speed probes.
    assert!(
        md.contains(
            "| **groq** | ⚠️ | 75% | 50% · 75% · 60% | 100ms | 700ms | 900ms | 151 tok/s | 4 |"
        ),
        "{md}"
    );
    let v = json(&env.run(&["rollup", "--format", "json"]).ok().stdout);
    let groq = row(&v, "groq");
    assert_eq!(groq["uptime_by_span"]["1h"], 0.5);
    assert_eq!(groq["uptime_by_span"]["24h"], 0.75);
    assert_eq!(groq["uptime_by_span"]["7d"], 0.6);
    // From the same log-scale histogram as p95: within 2%.
    assert!(close(&groq["median_ttft_ms"], 100.0, 2.0), "{groq}");
    assert_eq!(groq["tokens_per_s"], 150.5);
    let m = json(
        &env.run(&["rollup", "--format", "json", "--by", "model"])
            .ok()
            .stdout,
    );
    let small = m["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["model"] == "llama-3.1-8b-instant")
        .unwrap();
    assert_eq!(small["tokens_per_s"], 240.5);
    assert_eq!(small["uptime_by_span"]["1h"], 1.0);
    let csv = env.run(&["rollup", "--format", "csv"]).ok().stdout;
    assert!(
        csv.lines()
            .nth(1)
            .unwrap()
            .ends_with(",50.0,75.0,60.0,100.5,150.5"),
        "{csv}"
    );

    // The status page.
    let html = env.run(&["rollup", "--format", "html"]).ok().stdout;
    assert!(html.contains("data-uptime-1h=\"0.5000\""), "{html}");
    assert!(
        html.contains("data-ttft-ms=\"101\" data-tokens-per-s=\"151\""),
        "{html}"
    );
    assert!(html.contains("first token 210 ms"), "{html}");
    assert!(html.contains("first token 101 ms · 241 tokens/s"), "{html}");

    // brief: per provider and per model.
    let b = json(&env.run(&["brief", "--json"]).ok().stdout);
    let p = b["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["provider"] == "groq")
        .unwrap();
    assert_eq!(p["uptime_by_span"]["7d"], 0.6);
    assert!(close(&p["median_ttft_ms"], 100.0, 2.0), "{p}");
    assert_eq!(p["tokens_per_s"], 150.5);
    let speed = b["model_speed"].as_array().unwrap();
    let big = speed
        .iter()
        .find(|m| m["model"] == "groq::llama-3.3-70b-versatile")
        .unwrap();
    assert_eq!(big["uptime_by_span"]["1h"], 0.0);
    assert!(big["median_ttft_ms"].is_null());
    assert_eq!(big["tokens_per_s"], 60.5);
    let text = env.run(&["brief"]).ok().stdout;
    assert!(text.contains("100ms · 151 tok/s"), "{text}");
    assert!(text.contains("50% · 75% · 60%"), "{text}");
    assert!(
        text.contains("models (uptime over the last hour, day and week"),
        "{text}"
    );

    // state.
    let st = json(&env.run(&["state", "--json"]).ok().stdout);
    let small = st
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["model"] == "groq::llama-3.1-8b-instant")
        .unwrap();
    assert_eq!(small["uptime_by_span"]["24h"], 1.0);
    assert!(close(&small["median_ttft_ms"], 100.0, 2.0), "{small}");
    assert_eq!(small["tokens_per_s"], 240.5);
    let text = env.run(&["state"]).ok().stdout;
    assert!(text.contains("100ms · 241 tok/s"), "{text}");
}

#[test]
fn a_mistyped_provider_is_an_error_with_a_suggestion_everywhere() {
    let env = env();
    for args in [
        &["state", "--provider", "grok"][..],
        &["check", "--provider", "grok", "--dry-run"],
        &["models", "--provider", "grok"],
    ] {
        let r = env.run(args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(
            r.stderr
                .contains("unknown provider \"grok\" in --provider; did you mean \"groq\"?"),
            "{args:?}: {}",
            r.stderr
        );
    }
    // A name nothing is close to gets the list alone.
    let r = env.run(&["state", "--provider", "zzzzzzzz"]);
    assert_eq!(r.code, 2);
    assert!(!r.stderr.contains("did you mean"), "{}", r.stderr);
    assert!(
        r.stderr.contains("known providers: groq, mistral, cohere"),
        "{}",
        r.stderr
    );
}

/// At 60 columns, `state` keeps the reason a model is out of rotation,
/// says which columns it hid and how to see them, and never breaks a
/// model's name mid-word; `--wide` and `--json` show everything whole.
#[test]
fn a_narrow_state_keeps_the_reason_and_breaks_names_only_at_their_marks() {
    let mut env = env();
    env.env("COLUMNS", "60");
    let id = "groq::meta-llama/llama-4-maverick-17b-128e-instruct";
    env.write(
        "stats/model_state.json",
        format!(
            r#"{{
  "{id}": {{"state": "disabled", "reason": "error", "since": "2026-05-01T10:00:00Z", "consecutive_failures": 3}},
  "groq::llama-3.1-8b-instant": {{"state": "active", "consecutive_failures": 0}}
}}"#
        ),
    );
    let out = env.run(&["state"]).ok().stdout;
    let table: Vec<&str> = out.lines().filter(|l| l.starts_with('|')).collect();
    assert!(table[0].contains("REASON"), "{out}");
    for l in &table {
        assert!(l.chars().count() <= 60, "{l:?} in\n{out}");
    }
    // The reason is on the disabled model's first line.
    assert!(
        table
            .iter()
            .any(|l| l.contains("groq::") && l.contains("disabled") && l.contains("error")),
        "{out}"
    );
    // The name, wrapped: each line of the first column ends at a mark.
    let first: Vec<&str> = table
        .iter()
        .map(|l| l.split('|').nth(1).unwrap().trim())
        .skip_while(|c| *c != "groq::meta-")
        .take_while(|c| !c.starts_with('('))
        .collect();
    assert!(first.len() > 1, "wrapped: {out}");
    assert!(first.concat().starts_with(id), "{first:?} in\n{out}");
    for piece in &first[..first.len() - 1] {
        assert!(
            piece.ends_with("::") || piece.ends_with(['/', '-', '_']),
            "broken mid-word: {piece:?} in\n{out}"
        );
    }
    let note = out.split("hidden to fit 60 columns: ").nth(1).expect(&out);
    let note = note.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        note.contains("--wide, a wider terminal or --json shows them"),
        "{out}"
    );
    assert!(!note.contains("REASON"), "{out}");

    let wide = env.run(&["state", "--wide"]).ok().stdout;
    assert!(!wide.contains("hidden"), "{wide}");
    assert!(
        wide.lines().any(|l| l.contains(id) && l.contains("| 3 ")),
        "{wide}"
    );
    let v = json(&env.run(&["state", "--json"]).ok().stdout);
    assert!(v.to_string().contains(id), "{v}");
}
