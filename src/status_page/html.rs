//! The status page as one self-contained HTML file: inline CSS (light and
//! dark), no script, no resource from anywhere. It reads in order without
//! CSS; each bar carries its figures as text (shown on hover and keyboard
//! focus) and its grade as a pattern as well as a colour. The DOM is a
//! stable interface (docs/status-page.md).

use std::fmt::Write as _;

use crate::capabilities::Judgement;
use crate::format::{fmt_count, fmt_minute, fmt_pct, fmt_rfc3339};
use crate::grade::{self, FAIR, GOOD, Grade};
use crate::state::ModelState;

use super::days::LastProbe;
use super::{Bar, ModelPage, Page, ProviderPage, privacy};

const CSS: &str = r#":root{--bg:#fff;--fg:#1f2328;--mut:#59636e;--line:#d1d9e0;--good:#1a7f37;--fair:#9a6700;--poor:#cf222e;--none:#8c959f;--focus:#0969da}
@media (prefers-color-scheme:dark){:root{--bg:#0d1117;--fg:#e6edf3;--mut:#9198a1;--line:#3d444d;--good:#3fb950;--fair:#d29922;--poor:#f85149;--none:#768390;--focus:#58a6ff}}
body{font:15px/1.45 system-ui,sans-serif;background:var(--bg);color:var(--fg);max-width:64rem;margin:0 auto;padding:1rem}
h1{font-size:1.5rem;margin:.2rem 0}h2{font-size:1.2rem;margin:0}
h2{border-left:.3rem solid var(--g);padding-left:.5rem}h2.g-good{--g:var(--good)}h2.g-fair{--g:var(--fair)}h2.g-poor{--g:var(--poor)}h2.g-none{--g:var(--none)}
.grade{display:inline-block;vertical-align:.15em;margin-left:.4rem;padding:0 .5rem;border-radius:1rem;font-size:.8rem;font-weight:600;color:var(--bg);background:var(--g)}
.g-good .grade::before{content:"✔ "}.g-fair .grade::before{content:"⚠ "}.g-poor .grade::before{content:"✗ "}.g-none .grade{background:none;color:var(--mut);border:1px dashed var(--none)}
header{border-bottom:1px solid var(--line);padding-bottom:.6rem}
#overall .state{font-size:1.15rem;font-weight:600}
[data-state=ok] .state::before{content:"✔ "}[data-state=degraded] .state::before{content:"⚠ "}[data-state=down] .state::before{content:"✗ "}
.stale-warning{border-left:4px solid var(--poor);padding:.3rem .6rem;font-weight:600}
.provider{border-bottom:1px solid var(--line);padding:1rem 0}
.uptime{display:flex;gap:.2rem 1.5rem;margin:.3rem 0;flex-wrap:wrap}.uptime div{display:flex;gap:.3rem}.uptime dt{color:var(--mut)}.uptime dd{margin:0;font-weight:600}
.bars{display:flex;gap:1px;list-style:none;padding:0 0 1.7rem;margin:.4rem 0 0;height:2.2rem;overflow:auto hidden;scrollbar-width:thin;scroll-padding:0 9rem}
.bars>li{flex:none;min-width:5px;height:0;padding-top:2.2rem;box-sizing:border-box;overflow:hidden;white-space:nowrap;font-size:.8rem;line-height:1.6;background:var(--good)}
.bars>li:first-child{margin-left:auto}.no-history~.days .bars{background:linear-gradient(var(--none),var(--none)) 0 1.1rem/100% 1px no-repeat}
.bars>li:hover,.bars>li:focus{overflow:visible;position:relative;z-index:1}
.bars>li::first-line{background:var(--fg);color:var(--bg)}
.bars>li:focus{outline:3px solid var(--focus);outline-offset:1px}
.bars>.g-fair{background:repeating-linear-gradient(45deg,var(--fair) 0 3px,transparent 3px 5px);border:1px solid var(--fair)}
.bars>.g-poor{background:repeating-linear-gradient(45deg,var(--poor) 0 2px,transparent 2px 4px),repeating-linear-gradient(-45deg,var(--poor) 0 2px,var(--bg) 2px 4px);border:1px solid var(--poor)}
.bars>.g-none{background:none;border:1px dashed var(--none)}
.bars>:is(.g-fair,.g-poor,.g-none){padding-top:calc(2.2rem - 2px)}
.skip{position:absolute;left:-999rem}.skip:focus{position:static;outline:3px solid var(--focus)}
.sparkline{display:block;width:100%;height:2.5rem;color:var(--mut);overflow:visible}.sparkline[data-one-day]{height:.5rem}.sparkline[data-one-day] path{stroke-width:6}
.sparkline path{fill:none;stroke:currentColor;stroke-width:2;stroke-linecap:round;stroke-linejoin:round;vector-effect:non-scaling-stroke}
.table{overflow-x:auto;margin-top:.6rem}.models{border-collapse:collapse;width:100%;min-width:40rem;font-size:.9rem}
.models th[scope=row]{white-space:nowrap}.models td{min-width:8rem}
.models th,.models td{text-align:left;padding:.25rem .5rem;border-bottom:1px solid var(--line);vertical-align:top}
.models caption{text-align:left;color:var(--mut)}
.st-paused{color:var(--fair)}.st-disabled{color:var(--poor)}
.mut,footer{color:var(--mut)}footer{font-size:.85rem;padding-top:.6rem}
@media (max-width:600px){.days{overflow:auto hidden;scrollbar-width:thin;scroll-padding:0 9rem}.bars{flex-direction:row-reverse;overflow:visible;min-width:100%}.bars>li:first-child{margin:0 auto 0 0}.sparkline{transform:scaleX(-1)}}"#;

/// HTML text and attribute values, escaped (the one escape, shared with
/// the badges' SVG).
pub use crate::markup::escape as esc;

/// A fraction with 4 decimals, or `""`.
fn frac(u: Option<f64>) -> String {
    u.map(|u| format!("{u:.4}")).unwrap_or_default()
}

/// A bar's grade class; a good day, the most common, has none (the page's
/// largest part is its bars: docs/status-page.md).
fn grade_class(u: Option<f64>) -> &'static str {
    match u.map(grade::grade) {
        None => "g-none",
        Some(Grade::Good) => "",
        Some(Grade::Fair) => "g-fair",
        Some(Grade::Poor) => "g-poor",
    }
}

/// A window as the page writes it, like its fixed ones (`24 h`, `7 d`):
/// `90d` is `90 d`; `all` stays.
pub(super) fn spaced(window: &str) -> String {
    match window.find(|c: char| !c.is_ascii_digit()) {
        Some(n) if n > 0 => format!("{} {}", &window[..n], &window[n..]),
        _ => window.to_string(),
    }
}

/// `2026-12-01` (`iso`) or `Dec 1`.
fn day(ts: i64, iso: bool) -> String {
    chrono::DateTime::from_timestamp(ts, 0)
        .map(|t| {
            t.format(if iso { "%Y-%m-%d" } else { "%b %-d" })
                .to_string()
        })
        .unwrap_or_default()
}

/// The whole file.
pub fn render(page: &Page) -> String {
    let mut o = String::with_capacity(16 * 1024 + page.providers.len() * 8 * 1024);
    o.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    o.push_str("<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n");
    o.push_str("<meta name=\"color-scheme\" content=\"light dark\">\n");
    o.push_str("<title>LLM provider status</title>\n<style>\n");
    o.push_str(CSS);
    o.push('\n');
    o.push_str(&sized(page.days.count));
    o.push_str("\n</style>\n</head>\n<body>\n");
    header(&mut o, page);
    o.push_str("<main>\n");
    if page.providers.is_empty() {
        o.push_str(
            "<p class=\"no-data\">No data: the health log holds no probes of the providers shown yet. \
             Run <code>llmprobe check</code>, and schedule it.</p>\n",
        );
    }
    for (i, p) in page.providers.iter().enumerate() {
        provider(&mut o, page, i, p);
    }
    o.push_str("</main>\n");
    footer(&mut o, page);
    o.push_str("</body>\n</html>\n");
    o
}

fn header(o: &mut String, page: &Page) {
    let words = match page.overall {
        "ok" => "All providers operational",
        "degraded" => "Some providers degraded",
        "down" => "All providers down",
        _ => "No data",
    };
    let _ = write!(
        o,
        "<header id=\"overall\" data-state=\"{}\">\n<h1>LLM provider status</h1>\n<p class=\"state\">{words}<span class=\"mut\"> (last 24 h)</span></p>\n",
        page.overall
    );
    // Who is behind "Some providers degraded": each a link to its section.
    let named = |want: Grade| -> Vec<String> {
        page.providers
            .iter()
            .enumerate()
            .filter(|(_, p)| p.rolling[1].map(grade::grade) == Some(want))
            .map(|(i, p)| format!("<a href=\"#p{i}\">{}</a>", esc(&p.name)))
            .collect()
    };
    let affected: Vec<String> = [
        ("Degraded", named(Grade::Fair)),
        ("Down", named(Grade::Poor)),
    ]
    .into_iter()
    .filter(|(_, names)| !names.is_empty())
    .map(|(word, names)| format!("{word}: {}.", names.join(", ")))
    .collect();
    if !affected.is_empty() {
        let _ = writeln!(o, "<p id=\"affected\">{}</p>", affected.join(" "));
    }
    match page.newest {
        Some(t) => {
            let _ = writeln!(
                o,
                "<p>Newest probe: <time id=\"newest\" datetime=\"{}\">{}</time>. Page built {}.</p>",
                fmt_rfc3339(t),
                fmt_minute(t),
                fmt_minute(page.now)
            );
        }
        None => {
            let _ = writeln!(
                o,
                "<p>Newest probe: never. Page built {}.</p>",
                fmt_minute(page.now)
            );
        }
    }
    if !page.stale.is_empty() {
        o.push_str("<div class=\"stale-warning\" role=\"alert\">");
        for (i, line) in page.stale.iter().enumerate() {
            if i > 0 {
                o.push_str("<br>");
            }
            o.push_str(&esc(line));
        }
        o.push_str("</div>\n");
    }
    o.push_str("</header>\n");
}

fn provider(o: &mut String, page: &Page, i: usize, p: &ProviderPage) {
    let _ = writeln!(
        o,
        "<section class=\"provider\" data-provider=\"{}\" data-uptime-1h=\"{}\" data-uptime-24h=\"{}\" data-uptime-7d=\"{}\" data-uptime-30d=\"{}\" data-uptime-window=\"{}\" data-samples-window=\"{}\" data-ttft-ms=\"{}\" data-tokens-per-s=\"{}\" aria-labelledby=\"p{i}\">",
        esc(&p.name),
        frac(p.rolling[0]),
        frac(p.rolling[1]),
        frac(p.rolling[2]),
        frac(p.rolling[3]),
        frac(p.window_uptime),
        p.window_samples.round() as i64,
        whole(p.ttft_ms),
        whole(p.tokens_per_s),
    );
    let (class, words) = heading_grade(p.rolling[1]);
    let _ = writeln!(
        o,
        "<h2 id=\"p{i}\" class=\"{class}\">{} <span class=\"grade\">{words}</span></h2>",
        esc(&p.name)
    );
    o.push_str("<dl class=\"uptime\">");
    for (label, u) in [
        ("1 h", p.rolling[0]),
        ("24 h", p.rolling[1]),
        ("7 d", p.rolling[2]),
        ("30 d", p.rolling[3]),
    ]
    .into_iter()
    .chain(std::iter::once((
        spaced(&page.window).as_str(),
        p.window_uptime,
    ))) {
        let _ = write!(
            o,
            "<div><dt>{}</dt><dd>{}</dd></div>",
            esc(label),
            u.map(fmt_pct).unwrap_or_else(|| "no probes".into())
        );
    }
    // Speed, where measured: the median time to first token of streamed
    // probes, and the latest speed probes' rate.
    if let Some(v) = p.ttft_ms {
        let _ = write!(
            o,
            "<div><dt>first token (median)</dt><dd>{} ms</dd></div>",
            v.round() as i64
        );
    }
    if let Some(v) = p.tokens_per_s {
        let _ = write!(
            o,
            "<div><dt>tokens/s</dt><dd>{}</dd></div>",
            v.round() as i64
        );
    }
    o.push_str("</dl>\n");
    // The days before its first probe are not drawn: it had no history
    // then, which is not a day without probes.
    let shown = &p.bars[p.history_from.min(p.bars.len().saturating_sub(1))..];
    let (first, last) = match (shown.first(), shown.last()) {
        (Some(f), Some(l)) => (day(f.day, true), day(l.day, true)),
        _ => Default::default(),
    };
    let window = esc(&spaced(&page.window));
    let probes = fmt_count(p.window_samples);
    if p.history_from == 0 {
        let _ = writeln!(
            o,
            "<p class=\"mut\">Daily uptime per UTC day, from {first} to {last} ({probes} probes in the last {window}):</p>"
        );
    } else if shown.len() <= 1 {
        let _ = writeln!(
            o,
            "<p class=\"mut no-history\">No history yet: {}. One bar a day from here on, for the last {window}:</p>",
            if p.window_samples > 0.0 {
                let s = if probes == "1" { "" } else { "s" };
                format!("the first probe was today ({probes} probe{s})")
            } else {
                "no probes".to_string()
            }
        );
    } else {
        let _ = writeln!(
            o,
            "<p class=\"mut no-history\">Daily uptime per UTC day, from {first}, the first probe (no history before), to {last} ({probes} probes in the last {window}):</p>"
        );
    }
    // One tab stop per bar: a way past them, shown on focus.
    let next = match page.providers.get(i + 1) {
        Some(_) => format!("p{}", i + 1),
        None => "end".into(),
    };
    let _ = writeln!(
        o,
        "<a class=\"skip\" href=\"#{next}\">Skip {}'s {} days</a>",
        esc(&p.name),
        shown.len()
    );
    let _ = writeln!(
        o,
        "<div class=\"days\"><ol class=\"bars\" data-first-day=\"{first}\" data-days=\"{}\">",
        shown.len()
    );
    for b in shown {
        bar(o, b);
    }
    o.push_str("\n</ol></div>\n");
    sparkline(o, page, i, p);
    models(o, page, p);
    o.push_str("</section>\n");
}

/// A provider's grade over the last 24 h, as its heading shows it: a
/// class for its colour (and its mark, `✔ ⚠ ✗`) and the words, the
/// overall state's.
fn heading_grade(uptime_24h: Option<f64>) -> (&'static str, &'static str) {
    match uptime_24h.map(grade::grade) {
        None => ("g-none", "no probes in 24 h"),
        Some(Grade::Good) => ("g-good", "ok"),
        Some(Grade::Fair) => ("g-fair", "degraded"),
        Some(Grade::Poor) => ("g-poor", "down"),
    }
}

/// The rules that depend on the window's number of days, `n`: a bar's
/// width, one `n`th of the row, so that a provider whose history starts
/// inside the window keeps the others' day width, its bars at today's
/// end; which bars show their figures leftward (the half nearer today),
/// so that the words stay on the page. On a narrow screen the row puts
/// today first (at the left) and scrolls: at least 5 px a bar, and the
/// figures of the bars nearest today rightward, the next ones centred
/// on their bar, the rest leftward.
fn sized(n: usize) -> String {
    let n = n.max(1);
    format!(
        ".bars>li{{flex-basis:calc((100% + 1px)/{n} - 1px)}}.bars>li:nth-last-child(-n+{half}){{direction:rtl}}\n\
         @media (max-width:600px){{.bars{{width:{width}px}}.bars>li:nth-child(n){{direction:rtl;text-indent:0}}\
         .bars>li:nth-last-child(-n+{mid}){{direction:ltr;text-indent:-7rem}}.bars>li:nth-last-child(-n+{near}){{text-indent:0}}}}",
        half = n / 2,
        width = 6 * n - 1,
        mid = (2 * n / 3).min(40),
        near = (n / 3).min(20),
    )
}

/// One day: its grade as a class (a colour and a pattern), its figures as
/// its text, the stable form docs/status-page.md gives. Nothing else: the
/// bars are most of the page's bytes.
fn bar(o: &mut String, b: &Bar) {
    // `</li>` is optional in HTML, and left out; so is a good day's class.
    o.push_str("<li");
    match grade_class(b.uptime) {
        "" => {}
        c => {
            let _ = write!(o, " class=\"{c}\"");
        }
    }
    let _ = write!(o, " tabindex=\"0\">{}: ", day(b.day, false));
    match b.uptime {
        None => o.push_str("no probes"),
        Some(u) => {
            let n = fmt_count(b.samples);
            let s = if n == "1" { "" } else { "s" };
            let _ = write!(o, "{}, {n} probe{s}", fmt_pct(u));
            if let Some(v) = b.p95_ms {
                let _ = write!(o, ", p95 {} ms", v.round() as i64);
            }
        }
    }
}

/// The daily p95 latency as an inline SVG line, one unit per day; a day
/// without a response breaks the line, and a day alone is a dot. Its
/// figures are in words beside it, which the SVG points to.
fn sparkline(o: &mut String, page: &Page, i: usize, p: &ProviderPage) {
    let values: Vec<Option<f64>> = p.bars.iter().map(|b| b.p95_ms).collect();
    let known: Vec<f64> = values.iter().flatten().copied().collect();
    let label = match (
        known.iter().copied().reduce(f64::min),
        known.iter().copied().reduce(f64::max),
        values.iter().rev().flatten().next(),
    ) {
        (_, _, Some(last)) if known.len() == 1 => format!(
            "p95 latency: one day of data in the last {}, {last:.0} ms (a dot)",
            spaced(&page.window)
        ),
        (Some(lo), Some(hi), Some(last)) => format!(
            "p95 latency per day over the last {}: from {lo:.0} ms to {hi:.0} ms, the latest day {last:.0} ms",
            spaced(&page.window)
        ),
        _ => format!("No latency data over the last {}", spaced(&page.window)),
    };
    let _ = writeln!(o, "<p class=\"mut\" id=\"l{i}\">{}:</p>", esc(&label));
    // One day of data is a dot in a thin strip (its place is the day's),
    // not a dot under an empty chart: the words above say the rest.
    let one = known.len() == 1;
    let h = if one { 0.0 } else { 30.0 };
    let _ = write!(
        o,
        "<svg class=\"sparkline\"{} role=\"img\" aria-labelledby=\"l{i}\" viewBox=\"0 0 {} {}\" preserveAspectRatio=\"none\">",
        if one { " data-one-day" } else { "" },
        values.len().max(2) - 1,
        h + 2.0
    );
    let max = known.iter().copied().fold(1.0, f64::max);
    let mut d = String::new();
    let mut prev: Option<i64> = None;
    for (x, v) in values.iter().enumerate() {
        match v {
            Some(v) => {
                let y = (1.0 + h - (v / max) * h).round() as i64;
                match prev {
                    // A day after a day: one step right, relative (the
                    // `l` repeats).
                    Some(py) => {
                        if d.ends_with("h0") {
                            d.push('l');
                        } else {
                            d.push(' ');
                        }
                        let _ = write!(d, "1{}{}", if y < py { "" } else { " " }, y - py);
                    }
                    // A day alone between gaps is a dot: a zero-length
                    // line with round caps.
                    None => {
                        let _ = write!(d, "M{x} {y}h0");
                    }
                }
                prev = Some(y);
            }
            None => prev = None,
        }
    }
    if !d.is_empty() {
        let _ = write!(o, "<path d=\"{d}\"/>");
    }
    o.push_str("</svg>\n");
}

/// A figure as a whole number for a `data-` attribute; empty when unknown.
fn whole(v: Option<f64>) -> String {
    v.map(|v| (v.round() as i64).to_string())
        .unwrap_or_default()
}

fn models(o: &mut String, page: &Page, p: &ProviderPage) {
    if p.models.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "<div class=\"table\"><table class=\"models\"><caption>Models of {}</caption>\n<thead><tr><th>Model</th><th>State</th><th>Last result</th><th>Speed</th><th>Capabilities</th><th>Cooldowns</th></tr></thead>\n<tbody>",
        esc(&p.name)
    );
    for m in &p.models {
        model(o, page, m);
    }
    o.push_str("</tbody></table></div>\n");
}

