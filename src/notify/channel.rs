//! Channels: where an alert goes, chosen from its URL, and what each one is
//! sent.
//!
//! | URL | channel | request |
//! |---|---|---|
//! | `https://ntfy.sh/<topic>`, `ntfy+https://…`, `ntfy+http://…` | ntfy | POST, the text as the body; `Title`, `Tags`, `Priority` (by severity, [`super::Priority`]) headers |
//! | `https://hooks.slack.com/services/…`, `slack+https://…` | Slack incoming webhook | POST `{"text": …}` |
//! | `https://discord.com/api/webhooks/…` (or discordapp.com), `discord+https://…` | Discord webhook | POST `{"content": …}`, mentions off |
//! | `json+https://…`, `json+http://…` | generic JSON | POST the documented body ([`json_body`]) |
//!
//! `slack+http://` and `discord+http://` are accepted too, for receivers on
//! the same machine (the tests' fake webhook); any other plain URL is a
//! config error that asks for one of the prefixes. A URL's path and query
//! are its secret: errors, warnings and reports name a channel by
//! [`Channel::label`], its scheme and host.

use chrono::{DateTime, Utc};
use reqwest::{Method, Url};
use serde::Serialize;

use super::{Change, Message};
use crate::error::{Error, Result};
use crate::outcome::truncate_reason;
use crate::settings::Settings;
use crate::webhook::{self, Request};

/// The variable that lists webhook URLs, separated by whitespace.
pub const NOTIFY_VAR: &str = "LLMPROBE_NOTIFY";

/// The most changes a message lists; the rest are counted.
const MAX_LINES: usize = 20;
/// What each channel takes, with room to spare: ntfy keeps 4096 bytes of a
/// message as text, Discord 2000 characters of `content`; Slack takes far
/// more, but a phone shows less.
const NTFY_CAP: usize = 4000;
const DISCORD_CAP: usize = 1900;
const SLACK_CAP: usize = 3000;

/// Which service a channel is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Ntfy,
    Slack,
    Discord,
    Json,
}

impl Kind {
    fn prefix(self) -> &'static str {
        match self {
            Kind::Ntfy => "ntfy",
            Kind::Slack => "slack",
            Kind::Discord => "discord",
            Kind::Json => "json",
        }
    }
}

/// One webhook: its kind and the URL requests go to (any `kind+` prefix
/// removed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Channel {
    pub kind: Kind,
    url: Url,
}

/// How a message to one channel went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The channel's [`Channel::label`].
    pub label: String,
    /// The HTTP status it answered, or why it was not delivered (`HTTP
    /// 404`, `connection refused`, `HTTP 503, 3 attempts`).
    pub result: std::result::Result<u16, String>,
}

const ASK: &str = "write ntfy+https://…, slack+https://…, discord+https://… or json+https://… \
     (the +http:// forms, such as json+http://, for a receiver on your own network; see docs/alerts.md)";

