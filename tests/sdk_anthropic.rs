//! The official Anthropic Python SDK against `route --serve`'s Messages
//! surface, with each upstream dialect behind it. It needs the SDK in
//! `.ci/venv` (`.ci/run` installs it), so it runs in the external harness.

use serde_json::{Value, json};

use crate::Test;
use crate::support::need::Need;
use crate::support::{Fake, RouteServer, clock_env, each_dialect_config, sdk_script};

/// `messages.create`, `messages.stream`, a tool call and its result
/// (streamed and not), `count_tokens` and a `NotFoundError`, through route to an OpenAI-,
/// an Anthropic- and a Gemini-dialect upstream
/// (tests/sdk/anthropic_client.py says what it does).
fn the_anthropic_python_sdk_through_each_dialect() {
    let env = clock_env();
    let fake = Fake::start(&env, &[]);
    let cfg = each_dialect_config(&env, &fake);
    let srv = RouteServer::start(&env, &cfg, &[]);
    let v = sdk_script(
        "anthropic_client.py",
        &[&srv.url, "o::ok", "a::ok", "g::ok"],
    );
    for m in ["o::ok", "a::ok", "g::ok"] {
        let r = &v["models"][m];
        let create = &r["create"];
        assert_eq!(create["text"], "14", "{m}: {r}");
        assert_eq!(create["stop_reason"], "end_turn", "{m}: {r}");
        assert_eq!(create["routed_via"], m, "{m}: {r}");
        assert!(
            create["id"]
                .as_str()
                .is_some_and(|id| id.starts_with("msg_")),
            "{m}: {r}"
        );
        assert!(
            create["input_tokens"].as_u64().is_some_and(|n| n > 0),
            "{m}: {r}"
        );
        assert!(create["output_tokens"].is_u64(), "{m}: {r}");
        let stream = &r["stream"];
        assert_eq!(stream["text_events"], "14", "{m}: {r}");
        assert_eq!(stream["final_text"], "14", "{m}: {r}");
        assert_eq!(stream["stop_reason"], "end_turn", "{m}: {r}");
        for key in ["tool", "tool_stream"] {
            let t = &r[key];
            assert_eq!(t["name"], "add", "{m} {key}: {r}");
            assert_eq!(t["input"], json!({"a": 12, "b": 30}), "{m} {key}: {r}");
            assert_eq!(t["calls"], 1, "{m} {key}: {r}");
            assert_eq!(t["empty_text_blocks"], 0, "{m} {key}: {r}");
            assert_eq!(t["stop_reason"], "tool_use", "{m} {key}: {r}");
            assert!(
                t["id"].as_str().is_some_and(|id| !id.is_empty()),
                "{m} {key}: {r}"
            );
        }
        for key in ["round_trip", "round_trip_stream"] {
            let t = &r[key];
            assert!(
                t["text"].as_str().is_some_and(|s| s.contains("42")),
                "{m} {key}: {r}"
            );
            assert_eq!(t["stop_reason"], "end_turn", "{m} {key}: {r}");
        }
    }
    // The question and the tool's declaration, four characters a token.
    assert!(v["count_tokens"].as_u64().is_some_and(|n| n > 40), "{v}");
    assert_eq!(
        v["unknown_model"],
        json!({"status": 404, "type": "not_found_error"}),
        "{v}"
    );
    // Each upstream got the tool in its own dialect.
    let bodies: Vec<Value> = fake.seen().into_iter().filter_map(|s| s.body).collect();
    assert!(
        bodies
            .iter()
            .any(|b| b["tools"][0]["input_schema"].is_object()),
        "{bodies:?}"
    );
    assert!(
        bodies
            .iter()
            .any(|b| b["tools"][0]["functionDeclarations"].is_array()),
        "{bodies:?}"
    );
    assert!(
        bodies
            .iter()
            .any(|b| b["tools"][0]["function"]["parameters"].is_object()),
        "{bodies:?}"
    );
}

pub fn tests() -> Vec<Test> {
    vec![Test::new(
        "sdk_anthropic::the_anthropic_python_sdk_through_each_dialect",
        &[Need::Python("anthropic")],
        the_anthropic_python_sdk_through_each_dialect,
    )]
}