fn model(o: &mut String, page: &Page, m: &ModelPage) {
    let _ = write!(
        o,
        "<tr class=\"model\" data-model=\"{}\" data-state=\"{}\"><th scope=\"row\">{}</th><td class=\"st-{}\">{}",
        esc(&m.name),
        m.state,
        esc(&m.name),
        m.state,
        m.state
    );
    if let Some(day) = &m.retired {
        // Apart from a model disabled for failing: its provider no longer
        // lists it.
        let _ = write!(
            o,
            ": <span class=\"retired\">retired by the provider (unlisted since {})</span>",
            esc(day)
        );
    } else if m.state != ModelState::Active {
        if let Some(r) = &m.reason {
            let _ = write!(o, ": {}", esc(r));
        }
        if let Some(s) = &m.since {
            let since = crate::time::parse_ts(s)
                .map(fmt_minute)
                .unwrap_or_else(|| s.clone());
            let _ = write!(o, ", since {}", esc(&since));
        }
    }
    o.push_str("</td><td>");
    match &m.last {
        Some(l) => {
            let _ = write!(
                o,
                "{} at {}",
                esc(&last_result(l, page.public)),
                fmt_minute(l.ts)
            );
        }
        None => o.push_str("never probed"),
    }
    if let Some(c) = &m.cadence {
        let _ = write!(o, "<br><small class=\"cadence\">{}</small>", esc(c));
    }
    let _ = write!(
        o,
        "</td><td class=\"speed\" data-ttft-ms=\"{}\" data-tokens-per-s=\"{}\">",
        whole(m.ttft_ms),
        whole(m.tokens_per_s)
    );
    match (m.ttft_ms, m.tokens_per_s) {
        (None, None) => o.push('—'),
        (t, r) => {
            let parts: Vec<String> = [
                t.map(|v| format!("first token {} ms", v.round() as i64)),
                r.map(|v| format!("{} tokens/s", v.round() as i64)),
            ]
            .into_iter()
            .flatten()
            .collect();
            o.push_str(&parts.join(" · "));
        }
    }
    o.push_str("</td><td>");
    if !m.caps.is_empty() && all_unknown(m) {
        // Not checked yet: one phrase, not three.
        o.push_str("? none known yet");
    } else {
        for (i, (cap, verdict, why)) in m.caps.iter().enumerate() {
            if i > 0 {
                o.push_str(" · ");
            }
            let _ = write!(
                o,
                "{} {} {}",
                cap.as_str(),
                verdict.mark(),
                verdict.as_str()
            );
            if let (Judgement::No, Some(w)) = (verdict, why) {
                let _ = write!(o, " ({})", esc(w));
            }
        }
    }
    o.push_str("</td><td>");
    if m.cooldowns.is_empty() {
        o.push_str("none");
    } else {
        o.push_str(&esc(&m.cooldowns.join("; ")));
    }
    o.push_str("</td></tr>\n");
}

