//! A small builder around the real binary: each [`Env`] is a temporary
//! directory with its own stats directory and config, and [`Env::run`] runs
//! `llmprobe` there with a clean environment (no provider keys leak in from
//! the developer's shell).

#![allow(dead_code)]

pub mod browser;
pub mod need;
pub mod page;
mod redis;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

// Used by the external harness only (the tests binary has no Redis test).
#[allow(unused_imports)]
pub use self::redis::Redis;

pub const BIN: &str = env!("CARGO_BIN_EXE_llmprobe");

/// The README's fenced blocks of one language, with the line each starts on.
pub fn readme_blocks(lang: &str) -> Vec<(usize, String)> {
    doc_blocks("README.md", lang)
}

/// The fenced blocks of one language in a file of the repository (such as
/// `docs/commands.md`), with the line each starts on.
pub fn doc_blocks(file: &str, lang: &str) -> Vec<(usize, String)> {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(file))
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    let mut out = Vec::new();
    let mut cur: Option<(usize, String)> = None;
    for (i, line) in readme.lines().enumerate() {
        match (&mut cur, line.trim_end()) {
            (None, l) if l == format!("```{lang}") => cur = Some((i + 2, String::new())),
            (Some(_), "```") => out.push(cur.take().unwrap()),
            (Some((_, text)), l) => {
                text.push_str(l);
                text.push('\n');
            }
            _ => {}
        }
    }
    out
}

/// The compat log from the old Python tool.
pub fn compat_log() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/compat/the-brain-health_log.json")
}

pub struct Env {
    pub dir: tempfile::TempDir,
    envs: Vec<(String, String)>,
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn from(o: Output) -> Run {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }

