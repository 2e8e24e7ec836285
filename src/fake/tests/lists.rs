//! Providers' model lists (`fake/lists.rs`) over real HTTP: every shape,
//! pages followed to the end, a model dropped by rewriting the models
//! file, each way a list fails; and `decommissioned` in each dialect, read
//! by the classifier as a model that is gone.

use std::path::Path;

use super::*;
use crate::outcome::FailureType;
use crate::upstream::classify::{self, ErrorClass};
use crate::upstream::dialect::ChatRequest;
use crate::upstream::secret::Redactor;

/// `GET {base}{prefix}/models?{query}` with `d`'s key header.
async fn list(base: &str, prefix: &str, d: Dialect, query: &str) -> Reply {
    let url = format!(
        "{base}{prefix}/models{}",
        if query.is_empty() {
            String::new()
        } else {
            format!("?{query}")
        }
    );
    let rb = client().get(url);
    let rb = match d {
        Dialect::Openai => rb.header("authorization", format!("Bearer {KEY}")),
        Dialect::Anthropic => rb
            .header("x-api-key", KEY)
            .header("anthropic-version", "2023-06-01"),
        Dialect::Gemini => rb.header("x-goog-api-key", KEY),
    };
    send(rb).await
}

/// The `id`s of a JSON array of models.
fn ids(models: &Value) -> Vec<String> {
    models
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {models}"))
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect()
}

/// Every model of Anthropic's list, following `after_id` while
/// `has_more`; and how many pages that took.
async fn anthropic_all(base: &str, limit: usize) -> (Vec<String>, usize) {
    let (mut all, mut pages, mut after) = (Vec::new(), 0, None::<String>);
    loop {
        let mut query = format!("limit={limit}");
        if let Some(a) = &after {
            query.push_str(&format!("&after_id={a}"));
        }
        let r = list(base, "/v1", Dialect::Anthropic, &query).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let v = r.json();
        pages += 1;
        let page = ids(&v["data"]);
        assert!(page.len() <= crate::fake::lists::PAGE.min(limit), "{v}");
        for m in v["data"].as_array().unwrap() {
            assert_eq!(m["type"], "model", "{m}");
            assert!(
                m["display_name"].is_string() && m["created_at"].is_string(),
                "{m}"
            );
        }
        assert_eq!(
            v["first_id"].as_str(),
            page.first().map(String::as_str),
            "{v}"
        );
        assert_eq!(
            v["last_id"].as_str(),
            page.last().map(String::as_str),
            "{v}"
        );
        all.extend(page);
        if v["has_more"] != true {
            return (all, pages);
        }
        after = v["last_id"].as_str().map(String::from);
        assert!(pages < 50, "no end to the pages");
    }
}

/// Every model of Gemini's list, following `nextPageToken`; and how many
/// pages that took.
async fn gemini_all(base: &str, page_size: usize) -> (Vec<Value>, usize) {
    let (mut all, mut pages, mut token) = (Vec::new(), 0, None::<String>);
    loop {
        let mut query = format!("pageSize={page_size}");
        if let Some(t) = &token {
            query.push_str(&format!("&pageToken={t}"));
        }
        let r = list(base, "/v1beta", Dialect::Gemini, &query).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let v = r.json();
        pages += 1;
        let page = v["models"].as_array().unwrap();
        assert!(page.len() <= crate::fake::lists::PAGE.min(page_size), "{v}");
        all.extend(page.iter().cloned());
        match v["nextPageToken"].as_str() {
            Some(t) => token = Some(t.to_string()),
            None => return (all, pages),
        }
        assert!(pages < 50, "no end to the pages");
    }
}

/// The ids of Gemini's models that support `generateContent`, without
/// `models/`.
fn generators(models: &[Value]) -> Vec<String> {
    models
        .iter()
        .filter(|m| {
            m["supportedGenerationMethods"]
                .as_array()
                .unwrap()
                .iter()
                .any(|g| g == "generateContent")
        })
        .map(|m| {
            m["name"]
                .as_str()
                .unwrap()
                .strip_prefix("models/")
                .unwrap()
                .to_string()
        })
        .collect()
}

fn write(path: &Path, models: Value) {
    std::fs::write(path, models.to_string()).unwrap();
}

