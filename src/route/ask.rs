//! What the router needs to know of one request before it picks a
//! candidate, in no surface's shape: the model asked for, what the request
//! needs from its model ([`Needs`]), how long the prompt is and how much
//! answer it allows (for context windows, output caps and token limits),
//! and which conversation it continues (for affinity, docs/routing.md).

use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::Value;

use crate::upstream::dialect::{ChatRequest, DEFAULT_ESTIMATED_COMPLETION_TOKENS, Need, Needs};

/// One request, as the router sees it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Ask {
    /// As the client named it; `None` (or `auto`) for any model.
    pub model: Option<String>,
    pub needs: Needs,
    /// A need in a form only OpenAI-dialect upstreams carry (legacy
    /// `functions`, built-in tools): [`ChatRequest::openai_only`].
    pub openai_only: Option<Need>,
    /// The prompt's estimated tokens (text only; see
    /// [`ChatRequest::estimated_tokens`]), checked against context windows.
    pub prompt_tokens: u64,
    /// The client's `max_tokens`, if it set one.
    pub max_tokens: Option<u32>,
    /// Its JSON need is a `json_schema` (not only `json_object`): what the
    /// json probe tests.
    pub json_schema: bool,
    /// Which conversation this turn belongs to, if it can be told.
    pub conversation: Option<String>,
}

impl Ask {
    /// The router's view of `req`, asking for `model`. The conversation is
    /// the body's Anthropic-style `metadata.user_id` when given, else a
    /// hash of the system prompt and the first user message.
    pub fn new(model: Option<&str>, req: &ChatRequest) -> Ask {
        let answer = req
            .max_tokens
            .map_or(DEFAULT_ESTIMATED_COMPLETION_TOKENS, u64::from);
        let from_body = req
            .extra
            .get("metadata")
            .and_then(|m| m.get("user_id"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(|s| match session_in_user_id(s) {
                Some(session) => format!("session:{session}"),
                None => format!("user:{s}"),
            });
        Ask {
            model: model.map(str::to_string),
            needs: req.needs(),
            openai_only: req.openai_only(),
            // The estimate without its answer part, so both agree on the
            // prompt's length.
            prompt_tokens: req.estimated_tokens().saturating_sub(answer),
            max_tokens: req.max_tokens,
            json_schema: req.json_format() == Some("json_schema"),
            conversation: from_body.or_else(|| opening_hash(req)),
        }
    }

    /// The conversation a client's session header names wins over one
    /// worked out from the body.
    pub fn with_session(mut self, session: Option<&str>) -> Ask {
        if let Some(s) = session.map(str::trim).filter(|s| !s.is_empty()) {
            self.conversation = Some(format!("session:{s}"));
        }
        self
    }
}

/// The session headers a client may name its conversation with, first
/// found wins: route's own, Claude Code's (`X-Claude-Code-Session-Id`) and
/// Codex CLI's (`session-id`).
pub const SESSION_HEADERS: &[&str] = &[
    "x-session-id",
    "x-llmprobe-session",
    "x-claude-code-session-id",
    "session-id",
];

/// The session a `metadata.user_id` names when it is a JSON object with a
/// `session_id`, as Claude Code writes it
/// (`{"device_id":…,"account_uuid":…,"session_id":…}`): the same device runs
/// many conversations, so the session, not the whole string, is the
/// conversation.
fn session_in_user_id(user_id: &str) -> Option<String> {
    if !user_id.starts_with('{') {
        return None;
    }
    let v: Value = serde_json::from_str(user_id).ok()?;
    v.get("session_id")?
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// A hash of the system prompt and the first user message: every turn of
/// one conversation starts the same way. `None` without a user message.
fn opening_hash(req: &ChatRequest) -> Option<String> {
    let first_user = req.messages.iter().find(|m| m.role == "user")?;
    let mut h = DefaultHasher::new();
    req.system.hash(&mut h);
    for m in req
        .messages
        .iter()
        .filter(|m| matches!(m.role.as_str(), "system" | "developer"))
        .take(1)
    {
        m.content.as_ref().map(|c| c.text()).hash(&mut h);
    }
    first_user.content.as_ref().map(|c| c.text()).hash(&mut h);
    Some(format!("opening:{:016x}", h.finish()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(body: &str) -> Ask {
        Ask::new(
            None,
            &ChatRequest::from_openai_json(body.as_bytes()).unwrap(),
        )
    }

    #[test]
    fn a_conversation_is_its_session_its_user_or_its_opening() {
        let turn1 =
            ask(r#"{"messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}]}"#);
        let turn2 = ask(
            r#"{"messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"},{"role":"assistant","content":"yo"},{"role":"user","content":"more"}]}"#,
        );
        let other =
            ask(r#"{"messages":[{"role":"system","content":"t"},{"role":"user","content":"hi"}]}"#);
        assert!(turn1.conversation.is_some());
        assert_eq!(turn1.conversation, turn2.conversation);
        assert_ne!(turn1.conversation, other.conversation);
        let user =
            ask(r#"{"messages":[{"role":"user","content":"hi"}],"metadata":{"user_id":"u1"}}"#);
        assert_eq!(user.conversation.as_deref(), Some("user:u1"));
        // Claude Code's user_id: a JSON object whose session is the
        // conversation, matching its X-Claude-Code-Session-Id header.
        let cc = ask(
            r#"{"messages":[{"role":"user","content":"hi"}],"metadata":{"user_id":"{\"device_id\":\"d\",\"account_uuid\":\"\",\"session_id\":\"s-1\"}"}}"#,
        );
        assert_eq!(cc.conversation.as_deref(), Some("session:s-1"));
        let s = user.with_session(Some("abc"));
        assert_eq!(s.conversation.as_deref(), Some("session:abc"));
    }

    #[test]
    fn the_prompt_estimate_leaves_the_answer_out() {
        let a = ask(
            r#"{"messages":[{"role":"user","content":"12345678"}],"max_tokens":100,"tools":[{"type":"function","function":{"name":"f"}}]}"#,
        );
        let bare = ask(r#"{"messages":[{"role":"user","content":"12345678"}],"max_tokens":100}"#);
        assert_eq!((bare.prompt_tokens, bare.max_tokens), (2, Some(100)));
        // The tool's declaration counts as prompt, not the answer.
        assert!(a.prompt_tokens > 2 && a.prompt_tokens < 100, "{a:?}");
        assert_eq!(a.needs.len(), 1);
        assert_eq!(
            ask(r#"{"messages":[{"role":"user","content":"1234"}]}"#).prompt_tokens,
            1
        );
    }
}
