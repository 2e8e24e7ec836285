//! The official OpenAI Python SDK's Responses API (`responses.create`,
//! streamed and not, a function call and its output, turns chained by
//! `previous_response_id` and `item_reference`, an error) against
//! `route --serve` (and its `responses.stream` helper), with each upstream dialect behind it. It needs the
//! `openai` package, so it runs in the external harness.

use serde_json::{Value, json};

use crate::Test;
use crate::support::need::Need;
use crate::support::{Fake, RouteServer, clock_env, each_dialect_config, sdk_script};

/// tests/sdk/openai_responses.py says what it does; this checks what it
/// got back from each dialect.
fn the_openai_sdk_speaks_the_responses_api_through_each_dialect() {
    let env = clock_env();
    let fake = Fake::start(&env, &[]);
    let cfg = each_dialect_config(&env, &fake);
    let srv = RouteServer::start(&env, &cfg, &[]);
    let v = sdk_script(
        "openai_responses.py",
        &[&format!("{}/v1", srv.url), "o::ok", "a::ok", "g::ok"],
    );
    for m in ["o::ok", "a::ok", "g::ok"] {
        let r = &v["models"][m];
        let plain = &r["plain"];
        assert_eq!(plain["status"], "completed", "{m}: {r}");
        assert_eq!(plain["output_text"], "14", "{m}: {r}");
        assert!(
            plain["id"].as_str().unwrap().starts_with("resp_"),
            "{m}: {r}"
        );
        assert!(plain["input_tokens"].as_u64().unwrap() > 0, "{m}: {r}");
        assert!(plain["output_tokens"].as_u64().unwrap() > 0, "{m}: {r}");

        let s = &r["stream"];
        assert_eq!(s["text"], "14", "{m}: {r}");
        assert_eq!(s["sequence_ok"], true, "{m}: {r}");
        let kinds: Vec<&str> = s["kinds"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(
            kinds[..4],
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added"
            ],
            "{m}: {r}"
        );
        assert_eq!(kinds.last(), Some(&"response.completed"), "{m}: {r}");
        assert_eq!(s["completed"]["status"], "completed", "{m}: {r}");
        assert_eq!(s["completed"]["output_text"], "14", "{m}: {r}");

        assert_eq!(r["call"]["name"], "add", "{m}: {r}");
        assert_eq!(
            r["call"]["arguments"],
            json!({"a": 12, "b": 30}),
            "{m}: {r}"
        );
        assert!(
            r["call"]["call_id"].as_str().is_some_and(|c| !c.is_empty()),
            "{m}: {r}"
        );
        assert!(
            r["round_trip"]["output_text"]
                .as_str()
                .is_some_and(|t| t.contains("42")),
            "{m}: {r}"
        );
        assert_eq!(r["round_trip"]["status"], "completed", "{m}: {r}");
        assert_eq!(r["stream_call"]["name"], "add", "{m}: {r}");
        assert_eq!(
            r["stream_call"]["arguments"],
            json!({"a": 12, "b": 30}),
            "{m}: {r}"
        );
        assert_eq!(
            r["stream_call"]["final_arguments"], r["stream_call"]["arguments"],
            "{m}: {r}"
        );

        let helper = &r["stream_helper"];
        assert_eq!(helper["status"], "completed", "{m}: {r}");
        assert_eq!(helper["name"], "add", "{m}: {r}");
        assert_eq!(helper["arguments"], json!({"a": 12, "b": 30}), "{m}: {r}");

        // Chained by previous_response_id, and by an item_reference.
        let p = &r["previous"];
        assert_eq!(p["previous_response_id"], p["first"], "{m}: {r}");
        assert_eq!(p["store"], true, "{m}: {r}");
        assert_eq!(p["output_text"], "4", "{m}: {r}");
        assert!(
            r["reference"]["id"]
                .as_str()
                .is_some_and(|id| id.starts_with("msg_")),
            "{m}: {r}"
        );
        assert_eq!(r["reference"]["output_text"], "4", "{m}: {r}");
        let u = &r["unknown_previous"];
        assert_eq!(u["status"], 400, "{m}: {r}");
        assert_eq!(u["code"], "previous_response_not_found", "{m}: {r}");
        assert!(
            u["message"].as_str().is_some_and(
                |t| t.contains("previous_response_id") && t.contains("unknown or expired")
            ),
            "{m}: {r}"
        );
    }
}

pub fn tests() -> Vec<Test> {
    vec![Test::new(
        "sdk_responses::the_openai_sdk_speaks_the_responses_api_through_each_dialect",
        &[Need::Python("openai")],
        the_openai_sdk_speaks_the_responses_api_through_each_dialect,
    )]
}