/// A fake whose lists come from `file`, holding `models`.
async fn listing(file: &Path, models: Value) -> FakeServer {
    write(file, models);
    let cfg = FakeConfig {
        models_file: Some(file.to_path_buf()),
        ..FakeConfig::default()
    };
    start(cfg).await.unwrap()
}

/// A free chat model with tools and JSON, a `:free` id, a paid model with
/// vision and a deprecation date, and an embedding model.
fn catalog() -> Value {
    json!([
        {"id": "llama-fast", "free": true, "context": 131072, "max_output": 8192,
         "tools": true, "json": true, "aliases": ["llama-fast-latest"]},
        {"id": "meta/llama-free:free", "context": 65536},
        {"id": "vision-pro", "free": false, "context": 32768, "max_output": 4096,
         "vision": true, "deprecation": "2027-01-01"},
        {"id": "embed-small", "kind": "embedding", "context": 8192},
    ])
}

#[tokio::test]
async fn every_flavour_has_its_shape() {
    let dir = tempfile::tempdir().unwrap();
    let fake = listing(&dir.path().join("models.json"), catalog()).await;
    let base = fake.url();
    let all = [
        "llama-fast",
        "meta/llama-free:free",
        "vision-pro",
        "embed-small",
    ];
    let chat = ["llama-fast", "meta/llama-free:free", "vision-pro"];

    // OpenAI's, plain: ids only, embeddings too.
    let v = list(&base, "/v1", Dialect::Openai, "").await.json();
    assert_eq!(v["object"], "list");
    assert_eq!(ids(&v["data"]), all);
    for m in v["data"].as_array().unwrap() {
        assert_eq!(m["object"], "model");
        assert!(m["created"].is_i64() && m["owned_by"].is_string(), "{m}");
        assert!(m.get("context_length").is_none(), "{m}");
    }

    // OpenRouter's: prices as strings, "0" when free; no embeddings.
    let v = list(&base, "/openrouter/api/v1", Dialect::Openai, "")
        .await
        .json();
    assert!(v.get("object").is_none(), "{v}");
    assert_eq!(ids(&v["data"]), chat);
    let m = &v["data"];
    assert_eq!(m[0]["pricing"]["prompt"], "0");
    assert_eq!(m[0]["pricing"]["completion"], "0");
    assert_eq!(m[1]["pricing"]["prompt"], "0", "a :free id is free");
    assert_eq!(m[2]["pricing"]["prompt"], "0.0000002");
    assert_eq!(m[2]["pricing"]["completion"], "0.0000008");
    assert_eq!(m[0]["context_length"], 131072);
    assert_eq!(m[0]["top_provider"]["max_completion_tokens"], 8192);
    assert_eq!(m[1]["top_provider"]["max_completion_tokens"], Value::Null);
    let params = |i: usize| -> Vec<String> {
        m[i]["supported_parameters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap().to_string())
            .collect()
    };
    for p in [
        "tools",
        "tool_choice",
        "response_format",
        "structured_outputs",
    ] {
        assert!(params(0).iter().any(|x| x == p), "{p}: {:?}", params(0));
        assert!(!params(2).iter().any(|x| x == p), "{p}: {:?}", params(2));
    }
    assert_eq!(
        m[2]["architecture"]["input_modalities"],
        json!(["text", "image"])
    );
    assert_eq!(m[0]["architecture"]["input_modalities"], json!(["text"]));
    assert_eq!(m[2]["expiration_date"], "2027-01-01");

    // Mistral's: capabilities, the window, deprecation, aliases.
    let v = list(&base, "/mistral/v1", Dialect::Openai, "").await.json();
    assert_eq!(v["object"], "list");
    assert_eq!(ids(&v["data"]), all);
    let m = &v["data"];
    assert_eq!(m[0]["capabilities"]["completion_chat"], true);
    assert_eq!(m[0]["capabilities"]["function_calling"], true);
    assert_eq!(m[0]["capabilities"]["vision"], false);
    assert_eq!(m[2]["capabilities"]["vision"], true);
    assert_eq!(m[3]["capabilities"]["completion_chat"], false);
    assert_eq!(m[0]["max_context_length"], 131072);
    assert_eq!(m[0]["aliases"], json!(["llama-fast-latest"]));
    assert_eq!(m[0]["deprecation"], Value::Null);
    assert_eq!(m[2]["deprecation"], "2027-01-01");

    // Together's: a bare array, with type and pricing.
    let v = list(&base, "/together/v1", Dialect::Openai, "")
        .await
        .json();
    assert_eq!(ids(&v), all);
    assert_eq!(v[0]["type"], "chat");
    assert_eq!(v[3]["type"], "embedding");
    assert_eq!(v[0]["context_length"], 131072);
    assert_eq!(v[0]["pricing"]["input"], 0.0);
    assert!(v[2]["pricing"]["input"].as_f64().unwrap() > 0.0, "{}", v[2]);

    // Groq's: active, the window, the output cap.
    let v = list(&base, "/groq/openai/v1", Dialect::Openai, "")
        .await
        .json();
    assert_eq!(v["object"], "list");
    assert_eq!(ids(&v["data"]), all);
    assert_eq!(v["data"][0]["active"], true);
    assert_eq!(v["data"][0]["context_window"], 131072);
    assert_eq!(v["data"][0]["max_completion_tokens"], 8192);

    // Anthropic's and Gemini's, every page followed.
    let (got, pages) = anthropic_all(&base, 1000).await;
    assert_eq!(got, chat);
    assert_eq!(pages, 2);
    let (got, _) = gemini_all(&base, 1000).await;
    let names: Vec<&str> = got.iter().map(|m| m["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "models/llama-fast",
            "models/meta/llama-free:free",
            "models/vision-pro",
            "models/embed-small"
        ]
    );
    assert_eq!(generators(&got), chat);
    assert_eq!(got[0]["inputTokenLimit"], 131072);
    assert_eq!(got[0]["outputTokenLimit"], 8192);
    assert_eq!(
        got[3]["supportedGenerationMethods"],
        json!(["embedContent", "countTextTokens", "countTokens"])
    );
    fake.shutdown().await;
}

#[tokio::test]
async fn pages_must_be_followed() {
    let dir = tempfile::tempdir().unwrap();
    let five: Vec<String> = (1..=5).map(|i| format!("m{i}")).collect();
    let models: Vec<Value> = five.iter().map(|id| json!({"id": id})).collect();
    let fake = listing(&dir.path().join("models.json"), json!(models)).await;
    let base = fake.url();

    // Anthropic: the first page alone misses models.
    let v = list(&base, "/v1", Dialect::Anthropic, "limit=1000")
        .await
        .json();
    assert_eq!(ids(&v["data"]), ["m1", "m2"]);
    assert_eq!(v["has_more"], true);
    assert_eq!(anthropic_all(&base, 1000).await, (five.clone(), 3));
    assert_eq!(anthropic_all(&base, 1).await, (five.clone(), 5));
    // Without `limit`, pages are as small; `before_id` pages backwards.
    let v = list(&base, "/v1", Dialect::Anthropic, "").await.json();
    assert_eq!(ids(&v["data"]), ["m1", "m2"]);
    let v = list(&base, "/v1", Dialect::Anthropic, "before_id=m4")
        .await
        .json();
    assert_eq!(ids(&v["data"]), ["m2", "m3"]);
    assert_eq!(v["has_more"], true);
    for bad in ["limit=0", "limit=1001", "limit=x", "after_id=nope"] {
        let r = list(&base, "/v1", Dialect::Anthropic, bad).await;
        assert_eq!(r.status, 400, "{bad}: {}", r.text);
        assert_eq!(r.json()["error"]["type"], "invalid_request_error", "{bad}");
    }

    // Gemini: an embedding model first (the file has none), then the five.
    let v = list(&base, "/v1beta", Dialect::Gemini, "pageSize=1000")
        .await
        .json();
    assert_eq!(v["models"].as_array().unwrap().len(), 2, "{v}");
    assert!(v["nextPageToken"].is_string(), "{v}");
    let (got, pages) = gemini_all(&base, 1000).await;
    assert_eq!(pages, 3);
    assert_eq!(got.len(), 6);
    assert_eq!(got[0]["name"], "models/text-embedding-004");
    assert_eq!(generators(&got), five);
    assert_eq!(gemini_all(&base, 1).await.1, 6);
    let r = list(&base, "/v1beta", Dialect::Gemini, "pageToken=bogus").await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert_eq!(r.json()["error"]["status"], "INVALID_ARGUMENT");

    // OpenAI's lists are one page, as the providers send them.
    let v = list(&base, "/v1", Dialect::Openai, "").await.json();
    assert_eq!(ids(&v["data"]), five);
    fake.shutdown().await;
}

#[tokio::test]
async fn a_model_dropped_from_the_file_leaves_every_list() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("models.json");
    let fake = listing(&file, json!([{"id": "a"}, {"id": "b"}, {"id": "c"}])).await;
    let base = fake.url();
    let q = question(21);
    let openai_ids = async || ids(&list(&base, "/v1", Dialect::Openai, "").await.json()["data"]);
    assert_eq!(openai_ids().await, ["a", "b", "c"]);
    assert_eq!(ask(&base, Dialect::Openai, "b", &q.text).await.status, 200);

    // Dropped: gone from the next list, still answering.
    write(&file, json!([{"id": "a"}, {"id": "c"}]));
    assert_eq!(openai_ids().await, ["a", "c"]);
    assert_eq!(anthropic_all(&base, 1000).await.0, ["a", "c"]);
    assert_eq!(generators(&gemini_all(&base, 1000).await.0), ["a", "c"]);
    assert_eq!(ask(&base, Dialect::Openai, "b", &q.text).await.status, 200);

    // Dropped and decommissioned, in one rewrite.
    write(
        &file,
        json!([{"id": "a"}, {"id": "b", "listed": false, "behaviour": "decommissioned"}, {"id": "c"}]),
    );
    assert_eq!(openai_ids().await, ["a", "c"]);
    for d in DIALECTS {
        let r = ask(&base, d, "b", &q.text).await;
        assert_eq!(
            r.status,
            if d == Dialect::Openai { 400 } else { 404 },
            "{d:?}: {}",
            r.text
        );
        let r = ask(&base, d, "a", &q.text).await;
        assert_eq!(r.status, 200, "{d:?}: {}", r.text);
    }
    // Back again.
    write(&file, json!([{"id": "a"}, {"id": "b"}, {"id": "c"}]));
    assert_eq!(openai_ids().await, ["a", "b", "c"]);
    assert_eq!(ask(&base, Dialect::Openai, "b", &q.text).await.status, 200);
    fake.shutdown().await;
}

