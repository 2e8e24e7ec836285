//! What the fake provider does with one request, and the `--script` syntax
//! that sequences it per model.
//!
//! Every failure a real provider has shown us (docs/providers.md) has a name here,
//! so that a test or a demo catalog can ask for it by model id.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::error::{Error, Result};

/// How long `slow` sleeps without an explicit duration: longer than any probe
/// timeout a test would use.
pub const SLOW_DEFAULT: Duration = Duration::from_secs(60);

/// The cap of `max-tokens` and the window of `context-window` without an
/// explicit N: 8192 tokens, a common small model's.
pub const CAP_DEFAULT: u64 = 8192;

/// The size of `huge` without an explicit N, in MiB.
pub const HUGE_DEFAULT_MIB: u64 = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// The correct answer, after an optional extra delay.
    Ok(Duration),
    /// A wrong number.
    Wrong,
    /// A `<think>` block with other numbers, then the correct answer.
    Think,
    /// 429 with a 7 s wait in the dialect's usual place.
    RateLimit,
    /// `rate-limit`, with a `Retry-After: N` header (seconds), which every
    /// reader takes before any other hint: a wait long enough to outlast
    /// a re-probe slot.
    RetryAfter(u64),
    E500,
    /// 529 `overloaded_error`.
    Overloaded,
    E503,
    /// 401 (Gemini: 400 `API_KEY_INVALID`).
    Unauthorized,
    Forbidden,
    NotFound,
    /// The model is gone, in the dialect's words: OpenAI's (Groq's) 400
    /// `model_decommissioned`, Anthropic's 404 `not_found_error`, Gemini's
    /// 404 "is not found for API version v1beta".
    Decommissioned,
    /// 400: the prompt is longer than the model's context, as each
    /// provider words it. The client's own fault: `route` returns it.
    ContextLength,
    /// 401 whose message contains the API key received, for redaction tests.
    EchoKey,
    /// 200 carrying an OpenRouter-style error body.
    ErrorIn200,
    /// 200 with no choices / candidates / content blocks.
    EmptyChoices,
    /// The correct answer after a long sleep.
    Slow(Duration),
    /// 200 with a body that is not JSON.
    Garbage,
    /// 502 with an HTML page, as a proxy in front of a provider sends.
    Html,
    /// 200 with an HTML page (a captive portal, a misconfigured base URL).
    Html200,
    /// 200 with a valid answer padded to about N MiB (8 unless given).
    Huge(u64),
    /// N percent of requests get a 429, 500 or 503, the rest `ok`; which
    /// ones is drawn from a fixed seed and the fake's request count, so a
    /// run is repeatable.
    Flaky(u64),
    /// `ok`, but 30 percent of requests (drawn as `flaky`'s) wait N ms
    /// first.
    Spike(u64),
    /// 200 and its headers, then no body byte until the server shuts down.
    HangHeaders,
    /// 200 with a valid answer sent one byte a second.
    Drip,
    /// 200 whose JSON body holds bytes that are not UTF-8 in the answer.
    BadUtf8,
    /// Streamed: the whole answer, then the stream ends cleanly without its
    /// last event (`[DONE]`, `message_stop`, Gemini's final chunk).
    /// Not streamed: like `ok`.
    NoDone,
    /// As `no-done`, but the connection then stays open, silent, until the
    /// server shuts down.
    NoDoneHang,
    /// The connection drops in the middle of the response body.
    Reset,
    /// Reasoning cut off by the token limit: `<think>Let me compute`.
    Truncated,
    /// Streamed: the first content chunk, then the connection closes
    /// without the stream's end. Not streamed: like `ok`.
    StreamCut,
    /// Streamed: the first content chunk, then an error inside the stream
    /// (after HTTP 200). Not streamed: like `ok`.
    StreamError,
    /// Streamed: the first content chunk, then nothing until the server
    /// shuts down. Not streamed: like `ok`.
    StreamStall,
    /// Streamed: a 400 that says streaming is not supported, in the
    /// dialect's shape. Not streamed: like `ok`.
    NoStream,
    /// The correct answer, with OpenAI-style headers announcing a limit of
    /// N requests a minute (`x-ratelimit-limit-requests: N`, one fewer
    /// remaining, reset in `1m0s`), for learning limits from headers.
    RpmHeaders(u64),
    /// 400 to a request that declares tools, as a model without tool
    /// calling answers (Groq's wording in the OpenAI dialect); any other
    /// request: like `ok`.
    NoTools,
    /// As `no-tools`, in Ollama's OpenAI-compatible wording
    /// (`registry.ollama.ai/library/M does not support tools`).
    OllamaNoTools,
    /// 400 to a request for JSON output (OpenAI `response_format`, Gemini
    /// `responseMimeType`); Anthropic has no JSON mode to refuse.
    NoJson,
    /// 400 to a request that holds an image.
    NoImages,
    /// 400 to a request whose output cap (`max_tokens`,
    /// `max_completion_tokens`, `maxOutputTokens`) is above N.
    MaxTokens(u64),
    /// 400 to a prompt longer than N tokens, estimated as `route` does
    /// (characters / 4), with the numbers in the message.
    ContextWindow(u64),
    /// Groq's 400 `context_length_exceeded` ("Please reduce the length of
    /// the messages or completion."), which states no window, in
    /// OpenAI's shape whatever the dialect (Groq speaks only OpenAI's).
    GroqContextLength,
    /// Groq's 413 "Request too large … on tokens per minute (TPM): Limit
    /// 6000", a per-key size limit and not a context window, in OpenAI's
    /// shape whatever the dialect.
    GroqTpm,
    /// Offered tools, answers in text instead of calling one; any other
    /// request: like `ok`.
    TextNotCall,
    /// Offered tools, calls the right one with its first number one too
    /// high; any other request: like `ok`.
    WrongArgs,
    /// Offered tools, calls one the request did not offer
    /// ([`INVENTED_TOOL`]); any other request: like `ok`.
    InventedTool,
    /// Asked for JSON, answers with a sentence that is not JSON; any other
    /// request: like `ok`.
    BadJson,
    /// Asked for JSON, answers JSON of the right shape with the answer one
    /// too high; any other request: like `ok`.
    JsonWrong,
    /// Shown an image it can read, answers its number one too high; any
    /// other request: like `ok`.
    Misread,
    /// A coding agent's model, for real agents (Claude Code, Codex CLI)
    /// and SDK agent loops: calls a declared tool only when the last user
    /// turn says `[[call NAME {json args}]]`, with exactly those arguments
    /// and ids unique within the conversation (`fake_1`, `fake_2`, …);
    /// answers a tool result by quoting it, and anything else in text
    /// like `ok`.
    Agent,
}

