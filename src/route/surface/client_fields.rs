//! What today's clients send, checked against the surfaces' parsers:
//!
//! - docs/routing.md's table ("What today's clients send"), row by row:
//!   each row's JSON is merged into a minimal request of its surface, and
//!   the fate the row states is what the parser does. A row whose client
//!   sends something other than a body field (a query string, a header)
//!   names the end-to-end test that sends it, which must exist.
//! - the corpus of request bodies captured from the pinned client versions
//!   (`tests/fixtures/clients/`, keys, paths and ids replaced), each read by
//!   its surface's parser with the verdict `expected.json` gives: served
//!   with exactly these fields reported, or refused naming the field. A
//!   parser change that would break a real client fails here, without the
//!   clients installed.

use serde_json::{Value, json};

use super::anthropic::{Purpose, read_messages};
use super::responses;

const DOC: &str = include_str!("../../../docs/routing.md");

/// One row: the surface, what is sent, the fate and route's column.
struct Row {
    surface: String,
    sends: String,
    fate: String,
    route: String,
}

fn rows() -> Vec<Row> {
    let start = DOC
        .find("### What today's clients send")
        .expect("docs/routing.md has the clients' table");
    let section = &DOC[start..];
    let section = &section[..section[4..].find("\n#").map_or(section.len(), |e| e + 4)];
    section
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| client "))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split(" | ").map(|c| c.trim()).collect();
            assert_eq!(cells.len(), 5, "a row of five cells: {l}");
            let unquote = |c: &str| c.trim_matches('`').to_string();
            Row {
                surface: cells[1].to_string(),
                sends: unquote(cells[2]),
                fate: cells[3].to_string(),
                route: cells[4].to_string(),
            }
        })
        .collect()
}

/// `base` with `more`'s fields set over it.
fn merged(mut base: Value, more: &Value) -> Value {
    for (k, v) in more.as_object().expect("a row's JSON is an object") {
        base[k] = v.clone();
    }
    base
}

/// What the surface's parser did with a request: `Ok(dropped)` or the
/// 400's message.
fn parse(surface: &str, body: &Value) -> Result<Vec<String>, String> {
    parse_bytes(surface, body.to_string().as_bytes()).map_err(|e| e.message)
}

fn parse_bytes(surface: &str, bytes: &[u8]) -> Result<Vec<String>, super::error::ApiError> {
    match surface {
        "Messages" => read_messages(bytes, Purpose::Create).map(|m| m.dropped),
        "Responses" => {
            // Route holds every item and response a row names, unless its
            // id says it is unknown: what a client that got them from
            // route a moment before sends.
            let req = responses::Request::read(bytes)?;
            let said = |text: &str| {
                json!({"type": "message", "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": text, "annotations": []}]})
            };
            let held = responses::Held {
                secs: 3600,
                items: req
                    .references()
                    .iter()
                    .filter(|id| !id.contains("unknown"))
                    .map(|id| (id.clone(), said("4")))
                    .collect(),
                history: req
                    .previous_response_id()
                    .filter(|id| !id.contains("unknown"))
                    .map(|_| {
                        vec![
                            json!({"role": "user", "content": "What is 1+1?"}),
                            said("2"),
                        ]
                    }),
                unavailable: false,
            };
            req.translate(&held).map(|p| p.dropped)
        }
        other => panic!("no parser for the surface {other:?}"),
    }
}

fn base(surface: &str) -> Value {
    match surface {
        "Messages" => json!({
            "model": "auto",
            "max_tokens": 64,
            "messages": [{"role": "user", "content": "What is 2+2?"}],
        }),
        "Responses" => json!({"model": "auto", "input": "What is 2+2?"}),
        other => panic!("no base request for the surface {other:?}"),
    }
}

#[test]
fn every_row_of_the_clients_table_is_what_the_parsers_do() {
    let rows = rows();
    assert!(rows.len() >= 10, "{} rows", rows.len());
    for row in rows {
        let what = format!("{} row {:?}", row.surface, row.sends);
        if !row.sends.starts_with('{') {
            // Not a body field: the row names the end-to-end test.
            let test = row
                .route
                .split('`')
                .find(|t| t.contains("::"))
                .unwrap_or_else(|| panic!("{what} names no test"));
            let (file, name) = test.split_once("::").unwrap();
            let path = format!("{}/tests/{file}.rs", env!("CARGO_MANIFEST_DIR"));
            let source = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            assert!(
                source.contains(&format!("fn {name}()")),
                "{what}: no {test}"
            );
            continue;
        }
        let sent: Value =
            serde_json::from_str(&row.sends).unwrap_or_else(|e| panic!("{what}: not JSON: {e}"));
        let result = parse(&row.surface, &merged(base(&row.surface), &sent));
        // The names route's column gives in backticks.
        let named: Vec<String> = row
            .route
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect();
        match row.fate.as_str() {
            "translated" | "harmless" => {
                let dropped = result.unwrap_or_else(|e| panic!("{what}: refused: {e}"));
                assert!(dropped.is_empty(), "{what}: reported {dropped:?}");
            }
            "reported" => {
                let dropped = result.unwrap_or_else(|e| panic!("{what}: refused: {e}"));
                let first = named
                    .first()
                    .unwrap_or_else(|| panic!("{what}: names nothing"));
                assert_eq!(dropped, [first.as_str()], "{what}");
            }
            "refused" => {
                let message = result.expect_err(&what);
                let field = sent.as_object().unwrap().keys().next().unwrap();
                // Anthropic's 400s start with the path; OpenAI's quote it
                // (`Invalid 'input[0].id': …`).
                assert!(
                    message.starts_with(field.as_str())
                        || named.iter().any(|n| {
                            message.starts_with(n.as_str()) || message.contains(&format!("'{n}'"))
                        }),
                    "{what}: {message}"
                );
            }
            other => panic!("{what}: unknown fate {other:?}"),
        }
    }
}

#[test]
fn every_captured_client_request_gets_its_verdict() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/clients");
    let expected: serde_json::Map<String, Value> = serde_json::from_str(
        &std::fs::read_to_string(dir.join("expected.json")).expect("expected.json"),
    )
    .expect("expected.json is a JSON object");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".json") && n != "expected.json")
        .collect();
    files.sort();
    assert!(files.len() >= 10, "{files:?}");
    for name in &files {
        let want = expected
            .get(name)
            .unwrap_or_else(|| panic!("{name}: no verdict in expected.json"));
        let surface = want["surface"].as_str().unwrap();
        let body = std::fs::read(dir.join(name)).unwrap();
        match parse_bytes(surface, &body) {
            Ok(dropped) => {
                assert!(
                    want.get("refused").is_none(),
                    "{name}: served, reporting {dropped:?}"
                );
                assert_eq!(
                    serde_json::to_value(&dropped).unwrap(),
                    want["dropped"],
                    "{name}"
                );
            }
            Err(e) => {
                let field = want["refused"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{name}: refused: {}", e.message));
                assert!(e.message.starts_with(field), "{name}: {}", e.message);
                assert_eq!(e.error_code, want["error_code"].as_str(), "{name}");
            }
        }
    }
    for name in expected.keys() {
        assert!(
            files.contains(name),
            "expected.json names {name}, which is not there"
        );
    }
}
