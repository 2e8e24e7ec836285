//! Command-line arguments as plain clap structs. Nothing here does work:
//! [`crate::run`] validates these into settings before any command starts.

use std::path::PathBuf;

use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};

/// What `--version` prints after the name: the version, and the commit the
/// binary was built from (see build.rs), e.g. `0.1.0 (commit 4ec0c11ab2f1)`.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("LLMPROBE_COMMIT"),
    ")"
);

#[derive(Debug, Parser)]
#[command(
    name = "llmprobe",
    version = VERSION,
    about = "Keep an honest record of which LLM provider/model pairs really work.",
    after_help = "\
Examples:
  llmprobe demo                       probe local fake providers; no keys, no network
  llmprobe check --list               every provider and model, and which key variable is set
  llmprobe check                      probe every model once (run it hourly from cron)
  llmprobe brief                      the last 24 h at a glance
  llmprobe rollup --readme README.md  publish uptime in a README
  llmprobe state                      every model's state; `state enable P::M` to override
  llmprobe route \"What is 2+2?\"       ask whichever model works now; --serve for an OpenAI endpoint
  llmprobe schedule install           run check every hour from cron (systemd, Task Scheduler)
  llmprobe notify test                send a test alert to every configured webhook

Exit codes: 0 success, 1 a --fail-on-… condition, 2 usage or config error
(or nothing to probe), 3 another check holds the run lock, 4 a data file is
unreadable (left untouched), 5 route exhausted every candidate, 6 offline:
check reached no remote provider, so only loopback providers' results were
recorded (docs/formats.md, \"The offline rule\"), 7 a system error (cannot
create or write a file, start the runtime or the TLS client), 8 an internal
error (a bug), 130 or 143 check stopped by SIGINT (Ctrl-C) or SIGTERM after
recording what it had measured."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(flatten)]
    pub log: LogArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// How much llmprobe says on stderr about what it does (through `tracing`),
/// before or after the subcommand. Routine output (tables, JSON, the usual
/// stderr notes) never changes with these.
#[derive(Debug, Args, Clone, Copy, Default)]
pub struct LogArgs {
    /// More diagnostics on stderr: -v what happens, -vv each probe, state
    /// change and route attempt, -vvv everything llmprobe traces. RUST_LOG
    /// (e.g. RUST_LOG=llmprobe=debug) gives finer control.
    #[arg(short = 'v', long = "verbose", global = true, action = ArgAction::Count)]
    pub verbose: u8,
    /// Fewer diagnostics: -q errors only, -qq none. Routine output is unchanged.
    #[arg(
        short = 'q',
        long = "quiet",
        global = true,
        action = ArgAction::Count,
        conflicts_with = "verbose"
    )]
    pub quiet: u8,
}

/// Flags accepted both before and after the subcommand.
#[derive(Debug, Args, Clone)]
pub struct GlobalArgs {
    /// User config file (TOML) layered over the embedded catalog [default:
    /// ./llmprobe.toml, else llmprobe/llmprobe.toml in the user config directory].
    #[arg(long, global = true, env = "LLMPROBE_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Directory holding health_log.json and model_state.json [default: ./stats].
    #[arg(long, global = true, env = "LLMPROBE_STATS_DIR", value_name = "DIR")]
    pub stats_dir: Option<PathBuf>,
    /// Replace the embedded prompt pool with this TOML file.
    #[arg(long, global = true, env = "LLMPROBE_PROMPTS", value_name = "FILE")]
    pub prompts: Option<PathBuf>,
    /// Print tables at their full width, whatever the terminal's: no
    /// column hidden, no cell wrapped.
    #[arg(long, global = true)]
    pub wide: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    Check(CheckArgs),
    Providers(ProvidersArgs),
    Models(ModelsArgs),
    Rollup(RollupArgs),
    Brief(BriefArgs),
    State(StateArgs),
    Route(RouteArgs),
    Schedule(ScheduleArgs),
    Notify(NotifyArgs),
    Demo(DemoArgs),
    Completions(CompletionsArgs),
    Man(ManArgs),
    /// Run fake LLM providers on 127.0.0.1 for tests, demos and benchmarks.
    #[command(hide = true)]
    FakeProvider(FakeArgs),
}

/// Probe every model once and record the results.
///
/// Providers run in parallel; each provider's models run one after another,
/// with starts at least `spacing` apart. Every result is appended to
/// health_log.json as soon as it is known, and model_state.json is updated.
/// Paused models are probed; disabled models are skipped.
///
/// After its basic probes, each provider gets at most one capability probe
/// (tools, json or vision): the most overdue verdict among its models that
/// just passed. It goes to capability_log.json and capabilities.json and
/// never changes a model's state.
///
/// Probes are requests too: they spend at most `probe_share` (0.1) of each
/// daily limit llmprobe knows, so a model with 20 requests a day is probed
/// twice a day, whenever check runs; the table says `budget: next probe
/// 12:00 UTC`. An active model that route served at least 3 times without
/// a failure since its last probe is not probed (`traffic: 3 ok since …`).
/// Each probe is counted in stats/probe_usage.json, which route adds to
/// its own counts.
///
/// Offline (no remote provider answered: every probe and model list failed
/// to reach its host), loopback providers' results are recorded and the
/// remote ones' are not (the table says `not recorded (offline)`); the run
/// stops as soon as every remote provider has failed its first probe so,
/// and exits 6 (docs/formats.md, "The offline rule"). Ctrl-C (SIGINT) or
/// SIGTERM stops the run: what was measured is recorded, the last line says
/// how many results and state changes, and the exit is 130 or 143.
#[derive(Debug, Default, Args)]
#[command(after_help = "\
Examples:
  llmprobe check                              probe everything (hourly from cron)
  llmprobe check --list                       show providers, models, key variables
  llmprobe check --provider groq --spacing 5  only groq, 5 s apart
  llmprobe check --dry-run                    show what would be probed, in order
  llmprobe check --dry-run --json             the same, as JSON
  llmprobe check --json --fail-on-down        JSON out; exit 1 if any probe failed
  llmprobe check --fail-on-skipped            exit 1 if a provider probed this week lost its key
  llmprobe check --if-due 30m --jitter 5m     at most one run per 30 min, after a random wait
  llmprobe check --dry-run --jitter 5m        show the plan and the wait, without waiting
  llmprobe check --capabilities all           also probe capabilities the catalog does not list
  llmprobe check --capabilities none          basic probes only: no tools/json/vision probe
  llmprobe check --paused                     re-probe only the paused models that are due
  llmprobe check --notify json+http://127.0.0.1:8080/hook
                                              alert a receiver when a model is disabled or a provider down
  llmprobe check --notify-after 3             alert (LLMPROBE_NOTIFY) on a provider down 3 runs in a row
  llmprobe check --notify-on paused,disabled,provider_down --notify-after 1
                                              alert on every pause too, at once (the old default)

