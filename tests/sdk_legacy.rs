//! The official OpenAI and Anthropic Python SDKs against the rest of what
//! `route --serve` serves (tests/sdk/openai_legacy.py says what it calls):
//! legacy Completions through each upstream dialect, `models.retrieve`,
//! and the Anthropic-shaped model list. In the external harness, which
//! reports the test as ignored where the SDKs are missing.

use serde_json::json;

use crate::Test;
use crate::support::need::Need;
use crate::support::{Fake, RouteServer, clock_env, route_config, sdk_script};

fn the_sdks_call_completions_and_models_through_each_dialect() {
    let env = clock_env();
    let fake = Fake::start(&env, &[]);
    let cfg = route_config(
        &env,
        &[
            fake.provider(
                "o",
                "openai",
                &["ok"],
                "priority = 1\nmodel_info = { \"ok\" = { context_window = 32768 } }",
            ),
            fake.provider("a", "anthropic", &["ok"], "priority = 2"),
            fake.provider("g", "gemini", &["ok"], "priority = 3"),
            fake.provider(
                "or",
                "openai",
                &["meta-llama/llama-3.3-70b:free"],
                "priority = 4",
            ),
        ],
        "",
    );
    // The record says o::ok calls tools and fails JSON (as `check` writes it).
    env.write(
        "stats/capabilities.json",
        r#"{"o::ok": {"tools": {"verdict": "yes", "seen": "2026-12-01T10:00:00Z"},
                     "json": {"verdict": "no", "seen": "2026-12-01T10:00:00Z", "reason": "wrong_answer: not JSON"}}}"#,
    );
    let srv = RouteServer::start(&env, &cfg, &[]);
    let models = ["o::ok", "a::ok", "g::ok"];
    let mut args = vec![srv.url.as_str(), "any-key"];
    args.extend(models);
    let v = sdk_script("openai_legacy.py", &args);
    for m in models {
        let r = &v["models"][m];
        let plain = &r["plain"];
        assert!(
            plain["id"].as_str().unwrap().starts_with("cmpl-"),
            "{m}: {r}"
        );
        assert_eq!(plain["object"], "text_completion", "{m}: {r}");
        assert_eq!(plain["text"], "14", "{m}: {r}");
        assert_eq!(plain["finish_reason"], "stop", "{m}: {r}");
        assert!(plain["total_tokens"].as_u64().unwrap() > 0, "{m}: {r}");
        let stream = &r["stream"];
        assert_eq!(stream["text"], "14", "{m}: {r}");
        assert_eq!(stream["finish_reason"], "stop", "{m}: {r}");
        assert_eq!(stream["objects"], json!(["text_completion"]), "{m}: {r}");
        assert_eq!(stream["ids"], 1, "{m}: {r}");
        assert!(stream["total_tokens"].as_u64().unwrap() > 0, "{m}: {r}");
    }
    assert_eq!(
        v["retrieve"],
        json!({"id": "o::ok", "owned_by": "o", "object": "model"}),
        "{v}"
    );
    assert_eq!(
        v["extra"],
        json!({
            "context_length": 32768,
            "capabilities": {"tools": "yes", "json": "no", "vision": "unknown"},
            "supported_parameters": ["tools", "tool_choice"],
        }),
        "{v}"
    );
    assert_eq!(
        v["retrieve_slash"],
        json!({"id": "or::meta-llama/llama-3.3-70b:free", "owned_by": "or"}),
        "{v}"
    );
    assert_eq!(
        v["retrieve_unknown"],
        json!({"status": 404, "code": "model_not_found"}),
        "{v}"
    );
    assert_eq!(v["suffix"]["status"], 400, "{v}");
    assert_eq!(v["suffix"]["code"], "no_capable_model", "{v}");
    assert_eq!(v["echo"]["status"], 400, "{v}");
    assert!(
        v["echo"]["message"].as_str().unwrap().contains("'echo'"),
        "{v}"
    );
    assert_eq!(v["embeddings"]["status"], 404, "{v}");
    let ids: Vec<&str> = v["anthropic_list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "auto",
            "o::ok",
            "a::ok",
            "g::ok",
            "or::meta-llama/llama-3.3-70b:free"
        ],
        "{v}"
    );
    let first = &v["anthropic_list"][1];
    assert_eq!(
        first,
        &json!({"id": "o::ok", "type": "model", "display_name": "o::ok", "year": 1970}),
        "{v}"
    );
    assert_eq!(
        v["anthropic_retrieve"],
        json!({"id": "o::ok", "display_name": "o::ok"}),
        "{v}"
    );
    assert_eq!(
        v["anthropic_unknown"],
        json!({"status": 404, "type": "not_found_error"}),
        "{v}"
    );
    // Only the six completions were sent, one per dialect twice.
    let sent = fake.seen().iter().filter(|s| s.model() == "ok").count();
    assert_eq!(sent, 6);
}

pub fn tests() -> Vec<Test> {
    vec![Test::new(
        "sdk_legacy::the_sdks_call_completions_and_models_through_each_dialect",
        &[Need::Python("openai"), Need::Python("anthropic")],
        the_sdks_call_completions_and_models_through_each_dialect,
    )]
}
