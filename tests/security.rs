//! SECURITY.md's review, tested through the real binary: names that cannot
//! be in a header, hostile `--stats-dir` and `--config` paths, and
//! oversized request heads. Everything on 127.0.0.1.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use crate::support::{Env, Fake, RouteServer, chat_body, http, route_config as config};

/// Send `head` (and `body`) on a fresh connection and return the raw
/// response head, so that a split header would show as its own line.
fn raw(srv: &RouteServer, head: &str, body: &str) -> String {
    let addr = srv.url.trim_start_matches("http://");
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    // A server that refuses a head it will not read may close before the
    // rest of it is written (a broken pipe here, sooner on a busy
    // machine); its answer is still there to read, and is what counts.
    let _ = s
        .write_all(head.as_bytes())
        .and_then(|()| s.write_all(body.as_bytes()));
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    text.split("\r\n\r\n").next().unwrap_or("").to_string()
}

fn post_raw(srv: &RouteServer, path: &str, body: &str) -> String {
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    raw(srv, &head, body)
}

/// Each header line of a raw head, after the status line, lowercased name.
fn header_lines(head: &str) -> Vec<(String, String)> {
    head.lines()
        .skip(1)
        .map(|l| {
            let (k, v) = l
                .split_once(':')
                .unwrap_or_else(|| panic!("not a header line: {l:?}\n{head}"));
            (k.to_ascii_lowercase(), v.trim().to_string())
        })
        .collect()
}

const EVIL: &str = "evil\r\nX-Injected: yes";
const EVIL_LF: &str = "lf\nX-Injected: yes";
const WIDE: &str = "café-模型";

/// A model named with CR/LF or non-ASCII, in the catalog and in an alias,
/// asked for by a client: its name reaches `X-Routed-Via` and
/// `X-Fallback-Trail`. The header is never split, the name is said (its
/// control characters escaped), and the server keeps serving.
#[test]
fn model_names_never_split_or_drop_a_routing_header() {
    let env = Env::new();
    // The evil models fail once each, so that they are in the trail.
    let fake = Fake::start(&env, &[&format!("{EVIL}=e500"), &format!("{EVIL_LF}=e500")]);
    // Each evil model on a provider of its own: a 5xx benches its provider.
    let cfg = config(
        &env,
        &[
            fake.provider("e", "openai", &[EVIL], "priority = 1"),
            fake.provider("l", "openai", &[EVIL_LF], "priority = 2"),
            fake.provider("f", "openai", &[WIDE, "ok"], "priority = 3"),
        ],
        &format!(
            "[aliases]\n{:?} = [{:?}, {:?}, {:?}]\n",
            "al\r\nX-Alias: yes",
            format!("e::{EVIL}"),
            format!("l::{EVIL_LF}"),
            format!("f::{WIDE}")
        ),
    );
    let srv = RouteServer::start(&env, &cfg, &[]);
    for (model, via, trail) in [
        // Through the alias: both evil models fail, the wide one serves.
        (
            "al\r\nX-Alias: yes",
            format!("f::{WIDE}"),
            "e::evil%0D%0AX-Injected: yes=server_error, l::lf%0AX-Injected: yes=server_error",
        ),
        (WIDE, format!("f::{WIDE}"), "none"),
        (&format!("f::{WIDE}")[..], format!("f::{WIDE}"), "none"),
    ] {
        for path in ["/v1/chat/completions", "/v1/messages"] {
            let mut body: serde_json::Value =
                serde_json::from_str(&chat_body(model, false)).unwrap();
            body["max_tokens"] = 64.into();
            let head = post_raw(&srv, path, &body.to_string());
            assert!(head.starts_with("HTTP/1.1 200"), "{model:?} {path}: {head}");
            let lines = header_lines(&head);
            assert!(
                !lines
                    .iter()
                    .any(|(k, _)| k.starts_with("x-injected") || k.starts_with("x-alias")),
                "a split header: {head}"
            );
            let get = |name: &str| {
                lines
                    .iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.clone())
                    .unwrap_or_else(|| panic!("no {name} for {model:?} on {path}:\n{head}"))
            };
            assert_eq!(get("x-routed-via"), via, "{model:?} {path}");
            // The evil models, benched by their first failure, are passed
            // over without an attempt after it.
            if trail == "none" || path != "/v1/chat/completions" {
                assert_eq!(get("x-fallback-trail"), "none", "{head}");
            } else {
                assert!(get("x-fallback-trail").starts_with(trail), "{head}");
            }
        }
    }
    // Asked for by name: the evil model is tried and fails; its error and
    // headers are well formed.
    let head = post_raw(
        &srv,
        "/v1/chat/completions",
        &chat_body(&format!("e::{EVIL}"), false),
    );
    assert!(head.starts_with("HTTP/1.1 5"), "{head}");
    let lines = header_lines(&head);
    assert!(
        !lines.iter().any(|(k, _)| k.starts_with("x-injected")),
        "{head}"
    );
    assert!(
        lines
            .iter()
            .any(|(k, v)| k == "x-fallback-trail" && v.starts_with("e::evil%0D%0AX-Injected")),
        "{head}"
    );
    // An unknown model with CR/LF is a 404 with no echo in a header.
    let head = post_raw(
        &srv,
        "/v1/chat/completions",
        &chat_body("nope\r\nX-Injected: yes", false),
    );
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");
    assert!(
        !header_lines(&head)
            .iter()
            .any(|(k, _)| k.starts_with("x-injected"))
    );
    // Streamed, too.
    let head = post_raw(
        &srv,
        "/v1/chat/completions",
        &chat_body("al\r\nX-Alias: yes", true),
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        header_lines(&head)
            .iter()
            .any(|(k, v)| k == "x-routed-via" && *v == format!("f::{WIDE}")),
        "{head}"
    );
    // Still serving.
    let r = http(
        "POST",
        &format!("{}/v1/chat/completions", srv.url),
        &[("content-type", "application/json")],
        Some(&chat_body("f::ok", false)),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("x-routed-via"), "f::ok");
}