    #[track_caller]
    pub fn ok(self) -> Run {
        assert_eq!(
            self.code, 0,
            "stdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }

    #[track_caller]
    pub fn code(self, want: i32) -> Run {
        assert_eq!(
            self.code, want,
            "stdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }
}

impl Env {
    pub fn new() -> Env {
        Env {
            dir: tempfile::tempdir().expect("tempdir"),
            envs: Vec::new(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn stats(&self) -> PathBuf {
        self.dir.path().join("stats")
    }

    /// `HOME` for the binary: `home/` in the test directory (not created).
    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    pub fn log(&self) -> PathBuf {
        self.stats().join("health_log.json")
    }

    pub fn state_file(&self) -> PathBuf {
        self.stats().join("model_state.json")
    }

    /// Write a file relative to the test directory; returns its path.
    pub fn write(&self, rel: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let p = self.dir.path().join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&p, contents).unwrap();
        p
    }

    /// The variables set with [`Env::env`].
    pub fn vars(&self) -> &[(String, String)] {
        &self.envs
    }

    pub fn env(&mut self, k: &str, v: &str) -> &mut Env {
        self.envs.push((k.into(), v.into()));
        self
    }

    /// A `Command` for llmprobe in this directory, with a scrubbed
    /// environment.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.current_dir(self.dir.path());
        c.env_clear();
        for k in ["PATH", "TMPDIR", "LANG"] {
            if let Ok(v) = std::env::var(k) {
                c.env(k, v);
            }
        }
        // The developer's own ~/.config/llmprobe/llmprobe.toml must not leak
        // in: home is inside the test directory.
        c.env("HOME", self.home());
        c.env("LLMPROBE_STATS_DIR", self.stats());
        c.env("NO_COLOR", "1");
        for (k, v) in &self.envs {
            c.env(k, v);
        }
        c.args(args);
        c
    }

    pub fn run(&self, args: &[&str]) -> Run {
        Run::from(self.command(args).output().expect("run llmprobe"))
    }
}

/// A `check` config of `tables` only, with no spacing and a short timeout.
pub fn config(env: &Env, tables: &[String]) -> String {
    let text = format!(
        "include_default_catalog = false\n[defaults]\nspacing_secs = 0\ntimeout_secs = 2\n\n{}",
        tables.join("\n")
    );
    env.write("llmprobe.toml", text).display().to_string()
}

/// A `route` config with one model `ok` behind each upstream dialect:
/// `a::ok` (Anthropic), `g::ok` (Gemini), `o::ok` (OpenAI), in that
/// priority, for a client to pin each in turn.
pub fn each_dialect_config(env: &Env, fake: &Fake) -> String {
    route_config(
        env,
        &[
            fake.provider("a", "anthropic", &["ok"], "priority = 1"),
            fake.provider("g", "gemini", &["ok"], "priority = 2"),
            fake.provider("o", "openai", &["ok"], "priority = 3"),
        ],
        "",
    )
}

/// Run `tests/sdk/<script>` with the Python that has the official SDKs
/// (`need::python`), proxies off for loopback, and return the JSON object
/// it printed; a script that fails fails the test with its output.
pub fn sdk_script(script: &str, args: &[&str]) -> serde_json::Value {
    let path = format!("{}/tests/sdk/{script}", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(need::python())
        .arg(&path)
        .args(args)
        .env("NO_PROXY", "*")
        .output()
        .unwrap_or_else(|e| panic!("{script}: {e}"));
    assert!(
        out.status.success(),
        "{script}:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{script} printed no JSON object ({e})"))
}

/// A `route` config: `extra` (a `[route]` table, aliases) and `tables`.
pub fn route_config(env: &Env, tables: &[String], extra: &str) -> String {
    let text = format!(
        "include_default_catalog = false\n{extra}\n[defaults]\ntimeout_secs = 10\n\n{}",
        tables.join("\n")
    );
    env.write("llmprobe.toml", text).display().to_string()
}

/// What the `--prom-file` tests run `check` over: a fake provider with a
/// passing, a failing, a disabled and an oddly named model (a label that
/// needs escaping), on the test clock.
pub fn prom_fixture() -> (Env, Fake, String) {
    let env = clock_env();
    let fake = Fake::start(&env, &[]);
    let cfg = config(
        &env,
        &[fake.provider("f", "openai", &["ok", "wrong", "off", "we\"ird"], "")],
    );
    env.run(&["--config", &cfg, "state", "disable", "f::off"])
        .ok();
    (env, fake, cfg)
}

/// `llmprobe --config CFG check EXTRA…`.
pub fn check(env: &Env, cfg: &str, extra: &[&str]) -> Run {
    let mut args = vec!["--config", cfg, "check"];
    args.extend_from_slice(extra);
    env.run(&args)
}

/// A fake provider process (`llmprobe fake-provider`) on 127.0.0.1:0,
/// killed when dropped.
pub struct Fake {
    child: std::process::Child,
    pub url: String,
    pub record: PathBuf,
    /// `--record-closes`: one line per streamed answer whose client went
    /// away before its end.
    pub closes: PathBuf,
}

/// One request the fake provider saw.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Seen {
    /// Arrival time, Unix ms.
    pub at_ms: u64,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub auth: bool,
    #[serde(default)]
    pub method: String,
    /// The path, without its query.
    #[serde(default)]
    pub path: String,
    /// The dialect whose endpoint it was, if any.
    #[serde(default)]
    pub dialect: Option<String>,
    /// The request body as the fake parsed it (`None` when not JSON).
    #[serde(default)]
    pub body: Option<serde_json::Value>,
}

impl Seen {
    pub fn model(&self) -> &str {
        self.model.as_deref().unwrap_or("")
    }

    /// A request for a provider's model list (`GET …/models`).
    pub fn is_list(&self) -> bool {
        self.method == "GET" && self.path.ends_with("/models")
    }
}

impl Fake {
    /// Start a fake provider with `--script MODEL=…` arguments.
    pub fn start(env: &Env, scripts: &[&str]) -> Fake {
        Fake::start_with(env, scripts, &[])
    }

    /// [`Fake::start`] with more `fake-provider` flags (`--hold-until FILE`).
    pub fn start_with(env: &Env, scripts: &[&str], flags: &[&str]) -> Fake {
        let n = FAKE_COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let addr_file = env.path().join(format!("fake{n}.addr"));
        let record = env.path().join(format!("fake{n}.jsonl"));
        let closes = env.path().join(format!("fake{n}.closes.jsonl"));
        let mut cmd = Command::new(BIN);
        cmd.arg("fake-provider")
            .arg("--addr-file")
            .arg(&addr_file)
            .arg("--record")
            .arg(&record)
            .arg("--record-closes")
            .arg(&closes)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::inherit());
        for s in scripts {
            cmd.arg("--script").arg(s);
        }
        cmd.args(flags);
        let mut child = cmd.spawn().expect("start fake provider");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let url = loop {
            if let Ok(s) = std::fs::read_to_string(&addr_file)
                && !s.trim().is_empty()
            {
                break s.trim().to_string();
            }
            if let Some(status) = child.try_wait().unwrap() {
                panic!("fake provider exited at start ({status}); see its error above");
            }
            assert!(
                std::time::Instant::now() < deadline,
                "fake provider did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        Fake {
            child,
            url,
            record,
            closes,
        }
    }

    /// A `[[providers]]` table pointing at this fake in `dialect`.
    pub fn provider(&self, name: &str, dialect: &str, models: &[&str], extra: &str) -> String {
        let path = if dialect == "gemini" {
            "/v1beta"
        } else {
            "/v1"
        };
        provider_toml(name, dialect, &format!("{}{path}", self.url), models, extra)
    }

    /// Every request seen so far but model-list requests (which `check`
    /// and `models` send, [`Fake::lists_seen`]), in arrival order.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen_all()
            .into_iter()
            .filter(|s| !s.is_list())
            .collect()
    }

    /// The model-list requests seen so far.
    pub fn lists_seen(&self) -> Vec<Seen> {
        self.seen_all().into_iter().filter(Seen::is_list).collect()
    }

    /// Every request seen so far, in arrival order.
    pub fn seen_all(&self) -> Vec<Seen> {
        let text = std::fs::read_to_string(&self.record).unwrap_or_default();
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("record line {l:?}: {e}")))
            .collect()
    }
}

impl Fake {
    /// The streamed answers whose client (route, say) closed the
    /// connection before their end, in the order seen: `{at_ms, model,
    /// sent_bytes}`.
    pub fn closed_early(&self) -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(&self.closes).unwrap_or_default();
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("closes line {l:?}: {e}")))
            .collect()
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