#[tokio::test]
async fn without_a_file_the_scripted_models_are_listed() {
    let ok = [Behaviour::Ok(Duration::ZERO)];
    let fake = start(FakeConfig::default().script("y", &ok).script("x", &ok))
        .await
        .unwrap();
    let base = fake.url();
    let v = list(&base, "/v1", Dialect::Openai, "").await.json();
    assert_eq!(ids(&v["data"]), ["x", "y"]);
    assert_eq!(anthropic_all(&base, 1000).await.0, ["x", "y"]);
    let (got, _) = gemini_all(&base, 1000).await;
    assert_eq!(generators(&got), ["x", "y"]);
    assert_eq!(got.len(), 3, "and an embedding model: {got:?}");
    // Keyless, Gemini's list is known by its path.
    let keyless = send(client().get(format!("{base}/v1beta/models"))).await;
    assert_eq!(keyless.status, 200, "{}", keyless.text);
    assert!(keyless.json()["models"].is_array(), "{}", keyless.text);
    // Unscripted, nothing is listed (but Gemini's embedding model).
    let empty = start(FakeConfig::default()).await.unwrap();
    let v = list(&empty.url(), "/v1", Dialect::Openai, "").await.json();
    assert_eq!(v["data"], json!([]));
    let v = list(&empty.url(), "/v1", Dialect::Anthropic, "")
        .await
        .json();
    assert_eq!(
        v,
        json!({"data": [], "has_more": false, "first_id": null, "last_id": null})
    );
}

