//! The status page's bars as docs/status-page.md's DOM contract gives
//! them, read from the page's source (where `</li>` is left out) or from
//! Chromium's serialised DOM (where it is written): `ol.bars` with
//! `data-first-day` and `data-days`, then one `li` per day, oldest first,
//! whose text is `Mon D: U%, N probes[, p95 P ms]` or `Mon D: no probes`
//! and whose class is `g-fair`, `g-poor`, `g-none` or none (good).

use chrono::{DateTime, Duration, NaiveDate, Utc};

/// One bar.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// The ISO day, from the list's `data-first-day` and the bar's place.
    pub day: String,
    /// `good`, `fair`, `poor` or `none`.
    pub grade: String,
    pub tabindex: Option<String>,
    /// The text, as a reader sees it.
    pub text: String,
    pub samples: f64,
    /// The uptime in percent, as the text gives it.
    pub uptime_pct: Option<f64>,
    pub p95_ms: Option<u64>,
}

/// When the page says it was built (`<time id="built" datetime>`).
pub fn built(html: &str) -> DateTime<Utc> {
    let at = html
        .find("<time id=\"built\"")
        .unwrap_or_else(|| panic!("no time#built in {html}"));
    let tag = &html[at..at + html[at..].find('>').unwrap()];
    let t = attr_of(tag, "datetime").unwrap_or_else(|| panic!("no datetime in {tag}"));
    t.parse().unwrap_or_else(|e| panic!("{t}: {e}"))
}

/// The page was built between `before` and `after` (the test's clock
/// around the run that made it), and its last bar is the UTC day it was
/// built on: today's, however the run straddled midnight.
#[track_caller]
pub fn assert_ends_today(html: &str, bars: &[Bar], before: DateTime<Utc>, after: DateTime<Utc>) {
    let built = built(html);
    // The page's time is in whole seconds.
    assert!(
        before.timestamp() <= built.timestamp() && built <= after,
        "built at {built}, not between {before} and {after}"
    );
    assert_eq!(
        bars.last().expect("bars").day,
        built.format("%Y-%m-%d").to_string(),
        "the last bar is the day the page was built"
    );
}

/// The value of attribute `name` in the start tag `tag` (`<ol …>`).
pub fn attr_of(tag: &str, name: &str) -> Option<String> {
    let key = format!(" {name}=\"");
    let at = tag.find(&key)? + key.len();
    Some(tag[at..at + tag[at..].find('"')?].to_string())
}

/// The bars of the first `ol.bars` in `html`, and its `data-days`.
pub fn bars(html: &str) -> (Vec<Bar>, usize) {
    let start = html
        .find("<ol class=\"bars\"")
        .unwrap_or_else(|| panic!("no ol.bars in {html}"));
    let end = start + html[start..].find("</ol>").expect("a closed ol");
    let open_end = start + html[start..].find('>').unwrap();
    let ol = &html[start..open_end];
    let first =
        attr_of(ol, "data-first-day").unwrap_or_else(|| panic!("no data-first-day in {ol}"));
    let first =
        NaiveDate::parse_from_str(&first, "%Y-%m-%d").unwrap_or_else(|e| panic!("{first}: {e}"));
    let days: usize = attr_of(ol, "data-days")
        .expect("data-days")
        .parse()
        .unwrap();
    let out = html[open_end + 1..end]
        .split("<li")
        .skip(1)
        .enumerate()
        .map(|(i, li)| {
            let close = li.find('>').expect("a closed start tag");
            let tag = format!("<li{}", &li[..close]);
            let text = li[close + 1..]
                .split('<')
                .next()
                .unwrap()
                .trim()
                .to_string();
            let day = (first + Duration::days(i as i64))
                .format("%Y-%m-%d")
                .to_string();
            parse(day, &tag, text)
        })
        .collect();
    (out, days)
}

fn parse(day: String, tag: &str, text: String) -> Bar {
    let grade = match attr_of(tag, "class").as_deref() {
        None => "good".to_string(),
        Some(c) => {
            let g: Vec<&str> = c
                .split_whitespace()
                .filter_map(|c| c.strip_prefix("g-"))
                .collect();
            assert_eq!(g.len(), 1, "one grade class in {tag}");
            assert!(["fair", "poor", "none"].contains(&g[0]), "{tag}");
            g[0].to_string()
        }
    };
    let (label, figures) = text
        .split_once(": ")
        .unwrap_or_else(|| panic!("a bar's text is `day: figures`: {text:?}"));
    // The label is the day, in words.
    let want = NaiveDate::parse_from_str(&day, "%Y-%m-%d")
        .unwrap()
        .format("%b %-d")
        .to_string();
    assert_eq!(label, want, "{text:?} is not the bar's day {day}");
    let mut bar = Bar {
        day,
        grade,
        tabindex: attr_of(tag, "tabindex"),
        text: text.clone(),
        samples: 0.0,
        uptime_pct: None,
        p95_ms: None,
    };
    if figures == "no probes" {
        return bar;
    }
    let mut parts = figures.split(", ");
    let pct = parts.next().and_then(|p| p.strip_suffix('%'));
    bar.uptime_pct = Some(
        pct.and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("{text:?}")),
    );
    let n = parts.next().unwrap_or_else(|| panic!("{text:?}"));
    let n = n
        .strip_suffix(" probes")
        .or_else(|| n.strip_suffix(" probe"))
        .unwrap_or_else(|| panic!("{text:?}"));
    bar.samples = n.parse().unwrap_or_else(|e| panic!("{text:?}: {e}"));
    if let Some(p) = parts.next() {
        let ms = p.strip_prefix("p95 ").and_then(|p| p.strip_suffix(" ms"));
        bar.p95_ms = Some(
            ms.and_then(|m| m.parse().ok())
                .unwrap_or_else(|| panic!("{text:?}")),
        );
    }
    assert!(parts.next().is_none(), "{text:?}");
    bar
}