impl Channel {
    /// The channel a URL names. The error never quotes the URL beyond its
    /// scheme and host.
    pub fn parse(raw: &str) -> Result<Channel> {
        let raw = raw.trim();
        let (prefix, rest) = match raw.split_once("://") {
            Some((scheme, _)) => match scheme.split_once('+') {
                Some((p, inner)) => (
                    Some(p.to_ascii_lowercase()),
                    format!("{inner}{}", &raw[scheme.len()..]),
                ),
                None => (None, raw.to_string()),
            },
            None => (None, raw.to_string()),
        };
        let url = Url::parse(&rest)
            .map_err(|e| Error::config(format!("a notify URL is not a URL ({e}); {ASK}")))?;
        let shown = webhook::label(&url);
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(Error::config(format!(
                "notify URL {shown}: must be an http(s) URL; {ASK}"
            )));
        }
        let kind = match prefix.as_deref() {
            Some("ntfy") => Kind::Ntfy,
            Some("slack") => Kind::Slack,
            Some("discord") => Kind::Discord,
            Some("json") => Kind::Json,
            Some(p) => {
                return Err(Error::config(format!(
                    "notify URL {p}+{shown}: unknown channel {p:?}; {ASK}"
                )));
            }
            None => match (url.scheme(), url.host_str().unwrap_or("")) {
                ("https", "ntfy.sh") => Kind::Ntfy,
                ("https", "hooks.slack.com") if url.path().starts_with("/services/") => Kind::Slack,
                ("https", "discord.com" | "discordapp.com")
                    if url.path().starts_with("/api/webhooks/") =>
                {
                    Kind::Discord
                }
                _ => {
                    return Err(Error::config(format!(
                        "notify URL {shown}: which kind of channel is it? {ASK}"
                    )));
                }
            },
        };
        if kind == Kind::Ntfy && url.path().trim_matches('/').is_empty() {
            return Err(Error::config(format!(
                "notify URL {}: an ntfy URL names a topic, as in https://ntfy.sh/<topic>",
                Channel { kind, url }.label()
            )));
        }
        Ok(Channel { kind, url })
    }

    /// `slack+https://hooks.example.com` or `https://ntfy.sh`: the channel
    /// without its path or query, for messages. A URL the channel was
    /// recognised by needs no prefix; one that was named by its prefix keeps
    /// it.
    pub fn label(&self) -> String {
        let plain = webhook::label(&self.url);
        match self.url.host_str() {
            Some("ntfy.sh" | "hooks.slack.com" | "discord.com" | "discordapp.com")
                if self.url.scheme() == "https" =>
            {
                plain
            }
            _ => format!("{}+{plain}", self.kind.prefix()),
        }
    }

    /// The request that tells this channel `msg`.
    pub fn request(&self, msg: &Message) -> Request {
        let json = |v: serde_json::Value| {
            (
                vec![("content-type".to_string(), "application/json".to_string())],
                v.to_string(),
            )
        };
        let (headers, body) = match self.kind {
            Kind::Ntfy => {
                let tags = match (msg.test, is_resolution(msg)) {
                    (true, _) => "bell",
                    (false, true) => "white_check_mark",
                    (false, false) => "warning",
                };
                let headers = vec![
                    (
                        "content-type".to_string(),
                        "text/plain; charset=utf-8".to_string(),
                    ),
                    ("title".to_string(), ascii(&title(msg))),
                    ("tags".to_string(), tags.to_string()),
                    ("priority".to_string(), msg.priority().as_str().to_string()),
                ];
                (headers, lines(msg, NTFY_CAP, Markup::Plain))
            }
            Kind::Slack => json(serde_json::json!({
                "text": format!("*{}*\n{}", slack_escape(&title(msg)), lines(msg, SLACK_CAP, Markup::Slack)),
            })),
            Kind::Discord => json(serde_json::json!({
                "content": format!("**{}**\n{}", discord_escape(&title(msg)), lines(msg, DISCORD_CAP, Markup::Discord)),
                // Error text could say @everyone: never ping anyone.
                "allowed_mentions": {"parse": []},
            })),
            Kind::Json => json(json_body(msg)),
        };
        Request {
            method: Method::POST,
            url: self.url.clone(),
            headers,
            body: Some(body),
        }
    }
}

/// The generic JSON body, a stable interface (docs/alerts.md):
/// `{"version":1,"at":RFC3339,"test":bool,"title":…,"priority":…,
/// "changes":[{kind, provider, model, from, to, reason, error, id,
/// resolves}…]}`.
pub fn json_body(msg: &Message) -> serde_json::Value {
    #[derive(Serialize)]
    struct Body<'a> {
        version: u32,
        at: String,
        test: bool,
        title: String,
        priority: super::Priority,
        changes: Vec<BodyChange<'a>>,
    }
    #[derive(Serialize)]
    struct BodyChange<'a> {
        #[serde(flatten)]
        change: &'a Change,
        id: Option<String>,
        resolves: Option<String>,
    }
    let body = Body {
        version: 1,
        at: rfc3339(msg.at),
        test: msg.test,
        title: title(msg),
        priority: msg.priority(),
        changes: msg
            .changes
            .iter()
            .map(|c| {
                let id = c.incident(msg.at);
                BodyChange {
                    change: c,
                    resolves: id.clone().filter(|_| c.kind.is_recovery()),
                    id,
                }
            })
            .collect(),
    };
    serde_json::to_value(body).unwrap_or_default()
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn short_time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M UTC").to_string()
}

/// Every change is a recovery: the message resolves earlier alerts.
fn is_resolution(msg: &Message) -> bool {
    !msg.changes.is_empty() && msg.changes.iter().all(|c| c.kind.is_recovery())
}

