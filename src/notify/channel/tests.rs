use chrono::TimeZone;

use super::*;
use crate::notify::ChangeKind;

fn at(h: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 5, 2, h, 0, 0).unwrap()
}

fn down(model: &str) -> Change {
    Change {
        kind: ChangeKind::ModelDown,
        provider: "groq".into(),
        model: Some(model.into()),
        key: None,
        from: "active".into(),
        to: "paused".into(),
        reason: "rate_limit".into(),
        error: Some("HTTP 429: slow down".into()),
        until: None,
        alerted_at: None,
    }
}

fn recovered(model: &str, alerted: Option<DateTime<Utc>>) -> Change {
    Change {
        kind: ChangeKind::ModelRecovered,
        from: "paused".into(),
        to: "active".into(),
        reason: "its probe passed".into(),
        error: None,
        alerted_at: alerted,
        ..down(model)
    }
}

/// groq down.
fn provider_down() -> Change {
    Change {
        kind: ChangeKind::ProviderDown,
        model: None,
        from: "up".into(),
        to: "down".into(),
        ..down("x")
    }
}

fn msg(changes: Vec<Change>) -> Message {
    Message {
        at: at(12),
        changes,
        test: false,
    }
}

#[test]
fn urls_choose_the_channel_and_labels_hide_the_path() {
    let cases = [
        (
            "https://ntfy.sh/my-topic",
            Kind::Ntfy,
            "https://ntfy.sh",
            "https://ntfy.sh/my-topic",
        ),
        (
            "ntfy+http://127.0.0.1:8080/alerts",
            Kind::Ntfy,
            "ntfy+http://127.0.0.1:8080",
            "http://127.0.0.1:8080/alerts",
        ),
        (
            "https://hooks.slack.com/services/T0/B0/XYZ",
            Kind::Slack,
            "https://hooks.slack.com",
            "https://hooks.slack.com/services/T0/B0/XYZ",
        ),
        (
            "slack+https://chat.example.com/hooks/abc",
            Kind::Slack,
            "slack+https://chat.example.com",
            "https://chat.example.com/hooks/abc",
        ),
        (
            "slack+http://127.0.0.1:9/h",
            Kind::Slack,
            "slack+http://127.0.0.1:9",
            "http://127.0.0.1:9/h",
        ),
        (
            "https://discord.com/api/webhooks/1/tok",
            Kind::Discord,
            "https://discord.com",
            "https://discord.com/api/webhooks/1/tok",
        ),
        (
            "https://discordapp.com/api/webhooks/1/tok",
            Kind::Discord,
            "https://discordapp.com",
            "https://discordapp.com/api/webhooks/1/tok",
        ),
        (
            "discord+https://relay.example.com/x",
            Kind::Discord,
            "discord+https://relay.example.com",
            "https://relay.example.com/x",
        ),
        (
            "json+https://hooks.example.com/in?token=SECRET",
            Kind::Json,
            "json+https://hooks.example.com",
            "https://hooks.example.com/in?token=SECRET",
        ),
        (
            "  JSON+http://127.0.0.1:9/hook ",
            Kind::Json,
            "json+http://127.0.0.1:9",
            "http://127.0.0.1:9/hook",
        ),
    ];
    for (raw, kind, label, url) in cases {
        let ch = Channel::parse(raw).unwrap_or_else(|e| panic!("{raw}: {e}"));
        assert_eq!(ch.kind, kind, "{raw}");
        assert_eq!(ch.label(), label, "{raw}");
        assert_eq!(ch.url.as_str(), url, "{raw}");
    }
}

#[test]
fn other_urls_are_config_errors_that_ask_for_a_prefix_and_keep_the_secret() {
    for raw in [
        "https://example.com/SECRET/path",
        "http://hooks.slack.com/services/SECRET",
        "https://hooks.slack.com/workflows/SECRET",
        "https://discord.com/SECRET",
        "http://ntfy.sh/SECRET",
        "ftp+https://example.com/SECRET",
        "json+ftp://example.com/SECRET",
        "example.com/SECRET",
        "https://ntfy.sh/",
        "",
    ] {
        let e = Channel::parse(raw).unwrap_err();
        assert_eq!(e.exit_code(), crate::exit::USAGE, "{raw}");
        let text = e.to_string();
        assert!(!text.contains("SECRET"), "{raw}: {text}");
        if raw != "https://ntfy.sh/" {
            assert!(text.contains("json+https://"), "{raw}: {text}");
        }
    }
    let e = Channel::parse("https://example.com/SECRET").unwrap_err();
    assert!(e.to_string().contains("https://example.com"), "{e}");
}