/// The function `invented-tool` calls.
pub const INVENTED_TOOL: &str = "calculate";

/// Names accepted by [`Behaviour::from_str`], for error messages and help.
pub const NAMES: &str = "ok, ok:MS, wrong, think, rate-limit, retry-after:N, e500, overloaded, e503, \
unauthorized, forbidden, not-found, decommissioned, context-length, echo-key, error-in-200, empty-choices, slow, slow:MS, \
garbage, html, html200, huge, huge:N, hang-headers, drip, bad-utf8, flaky:N, spike:MS, reset, truncated, stream-cut, stream-error, stream-stall, no-stream, no-done, no-done-hang, rpm-headers:N, \
no-tools, ollama-no-tools, no-json, no-images, max-tokens, max-tokens:N, context-window, context-window:N, \
groq-context-length, groq-tpm, text-not-call, wrong-args, invented-tool, bad-json, json-wrong, misread, agent";

/// What the refusing behaviours refuse, for help text.
pub const REFUSING: &str = "no-tools, ollama-no-tools, no-json, no-images, max-tokens[:N] and context-window[:N] answer 400 in the dialect's shape, with a real provider's wording, only to a request that declares tools, asks for JSON output, holds an image, asks for more than N output tokens, or has a prompt over N tokens (characters / 4; N is 8192 unless given); any other request they answer like ok. Every answering behaviour but agent calls a tool when the request declares tools (the first, or the one tool_choice names; arguments made from its schema, numeric ones taking the question's numbers in order), answers a tool result with \"The result is …\", and answers a request for JSON output with JSON; it reads a PNG image drawn by llmprobe's vision probe and answers its number. Failing the capability probes honestly: text-not-call answers in text where tools are offered, wrong-args calls the tool with its first number one too high, invented-tool calls a tool nobody offered (calculate), bad-json answers a JSON request with a sentence, json-wrong with JSON holding a number one too high, misread reads an image's number one too high; each answers any other request like ok. groq-context-length and groq-tpm answer Groq's 400 context_length_exceeded and 413 \"Request too large … tokens per minute (TPM): Limit 6000\", in OpenAI's shape.";

