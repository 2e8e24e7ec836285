//! Abuse of `route --serve` from its own clients, on loopback, bounded in
//! count: clients that send a byte at a time and then stall, thousands of
//! idle connections, running out of file descriptors, clients that go away
//! in the middle of a streamed answer, and bursts above the limits. In
//! every case another client is still served. These tests assert outcomes
//! (served, refused, closed, corrected), never how long anything took; the
//! latencies under each abuse are `scripts/abuse`'s figures.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::time::Duration;

use crate::support::{
    Env, Fake, RouteServer, chat_body, eventually, http, route_config, usage_line,
};

/// How long a test waits for the server to do something before it calls
/// the test hung: far beyond any timeout the tests configure.
const HUNG: Duration = Duration::from_secs(120);

fn addr(srv: &RouteServer) -> String {
    srv.url.trim_start_matches("http://").to_string()
}

fn connect(srv: &RouteServer) -> TcpStream {
    let s = TcpStream::connect(addr(srv)).expect("connect to route");
    s.set_read_timeout(Some(HUNG)).unwrap();
    s
}

/// A POST's head, for a body of `len` bytes.
fn post_head(path: &str, len: usize) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: route\r\nContent-Type: application/json\r\n\
         Content-Length: {len}\r\n\r\n"
    )
}

/// Write `bytes` one byte per write.
fn drip(s: &mut TcpStream, bytes: &[u8]) {
    for b in bytes {
        // On a loaded machine the server's timeout may pass mid-drip; it
        // closes the connection, which the caller's read then sees.
        if s.write_all(std::slice::from_ref(b)).is_err() {
            return;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Everything the server sends until it closes the connection (a reset
/// counts as a close). Panics if it neither closes nor sends within
/// [`HUNG`].
fn until_closed(mut s: TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                panic!("the server kept a stalled client for {HUNG:?}")
            }
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                panic!("the server kept a stalled client for {HUNG:?}")
            }
            Err(_) => break,
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// One response read off a keep-alive connection: its status and body
/// (Content-Length framed, as route's small answers are).
fn read_response(s: &mut TcpStream) -> (u16, String) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = s.read(&mut buf).expect("a response");
        assert!(n > 0, "closed before a whole response: {got:?}");
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let len: usize = text[..end]
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())?
                })
                .unwrap_or(0);
            if got.len() >= end + 4 + len {
                let status = text[9..12].parse().unwrap();
                return (status, text[end + 4..].to_string());
            }
        }
    }
}

fn chat_ok(srv: &RouteServer, model: &str) {
    let r = srv.chat(model, false);
    assert_eq!(r.status, 200, "{}", r.body);
}

/// `GET /livez` on a kept-alive connection, and its response.
fn livez(s: &mut TcpStream) -> (u16, String) {
    s.write_all(b"GET /livez HTTP/1.1\r\nHost: route\r\n\r\n")
        .unwrap();
    read_response(s)
}

/// A fake provider, and a route config in front of it: provider `o` with
/// `models` (`extra` in its table), and `route` (a `[route]` table, or
/// nothing).
fn setup(env: &Env, models: &[&str], extra: &str, route: &str) -> (Fake, String) {
    let fake = Fake::start(env, &[]);
    let cfg = route_config(env, &[fake.provider("o", "openai", models, extra)], route);
    (fake, cfg)
}