Hourly: `llmprobe schedule install --env-file ~/llmprobe/keys.env` writes
the cron job (a systemd timer or a Windows task with --with) that exports the
keys and names the binary by its full path; lines for a job written by hand
are in the repository's docs/scheduling.md. Watched by healthchecks.io, with
node_exporter's textfile collector, and failing (URL/fail) when the job
lost a key it had this week:
  llmprobe check --if-due 1h --jitter 5m --fail-on-skipped \\
    --ping-url https://hc-ping.com/UUID --prom-file llmprobe.prom

One check for many routers: with --shared-state redis://HOST:6379/0 (or
[check] shared_state) the run also publishes the record to Redis, where
`route --serve --record shared` instances read it.

Alerts: with --notify URL, LLMPROBE_NOTIFY or [notify] url_env, a run in
which a model was disabled, or a provider was down (every probed model
failed) for the second run in a row, sends one message (ntfy, Slack,
Discord, or JSON with json+https://), and so does the run in which it
came back (a \"resolved\" message). A pause (a 429, a timeout) is not
alerted unless --notify-on (or [notify] on) names `paused`.
stats/notify_state.json remembers what was said. Nothing is sent by
--list, --dry-run, a run that was not due or an offline run; `check
--paused` does send (a model that came back is news). See docs/alerts.md.

Order: --if-due is decided first (a run that is not due exits 0 at once,
without waiting, pinging or taking the lock); then the --jitter wait; then
the run lock, --if-due once more (another run may have finished meanwhile),
the start ping and the probes.

Paused models between hourly runs: `llmprobe schedule install --reprobe 10m`
adds a line running `llmprobe check --paused` every 10 minutes. It probes a
paused model 5, 10, 20… min after its pause (at most hourly, never before a
Retry-After), and prints nothing when no model is due. It writes no
last_run.json and sends no --ping-url/--prom-file, so that only the hourly
run counts as a heartbeat (alerts it does send). A plain check that finds such a run holding the
run lock waits for it (up to 15 min) instead of exiting 3.")]
pub struct CheckArgs {
    /// Only these providers (repeatable, or comma-separated).
    #[arg(long, short = 'p', value_delimiter = ',', value_name = "NAME", add = Names::Providers)]
    pub provider: Vec<String>,
    /// Only these models, by id or provider::model (repeatable, or comma-separated).
    #[arg(long, short = 'm', value_delimiter = ',', value_name = "MODEL", add = Names::Models)]
    pub model: Vec<String>,
    /// Seconds between probe starts on one provider (overrides config; 0.2 works).
    #[arg(long, value_name = "SECS", allow_negative_numbers = true)]
    pub spacing: Option<f64>,
    /// Per-probe timeout in seconds (overrides config).
    #[arg(long, value_name = "SECS", allow_negative_numbers = true)]
    pub timeout: Option<f64>,
    /// Print what would be probed and in what order, then stop.
    #[arg(long)]
    pub dry_run: bool,
    /// List every provider and model with its key variable, then stop.
    #[arg(long)]
    pub list: bool,
    /// Print the run's entries and state changes as JSON.
    #[arg(long)]
    pub json: bool,
    /// Exit 1 if any probed model failed.
    #[arg(long)]
    pub fail_on_down: bool,
    /// Exit 1 if a provider probed in the last 7 days was skipped for a
    /// missing key (a job that lost its keys). Without it, such a run
    /// still prints one warning line at the end, on stderr.
    #[arg(long)]
    pub fail_on_skipped: bool,
    /// Which capability probes (tools, json, vision) the run may make, at
    /// most one per provider, after its basic probes: those the catalog
    /// lists for a model (`model_info = { "m" = { capabilities = ["tools"]
    /// } }`), every capability of every probed model, or none. A provider
    /// with `capabilities = false` is never probed for them. Their results
    /// never change a model's state or the exit code.
    #[arg(long, value_enum, value_name = "WHICH", default_value = "listed")]
    pub capabilities: CapabilityProbes,
    /// First wait a random delay from 0 up to DURATION (e.g. 5m, at most
    /// 24h), so that many machines do not probe in lock-step.
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse)]
    pub jitter: Option<std::time::Duration>,
    /// Exit 0 at once, probing nothing, when the last completed run finished
    /// less than INTERVAL ago [1h when given without a value]. An offline
    /// run (exit 6) or one a signal stopped (130, 143) does not count.
    #[arg(
        long,
        value_name = "INTERVAL",
        value_parser = crate::duration::parse,
        num_args = 0..=1,
        default_missing_value = "1h"
    )]
    pub if_due: Option<std::time::Duration>,
    /// Ping a healthchecks.io-style URL: URL/start before probing, then URL
    /// on exit 0 or URL/fail on anything else (offline included), with the
    /// run's summary as the body. An unreachable URL only warns.
    #[arg(
        long,
        value_name = "URL",
        env = "LLMPROBE_PING_URL",
        hide_env_values = true
    )]
    pub ping_url: Option<String>,
    /// Write the run's metrics to this file for node_exporter's textfile
    /// collector, atomically (a temporary file in the same directory, then
    /// a rename).
    #[arg(long, value_name = "PATH")]
    pub prom_file: Option<PathBuf>,
    /// Publish the record (every state change; after the run, each
    /// model's recent health and the capability verdicts) to Redis for
    /// `route --record shared` (redis://host:port/db). The local files stay
    /// the record of truth; Redis failing only warns [default: [check]
    /// shared_state].
    #[arg(long, value_name = "URL")]
    pub shared_state: Option<String>,
    /// Probe only paused models whose re-probe is due (5, 10, 20… min
    /// after the pause, capped at 1 h, never before a Retry-After;
    /// `[route] reprobe_paused_secs`), with no capability probe, marking
    /// the entries "source": "reprobe". Nothing due: exit 0 silently;
    /// another check running: exit 0 with one line. Writes no
    /// last_run.json, and ignores --ping-url and --prom-file, so that only
    /// the hourly run counts as a heartbeat; sends --notify alerts (a model
    /// back is news).
    #[arg(long, conflicts_with_all = ["list", "if_due"])]
    pub paused: bool,
    /// Send one message per run in which something changed (by default a
    /// model disabled, a provider down, and their recoveries: see
    /// --notify-on) to this webhook: ntfy, Slack, Discord or json+https://
    /// (repeatable). For a scheduled job put the URLs in LLMPROBE_NOTIFY
    /// in its env file instead (whitespace-separated), or name variables
    /// in `[notify] url_env`. An unreachable webhook only warns.
    #[arg(long = "notify", value_name = "URL")]
    pub notify: Vec<String>,
    /// Alert on a provider only once it has been down N runs in a row (a
    /// paused model: once its probe has failed N runs in a row); a model
    /// the run disables is alerted at once [default: [notify] after, else
    /// 2].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub notify_after: Option<u32>,
    /// What to alert on, comma-separated: paused (a model paused by a
    /// temporary failure, such as a 429), disabled, provider_down; the
    /// recovery of what was alerted is always said [default: [notify] on,
    /// else disabled,provider_down].
    #[arg(long, value_enum, value_delimiter = ',', value_name = "WHAT")]
    pub notify_on: Vec<crate::catalog::AlertOn>,
}