#[tokio::test]
async fn a_models_file_that_cannot_be_read_answers_500_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("models.json");
    let fake = listing(&file, json!([{"id": "a"}])).await;
    let base = fake.url();
    let shown = file.display().to_string();
    let q = question(22);
    for (contents, why) in [
        (None, "cannot read"),
        (Some("[{\"id\": \"a\""), "not a JSON array"),
        (Some("{\"id\": \"a\"}"), "not a JSON array"),
        (
            Some("[{\"id\": \"a\", \"contxt\": 8}]"),
            "unknown field `contxt`",
        ),
        (
            Some("[{\"id\": \"a\", \"behaviour\": \"bogus\"}]"),
            "unknown behaviour",
        ),
        (Some("[{\"id\": \"a\"}, {\"id\": \"a\"}]"), "twice"),
        (Some("[{\"id\": \"\"}]"), "empty id"),
    ] {
        match contents {
            None => std::fs::remove_file(&file).unwrap(),
            Some(text) => std::fs::write(&file, text).unwrap(),
        }
        for d in DIALECTS {
            let prefix = if d == Dialect::Gemini {
                "/v1beta"
            } else {
                "/v1"
            };
            let r = list(&base, prefix, d, "").await;
            assert_eq!(r.status, 500, "{d:?} {why}: {}", r.text);
            let message = error_of(d, &r.json())["message"]
                .as_str()
                .unwrap()
                .to_string();
            assert!(
                message.contains(&shown) && message.contains(why),
                "{d:?}: {message}"
            );
            // The chat endpoints read the file for its behaviours too.
            let r = ask(&base, d, "a", &q.text).await;
            assert_eq!(r.status, 500, "{d:?} {why}: {}", r.text);
            assert!(r.text.contains(why), "{d:?}: {}", r.text);
        }
    }
    fake.shutdown().await;
}

