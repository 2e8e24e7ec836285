//! The status page and the badges in a real browser: headless Chromium
//! (Debian's `chromium`, which `.ci/run` installs) renders them, and the
//! tests read the DOM it built and the screenshot it took
//! (`support::browser`).
//!
//! The page's DOM contract (docs/status-page.md) is what these tests read:
//! `section.provider[data-provider]` with its uptime figures, `ol.bars`
//! (`data-first-day`, `data-days`) with one `li` per day whose text holds
//! the day's figures (`support::page`), and
//! `tr.model[data-model][data-state]`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::Test;
use crate::support::need::Need;
use crate::support::{BIN, Env, browser, page, provider_toml};

pub fn tests() -> Vec<Test> {
    vec![
        Test::new(
            "browser::the_demos_status_page_renders_every_provider_and_model",
            &[Need::Program("chromium")],
            the_demos_status_page_renders_every_provider_and_model,
        ),
        Test::new(
            "browser::the_status_pages_bars_and_figures_match_rollup_json",
            &[Need::Program("chromium")],
            the_status_pages_bars_and_figures_match_rollup_json,
        ),
        Test::new(
            "browser::the_status_page_shows_today_first_on_a_phone_and_names_the_degraded",
            &[Need::Program("chromium")],
            the_status_page_shows_today_first_on_a_phone_and_names_the_degraded,
        ),
        Test::new(
            "browser::a_badge_renders_as_an_image",
            &[Need::Program("chromium")],
            a_badge_renders_as_an_image,
        ),
    ]
}

/// One element's start tag, read from Chromium's serialised DOM (which
/// writes every attribute as `name="value"`).
#[derive(Debug)]
struct Tag {
    attrs: HashMap<String, String>,
    /// Where the start tag begins in the DOM text.
    at: usize,
}

impl Tag {
    fn get(&self, name: &str) -> &str {
        self.attrs.get(name).map(String::as_str).unwrap_or_else(|| {
            panic!("no attribute {name} in {:?}", self.attrs);
        })
    }

    fn classes(&self) -> Vec<&str> {
        self.attrs
            .get("class")
            .map(|c| c.split_whitespace().collect())
            .unwrap_or_default()
    }
}

fn unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&#39;", "'")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&")
}

/// Every `<name …>` start tag whose class list holds `class`, in order.
fn tags(dom: &str, name: &str, class: &str) -> Vec<Tag> {
    let open = format!("<{name} ");
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = dom[from..].find(&open) {
        let at = from + i;
        let end = at + dom[at..].find('>').expect("a closed start tag");
        let mut attrs = HashMap::new();
        let mut rest = &dom[at + open.len()..end];
        while let Some(eq) = rest.find("=\"") {
            let key = rest[..eq].trim().to_string();
            let val_end = rest[eq + 2..].find('"').expect("a closed attribute");
            attrs.insert(key, unescape(&rest[eq + 2..eq + 2 + val_end]));
            rest = &rest[eq + 2 + val_end + 1..];
        }
        let tag = Tag { attrs, at };
        if tag.classes().contains(&class) {
            out.push(tag);
        }
        from = end;
    }
    out
}

/// The section of the DOM from each provider's start tag to the next's.
fn provider_sections(dom: &str) -> Vec<(Tag, &str)> {
    let sections = tags(dom, "section", "provider");
    let starts: Vec<usize> = sections.iter().map(|t| t.at).collect();
    sections
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            let end = starts.get(i + 1).copied().unwrap_or(dom.len());
            let start = t.at;
            (t, &dom[start..end])
        })
        .collect()
}

fn rollup_json(env: &Env, args: &[&str]) -> Value {
    let mut all = vec!["rollup", "--format", "json"];
    all.extend_from_slice(args);
    let out = env.run(&all).ok().stdout;
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// The provider rows of `rollup --format json`, by provider.
fn provider_rows(v: &Value) -> BTreeMap<String, Value> {
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r.get("model").is_none())
        .map(|r| (r["provider"].as_str().unwrap().to_string(), r.clone()))
        .collect()
}