/// How behaviours meet a streamed request (`"stream": true`, Gemini's
/// `:streamGenerateContent`), for help text.
pub const STREAMING: &str = "A streamed request gets its answer as the dialect's stream (OpenAI chunks, Anthropic events, Gemini SSE or, without alt=sse, a JSON array) for ok, slow, wrong, think, truncated, empty-choices and rpm-headers; every other behaviour answers as it does unstreamed, as real providers do before the first byte. stream-cut, stream-error and stream-stall break a stream after its first content chunk (connection closed, an in-stream error, silence until shutdown) and answer an unstreamed request like ok (`check` streams its probes, so it records them as failures: stream-stall and stream-cut as stalled, stream-error as the upstream's error). no-stream refuses a streamed request with a 400 saying streaming is not supported (param stream) and answers an unstreamed one like ok. no-done sends the whole stream but its last event ([DONE], message_stop, Gemini's final chunk) and ends cleanly; no-done-hang does the same and then stays silent until shutdown; unstreamed, both answer like ok.";

/// The faults a transport can show, for help text.
pub const FAULTS: &str = "Transport faults, for testing that every probe and routed request ends within its timeout: hang-headers sends 200 and its headers, then nothing until shutdown; drip sends a valid answer one byte a second; reset announces a body and closes the connection halfway through it; bad-utf8 sends a 200 JSON answer with bytes that are not UTF-8; huge[:N] pads a valid answer to N MiB (8 unless given), streamed from the fake without building it whole; flaky:N answers N percent of requests with a 429, 500 or 503 and the rest like ok; spike:MS answers like ok, 30 percent of requests after an extra MS milliseconds. flaky and spike draw from a fixed seed and the fake's request count, so a run repeats.";

/// What `agent` does, for help text.
pub const AGENT: &str = "agent is a coding agent's model, for running Claude Code, Codex CLI or an SDK agent loop against route: it calls a tool only when the last user turn (not a tool result) holds a directive [[call NAME {json args}]] naming a declared tool, and then calls NAME with exactly those args (ids fake_1, fake_2, … counted through the conversation); it answers a tool result with \"The result is …\", a request for JSON output with JSON, and anything else in text like ok, never calling a tool of its own accord. Every answering behaviour reads the question without the context agents wrap around it (<system-reminder>…</system-reminder>, <environment_context>…</environment_context>).";

/// What every dialect refuses in a conversation's shape, for help text.
pub const MALFORMED: &str = "Whatever the behaviour, a conversation the real provider refuses for its shape gets that provider's 400: Anthropic a tool_result with no tool_use in the message before it, tool_use blocks without their tool_result blocks in the next message, a role other than user or assistant (system only with the anthropic-beta mid-conversation-system-2026-04-07), empty text blocks and empty messages; OpenAI a tool message that answers no earlier tool_calls, and tool_calls left without tool messages; Gemini a functionResponse turn not right after a model turn with a functionCall, and a role other than user or model.";

/// The behaviours that say a model is gone, for help text.
pub const GONE: &str = "not-found and decommissioned say the model does not exist: not-found with OpenAI's 404 model_not_found, Anthropic's 404 not_found_error \"model: M\" and Gemini's 404 \"models/M is not found for API version v1beta, or is not supported for generateContent.\"; decommissioned with the words a retired model gets: in OpenAI's dialect Groq's 400 model_decommissioned (\"The model `M` has been decommissioned and is no longer supported. …\"; Groq answers it with 400, not 404), in Anthropic's and Gemini's the same 404 as not-found. With --models-file, an entry's \"behaviour\" overrides --script and \"listed\": false keeps it out of the lists, so one rewrite of the file drops a model and makes it answer decommissioned.";

/// The long help of `fake-provider --script`.
pub fn script_help() -> String {
    format!(
        "Script a model's behaviour: MODEL=B1,B2,… cycled per request (repeatable). \
         An unscripted model whose id is a behaviour name behaves so.\n\n\
         Behaviours: {NAMES}.\n\n{GONE}\n\n{STREAMING}\n\n{FAULTS}\n\n{REFUSING}\n\n\
         {AGENT}\n\n{MALFORMED}"
    )
}