#[tokio::test]
async fn lists_fail_as_scripted() {
    let script = |s: &str| parse_list_script(s).unwrap();
    let cfg = FakeConfig {
        list_scripts: vec![
            script("groq=e500,ok"),
            script("anthropic=unauthorized"),
            script("gemini=html200"),
            script("together=not-found"),
            script("mistral=needs-key"),
        ],
        ..FakeConfig::default().script("m", &[Behaviour::Ok(Duration::ZERO)])
    };
    let fake = start(cfg).await.unwrap();
    let base = fake.url();

    // Cycled: a 500, then the list.
    let r = list(&base, "/groq/openai/v1", Dialect::Openai, "").await;
    assert_eq!(r.status, 500, "{}", r.text);
    assert_eq!(r.json()["error"]["type"], "server_error");
    let r = list(&base, "/groq/openai/v1", Dialect::Openai, "").await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(ids(&r.json()["data"]), ["m"]);
    // Another path is not in the scope.
    assert_eq!(list(&base, "/v1", Dialect::Openai, "").await.status, 200);

    let r = list(&base, "/v1", Dialect::Anthropic, "").await;
    assert_eq!(r.status, 401, "{}", r.text);
    assert_eq!(r.json()["error"]["type"], "authentication_error");

    let r = list(&base, "/v1beta", Dialect::Gemini, "").await;
    assert_eq!(r.status, 200);
    assert!(
        r.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    assert!(
        serde_json::from_str::<Value>(&r.text).is_err(),
        "{}",
        r.text
    );

    let r = list(&base, "/together/v1", Dialect::Openai, "").await;
    assert_eq!(r.status, 404, "{}", r.text);
    assert!(r.text.contains("/together/v1/models"), "{}", r.text);

    // needs-key: 401 without a key, the list with one.
    let keyless = send(client().get(format!("{base}/mistral/v1/models"))).await;
    assert_eq!(keyless.status, 401, "{}", keyless.text);
    assert_eq!(keyless.json()["error"]["code"], "invalid_api_key");
    let r = list(&base, "/mistral/v1", Dialect::Openai, "").await;
    assert_eq!(r.status, 200, "{}", r.text);
    // Elsewhere a keyless list is served, as a keyless chat request is.
    let keyless = send(client().get(format!("{base}/v1/models"))).await;
    assert_eq!(keyless.status, 200, "{}", keyless.text);

    // Unscoped, every list fails; Gemini's bad key is a 400, as Google's is.
    let cfg = FakeConfig {
        list_scripts: vec![script("unauthorized")],
        ..FakeConfig::default()
    };
    let all = start(cfg).await.unwrap();
    for d in DIALECTS {
        let prefix = if d == Dialect::Gemini {
            "/v1beta"
        } else {
            "/v1"
        };
        let r = list(&all.url(), prefix, d, "").await;
        let want = if d == Dialect::Gemini { 400 } else { 401 };
        assert_eq!(r.status, want, "{d:?}: {}", r.text);
        assert!(!r.text.contains(KEY));
    }
    fake.shutdown().await;
    all.shutdown().await;
}

#[tokio::test]
async fn list_requests_are_recorded_without_keys() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, file) = recording(dir.path());
    let cfg = FakeConfig {
        list_scripts: vec![parse_list_script("groq=e503").unwrap()],
        ..cfg
    };
    let fake = start(cfg).await.unwrap();
    let base = fake.url();
    list(&base, "/v1", Dialect::Openai, "").await;
    list(&base, "/v1", Dialect::Anthropic, "limit=5").await;
    send(client().get(format!("{base}/v1beta/models?key={KEY}&pageSize=3"))).await;
    list(&base, "/groq/openai/v1", Dialect::Openai, "").await;
    send(client().get(format!("{base}/v1/models"))).await;

    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains(KEY), "{text}");
    let seen = fake.requests();
    let summary: Vec<_> = seen
        .iter()
        .map(|r| {
            (
                r.method.as_str(),
                r.path.as_str(),
                r.dialect,
                r.model.as_deref(),
                r.behaviour.as_deref(),
                r.auth,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                "GET",
                "/v1/models",
                Some(Dialect::Openai),
                None,
                Some("ok"),
                true
            ),
            (
                "GET",
                "/v1/models",
                Some(Dialect::Anthropic),
                None,
                Some("ok"),
                true
            ),
            (
                "GET",
                "/v1beta/models",
                Some(Dialect::Gemini),
                None,
                Some("ok"),
                true
            ),
            (
                "GET",
                "/groq/openai/v1/models",
                Some(Dialect::Openai),
                None,
                Some("e503"),
                true
            ),
            (
                "GET",
                "/v1/models",
                Some(Dialect::Openai),
                None,
                Some("ok"),
                false
            ),
        ]
    );
    assert!(seen.iter().all(|r| r.body.is_none() && !r.stream));
    fake.shutdown().await;
}