/// An uptime as the page prints it: four decimals, empty for none.
fn fraction(v: &Value) -> String {
    v.as_f64().map(|u| format!("{u:.4}")).unwrap_or_default()
}

/// No resource of the page may load from the network.
fn assert_self_contained(html: &str) {
    for needle in [
        "src=\"http",
        "href=\"http",
        "url(http",
        "url(\"http",
        "url('http",
        "@import",
        "<link ",
        "<script src",
    ] {
        assert!(
            !html.contains(needle),
            "the page loads something from outside ({needle}):\n{}",
            &html[html.find(needle).unwrap().saturating_sub(200)..]
                .chars()
                .take(400)
                .collect::<String>()
        );
    }
}

/// The README's picture is made by `scripts/status-page-demo`; this runs
/// the same script and checks what it made: the page holds every provider
/// and model of the demo, with a full window of bars each, and loads
/// nothing from outside.
fn the_demos_status_page_renders_every_provider_and_model() {
    let env = Env::new();
    let png = env.path().join("status.png");
    let html = env.path().join("status.html");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/status-page-demo");
    let before = chrono::Utc::now();
    let out = Command::new("bash")
        .arg(&script)
        .arg(&png)
        .arg(&html)
        .env("LLMPROBE", BIN)
        .env("KEEP_STATS", env.stats())
        .env("HOME", env.home())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "scripts/status-page-demo failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let after = chrono::Utc::now();
    let bytes = std::fs::read(&png).unwrap();
    assert!(
        bytes.starts_with(b"\x89PNG") && bytes.len() > 10_000,
        "a real screenshot"
    );
    let source = std::fs::read_to_string(&html).unwrap();
    assert_self_contained(&source);
    // The README's badge, made beside the picture.
    let badge = std::fs::read_to_string(env.path().join("status-badge.svg")).unwrap();
    let svg = roxmltree::Document::parse(&badge).expect("the badge is valid SVG");
    assert!(
        svg.descendants()
            .any(|n| n.text().is_some_and(|t| t.contains("acme uptime 24h"))),
        "{badge}"
    );

    let dom = browser::dump_dom(&browser::file_url(&html));
    let sections = provider_sections(&dom);
    assert!(sections.len() >= 2, "the demo has several providers: {dom}");
    // Each provider's first probe: the demo's first run.
    let mut first_probe: BTreeMap<String, String> = BTreeMap::new();
    for e in crate::support::log_entries(&env.stats().join("health_log.json")) {
        let day = e["ts"].as_str().unwrap()[..10].to_string();
        let p = e["provider"].as_str().unwrap().to_string();
        let at = first_probe.entry(p).or_insert_with(|| day.clone());
        *at = day.min(at.clone());
    }
    let mut models_seen = BTreeSet::new();
    for (tag, body) in &sections {
        let provider = tag.get("data-provider");
        // A new install: one bar per UTC day from its first probe's (the
        // 90 days before are no history, and not drawn) to the day of the
        // build, and the words to say so.
        let (bars, days) = page::bars(body);
        assert_eq!(bars.len(), days, "{provider}: one bar per day");
        assert_eq!(bars[0].day, first_probe[provider], "{provider}");
        page::assert_ends_today(&dom, &bars, before, after);
        assert!(
            body.contains("class=\"mut no-history\""),
            "{provider}: {body}"
        );
        if days == 1 {
            assert!(
                body.contains(">No history yet: the first probe was today ("),
                "{body}"
            );
        }
        let samples: u64 = bars.iter().map(|b| b.samples as u64).sum();
        assert_eq!(
            samples.to_string(),
            tag.get("data-samples-window"),
            "{provider}"
        );
        assert!(samples >= 3, "{provider}: three demo runs probed it");
        for m in tags(body, "tr", "model") {
            let state = m.get("data-state");
            assert!(
                ["active", "paused", "disabled"].contains(&state),
                "{provider}: state {state}"
            );
            models_seen.insert(format!("{provider}::{}", m.get("data-model")));
        }
    }
    // Every model in the demo's log is on the page, once.
    let by_model = rollup_json(&env, &["--window", "90d", "--by", "model"]);
    let in_log: BTreeSet<String> = by_model["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{}::{}",
                r["provider"].as_str().unwrap(),
                r["model"].as_str().unwrap()
            )
        })
        .collect();
    assert!(!in_log.is_empty());
    assert_eq!(
        models_seen, in_log,
        "every model of the demo's log on the page"
    );
    assert_eq!(html_log_models(&dom), models_seen, "each model once");
    assert!(
        dom.contains("id=\"overall\""),
        "the header with the overall state"
    );
}