static FAKE_COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A `[[providers]]` table for a fake provider.
pub fn provider_toml(
    name: &str,
    dialect: &str,
    base_url: &str,
    models: &[&str],
    extra: &str,
) -> String {
    let models: Vec<String> = models.iter().map(|m| format!("{m:?}")).collect();
    format!(
        "[[providers]]\nname = {name:?}\ndialect = {dialect:?}\nbase_url = {base_url:?}\nmodels = [{}]\n{extra}\n",
        models.join(", ")
    )
}

/// An OpenAI chat stream with two parallel tool calls whose argument
/// fragments interleave, as OpenAI and compatible providers send them:
/// text, call 0 (`add`, `call_a`) opens, call 1 (`add`, `call_b`) opens,
/// then fragments for 0, 1, 0, 1. Call 0's arguments are `{"a":1,"b":2}`,
/// call 1's `{"a":3,"b":4}`.
pub const INTERLEAVED_CALLS: &str = concat!(
    r#"data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Both."},"finish_reason":null}]}"#,
    "\n\n",
    r#"data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"add","arguments":""}}]},"finish_reason":null}]}"#,
    "\n\n",
    r#"data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"add","arguments":""}}]},"finish_reason":null}]}"#,
    "\n\n",
    r#"data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":"}}]},"finish_reason":null}]}"#,
    "\n\n",
    r#"data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"a\":"}}]},"finish_reason":null}]}"#,
    "\n\n",
    r#"data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1,\"b\":2}"}}]},"finish_reason":null}]}"#,
    "\n\n",
    r#"data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"3,\"b\":4}"}}]},"finish_reason":null}]}"#,
    "\n\n",
    r#"data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
    "\n\n",
    r#"data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":30,"total_tokens":50}}"#,
    "\n\n",
    "data: [DONE]\n\n",
);

/// `route --serve` in front of one OpenAI-dialect provider `o` whose
/// model `m` answers every request with `body` ([`canned_stream`]).
pub fn route_over_canned_stream(env: &Env, body: &'static str) -> RouteServer {
    let url = canned_stream(body);
    let cfg = route_config(env, &[provider_toml("o", "openai", &url, &["m"], "")], "");
    RouteServer::start(env, &cfg, &[])
}

