//! `schedule install | uninstall | show` through the real binary, against
//! fake `crontab`, `systemctl` and `schtasks` first on `PATH` (never the
//! machine's own); the
//! Task Scheduler XML through an XML parser; the files under `scripts/`
//! against the generator; and `brief`'s schedule warnings, its
//! `--quiet-if-healthy`, and the README's shell-profile and agent lines,
//! with the test clock (never a sleep).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::{BIN, Env, Fake, advance, clock_env, fake_tools};

const SECRET: &str = "sk-test-schedule-0123456789abcdef";
const BEGIN: &str = "# >>> llmprobe schedule >>>";

/// `keys.env` in the test directory, holding the fake key, mode 600.
fn keys_env(env: &Env) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = env.write(
        "keys.env",
        format!("# keys for the scheduled check\nGROQ_API_KEY={SECRET}\n"),
    );
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

#[track_caller]
fn no_secret(what: &str, text: &str) {
    assert!(!text.contains(SECRET), "{what} holds the key:\n{text}");
}

fn canonical(p: &Path) -> String {
    std::fs::canonicalize(p).unwrap().display().to_string()
}

fn json(stdout: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn cron_install_replaces_and_uninstall_restores_the_crontab_byte_for_byte() {
    let mut env = Env::new();
    let tools = fake_tools(&mut env);
    env.env("GROQ_API_KEY", SECRET);
    let root = canonical(env.path());
    env.write("llmprobe.toml", "[defaults]\nspacing_secs = 60\n");
    keys_env(&env);
    // Comments, a blank line, trailing blanks, a % of the user's, and no
    // final newline: all of it must come back as it was.
    let user: &[u8] = b"MAILTO=me@example.com\n\n# nightly backup\n0 3 * * * /usr/bin/backup --all  \n*/5 * * * * echo '50%' done";
    std::fs::write(&tools.crontab, user).unwrap();
    let install = [
        "schedule",
        "install",
        "--env-file",
        "keys.env",
        "--stats-dir",
        "rel-stats",
    ];
    let stats = format!("{root}/rel-stats");
    let marker = Path::new(&stats).join("schedule.json");

    // --dry-run prints the entry and changes nothing.
    let mut args = install.to_vec();
    args.push("--dry-run");
    let dry = env.run(&args).ok();
    assert!(
        dry.stdout.contains("would install in your crontab"),
        "{}",
        dry.stdout
    );
    assert!(dry.stdout.contains(BEGIN), "{}", dry.stdout);
    assert_eq!(std::fs::read(&tools.crontab).unwrap(), user);
    assert!(!marker.exists() && !Path::new(&stats).exists());

    let first = env.run(&install).ok();
    let installed = std::fs::read(&tools.crontab).unwrap();
    let text = String::from_utf8(installed.clone()).unwrap();
    assert_eq!(text.matches(BEGIN).count(), 1, "{text}");
    assert!(
        installed.ends_with(user),
        "the user's lines follow, untouched:\n{text}"
    );
    let entry = text.lines().find(|l| l.starts_with("*/")).unwrap();
    // Absolute paths for the binary, the stats directory, the config and
    // the env file; the key only by name, in the file.
    let exe = canonical(Path::new(BIN));
    assert!(
        entry.starts_with(&format!("*/15 * * * * cd {stats} && ")),
        "{entry}"
    );
    assert!(
        entry.contains(&format!(
            "exec {exe} check --if-due 45m --jitter 5m --stats-dir {stats} --config {root}/llmprobe.toml;"
        )),
        "{entry}"
    );
    assert!(
        entry.contains(&format!("set -a && . {root}/keys.env && set +a")),
        "{entry}"
    );
    assert!(entry.contains(">>check.log 2>&1"), "{entry}");
    assert!(Path::new(&stats).is_dir(), "the job cds into it");
    let m = json(&std::fs::read_to_string(&marker).unwrap());
    assert_eq!(
        (m["backend"].as_str(), m["every"].as_str()),
        (Some("cron"), Some("1h"))
    );

    // Installing again replaces the entry: still exactly one.
    let second = env.run(&install).ok();
    assert!(
        second
            .stdout
            .contains("replacing the earlier llmprobe entry"),
        "{}",
        second.stdout
    );
    assert_eq!(std::fs::read(&tools.crontab).unwrap(), installed);

    let show = env
        .run(&["schedule", "show", "--stats-dir", "rel-stats"])
        .ok();
    for want in [
        "cron: your crontab",
        "next trigger: ",
        "recorded: cron, every 1h",
        "last run: none recorded",
    ] {
        assert!(show.stdout.contains(want), "{want}:\n{}", show.stdout);
    }
    let v = json(
        &env.run(&["schedule", "show", "--json", "--stats-dir", "rel-stats"])
            .ok()
            .stdout,
    );
    assert_eq!(v["jobs"][0]["backend"], "cron");
    assert_eq!(v["jobs"].as_array().unwrap().len(), 1);

    // Without --env-file, the user is told which variables the job lacks:
    // by name, never by value.
    let no_env = env.run(&["schedule", "install", "--dry-run"]).ok();
    assert!(
        no_env.stderr.contains("GROQ_API_KEY: set in this shell"),
        "{}",
        no_env.stderr
    );

    for (what, text) in [
        ("the crontab", text.as_str()),
        ("the marker", &std::fs::read_to_string(&marker).unwrap()),
        ("dry-run output", &format!("{}{}", dry.stdout, dry.stderr)),
        (
            "install output",
            &format!("{}{}", first.stdout, first.stderr),
        ),
        ("show output", &show.stdout),
        (
            "no-env-file output",
            &format!("{}{}", no_env.stdout, no_env.stderr),
        ),
    ] {
        no_secret(what, text);
    }

    let out = env
        .run(&["schedule", "uninstall", "--stats-dir", "rel-stats"])
        .ok();
    assert!(
        out.stdout.contains("removed from your crontab"),
        "{}",
        out.stdout
    );
    assert_eq!(std::fs::read(&tools.crontab).unwrap(), user);
    assert!(!marker.exists());
    let again = env
        .run(&["schedule", "uninstall", "--stats-dir", "rel-stats"])
        .ok();
    assert!(
        again.stdout.contains("no llmprobe schedule found"),
        "{}",
        again.stdout
    );
    assert_eq!(std::fs::read(&tools.crontab).unwrap(), user);

    // No crontab at all ("no crontab for …"): installed alone, and
    // uninstalling leaves no crontab, as before.
    std::fs::remove_file(&tools.crontab).unwrap();
    env.run(&install).ok();
    let only = std::fs::read_to_string(&tools.crontab).unwrap();
    assert!(
        only.starts_with(BEGIN) && only.ends_with("# <<< llmprobe schedule <<<\n"),
        "{only}"
    );
    env.run(&[
        "schedule",
        "uninstall",
        "--with",
        "cron",
        "--stats-dir",
        "rel-stats",
    ])
    .ok();
    assert!(!tools.crontab.exists());

    // An entry removed by hand: show says the record is out of date.
    env.run(&install).ok();
    std::fs::write(&tools.crontab, user).unwrap();
    let show = env
        .run(&["schedule", "show", "--stats-dir", "rel-stats"])
        .ok();
    assert!(
        show.stdout.contains("no llmprobe schedule is installed")
            && show.stdout.contains(
                "WARNING: schedule.json says cron (every 1h) was installed, but no llmprobe job was found"
            ),
        "{}",
        show.stdout
    );
}

#[test]
fn a_crontab_whose_markers_do_not_pair_is_left_alone() {
    let mut env = Env::new();
    let tools = fake_tools(&mut env);
    let bad = format!("0 1 * * * x\n{BEGIN}\n*/15 * * * * old entry\n");
    std::fs::write(&tools.crontab, &bad).unwrap();
    for args in [&["schedule", "install"][..], &["schedule", "uninstall"]] {
        let r = env.run(args).code(4);
        assert!(
            r.stderr.contains("crontab")
                && r.stderr.contains("line 2")
                && r.stderr.contains("untouched"),
            "{}",
            r.stderr
        );
        assert_eq!(std::fs::read_to_string(&tools.crontab).unwrap(), bad);
    }
    assert!(!env.stats().join("schedule.json").exists());
}

#[test]
fn bad_flags_and_a_missing_crontab_are_named() {
    let mut env = Env::new();
    let _tools = fake_tools(&mut env);
    keys_env(&env);
    for (args, names) in [
        (&["schedule", "install", "--every", "90s"][..], "--every"),
        (&["schedule", "install", "--every", "169h"], "--every"),
        (&["schedule", "install", "--enable"], "--with systemd"),
        (
            &["schedule", "install", "--env-file", "none.env"],
            "none.env",
        ),
        (
            &[
                "schedule",
                "install",
                "--with",
                "task-scheduler",
                "--env-file",
                "keys.env",
            ],
            "setx",
        ),
        (&["schedule", "install", "--with", "anacron"], "anacron"),
    ] {
        let r = env.run(args).code(2);
        assert!(r.stderr.contains(names), "{args:?}: {}", r.stderr);
    }
    // An env file the shell and systemd would read differently: refused by
    // line, and the value is never echoed.
    env.write("export.env", format!("A=1\nexport GROQ_API_KEY={SECRET}\n"));
    let r = env
        .run(&["schedule", "install", "--env-file", "export.env"])
        .code(2);
    assert!(r.stderr.contains("export.env, line 2"), "{}", r.stderr);
    no_secret("the error", &r.stderr);

    // No crontab program: a system error that says what to do.
    let empty = env.path().join("empty-bin");
    std::fs::create_dir_all(&empty).unwrap();
    env.env("PATH", empty.to_str().unwrap());
    let r = env.run(&["schedule", "install"]).code(7);
    assert!(
        r.stderr.contains("crontab") && r.stderr.contains("--with systemd"),
        "{}",
        r.stderr
    );
}

#[test]
fn systemd_units_are_written_and_enabled_only_when_asked() {
    let mut env = Env::new();
    let tools = fake_tools(&mut env);
    env.env("GROQ_API_KEY", SECRET);
    let xdg = env.path().join("xdg");
    env.env("XDG_CONFIG_HOME", xdg.to_str().unwrap());
    let keys = canonical(&keys_env(&env));
    let stats = env.stats().display().to_string();
    let exe = canonical(Path::new(BIN));
    let dir = xdg.join("systemd/user");
    let (service, timer) = (
        dir.join("llmprobe-check.service"),
        dir.join("llmprobe-check.timer"),
    );

    // Switching from cron: the cron job would run too, and the user is told.
    env.run(&["schedule", "install"]).ok();
    let out = env
        .run(&[
            "schedule",
            "install",
            "--with",
            "systemd",
            "--env-file",
            "keys.env",
        ])
        .ok();
    assert!(
        out.stderr
            .contains("schedule.json says a cron job is installed too"),
        "{}",
        out.stderr
    );
    assert!(
        out.stdout.contains(
            "systemctl --user daemon-reload && systemctl --user enable --now llmprobe-check.timer"
        ),
        "{}",
        out.stdout
    );
    assert!(
        !tools.systemctl_log.exists(),
        "nothing is enabled without --enable"
    );
    let s = std::fs::read_to_string(&service).unwrap();
    let t = std::fs::read_to_string(&timer).unwrap();
    for line in [
        "Type=oneshot".to_string(),
        format!("WorkingDirectory={stats}"),
        format!("EnvironmentFile={keys}"),
        format!("ExecStart={exe} check --stats-dir {stats}"),
    ] {
        assert!(s.lines().any(|l| l == line), "{line}:\n{s}");
    }
    for line in [
        "OnCalendar=hourly",
        "Persistent=true",
        "RandomizedDelaySec=5m",
        "WantedBy=timers.target",
    ] {
        assert!(t.lines().any(|l| l == line), "{line}:\n{t}");
    }
    no_secret("the service", &s);
    no_secret("the output", &format!("{}{}", out.stdout, out.stderr));

    // systemd-analyze verifies these units in the external tests
    // (tests/tools.rs), which say so when it is missing.

    env.run(&[
        "schedule",
        "install",
        "--with",
        "systemd",
        "--enable",
        "--env-file",
        "keys.env",
    ])
    .ok();
    assert_eq!(
        std::fs::read_to_string(&tools.systemctl_log).unwrap(),
        "--user daemon-reload\n--user enable --now llmprobe-check.timer\n"
    );
    let show = env.run(&["schedule", "show", "--with", "systemd"]).ok();
    assert!(
        show.stdout
            .contains("NextElapseUSecRealtime=Mon 2026-06-01 11:00:00 UTC")
            && show.stdout.contains("Persistent=true"),
        "{}",
        show.stdout
    );

    // A 90-minute interval has no calendar: the timer fires every 20 min
    // and check runs --if-due.
    env.run(&["schedule", "install", "--with", "systemd", "--every", "90m"])
        .ok();
    assert!(
        std::fs::read_to_string(&timer)
            .unwrap()
            .contains("\nOnCalendar=*:0/20\n")
    );
    assert!(
        std::fs::read_to_string(&service)
            .unwrap()
            .contains(" check --if-due 70m --stats-dir ")
    );

    // Uninstall removes both jobs.
    let out = env.run(&["schedule", "uninstall"]).ok();
    assert!(!service.exists() && !timer.exists(), "{}", out.stdout);
    assert!(
        out.stdout.contains("removed from your crontab"),
        "{}",
        out.stdout
    );
    assert!(!tools.crontab.exists());
    assert!(
        std::fs::read_to_string(&tools.systemctl_log)
            .unwrap()
            .contains("--user disable --now llmprobe-check.timer\n")
    );
    assert!(!env.stats().join("schedule.json").exists());

    // A unit someone wrote by hand is never replaced or removed.
    let mine = "[Service]\nExecStart=/bin/true\n";
    std::fs::write(&service, mine).unwrap();
    let r = env
        .run(&["schedule", "install", "--with", "systemd"])
        .code(4);
    assert!(r.stderr.contains("llmprobe-check.service"), "{}", r.stderr);
    env.run(&["schedule", "uninstall"]).ok();
    assert_eq!(std::fs::read_to_string(&service).unwrap(), mine);
    assert!(!timer.exists());
}

/// The child elements of `node` in the task namespace, by name.
fn child<'a, 'i>(node: roxmltree::Node<'a, 'i>, name: &str) -> roxmltree::Node<'a, 'i> {
    node.children()
        .find(|c| c.has_tag_name((llmprobe::schedule::taskxml::NAMESPACE, name)))
        .unwrap_or_else(|| panic!("no {name} in {}", node.tag_name().name()))
}

fn text_at(root: roxmltree::Node, path: &[&str]) -> String {
    let mut n = root;
    for p in path {
        n = child(n, p);
    }
    n.text().unwrap_or("").to_string()
}

/// The elements Task Scheduler needs, in the schema's namespace and order.
fn check_task_xml(
    xml: &str,
    command: &str,
    arguments: &str,
    dir: &str,
    interval: &str,
    delay: &str,
) {
    let doc = roxmltree::Document::parse(xml).unwrap_or_else(|e| panic!("{e}:\n{xml}"));
    let task = doc.root_element();
    assert!(task.has_tag_name((llmprobe::schedule::taskxml::NAMESPACE, "Task")));
    assert_eq!(task.attribute("version"), Some("1.2"));
    let trigger = child(child(task, "Triggers"), "TimeTrigger");
    // triggerBaseType is a sequence: Enabled, StartBoundary, EndBoundary,
    // Repetition, ExecutionTimeLimit; timeTriggerType adds RandomDelay.
    let order = [
        "Enabled",
        "StartBoundary",
        "EndBoundary",
        "Repetition",
        "ExecutionTimeLimit",
        "RandomDelay",
    ];
    let seen: Vec<usize> = trigger
        .children()
        .filter(|c| c.is_element())
        .map(|c| {
            order
                .iter()
                .position(|o| *o == c.tag_name().name())
                .unwrap()
        })
        .collect();
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    assert!(
        text_at(trigger, &["StartBoundary"])
            .parse::<chrono::NaiveDateTime>()
            .is_ok()
    );
    assert_eq!(text_at(trigger, &["Repetition", "Interval"]), interval);
    assert_eq!(text_at(trigger, &["RandomDelay"]), delay);
    let settings = child(task, "Settings");
    assert_eq!(text_at(settings, &["MultipleInstancesPolicy"]), "IgnoreNew");
    assert_eq!(text_at(settings, &["StartWhenAvailable"]), "true");
    assert_eq!(text_at(settings, &["RunOnlyIfNetworkAvailable"]), "true");
    assert_eq!(
        text_at(task, &["Principals", "Principal", "LogonType"]),
        "InteractiveToken"
    );
    let exec = child(child(task, "Actions"), "Exec");
    assert_eq!(text_at(exec, &["Command"]), command);
    assert_eq!(text_at(exec, &["Arguments"]), arguments);
    assert_eq!(text_at(exec, &["WorkingDirectory"]), dir);
}

#[test]
fn task_scheduler_xml_parses_and_schtasks_installs_it() {
    let mut env = Env::new();
    let tools = fake_tools(&mut env);
    let stats = env.stats().display().to_string();
    let exe = canonical(Path::new(BIN));
    let xml_file = env.stats().join("llmprobe-check.xml");

    let dry = env
        .run(&[
            "schedule",
            "install",
            "--with",
            "task-scheduler",
            "--dry-run",
        ])
        .ok();
    assert!(!xml_file.exists() && !tools.schtasks_log.exists());
    assert!(
        dry.stdout.contains(&format!(
            "would run: schtasks /Create /TN llmprobe-check /XML {stats}/llmprobe-check.xml /F"
        )),
        "{}",
        dry.stdout
    );

    env.run(&[
        "schedule",
        "install",
        "--with",
        "task-scheduler",
        "--every",
        "90m",
    ])
    .ok();
    let xml = std::fs::read_to_string(&xml_file).unwrap();
    check_task_xml(
        &xml,
        &exe,
        &format!("check --stats-dir {stats}"),
        &stats,
        "PT90M",
        "PT5M",
    );
    let log = std::fs::read_to_string(&tools.schtasks_log).unwrap();
    assert!(
        log.contains(&format!(
            "/Create /TN llmprobe-check /XML {stats}/llmprobe-check.xml /F"
        )),
        "{log}"
    );
    let show = env.run(&["schedule", "show"]).ok();
    assert!(
        show.stdout.contains("Next Run Time: 6/1/2026 11:00:00 AM"),
        "{}",
        show.stdout
    );
    env.run(&["schedule", "uninstall", "--with", "task-scheduler"])
        .ok();
    assert!(
        std::fs::read_to_string(&tools.schtasks_log)
            .unwrap()
            .contains("/Delete /TN llmprobe-check /F")
    );
    assert!(!env.stats().join("schedule.json").exists());

    // The shipped example, and the XML inside the PowerShell script.
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts");
    check_task_xml(
        &std::fs::read_to_string(scripts.join("llmprobe-check.xml")).unwrap(),
        r"C:\llmprobe\llmprobe.exe",
        r"check --stats-dir C:\llmprobe\stats --config C:\llmprobe\llmprobe.toml",
        r"C:\llmprobe\stats",
        "PT1H",
        "PT5M",
    );
    let ps1 = std::fs::read_to_string(scripts.join("install-task.ps1")).unwrap();
    let start = ps1.find("@\"\n").unwrap() + 3;
    let end = ps1.find("\n\"@").unwrap();
    check_task_xml(
        &ps1[start..end],
        "$xCommand",
        "$xArguments",
        "$xWorkingDirectory",
        "$Interval",
        "$RandomDelay",
    );
    assert!(ps1.contains("Register-ScheduledTask -TaskName 'llmprobe-check' -Xml $xml -Force"));
}

/// The files under scripts/ are what the generator writes today.
/// `LLMPROBE_BLESS=1 cargo test --test tests scripts_` rewrites them.
#[test]
fn scripts_match_what_schedule_generates() {
    let env = Env::new();
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts");
    let bless = std::env::var_os("LLMPROBE_BLESS").is_some();
    let out = if bless {
        scripts.clone()
    } else {
        env.path().join("gen")
    };
    let r = env
        .run(&["schedule", "templates", out.to_str().unwrap()])
        .ok();
    let names = [
        "crontab.example",
        "llmprobe-check.service",
        "llmprobe-check.timer",
        "llmprobe-check.xml",
        "install-task.ps1",
    ];
    assert_eq!(r.stdout.lines().count(), names.len(), "{}", r.stdout);
    for name in names {
        let generated = std::fs::read_to_string(out.join(name)).unwrap();
        let shipped = std::fs::read_to_string(scripts.join(name)).unwrap_or_default();
        assert!(
            generated == shipped,
            "scripts/{name} differs from what `llmprobe schedule templates` writes; \
             regenerate with `LLMPROBE_BLESS=1 cargo test --test tests scripts_`"
        );
    }
    // The example crontab is the block install writes, markers and all.
    let example = std::fs::read_to_string(scripts.join("crontab.example")).unwrap();
    assert_eq!(example.matches(BEGIN).count(), 1);
    assert!(example.contains("--stats-dir /home/you/llmprobe/stats"));
    let service = std::fs::read_to_string(scripts.join("llmprobe-check.service")).unwrap();
    assert!(
        service.contains("\nWorkingDirectory=%h/llmprobe/stats\n"),
        "{service}"
    );
}

#[test]
fn show_computes_the_next_cron_trigger_in_local_time() {
    let mut env = clock_env();
    let _tools = fake_tools(&mut env);
    // Every 24 h: cron fires at minute 0 of every hour, local time.
    env.run(&["schedule", "install", "--every", "24h"]).ok();
    let minute = |tz: &str| {
        let v = json(
            &env.command(&["schedule", "show", "--json"])
                .env("TZ", tz)
                .output()
                .map(|o| String::from_utf8(o.stdout).unwrap())
                .unwrap(),
        );
        let t: chrono::DateTime<chrono::Utc> = v["jobs"][0]["next_trigger"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let now: chrono::DateTime<chrono::Utc> = v["now"].as_str().unwrap().parse().unwrap();
        assert!(
            t > now && t - now <= chrono::TimeDelta::hours(1),
            "{t} {now}"
        );
        chrono::Timelike::minute(&t)
    };
    assert_eq!(minute("UTC"), 0);
    // India is 5 h 30 min ahead of UTC: its minute 0 is UTC's minute 30.
    assert_eq!(minute("Asia/Kolkata"), 30);
}

/// A config with one keyless fake provider serving `models`.
fn one_provider(env: &Env, fake: &Fake, models: &[&str]) {
    env.write(
        "llmprobe.toml",
        format!(
            "include_default_catalog = false\n[defaults]\nspacing_secs = 0\ntimeout_secs = 5\n\n{}",
            fake.provider("local", "openai", models, "")
        ),
    );
}

fn brief_json(env: &Env) -> Value {
    json(&env.run(&["brief", "--json"]).ok().stdout)
}

fn warning_kinds(v: &Value) -> Vec<String> {
    v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["kind"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn brief_is_quiet_when_healthy_and_warns_when_scheduled_runs_stop() {
    let mut env = clock_env();
    let _tools = fake_tools(&mut env);
    let fake = Fake::start(&env, &[]);
    one_provider(&env, &fake, &["m1"]);

    // Never run, nothing installed.
    let b = env.run(&["brief", "--quiet-if-healthy"]).ok();
    assert!(
        b.stdout
            .contains("WARNING: no schedule is installed and no check run is recorded"),
        "{}",
        b.stdout
    );

    // Run by hand (or by a schedule made by hand): fresh, so healthy, and
    // --quiet-if-healthy prints nothing at all.
    env.run(&["check"]).ok();
    let quiet = env.run(&["brief", "--quiet-if-healthy"]).ok();
    assert_eq!((quiet.stdout.as_str(), quiet.stderr.as_str()), ("", ""));
    assert_eq!(
        env.run(&["brief", "--quiet-if-healthy", "--json"])
            .ok()
            .stdout,
        ""
    );
    let v = brief_json(&env);
    assert_eq!(v["healthy"], true);
    assert_eq!(v["warnings"], serde_json::json!([]));
    assert_eq!(v["schedule"]["installed"], false);
    assert_eq!(v["schedule"]["last_run"]["probes"], 1);
    assert!(env.run(&["brief"]).ok().stdout.contains("newest probe: "));

    // Installed: still healthy.
    env.run(&["schedule", "install"]).ok();
    assert_eq!(env.run(&["brief", "--quiet-if-healthy"]).ok().stdout, "");
    assert_eq!(brief_json(&env)["schedule"]["backend"], "cron");

    // Three hours on, no run since: the installed job has stopped.
    advance(&env, 3 * 3600);
    let b = env.run(&["brief", "--quiet-if-healthy"]).ok();
    assert!(b.stdout.contains("!!! STALE"), "{}", b.stdout);
    assert!(
        b.stdout.contains(
            "WARNING: the last check run was 3h ago, more than 2 × 1h: the scheduled job (cron, installed"
        ) && b.stdout.contains("`llmprobe schedule show`"),
        "{}",
        b.stdout
    );
    let v = brief_json(&env);
    assert_eq!(
        (v["healthy"].as_bool(), warning_kinds(&v)),
        (Some(false), vec!["last_run_stale".to_string()])
    );

    // Uninstalled, still no run: nothing is installed to run check.
    env.run(&["schedule", "uninstall"]).ok();
    let v = brief_json(&env);
    assert_eq!(warning_kinds(&v), ["schedule_not_installed"]);
    assert!(
        v["warnings"][0]["message"]
            .as_str()
            .unwrap()
            .contains("the last check run was 3h ago: run `llmprobe schedule install`"),
        "{v}"
    );

    // Installed again now: its first run is still to come, so no warning
    // about the schedule (the data is still stale, and says so).
    env.run(&["schedule", "install"]).ok();
    let v = brief_json(&env);
    assert_eq!(warning_kinds(&v), Vec::<String>::new());
    assert_eq!(
        (v["stale"].as_bool(), v["healthy"].as_bool()),
        (Some(true), Some(false))
    );
}

#[test]
fn quiet_if_healthy_still_prints_a_routing_advisory() {
    let env = clock_env();
    let fake = Fake::start(&env, &["bad=unauthorized"]);
    one_provider(&env, &fake, &["bad"]);
    env.run(&["check"]).ok();
    let b = env.run(&["brief", "--quiet-if-healthy"]).ok();
    assert!(
        b.stdout.contains("ROUTING ADVISORY: avoid local"),
        "{}",
        b.stdout
    );
    assert_eq!(brief_json(&env)["healthy"], false);
}

/// The fenced block of the README that contains `needle`.
/// A fenced block of the scheduling guide (`docs/scheduling.md`, where the
/// README's "at session start" lines live) that contains `needle`.
fn readme_block(needle: &str) -> String {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/scheduling.md"))
            .unwrap();
    readme
        .split("```")
        .skip(1)
        .step_by(2)
        .find(|b| b.contains(needle))
        .map(|b| {
            b.split_once('\n')
                .map(|(_, body)| body)
                .unwrap_or(b)
                .to_string()
        })
        .unwrap_or_else(|| panic!("no block in docs/scheduling.md with {needle}"))
}

/// Healthy data for the README's example stats directory,
/// `~/llmprobe/stats`.
fn home_stats(env: &mut Env, fake: &Fake) {
    let stats = env.home().join("llmprobe/stats");
    env.env("LLMPROBE_STATS_DIR", stats.to_str().unwrap());
    one_provider(env, fake, &["m1"]);
    env.run(&["check"]).ok();
}

#[test]
fn the_readme_shell_profile_line_is_silent_until_something_needs_you() {
    let mut env = clock_env();
    let fake = Fake::start(&env, &[]);
    home_stats(&mut env, &fake);
    let rc = env.write("rc.sh", readme_block("# ~/.bashrc"));
    let bin_dir = Path::new(BIN).parent().unwrap().display().to_string();
    // An interactive bash reading the snippet as its rc file, with the
    // real binary on PATH.
    let shell = |path: &str| {
        let o = Command::new("bash")
            .args(["--rcfile", rc.to_str().unwrap(), "-i", "-c", "true"])
            .current_dir(env.home())
            .env_clear()
            .env("PATH", path)
            .env("HOME", env.home())
            .env("NO_COLOR", "1")
            .env("LLMPROBE_TEST_CLOCK_FILE", env.path().join("clock"))
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        (
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let with_bin = format!("{bin_dir}:/usr/bin:/bin");
    let (out, err) = shell(&with_bin);
    assert_eq!(out, "", "healthy: a new shell shows nothing\n{err}");
    advance(&env, 3 * 3600);
    let (out, _) = shell(&with_bin);
    assert!(
        out.contains("!!! STALE") && out.contains("WARNING: no schedule is installed"),
        "{out}"
    );
    // Without llmprobe on PATH the line stays silent, never an error.
    let (out, err) = shell("/usr/bin:/bin");
    assert_eq!(out, "");
    assert!(!err.contains("not found"), "{err}");
}

#[test]
fn the_readme_agent_instruction_names_real_fields() {
    let mut env = clock_env();
    let fake = Fake::start(&env, &[]);
    home_stats(&mut env, &fake);
    let block = readme_block("At the start of each session, run");
    let line = block.lines().find(|l| l.contains("run `")).unwrap();
    let cmd = line.split('`').nth(1).unwrap();
    let home = env.home().display().to_string();
    let words: Vec<String> = cmd
        .split_whitespace()
        .map(|w| w.replace('~', &home))
        .collect();
    assert_eq!(words[0], "llmprobe", "{cmd}");
    let w: Vec<&str> = words[1..].iter().map(String::as_str).collect();
    let run = |env: &Env| json(&env.run(&w).ok().stdout);
    let v = run(&env);
    assert_eq!(v["healthy"], true, "{v}");
    advance(&env, 3 * 3600);
    let v = run(&env);
    assert_eq!(v["healthy"], false);
    // Every field the instruction tells the agent to read is there.
    for field in ["healthy", "warnings", "advisories"] {
        assert!(line.contains(&format!("`{field}`")), "{line}");
        assert!(!v[field].is_null(), "{field}: {v}");
    }
    assert!(!v["warnings"].as_array().unwrap().is_empty());
}

#[test]
fn reprobe_adds_a_check_paused_line_or_timer_that_show_and_uninstall_know() {
    let mut env = Env::new();
    let tools = fake_tools(&mut env);
    let xdg = env.path().join("xdg");
    env.env("XDG_CONFIG_HOME", xdg.to_str().unwrap());
    let stats = env.stats().display().to_string();
    let exe = canonical(Path::new(BIN));

    // Nonsense is refused, naming the flag, before anything is written.
    for (value, why) in [
        (
            "7m",
            "--reprobe 7m: must be whole minutes that divide an hour",
        ),
        (
            "90s",
            "--reprobe 90s: must be whole minutes that divide an hour",
        ),
        ("1h", "--reprobe 1h: must be shorter than --every 1h"),
        ("soon", "--reprobe"),
    ] {
        let r = env
            .run(&["schedule", "install", "--reprobe", value])
            .code(2);
        assert!(r.stderr.contains(why), "{value}: {}", r.stderr);
    }
    assert!(!tools.crontab.exists() && !env.stats().join("schedule.json").exists());

    // cron: a second line in the same block, every 10 minutes.
    let out = env.run(&["schedule", "install", "--reprobe", "10m"]).ok();
    let text = std::fs::read_to_string(&tools.crontab).unwrap();
    assert_eq!(text.matches(BEGIN).count(), 1, "{text}");
    let entries: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(entries.len(), 2, "{text}");
    assert!(
        entries[0].contains(" check --if-due 45m --jitter 5m "),
        "{text}"
    );
    assert!(
        entries[1].starts_with(&format!("*/10 * * * * cd {stats} && "))
            && entries[1].contains(&format!(
                "exec {exe} check --paused --stats-dir {stats} >>check.log 2>&1"
            )),
        "{text}\n{}",
        out.stdout
    );
    let m = json(&std::fs::read_to_string(env.stats().join("schedule.json")).unwrap());
    assert_eq!(m["reprobe"], "10m");
    let show = env.run(&["schedule", "show", "--with", "cron"]).ok();
    assert!(show.stdout.contains("check --paused"), "{}", show.stdout);
    assert!(
        show.stdout
            .contains("paused models re-probed every 10m (`check --paused`)"),
        "{}",
        show.stdout
    );
    // Installed again without it: the hourly line alone.
    env.run(&["schedule", "install"]).ok();
    let text = std::fs::read_to_string(&tools.crontab).unwrap();
    assert!(!text.contains("--paused"), "{text}");
    let m = json(&std::fs::read_to_string(env.stats().join("schedule.json")).unwrap());
    assert!(m.get("reprobe").is_none(), "{m}");
    env.run(&["schedule", "install", "--reprobe", "5m"]).ok();
    assert!(
        std::fs::read_to_string(&tools.crontab)
            .unwrap()
            .contains("\n*/5 * * * * cd ")
    );
    env.run(&["schedule", "uninstall", "--with", "cron"]).ok();
    assert!(!tools.crontab.exists(), "both lines went with the block");

    // systemd: a second service and timer pair.
    let dir = xdg.join("systemd/user");
    let (service, timer) = (
        dir.join("llmprobe-reprobe.service"),
        dir.join("llmprobe-reprobe.timer"),
    );
    env.run(&[
        "schedule",
        "install",
        "--with",
        "systemd",
        "--reprobe",
        "10m",
        "--enable",
    ])
    .ok();
    let s = std::fs::read_to_string(&service).unwrap();
    let t = std::fs::read_to_string(&timer).unwrap();
    assert!(
        s.lines()
            .any(|l| l == format!("ExecStart={exe} check --paused --stats-dir {stats}")),
        "{s}"
    );
    assert!(t.lines().any(|l| l == "OnCalendar=*:0/10"), "{t}");
    assert!(dir.join("llmprobe-check.timer").exists());
    assert_eq!(
        std::fs::read_to_string(&tools.systemctl_log).unwrap(),
        "--user daemon-reload\n--user enable --now llmprobe-check.timer\n\
         --user enable --now llmprobe-reprobe.timer\n"
    );
    let show = env.run(&["schedule", "show", "--with", "systemd"]).ok();
    assert!(
        show.stdout.contains("llmprobe-reprobe.timer:"),
        "{}",
        show.stdout
    );
    // Installed again without it: the pair goes, its timer stopped.
    let out = env.run(&["schedule", "install", "--with", "systemd"]).ok();
    assert!(!service.exists() && !timer.exists(), "{}", out.stdout);
    assert!(
        out.stdout.contains("llmprobe-reprobe.timer (no --reprobe)"),
        "{}",
        out.stdout
    );
    assert!(
        std::fs::read_to_string(&tools.systemctl_log)
            .unwrap()
            .ends_with("--user disable --now llmprobe-reprobe.timer\n--user daemon-reload\n")
    );
    // Uninstall removes all four units.
    env.run(&[
        "schedule",
        "install",
        "--with",
        "systemd",
        "--reprobe",
        "10m",
    ])
    .ok();
    assert!(service.exists());
    env.run(&["schedule", "uninstall"]).ok();
    assert!(
        std::fs::read_dir(&dir).unwrap().next().is_none(),
        "units left in {}",
        dir.display()
    );

    // Task Scheduler: a second task, llmprobe-reprobe, every 10 minutes.
    let task = ["schedule", "install", "--with", "task-scheduler"];
    env.run(&[&task[..], &["--reprobe", "10m"]].concat()).ok();
    let xml = std::fs::read_to_string(env.stats().join("llmprobe-reprobe.xml")).unwrap();
    check_task_xml(
        &xml,
        &exe,
        &format!("check --paused --stats-dir {stats}"),
        &stats,
        "PT10M",
        "PT1M",
    );
    assert!(xml.contains("<URI>\\llmprobe-reprobe</URI>"), "{xml}");
    let log = std::fs::read_to_string(&tools.schtasks_log).unwrap();
    assert!(
        log.contains(&format!(
            "/Create /TN llmprobe-reprobe /XML {stats}/llmprobe-reprobe.xml /F"
        )),
        "{log}"
    );
    let show = env
        .run(&["schedule", "show", "--with", "task-scheduler"])
        .ok();
    assert!(
        show.stdout.contains("llmprobe-reprobe (check --paused):"),
        "{}",
        show.stdout
    );
    // Installed again without it, the task goes; uninstall takes both.
    env.run(&task).ok();
    assert!(
        std::fs::read_to_string(&tools.schtasks_log)
            .unwrap()
            .ends_with("/Delete /TN llmprobe-reprobe /F\n")
    );
    env.run(&[&task[..], &["--reprobe", "10m"]].concat()).ok();
    env.run(&["schedule", "uninstall", "--with", "task-scheduler"])
        .ok();
    let log = std::fs::read_to_string(&tools.schtasks_log).unwrap();
    let after = &log[log.rfind("/Create ").unwrap()..];
    assert!(
        after.contains("/Delete /TN llmprobe-check /F\n")
            && after.ends_with("/Delete /TN llmprobe-reprobe /F\n"),
        "{log}"
    );
}

#[test]
fn a_cron_dry_run_needs_no_crontab() {
    let mut env = Env::new();
    // A PATH without crontab(1), as on a machine without cron.
    let empty = env.path().join("empty-bin");
    std::fs::create_dir_all(&empty).unwrap();
    env.env("PATH", empty.to_str().unwrap());
    let r = env
        .run(&["schedule", "install", "--with", "cron", "--dry-run"])
        .ok();
    assert!(
        r.stdout.contains("would install in your crontab"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains(BEGIN), "{}", r.stdout);
    assert!(
        r.stderr
            .contains("the entry below is not compared with your current crontab"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("cannot run `crontab -l`"), "{}", r.stderr);
    // Without --dry-run it still stops, saying why.
    let r = env.run(&["schedule", "install", "--with", "cron"]);
    assert_eq!(r.code, 7, "{}", r.stderr);
    assert!(r.stderr.contains("install cron"), "{}", r.stderr);
}
