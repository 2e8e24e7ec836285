//! Real coding agents and SDK agent loops against `route --serve`, over a
//! fake upstream of each dialect: Claude Code (the release that first put
//! a `system` message inside `messages`, 2.1.197, and the newest pin),
//! Codex CLI, the Anthropic Python SDK's `tool_runner`, and the Vercel AI
//! SDK's Responses model. Each answers a plain question, and runs a turn in
//! which the upstream calls one of its read-only tools (told to by a
//! `[[call NAME {args}]]` directive the fake's `agent` model obeys), the
//! client runs the tool and sends its result back, and the model answers
//! from it.
//!
//! The clients come from the npm registry at the versions pinned in
//! `tests/agents/clients.txt`, which `.ci/run` installs under `.ci/npm/`;
//! where one is missing, the harness reports its tests as ignored. Nothing
//! here leaves 127.0.0.1: each client gets a fresh home directory, a base
//! URL on loopback, and no key but a placeholder; its own non-essential
//! traffic (telemetry, updates) is switched off, and would fail anyway.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::Test;
use crate::support::need::{Need, npm_client};
use crate::support::{Env, Fake, RouteServer, clock_env, route_config, sdk_script};

const DIALECTS: [&str; 3] = ["openai", "anthropic", "gemini"];

/// How long one run of a client may take before the test fails it: a
/// stuck client must not hang CI.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(180);

/// A fake upstream of `dialect` serving the model `agent` as `p::agent`,
/// and route in front of it, with `names` (the names the client sends)
/// aliased onto it.
fn route_over(dialect: &str, names: &[&str]) -> (Env, Fake, RouteServer) {
    let env = clock_env();
    let fake = Fake::start(&env, &[]);
    let aliases: String = names
        .iter()
        .map(|n| format!("{n:?} = [\"p::agent\"]\n"))
        .collect();
    let cfg = route_config(
        &env,
        &[fake.provider("p", dialect, &["agent"], "")],
        &format!("[aliases]\n{aliases}"),
    );
    let srv = RouteServer::start(&env, &cfg, &[]);
    (env, fake, srv)
}

/// Run `cmd` to its end within [`CLIENT_TIMEOUT`]; its stdout, or a
/// failure that shows both streams.
fn run(what: &str, mut cmd: Command) -> String {
    let dir = tempfile::tempdir().unwrap();
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    cmd.stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{what}: {e}"));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > CLIENT_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = std::fs::read_to_string(&out).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    match status {
        Some(s) if s.success() => stdout,
        Some(s) => panic!("{what} exited with {s}\nstdout:\n{stdout}\nstderr:\n{stderr}"),
        None => panic!(
            "{what} ran longer than {CLIENT_TIMEOUT:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
        ),
    }
}

/// A scratch directory holding `notes.txt` with a code word, for the
/// agent's file-reading tool; the word, unique to this run.
fn notes(env: &Env) -> (std::path::PathBuf, String) {
    let word = format!("heliotrope-{:08x}", rand::random::<u32>());
    let dir = env.path().join("work");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), format!("The code word is {word}.\n")).unwrap();
    (dir, word)
}

/// Whether some request the fake saw carries `text` in a tool result: the
/// client sent the tool's output back through route.
fn sent_back(fake: &Fake, text: &str) -> bool {
    fake.seen().into_iter().filter_map(|s| s.body).any(|b| {
        let results = b.to_string();
        results.contains(text)
            && (results.contains("tool_result")
                || results.contains("\"role\":\"tool\"")
                || results.contains("functionResponse"))
    })
}

/// The environment a client runs in: its own home, no proxy, nothing
/// inherited that could point it elsewhere.
fn client_command(bin: &Path, env: &Env, cwd: &Path) -> Command {
    let home = env.path().join("client-home");
    std::fs::create_dir_all(&home).unwrap();
    let mut cmd = Command::new(bin);
    cmd.current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("USERPROFILE", &home)
        .env("TERM", "dumb")
        .env("NO_PROXY", "*")
        .env("NO_COLOR", "1");
    cmd
}

/// Claude Code's model names, aliased onto the upstream: the one the tool
/// turn asks for with `--model`, the small one it uses for side tasks, and
/// the default models of the pinned releases (2.1.197's `claude-opus-4-8`,
/// 2.1.332's `claude-opus-5-5`), which a plain `claude -p` asks for. A new
/// pin whose default model is missing here gets a 404 naming it: add it.
const CLAUDE_NAMES: [&str; 4] = [
    "claude-sonnet-4-6",
    "claude-haiku-4-5",
    "claude-opus-4-8",
    "claude-opus-5-5",
];