/// What a probe of `model` at `fake` in `d` came back as.
async fn probe_error(fake: &FakeServer, d: Dialect, model: &str) -> classify::UpstreamError {
    let prefix = if d == Dialect::Gemini {
        "/v1beta"
    } else {
        "/v1"
    };
    let provider =
        crate::catalog::test_provider(d.as_str(), &format!("{}{prefix}", fake.url()), Some(KEY));
    let c = crate::probe::exchange(
        &client(),
        &provider,
        &ChatRequest::probe(model, "What is 2 + 2?", 16),
        Duration::from_secs(10),
        &Redactor::default(),
        classify::answers(4),
    )
    .await;
    c.error
        .unwrap_or_else(|| panic!("{d:?} {model}: no error: {:?}", c.outcome))
}

#[tokio::test]
async fn decommissioned_is_each_dialects_gone_model_and_a_hard_failure() {
    let fake = start(FakeConfig::default().script("old-model", &[Behaviour::Decommissioned]))
        .await
        .unwrap();
    let q = question(23);
    for d in DIALECTS {
        let r = ask(&fake.url(), d, "old-model", &q.text).await;
        let v = r.json();
        let e = error_of(d, &v);
        let message = e["message"].as_str().unwrap();
        match d {
            // Groq's words, with the status Groq sends.
            Dialect::Openai => {
                assert_eq!(r.status, 400, "{v}");
                assert_eq!(e["code"], "model_decommissioned");
                assert_eq!(e["type"], "invalid_request_error");
                assert!(
                    message.starts_with(
                        "The model `old-model` has been decommissioned and is no longer supported."
                    ),
                    "{message}"
                );
            }
            Dialect::Anthropic => {
                assert_eq!(r.status, 404, "{v}");
                assert_eq!(e["type"], "not_found_error");
                assert_eq!(message, "model: old-model");
            }
            Dialect::Gemini => {
                assert_eq!(r.status, 404, "{v}");
                assert_eq!(e["status"], "NOT_FOUND");
                assert!(
                    message.starts_with(
                        "models/old-model is not found for API version v1beta, or is not \
                         supported for generateContent"
                    ),
                    "{message}"
                );
            }
        }
        // What `check` and `route` make of it: the model is gone.
        let e = probe_error(&fake, d, "old-model").await;
        assert_eq!(e.class, ErrorClass::ModelNotFound, "{d:?}: {e:?}");
        assert_eq!(e.class.failure_type(), FailureType::Error, "{d:?}");
    }
    fake.shutdown().await;
}