/// An upstream on 127.0.0.1:0 that answers every request with `body` as
/// `text/event-stream`: a provider's stream replayed, for streams the fake
/// provider does not make. Returns its base URL (`http://…/v1`); it serves
/// until the test process ends.
pub fn canned_stream(body: &'static str) -> String {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(&conn);
                let mut length = 0;
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                    if line.trim().is_empty() {
                        break;
                    }
                    let lower = line.to_ascii_lowercase();
                    if let Some(v) = lower.strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                    line.clear();
                }
                let mut request = vec![0; length];
                let _ = reader.read_exact(&mut request);
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let mut conn = &conn;
                let _ = conn.write_all(head.as_bytes());
                let _ = conn.write_all(body.as_bytes());
            });
        }
    });
    url
}

/// An RFC 3339 timestamp `secs` before the wall clock's now (after it,
/// when negative), second precision, as the data files write one. Assert
/// ages only for offsets in the middle of their unit, so the seconds a
/// test takes cannot change them.
pub fn ago(secs: i64) -> String {
    (chrono::Utc::now() - chrono::Duration::seconds(secs))
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// A log entry's `provider::model`.
pub fn model_key(e: &serde_json::Value) -> String {
    format!(
        "{}::{}",
        e["provider"].as_str().unwrap(),
        e["model"].as_str().unwrap()
    )
}

/// Parse a log file strictly: it must be one valid JSON array.
pub fn log_entries(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not a valid array: {e}\n{text}", path.display()))
}

/// `llmprobe route --serve` on 127.0.0.1:0, stopped when dropped.
pub struct RouteServer {
    pub child: std::process::Child,
    /// `http://127.0.0.1:PORT`
    pub url: String,
    /// The line it printed when it started listening.
    pub line: String,
}

impl RouteServer {
    /// Start with `args` after `route --serve --listen 127.0.0.1:0`.
    pub fn start(env: &Env, cfg: &str, args: &[&str]) -> RouteServer {
        RouteServer::start_with(env, cfg, args, std::process::Stdio::inherit())
    }

    /// [`RouteServer::start`], with its stderr written to `log` (a file the
    /// test reads).
    pub fn start_logged(env: &Env, cfg: &str, args: &[&str], log: &Path) -> RouteServer {
        let f = std::fs::File::create(log).expect("create the route log");
        RouteServer::start_with(env, cfg, args, f.into())
    }

    fn start_with(env: &Env, cfg: &str, args: &[&str], stderr: std::process::Stdio) -> RouteServer {
        let mut cmd = RouteServer::command(env, cfg, args);
        cmd.stderr(stderr);
        RouteServer::spawn(cmd)
    }

    /// The `llmprobe --config CFG route --serve --listen 127.0.0.1:0 ARGS…`
    /// command, not started: for a test that sets more on it (its stderr,
    /// limits) before [`RouteServer::spawn`].
    pub fn command(env: &Env, cfg: &str, args: &[&str]) -> Command {
        let mut all = vec![
            "--config",
            cfg,
            "route",
            "--serve",
            "--listen",
            "127.0.0.1:0",
        ];
        all.extend_from_slice(args);
        env.command(&all)
    }

    /// A chat completion (`POST /v1/chat/completions`, [`chat_body`])
    /// through the server.
    pub fn chat(&self, model: &str, stream: bool) -> Http {
        http(
            "POST",
            &format!("{}/v1/chat/completions", self.url),
            &[("content-type", "application/json")],
            Some(&chat_body(model, stream)),
        )
    }

    /// `GET /v1/providers`, as JSON.
    pub fn providers(&self) -> serde_json::Value {
        http("GET", &format!("{}/v1/providers", self.url), &[], None).json()
    }

    /// Wait until the server has seen the condition of degraded mode
    /// (`/v1/providers` says `changing_to: degraded`). Its grace is timed
    /// from that first look, so a test's clock must not move before it.
    #[track_caller]
    pub fn wait_grace_begun(&self) {
        eventually("the grace begun", || {
            let v = self.providers();
            if v["mode_counts"]["changing_to"] == "degraded" {
                Ok(())
            } else {
                Err(v.to_string())
            }
        });
    }

    /// Start `cmd`, a `route --serve --listen 127.0.0.1:0` command made
    /// by the caller (its stderr elsewhere, say), and wait for its address.
    pub fn spawn(mut cmd: Command) -> RouteServer {
        use std::io::BufRead;
        let mut child = cmd
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start route");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = std::io::BufReader::new(stdout).lines();
            if let Some(Ok(l)) = lines.next() {
                let _ = tx.send(l);
            }
            // Keep draining so the server never blocks on a full pipe.
            for _ in lines {}
        });
        let line = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("route --serve printed its address");
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .trim_end_matches("/v1")
            .to_string();
        RouteServer { child, url, line }
    }

    /// Send SIGTERM and wait for the exit code.
    #[cfg(unix)]
    pub fn terminate(mut self) -> i32 {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        self.child.wait().unwrap().code().unwrap_or(-1)
    }
}