impl FromStr for Behaviour {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Behaviour, String> {
        let (name, n) = match s.split_once(':') {
            Some((name, n)) => {
                let n: u64 = n
                    .parse()
                    .map_err(|_| format!("{s:?}: {n:?} is not a whole number"))?;
                (name, Some(n))
            }
            None => (s, None),
        };
        let ms = n.map(Duration::from_millis);
        let b = match name {
            "ok" => Behaviour::Ok(ms.unwrap_or_default()),
            "slow" => Behaviour::Slow(ms.unwrap_or(SLOW_DEFAULT)),
            "max-tokens" => Behaviour::MaxTokens(n.unwrap_or(CAP_DEFAULT)),
            "context-window" => Behaviour::ContextWindow(n.unwrap_or(CAP_DEFAULT)),
            "retry-after" => match n {
                Some(n) => Behaviour::RetryAfter(n),
                None => return Err(format!("{s:?}: retry-after takes seconds: retry-after:N")),
            },
            "huge" => Behaviour::Huge(n.unwrap_or(HUGE_DEFAULT_MIB)),
            "flaky" => match n {
                Some(n) if n <= 100 => Behaviour::Flaky(n),
                _ => {
                    return Err(format!(
                        "{s:?}: flaky takes a percentage: flaky:0 to flaky:100"
                    ));
                }
            },
            "spike" => match n {
                Some(n) => Behaviour::Spike(n),
                None => return Err(format!("{s:?}: spike takes milliseconds: spike:MS")),
            },
            "rpm-headers" => match n {
                Some(n) if n > 0 => Behaviour::RpmHeaders(n),
                _ => return Err(format!("{s:?}: rpm-headers takes a limit: rpm-headers:N")),
            },
            _ if ms.is_some() => {
                return Err(format!(
                    "{s:?}: only ok and slow take a duration (ok:MS, slow:MS), \
                     max-tokens and context-window a token count, retry-after seconds, \
                     huge MiB"
                ));
            }
            "wrong" => Behaviour::Wrong,
            "think" => Behaviour::Think,
            "rate-limit" => Behaviour::RateLimit,
            "e500" => Behaviour::E500,
            "overloaded" => Behaviour::Overloaded,
            "e503" => Behaviour::E503,
            "unauthorized" => Behaviour::Unauthorized,
            "forbidden" => Behaviour::Forbidden,
            "not-found" => Behaviour::NotFound,
            "decommissioned" => Behaviour::Decommissioned,
            "context-length" => Behaviour::ContextLength,
            "echo-key" => Behaviour::EchoKey,
            "error-in-200" => Behaviour::ErrorIn200,
            "empty-choices" => Behaviour::EmptyChoices,
            "garbage" => Behaviour::Garbage,
            "html" => Behaviour::Html,
            "html200" => Behaviour::Html200,
            "hang-headers" => Behaviour::HangHeaders,
            "drip" => Behaviour::Drip,
            "bad-utf8" => Behaviour::BadUtf8,
            "no-done" => Behaviour::NoDone,
            "no-done-hang" => Behaviour::NoDoneHang,
            "reset" => Behaviour::Reset,
            "truncated" => Behaviour::Truncated,
            "stream-cut" => Behaviour::StreamCut,
            "stream-error" => Behaviour::StreamError,
            "stream-stall" => Behaviour::StreamStall,
            "no-stream" => Behaviour::NoStream,
            "no-tools" => Behaviour::NoTools,
            "ollama-no-tools" => Behaviour::OllamaNoTools,
            "no-json" => Behaviour::NoJson,
            "no-images" => Behaviour::NoImages,
            "groq-context-length" => Behaviour::GroqContextLength,
            "groq-tpm" => Behaviour::GroqTpm,
            "text-not-call" => Behaviour::TextNotCall,
            "wrong-args" => Behaviour::WrongArgs,
            "invented-tool" => Behaviour::InventedTool,
            "bad-json" => Behaviour::BadJson,
            "json-wrong" => Behaviour::JsonWrong,
            "misread" => Behaviour::Misread,
            "agent" => Behaviour::Agent,
            _ => return Err(format!("unknown behaviour {s:?} (known: {NAMES})")),
        };
        Ok(b)
    }
}