/// The models the page lists (each once), to check none is listed twice.
fn html_log_models(dom: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for (tag, body) in provider_sections(dom) {
        for m in tags(body, "tr", "model") {
            let key = format!("{}::{}", tag.get("data-provider"), m.get("data-model"));
            assert!(seen.insert(key.clone()), "{key} is listed twice");
        }
    }
    seen
}

const DAY: i64 = 86_400;

/// A log over several days, with a day of failures and a gap: each bar
/// holds exactly that day's probes, and the section's figures are
/// `rollup --format json`'s for the same windows.
fn the_status_pages_bars_and_figures_match_rollup_json() {
    let mut env = Env::new();
    let cfg = crate::support::config(
        &env,
        &[
            provider_toml(
                "alpha",
                "openai",
                "http://127.0.0.1:9/v1",
                &["a1", "a2"],
                "",
            ),
            provider_toml("beta", "openai", "http://127.0.0.1:9/v1", &["b1"], ""),
        ],
    );
    env.env("LLMPROBE_CONFIG", &cfg);
    // Probes at the middle of hours, well inside their days and windows.
    let now = chrono::Utc::now().timestamp();
    let mut lines = Vec::new();
    let mut per_day: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut add = |secs_ago: i64, provider: &str, model: &str, ok: bool, latency: u64| {
        let ts = now - secs_ago;
        let day = chrono::DateTime::from_timestamp(ts, 0)
            .unwrap()
            .format("%Y-%m-%d")
            .to_string();
        *per_day.entry((provider.to_string(), day)).or_default() += 1;
        lines.push(format!(
            r#"{{"ts":"{}","provider":"{provider}","model":"{model}","ok":{},"latency_ms":{latency},"failure_type":"{}"}}"#,
            chrono::DateTime::from_timestamp(ts, 0).unwrap().format("%Y-%m-%dT%H:%M:%SZ"),
            ok as u8,
            if ok { "" } else { "timeout" }
        ));
    };
    for d in [0, 1, 2, 5, 12, 40, 80] {
        for h in 0..6 {
            let secs = d * DAY + h * 3600 + 1800 + 60;
            add(secs, "alpha", "a1", !(d == 5 && h < 4), 200 + 50 * h as u64);
            add(secs + 300, "alpha", "a2", true, 900);
            if d != 12 {
                add(secs + 600, "beta", "b1", h % 3 != 0, 400);
            }
        }
    }
    lines.sort(); // by timestamp: the log is in time order
    env.write(
        "stats/health_log.json",
        format!("[\n{}\n]\n", lines.join(",\n")),
    );
    let html = env.path().join("status.html");
    let before = chrono::Utc::now();
    env.run(&[
        "rollup",
        "--format",
        "html",
        "--output",
        html.to_str().unwrap(),
    ])
    .ok();
    let after = chrono::Utc::now();
    assert_self_contained(&std::fs::read_to_string(&html).unwrap());
    let dom = browser::dump_dom(&browser::file_url(&html));

    let window = provider_rows(&rollup_json(&env, &["--window", "90d"]));
    let figures: Vec<(&str, BTreeMap<String, Value>)> = ["24h", "7d", "30d"]
        .into_iter()
        .map(|w| (w, provider_rows(&rollup_json(&env, &["--window", w]))))
        .collect();
    let sections = provider_sections(&dom);
    let shown: Vec<&str> = sections
        .iter()
        .map(|(t, _)| t.get("data-provider"))
        .collect();
    assert_eq!(shown, ["alpha", "beta"]);
    for (tag, body) in &sections {
        let p = tag.get("data-provider");
        let row = &window[p];
        assert_eq!(
            tag.get("data-samples-window"),
            row["samples"].to_string(),
            "{p}"
        );
        assert_eq!(
            tag.get("data-uptime-window"),
            fraction(&row["uptime"]),
            "{p}"
        );
        for (w, rows) in &figures {
            let want = rows
                .get(p)
                .map(|r| fraction(&r["uptime"]))
                .unwrap_or_default();
            assert_eq!(tag.get(&format!("data-uptime-{w}")), want, "{p} {w}");
        }
        // One bar per UTC day from its first probe's (80 days ago: the
        // days of the window before it are no history, not drawn) to
        // today.
        let (bars, days) = page::bars(body);
        let first = per_day
            .keys()
            .filter(|(provider, _)| provider == p)
            .map(|(_, day)| day)
            .min()
            .unwrap();
        assert_eq!(&bars[0].day, first, "{p}");
        let built = page::built(&dom).date_naive();
        let from = chrono::NaiveDate::parse_from_str(first, "%Y-%m-%d").unwrap();
        assert_eq!(days as i64, (built - from).num_days() + 1, "{p}");
        assert!(body.contains("(no history before)"), "{p}");
        assert_eq!(bars.len(), days, "{p}");
        page::assert_ends_today(&dom, &bars, before, after);
        let mut total = 0;
        for b in &bars {
            let n = b.samples as u64;
            let want = per_day
                .get(&(p.to_string(), b.day.clone()))
                .copied()
                .unwrap_or(0);
            assert_eq!(n, want, "{p} on {}: {:?}", b.day, b.text);
            total += n;
            // Every bar says its grade in a class (none: good) and in
            // text, not only in colour.
            if n == 0 {
                assert_eq!(b.grade, "none", "{b:?}");
                assert!(b.text.ends_with(": no probes"), "{b:?}");
                assert_eq!(b.uptime_pct, None);
            } else {
                assert_ne!(b.grade, "none", "{b:?}");
                let u = b.uptime_pct.unwrap();
                let want = match u {
                    u if u >= 90.0 => "good",
                    u if u >= 60.0 => "fair",
                    _ => "poor",
                };
                assert_eq!(b.grade, want, "{b:?}");
            }
            assert_eq!(b.tabindex.as_deref(), Some("0"), "bars take keyboard focus");
        }
        assert_eq!(total.to_string(), tag.get("data-samples-window"));
        assert!(
            body.contains("class=\"sparkline\""),
            "{p}: a latency sparkline"
        );
    }
    // alpha's bad day is graded below good, in words as well.
    let (_, alpha) = &sections[0];
    let bad_day = chrono::DateTime::from_timestamp(now - 5 * DAY - 1800 - 60, 0)
        .unwrap()
        .format("%Y-%m-%d")
        .to_string();
    let bad = page::bars(alpha)
        .0
        .into_iter()
        .find(|b| b.day == bad_day)
        .unwrap();
    assert!(bad.grade == "fair" || bad.grade == "poor", "{bad:?}");
    assert!(bad.uptime_pct.unwrap() < 90.0, "{bad:?}");
    let models: Vec<String> = sections
        .iter()
        .flat_map(|(t, body)| {
            tags(body, "tr", "model")
                .into_iter()
                .map(|m| format!("{}::{}", t.get("data-provider"), m.get("data-model")))
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(models, ["alpha::a1", "alpha::a2", "beta::b1"]);
}

/// A badge `rollup --format badge` wrote, shown by a page through `<img>`
/// as a README shows it: Chromium loads it as an image of the width the
/// SVG declares (a badge it could not parse would fire `onerror`, with no
/// width), and the screenshot holds the message's green and the label's
/// grey.
fn a_badge_renders_as_an_image() {
    let env = crate::support::Env::new();
    let ts = crate::support::ago(3600);
    env.write(
        "stats/health_log.json",
        format!(
            "[\n{{\"ts\":\"{ts}\",\"provider\":\"groq\",\"model\":\"llama-3.1-8b-instant\",\"ok\":1,\"latency_ms\":300,\"failure_type\":\"\"}}\n]\n"
        ),
    );
    env.run(&[
        "rollup",
        "--format",
        "badge",
        "--provider",
        "groq",
        "--output",
        "badge.svg",
    ])
    .ok();
    let svg = std::fs::read_to_string(env.path().join("badge.svg")).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let width = doc.root_element().attribute("width").unwrap().to_string();
    assert!(svg.contains("groq uptime 24h: 100%"), "{svg}");

    // The DOM after load: what the image decoded to.
    env.write(
        "dom.html",
        "<!doctype html><html><body>\
         <img id=\"b\" src=\"badge.svg\" alt=\"groq uptime\" \
         onload=\"document.body.setAttribute('data-loaded', this.naturalWidth + 'x' + this.naturalHeight)\" \
         onerror=\"document.body.setAttribute('data-loaded', 'error')\">\
         </body></html>",
    );
    let dom = browser::dump_dom(&browser::file_url(&env.path().join("dom.html")));
    assert!(
        dom.contains(&format!("data-loaded=\"{width}x20\"")),
        "the badge did not load as a {width}×20 image:\n{dom}"
    );

    // The pixels: a page with only the badge, scaled up 4 times.
    env.write(
        "shot.html",
        format!(
            "<!doctype html><html><body style=\"margin:0;background:#fff\">\
             <img src=\"badge.svg\" style=\"width:{}px;height:80px\"></body></html>",
            width.parse::<u32>().unwrap() * 4
        ),
    );
    let png = env.path().join("badge.png");
    browser::screenshot(
        &browser::file_url(&env.path().join("shot.html")),
        &png,
        800,
        200,
        false,
    );
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&png).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let pixels: Vec<&[u8]> = buf[..info.buffer_size()]
        .chunks(channels)
        .map(|p| &p[..3])
        .collect();
    // Colours as drawn, within what the badge's light gradient and
    // anti-aliasing shift them.
    let near = |(r, g, b): (i32, i32, i32)| {
        pixels
            .iter()
            .filter(|p| {
                (p[0] as i32 - r).abs() <= 24
                    && (p[1] as i32 - g).abs() <= 24
                    && (p[2] as i32 - b).abs() <= 24
            })
            .count()
    };
    let green = near((0x2e, 0x7d, 0x32));
    let grey = near((0x55, 0x55, 0x55));
    assert!(green > 500, "too little of the message's green: {green}");
    assert!(grey > 1000, "too little of the label's grey: {grey}");
}

/// What the page's layout is, measured by the browser in a frame of the
/// width asked: the frame's width and the page's (which must not scroll
/// sideways), the header's list of providers not ok, and per provider its
/// heading's class and grade words, the box its bars scroll in, its first
/// and last bar (`[left, right, top, bottom]`, CSS pixels) and how far
/// left and right its bars reach.
const LAYOUT: &str = r#"
const r = e => { const b = e.getBoundingClientRect(); return [b.left, b.right, b.top, b.bottom].map(Math.round); };
const a = d.getElementById('affected');
return JSON.stringify({
  width: w.innerWidth,
  scroll_width: d.documentElement.scrollWidth,
  affected: a ? a.textContent : null,
  sections: [...d.querySelectorAll('section.provider')].map(s => {
    const bars = [...s.querySelectorAll('ol.bars > li')].map(r);
    const h = s.querySelector('h2');
    const nh = s.querySelector('.no-history');
    return {
      provider: s.dataset.provider,
      uptime_24h: s.getAttribute('data-uptime-24h'),
      class: h.className,
      grade: h.querySelector('.grade').textContent,
      no_history: nh ? nh.textContent : null,
      days: r(s.querySelector('.days')),
      first: bars[0],
      today: bars[bars.length - 1],
      leftmost: Math.min(...bars.map(b => b[0])),
      rightmost: Math.max(...bars.map(b => b[1])),
    };
  }),
});
"#;

/// The status page at a phone's width (400 px) and a desktop's (1200 px),
/// in Chromium: the page, the DOM the browser built and its layout, and
/// screenshots of both. On the phone the bars put today first, at the
/// left, visible without scrolling (the older days scroll); on the
/// desktop they run from the oldest at the left to today at the right,
/// all visible. The header names the providers not ok; each heading has
/// its grade as a class (its colour) and in words; a provider first
/// probed today says it has no history yet, with today's bar alone.
/// The screenshots are checked where the layout says today's bar is: the
/// good day's green. With `LLMPROBE_SCREENSHOTS=DIR` they are kept there
/// too, to look at.
fn the_status_page_shows_today_first_on_a_phone_and_names_the_degraded() {
    let mut env = Env::new();
    let cfg = crate::support::config(
        &env,
        &["alpha", "beta", "gamma"]
            .map(|p| provider_toml(p, "openai", "http://127.0.0.1:9/v1", &["m"], "")),
    );
    env.env("LLMPROBE_CONFIG", &cfg);
    // alpha: every day good for 95 days, and 2 of its last 3 probes pass
    // (fair: degraded); beta: every earlier day failed, today passed (its
    // bar today is solid green, yesterday's cross-hatched red); gamma:
    // first probed today.
    let now = chrono::Utc::now().timestamp();
    let midnight = now - now.rem_euclid(DAY);
    let today = (now - 60).max(midnight + 1);
    let mut entries: Vec<(i64, String, bool)> = Vec::new();
    for d in 1..=95 {
        let noon = midnight - d * DAY + DAY / 2;
        entries.push((noon, "alpha".into(), true));
        entries.push((noon + 60, "beta".into(), false));
    }
    entries.extend([
        (today - 2, "alpha".into(), true),
        (today - 1, "alpha".into(), false),
        (today, "alpha".into(), true),
        (today - 1, "beta".into(), true),
        (today, "beta".into(), true),
        (today, "gamma".into(), true),
    ]);
    entries.sort();
    let lines: Vec<String> = entries
        .iter()
        .map(|(ts, p, ok)| {
            format!(
                r#"{{"ts":"{}","provider":"{p}","model":"m","ok":{},"latency_ms":300,"failure_type":"{}"}}"#,
                chrono::DateTime::from_timestamp(*ts, 0)
                    .unwrap()
                    .format("%Y-%m-%dT%H:%M:%SZ"),
                *ok as u8,
                if *ok { "" } else { "timeout" }
            )
        })
        .collect();
    env.write(
        "stats/health_log.json",
        format!("[\n{}\n]\n", lines.join(",\n")),
    );
    let html_path = env.path().join("status.html");
    env.run(&[
        "rollup",
        "--format",
        "html",
        "--output",
        html_path.to_str().unwrap(),
    ])
    .ok();
    let html = std::fs::read_to_string(&html_path).unwrap();
    assert_self_contained(&html);
    let keep = std::env::var_os("LLMPROBE_SCREENSHOTS").map(std::path::PathBuf::from);

    for width in [400, 1200] {
        let out = browser::in_frame(&html, width, LAYOUT);
        let layout: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        let at = |v: &Value, i: usize| v[i].as_i64().unwrap();
        assert_eq!(layout["width"], width, "{layout}");
        assert!(
            layout["scroll_width"].as_i64().unwrap() <= width as i64,
            "{width} px: the page scrolls sideways: {layout}"
        );
        // The header names whom "degraded" means.
        let affected = layout["affected"].as_str().unwrap_or_default();
        assert!(affected.starts_with("Degraded: alpha"), "{affected}");
        let sections = layout["sections"].as_array().unwrap();
        let names: Vec<&str> = sections
            .iter()
            .map(|s| s["provider"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["alpha", "beta", "gamma"]);
        for s in sections {
            let p = s["provider"].as_str().unwrap();
            // The heading: the grade of its last 24 h, as a class and in
            // words, as the header counts it.
            let u: f64 = s["uptime_24h"].as_str().unwrap().parse().unwrap();
            let (class, words) = match u {
                u if u >= 0.9 => ("g-good", "ok"),
                u if u >= 0.6 => ("g-fair", "degraded"),
                _ => ("g-poor", "down"),
            };
            assert_eq!(
                (s["class"].as_str(), s["grade"].as_str()),
                (Some(class), Some(words)),
                "{s}"
            );
            if class != "g-good" {
                assert!(affected.contains(p), "{p} is not named in {affected:?}");
            }
            let (days, today, first) = (&s["days"], &s["today"], &s["first"]);
            // Today's bar is on screen, inside the box the bars scroll in.
            assert!(
                at(today, 0) >= at(days, 0).max(0) && at(today, 1) <= at(days, 1).min(width as i64),
                "{width} px, {p}: today's bar is not in view: {s}"
            );
            if width == 400 {
                // Today first, at the left.
                assert_eq!(at(today, 0), s["leftmost"].as_i64().unwrap(), "{s}");
                assert!(at(today, 0) - at(days, 0) <= 1, "{s}");
            } else {
                // Oldest first, today at the right.
                assert_eq!(at(today, 1), s["rightmost"].as_i64().unwrap(), "{s}");
                assert!(at(days, 1) - at(today, 1) <= 1, "{s}");
            }
            if p == "gamma" {
                let nh = s["no_history"].as_str().unwrap_or_default();
                assert!(nh.starts_with("No history yet"), "{s}");
                assert_eq!(first, today, "today's bar alone: {s}");
            } else {
                assert_eq!(s["no_history"], Value::Null, "{s}");
                if width == 400 {
                    // 91 days do not fit: the oldest is off to the right,
                    // a scroll away.
                    assert!(at(first, 0) > at(days, 1), "{s}");
                } else {
                    assert!(at(first, 0) >= at(days, 0), "all 91 days in view: {s}");
                }
            }
        }
        // The picture: beta's bar today is the good day's solid green,
        // where the layout says it is.
        let beta = &sections[1];
        let (x, y) = (
            (at(&beta["today"], 0) + at(&beta["today"], 1)) / 2,
            (at(&beta["today"], 2) + at(&beta["today"], 3)) / 2,
        );
        // Tall enough for the whole of every provider's bars.
        let height = at(&sections[2]["today"], 3) as u32 + 150;
        let png = env.path().join(format!("status-{width}.png"));
        browser::screenshot(&browser::file_url(&html_path), &png, width, height, false);
        let (rgb, size) = browser::pixel(&png, x as u32, y as u32);
        assert_eq!(size.0, width, "{png:?}");
        let green = [0x1a, 0x7f, 0x37];
        assert!(
            rgb.iter().zip(green).all(|(a, b)| a.abs_diff(b) <= 16),
            "{width} px: at ({x}, {y}), beta's bar today, {rgb:?} is not the good day's green"
        );
        if let Some(dir) = &keep {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::copy(&png, dir.join(format!("status-{width}.png"))).unwrap();
        }
    }
}