/// List every provider and model, with the source of its key (alias of `check --list`).
///
/// Also names the config file that was read, found in this order: --config,
/// LLMPROBE_CONFIG, ./llmprobe.toml, then the user config directory
/// ($XDG_CONFIG_HOME/llmprobe/llmprobe.toml, else
/// ~/.config/llmprobe/llmprobe.toml; %APPDATA%\llmprobe\llmprobe.toml on
/// Windows).
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  llmprobe providers                         every provider, its models and key variables
  llmprobe providers --json                  the same as JSON, with the config file used
  llmprobe providers --json | jq .config     which config file was read")]
pub struct ProvidersArgs {
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
}

/// What each provider serves now, from its own model list, against the catalog.
///
/// For each enabled provider with its key set (and keyless ones), reads the
/// provider's model list (cached in stats/model_lists.json, read again once
/// older than `list_every_secs`, a day by default) and shows the catalog's
/// models the list no longer carries (gone?), the models it carries that the
/// catalog does not (new: free where the list says so, with context length
/// and capabilities where it gives them), and the catalog's models it
/// carries (listed). Each list fetch counts in the usage ledger like a probe.
/// A list that cannot be read is said on its provider's line and never makes
/// a model look gone. Exit 0 when a list was read, 6 when every remote list
/// failed for want of a network (nothing written), 1 when none could be read
/// for another reason.
///
/// --write adds models to llmprobe.toml, keeping its comments: for a provider
/// of the embedded catalog as `models_add = [...]` (which adds to its models
/// and never freezes them), else to the provider's `models`. The file is
/// replaced atomically, the old one kept as llmprobe.toml.bak; a file that
/// cannot be parsed is left as it is. Without a config file, one is created
/// where the config lookup finds it from any directory: the user config
/// directory's llmprobe/llmprobe.toml (or --config's path).
#[derive(Debug, Default, Args)]
#[command(after_help = "\
Examples:
  llmprobe models                               every provider with a key
  llmprobe models --provider openrouter --new   what openrouter added
  llmprobe models --gone                        catalog models no list carries
  llmprobe models --refresh --json              read every list now, as JSON
  llmprobe models --write --add PROVIDER::MODEL  adopt a model `--new` showed
  llmprobe models --write --add-new-free openrouter
                                                adopt every new free model

Discovery does the adopting in `check` instead, on probation: set
discover = \"free\" on a provider (docs/discovery.md).")]
pub struct ModelsArgs {
    /// Only these providers (repeatable, or comma-separated).
    #[arg(long, value_name = "NAME", value_delimiter = ',')]
    pub provider: Vec<String>,
    /// Show only the listed models the catalog lacks.
    #[arg(long)]
    pub new: bool,
    /// Show only the catalog models the list lacks.
    #[arg(long)]
    pub gone: bool,
    /// Read every list now, however fresh the cache.
    #[arg(long)]
    pub refresh: bool,
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
    /// Add models to llmprobe.toml (with --add or --add-new-free).
    #[arg(long)]
    pub write: bool,
    /// With --write: a model to add, as PROVIDER::MODEL (repeatable).
    #[arg(long, value_name = "PROVIDER::MODEL", requires = "write")]
    pub add: Vec<String>,
    /// With --write: add every new model PROVIDER's list marks free
    /// (repeatable).
    #[arg(long, value_name = "PROVIDER", requires = "write")]
    pub add_new_free: Vec<String>,
}