impl fmt::Display for Behaviour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Behaviour::Ok(d) if d.is_zero() => "ok",
            Behaviour::Ok(d) => return write!(f, "ok:{}", d.as_millis()),
            Behaviour::Slow(d) if *d == SLOW_DEFAULT => "slow",
            Behaviour::Slow(d) => return write!(f, "slow:{}", d.as_millis()),
            Behaviour::RpmHeaders(n) => return write!(f, "rpm-headers:{n}"),
            Behaviour::RetryAfter(n) => return write!(f, "retry-after:{n}"),
            Behaviour::MaxTokens(n) if *n == CAP_DEFAULT => "max-tokens",
            Behaviour::MaxTokens(n) => return write!(f, "max-tokens:{n}"),
            Behaviour::ContextWindow(n) if *n == CAP_DEFAULT => "context-window",
            Behaviour::ContextWindow(n) => return write!(f, "context-window:{n}"),
            Behaviour::NoTools => "no-tools",
            Behaviour::OllamaNoTools => "ollama-no-tools",
            Behaviour::NoJson => "no-json",
            Behaviour::NoImages => "no-images",
            Behaviour::GroqContextLength => "groq-context-length",
            Behaviour::GroqTpm => "groq-tpm",
            Behaviour::TextNotCall => "text-not-call",
            Behaviour::WrongArgs => "wrong-args",
            Behaviour::InventedTool => "invented-tool",
            Behaviour::BadJson => "bad-json",
            Behaviour::JsonWrong => "json-wrong",
            Behaviour::Misread => "misread",
            Behaviour::Agent => "agent",
            Behaviour::Wrong => "wrong",
            Behaviour::Think => "think",
            Behaviour::RateLimit => "rate-limit",
            Behaviour::E500 => "e500",
            Behaviour::Overloaded => "overloaded",
            Behaviour::E503 => "e503",
            Behaviour::Unauthorized => "unauthorized",
            Behaviour::Forbidden => "forbidden",
            Behaviour::NotFound => "not-found",
            Behaviour::Decommissioned => "decommissioned",
            Behaviour::ContextLength => "context-length",
            Behaviour::EchoKey => "echo-key",
            Behaviour::ErrorIn200 => "error-in-200",
            Behaviour::EmptyChoices => "empty-choices",
            Behaviour::Garbage => "garbage",
            Behaviour::Html => "html",
            Behaviour::Html200 => "html200",
            Behaviour::Huge(n) if *n == HUGE_DEFAULT_MIB => "huge",
            Behaviour::Huge(n) => return write!(f, "huge:{n}"),
            Behaviour::Flaky(n) => return write!(f, "flaky:{n}"),
            Behaviour::Spike(n) => return write!(f, "spike:{n}"),
            Behaviour::HangHeaders => "hang-headers",
            Behaviour::Drip => "drip",
            Behaviour::BadUtf8 => "bad-utf8",
            Behaviour::NoDone => "no-done",
            Behaviour::NoDoneHang => "no-done-hang",
            Behaviour::Reset => "reset",
            Behaviour::Truncated => "truncated",
            Behaviour::StreamCut => "stream-cut",
            Behaviour::StreamError => "stream-error",
            Behaviour::StreamStall => "stream-stall",
            Behaviour::NoStream => "no-stream",
        };
        f.write_str(name)
    }
}

/// The share of `spike` requests that wait, in percent.
pub const SPIKE_PERCENT: u64 = 30;

impl Behaviour {
    /// What a `flaky` or `spike` does with the request whose draw is
    /// `roll` (uniform over u64); any other behaviour is itself.
    pub fn resolve(self, roll: u64) -> Behaviour {
        let pct = roll % 100;
        match self {
            Behaviour::Flaky(p) if pct < p => {
                [Behaviour::RateLimit, Behaviour::E500, Behaviour::E503][(roll / 100 % 3) as usize]
            }
            Behaviour::Flaky(_) => Behaviour::Ok(Duration::ZERO),
            Behaviour::Spike(ms) if pct < SPIKE_PERCENT => Behaviour::Ok(Duration::from_millis(ms)),
            Behaviour::Spike(_) => Behaviour::Ok(Duration::ZERO),
            b => b,
        }
    }

    /// The behaviour of an unscripted model: its id read as a behaviour, so a
    /// catalog can list models named `ok`, `e500`, …; any other id is `ok`.
    pub fn for_model(model: &str) -> Behaviour {
        model.parse().unwrap_or(Behaviour::Ok(Duration::ZERO))
    }
}

