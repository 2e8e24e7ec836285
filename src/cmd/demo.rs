//! `llmprobe demo`: the whole `check` path against fake providers on
//! 127.0.0.1, so that anyone can see llmprobe work with no keys and no
//! network. It then shows what was written: the log's tail, the model states
//! and the brief.

use std::path::{Path, PathBuf};

use crate::catalog::Catalog;
use crate::cli::{BriefArgs, CheckArgs, DemoArgs, GlobalArgs};
use crate::error::{Error, Result};
use crate::fake::{self, FakeConfig};
use crate::output;
use crate::prompts::Pool;
use crate::settings::Settings;

/// A demo provider: name, dialect, base path, and (model, behaviours) pairs.
/// Behaviours are the fake provider's (`ok`, `think`, `wrong`, …), cycled per
/// run, so successive demos show models moving between states.
type DemoProvider = (
    &'static str,
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
);

/// What the demo's catalog lists for `check` to probe: each run adds one
/// capability probe per provider, so successive demos fill the capability
/// column of `brief` and `state`. Only models with one steady behaviour are
/// listed (a probe takes its turn in a cycled script); `acme-chatty`
/// answers in text where a tool call is asked, so its tools verdict is no.
/// `sonnet-ish` lists `speed` too: by the third demo, tokens/s shows.
const CAPABILITIES: &[(&str, &[&str])] = &[
    ("acme-8b", &["tools", "json", "vision"]),
    ("acme-chatty", &["tools"]),
    ("sonnet-ish", &["tools", "json", "speed"]),
    ("flash-ish", &["json", "vision"]),
];

/// The demo's reasoning model (provider, model): it answers with its
/// thinking first (`<think>…</think>`, the fake's `think`), as real
/// reasoning models do. `auto` is not to answer a newcomer's first question
/// with it, so the demo's config gives its provider [`LATER`]: `auto`
/// tries the other providers' models first. `demo --serve` names it, to
/// ask for it by name.
const REASONER: (&str, &str) = ("acme", "acme-70b-reasoner");

/// The reasoning model's provider's `priority` in the demo's config (lower
/// is tried first; a provider without one has 100).
const LATER: i64 = 200;

const PROVIDERS: &[DemoProvider] = &[
    (
        "acme",
        "openai",
        "/v1",
        &[
            ("acme-8b", "ok"),
            ("acme-70b-reasoner", "think"),
            ("acme-tiny", "wrong,ok"),
            ("acme-405b", "slow:4000,ok:300"),
            ("acme-chatty", "text-not-call"),
        ],
    ),
    (
        "claudish",
        "anthropic",
        "/v1",
        &[("sonnet-ish", "ok:120"), ("opus-ish", "overloaded,ok:400")],
    ),
    (
        "geminish",
        "gemini",
        "/v1beta",
        &[("flash-ish", "ok:60"), ("pro-ish", "rate-limit,ok:250")],
    ),
    (
        "freebie",
        "openai",
        "/openai/v1",
        &[
            ("retired-model", "not-found"),
            ("garbled", "html,garbage,ok"),
        ],
    ),
];