/// A client that sends its request head, or its body, a byte at a time
/// does not hold the server up: another client is served meanwhile. One
/// that then stalls is dropped once `[route] read_timeout_secs` has
/// passed: a stalled head by closing its connection (hyper's header
/// timeout), a stalled body with a 408 in the surface's shape.
#[test]
fn slow_clients_are_dropped_and_others_served_meanwhile() {
    let env = Env::new();
    let (fake, cfg) = setup(&env, &["ok"], "", "[route]\nread_timeout_secs = 5");
    let srv = RouteServer::start(&env, &cfg, &[]);
    let body = chat_body("o::ok", false);
    let surfaces = [
        "/v1/chat/completions",
        "/v1/messages",
        "/v1/responses",
        "/v1/completions",
    ];
    let mut heads = Vec::new();
    let mut bodies = Vec::new();
    for path in surfaces {
        let head = post_head(path, body.len());
        // Half a head, a byte at a time, then nothing.
        let mut s = connect(&srv);
        drip(&mut s, &head.as_bytes()[..head.len() / 2]);
        heads.push(s);
        // A whole head, half the body a byte at a time, then nothing.
        let mut s = connect(&srv);
        s.write_all(head.as_bytes()).unwrap();
        drip(&mut s, &body.as_bytes()[..body.len() / 2]);
        bodies.push((path, s));
    }
    // The slow clients are connected; another is served.
    let seen = fake.seen().len();
    chat_ok(&srv, "o::ok");
    assert_eq!(
        http("GET", &format!("{}/livez", srv.url), &[], None).status,
        200
    );
    for s in heads {
        let got = until_closed(s);
        assert!(
            got.is_empty() || got.starts_with("HTTP/1.1 408"),
            "a stalled head got {got:?}"
        );
    }
    for (path, s) in bodies {
        let got = until_closed(s);
        assert!(got.starts_with("HTTP/1.1 408"), "{path}: {got:?}");
        assert!(got.contains("did not arrive within 5s"), "{path}: {got:?}");
    }
    // Served still; of all these, only the served requests reached the
    // upstream.
    chat_ok(&srv, "o::ok");
    assert_eq!(fake.seen().len(), seen + 2);
}

/// `cmd` with its open-file limit set to `soft` (and `hard`, when given;
/// else the test's own hard limit), for it alone.
fn nofile(cmd: &mut std::process::Command, soft: u64, hard: Option<u64>) {
    let mut own = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut own) }, 0);
    let hard = hard.map_or(own.rlim_max, |h| h as libc::rlim_t);
    let r = libc::rlimit {
        rlim_cur: soft as libc::rlim_t,
        rlim_max: hard,
    };
    // SAFETY: only setrlimit, async-signal-safe, runs in the child.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setrlimit(libc::RLIMIT_NOFILE, &r) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// A line of `/proc/PID/status`, in kB (`VmRSS`).
fn proc_kb(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// Idle connections this test holds open at once.
const IDLE: usize = 5000;

/// 5,000 idle keep-alive connections at once, some after a request, the
/// rest before any: route (started with a soft open-file limit of 1024,
/// which it raises to the hard one) holds them all, serves another client
/// meanwhile, and its memory stays bounded.
#[test]
#[cfg(target_os = "linux")]
fn thousands_of_idle_connections_do_not_stop_the_server() {
    let env = Env::new();
    // Long enough that the idle connections stay for the whole test.
    let (_fake, cfg) = setup(&env, &["ok"], "", "[route]\nread_timeout_secs = 600");
    // The test holds the client ends: its own soft limit goes up to the
    // hard one too (harmless to the other tests in this process).
    let mut own = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes, and setrlimit reads, the struct given.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut own), 0);
        own.rlim_cur = own.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &own);
    }
    let mut cmd = RouteServer::command(&env, &cfg, &[]);
    nofile(&mut cmd, 1024, None);
    cmd.stderr(std::process::Stdio::inherit());
    let srv = RouteServer::spawn(cmd);
    let pid = srv.child.id();
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let nums: Vec<&str> = line.split_whitespace().skip(3).take(2).collect();
    assert_eq!(nums[0], nums[1], "route raised its soft limit: {line}");
    assert!(
        nums[0].parse::<usize>().unwrap_or(usize::MAX) > IDLE + 100,
        "{line}"
    );
    chat_ok(&srv, "o::ok");
    let rss_before = proc_kb(pid, "VmRSS");
    let mut idle = Vec::with_capacity(IDLE);
    for i in 0..IDLE {
        let mut s = connect(&srv);
        if i % 10 == 0 {
            assert_eq!(livez(&mut s).0, 200, "connection {i}");
        }
        idle.push(s);
    }
    eventually("route holds every idle connection", || {
        let n = open_fds(pid);
        if n >= IDLE {
            Ok(())
        } else {
            Err(format!("{n} fds"))
        }
    });
    chat_ok(&srv, "o::ok");
    // A kept-alive connection serves another request after its idle spell.
    let (status, body) = livez(&mut idle[0]);
    assert_eq!(status, 200, "{body}");
    let rss_after = proc_kb(pid, "VmRSS");
    assert!(
        rss_after < 200 * 1024,
        "route's RSS went from {rss_before} kB to {rss_after} kB with {IDLE} idle connections"
    );
    drop(idle);
    chat_ok(&srv, "o::ok");
}