/// Request heads too large in every way: many small headers, one huge
/// header, a huge header name. Each gets a 431 (hyper's own, past its
/// limits, or llmprobe's JSON one), and the server keeps serving.
#[test]
fn oversized_request_heads_get_431_and_the_server_keeps_serving() {
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let cfg = config(&env, &[fake.provider("f", "openai", &["ok"], "")], "");
    let srv = RouteServer::start(&env, &cfg, &[]);
    let body = chat_body("auto", false);
    let request = |extra: &str| {
        format!(
            "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n{extra}\r\n",
            body.len()
        )
    };
    let many_small: String = (0..500).map(|i| format!("x-h{i}: v\r\n")).collect();
    let many_medium: String = (0..90)
        .map(|i| format!("x-h{i}: {}\r\n", "v".repeat(400)))
        .collect();
    let huge_value = format!("x-pad: {}\r\n", "v".repeat(40 * 1024));
    let giant_value = format!("x-pad: {}\r\n", "v".repeat(1 << 20));
    let huge_name = format!("x-{}: v\r\n", "n".repeat(40 * 1024));
    for (what, extra) in [
        ("500 headers", &many_small),
        ("90 headers of 400 bytes", &many_medium),
        ("one 40 KiB value", &huge_value),
        ("one 1 MiB value", &giant_value),
        ("a 40 KiB name", &huge_name),
    ] {
        let head = raw(&srv, &request(extra), &body);
        assert!(head.starts_with("HTTP/1.1 431"), "{what}: {head:.300}");
        // Between each, a normal request is served.
        let r = http(
            "POST",
            &format!("{}/v1/chat/completions", srv.url),
            &[("content-type", "application/json")],
            Some(&body),
        );
        assert_eq!(r.status, 200, "after {what}: {}", r.body);
    }
}

