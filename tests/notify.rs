//! Alert channels through the real binary: `notify test` against a local
//! fake webhook that records what it received, every channel's shape, where
//! URLs come from, and that a URL's path never shows.

use crate::support::{Env, PingServer, closed_port};

/// `scheme+http://127.0.0.1:PORT/path` on `server`.
fn on(prefix: &str, server: &PingServer, path: &str) -> String {
    format!("{prefix}+{}{path}", server.url)
}

/// Nothing secret shows: no URL path, no key.
#[track_caller]
fn hides_secrets(text: &str) {
    for secret in ["SECRET", "sk-live-key"] {
        assert!(!text.contains(secret), "{secret} shows in:\n{text}");
    }
}

#[test]
fn notify_test_sends_each_channel_its_shape_from_every_source() {
    let hook = PingServer::start();
    let mut env = Env::new();
    env.write("llmprobe.toml", "[notify]\nurl_env = [\"TEAM_HOOK\"]\n");
    let ntfy = on("ntfy", &hook, "/SECRET-topic");
    let slack = on("slack", &hook, "/services/SECRET");
    let discord = on("discord", &hook, "/api/webhooks/1/SECRET");
    // The same URL twice is one channel.
    let vars = format!("{ntfy}\n{slack}  {discord} {ntfy}");
    env.env("LLMPROBE_NOTIFY", &vars)
        .env("TEAM_HOOK", &on("json", &hook, "/in?token=SECRET"))
        .env("GROQ_API_KEY", "sk-live-key");
    let r = env.run(&["notify", "test"]).ok();
    let label = format!("+{}", hook.url);
    let want: Vec<String> = ["ntfy", "slack", "discord", "json"]
        .iter()
        .map(|k| format!("{k}{label}: ok (HTTP 200)"))
        .collect();
    assert_eq!(r.stdout.lines().collect::<Vec<_>>(), want, "{}", r.stderr);
    hides_secrets(&r.stdout);
    hides_secrets(&r.stderr);

    let mut seen = hook.seen();
    seen.sort_by(|a, b| a.path.cmp(&b.path));
    let paths: Vec<&str> = seen.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/SECRET-topic",
            "/api/webhooks/1/SECRET",
            "/in?token=SECRET",
            "/services/SECRET"
        ]
    );
    for p in &seen {
        assert_eq!(p.method, "POST");
        assert!(!p.body.contains("sk-live-key"), "{}", p.body);
    }
    // ntfy: the text as the body, the title and tags as headers.
    let n = &seen[0];
    assert_eq!(n.header("title"), Some("llmprobe test message"));
    assert_eq!(n.header("tags"), Some("bell"));
    assert!(
        n.header("content-type").unwrap().starts_with("text/plain"),
        "{n:?}"
    );
    assert!(
        n.body.starts_with("A test message: this channel works."),
        "{}",
        n.body
    );
    // Discord: content, and nobody is mentioned whatever the text says.
    let d = seen[1].json();
    assert!(
        d["content"]
            .as_str()
            .unwrap()
            .starts_with("**llmprobe test message**\n")
    );
    assert_eq!(d["allowed_mentions"]["parse"], serde_json::json!([]));
    // The generic body, as docs/alerts.md documents it.
    let j = seen[2].json();
    assert_eq!(j["version"], 1);
    assert_eq!(j["test"], true);
    assert_eq!(j["changes"], serde_json::json!([]));
    assert!(
        chrono::DateTime::parse_from_rfc3339(j["at"].as_str().unwrap()).is_ok(),
        "{j}"
    );
    // Slack: text, with the title in bold.
    let s = seen[3].json();
    assert!(
        s["text"]
            .as_str()
            .unwrap()
            .starts_with("*llmprobe test message*\n"),
        "{s}"
    );
    assert_eq!(seen[3].header("content-type"), Some("application/json"));
}

#[test]
fn notify_test_url_sends_there_only() {
    let hook = PingServer::start();
    let other = PingServer::start();
    let mut env = Env::new();
    env.env("LLMPROBE_NOTIFY", &on("json", &other, "/x"));
    let r = env
        .run(&["notify", "test", &on("json", &hook, "/only/SECRET")])
        .ok();
    assert_eq!(r.stdout, format!("json+{}: ok (HTTP 200)\n", hook.url));
    assert_eq!(hook.calls(), ["POST /only/SECRET"]);
    assert!(other.calls().is_empty());
}

#[test]
fn a_channel_that_fails_is_reported_by_scheme_and_host_and_exits_1() {
    let good = PingServer::start();
    let gone = PingServer::answering(404);
    let closed = closed_port();
    let mut env = Env::new();
    let vars = format!(
        "{} {} json+{closed}/SECRET",
        on("json", &good, "/SECRET"),
        on("slack", &gone, "/SECRET")
    );
    env.env("LLMPROBE_NOTIFY", &vars);
    let r = env.run(&["notify", "test"]).code(1);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", r.stdout);
    assert_eq!(lines[0], format!("json+{}: ok (HTTP 200)", good.url));
    assert_eq!(lines[1], format!("slack+{}: failed (HTTP 404)", gone.url));
    assert!(
        lines[2].starts_with(&format!("json+{closed}: failed (")),
        "{}",
        lines[2]
    );
    hides_secrets(&r.stdout);
    hides_secrets(&r.stderr);
    // A 404 is a wrong URL: asked once, not again.
    assert_eq!(gone.calls(), ["POST /SECRET"]);
}