/// `check --capabilities`: which capability probes a run may make.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum CapabilityProbes {
    /// Only the capabilities the catalog lists for each model.
    #[default]
    Listed,
    /// Every capability of every probed model.
    All,
    /// No capability probe.
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GroupBy {
    Provider,
    Model,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RollupFormat {
    Md,
    Json,
    Csv,
    Prom,
    /// A self-contained status page (90-day window by default).
    Html,
    /// A shields-style SVG badge for one provider or model (--provider).
    Badge,
}

/// What a badge shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum BadgeMetric {
    /// The share of probes that passed over the window.
    #[default]
    Uptime,
    /// The median latency over the window.
    Latency,
}

/// Per-provider (or per-model) uptime, latency and sample counts.
///
/// Streams the whole health log once, in flat memory (p95 comes from a fixed
/// log-scale histogram, within 2%). Legacy averaged entries count as
/// `sample_count` probes; `disabled_skip` rows are not probes. A window
/// without data says "no samples", never 100%.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  llmprobe rollup                          Markdown table of the last 24 h
  llmprobe rollup --window 7d --by model   one row per provider::model
  llmprobe rollup --window all --json      the whole log as JSON (--format json)
  llmprobe rollup --format csv > uptime.csv
  llmprobe rollup --readme README.md       replace the block between the markers
  llmprobe rollup --readme README.md --markers '<!-- H -->' '<!-- /H -->'
  llmprobe rollup --format prom --output /var/lib/node_exporter/llmprobe.prom
  llmprobe rollup --capabilities           capability pass rates, per model
  llmprobe rollup --format html --output status.html            the status page (90 days)
  llmprobe rollup --format html --public --output status.html   for publishing
  llmprobe rollup --format badge --provider groq --window 7d --output groq.svg
  llmprobe rollup --format badge --provider groq --metric latency > latency.svg
  llmprobe rollup --format badge --provider groq --model openai/gpt-oss-20b

Status icons: ✅ ≥90% uptime, ⚠️ 60–90%, ❌ <60%, — no samples.
Badges say their figure in words (99.2%, 812 ms, no data) on a colour from
the same grades; latency: ≤2 s good, ≤5 s fair (docs/badges.md). A badge of
a provider or model missing from both the catalog and the log is an error.
--readme writes only when the block changes; its only time is that of the
newest probe, so a rerun without new data leaves the file alone.")]
pub struct RollupArgs {
    /// Group rows by provider or by provider::model.
    #[arg(long, value_enum, default_value = "provider")]
    pub by: GroupBy,
    /// 24h, 7d, 30d, all, or any duration such as 36h or 90m [default:
    /// 90d for --format html, 24h otherwise].
    #[arg(long)]
    pub window: Option<String>,
    #[arg(long, value_enum, default_value = "md")]
    pub format: RollupFormat,
    /// The same as --format json.
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// Write to this file atomically instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Replace the block between the markers in this file, atomically.
    #[arg(long, value_name = "FILE")]
    pub readme: Option<PathBuf>,
    /// Start and end markers for --readme.
    #[arg(long, num_args = 2, value_names = ["START", "END"])]
    pub markers: Option<Vec<String>>,
    /// Leave out the uptime sparkline.
    #[arg(long)]
    pub no_trend: bool,
    /// Capability probes' pass rates instead of uptime, read from
    /// capability_log.json: per model and capability, probes, passes,
    /// pass rate and the latest verdict (rows are always per model).
    #[arg(long)]
    pub capabilities: bool,
    /// Only this provider (repeatable); a badge needs exactly one.
    #[arg(long, value_name = "PROVIDER")]
    pub provider: Vec<String>,
    /// Leave this provider out (repeatable).
    #[arg(long, value_name = "PROVIDER")]
    pub exclude: Vec<String>,
    /// --format badge: one model of --provider rather than the provider.
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// --format badge: uptime, or the median latency of probes that got a
    /// response.
    #[arg(long, value_enum, default_value = "uptime")]
    pub metric: BadgeMetric,
    /// --format html: the form for publishing: no error text, base URLs,
    /// host names or account ids.
    #[arg(long)]
    pub public: bool,
}

/// A 24-hour summary with warnings, for the start of a working session.
///
/// Per provider: [ OK ] ≥90% uptime, [WARN] ≥60%, [POOR] below (the same
/// grades as rollup's ✅ ⚠️ ❌), [DOWN] when the last probe of every model
/// failed with an error; then the paused and disabled models, a ROUTING
/// ADVISORY for every provider under 60% or whose last probe failed, and a
/// STALE warning when nothing was probed in 2 hours. Reads the log backwards
/// from its end, so it costs the same on a year of history as on a day.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  llmprobe brief
  llmprobe brief --window 6h
  llmprobe brief --provider groq         one provider (repeatable, or groq,mistral)
  llmprobe brief --all                   every catalog model's capabilities, keys or not
  llmprobe brief --json | jq '.advisories'
  llmprobe brief --quiet-if-healthy      nothing at all when all is well (for a shell profile)