#[test]
fn titles_read_on_a_phone() {
    assert_eq!(title(&msg(vec![down("m")])), "groq::m paused");
    assert_eq!(
        title(&msg(vec![recovered("m", None)])),
        "Resolved: groq::m active"
    );
    let provider = provider_down();
    assert_eq!(title(&msg(vec![provider.clone()])), "groq down");
    assert_eq!(
        title(&msg(vec![down("a"), down("b"), recovered("c", None)])),
        "2 models down, 1 recovered"
    );
    assert_eq!(
        title(&msg(vec![provider, down("b")])),
        "1 provider down, 1 model down"
    );
    assert_eq!(
        title(&msg(vec![recovered("a", None), recovered("b", None)])),
        "Resolved: 2 recovered"
    );
    let test = Message {
        test: true,
        ..msg(vec![])
    };
    assert_eq!(title(&test), "llmprobe test message");
}

#[test]
fn ntfy_sends_text_with_title_tags_and_priority() {
    let ch = Channel::parse("https://ntfy.sh/t").unwrap();
    let r = ch.request(&msg(vec![down("m")]));
    assert_eq!(r.method, Method::POST);
    assert_eq!(r.url.as_str(), "https://ntfy.sh/t");
    let h = |k: &str| {
        r.headers
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(h("title"), Some("groq::m paused"));
    assert_eq!(h("tags"), Some("warning"));
    // A pause comes back by itself: low.
    assert_eq!(h("priority"), Some("low"));
    assert_eq!(
        r.body.as_deref(),
        Some(
            "groq::m: active → paused (rate_limit): HTTP 429: slow down\nllmprobe, 2026-05-02 12:00 UTC"
        )
    );
    let r = ch.request(&msg(vec![recovered("m", Some(at(9)))]));
    let h = |k: &str| {
        r.headers
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(h("title").as_deref(), Some("Resolved: groq::m active"));
    assert_eq!(h("tags").as_deref(), Some("white_check_mark"));
    assert_eq!(h("priority").as_deref(), Some("low"));
    assert!(
        r.body
            .unwrap()
            .contains("resolves the alert of 2026-05-02 09:00 UTC"),
    );
    // A header value stays ASCII whatever a model is called.
    let r = ch.request(&msg(vec![down("modèle")]));
    assert!(r.headers.iter().all(|(_, v)| v.is_ascii()));
}

#[test]
fn a_message_is_as_urgent_as_its_most_severe_change() {
    let disabled = Change {
        to: "disabled".into(),
        ..down("d")
    };
    let provider = provider_down();
    let bench = Change {
        kind: ChangeKind::Benched,
        to: "benched".into(),
        ..down("x")
    };
    let degraded = Change {
        kind: ChangeKind::Degraded,
        provider: String::new(),
        ..down("x")
    };
    let ntfy = Channel::parse("https://ntfy.sh/t").unwrap();
    let json = Channel::parse("json+https://example.com/h").unwrap();
    for (changes, want) in [
        (vec![down("a")], "low"),
        (vec![recovered("a", None)], "low"),
        (vec![disabled.clone()], "default"),
        (vec![bench], "default"),
        (
            vec![down("a"), disabled.clone(), recovered("b", None)],
            "default",
        ),
        (vec![provider.clone()], "high"),
        (vec![disabled, provider], "high"),
        (vec![degraded], "high"),
    ] {
        let m = msg(changes);
        let r = ntfy.request(&m);
        let got = r.headers.iter().find(|(n, _)| n == "priority").unwrap();
        assert_eq!(got.1, want, "{:?}", title(&m));
        let body: serde_json::Value =
            serde_json::from_str(json.request(&m).body.as_deref().unwrap()).unwrap();
        assert_eq!(body["priority"], want, "{:?}", title(&m));
    }
    let test = Message {
        test: true,
        ..msg(vec![])
    };
    assert_eq!(test.priority(), crate::notify::Priority::Default);
}

#[test]
fn slack_and_discord_send_json_text() {
    let m = msg(vec![Change {
        error: Some("<b>bad</b> & @everyone".into()),
        ..down("m")
    }]);
    let r = Channel::parse("https://hooks.slack.com/services/x")
        .unwrap()
        .request(&m);
    let v: serde_json::Value = serde_json::from_str(r.body.as_deref().unwrap()).unwrap();
    assert_eq!(
        v["text"],
        "*groq::m paused*\ngroq::m: active → paused (rate_limit): &lt;b&gt;bad&lt;/b&gt; &amp; @everyone\nllmprobe, 2026-05-02 12:00 UTC"
    );
    assert!(
        r.headers
            .contains(&("content-type".into(), "application/json".into()))
    );
    let r = Channel::parse("https://discord.com/api/webhooks/1/t")
        .unwrap()
        .request(&m);
    let v: serde_json::Value = serde_json::from_str(r.body.as_deref().unwrap()).unwrap();
    assert!(
        v["content"]
            .as_str()
            .unwrap()
            .starts_with("**groq::m paused**\n"),
        "{v}"
    );
    assert_eq!(v["allowed_mentions"], serde_json::json!({"parse": []}));
    // An upstream's error is markdown to Discord: escaped, it cannot plant
    // a masked link or bold text.
    let m = msg(vec![Change {
        error: Some("[click here](https://evil.example/x) **now**".into()),
        ..down("m")
    }]);
    let r = Channel::parse("https://discord.com/api/webhooks/1/t")
        .unwrap()
        .request(&m);
    let v: serde_json::Value = serde_json::from_str(r.body.as_deref().unwrap()).unwrap();
    let content = v["content"].as_str().unwrap();
    assert!(
        content.contains(r"\[click here\]\(https://evil.example/x\) \*\*now\*\*"),
        "{content}"
    );
    assert!(!content.contains("](https"), "{content}");
}

#[test]
fn the_json_body_is_the_documented_one_with_incident_ids() {
    let m = msg(vec![
        down("a"),
        recovered("b", Some(at(9))),
        recovered("c", None),
    ]);
    let v = json_body(&m);
    assert_eq!(
        v,
        serde_json::json!({
            "version": 1,
            "at": "2026-05-02T12:00:00Z",
            "test": false,
            "title": "1 model down, 2 recovered",
            "priority": "low",
            "changes": [
                {"kind": "model_down", "provider": "groq", "model": "a", "from": "active",
                 "to": "paused", "reason": "rate_limit", "error": "HTTP 429: slow down",
                 "id": "groq::a@2026-05-02T12:00:00Z", "resolves": null},
                {"kind": "model_recovered", "provider": "groq", "model": "b", "from": "paused",
                 "to": "active", "reason": "its probe passed", "error": null,
                 "id": "groq::b@2026-05-02T09:00:00Z", "resolves": "groq::b@2026-05-02T09:00:00Z"},
                {"kind": "model_recovered", "provider": "groq", "model": "c", "from": "paused",
                 "to": "active", "reason": "its probe passed", "error": null,
                 "id": null, "resolves": null},
            ]
        })
    );
    // The same incident has the same id in the alert and in its resolution.
    let alert = json_body(&Message {
        at: at(9),
        ..msg(vec![down("b")])
    });
    assert_eq!(alert["changes"][0]["id"], v["changes"][1]["resolves"]);
}

#[test]
fn long_errors_and_many_changes_are_capped() {
    let long = Change {
        error: Some("x".repeat(5000)),
        ..down("m")
    };
    let text = lines(&msg(vec![long]), NTFY_CAP, Markup::Plain);
    assert!(text.len() < 400, "{}", text.len());
    let many: Vec<Change> = (0..50).map(|i| down(&format!("m{i}"))).collect();
    let text = lines(&msg(many.clone()), NTFY_CAP, Markup::Plain);
    assert_eq!(text.lines().count(), MAX_LINES + 2, "{text}");
    assert!(text.contains("… and 30 more"), "{text}");
    let text = lines(&msg(many), 500, Markup::Plain);
    assert!(text.len() <= 500, "{}", text.len());
    assert!(text.contains("more"), "{text}");
}

#[test]
fn urls_come_from_the_flag_the_variable_and_url_env_once_each() {
    let env = |k: &str| match k {
        "LLMPROBE_NOTIFY" => Some(" https://ntfy.sh/a\n json+http://127.0.0.1:9/h ".into()),
        "SLACK_HOOK" => Some("https://hooks.slack.com/services/x".into()),
        "EMPTY" => Some(" ".into()),
        _ => None,
    };
    let url_env = ["SLACK_HOOK".to_string(), "EMPTY".into(), "UNSET".into()];
    let cli = ["https://ntfy.sh/a".to_string()];
    let (chs, warnings) = gather(&url_env, &cli, env).unwrap();
    let labels: Vec<String> = chs.iter().map(Channel::label).collect();
    assert_eq!(
        labels,
        [
            "https://ntfy.sh",
            "json+http://127.0.0.1:9",
            "https://hooks.slack.com"
        ]
    );
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings[0].contains("EMPTY") && warnings[1].contains("UNSET"));
    // A bad URL names where it came from, never its path.
    let bad = |k: &str| (k == "HOOK").then(|| "https://example.com/SECRET".to_string());
    let e = gather(&["HOOK".into()], &[], bad).unwrap_err().to_string();
    assert!(e.starts_with("HOOK (named by [notify] url_env): "), "{e}");
    assert!(!e.contains("SECRET"), "{e}");
    let e = gather(&[], &["http://x.example/SECRET".into()], |_| None)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("--notify: "), "{e}");
    let (none, w) = gather(&[], &[], |_| None).unwrap();
    assert!(none.is_empty() && w.is_empty());
}