/// One `--script MODEL=B1,B2,…` value.
pub fn parse_script(value: &str) -> Result<(String, Vec<Behaviour>)> {
    let bad = |m: String| Error::config(format!("--script {value:?}: {m}"));
    // Model ids may hold ':' and '/', behaviours never hold '='.
    let (model, list) = value
        .rsplit_once('=')
        .ok_or_else(|| bad("expected MODEL=BEHAVIOUR[,BEHAVIOUR…]".into()))?;
    let model = model.trim();
    if model.is_empty() {
        return Err(bad("the model id is empty".into()));
    }
    let behaviours = list
        .split(',')
        .map(|b| b.trim().parse::<Behaviour>().map_err(&bad))
        .collect::<Result<Vec<_>>>()?;
    Ok((model.to_string(), behaviours))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flaky_and_spike_resolve_by_their_draw() {
        let ok = Behaviour::Ok(Duration::ZERO);
        let flaky = Behaviour::Flaky(30);
        assert_eq!(flaky.resolve(29), Behaviour::RateLimit);
        assert_eq!(flaky.resolve(129), Behaviour::E500);
        assert_eq!(flaky.resolve(229), Behaviour::E503);
        assert_eq!(flaky.resolve(30), ok);
        assert_eq!(Behaviour::Flaky(0).resolve(0), ok);
        assert_eq!(Behaviour::Flaky(100).resolve(99), Behaviour::RateLimit);
        let spike = Behaviour::Spike(1500);
        assert_eq!(spike.resolve(0), Behaviour::Ok(Duration::from_millis(1500)));
        assert_eq!(spike.resolve(SPIKE_PERCENT), ok);
        assert_eq!(Behaviour::Wrong.resolve(0), Behaviour::Wrong);
        assert!("flaky:101".parse::<Behaviour>().is_err());
        assert!("flaky".parse::<Behaviour>().is_err());
        assert!("spike".parse::<Behaviour>().is_err());
    }

    #[test]
    fn every_name_round_trips() {
        for name in NAMES.split(", ") {
            let name = name.replace("MS", "250").replace(":N", ":30");
            let b: Behaviour = name.parse().unwrap();
            assert_eq!(b.to_string(), name);
        }
        assert_eq!(
            "slow".parse::<Behaviour>(),
            Ok(Behaviour::Slow(SLOW_DEFAULT))
        );
        assert_eq!(
            "max-tokens".parse::<Behaviour>(),
            Ok(Behaviour::MaxTokens(8192))
        );
        assert_eq!(
            "context-window:100".parse::<Behaviour>(),
            Ok(Behaviour::ContextWindow(100))
        );
        assert!(script_help().contains("ollama-no-tools"));
        assert_eq!(
            "ok:0".parse::<Behaviour>(),
            Ok(Behaviour::Ok(Duration::ZERO))
        );
    }

    #[test]
    fn unknown_models_are_ok() {
        assert_eq!(Behaviour::for_model("e500"), Behaviour::E500);
        assert_eq!(
            Behaviour::for_model("llama-3.1-8b-instant"),
            Behaviour::Ok(Duration::ZERO)
        );
        assert_eq!(
            Behaviour::for_model("qwen/qwen3:free"),
            Behaviour::Ok(Duration::ZERO)
        );
    }

    #[test]
    fn scripts_parse() {
        let (m, b) = parse_script("gpt-4o=ok,e500, slow:20").unwrap();
        assert_eq!(m, "gpt-4o");
        assert_eq!(
            b,
            vec![
                Behaviour::Ok(Duration::ZERO),
                Behaviour::E500,
                Behaviour::Slow(Duration::from_millis(20))
            ]
        );
        let (m, _) = parse_script("meta/llama:free=ok").unwrap();
        assert_eq!(m, "meta/llama:free");
    }

    #[test]
    fn bad_scripts_name_the_flag_and_value() {
        for bad in [
            "nomodel",
            "=ok",
            "m=",
            "m=ok,bogus",
            "m=wrong:5",
            "m=ok:x",
            "m=rpm-headers",
            "m=rpm-headers:0",
        ] {
            let e = parse_script(bad).unwrap_err();
            assert_eq!(e.exit_code(), crate::exit::USAGE);
            let msg = e.to_string();
            assert!(
                msg.starts_with("--script") && msg.contains(&format!("{bad:?}")),
                "{msg}"
            );
        }
    }
}