It also warns when no schedule is installed and check has not run for
twice the interval (1h unless `schedule install --every` said otherwise),
or when the installed schedule has not run for that long; --json has
`healthy` and `warnings`. Once capabilities have been probed, it lists
each model's verdicts and context window (--json: `models`): the models
probed in the window and those whose provider has its key set; a line
under the table counts the others, which --all shows.")]
pub struct BriefArgs {
    /// 24h, 7d, all, or any duration such as 6h or 90m.
    #[arg(long, default_value = "24h")]
    pub window: String,
    /// Only these providers: their rows, models, advisories and warnings.
    #[arg(long, short = 'p', value_delimiter = ',', value_name = "NAME", add = Names::Providers)]
    pub provider: Vec<String>,
    /// List every catalog model's capabilities, not only those probed in
    /// the window or whose provider has its key set.
    #[arg(long)]
    pub all: bool,
    /// Print the same information as JSON.
    #[arg(long)]
    pub json: bool,
    /// Print nothing when all is well: data fresh, no routing advisory, no
    /// warning about the schedule.
    #[arg(long)]
    pub quiet_if_healthy: bool,
}

/// Show model states, or change one by hand.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  llmprobe state                                 every model, with its last probe
  llmprobe state --state paused                  only paused models
  llmprobe state --provider groq --json          one provider, as JSON
  llmprobe state disable groq::openai/gpt-oss-20b --reason \"retired\"
  llmprobe state enable groq::openai/gpt-oss-20b
  llmprobe state pause mistral::mistral-small-latest --reason \"quota\"
  llmprobe state reset groq::openai/gpt-oss-20b   forget one model's state
  llmprobe state reset --all                     forget every state (all active)

Once capabilities have been probed, a CAPABILITIES column shows each
model's verdicts (tools ✔ json ✗ vision ?), the oldest verdict's age and
its context window; --json has `capabilities` and `context_window`.