#[test]
fn the_documented_json_bodies_are_what_is_sent() {
    let doc = include_str!("../../../docs/alerts.md");
    let blocks: Vec<serde_json::Value> = doc
        .split("```json\n")
        .skip(1)
        .map(|b| serde_json::from_str(b.split("```").next().unwrap()).unwrap())
        .collect();
    assert_eq!(blocks.len(), 4);
    let model = "openai/gpt-oss-20b";
    let alert = Message {
        at: at(10),
        changes: vec![Change {
            to: "disabled".into(),
            reason: "error, 3 runs in a row".into(),
            error: Some("HTTP 401: Invalid API Key".into()),
            ..down(model)
        }],
        test: false,
    };
    assert_eq!(json_body(&alert), blocks[0]);
    let resolved = Message {
        at: at(13),
        changes: vec![Change {
            from: "disabled".into(),
            ..recovered(model, Some(at(10)))
        }],
        test: false,
    };
    assert_eq!(json_body(&resolved), blocks[1]);
    // And the text examples above them.
    let text = |m: &Message| format!("{}\n{}", title(m), lines(m, NTFY_CAP, Markup::Plain));
    assert!(
        doc.contains(&format!("```text\n{}\n```", text(&alert))),
        "{}",
        text(&alert)
    );
    assert!(
        doc.contains(&format!("```text\n{}\n```", text(&resolved))),
        "{}",
        text(&resolved)
    );
    // route --serve's: a key benched for the day, and degraded mode.
    let benched = Message {
        at: at(10),
        changes: vec![Change {
            kind: ChangeKind::Benched,
            model: None,
            key: Some("#0:3f9a1c2e".into()),
            from: "up".into(),
            to: "benched".into(),
            reason: "payment".into(),
            error: Some("HTTP 402: insufficient credits".into()),
            until: Some(at(10) + chrono::TimeDelta::days(1)),
            ..down(model)
        }],
        test: false,
    };
    assert_eq!(json_body(&benched), blocks[2]);
    assert!(
        doc.contains(&format!("```text\n{}\n```", text(&benched))),
        "{}",
        text(&benched)
    );
    let degraded = Message {
        at: at(10),
        changes: vec![Change {
            kind: ChangeKind::Degraded,
            provider: String::new(),
            model: None,
            from: "ready".into(),
            to: "degraded".into(),
            reason: "1 of 4 providers have an active model, below 0.5".into(),
            error: None,
            ..down(model)
        }],
        test: false,
    };
    assert_eq!(json_body(&degraded), blocks[3]);
}