/// Out of file descriptors (a hard limit it cannot raise), route says so
/// on stderr, once, instead of failing silently or spinning on accept; the
/// connections it holds are served, and once some close, new ones are
/// accepted again.
#[test]
#[cfg(target_os = "linux")]
fn out_of_file_descriptors_route_says_so_and_recovers() {
    let env = Env::new();
    let (_fake, cfg) = setup(&env, &["ok"], "", "[route]\nread_timeout_secs = 600");
    let log = env.path().join("route.err");
    let mut cmd = RouteServer::command(&env, &cfg, &[]);
    nofile(&mut cmd, 96, Some(96));
    cmd.stderr(std::fs::File::create(&log).unwrap());
    let srv = RouteServer::spawn(cmd);
    let pid = srv.child.id();
    // More connections than route has descriptors left: the kernel
    // completes them (the listen backlog), route cannot accept them all.
    let mut held: Vec<TcpStream> = Vec::new();
    for _ in 0..150 {
        match TcpStream::connect(addr(&srv)) {
            Ok(s) => held.push(s),
            Err(_) => break,
        }
    }
    let said = eventually("route says it is out of file descriptors", || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("out of file descriptors") {
            Ok(text)
        } else {
            Err(format!("{} fds; stderr: {text}", open_fds(pid)))
        }
    });
    assert!(
        said.contains("Raise the open-file limit (now 96; ulimit -n"),
        "{said}"
    );
    // Said once per spell, not once per retry.
    assert_eq!(said.matches("out of file descriptors").count(), 1, "{said}");
    // An accepted connection is still served.
    let mut first = held.remove(0);
    first.set_read_timeout(Some(HUNG)).unwrap();
    assert_eq!(livez(&mut first).0, 200);
    // Once they close, route accepts and serves again.
    drop(first);
    drop(held);
    chat_ok(&srv, "o::ok");
}