Changes take the data lock and rewrite model_state.json atomically; an
unknown name is refused with the closest known ones.")]
pub struct StateArgs {
    #[command(subcommand)]
    pub action: Option<StateAction>,
    /// Only models in this state.
    #[arg(long, value_enum)]
    pub state: Option<StateFilter>,
    /// Only these providers.
    #[arg(long, short = 'p', value_delimiter = ',', value_name = "NAME", add = Names::Providers)]
    pub provider: Vec<String>,
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StateFilter {
    Active,
    Paused,
    Disabled,
}

#[derive(Debug, Subcommand)]
pub enum StateAction {
    /// Put a model back in rotation and clear its failure count.
    Enable(StateChange),
    /// Take a model out of rotation until enabled by hand; check skips it.
    Disable(StateChange),
    /// Take a model out of rotation until its next passing probe.
    Pause(StateChange),
    /// Forget the state of one model, or of all models (--all).
    ///
    /// `--all` also recovers from a model_state.json that cannot be parsed:
    /// the file is moved aside to model_state.json.corrupt-<time>, never
    /// deleted, and every model starts active.
    Reset {
        /// provider::model
        #[arg(conflicts_with = "all", add = Names::ModelKeys)]
        model: Option<String>,
        /// Forget every model's state.
        #[arg(long)]
        all: bool,
    },
}

#[derive(Debug, Args)]
pub struct StateChange {
    /// provider::model
    #[arg(add = Names::ModelKeys)]
    pub model: String,
    /// Why; shown by `state` and `brief`.
    #[arg(long)]
    pub reason: Option<String>,
}

/// Send a prompt to a model that works now, or serve an endpoint that does
/// so for every request, for OpenAI and Anthropic clients.
///
/// Only `active` models are used (see `llmprobe state`). Candidates are
/// tried in order, falling back on failure, at most --max-attempts within
/// --budget; failing models and keys cool down, and the cooldowns persist
/// in route_state.json in the stats directory.
///
/// Model choice: `auto` (or none) is every active model, by config
/// `priority`, then 24 h uptime, then median latency; a plain id is every
/// active provider serving it; `provider::model` pins one (fallback only
/// across its keys); an alias from `[aliases]` is its list, in order.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  llmprobe route \"What is 2+2?\"                  one answer on stdout; the model used on stderr
  echo \"Summarise: ...\" | llmprobe route          the prompt from stdin
  llmprobe route --model groq::openai/gpt-oss-20b \"hi\"
  llmprobe route --json --system \"Be terse.\" \"hi\"  the OpenAI-style response plus the attempt trail
  llmprobe route --serve                           serve on 127.0.0.1:8080
  llmprobe route --serve --listen 127.0.0.1:9000
  llmprobe route --status                          what route knows, no server
  llmprobe route --status --shared-state redis://127.0.0.1:6379/0
  llmprobe route --serve --shared-state redis://127.0.0.1:6379/0 --record shared
                                                   states and health from check --shared-state
  llmprobe route --serve --notify json+http://127.0.0.1:8080/hook
                                                   alert on day-long benches and degraded mode

With --serve, point OpenAI clients (Chat Completions, Responses, Completions)
at http://127.0.0.1:8080/v1 and Anthropic clients (Messages) at
http://127.0.0.1:8080, with any API key, or the token named by [route]
auth_token_env / --auth-token-env. docs/routing.md says which clients work.
Exit codes: 0 answered, 2 usage, 4 route_state.json unreadable, 5 every
candidate failed (the message lists each attempt and when to retry).")]
#[command(group(clap::ArgGroup::new("shares").args(["serve", "status"])))]
pub struct RouteArgs {
    /// The prompt; read from stdin when absent (and not --serve).
    pub prompt: Option<String>,
    /// Serve an endpoint (OpenAI Chat Completions, Responses and Completions,
    /// Anthropic Messages) instead of answering one prompt.
    #[arg(long)]
    pub serve: bool,
    /// Where --serve listens: HOST:PORT, such as 127.0.0.1:9000 or
    /// localhost:9000 [default: 127.0.0.1:8080, or [route] listen].
    #[arg(long, value_name = "ADDR", value_parser = crate::http_server::parse_listen)]
    pub listen: Option<std::net::SocketAddr>,
    /// auto, a model id, an alias, or a pinned provider::model [default: auto].
    #[arg(long, short = 'm', value_name = "MODEL", add = Names::RouteModels)]
    pub model: Option<String>,
    /// A system message.
    #[arg(long, value_name = "TEXT")]
    pub system: Option<String>,
    /// Most tokens to generate.
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    #[arg(long, value_name = "T", allow_negative_numbers = true)]
    pub temperature: Option<f64>,
    /// Print the whole OpenAI-style response and the attempt trail as JSON.
    #[arg(long)]
    pub json: bool,
    /// At most this many attempts per request [default: 20, or [route]].
    #[arg(long, value_name = "N")]
    pub max_attempts: Option<u32>,
    /// Every attempt starts within this many seconds [default: 45, or [route]].
    #[arg(long, value_name = "SECS")]
    pub budget: Option<f64>,
    /// The variable holding the bearer token --serve requires.
    #[arg(long, value_name = "VAR")]
    pub auth_token_env: Option<String>,
    /// Share cooldowns, limits and usage with other --serve instances
    /// through Redis (redis://host:port/db); with --status, show that
    /// shared state [default: [route] shared_state].
    #[arg(long, value_name = "URL", requires = "shares")]
    pub shared_state: Option<String>,
    /// Where model states, recent health and capability verdicts come
    /// from: this machine's stats directory, or what `check
    /// --shared-state` publishes to the --shared-state Redis [default:
    /// [route] record, else local].
    #[arg(long, value_enum, value_name = "FROM")]
    pub record: Option<crate::catalog::Record>,
    /// With --serve, alert this webhook (repeatable; as check --notify:
    /// ntfy, Slack, Discord or json+https://) when a provider or key is
    /// benched for the day (402, 403, a spent quota) and when route enters
    /// or leaves degraded mode, as LLMPROBE_NOTIFY and [notify] url_env
    /// do without the flag. An unreachable webhook only warns.
    #[arg(long = "notify", value_name = "URL", requires = "serve")]
    pub notify: Vec<String>,
    /// Print what GET /v1/providers shows (states, keys, cooldowns, usage,
    /// uptime) as a table, or JSON with --json, without a server; then
    /// stop. Reads Redis when the state is shared.
    #[arg(long, conflicts_with = "serve")]
    pub status: bool,
}

/// Alerts: webhooks told when a model or a provider changes state.
///
/// Webhook URLs are secrets (their path is the credential), so they come
/// from where keys come from, never from a file llmprobe writes: `check
/// --notify URL` (and `route --serve --notify URL`), the LLMPROBE_NOTIFY
/// variable (URLs separated by whitespace, set in the env file of
/// `schedule install`), and the variables `[notify] url_env =
/// ["SLACK_HOOK"]` in llmprobe.toml names. `check` alerts on models and
/// providers; `route --serve` on keys benched for the day and on degraded
/// mode.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  llmprobe notify test                                   a test message to every configured channel
  llmprobe notify test json+http://127.0.0.1:8080/hook   to this URL only

The channel comes from the URL: https://ntfy.sh/TOPIC (or ntfy+https://HOST/TOPIC),
https://hooks.slack.com/services/... (or slack+https://...), https://discord.com/api/webhooks/...
(or discord+https://...), and json+https://... for a generic JSON POST.
See docs/alerts.md.")]
pub struct NotifyArgs {
    #[command(subcommand)]
    pub action: NotifyAction,
}

#[derive(Debug, Subcommand)]
pub enum NotifyAction {
    Test(NotifyTestArgs),
}

/// Send a test message to each configured channel (or to URL alone) and
/// report how each went, so that a broken webhook shows before a model dies.
///
/// One line per channel on stdout, naming it by scheme and host only, with
/// `ok (HTTP 200)` or `failed (connection refused)`. Each delivery has the retries of
/// `check --ping-url` (3 attempts, 1 s then 2 s apart, for a timeout, a
/// dropped connection, 408, 429 or a 5xx).
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  llmprobe notify test                                   every configured channel
  llmprobe notify test json+http://127.0.0.1:8080/hook   this URL only

Configured channels: LLMPROBE_NOTIFY (URLs separated by spaces) and the
variables `[notify] url_env` in llmprobe.toml names.

Exit codes: 0 every channel took the message, 1 at least one did not, 2 a URL
names no channel, or no channel is configured.")]
pub struct NotifyTestArgs {
    /// Send to this webhook URL only, instead of the configured channels.
    #[arg(value_name = "URL")]
    pub url: Option<String>,
}

/// Run `check` on a schedule: install, remove or show the job (cron,
/// systemd user timer, or Windows Task Scheduler).
///
/// The job runs this very binary with absolute paths (stats directory,
/// config, prompts) from the stats directory, and takes its keys from
/// --env-file, never from its own text. Installing again replaces the job;
/// it is never duplicated. `schedule.json` in the stats directory records
/// what was installed, so that `brief` can tell.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  llmprobe schedule install --dry-run             print the cron entry; change nothing
  llmprobe schedule install                       install it: every hour, from cron
  llmprobe schedule show                          what is installed, the next run, the last run
  llmprobe schedule uninstall                     remove the entry, and only that

The backend is cron, except on Windows (Task Scheduler); --with systemd
writes user units instead. See `llmprobe schedule install --help`.")]
pub struct ScheduleArgs {
    #[command(subcommand)]
    pub action: ScheduleAction,
}

#[derive(Debug, Subcommand)]
pub enum ScheduleAction {
    Install(ScheduleInstallArgs),
    Uninstall(ScheduleUninstallArgs),
    Show(ScheduleShowArgs),
    /// Write the example files of scripts/ (crontab.example, the systemd
    /// units, the Task Scheduler XML, install-task.ps1) into DIR.
    #[command(hide = true)]
    Templates {
        dir: PathBuf,
    },
}

/// Install the scheduled `check` run, or replace the one installed.
///
/// cron: an entry in your crontab, between `# >>> llmprobe schedule >>>`
/// markers, that fires every quarter of the interval (15 min for 1h) and
/// runs `check --if-due`, so that a machine that slept catches up; output
/// goes to check.log in the stats directory (1 MiB, then check.log.1).
/// systemd: llmprobe-check.service and .timer in ~/.config/systemd/user
/// (Persistent=true catches up). Task Scheduler: an XML task, installed
/// with schtasks (StartWhenAvailable catches up).
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  llmprobe schedule install --dry-run                  show the cron entry, change nothing
  llmprobe schedule install --env-file keys.env        keys from keys.env (NAME=value lines)
  llmprobe schedule install --every 30m
  llmprobe schedule install --reprobe 10m --dry-run    also re-probe paused models every 10 min
  llmprobe schedule install --with systemd --dry-run   the two systemd units
  llmprobe schedule install --with systemd --enable    write them and start the timer
  llmprobe schedule install --with task-scheduler --dry-run   the Task Scheduler XML and command

The job never holds a key: cron sources --env-file, systemd reads it
(EnvironmentFile=), and Task Scheduler runs inherit your user environment
variables (setx NAME value). Webhook URLs are secrets too: alerts
(LLMPROBE_NOTIFY=URL…) and the monitor ping (LLMPROBE_PING_URL=URL) go in
the same file, never on the job's command line (--notify and --ping-url
are refused here).")]
pub struct ScheduleInstallArgs {
    /// How often check runs: 5m to 168h, in whole minutes.
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse, default_value = "1h")]
    pub every: std::time::Duration,
    /// cron, systemd or task-scheduler [default: task-scheduler on Windows, cron elsewhere].
    #[arg(long = "with", value_enum, value_name = "BACKEND")]
    pub backend: Option<crate::schedule::Backend>,
    /// The file the job takes its keys from: NAME=value lines (cron, systemd).
    #[arg(long, value_name = "FILE")]
    pub env_file: Option<PathBuf>,
    /// Print what would be installed, and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// systemd: also run `systemctl --user enable --now llmprobe-check.timer`.
    #[arg(long)]
    pub enable: bool,
    /// Also run `check --paused` this often (e.g. 10m: whole minutes that
    /// divide an hour, shorter than --every), so that a model paused by one
    /// 429 is back within minutes: a second cron line, a second systemd
    /// timer (llmprobe-reprobe.timer), or a second task (llmprobe-reprobe).
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse)]
    pub reprobe: Option<std::time::Duration>,
    /// Refused: a webhook URL is a secret, and the job would show it. Put
    /// it in the env file as LLMPROBE_NOTIFY=URL.
    #[arg(long = "notify", value_name = "URL", hide = true)]
    pub notify: Vec<String>,
    /// Refused: a ping URL is a secret, and the job would show it. Put it
    /// in the env file as LLMPROBE_PING_URL=URL.
    #[arg(long, value_name = "URL", hide = true)]
    pub ping_url: Option<String>,
}