pub fn run(g: &GlobalArgs, a: DemoArgs) -> Result<u8> {
    let stats_dir = g.stats_dir.clone().unwrap_or_else(default_dir);
    let prompts = match &g.prompts {
        Some(p) => Pool::load(p)?,
        None => Pool::embedded(),
    };
    let rt = crate::http_server::runtime(1)?;
    // Each demo starts a new fake server, so rotate the scripts by how many
    // demos this stats directory has seen: successive runs then show models
    // recovering and being disabled.
    if a.fresh {
        forget_earlier_runs(&stats_dir)?;
    }
    let round = previous_runs(&stats_dir);
    output::println(&if round == 0 {
        format!(
            "llmprobe demo: a fresh start in {}",
            crate::fsutil::absolute(&stats_dir).display()
        )
    } else {
        format!(
            "llmprobe demo: continuing {round} earlier demo run{} in {} (--fresh starts over)",
            if round == 1 { "" } else { "s" },
            crate::fsutil::absolute(&stats_dir).display()
        )
    })?;
    let mut cfg = FakeConfig::new(prompts.clone());
    for (_, _, _, models) in PROVIDERS {
        for (model, behaviours) in *models {
            let (m, mut b) = fake::parse_script(&format!("{model}={behaviours}"))?;
            let n = b.len();
            b.rotate_left(round % n);
            cfg = cfg.script(&m, &b);
        }
    }
    // The fake server runs on its own runtime's worker thread while `check`
    // runs here with its own.
    let server = rt.block_on(fake::start(cfg))?;
    let url = server.url();
    let catalog = Catalog::from_toml_str(&demo_config(&url, a.spacing), "(demo config)")?;
    let settings = Settings {
        catalog,
        prompts,
        stats_dir: stats_dir.clone(),
        config: None,
    };
    output::println(&format!(
        "fake providers on {url}, spacing {}s, timeout 2s\n",
        a.spacing,
    ))?;
    let result = crate::cmd::check::run(
        &settings,
        CheckArgs {
            spacing: Some(a.spacing),
            timeout: Some(2.0),
            ..CheckArgs::default()
        },
    );
    let server = if result.is_err() || !a.serve {
        rt.block_on(server.shutdown());
        None
    } else {
        Some(server)
    };
    result?;
    show_files(&settings)?;
    output::println("\n== llmprobe brief ==")?;
    crate::cmd::brief::run(
        &settings,
        BriefArgs {
            window: "24h".into(),
            json: false,
            quiet_if_healthy: false,
            provider: Vec::new(),
            all: false,
        },
    )?;
    if let Some(server) = server {
        let code = serve(&rt, &settings, &url, a);
        rt.block_on(server.shutdown());
        return code;
    }
    output::println(
        "\nRun the demo again to watch states move: a passing probe brings a paused model back, \
         three hard failures in a row disable one; --fresh starts over.\n\
         Try route without keys: cargo run -- demo --serve\n\
         From a source checkout: cargo run -- demo\n\
         Installed (cargo install --path .): llmprobe demo",
    )?;
    Ok(crate::exit::SUCCESS)
}

/// `demo --serve`: `route --serve` over the demo's fake providers, with the
/// states the demo's `check` just wrote, until Ctrl-C. The demo's config
/// is saved beside its files so that a one-shot `route` can use it too:
/// in a file of its own, named by route's port (`demo-PORT.toml`), so that
/// another demo, serving or not, never changes the fakes the lines it
/// printed point at. It is removed when the server stops, if it still
/// holds what this demo wrote (its fakes' port is in it); a demo killed
/// outright leaves it, and the next demo served on that port replaces it.
fn serve(
    rt: &tokio::runtime::Runtime,
    settings: &Settings,
    fake_url: &str,
    a: DemoArgs,
) -> Result<u8> {
    let written: std::cell::OnceCell<PathBuf> = std::cell::OnceCell::new();
    let code = serve_with_config(rt, settings, fake_url, a.spacing, a.listen, &written);
    if let Some(config) = written.get()
        && std::fs::read(config).ok() == Some(demo_config(fake_url, a.spacing).into_bytes())
    {
        let _ = std::fs::remove_file(config);
    }
    code
}

/// The config file of the `demo --serve` whose route listens at `url`.
fn config_for(stats_dir: &Path, url: &str) -> PathBuf {
    let port = url.rsplit(':').next().unwrap_or_default();
    stats_dir.join(format!("demo-{port}.toml"))
}