impl RouteServer {
    /// Wait for the exit code of a server already told to stop.
    pub fn terminate_waited(mut self) -> i32 {
        self.child.wait().unwrap().code().unwrap_or(-1)
    }
}

impl Drop for RouteServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `llmprobe demo --serve`, with the lines it printed to paste; killed
/// when dropped.
pub struct DemoServer {
    pub child: std::process::Child,
    pub printed: Vec<String>,
}

impl DemoServer {
    /// Start it and wait until it has printed every line to paste.
    pub fn start(env: &Env) -> DemoServer {
        use std::io::BufRead;
        let mut child = env
            .command(&["demo", "--serve", "--spacing", "0"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start demo --serve");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                let _ = tx.send(line);
            }
        });
        let mut printed: Vec<String> = Vec::new();
        while !printed.iter().any(|l| l.contains("/v1/providers")) {
            let line = rx
                .recv_timeout(std::time::Duration::from_secs(120))
                .unwrap_or_else(|_| panic!("demo --serve printed:\n{}", printed.join("\n")));
            printed.push(line);
        }
        DemoServer { child, printed }
    }

    /// The printed line that starts with `prefix`, trimmed.
    pub fn line(&self, prefix: &str) -> String {
        self.printed
            .iter()
            .map(|l| l.trim())
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line {prefix:?} in:\n{}", self.printed.join("\n")))
            .to_string()
    }

    /// Ctrl-C, and its exit code.
    pub fn interrupt(mut self) -> i32 {
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        self.child.wait().unwrap().code().unwrap_or(-1)
    }
}

impl Drop for DemoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A response as a test sees it.
#[derive(Debug)]
pub struct Http {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl Http {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }

    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

/// One HTTP request over loopback.
pub fn http(method: &str, url: &str, headers: &[(&str, &str)], body: Option<&str>) -> Http {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        llmprobe::upstream::http::install_tls_provider();
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        let mut req = client.request(method.parse().unwrap(), url);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if let Some(b) = body {
            req = req.body(b.to_string());
        }
        let resp = tokio::time::timeout(std::time::Duration::from_secs(120), req.send())
            .await
            .expect("answered in time")
            .expect("request sent");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = tokio::time::timeout(std::time::Duration::from_secs(120), resp.text())
            .await
            .expect("body in time")
            .unwrap_or_else(|e| format!("<body error: {e}>"));
        Http {
            status,
            headers,
            body,
        }
    })
}

/// One provider of a `/v1/providers` view (or `route --status --json`).
pub fn provider_view<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    v["providers"]
        .as_array()
        .unwrap_or_else(|| panic!("not a providers view: {v}"))
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no provider {name} in {v}"))
}

/// The first usage line of `kind` (`rpm`, `daily_cap`, …) in provider
/// `name`'s view.
pub fn usage_line<'a>(
    v: &'a serde_json::Value,
    name: &str,
    kind: &str,
) -> Option<&'a serde_json::Value> {
    provider_view(v, name)["usage"]
        .as_array()?
        .iter()
        .find(|u| u["kind"] == kind)
}