/// Remove the scheduled `check` run, and nothing else.
///
/// cron: only the lines between our markers go; every other line of your
/// crontab stays byte for byte. systemd: the timer is stopped and both
/// units are removed, if llmprobe wrote them. Task Scheduler: the
/// llmprobe-check task is deleted.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  llmprobe schedule uninstall --dry-run      what would be removed
  llmprobe schedule uninstall                remove it, wherever it is installed
  llmprobe schedule uninstall --with cron    only from the crontab")]
pub struct ScheduleUninstallArgs {
    /// Only this backend [default: every one where llmprobe's job is found].
    #[arg(long = "with", value_enum, value_name = "BACKEND")]
    pub backend: Option<crate::schedule::Backend>,
    /// Print what would be removed, and change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// What is installed, where, when it runs next, and whether the last run
/// is stale (older than twice the interval).
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  llmprobe schedule show
  llmprobe schedule show --json
  llmprobe schedule show --with systemd      ask systemctl for the next run")]
pub struct ScheduleShowArgs {
    /// Only this backend [default: every one llmprobe's job could be in].
    #[arg(long = "with", value_enum, value_name = "BACKEND")]
    pub backend: Option<crate::schedule::Backend>,
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Start local fake providers and run `check` against them: no keys, no network.
///
/// The demo keeps its files in your own state directory
/// (~/.local/state/llmprobe/demo on Linux), not in ./stats, so that it never
/// mixes with real data or with another user's demo; --stats-dir or LLMPROBE_STATS_DIR puts them
/// elsewhere. Each run continues the earlier ones, so models move between
/// states from run to run; --fresh starts over.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  llmprobe demo                     fake providers, fast spacing, then summary, log and states
  llmprobe demo --fresh             forget earlier demo runs and start over
  llmprobe demo --serve             then route over the fakes, with lines to paste (Ctrl-C stops)
  llmprobe demo --stats-dir demo    keep the demo's files in ./demo instead

From a source checkout: cargo run -- demo")]
pub struct DemoArgs {
    /// Then keep the fake providers up and serve `route --serve` over them,
    /// printing lines to paste (curl, the OpenAI SDK, a one-shot route,
    /// the demo's reasoning model by name); Ctrl-C stops it. The one-shot
    /// lines read this demo's own config, demo-PORT.toml beside its files,
    /// removed when it stops.
    #[arg(long)]
    pub serve: bool,
    /// Where --serve listens [default: 127.0.0.1 on a free port].
    #[arg(long, value_name = "ADDR", value_parser = crate::http_server::parse_listen, requires = "serve")]
    pub listen: Option<std::net::SocketAddr>,
    /// Seconds between probes on one provider.
    #[arg(long, default_value = "0.3")]
    pub spacing: f64,
    /// Delete the files of earlier demo runs first (only demo probes are
    /// ever deleted).
    #[arg(long)]
    pub fresh: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
    Powershell,
    Elvish,
}

/// Print a shell completion script for llmprobe on stdout.
///
/// The script asks llmprobe at each Tab, so it offers the flags of the
/// binary that runs, and the provider and model names of your config: the
/// one the line being completed would read (its --config, else
/// LLMPROBE_CONFIG, else ./llmprobe.toml, else the user config directory),
/// or the embedded catalog when there is none or it cannot be read. The
/// script runs `llmprobe` from PATH when that is this binary, else this
/// binary by its full path (as from `cargo run -- completions bash`).
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  llmprobe completions bash > ~/.local/share/bash-completion/completions/llmprobe
  llmprobe completions zsh > ~/.zfunc/_llmprobe       with fpath+=~/.zfunc in ~/.zshrc
  llmprobe completions fish > ~/.config/fish/completions/llmprobe.fish
  llmprobe completions powershell | Out-String | Invoke-Expression   in $PROFILE")]
pub struct CompletionsArgs {
    /// The shell to complete in.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Print llmprobe's manual page (roff, every subcommand included) on stdout.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  llmprobe man > llmprobe.1            then: man ./llmprobe.1
  llmprobe man | man -l -              read it at once
  llmprobe man > ~/.local/share/man/man1/llmprobe.1")]
pub struct ManArgs {}

#[derive(Debug, Args)]
pub struct FakeArgs {
    /// Port on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value = "0")]
    pub port: u16,
    /// Write the bound address here once listening.
    #[arg(long, value_name = "FILE")]
    pub addr_file: Option<PathBuf>,
    /// Append one JSON line per request (time, path, model, body) to this file.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Append one JSON line (time, model, bytes sent) to this file for each
    /// streamed answer whose client closed the connection before its end.
    #[arg(long, value_name = "FILE")]
    pub record_closes: Option<PathBuf>,
    /// Script a model's behaviour: MODEL=B1,B2,… cycled per request (repeatable).
    #[arg(
        long = "script",
        value_name = "MODEL=BEHAVIOURS",
        long_help = crate::fake::script_help()
    )]
    pub scripts: Vec<String>,
    /// Artificial latency added to every answer, in ms.
    #[arg(long, default_value = "0")]
    pub latency_ms: u64,
    /// Answer nothing until FILE exists (for tests that change something
    /// in the middle of a run).
    #[arg(long, value_name = "FILE")]
    pub hold_until: Option<PathBuf>,
    /// Serve the model lists (GET …/models) from this JSON file, read again
    /// on every list request (without it: the --script models).
    #[arg(long, value_name = "FILE", long_help = crate::fake::MODELS_FILE_HELP)]
    pub models_file: Option<PathBuf>,
    /// Make the model lists fail: [SCOPE=]B1,B2,… cycled per list request
    /// (repeatable).
    #[arg(
        long = "list-behaviour",
        value_name = "[SCOPE=]BEHAVIOURS",
        long_help = crate::fake::list_help()
    )]
    pub list_behaviours: Vec<String>,
}