/// A short title a phone shows whole: `groq::openai/gpt-oss-20b paused`,
/// `Resolved: groq up`, `2 models down, 1 recovered`.
pub fn title(msg: &Message) -> String {
    if msg.test {
        return "llmprobe test message".to_string();
    }
    let resolved = if is_resolution(msg) { "Resolved: " } else { "" };
    if let [c] = msg.changes.as_slice() {
        return format!("{resolved}{} {}", c.subject(), c.to);
    }
    let count = |pred: &dyn Fn(&Change) -> bool| msg.changes.iter().filter(|c| pred(c)).count();
    let plural = |n: usize, one: &str, many: &str| match n {
        1 => format!("1 {one}"),
        n => format!("{n} {many}"),
    };
    let models = count(&|c| c.kind == super::ChangeKind::ModelDown);
    let providers = count(&|c| c.kind == super::ChangeKind::ProviderDown);
    let benched = count(&|c| c.kind == super::ChangeKind::Benched);
    let degraded = count(&|c| c.kind == super::ChangeKind::Degraded);
    let recovered = count(&|c| c.kind.is_recovery());
    let mut parts = Vec::new();
    if degraded > 0 {
        parts.push("route degraded".to_string());
    }
    if benched > 0 {
        parts.push(format!("{benched} benched"));
    }
    if providers > 0 {
        parts.push(plural(providers, "provider down", "providers down"));
    }
    if models > 0 {
        parts.push(plural(models, "model down", "models down"));
    }
    if recovered > 0 {
        parts.push(format!("{recovered} recovered"));
    }
    format!("{resolved}{}", parts.join(", "))
}

#[derive(Clone, Copy)]
enum Markup {
    Plain,
    Slack,
    Discord,
}

/// One line per change, then when, within `cap` bytes (later changes are
/// counted, never cut in half).
fn lines(msg: &Message, cap: usize, markup: Markup) -> String {
    let esc = |s: &str| match markup {
        Markup::Plain => s.to_string(),
        Markup::Slack => slack_escape(s),
        Markup::Discord => discord_escape(s),
    };
    let footer = format!("llmprobe, {}", short_time(msg.at));
    if msg.test {
        return format!(
            "A test message: this channel works. Alerts come here when a model or a provider changes state.\n{footer}"
        );
    }
    let mut out = String::new();
    let total = msg.changes.len();
    for (i, c) in msg.changes.iter().enumerate() {
        let line = esc(&change_line(c));
        let rest = total - i;
        let more = format!("… and {rest} more\n");
        if i == MAX_LINES || out.len() + line.len() + 1 + more.len() + footer.len() > cap {
            out.push_str(&more);
            break;
        }
        out.push_str(&line);
        out.push('\n');
    }
    out.push_str(&footer);
    out
}

/// `groq::m: active → paused (http_error, 3 runs in a row): HTTP 503 …`, or for a
/// recovery `groq::m: paused → active (its probe passed); resolves the alert of
/// 2026-05-02 10:00 UTC`.
fn change_line(c: &Change) -> String {
    let mut s = format!("{}: {} → {}", c.subject(), c.from, c.to);
    let reason = truncate_reason(&c.reason);
    if !reason.is_empty() {
        s.push_str(&format!(" ({reason})"));
    }
    if let Some(t) = c.until {
        s.push_str(&format!(" until {}", short_time(t)));
    }
    if let Some(e) = &c.error {
        let e = truncate_reason(e);
        if !e.is_empty() {
            s.push_str(&format!(": {e}"));
        }
    }
    if let (true, Some(t)) = (c.kind.is_recovery(), c.alerted_at) {
        s.push_str(&format!("; resolves the alert of {}", short_time(t)));
    }
    s
}

/// Slack's three reserved characters.
fn slack_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Text for Discord's markdown: every character markdown gives a meaning
/// to is backslash-escaped, so an upstream's error text shows as written
/// and cannot plant a masked link (`[text](url)`), a heading or a spoiler.
fn discord_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(
            c,
            '\\' | '*' | '_' | '~' | '`' | '|' | '[' | ']' | '(' | ')' | '<' | '>' | '#'
        ) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A header value: printable ASCII only.
