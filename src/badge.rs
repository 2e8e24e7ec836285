//! README badges: one provider's or model's uptime or median latency over a
//! window, as a shields.io-style flat SVG. `rollup --format badge` writes
//! one, and `route --serve` serves them at `/badge/…` (docs/badges.md).
//!
//! What a badge says comes from [`crate::healthlog::rollup`], the figures
//! every `rollup` format shows: [`Figures`] holds one read of the log,
//! [`Figures::find`] picks a badge's row (or says which name is unknown),
//! and [`Badge::of`] turns it into a label, a message and a grade.
//! [`Badge::svg`] draws it, and nothing else: no I/O, no clock.
//!
//! The message is the figure itself (`99.2%`, `812 ms`, `no data`), so the
//! badge reads the same without its colour; every colour holds white text
//! at a contrast of 4.5:1 or more (WCAG AA).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::catalog::{Catalog, model_key};
use crate::cli::BadgeMetric;
use crate::format::fmt_pct;
use crate::grade::{self, Grade};
use crate::healthlog::rollup::{Per, Report, Row};
use crate::markup::escape;
use crate::window::Window;

/// The left half's background.
const LABEL_COLOUR: &str = "#555";
/// The message's background by grade; no data is grey.
const GOOD_COLOUR: &str = "#2e7d32";
const FAIR_COLOUR: &str = "#b35c00";
const POOR_COLOUR: &str = "#c62828";
const NONE_COLOUR: &str = "#616161";

/// Pixels of padding on each side of each text.
const PAD: f64 = 5.0;
/// The badge's height in pixels.
const HEIGHT: u32 = 20;

/// What a badge says, before it is drawn.
#[derive(Debug, Clone, PartialEq)]
pub struct Badge {
    /// The left half: what is measured (`groq uptime 7d`).
    pub label: String,
    /// The right half: the figure (`99.2%`, `812 ms`, `no data`).
    pub message: String,
    /// The message's colour; `None` without data (grey).
    pub grade: Option<Grade>,
}

impl Badge {
    /// The badge of `subject` (`groq`, `groq::openai/gpt-oss-20b`) for
    /// `metric` over `window`, from its row; `None`, or a row without
    /// probes in the window, is `no data`.
    pub fn of(subject: &str, metric: BadgeMetric, window: &Window, row: Option<&Row>) -> Badge {
        let span = match window.secs {
            None => "all time",
            Some(_) => window.label.as_str(),
        };
        let (what, figure) = match metric {
            BadgeMetric::Uptime => (
                "uptime",
                row.and_then(|r| r.uptime)
                    .map(|u| (fmt_pct(u), grade::grade(u))),
            ),
            BadgeMetric::Latency => (
                "latency",
                row.and_then(|r| r.median_latency_ms)
                    .map(|ms| (fmt_ms(ms), grade::latency_grade(ms))),
            ),
        };
        let (message, grade) = match figure {
            Some((m, g)) => (m, Some(g)),
            None => ("no data".to_string(), None),
        };
        Badge {
            label: format!("{subject} {what} {span}"),
            message,
            grade,
        }
    }

    /// The badge as a standalone SVG document.
    pub fn svg(&self) -> String {
        svg(&self.label, &self.message, self.grade)
    }
}

/// A latency for a badge: whole milliseconds below 10 s (`812 ms`), then
/// seconds to one decimal (`12.3 s`).
pub fn fmt_ms(ms: f64) -> String {
    if ms < 9999.5 {
        format!("{} ms", ms.round() as i64)
    } else {
        format!("{:.1} s", ms / 1000.0)
    }
}

/// The background colour of a grade's message.
pub fn colour(grade: Option<Grade>) -> &'static str {
    match grade {
        Some(Grade::Good) => GOOD_COLOUR,
        Some(Grade::Fair) => FAIR_COLOUR,
        Some(Grade::Poor) => POOR_COLOUR,
        None => NONE_COLOUR,
    }
}