/// The names a value takes, for shell completion: a marker only, as
/// parsing accepts any string (a wrong name is refused later, with the
/// closest known ones). The completer (`cmd::completions`) offers the names
/// from the config that the command line being completed would read, so
/// they are never listed in `--help` and the catalog is never read on an
/// ordinary run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Names {
    /// Provider names.
    Providers,
    /// `provider::model` keys.
    ModelKeys,
    /// `provider::model` keys and model ids (`check --model`).
    Models,
    /// The same, `auto` and the `[aliases]` (`route --model`).
    RouteModels,
}

impl clap::builder::ArgExt for Names {}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    /// The help states the thresholds of [`crate::grade`].
    #[test]
    fn help_states_the_grade_thresholds() {
        let good = format!("≥{:.0}%", crate::grade::GOOD * 100.0);
        let fair = format!("{:.0}%", crate::grade::FAIR * 100.0);
        for sub in ["brief", "rollup"] {
            let mut cmd = Cli::command();
            let help = cmd
                .find_subcommand_mut(sub)
                .unwrap()
                .render_long_help()
                .to_string();
            assert!(
                help.contains(&good) && help.contains(&fair),
                "{sub}: {help}"
            );
        }
    }

    /// Every provider::model an example names is in the embedded catalog, so
    /// that the example works as written (`state pause` refuses an unknown
    /// model with exit 2).
    #[test]
    fn examples_name_models_of_the_embedded_catalog() {
        let known: Vec<String> = crate::catalog::Catalog::embedded().model_keys().collect();
        let mut cmd = Cli::command();
        let mut helps = vec![cmd.render_long_help().to_string()];
        for sub in cmd.get_subcommands_mut() {
            helps.push(sub.render_long_help().to_string());
        }
        let mut checked = 0;
        for word in helps.iter().flat_map(|h| h.split_whitespace()) {
            if let Some((p, m)) = crate::catalog::ModelKey::split(word)
                && !p.is_empty()
                && !m.is_empty()
                && word != "provider::model"
                && p.chars().all(|c| c.is_ascii_lowercase())
            {
                assert!(
                    known.iter().any(|k| k == word),
                    "{word} is not in the catalog"
                );
                checked += 1;
            }
        }
        assert!(checked >= 3, "{checked}");
    }

    #[test]
    fn global_flags_work_after_the_subcommand() {
        let a = Cli::try_parse_from(["llmprobe", "check", "--stats-dir", "X"]).unwrap();
        let b = Cli::try_parse_from(["llmprobe", "--stats-dir", "X", "check"]).unwrap();
        assert_eq!(a.global.stats_dir, b.global.stats_dir);
    }
}