/// A chat request body.
pub fn chat_body(model: &str, stream: bool) -> String {
    serde_json::json!({
        "model": model,
        "stream": stream,
        "messages": [{"role": "user", "content": "What is 7 + 7? Reply with only the number."}],
    })
    .to_string()
}

/// A test environment whose clock (route's) the test moves: route reads
/// the offset in seconds from the file named by LLMPROBE_TEST_CLOCK_FILE.
pub fn clock_env() -> Env {
    let mut env = Env::new();
    let clock = env.path().join("clock");
    std::fs::write(&clock, "0").unwrap();
    env.env("LLMPROBE_TEST_CLOCK_FILE", clock.to_str().unwrap());
    env
}

/// Poll `check` until it says `Ok`, at most 600 times 50 ms apart; a
/// condition another process brings about, never a wait for time to pass.
/// Panics with the last `Err` (what was seen) if it never holds.
#[track_caller]
pub fn eventually<T>(what: &str, mut check: impl FnMut() -> Result<T, String>) -> T {
    let mut last = String::new();
    for _ in 0..600 {
        match check() {
            Ok(v) => return v,
            Err(seen) => last = seen,
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("{what}: never happened; last seen: {last}");
}

/// Move route's clock forward to `secs` after the start.
pub fn advance(env: &Env, secs: u64) {
    std::fs::write(env.path().join("clock"), secs.to_string()).unwrap();
}

/// Fake `crontab`, `systemctl` and `schtasks`, first on `PATH` for every
/// run of `env`, so that no test reaches the machine's own: `crontab`
/// keeps the table in [`FakeTools::crontab`] (`-l` fails with "no crontab
/// for …" when it is absent, `-r` deletes it); `systemctl` and `schtasks`
/// append their arguments, one call a line, to their logs, and `schtasks`
/// keeps each task's XML in the test directory (`task-NAME.xml`).
#[cfg(unix)]
pub struct FakeTools {
    pub crontab: PathBuf,
    pub systemctl_log: PathBuf,
    pub schtasks_log: PathBuf,
    pub bin: PathBuf,
}

#[cfg(unix)]
pub fn fake_tools(env: &mut Env) -> FakeTools {
    use std::os::unix::fs::PermissionsExt;
    let bin = env.path().join("fake-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let tools = FakeTools {
        crontab: env.path().join("crontab.txt"),
        systemctl_log: env.path().join("systemctl.log"),
        schtasks_log: env.path().join("schtasks.log"),
        bin: bin.clone(),
    };
    let scripts = [
        (
            "crontab",
            r#"#!/bin/sh
f="$FAKE_CRONTAB"
case "$1" in
  -l) [ -f "$f" ] || { echo "no crontab for tester" >&2; exit 1; }; cat "$f" ;;
  -) cat > "$f" ;;
  -r) [ -f "$f" ] || { echo "no crontab for tester" >&2; exit 1; }; rm -f "$f" ;;
  *) echo "fake crontab: unexpected arguments: $*" >&2; exit 2 ;;
esac
"#,
        ),
        (
            "systemctl",
            r#"#!/bin/sh
echo "$*" >> "$FAKE_SYSTEMCTL_LOG"
if [ "$2" = show ]; then
  printf 'ActiveState=active\nUnitFileState=enabled\nNextElapseUSecRealtime=Mon 2026-06-01 11:00:00 UTC\nLastTriggerUSec=n/a\n'
fi
"#,
        ),
        (
            "schtasks",
            r#"#!/bin/sh
echo "$*" >> "$FAKE_SCHTASKS_LOG"
task="$FAKE_SCHTASKS_DIR/task-$3.xml"
case "$1" in
  /Create) cp "$5" "$task" ;;
  /Query)
    [ -f "$task" ] || { echo "ERROR: The system cannot find the file specified." >&2; exit 1; }
    case "$*" in
      *" /XML"*) cat "$task" ;;
      *) printf 'TaskName:      \\llmprobe-check\nNext Run Time: 6/1/2026 11:00:00 AM\nStatus:        Ready\n' ;;
    esac ;;
  /Delete) rm -f "$task" ;;