fn all_unknown(m: &ModelPage) -> bool {
    m.caps.iter().all(|(_, v, _)| *v == Judgement::Unknown)
}

/// The newest probe's result; in the public form a failure is named only
/// by one of llmprobe's own words.
fn last_result(l: &LastProbe, public: bool) -> String {
    let legacy = matches!(&*l.failure, "" | "error" | "degraded" | "averaged");
    if public && !legacy && !privacy::known_word(&l.failure) {
        let mut l = l.clone();
        l.failure = "failed".into();
        return l.label();
    }
    l.label()
}

fn footer(o: &mut String, page: &Page) {
    let _ = writeln!(
        o,
        "<footer id=\"end\">\n<p>Bars: one per UTC day; solid: at least {:.0}% of probes passed; striped: {:.0}–{:.0}%; cross-hatched: below {:.0}%; dashed outline: no probes. \
         Hover over or focus a bar (Tab) for its day's uptime, probes and p95 latency; a link before the bars skips them. The line under the bars is each day's p95 latency.</p>",
        GOOD * 100.0,
        FAIR * 100.0,
        GOOD * 100.0,
        FAIR * 100.0
    );
    let _ = writeln!(
        o,
        "<p>Model states, capability verdicts (✔ yes, ✗ no, ? unknown), {}. Built by llmprobe at <time id=\"built\" datetime=\"{}\">{}</time>.</p>\n</footer>",
        esc(&page.cooldowns_note),
        fmt_rfc3339(page.now),
        fmt_minute(page.now)
    );
}