/// `--config` paths that are not a config file: clear errors naming the
/// file, exit 2, and no endless read of a device.
#[test]
fn hostile_config_paths_get_clear_errors() {
    let env = Env::new();
    let dir = env.path().join("adir");
    std::fs::create_dir_all(&dir).unwrap();
    let long = "a".repeat(5000);
    let big = env.write("big.toml", vec![b'#'; 20 << 20]);
    let mut cases: Vec<(String, &str)> = vec![
        (dir.display().to_string(), "adir"),
        ("../../../nope/../llmprobe.toml".into(), "does not exist"),
        (long.clone(), "aaaa"),
        (big.display().to_string(), "big.toml"),
    ];
    if cfg!(unix) {
        #[cfg(unix)]
        std::os::unix::fs::symlink("/nonexistent/llmprobe.toml", env.path().join("dangling"))
            .unwrap();
        cases.push(("dangling".into(), "dangling"));
        cases.push(("/dev/zero".into(), "/dev/zero"));
    }
    for (path, named) in &cases {
        let r = env.run(&["--config", path, "state"]);
        assert_eq!(r.code, 2, "{path:.60}: {}\n{}", r.stdout, r.stderr);
        assert!(
            r.stderr.starts_with("error: ") && r.stderr.contains(named),
            "{path:.60}: {}",
            r.stderr
        );
        assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    }
    assert!(!env.stats().exists(), "nothing written");
}

/// A non-UTF-8 `--config` path (where the OS allows one) is named in the
/// error, lossily.
#[cfg(unix)]
#[test]
fn a_non_utf8_config_path_is_named() {
    use std::os::unix::ffi::OsStrExt;
    let env = Env::new();
    let name = std::ffi::OsStr::from_bytes(b"bad-\xff.toml");
    std::fs::write(env.path().join(name), "[defaults]\nspacing_secs = -1\n").unwrap();
    let out = env
        .command(&[])
        .arg("--config")
        .arg(name)
        .arg("state")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("bad-\u{fffd}.toml"), "{err}");
}

/// Everything under `dir`, relative, sorted.
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            out.push(p.strip_prefix(dir).unwrap().display().to_string());
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

/// `--stats-dir` paths that are no directory: a clear error naming the
/// path, exit 4 for reads and 7 for writes, no panic, and nothing written
/// anywhere else.
#[test]
fn hostile_stats_dirs_get_clear_errors_and_nothing_is_written_elsewhere() {
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let cfg = config(&env, &[fake.provider("f", "openai", &["ok"], "")], "");
    let file = env.write("afile", "not a directory");
    let long = env.path().join("a".repeat(5000));
    for dir in [file.clone(), long.clone()] {
        let d = dir.display().to_string();
        for args in [
            &["rollup"][..],
            &["state"],
            &["check"],
            &["state", "disable", "f::ok"],
        ] {
            let mut all = vec!["--config", cfg.as_str(), "--stats-dir", d.as_str()];
            all.extend_from_slice(args);
            let r = env.run(&all);
            assert!(
                matches!(r.code, 4 | 7),
                "{args:?} in {d:.60}: {}\n{}",
                r.stdout,
                r.stderr
            );
            assert!(r.stderr.contains("error: "), "{}", r.stderr);
            assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
        }
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "not a directory");
    let before = tree(env.path());
    // `..` after a missing directory: an error, and the missing directory
    // is not made (`mkdir -p` would make it).
    let dotted = env.path().join("x/../dotted");
    let d = dotted.display().to_string();
    let r = crate::support::check(&env, &cfg, &["--stats-dir", &d]).code(7);
    assert!(r.stderr.contains("x/.."), "{}", r.stderr);
    assert_eq!(tree(env.path()), before);
    // After one that exists: what it names, and nothing else.
    std::fs::create_dir(env.path().join("x")).unwrap();
    let before = tree(env.path());
    crate::support::check(&env, &cfg, &["--stats-dir", &d]).ok();
    let after = tree(env.path());
    let new: Vec<&String> = after.iter().filter(|p| !before.contains(p)).collect();
    assert!(
        new.iter()
            .all(|p| p.starts_with("dotted") || p.starts_with("fake")),
        "{new:?}"
    );
    assert!(env.path().join("dotted/health_log.json").exists());
    assert_eq!(tree(&env.path().join("x")), Vec::<String>::new());
}