esac
"#,
        ),
    ];
    for (name, text) in scripts {
        let p = bin.join(name);
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let dir = env.path().display().to_string();
    env.env("PATH", &path)
        .env("FAKE_CRONTAB", tools.crontab.to_str().unwrap())
        .env("FAKE_SYSTEMCTL_LOG", tools.systemctl_log.to_str().unwrap())
        .env("FAKE_SCHTASKS_LOG", tools.schtasks_log.to_str().unwrap())
        .env("FAKE_SCHTASKS_DIR", &dir);
    tools
}

/// A machine without a network, as `check` sees it: remote providers go
/// through a dead proxy. Returns a `check` config ([`config`]) of one
/// remote provider `remote` with `models`.
pub fn offline(env: &mut Env, models: &[&str]) -> String {
    no_network(env);
    config(
        env,
        &[provider_toml(
            "remote",
            "openai",
            "https://remote.example/v1",
            models,
            "",
        )],
    )
}

/// Write `stats/model_lists.json` with each (provider, base URL, models)
/// list read a minute ago, so that `check` does not read those lists again
/// (`list_every_secs` is a day) and goes straight to its probes.
pub fn lists_read_now(env: &Env, lists: &[(&str, &str, &[&str])]) {
    let at = ago(60);
    let lists: serde_json::Map<String, serde_json::Value> = lists
        .iter()
        .map(|(p, url, models)| {
            let models: Vec<serde_json::Value> = models
                .iter()
                .map(|m| serde_json::json!({"id": m}))
                .collect();
            (
                p.to_string(),
                serde_json::json!({"base_url": url, "fetched_at": at, "models": models}),
            )
        })
        .collect();
    let file = serde_json::json!({"version": 1, "saved_at": at, "lists": lists});
    env.write("stats/model_lists.json", file.to_string());
}

/// No network for remote providers: every non-loopback request goes
/// through a dead proxy, and fails to connect (`connection refused`).
pub fn no_network(env: &mut Env) {
    let dead = closed_port();
    env.env("HTTP_PROXY", &dead).env("HTTPS_PROXY", &dead);
}

/// A loopback port nobody listens on: bind, note it, close it.
pub fn closed_port() -> String {
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    format!("http://{addr}")
}

/// One sample of Prometheus text as the official Python client parses it.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct Sample {
    pub name: String,
    pub labels: std::collections::BTreeMap<String, String>,
    pub value: f64,
}

/// Parse Prometheus text with `prometheus_client`'s parser (it fails on
/// anything that is not valid text exposition format). Only the external
/// harness calls it, where [`need::Need::Python`] holds.
pub fn prometheus_samples(text: &str) -> Vec<Sample> {
    use std::io::Write;
    let python = need::python();
    let script = "import sys, json\n\
        from prometheus_client.parser import text_string_to_metric_families as parse\n\
        for f in parse(sys.stdin.read()):\n\
        \x20   for s in f.samples:\n\
        \x20       print(json.dumps({'name': s.name, 'labels': s.labels, 'value': s.value}))\n";
    let mut child = Command::new(python)
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "not Prometheus text: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// A request a [`PingServer`] saw.
#[derive(Debug, Clone)]
pub struct Ping {
    pub method: String,
    pub path: String,
    /// Header names (lowercase) and values, in the order received.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Ping {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {:?} is not JSON", self.body))
    }
}

/// A stand-in for healthchecks.io and for alert webhooks, on 127.0.0.1:0,
/// that records every request and answers it `200 OK` (or the status given
/// to [`PingServer::answering`]).
pub struct PingServer {
    pub url: String,
    seen: std::sync::Arc<std::sync::Mutex<Vec<Ping>>>,
    // Dropped before the runtime it runs on.
    _server: llmprobe::http_server::Server,
    _rt: tokio::runtime::Runtime,
}

impl PingServer {
    pub fn start() -> PingServer {
        PingServer::answering(200)
    }