/// `claude -p PROMPT`, as a new user runs it (its default model, every
/// tool); with `tools`, `--model claude-sonnet-4-6` and only those tools,
/// approved ahead.
fn claude(
    role: &str,
    env: &Env,
    srv: &RouteServer,
    cwd: &Path,
    prompt: &str,
    tools: Option<&str>,
) -> String {
    let client = npm_client(role).unwrap();
    let mut cmd = client_command(&client.bin("claude"), env, cwd);
    cmd.env("ANTHROPIC_BASE_URL", &srv.url)
        .env("ANTHROPIC_API_KEY", "unused")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("ANTHROPIC_DEFAULT_HAIKU_MODEL", CLAUDE_NAMES[1])
        .args(["-p", prompt, "--no-session-persistence"]);
    if let Some(tools) = tools {
        cmd.args([
            "--model",
            CLAUDE_NAMES[0],
            "--tools",
            tools,
            "--allowedTools",
            tools,
        ]);
    }
    run(&format!("claude ({})", client.name), cmd)
}

/// Claude Code over each dialect: a plain question as a new user asks it
/// (every tool on offer; 2.1.197 then sends its instructions as a `system`
/// message inside `messages`, which the strict Anthropic fake takes only
/// under its beta), and a question answered by reading a file, with the
/// read-only `Read` as its only tool.
fn claude_code(role: &str) {
    for dialect in DIALECTS {
        let (env, fake, srv) = route_over(dialect, &CLAUDE_NAMES);
        let (dir, word) = notes(&env);
        let out = claude(role, &env, &srv, &dir, "What is 2+2?", None);
        assert_eq!(out.trim(), "4", "{role} over {dialect}");
        if dialect == "anthropic" {
            // Its instructions came as a system message after the
            // question, and went on as one.
            let in_place = fake.seen().into_iter().filter_map(|s| s.body).any(|b| {
                b["messages"]
                    .as_array()
                    .is_some_and(|m| m.iter().skip(1).any(|m| m["role"] == "system"))
            });
            assert!(in_place, "{role}: no system message inside messages");
        }
        let path = dir.join("notes.txt");
        let prompt = format!(
            "What is the code word in notes.txt? [[call Read {{\"file_path\": {:?}}}]]",
            path.display().to_string()
        );
        let out = claude(role, &env, &srv, &dir, &prompt, Some("Read"));
        assert!(out.contains(&word), "{role} over {dialect}: {out}");
        assert!(sent_back(&fake, &word), "{role} over {dialect}");
    }
}

fn claude_code_2_1_197_answers_and_reads_a_file_through_each_dialect() {
    claude_code("claude-code-2.1.197");
}

fn the_newest_claude_code_answers_and_reads_a_file_through_each_dialect() {
    claude_code("claude-code-newest");
}

fn codex(env: &Env, srv: &RouteServer, cwd: &Path, prompt: &str) -> String {
    let client = npm_client("codex").unwrap();
    let codex_home = env.path().join("codex-home");
    std::fs::create_dir_all(&codex_home).unwrap();
    let mut cmd = client_command(&client.bin("codex"), env, cwd);
    cmd.env("CODEX_HOME", &codex_home)
        .env("LLMPROBE_TOKEN", "unused")
        .args([
            "exec",
            "--skip-git-repo-check",
            // Its tools may read, never write.
            "--sandbox",
            "read-only",
            "-c",
            "model_provider=llmprobe",
            "-c",
            &format!(
                "model_providers.llmprobe={{name=\"llmprobe route\",base_url=\"{}/v1\",\
                 wire_api=\"responses\",env_key=\"LLMPROBE_TOKEN\"}}",
                srv.url
            ),
            "-m",
            "auto",
            prompt,
        ]);
    run(&format!("codex ({})", client.name), cmd)
}

/// Codex CLI, plain and with a command that reads a file, over each
/// dialect. Codex prints its final answer last on stdout.
fn codex_cli_answers_and_reads_a_file_through_each_dialect() {
    for dialect in DIALECTS {
        let (env, fake, srv) = route_over(dialect, &[]);
        let (dir, word) = notes(&env);
        let out = codex(&env, &srv, &dir, "What is 2+2?");
        assert_eq!(
            out.trim().lines().last(),
            Some("4"),
            "over {dialect}: {out}"
        );
        let prompt = "What is the code word in notes.txt? \
                      [[call exec_command {\"cmd\": \"cat notes.txt\"}]]";
        let out = codex(&env, &srv, &dir, prompt);
        assert!(out.contains(&word), "over {dialect}: {out}");
        assert!(sent_back(&fake, &word), "over {dialect}");
    }
}

