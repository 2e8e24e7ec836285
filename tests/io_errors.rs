//! Writes that fail, through the real binary: a full disk (a file size
//! limit, RLIMIT_FSIZE as `ulimit -f` sets it; the binary ignores SIGXFSZ,
//! so the write fails with EFBIG instead of killing it), a read-only stats
//! directory, and a stats directory removed in the middle of a run. Each
//! time the command stops with exit 7 naming the file, leaves no torn or
//! truncated data file and no temporary file, and the next run on a
//! healthy disk continues from the last good state: the log parses and
//! holds every entry from before, and the state agrees with it.
//!
//! They run in the external harness because the read-only case needs a
//! directory's mode bits to stop writes, which root cannot have unless it
//! can drop its capabilities ([`Need::ReadOnlyDirs`]); where it cannot,
//! that case is reported as ignored, with why.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::Test;
use crate::support::need::{Need, bound_by_permissions};
use crate::support::{
    Env, Fake, RouteServer, Run, clock_env, eventually, log_entries, provider_toml, route_config,
};

/// `cmd` with a file size limit of `bytes` (RLIMIT_FSIZE, `ulimit -f`),
/// for it alone.
fn limited(mut cmd: Command, bytes: u64) -> Command {
    // SAFETY: only setrlimit, async-signal-safe, runs in the child.
    unsafe {
        cmd.pre_exec(move || {
            let r = libc::rlimit {
                rlim_cur: bytes as libc::rlim_t,
                rlim_max: bytes as libc::rlim_t,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &r) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd
}

fn run(mut cmd: Command) -> Run {
    Run::from(cmd.output().expect("run llmprobe"))
}

/// One provider `f` with a model that passes and one that fails hard
/// (`wrong`), never disabled in these tests' few runs, so that its count
/// of failures is the number of its entries in the log.
fn setup() -> (Env, Fake, String) {
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let cfg = format!(
        "include_default_catalog = false\n[defaults]\nspacing_secs = 0\ntimeout_secs = 5\ndisable_after = 50\n\n{}",
        fake.provider("f", "openai", &["ok", "wrong"], "")
    );
    let cfg = env.write("llmprobe.toml", cfg).display().to_string();
    (env, fake, cfg)
}

fn check(env: &Env, cfg: &str) -> Command {
    env.command(&["--config", cfg, "check"])
}

/// The run said it cannot write `file`, and each of `also`.
#[track_caller]
fn cannot_write(r: &Run, file: &Path, also: &[&str]) {
    let said = format!("cannot write {}", file.display());
    for want in [said.as_str()].iter().chain(also) {
        assert!(r.stderr.contains(want), "{}", r.stderr);
    }
}

fn bytes(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Temporary files of atomic replacements left in `dir`.
fn temp_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp."))
        .collect()
}

/// The log parses, begins with `before` (every entry from before, in
/// order), holds `more` after them, and the state file agrees with it:
/// `f::wrong`'s failure count is its number of entries, `f::ok` active.
#[track_caller]
fn continues(env: &Env, before: &[Value], more: usize) {
    let log = log_entries(&env.log());
    assert_eq!(log.len(), before.len() + more, "{log:#?}");
    agrees(env, before);
}

/// The log parses, begins with `before`, and the state file agrees with
/// it (see [`continues`]); the log's entries.
#[track_caller]
fn agrees(env: &Env, before: &[Value]) -> Vec<Value> {
    let log = log_entries(&env.log());
    assert_eq!(&log[..before.len()], before);
    let wrong = log.iter().filter(|e| e["model"] == "wrong").count();
    let state: Value = serde_json::from_slice(&bytes(&env.state_file())).unwrap();
    assert_eq!(
        state["f::wrong"]["consecutive_failures"], wrong,
        "{state:#}"
    );
    assert_eq!(state["f::wrong"]["state"], "active", "{state:#}");
    assert_ne!(state["f::ok"]["state"], "disabled", "{state:#}");
    log
}

/// `wrong`'s batch was taken back out of the log, and the log and the
/// state agree (see [`agrees`]); `ok`'s, if it came alone, changed no
/// state and stays. The log's entries.
#[track_caller]
fn batch_taken_out(env: &Env, before: &[Value]) -> Vec<Value> {
    let now = agrees(env, before);
    assert!(
        now[before.len()..].iter().all(|e| e["model"] == "ok") && now.len() <= before.len() + 1,
        "{now:#?}"
    );
    now
}

fn a_full_disk_stops_check_with_exit_7_and_the_next_run_continues() {
    let (env, fake, cfg) = setup();
    run(check(&env, &cfg)).ok();
    run(check(&env, &cfg)).ok();
    let (log, state) = (bytes(&env.log()), bytes(&env.state_file()));
    let before = log_entries(&env.log());
    assert_eq!(before.len(), 4);
    // Room for a few bytes more than the log holds: the next entry does
    // not fit. With a long spacing, a run that went on would send the
    // second probe half a minute later, for nothing.
    let sent = fake.seen().len();
    let mut cmd = check(&env, &cfg);
    cmd.args(["--spacing", "30"]);
    let r = run(limited(cmd, log.len() as u64 + 40)).code(7);
    assert_eq!(fake.seen().len(), sent + 1, "the run stopped at once");
    cannot_write(
        &r,
        &env.log(),
        &["File too large", "the log was left with the entries it had"],
    );
    // Rolled back byte for byte; the state is as it was.
    assert_eq!(bytes(&env.log()), log);
    assert_eq!(bytes(&env.state_file()), state);
    assert_eq!(temp_files(&env.stats()), Vec::<String>::new());
    // A healthy disk: the run continues from there.
    run(check(&env, &cfg)).ok();
    continues(&env, &before, 2);
}

fn a_full_disk_for_the_state_file_takes_the_batch_back_out_of_the_log() {
    let (env, _fake, cfg) = setup();
    run(check(&env, &cfg)).ok();
    // A state file larger than the log: a model disabled with a long
    // reason. A limit between the two lets the log grow, and stops the
    // state file, which is written on every run (`wrong`'s count).
    let mut state: Value = serde_json::from_slice(&bytes(&env.state_file())).unwrap();
    state["x::big"] = serde_json::json!({
        "state": "disabled",
        "reason": "r".repeat(4000),
        "since": "2026-12-01T00:00:00Z",
        "consecutive_failures": 0,
    });
    std::fs::write(env.state_file(), serde_json::to_vec_pretty(&state).unwrap()).unwrap();
    let before = log_entries(&env.log());
    let (log, state) = (bytes(&env.log()), bytes(&env.state_file()));
    assert!(
        log.len() + 1000 < state.len() / 2,
        "{} {}",
        log.len(),
        state.len()
    );
    let r = run(limited(check(&env, &cfg), state.len() as u64 / 2)).code(7);
    cannot_write(&r, &env.state_file(), &[]);
    // `wrong`'s batch was appended, then taken back out: the log and the
    // state still agree. `ok`'s, if it came alone, changed no state and
    // stays.
    assert_eq!(bytes(&env.state_file()), state);
    let now = batch_taken_out(&env, &before);
    assert!(bytes(&env.log()).ends_with(b"}\n]\n"));
    assert!(log.len() <= bytes(&env.log()).len());
    assert_eq!(temp_files(&env.stats()), Vec::<String>::new());
    run(check(&env, &cfg)).ok();
    continues(&env, &now, 2);
}

fn a_full_disk_stops_a_state_change_and_leaves_the_state_file_whole() {
    let (env, _fake, cfg) = setup();
    run(check(&env, &cfg)).ok();
    let state = bytes(&env.state_file());
    let disable = || env.command(&["--config", &cfg, "state", "disable", "f::ok"]);
    // Not one byte more than the file has: disabling a model adds some.
    let r = run(limited(disable(), state.len() as u64)).code(7);
    cannot_write(
        &r,
        &env.state_file(),
        &["the file was left as it was", "File too large"],
    );
    assert_eq!(bytes(&env.state_file()), state);
    assert_eq!(temp_files(&env.stats()), Vec::<String>::new());
    run(disable()).ok();
    let now: Value = serde_json::from_slice(&bytes(&env.state_file())).unwrap();
    assert_eq!(now["f::ok"]["state"], "disabled");
    assert_eq!(now["f::wrong"]["consecutive_failures"], 1, "{now:#}");
}

fn a_full_disk_keeps_the_old_rollup_output_and_readme() {
    let (env, _fake, cfg) = setup();
    run(check(&env, &cfg)).ok();
    let out = env.write("out/rollup.json", "the old one\n");
    let rollup = || {
        env.command(&[
            "--config",
            &cfg,
            "rollup",
            "--format",
            "json",
            "--output",
            out.to_str().unwrap(),
        ])
    };
    let r = run(limited(rollup(), 20)).code(7);
    cannot_write(&r, &out, &[]);
    assert_eq!(bytes(&out), b"the old one\n");
    assert_eq!(temp_files(out.parent().unwrap()), Vec::<String>::new());
    run(rollup()).ok();
    let v: Value = serde_json::from_slice(&bytes(&out)).unwrap();
    assert!(v.is_object() || v.is_array(), "{v}");
    // --readme: the README keeps its old block.
    let text = "# Mine\n\n<!-- BRAIN_HEALTH_START -->\nold\n<!-- BRAIN_HEALTH_END -->\n";
    let readme = env.write("out/README.md", text);
    let readme_cmd = || {
        env.command(&[
            "--config",
            &cfg,
            "rollup",
            "--readme",
            readme.to_str().unwrap(),
        ])
    };
    let r = run(limited(readme_cmd(), text.len() as u64 + 10)).code(7);
    cannot_write(&r, &readme, &[]);
    assert_eq!(bytes(&readme), text.as_bytes());
    assert_eq!(temp_files(readme.parent().unwrap()), Vec::<String>::new());
    run(readme_cmd()).ok();
    assert!(
        !std::str::from_utf8(&bytes(&readme))
            .unwrap()
            .contains("\nold\n")
    );
}

fn a_read_only_stats_directory_stops_check_and_state_with_exit_7() {
    let (env, _fake, cfg) = setup();
    run(check(&env, &cfg)).ok();
    let before = log_entries(&env.log());
    let state = bytes(&env.state_file());
    std::fs::set_permissions(env.stats(), std::fs::Permissions::from_mode(0o555)).unwrap();
    // The log is appended in place (its file is writable), the state
    // file cannot be replaced: `wrong`'s batch is taken back out of the
    // log. `ok`'s, if it came alone, changed no state and stays.
    let r = run(bound_by_permissions(check(&env, &cfg))).code(7);
    cannot_write(&r, &env.state_file(), &["Permission denied"]);
    assert_eq!(bytes(&env.state_file()), state);
    let now = batch_taken_out(&env, &before);
    let r = run(bound_by_permissions(
        env.command(&["--config", &cfg, "state", "disable", "f::ok"]),
    ))
    .code(7);
    cannot_write(&r, &env.state_file(), &[]);
    assert_eq!(bytes(&env.state_file()), state);
    // A run whose probes change no state records them (the log is
    // appended in place), and cannot say it ran: last_run.json.
    let last_run = bytes(&env.stats().join("last_run.json"));
    let mut cmd = check(&env, &cfg);
    cmd.args(["--model", "f::ok"]);
    let r = run(bound_by_permissions(cmd)).code(7);
    let file = env.stats().join("last_run.json");
    cannot_write(&r, &file, &[]);
    assert_eq!(bytes(&file), last_run);
    let recorded = agrees(&env, &now);
    assert_eq!(recorded.len(), now.len() + 1);
    assert_eq!(recorded.last().unwrap()["model"], "ok");
    let now = recorded;
    std::fs::set_permissions(env.stats(), std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(temp_files(&env.stats()), Vec::<String>::new());
    run(check(&env, &cfg)).ok();
    continues(&env, &now, 2);
}

fn a_stats_directory_removed_mid_run_stops_check_with_exit_7() {
    let env = Env::new();
    let quick = Fake::start(&env, &[]);
    let release = env.path().join("release");
    let held = Fake::start_with(&env, &[], &["--hold-until", release.to_str().unwrap()]);
    let cfg = format!(
        "include_default_catalog = false\n[defaults]\nspacing_secs = 0\ntimeout_secs = 60\n\n{}\n{}",
        quick.provider("a", "openai", &["ok"], ""),
        held.provider("b", "openai", &["ok"], ""),
    );
    let cfg = env.write("llmprobe.toml", cfg).display().to_string();
    let child = check(&env, &cfg)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // `a` is recorded while `b` is held; the data lock, once ours, says
    // the writer is done with that batch.
    eventually("a's probe in the log", || {
        let text = std::fs::read_to_string(env.log()).map_err(|e| e.to_string())?;
        text.contains(r#""provider":"a""#).then_some(()).ok_or(text)
    });
    let lock = std::fs::File::open(env.stats().join(".llmprobe.lock")).unwrap();
    lock.lock().unwrap();
    drop(lock);
    std::fs::remove_dir_all(env.stats()).unwrap();
    std::fs::write(&release, "").unwrap();
    let r = Run::from(child.wait_with_output().unwrap()).code(7);
    assert!(
        r.stderr.contains(&format!(
            "stats directory {} is gone (removed during the run)",
            env.stats().display()
        )),
        "{}",
        r.stderr
    );
    assert!(!env.stats().exists(), "made again behind the user's back");
    // The next run starts a new record.
    let r = run(check(&env, &cfg)).ok();
    assert!(r.stderr.contains("created stats directory"), "{}", r.stderr);
    let log = log_entries(&env.log());
    let providers: Vec<&str> = log
        .iter()
        .map(|e| e["provider"].as_str().unwrap())
        .collect();
    assert_eq!(providers.len(), 2);
    assert!(providers.contains(&"a") && providers.contains(&"b"));
}

/// A route config whose first provider fails (a cooldown to save) and
/// whose second serves.
fn route_cfg(env: &Env, fake: &Fake) -> String {
    let url = format!("{}/v1", fake.url);
    route_config(
        env,
        &[
            provider_toml("a", "openai", &url, &["e500"], "priority = 1"),
            provider_toml("b", "openai", &url, &["ok"], "priority = 2"),
        ],
        "",
    )
}

fn route_serves_on_when_its_state_cannot_be_saved() {
    let env = clock_env();
    let fake = Fake::start(&env, &[]);
    let cfg = route_cfg(&env, &fake);
    let err = env.path().join("route.err");
    let mut cmd = RouteServer::command(&env, &cfg, &[]);
    cmd.stderr(std::fs::File::create(&err).unwrap());
    let srv = RouteServer::spawn(cmd);
    // Started: the file is read; now it cannot be replaced (a directory
    // in its place stops the rename, whoever runs the test).
    let file = env.stats().join("route_state.json");
    std::fs::create_dir_all(file.join("in-the-way")).unwrap();
    let r = srv.chat("auto", false);
    assert_eq!(r.status, 200, "{}", r.body);
    let text = eventually("the warning", || {
        let text = std::fs::read_to_string(&err).unwrap();
        text.contains("warning: route: cannot save the route state")
            .then(|| text.clone())
            .ok_or(text)
    });
    assert!(
        text.contains(&format!("cannot write {}", file.display())),
        "{text}"
    );
    // Still serving.
    let r = srv.chat("auto", false);
    assert_eq!(r.status, 200, "{}", r.body);
    // The last save, at shutdown, fails too: exit 7, the file named.
    assert_eq!(srv.terminate(), 7);
    let text = std::fs::read_to_string(&err).unwrap();
    assert!(
        text.contains(&format!("error: cannot write {}", file.display())),
        "{text}"
    );
    std::fs::remove_dir_all(&file).unwrap();
    assert_eq!(temp_files(&env.stats()), Vec::<String>::new());
}

fn one_shot_route_shows_the_answer_when_its_state_cannot_be_saved() {
    let env = clock_env();
    let fake = Fake::start(&env, &[]);
    let cfg = route_cfg(&env, &fake);
    let r = run(limited(
        env.command(&[
            "--config",
            &cfg,
            "route",
            "What is 7 + 7? Reply with only the number.",
        ]),
        10,
    ))
    .code(7);
    assert_eq!(r.stdout.trim(), "14", "{}", r.stderr);
    let file = env.stats().join("route_state.json");
    cannot_write(&r, &file, &[]);
    assert!(!file.exists());
    assert_eq!(temp_files(&env.stats()), Vec::<String>::new());
}

pub fn tests() -> Vec<Test> {
    vec![
        Test::new(
            "io_errors::a_full_disk_stops_check_with_exit_7_and_the_next_run_continues",
            &[],
            a_full_disk_stops_check_with_exit_7_and_the_next_run_continues,
        ),
        Test::new(
            "io_errors::a_full_disk_for_the_state_file_takes_the_batch_back_out_of_the_log",
            &[],
            a_full_disk_for_the_state_file_takes_the_batch_back_out_of_the_log,
        ),
        Test::new(
            "io_errors::a_full_disk_stops_a_state_change_and_leaves_the_state_file_whole",
            &[],
            a_full_disk_stops_a_state_change_and_leaves_the_state_file_whole,
        ),
        Test::new(
            "io_errors::a_full_disk_keeps_the_old_rollup_output_and_readme",
            &[],
            a_full_disk_keeps_the_old_rollup_output_and_readme,
        ),
        Test::new(
            "io_errors::a_read_only_stats_directory_stops_check_and_state_with_exit_7",
            &[Need::ReadOnlyDirs],
            a_read_only_stats_directory_stops_check_and_state_with_exit_7,
        ),
        Test::new(
            "io_errors::a_stats_directory_removed_mid_run_stops_check_with_exit_7",
            &[],
            a_stats_directory_removed_mid_run_stops_check_with_exit_7,
        ),
        Test::new(
            "io_errors::route_serves_on_when_its_state_cannot_be_saved",
            &[],
            route_serves_on_when_its_state_cannot_be_saved,
        ),
        Test::new(
            "io_errors::one_shot_route_shows_the_answer_when_its_state_cannot_be_saved",
            &[],
            one_shot_route_shows_the_answer_when_its_state_cannot_be_saved,
        ),
    ]
}