#[test]
fn urls_that_name_no_channel_are_config_errors_that_keep_the_path() {
    let env = Env::new();
    let r = env
        .run(&["notify", "test", "https://example.com/SECRET/hook"])
        .code(2);
    assert!(r.stderr.contains("https://example.com"), "{}", r.stderr);
    assert!(r.stderr.contains("json+https://"), "{}", r.stderr);
    hides_secrets(&r.stderr);
    assert!(r.stdout.is_empty());

    let mut env = Env::new();
    env.env("LLMPROBE_NOTIFY", "http://hooks.slack.com/services/SECRET");
    let r = env.run(&["notify", "test"]).code(2);
    assert!(
        r.stderr.starts_with("error: LLMPROBE_NOTIFY: "),
        "{}",
        r.stderr
    );
    hides_secrets(&r.stderr);

    let mut env = Env::new();
    env.write("llmprobe.toml", "[notify]\nurl_env = [\"HOOK\"]\n");
    env.env("HOOK", "https://example.com/SECRET");
    let r = env.run(&["notify", "test"]).code(2);
    assert!(
        r.stderr.contains("HOOK (named by [notify] url_env)"),
        "{}",
        r.stderr
    );
    hides_secrets(&r.stderr);

    // Slack's own host is Slack only for an incoming webhook's path.
    let r = Env::new()
        .run(&["notify", "test", "https://hooks.slack.com/workflows/SECRET"])
        .code(2);
    assert!(r.stderr.contains("https://hooks.slack.com"), "{}", r.stderr);
    assert!(r.stderr.contains("slack+https://"), "{}", r.stderr);
    hides_secrets(&r.stderr);

    // A URL written in the file, under any key or as one string, is
    // refused by its key and never repeated; so is a key in [[providers]].
    for body in [
        "[notify]\nurl = \"https://hooks.slack.com/services/SECRET\"\n",
        "[notify]\nurl_env = \"https://hooks.slack.com/services/SECRET\"\n",
        "[notify]\nurl_env = [\"https://hooks.slack.com/services/SECRET\", 1]\n",
        "[[providers]]\nname = \"p\"\ndialect = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\
         models = [\"m\"]\napi_key = \"sk-SECRET-0123456789abcdef\"\n",
    ] {
        let env = Env::new();
        env.write("llmprobe.toml", body);
        let r = env.run(&["notify", "test"]).code(2);
        assert!(r.stderr.contains("llmprobe.toml"), "{body}: {}", r.stderr);
        hides_secrets(&r.stderr);
    }

    // A URL written in the file itself is refused, and not repeated.
    let env = Env::new();
    env.write(
        "llmprobe.toml",
        "[notify]\nurl_env = [\"https://hooks.slack.com/services/SECRET\"]\n",
    );
    let r = env.run(&["notify", "test"]).code(2);
    assert!(
        r.stderr.contains("notify.url_env[0] looks like a URL"),
        "{}",
        r.stderr
    );
    hides_secrets(&r.stderr);
}

#[test]
fn nothing_configured_says_where_urls_come_from() {
    let env = Env::new();
    env.write("llmprobe.toml", "[notify]\nurl_env = [\"TEAM_HOOK\"]\n");
    let r = env.run(&["notify", "test"]).code(2);
    // The variable url_env names is unset: one warning naming it.
    assert!(
        r.stderr
            .contains("warning: notify: TEAM_HOOK (named by [notify] url_env) is not set"),
        "{}",
        r.stderr
    );
    for place in ["LLMPROBE_NOTIFY", "[notify] url_env", "notify test URL"] {
        assert!(r.stderr.contains(place), "{place}: {}", r.stderr);
    }
}

#[test]
fn user_info_in_a_url_is_sent_as_basic_auth_and_never_shown() {
    // ntfy's access control, for one: https://user:password@host/topic.
    let hook = PingServer::start();
    let env = Env::new();
    let url = hook.url.replace("http://", "ntfy+http://alerts:SECRET@") + "/topic";
    let r = env.run(&["notify", "test", &url]).ok();
    hides_secrets(&r.stdout);
    let seen = hook.seen();
    assert_eq!(seen.len(), 1);
    // base64("alerts:SECRET")
    assert_eq!(
        seen[0].header("authorization"),
        Some("Basic YWxlcnRzOlNFQ1JFVA==")
    );
}

#[test]
fn a_5xx_is_tried_three_times_and_a_loopback_hook_skips_the_proxy() {
    let busy = PingServer::answering(503);
    let good = PingServer::start();
    let mut env = Env::new();
    // A proxy that answers nothing: a receiver on 127.0.0.1 never goes
    // through it, as probes and pings never do.
    let proxy = closed_port();
    env.env("HTTP_PROXY", &proxy).env("HTTPS_PROXY", &proxy);
    env.env(
        "LLMPROBE_NOTIFY",
        &format!("{} {}", on("json", &busy, "/a"), on("ntfy", &good, "/b")),
    );
    let r = env.run(&["notify", "test"]).code(1);
    assert_eq!(
        r.stdout,
        format!(
            "json+{}: failed (HTTP 503, 3 attempts)\nntfy+{}: ok (HTTP 200)\n",
            busy.url, good.url
        )
    );
    assert_eq!(busy.calls(), ["POST /a", "POST /a", "POST /a"]);
    assert_eq!(good.calls(), ["POST /b"]);
}