/// A flat badge: `label` on grey, `message` on its grade's colour, each
/// half as wide as its text (Verdana 11 px, [`text_width`]) plus padding.
/// The text is drawn with `textLength`, so a viewer whose font differs
/// still fits it in its half.
pub fn svg(label: &str, message: &str, grade: Option<Grade>) -> String {
    let (label, message) = (clean(label), clean(message));
    let lw = (text_width(&label) + 2.0 * PAD).ceil();
    let mw = (text_width(&message) + 2.0 * PAD).ceil();
    let width = lw + mw;
    let title = escape(&format!("{label}: {message}"));
    let mut out = String::with_capacity(1200 + 4 * (label.len() + message.len()));
    let _ = write!(
        out,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{HEIGHT}" role="img" aria-label="{title}"><title>{title}</title><linearGradient id="s" x2="0" y2="100%"><stop offset="0" stop-color="#bbb" stop-opacity=".1"/><stop offset="1" stop-opacity=".1"/></linearGradient><clipPath id="r"><rect width="{width}" height="{HEIGHT}" rx="3" fill="#fff"/></clipPath><g clip-path="url(#r)"><rect width="{lw}" height="{HEIGHT}" fill="{LABEL_COLOUR}"/><rect x="{lw}" width="{mw}" height="{HEIGHT}" fill="{fill}"/><rect width="{width}" height="{HEIGHT}" fill="url(#s)"/></g><g fill="#fff" text-anchor="middle" font-family="Verdana,Geneva,DejaVu Sans,sans-serif" text-rendering="geometricPrecision" font-size="110">"##,
        fill = colour(grade),
    );
    // Coordinates in tenths of a pixel (the text is scaled by .1), as
    // shields draws them, for sharper placement.
    for (text, x0, w) in [(&label, 0.0, lw), (&message, lw, mw)] {
        let x = ((x0 + w / 2.0) * 10.0).round();
        let len = ((w - 2.0 * PAD) * 10.0).round();
        let t = escape(text);
        let _ = write!(
            out,
            r##"<text aria-hidden="true" x="{x}" y="150" fill="#010101" fill-opacity=".3" transform="scale(.1)" textLength="{len}">{t}</text><text x="{x}" y="140" transform="scale(.1)" textLength="{len}">{t}</text>"##
        );
    }
    out.push_str("</g></svg>\n");
    out
}

/// Characters XML 1.0 cannot hold (controls other than tab, newline and
/// carriage return, which a label has no use for either) become spaces.
fn clean(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// Advance widths of printable ASCII (space to `~`) in Verdana at 11 px,
/// the font shields.io measures with; approximate, to a tenth of a pixel.
const VERDANA_11: [f64; 95] = [
    3.9, 4.3, 5.1, 9.0, 7.0, 11.8, 8.0, 3.0, 5.0, 5.0, 7.0, 9.0, 4.0, 5.0, 4.0, 5.0, // ' '../
    7.0, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0, // 0..9
    5.0, 5.0, 9.0, 9.0, 9.0, 6.0, 11.0, // :..@
    7.5, 7.5, 7.7, 8.5, 7.0, 6.3, 8.5, 8.3, 4.6, 5.0, 7.6, 6.1, 9.3, // A..M
    8.2, 8.7, 6.6, 8.7, 7.7, 7.5, 6.8, 8.1, 7.5, 10.9, 7.5, 6.8, 7.5, // N..Z
    5.0, 5.0, 5.0, 9.0, 7.0, 7.0, // [..`
    6.6, 6.9, 5.7, 6.9, 6.6, 3.9, 6.9, 7.0, 3.0, 3.8, 6.5, 3.0, 10.7, // a..m
    7.0, 6.7, 6.9, 6.9, 4.7, 5.7, 4.3, 7.0, 6.5, 9.0, 6.5, 6.5, 5.8, // n..z
    7.0, 5.0, 7.0, 9.0, // {..~
];

/// The width of `s` in pixels at Verdana 11 px: the table for ASCII, 11 px
/// for wide (East Asian) characters, 7 px for anything else.
pub fn text_width(s: &str) -> f64 {
    s.chars()
        .map(|c| match c as u32 {
            n @ 0x20..=0x7e => VERDANA_11[(n - 0x20) as usize],
            0x1100..=0x115f | 0x2e80..=0xa4cf | 0xac00..=0xd7a3 | 0xf900..=0xfaff => 11.0,
            0xff00..=0xff60 | 0xffe0..=0xffe6 | 0x20000..=0x3fffd => 11.0,
            _ => 7.0,
        })
        .sum()
}

/// The providers and models a badge may name: the catalog's (enabled or
/// not); anything the log has probed counts too ([`Figures::find`]).
#[derive(Debug, Clone, Default)]
pub struct Known(BTreeMap<String, Vec<String>>);

impl Known {
    pub fn of(catalog: &Catalog) -> Known {
        Known(
            catalog
                .providers
                .iter()
                .map(|p| (p.name.clone(), p.models.clone()))
                .collect(),
        )
    }

    /// The catalog's provider names, in order.
    pub fn providers(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// Whether `provider` is a name the catalog knows or the log holds
    /// (`in_log`): the check of every name a badge, or `rollup`'s
    /// `--provider` and `--exclude`, is given.
    pub fn provider(&self, provider: &str, in_log: bool) -> Result<(), Unknown> {
        if in_log || self.0.contains_key(provider) {
            Ok(())
        } else {
            Err(Unknown::Provider(provider.to_string()))
        }
    }
}

/// A badge that names what neither the catalog nor the log knows.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Unknown {
    #[error("unknown provider \"{0}\": not in the catalog nor the health log")]
    Provider(String),
    #[error(
        "unknown model \"{model}\" of provider \"{provider}\": not in the catalog nor the health log"
    )]
    Model { provider: String, model: String },
}