fn serve_with_config(
    rt: &tokio::runtime::Runtime,
    settings: &Settings,
    fake_url: &str,
    spacing: f64,
    listen: Option<std::net::SocketAddr>,
    written: &std::cell::OnceCell<PathBuf>,
) -> Result<u8> {
    let mut route = settings.catalog.route.clone();
    route.listen = listen.unwrap_or_else(|| std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
    let engine = crate::route::engine::Engine::new(
        &settings.catalog,
        route,
        settings.stats_dir.clone(),
        crate::upstream::http::client()?,
        crate::clock::Clock::from_env(),
    )?;
    engine.refresh_health()?;
    let stats = crate::fsutil::absolute(&settings.stats_dir);
    let badges = crate::cmd::route::badges(settings);
    crate::cmd::route::serve_until_signal(
        rt,
        std::sync::Arc::new(engine),
        badges,
        &settings.catalog,
        None,
        |url| {
            let config = config_for(&stats, url);
            crate::fsutil::atomic_write_unlocked(
                &config,
                demo_config(fake_url, spacing).as_bytes(),
            )?;
            let config = written.get_or_init(|| config);
            output::println(&paste_lines(url, config, &stats))
        },
    )
}

/// What to paste into another terminal while `demo --serve` runs.
fn paste_lines(url: &str, config: &Path, stats: &Path) -> String {
    let body = r#"{"model":"auto","messages":[{"role":"user","content":"What is 2+2?"}]}"#;
    format!(
        "\nThe demo's fake providers are behind route now; no keys needed. Ctrl-C stops both.\n\
         \ncurl:\n  curl -s {url}/v1/chat/completions -H 'content-type: application/json' -d '{body}'\n\
         \nthe OpenAI Python SDK (pip install openai):\n  python3 -c 'from openai import OpenAI; \
         c = OpenAI(base_url=\"{url}/v1\", api_key=\"demo\"); \
         print(c.chat.completions.create(model=\"auto\", messages=[{{\"role\": \"user\", \"content\": \"What is 2+2?\"}}]).choices[0].message.content)'\n\
         \nthe Anthropic Python SDK (pip install anthropic), through the same route:\n  python3 -c 'import anthropic; \
         c = anthropic.Anthropic(base_url=\"{url}\", api_key=\"demo\"); \
         print(c.messages.create(model=\"auto\", max_tokens=64, messages=[{{\"role\": \"user\", \"content\": \"What is 3+4?\"}}]).content[0].text)'\n\
         \na one-shot route, in another terminal (with this demo's own config, removed when it stops):\n  {inv} --config '{config}' --stats-dir '{stats}' route \"What is 12 * 7?\"\n\
         \nthe reasoning model, by name: it answers with its thinking first (<think>…</think>), so \
         the demo's config gives {rp} priority = {LATER} and auto answers from the other providers' models first:\n  \
         {inv} --config '{config}' --stats-dir '{stats}' route --model {rp}::{rm} \"What is 2+2?\"\n\
         \nthe models route would use, and what it knows of each provider:\n  curl -s {url}/v1/models\n  curl -s {url}/v1/providers\n\
         \nthe status page and a badge, live (open them in a browser):\n  {url}/status\n  {url}/badge/acme.svg?window=24h\n",
        inv = invocation(),
        config = config.display(),
        stats = stats.display(),
        rp = REASONER.0,
        rm = REASONER.1,
    )
}

/// How the person runs llmprobe: `cargo run --` from a source checkout
/// (the binary sits in a cargo `target/` directory), else `llmprobe`.
fn invocation() -> &'static str {
    let from_checkout = std::env::current_exe().is_ok_and(|exe| {
        exe.parent()
            .and_then(Path::parent)
            .and_then(Path::file_name)
            .is_some_and(|d| d == "target")
    });
    if from_checkout {
        "cargo run --"
    } else {
        "llmprobe"
    }
}

/// Where the demo keeps its files when no `--stats-dir` is given: the
/// user's own state directory (`$XDG_STATE_HOME`, else `~/.local/state`),
/// else their cache directory (macOS, Windows). Never a directory shared by
/// every user of the machine, where one user's run would fail on another's
/// files or continue a stranger's demo.
fn default_dir() -> PathBuf {
    let base = dirs::state_dir()
        .or_else(dirs::cache_dir)
        .unwrap_or_else(std::env::temp_dir);
    let dir = base.join("llmprobe").join("demo");
    std::path::absolute(&dir).unwrap_or(dir)
}

/// `demo --fresh`: delete the logs, the state file and the capability
/// verdicts of earlier demo runs,
/// under the data lock. A `--stats-dir` that holds anything but demo data
/// is refused, so that a slip of the flag never deletes real history.
fn forget_earlier_runs(stats_dir: &Path) -> Result<()> {
    let names: Vec<&str> = PROVIDERS.iter().map(|p| p.0).collect();
    let is_demo = |provider: &str| names.contains(&provider);
    let _lock = crate::fsutil::DataLock::acquire(stats_dir)?;
    // Logs are arrays of entries naming a provider; the state and verdict
    // files are objects keyed by "provider::model".
    let logs = [
        stats_dir.join(crate::settings::LOG_FILE),
        stats_dir.join(crate::capabilities::LOG_FILE),
    ];
    let keyed = [
        stats_dir.join(crate::settings::STATE_FILE),
        stats_dir.join(crate::capabilities::FINDINGS_FILE),
    ];
    let refuse = |path: &Path| {
        Error::config(format!(
            "demo --fresh: {} is not (only) demo data, or cannot be parsed; not deleting it \
             (pick another --stats-dir, or move the file aside by hand)",
            path.display()
        ))
    };
    for log in &logs {
        if let Ok(bytes) = std::fs::read(log) {
            let entries: Vec<serde_json::Value> =
                serde_json::from_slice(&bytes).map_err(|_| refuse(log))?;
            if !entries
                .iter()
                .all(|e| e["provider"].as_str().is_some_and(is_demo))
            {
                return Err(refuse(log));
            }
        }
    }
    for file in &keyed {
        if let Ok(bytes) = std::fs::read(file) {
            let map: serde_json::Map<String, serde_json::Value> =
                serde_json::from_slice(&bytes).map_err(|_| refuse(file))?;
            if !map
                .keys()
                .all(|k| is_demo(crate::catalog::ModelKey::provider_of(k)))
            {
                return Err(refuse(file));
            }
        }
    }
    for f in logs.iter().chain(&keyed) {
        match std::fs::remove_file(f) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(format!("cannot remove {}", f.display()), e)),
        }
    }
    Ok(())
}