/// The Anthropic SDK's `tool_runner`, with its default settings (a message
/// thread, which route refuses in the words the SDK falls back on), over
/// each dialect (tests/sdk/anthropic_tool_runner.py says what it does).
fn the_anthropic_sdk_tool_runner_works_through_each_dialect() {
    for dialect in DIALECTS {
        let (_env, fake, srv) = route_over(dialect, &["claude-sonnet-4-5"]);
        let v = sdk_script("anthropic_tool_runner.py", &[&srv.url, "claude-sonnet-4-5"]);
        assert_eq!(
            v["calls"],
            serde_json::json!([[12.0, 30.0]]),
            "{dialect}: {v}"
        );
        assert!(
            v["text"].as_str().is_some_and(|t| t.contains("42")),
            "{dialect}: {v}"
        );
        assert_eq!(v["stop_reason"], "end_turn", "{dialect}: {v}");
        assert_eq!(v["messages"], 2, "{dialect}: {v}");
        // The first, threaded request never reached the upstream: two did.
        let sent: Vec<Value> = fake.seen().into_iter().filter_map(|s| s.body).collect();
        assert_eq!(sent.len(), 2, "{dialect}: {sent:?}");
    }
}

/// The Vercel AI SDK's default OpenAI model (the Responses API, `store`
/// unset): a three-turn chat, plain and streamed, whose later turns refer
/// to earlier answers by `item_reference`, and an agent loop with a tool,
/// over each dialect (tests/sdk/ai_sdk.mjs says what it does).
fn the_ai_sdk_chats_for_three_turns_and_runs_an_agent_loop_through_each_dialect() {
    let client = npm_client("ai-sdk").unwrap();
    let script = format!("{}/tests/sdk/ai_sdk.mjs", env!("CARGO_MANIFEST_DIR"));
    for dialect in DIALECTS {
        let (env, fake, srv) = route_over(dialect, &["gpt-4.1-mini"]);
        let mut cmd = client_command(Path::new("node"), &env, env.path());
        cmd.arg(&script)
            .arg(client.dir())
            .arg(format!("{}/v1", srv.url))
            .arg("gpt-4.1-mini");
        let out = run(&format!("node ai_sdk.mjs ({})", client.name), cmd);
        let v: Value = serde_json::from_str(out.trim())
            .unwrap_or_else(|e| panic!("{dialect}: not JSON ({e}): {out}"));
        let want = serde_json::json!(["4", "7", "11"]);
        assert_eq!(v["chat"], want, "{dialect}: {v}");
        assert_eq!(v["chat_stream"], want, "{dialect}: {v}");
        assert_eq!(
            v["agent"]["calls"],
            serde_json::json!([[12, 30]]),
            "{dialect}: {v}"
        );
        // Turns 2 and 3, plain and streamed, each refer to every earlier
        // answer: 1 + 2, twice.
        assert_eq!(v["item_references"], 6, "{dialect}: {v}");
        assert!(
            v["agent"]["text"]
                .as_str()
                .is_some_and(|t| t.contains("42")),
            "{dialect}: {v}"
        );
        // Turn 2 and 3 sent references, which route resolved: the
        // upstream got the earlier answers as text.
        let sent: Vec<Value> = fake.seen().into_iter().filter_map(|s| s.body).collect();
        assert!(
            sent.iter().any(|b| {
                let t = b.to_string();
                // The answer of turn 2, which the SDK sent by reference,
                // as the upstream's own text of an earlier turn.
                t.contains("What is 5+6?") && t.contains("What is 3+4?") && t.contains(":\"7\"")
            }),
            "{dialect}: {sent:?}"
        );
    }
}

pub fn tests() -> Vec<Test> {
    vec![
        Test::new(
            "agents::claude_code_2_1_197_answers_and_reads_a_file_through_each_dialect",
            &[Need::Npm("claude-code-2.1.197")],
            claude_code_2_1_197_answers_and_reads_a_file_through_each_dialect,
        ),
        Test::new(
            "agents::the_newest_claude_code_answers_and_reads_a_file_through_each_dialect",
            &[Need::Npm("claude-code-newest")],
            the_newest_claude_code_answers_and_reads_a_file_through_each_dialect,
        ),
        Test::new(
            "agents::codex_cli_answers_and_reads_a_file_through_each_dialect",
            &[Need::Npm("codex")],
            codex_cli_answers_and_reads_a_file_through_each_dialect,
        ),
        Test::new(
            "agents::the_anthropic_sdk_tool_runner_works_through_each_dialect",
            &[Need::Python("anthropic")],
            the_anthropic_sdk_tool_runner_works_through_each_dialect,
        ),
        Test::new(
            "agents::the_ai_sdk_chats_for_three_turns_and_runs_an_agent_loop_through_each_dialect",
            &[Need::Npm("ai-sdk"), Need::Program("node")],
            the_ai_sdk_chats_for_three_turns_and_runs_an_agent_loop_through_each_dialect,
        ),
    ]
}