/// One read of the log, as badges need it: a row per provider and per
/// model.
#[derive(Debug, Clone)]
pub struct Figures {
    pub providers: Vec<Row>,
    pub models: Vec<Row>,
}

impl Figures {
    pub fn of(report: &Report) -> Figures {
        Figures {
            providers: report.rows(Per::Provider),
            models: report.rows(Per::Model),
        }
    }

    /// The row a badge of `provider` (and `model`, by its id or as
    /// `provider::model`) shows: `Ok(None)` for a known name without
    /// probes in the log, an error for a name neither the catalog nor the
    /// log knows.
    pub fn find(
        &self,
        known: &Known,
        provider: &str,
        model: Option<&str>,
    ) -> Result<Option<&Row>, Unknown> {
        let configured = known.0.get(provider);
        let row = self.providers.iter().find(|r| r.provider == provider);
        known.provider(provider, row.is_some())?;
        let Some(model) = model else {
            return Ok(row);
        };
        let model = model_id(provider, model);
        let row = self
            .models
            .iter()
            .find(|r| r.provider == provider && r.model.as_deref() == Some(model));
        if row.is_none() && !configured.is_some_and(|ms| ms.iter().any(|m| m == model)) {
            return Err(Unknown::Model {
                provider: provider.to_string(),
                model: model.to_string(),
            });
        }
        Ok(row)
    }
}

/// A model named by its id or as `provider::model`: its id.
pub fn model_id<'a>(provider: &str, model: &'a str) -> &'a str {
    crate::catalog::ModelKey::model_in(model, provider).unwrap_or(model)
}