/// Entries already in the demo's log (one per line, as `check` writes them).
/// How many demo runs the log holds: the most probes of any one model.
/// Each run probes every model not disabled once, so once a model is
/// disabled a run adds fewer entries than there are models, and dividing
/// the entries by the models would fall behind (and repeat a run).
fn previous_runs(stats_dir: &std::path::Path) -> usize {
    let Ok(text) = std::fs::read_to_string(stats_dir.join(crate::settings::LOG_FILE)) else {
        return 0;
    };
    let mut per_model: std::collections::HashMap<(String, String), usize> = Default::default();
    for line in text.lines().filter(|l| l.starts_with('{')) {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line.trim_end_matches(',')) else {
            continue;
        };
        let key = (
            v["provider"].as_str().unwrap_or_default().to_string(),
            v["model"].as_str().unwrap_or_default().to_string(),
        );
        *per_model.entry(key).or_default() += 1;
    }
    per_model.into_values().max().unwrap_or(0)
}

fn demo_config(url: &str, spacing: f64) -> String {
    let mut s = format!(
        "include_default_catalog = false\n[defaults]\nspacing_secs = {spacing}\ntimeout_secs = 2\n\n"
    );
    for (name, dialect, path, models) in PROVIDERS {
        let ms: Vec<String> = models.iter().map(|(m, _)| format!("{m:?}")).collect();
        s.push_str(&format!(
            "[[providers]]\nname = {name:?}\ndialect = {dialect:?}\nbase_url = \"{url}{path}\"\nmodels = [{}]\n",
            ms.join(", ")
        ));
        if *name == REASONER.0 {
            s.push_str(&format!(
                "# after the other providers for \"auto\": {} answers with its <think>…</think> first\npriority = {LATER}\n",
                REASONER.1
            ));
        }
        let info: Vec<String> = CAPABILITIES
            .iter()
            .filter(|(m, _)| models.iter().any(|(id, _)| id == m))
            .map(|(m, caps)| format!("{m:?} = {{ capabilities = {caps:?} }}"))
            .collect();
        if !info.is_empty() {
            s.push_str(&format!("model_info = {{ {} }}\n", info.join(", ")));
        }
        s.push('\n');
    }
    s
}

fn show_files(s: &Settings) -> Result<()> {
    let log: PathBuf = s.log_path();
    let text = std::fs::read_to_string(&log)
        .map_err(|e| Error::io(format!("cannot read {}", log.display()), e))?;
    let lines: Vec<&str> = text.lines().collect();
    let tail = &lines[lines.len().saturating_sub(6)..];
    output::println(&format!(
        "\n== {} (last lines of {}) ==\n{}",
        log.display(),
        lines.len(),
        tail.join("\n")
    ))?;
    let state = s.state_path();
    let text =
        std::fs::read_to_string(&state).unwrap_or_else(|_| "{}  (every model active)".into());
    output::println(&format!("\n== {} ==\n{}", state.display(), text.trim_end()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `auto` tries every other provider's models before the reasoning
    /// model's provider, which the demo's config keeps, with the model:
    /// the only one that thinks aloud.
    #[test]
    fn the_demos_config_puts_the_reasoning_model_last_for_auto() {
        let c = Catalog::from_toml_str(&demo_config("http://127.0.0.1:9", 0.0), "demo").unwrap();
        let reasoner = c.provider(REASONER.0).unwrap();
        assert!(reasoner.models.iter().any(|m| m == REASONER.1));
        assert_eq!(reasoner.priority, LATER);
        for p in c.providers.iter().filter(|p| p.name != REASONER.0) {
            assert!(p.priority < LATER, "{}: {}", p.name, p.priority);
        }
        for (provider, _, _, models) in PROVIDERS {
            for (model, behaviours) in *models {
                if behaviours.split(',').any(|b| b == "think") {
                    assert_eq!((*provider, *model), REASONER);
                }
            }
        }
    }
}