fn ascii(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii() && !c.is_ascii_control() {
                c
            } else {
                '?'
            }
        })
        .collect()
}

/// Send `msg` to every channel at once, each with [`webhook`]'s retries.
/// One outcome per channel, in order; nothing is printed.
pub async fn deliver_async(
    client: &reqwest::Client,
    channels: &[Channel],
    msg: &Message,
) -> Vec<Outcome> {
    let mut set = tokio::task::JoinSet::new();
    for (i, ch) in channels.iter().enumerate() {
        let (client, req, label) = (client.clone(), ch.request(msg), ch.label());
        set.spawn(async move {
            let result = webhook::send(&client, &req, "notify", &label).await;
            (i, Outcome { label, result })
        });
    }
    let mut out: Vec<Option<Outcome>> = vec![None; channels.len()];
    while let Some(r) = set.join_next().await {
        if let Ok((i, o)) = r {
            out[i] = Some(o);
        }
    }
    out.into_iter()
        .zip(channels)
        .map(|(o, ch)| {
            o.unwrap_or_else(|| Outcome {
                label: ch.label(),
                result: Err("internal error: the delivery task failed".into()),
            })
        })
        .collect()
}

/// [`deliver_async`] for callers that are not async (`check` after its
/// run, `notify test`), on a small runtime of its own.
pub fn deliver(channels: &[Channel], msg: &Message) -> Vec<Outcome> {
    if channels.is_empty() {
        return Vec::new();
    }
    match webhook::block_on(|client| async move { deliver_async(&client, channels, msg).await }) {
        Ok(out) => out,
        Err(why) => channels
            .iter()
            .map(|ch| Outcome {
                label: ch.label(),
                result: Err(why.clone()),
            })
            .collect(),
    }
}

impl Outcome {
    /// The one warning line for a channel that was not reached, naming it
    /// by its label only; `None` when it was.
    /// It ends with what goes on regardless (`the run's result is
    /// unchanged`, `routing goes on`).
    pub fn warning_then(&self, regardless: &str) -> Option<String> {
        let why = self.result.as_ref().err()?;
        Some(format!(
            "warning: notify: the alert to {} failed ({why}); {regardless}",
            self.label
        ))
    }
}

/// Where a URL came from, for errors.
fn parse_from(url: &str, source: &str) -> Result<Channel> {
    Channel::parse(url).map_err(|e| Error::config(format!("{source}: {e}")))
}

/// The channels configured for this invocation: `cli_urls` (`--notify`,
/// or `notify test URL`), then [`NOTIFY_VAR`]'s URLs, then the variables
/// `[notify] url_env` names, each URL once. A variable `url_env` names that
/// is unset or empty is a warning on stderr (naming the variable, never a
/// value), not an error: alerts are a courtesy, and the run goes on. A URL
/// that names no channel is a config error (exit 2) naming where it came
/// from.
pub fn configured(settings: &Settings, cli_urls: &[String]) -> Result<Vec<Channel>> {
    let (channels, warnings) = gather(&settings.catalog.notify.url_env, cli_urls, |k| {
        std::env::var(k).ok()
    })?;
    for w in warnings {
        eprintln!("warning: {w}");
    }
    Ok(channels)
}

fn gather(
    url_env: &[String],
    cli_urls: &[String],
    env: impl Fn(&str) -> Option<String>,
) -> Result<(Vec<Channel>, Vec<String>)> {
    let mut out: Vec<Channel> = Vec::new();
    let mut warnings = Vec::new();
    let mut add = |ch: Channel| {
        if !out.contains(&ch) {
            out.push(ch);
        }
    };
    for u in cli_urls {
        add(parse_from(u, "--notify")?);
    }
    for u in env(NOTIFY_VAR).unwrap_or_default().split_whitespace() {
        add(parse_from(u, NOTIFY_VAR)?);
    }
    for var in url_env {
        let value = env(var).unwrap_or_default();
        if value.trim().is_empty() {
            warnings.push(format!(
                "notify: {var} (named by [notify] url_env) is not set; no alert goes to its URL"
            ));
            continue;
        }
        for u in value.split_whitespace() {
            add(parse_from(
                u,
                &format!("{var} (named by [notify] url_env)"),
            )?);
        }
    }
    Ok((out, warnings))
}

#[cfg(test)]
mod tests;