/// What a badge is of: `provider`, or `provider::model`.
pub fn subject(provider: &str, model: Option<&str>) -> String {
    match model {
        Some(m) => model_key(provider, model_id(provider, m)),
        None => provider.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(svg: &str) -> roxmltree::Document<'_> {
        roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("{e}\n{svg}"))
    }

    /// The visible texts (not the shadow copies) of a badge.
    fn texts(doc: &roxmltree::Document<'_>) -> Vec<String> {
        doc.descendants()
            .filter(|n| n.has_tag_name("text") && n.attribute("aria-hidden").is_none())
            .map(|n| n.text().unwrap_or("").to_string())
            .collect()
    }

    fn width(doc: &roxmltree::Document<'_>) -> f64 {
        doc.root_element()
            .attribute("width")
            .unwrap()
            .parse()
            .unwrap()
    }

    #[test]
    fn a_badge_is_valid_svg_with_its_text_title_and_role() {
        let b = Badge {
            label: "groq uptime 7d".into(),
            message: "99.2%".into(),
            grade: Some(Grade::Good),
        };
        let svg = b.svg();
        let doc = parse(&svg);
        let root = doc.root_element();
        assert_eq!(root.tag_name().name(), "svg");
        assert_eq!(
            root.tag_name().namespace(),
            Some("http://www.w3.org/2000/svg")
        );
        assert_eq!(root.attribute("role"), Some("img"));
        assert_eq!(root.attribute("aria-label"), Some("groq uptime 7d: 99.2%"));
        assert_eq!(root.attribute("height"), Some("20"));
        let title = root.children().find(|n| n.has_tag_name("title")).unwrap();
        assert_eq!(title.text(), Some("groq uptime 7d: 99.2%"));
        assert_eq!(texts(&doc), ["groq uptime 7d", "99.2%"]);
        // The message's background is the grade's colour; the halves add up.
        let rects: Vec<_> = doc
            .descendants()
            .filter(|n| n.has_tag_name("rect") && n.attribute("fill") == Some(GOOD_COLOUR))
            .collect();
        assert_eq!(rects.len(), 1);
        let lw: f64 = rects[0].attribute("x").unwrap().parse().unwrap();
        let mw: f64 = rects[0].attribute("width").unwrap().parse().unwrap();
        assert_eq!(lw + mw, width(&doc));
        assert!(lw > mw, "the label is the longer text");
    }

    #[test]
    fn text_is_escaped_and_controls_dropped() {
        let svg = svg("a<b>&\"c'\u{1}", "x & y", None);
        let doc = parse(&svg);
        assert_eq!(texts(&doc), ["a<b>&\"c' ", "x & y"]);
        assert_eq!(
            doc.root_element().attribute("aria-label"),
            Some("a<b>&\"c' : x & y")
        );
        assert!(svg.contains(NONE_COLOUR));
    }

    #[test]
    fn widths_grow_with_the_text() {
        let w = |label: &str, message: &str| width(&parse(&svg(label, message, None)));
        assert!(w("groq uptime 24h", "99%") < w("groq uptime 24h", "99.2%"));
        assert!(w("groq", "1%") < w("groq::llama-3.1-8b-instant", "1%"));
        // Wide letters take more room than narrow ones.
        assert!(text_width("WWW") > text_width("iii"));
        assert!(text_width("模型") > text_width("ab"));
        assert_eq!(text_width(""), 0.0);
    }

    /// WCAG's contrast ratio of white on `hex` (`#rgb` or `#rrggbb`).
    fn contrast_with_white(hex: &str) -> f64 {
        let h = hex.trim_start_matches('#');
        let h: String = if h.len() == 3 {
            h.chars().flat_map(|c| [c, c]).collect()
        } else {
            h.into()
        };
        let lin = |i: usize| {
            let c = u8::from_str_radix(&h[i..i + 2], 16).unwrap() as f64 / 255.0;
            if c <= 0.04045 {
                c / 12.92
            } else {
                ((c + 0.055) / 1.055).powf(2.4)
            }
        };
        let l = 0.2126 * lin(0) + 0.7152 * lin(2) + 0.0722 * lin(4);
        1.05 / (l + 0.05)
    }

    #[test]
    fn white_text_is_readable_on_every_colour() {
        for c in [
            LABEL_COLOUR,
            GOOD_COLOUR,
            FAIR_COLOUR,
            POOR_COLOUR,
            NONE_COLOUR,
        ] {
            let r = contrast_with_white(c);
            assert!(r >= 4.5, "{c}: {r:.2}");
        }
        // The check can fail: shields' bright green cannot hold white text.
        assert!(contrast_with_white("#4c1") < 4.5);
    }

    fn row(uptime: Option<f64>, median: Option<f64>) -> Row {
        Row {
            provider: "groq".into(),
            model: None,
            samples: 10.0,
            passed: 9.0,
            uptime,
            avg_latency_ms: median,
            median_latency_ms: median,
            p95_latency_ms: median,
            median_ttft_ms: None,
            tokens_per_s: None,
            uptime_by_span: Default::default(),
            spans: Default::default(),
            status: "ok",
            last_probe: None,
            trend: Vec::new(),
        }
    }

    #[test]
    fn labels_messages_and_grades() {
        let w7 = Window::parse("7d").unwrap();
        let all = Window::parse("all").unwrap();
        for (name, metric, window, r, want) in [
            (
                "groq",
                BadgeMetric::Uptime,
                &w7,
                row(Some(0.992), None),
                ("groq uptime 7d", "99.2%", Some(Grade::Good)),
            ),
            (
                "groq",
                BadgeMetric::Uptime,
                &w7,
                row(Some(0.7), None),
                ("groq uptime 7d", "70%", Some(Grade::Fair)),
            ),
            (
                "g::m",
                BadgeMetric::Latency,
                &all,
                row(None, Some(812.4)),
                ("g::m latency all time", "812 ms", Some(Grade::Good)),
            ),
            (
                "g",
                BadgeMetric::Latency,
                &w7,
                row(None, Some(12_345.0)),
                ("g latency 7d", "12.3 s", Some(Grade::Poor)),
            ),
        ] {
            let b = Badge::of(name, metric, window, Some(&r));
            assert_eq!((b.label.as_str(), b.message.as_str(), b.grade), want);
        }
        for r in [None, Some(row(None, None))] {
            let b = Badge::of("g", BadgeMetric::Uptime, &w7, r.as_ref());
            assert_eq!((b.message.as_str(), b.grade), ("no data", None));
        }
    }

    #[test]
    fn models_are_named_by_id_or_key() {
        assert_eq!(model_id("openrouter", "openrouter::a/b:free"), "a/b:free");
        assert_eq!(model_id("openrouter", "a/b:free"), "a/b:free");
        assert_eq!(model_id("groq", "openrouter::x"), "openrouter::x");
        assert_eq!(subject("groq", Some("groq::m")), "groq::m");
        assert_eq!(subject("groq", None), "groq");
    }
}
