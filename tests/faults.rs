//! The fake provider's transport faults (`hang-headers`, `drip`, `reset`,
//! `bad-utf8`, `huge:N`, `no-done`, `no-done-hang`) against the real binary:
//! every probe and every routed request ends with a classified failure,
//! never a hang or a crash. Timeouts are real network timeouts here, so they
//! are short; the tests assert what was recorded, never how long it took.

use std::collections::BTreeMap;

use crate::support::{Env, Fake, RouteServer, check, config, log_entries, model_key, route_config};

/// Each fault, scripted on a model of the same name (`huge:50` as `huge50`).
const SCRIPTS: &[&str] = &[
    "hang-headers=hang-headers",
    "drip=drip",
    "reset=reset",
    "bad-utf8=bad-utf8",
    "huge50=huge:50",
    "no-done=no-done",
    "no-done-hang=no-done-hang",
    "flaky=flaky:100",
    "spike=spike:5000",
];

#[test]
fn every_probe_of_a_faulty_transport_ends_classified() {
    let env = Env::new();
    let fake = Fake::start(&env, SCRIPTS);
    let models = [
        "hang-headers",
        "drip",
        "reset",
        "bad-utf8",
        "huge50",
        "flaky",
        "spike",
    ];
    let cfg = config(
        &env,
        &[
            fake.provider("oa", "openai", &models, "timeout_secs = 1"),
            fake.provider(
                "an",
                "anthropic",
                &["hang-headers", "drip"],
                "timeout_secs = 1",
            ),
            fake.provider(
                "ge",
                "gemini",
                &["hang-headers", "bad-utf8"],
                "timeout_secs = 1",
            ),
        ],
    );
    check(&env, &cfg, &[]).ok();
    let got: BTreeMap<String, (String, String)> = log_entries(&env.log())
        .iter()
        .map(|e| {
            (
                model_key(e),
                (
                    e["failure_type"].as_str().unwrap_or("").to_string(),
                    e["error"].as_str().unwrap_or("").to_string(),
                ),
            )
        })
        .collect();
    let want = [
        ("oa::hang-headers", "timeout", "timed out after 1s"),
        ("an::hang-headers", "timeout", "timed out after 1s"),
        ("ge::hang-headers", "timeout", "timed out after 1s"),
        ("oa::drip", "timeout", "timed out after 1s"),
        ("an::drip", "timeout", "timed out after 1s"),
        ("oa::reset", "error", "connection closed mid-body"),
        // Read through the cap and dropped: never buffered whole.
        ("oa::huge50", "error", "response larger than 1 MiB"),
        // JSON must be UTF-8, and a client that decodes strictly fails on
        // it: the answer around the bad bytes does not count.
        (
            "oa::bad-utf8",
            "error",
            "response is not valid UTF-8 (byte ",
        ),
        (
            "ge::bad-utf8",
            "error",
            "response is not valid UTF-8 (byte ",
        ),
    ];
    for (key, class, error) in want {
        let (c, e) = got
            .get(key)
            .unwrap_or_else(|| panic!("{key} not recorded: {got:#?}"));
        assert_eq!(c, class, "{key}: {e}");
        assert!(e.starts_with(error), "{key}: {e:?}, expected {error:?}…");
    }
    // Every request of flaky:100 fails, as a 429 or a 5xx.
    let flaky = got["oa::flaky"].0.as_str();
    assert!(["rate_limit", "http_error"].contains(&flaky), "{got:#?}");
    // A spike past the timeout is one; without one, the answer passes.
    let spike = got["oa::spike"].0.as_str();
    assert!(["", "timeout"].contains(&spike), "{got:#?}");
    assert_eq!(got.len(), want.len() + 2, "{got:#?}");
}

#[test]
fn every_routed_request_to_a_faulty_transport_ends_classified() {
    let env = Env::new();
    let fake = Fake::start(&env, SCRIPTS);
    let faults = [
        "hang-headers",
        "drip",
        "reset",
        "bad-utf8",
        "huge50",
        "no-done",
        "no-done-hang",
    ];
    let cfg = route_config(
        &env,
        &[
            fake.provider("oa", "openai", &faults, "timeout_secs = 2"),
            fake.provider("an", "anthropic", &faults, "timeout_secs = 2"),
            fake.provider("ok", "openai", &["ok"], "timeout_secs = 2"),
        ],
        "[route]\nidle_timeout_secs = 1\nrequest_timeout_secs = 2\n",
    );
    let srv = RouteServer::start(&env, &cfg, &[]);
    for p in ["oa", "an"] {
        for m in faults {
            for stream in [false, true] {
                let key = format!("{p}::{m} stream={stream}");
                let r = srv.chat(&format!("{p}::{m}"), stream);
                // Only an answer without its last event is still an answer
                // (unstreamed, those two answer like `ok`); bad-utf8 is
                // refused like the rest.
                let answered = matches!(m, "no-done" | "no-done-hang");
                if !answered {
                    // Which deadline fires first (the attempt's or the
                    // request's) is a race: either is a classified failure.
                    assert!(
                        matches!(r.status, 502 | 504),
                        "{key}: {} {}",
                        r.status,
                        r.body
                    );
                    let code = r.json()["error"]["code"].as_str().unwrap_or("").to_string();
                    assert!(
                        ["all_candidates_failed", "request_timeout"].contains(&code.as_str()),
                        "{key}: {}",
                        r.body
                    );
                    continue;
                }
                assert_eq!(r.status, 200, "{key}: {}", r.body);
                if stream {
                    // The router ends a stream the upstream left unended.
                    assert!(
                        r.body.trim_end().ends_with("data: [DONE]"),
                        "{key}: {}",
                        r.body
                    );
                } else {
                    let content = r.json()["choices"][0]["message"]["content"].clone();
                    assert!(
                        content.as_str().unwrap_or("").ends_with("14"),
                        "{key}: {}",
                        r.body
                    );
                }
            }
        }
    }
    // The server still serves others.
    let r = srv.chat("ok::ok", false);
    assert_eq!(r.status, 200, "{}", r.body);
}