#[test]
fn route_changes_are_titled_by_what_they_are() {
    let bench = |key: &str| Change {
        kind: ChangeKind::Benched,
        model: None,
        key: Some(key.into()),
        to: "benched".into(),
        ..down("x")
    };
    let degraded = Change {
        kind: ChangeKind::Degraded,
        provider: String::new(),
        model: None,
        to: "degraded".into(),
        ..down("x")
    };
    let ready = Change {
        kind: ChangeKind::Ready,
        to: "ready".into(),
        ..degraded.clone()
    };
    assert_eq!(title(&msg(vec![bench("#0:aa")])), "groq#0:aa benched");
    assert_eq!(
        title(&msg(vec![degraded.clone(), bench("#0:aa"), bench("#1:bb")])),
        "route degraded, 2 benched"
    );
    assert_eq!(title(&msg(vec![ready])), "Resolved: route ready");
    // A key's use of one model.
    let daily = Change {
        model: Some("m".into()),
        ..bench("#0:aa")
    };
    assert_eq!(daily.subject(), "groq#0:aa::m");
}

#[test]
fn an_unreachable_channel_costs_one_warning_naming_scheme_and_host() {
    // A port nothing listens on any more: refused, and not retried.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let ch = Channel::parse(&format!("json+http://127.0.0.1:{port}/SECRET?token=SECRET")).unwrap();
    let out = deliver(std::slice::from_ref(&ch), &msg(vec![down("m")]));
    assert_eq!(out.len(), 1);
    let w = out[0]
        .warning_then("the run's result is unchanged")
        .expect("not delivered");
    assert!(
        w.starts_with(&format!(
            "warning: notify: the alert to json+http://127.0.0.1:{port} failed ("
        )),
        "{w}"
    );
    assert!(!w.contains("SECRET") && !w.contains('\n'), "{w}");
    let ok = Outcome {
        label: "x".into(),
        result: Ok(200),
    };
    assert_eq!(ok.warning_then("the run's result is unchanged"), None);
}