/// A stats directory that is a symlink: followed (it is what was asked),
/// reads write nothing at all, and a write only touches llmprobe's own
/// files there; a symlink to / or /etc is only read.
#[cfg(unix)]
#[test]
fn a_symlinked_stats_dir_is_followed_and_reads_write_nothing() {
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let cfg = config(&env, &[fake.provider("f", "openai", &["ok"], "")], "");
    let elsewhere = env.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("keep.txt"), "mine").unwrap();
    let link = env.path().join("link");
    std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
    let l = link.display().to_string();
    for args in [&["rollup"][..], &["state"], &["brief"]] {
        let mut all = vec!["--config", cfg.as_str(), "--stats-dir", l.as_str()];
        all.extend_from_slice(args);
        env.run(&all).ok();
        assert_eq!(tree(&elsewhere), ["keep.txt"], "{args:?} wrote");
    }
    crate::support::check(&env, &cfg, &["--stats-dir", &l]).ok();
    for p in tree(&elsewhere) {
        assert!(
            p == "keep.txt" || p.ends_with(".json") || p.contains("lock"),
            "check wrote {p}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(elsewhere.join("keep.txt")).unwrap(),
        "mine"
    );
    assert!(link.is_symlink(), "the link itself is left as it was");
    // Read-only commands over a link to / or /etc: they find no record and
    // say so; nothing is written there (the tree is the same after).
    for target in ["/", "/etc"] {
        let to = env.path().join(format!("to{}", target.replace('/', "_")));
        std::os::unix::fs::symlink(target, &to).unwrap();
        let before = tree_top(Path::new(target));
        let t = to.display().to_string();
        for args in [&["rollup"][..], &["state"], &["brief"]] {
            let mut all = vec!["--config", cfg.as_str(), "--stats-dir", t.as_str()];
            all.extend_from_slice(args);
            let r = env.run(&all);
            assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
        }
        assert_eq!(tree_top(Path::new(target)), before, "{target} changed");
    }
}

/// The names directly in `dir`.
#[cfg(unix)]
fn tree_top(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Data files that are symlinks to something else: a target that is not
/// llmprobe's data stops the command (exit 4) and is left as it was; a
/// state file is replaced by the atomic write (temporary file, rename), so
/// the link goes and its target is never written.
#[cfg(unix)]
#[test]
fn symlinked_data_files_never_write_through_to_their_target() {
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let cfg = config(&env, &[fake.provider("f", "openai", &["ok"], "")], "");
    std::fs::create_dir_all(env.stats()).unwrap();
    let passwd = env.write("victim", "root:x:0:0:root:/root:/bin/sh\n");
    let state = env.write("victim2", "{\"x\": 1}\n");
    std::os::unix::fs::symlink(&passwd, env.log()).unwrap();
    std::os::unix::fs::symlink(&state, env.state_file()).unwrap();
    for args in [&["check"][..], &["state", "disable", "f::ok"]] {
        let mut all = vec!["--config", cfg.as_str()];
        all.extend_from_slice(args);
        let r = env.run(&all).code(4);
        assert!(
            r.stderr.contains("left untouched"),
            "{args:?}: {}",
            r.stderr
        );
    }
    assert_eq!(
        std::fs::read_to_string(&passwd).unwrap(),
        "root:x:0:0:root:/root:/bin/sh\n"
    );
    assert_eq!(std::fs::read_to_string(&state).unwrap(), "{\"x\": 1}\n");
    // A valid state file behind the link: the link is replaced, the
    // target keeps what it held.
    std::fs::write(&state, "{}\n").unwrap();
    env.run(&["--config", &cfg, "state", "disable", "f::ok"])
        .ok();
    assert_eq!(std::fs::read_to_string(&state).unwrap(), "{}\n");
    assert!(!env.state_file().is_symlink());
    assert!(
        std::fs::read_to_string(env.state_file())
            .unwrap()
            .contains("disabled")
    );
}