/// Each inbound surface that streams, the request that streams on it, and
/// what in its stream shows that the answer's first content arrived.
const STREAMING: &[(&str, &str)] = &[
    ("/v1/chat/completions", r#""content":"1""#),
    ("/v1/messages", "text_delta"),
    ("/v1/responses", "output_text.delta"),
    ("/v1/completions", r#""text":"1""#),
];

fn stream_body(path: &str, model: &str) -> String {
    let q = "What is 7 + 7? Reply with only the number.";
    let v = match path {
        "/v1/completions" => serde_json::json!({
            "model": model, "prompt": q, "stream": true, "max_tokens": 2000,
        }),
        "/v1/responses" => serde_json::json!({
            "model": model, "input": q, "stream": true, "max_output_tokens": 2000,
        }),
        _ => serde_json::json!({
            "model": model, "stream": true, "max_tokens": 2000,
            "messages": [{"role": "user", "content": q}],
        }),
    };
    v.to_string()
}

/// A client that goes away in the middle of a streamed answer, on every
/// surface that streams: route cancels the upstream request (the fake
/// sees its connection close before the stream's end), and the request's
/// token reservation, 2,000 answer tokens and the prompt's estimate, is
/// corrected to the prompt and the few tokens streamed so far, which the
/// upstream billed: the tpm and tpd usage route shows says so.
#[test]
fn a_client_gone_mid_stream_cancels_the_upstream_and_corrects_its_tokens() {
    let env = Env::new();
    // The first content chunk, then silence: only the client's going away
    // ends the stream before the idle timeout (60 s).
    let (fake, cfg) = setup(
        &env,
        &["stream-stall"],
        "limits = { tpm = 1000000, tpd = 10000000 }",
        "",
    );
    let srv = RouteServer::start(&env, &cfg, &[]);
    let used = |kind: &str| {
        let v = srv.providers();
        usage_line(&v, "o", kind).map_or(0, |u| u["used"].as_u64().unwrap_or(0))
    };
    let mut before = 0;
    for (i, (path, first)) in STREAMING.iter().enumerate() {
        let body = stream_body(path, "o::stream-stall");
        let mut s = connect(&srv);
        s.write_all(post_head(path, body.len()).as_bytes()).unwrap();
        s.write_all(body.as_bytes()).unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&got).contains(first) {
            let n = s.read(&mut buf).expect("the stream's first content");
            assert!(
                n > 0,
                "{path}: closed early: {}",
                String::from_utf8_lossy(&got)
            );
            got.extend_from_slice(&buf[..n]);
        }
        let head = String::from_utf8_lossy(&got).into_owned();
        assert!(head.starts_with("HTTP/1.1 200"), "{path}: {head}");
        // While the reply streams, its reservation holds the estimate.
        let streaming = used("tpm");
        assert!(
            streaming >= before + 2000,
            "{path}: {before} then {streaming}"
        );
        drop(s);
        let closed = eventually("the upstream request is cancelled", || {
            let c = fake.closed_early();
            if c.len() > i {
                Ok(c)
            } else {
                Err(format!("{c:?}"))
            }
        });
        assert_eq!(closed[i]["model"], "stream-stall", "{closed:?}");
        assert!(closed[i]["sent_bytes"].as_u64().unwrap() > 0);
        // Corrected: each request now counts its prompt (a dozen tokens,
        // whatever each surface adds) and one streamed token, far below
        // the 2,000 reserved.
        before = eventually("the reservation is corrected", || {
            let (tpm, tpd) = (used("tpm"), used("tpd"));
            if tpm == tpd && tpm >= before + 2 && tpm <= before + 100 {
                Ok(tpm)
            } else {
                Err(format!("{path}: tpm {tpm}, tpd {tpd}, before {before}"))
            }
        });
    }
    let streams = fake
        .seen()
        .iter()
        .filter(|s| s.model() == "stream-stall")
        .count();
    assert_eq!(streams, STREAMING.len());
}

/// A burst of requests above the configured rpm: the excess get a 429
/// with Retry-After at once (route does not queue), none hangs or loses
/// its connection, the counts add up, and another client is served.
#[test]
fn a_burst_above_the_limits_is_refused_cleanly() {
    let env = Env::new();
    let (fake, cfg) = setup(&env, &["ok"], "limits = { rpm = 5 }", "");
    let srv = RouteServer::start(&env, &cfg, &[]);
    let sent = 40;
    let url = format!("{}/v1/chat/completions", srv.url);
    let answers: Vec<_> = (0..sent)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || {
                http(
                    "POST",
                    &url,
                    &[("content-type", "application/json")],
                    Some(&chat_body("o::ok", false)),
                )
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().expect("every request answered"))
        .collect();
    let served = answers.iter().filter(|r| r.status == 200).count();
    let refused: Vec<_> = answers.iter().filter(|r| r.status == 429).collect();
    assert_eq!(
        served,
        5,
        "{:?}",
        answers.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    assert_eq!(served + refused.len(), sent);
    for r in &refused {
        let secs: u64 = r
            .header("retry-after")
            .parse()
            .unwrap_or_else(|_| panic!("429 without a Retry-After: {:?} {}", r.headers, r.body));
        // The minute window, rounded up to the second.
        assert!((1..=61).contains(&secs), "{secs}");
        assert_eq!(r.json()["error"]["type"], "rate_limit_error", "{}", r.body);
    }
    let chats = fake.seen().iter().filter(|s| s.model() == "ok").count();
    assert_eq!(chats, 5);
    // Other clients are still served.
    let r = http("GET", &format!("{}/v1/models", srv.url), &[], None);
    assert_eq!(r.status, 200, "{}", r.body);
}