    /// One that answers every request with `status`.
    pub fn answering(status: u16) -> PingServer {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = seen.clone();
        let status = axum::http::StatusCode::from_u16(status).unwrap();
        let app = axum::Router::new().fallback(
            move |method: axum::http::Method,
                  uri: axum::http::Uri,
                  headers: axum::http::HeaderMap,
                  body: String| {
                record.lock().unwrap().push(Ping {
                    method: method.to_string(),
                    path: uri.to_string(),
                    headers: headers
                        .iter()
                        .map(|(k, v)| (k.to_string(), String::from_utf8_lossy(v.as_bytes()).into()))
                        .collect(),
                    body,
                });
                async move { (status, "OK") }
            },
        );
        let (server, _) = rt
            .block_on(llmprobe::http_server::start(
                "127.0.0.1:0".parse().unwrap(),
                app,
                "ping server",
                llmprobe::http_server::Serving::default(),
            ))
            .unwrap();
        PingServer {
            url: server.url(),
            seen,
            _server: server,
            _rt: rt,
        }
    }

    /// Every request so far, as "METHOD PATH".
    pub fn calls(&self) -> Vec<String> {
        self.seen()
            .iter()
            .map(|p| format!("{} {}", p.method, p.path))
            .collect()
    }

    pub fn seen(&self) -> Vec<Ping> {
        self.seen.lock().unwrap().clone()
    }
}

impl Run {
    /// Its stdout holds `want`.
    #[track_caller]
    pub fn stdout_has(self, want: &str) -> Run {
        assert!(self.stdout.contains(want), "{}", self.stdout);
        self
    }

    /// Its stderr holds `want`.
    #[track_caller]
    pub fn stderr_has(self, want: &str) -> Run {
        assert!(self.stderr.contains(want), "{}", self.stderr);
        self
    }
}

/// The arrange block most `route` tests share, as one builder (after
/// `just`'s `Test`): a test directory on the test clock ([`clock_env`]),
/// one fake provider started with the [`Test::script`]s given before the
/// first provider, the providers a test names pointing at it, and a
/// `route` config of them ([`route_config`]). [`Test::config`] stops
/// there; [`Test::serve`] also starts `route --serve`. A run then states
/// what it expects: [`Run::code`], [`Run::stdout_has`], [`Run::stderr_has`].
pub struct Test {
    env: Env,
    scripts: Vec<String>,
    fake: Option<Fake>,
    tables: Vec<String>,
    extra: String,
}

impl Test {
    pub fn new() -> Test {
        Test {
            env: clock_env(),
            scripts: Vec::new(),
            fake: None,
            tables: Vec::new(),
            extra: String::new(),
        }
    }

    /// A `--script MODEL=…` for the fake; before the first provider.
    pub fn script(mut self, script: &str) -> Test {
        assert!(self.fake.is_none(), "scripts go before the providers");
        self.scripts.push(script.to_string());
        self
    }

    /// [`Test::script`], each of them.
    pub fn scripts(self, scripts: &[&str]) -> Test {
        scripts.iter().fold(self, |t, s| t.script(s))
    }

    fn started(&mut self) -> &Fake {
        let (env, scripts) = (&self.env, &self.scripts);
        self.fake.get_or_insert_with(|| {
            let scripts: Vec<&str> = scripts.iter().map(String::as_str).collect();
            Fake::start(env, &scripts)
        })
    }

    /// A provider at the fake ([`Fake::provider`]).
    pub fn provider(mut self, name: &str, dialect: &str, models: &[&str], extra: &str) -> Test {
        let table = self.started().provider(name, dialect, models, extra);
        self.tables.push(table);
        self
    }

    /// A `[[providers]]` table of the test's own (another upstream's).
    pub fn table(mut self, table: String) -> Test {
        self.started();
        self.tables.push(table);
        self
    }

    /// What the config holds before `[defaults]`: a `[route]` table,
    /// aliases.
    pub fn extra(mut self, extra: &str) -> Test {
        self.extra = extra.to_string();
        self
    }

    /// Write the config: the directory, the fake and the config's path,
    /// as a tuple (a struct pattern would take rustfmt six lines).
    pub fn config(mut self) -> (Env, Fake, String) {
        self.started();
        let cfg = route_config(&self.env, &self.tables, &self.extra);
        (self.env, self.fake.expect("started"), cfg)
    }

    /// Write the config and start `route --serve` with `args`.
    pub fn serve(self, args: &[&str]) -> (Env, Fake, RouteServer) {
        let (env, fake, cfg) = self.config();
        let srv = RouteServer::start(&env, &cfg, args);
        (env, fake, srv)
    }
}
