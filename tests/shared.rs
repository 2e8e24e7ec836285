//! `route --serve --shared-state`: two instances, one Redis, one budget.
//! Each test starts its own `redis-server` on a free loopback port. Without
//! one installed the tests skip, visibly, unless `LLMPROBE_REQUIRE_REDIS=1`
//! (set by `.ci/run`, which installs it).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{Fake, RouteServer, advance, chat_body, clock_env as env, http};

fn redis_server() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("redis-server"))
        .chain([PathBuf::from("/usr/bin/redis-server")])
        .find(|p| p.is_file())
}

/// A redis-server of the test's own, killed when dropped.
struct Redis {
    bin: PathBuf,
    port: u16,
    child: Option<Child>,
}

impl Redis {
    fn start() -> Option<Redis> {
        let Some(bin) = redis_server() else {
            assert!(
                std::env::var("LLMPROBE_REQUIRE_REDIS").as_deref() != Ok("1"),
                "LLMPROBE_REQUIRE_REDIS=1 but redis-server is not installed"
            );
            eprintln!("SKIPPED: redis-server is not installed (apt-get install redis-server)");
            return None;
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut r = Redis {
            bin,
            port,
            child: None,
        };
        r.restart();
        Some(r)
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    fn restart(&mut self) {
        let child = Command::new(&self.bin)
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start redis-server");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.pong() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn pong(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        let mut buf = [0u8; 7];
        s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}

fn chat(srv: &RouteServer, model: &str) -> crate::support::Http {
    http(
        "POST",
        &format!("{}/v1/chat/completions", srv.url),
        &[("content-type", "application/json")],
        Some(&chat_body(model, false)),
    )
}

fn shared_state(srv: &RouteServer) -> String {
    let r = http("GET", &format!("{}/readyz", srv.url), &[], None);
    r.json()["shared_state"].as_str().unwrap_or("").to_string()
}

/// Poll (bounded) until every instance's `/readyz` says `want` in its
/// `shared_state`.
fn wait_for(servers: &[&RouteServer], want: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    for s in servers {
        loop {
            let got = shared_state(s);
            if got.contains(want) {
                break;
            }
            assert!(Instant::now() < deadline, "shared_state stayed {got:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[test]
fn two_instances_share_one_budget_and_cooldowns_and_survive_redis_going_away() {
    let Some(mut redis) = Redis::start() else {
        return;
    };
    let env = env();
    let fake = Fake::start(&env, &[]);
    let tables = [
        fake.provider("a", "openai", &["ok"], "limits = { rpm = 10 }"),
        fake.provider("c", "openai", &["rate-limit"], ""),
    ];
    let cfg = env
        .write(
            "llmprobe.toml",
            format!(
                "include_default_catalog = false\n[defaults]\ntimeout_secs = 10\n\n{}",
                tables.join("\n")
            ),
        )
        .display()
        .to_string();
    let url = redis.url();
    let args = ["--shared-state", url.as_str()];
    let a = RouteServer::start(&env, &cfg, &args);
    let b = RouteServer::start(&env, &cfg, &args);
    let calls = |m: &str| fake.seen().iter().filter(|s| s.model() == m).count();

    // 40 requests alternating within one minute of route's time: the
    // upstream gets exactly its 10.
    let mut served = 0;
    for i in 0..40 {
        let srv = if i % 2 == 0 { &a } else { &b };
        let r = chat(srv, "a::ok");
        match r.status {
            200 => served += 1,
            429 => assert!(
                r.header("x-fallback-trail").contains("limit:rpm"),
                "{:?}",
                r.headers
            ),
            s => panic!("status {s}: {}", r.body),
        }
    }
    assert_eq!(served, 10);
    assert_eq!(calls("ok"), 10);
    assert!(!env.stats().join("route_state.json").exists());

    // A cooldown set through one instance holds on the other at once.
    chat(&a, "c::rate-limit");
    assert_eq!(calls("rate-limit"), 1);
    let r = chat(&b, "c::rate-limit");
    assert!(
        r.header("x-fallback-trail").contains("cooldown:rate_limit"),
        "{:?}",
        r.headers
    );
    assert_eq!(calls("rate-limit"), 1);
    assert_eq!(shared_state(&a), "ok");

    // Redis goes away: both keep serving from local state.
    redis.kill();
    advance(&env, 61);
    for i in 0..6 {
        let srv = if i % 2 == 0 { &a } else { &b };
        let r = chat(srv, "a::ok");
        assert!([200, 429].contains(&r.status), "{}: {}", r.status, r.body);
    }
    assert!(calls("ok") > 10);
    for s in [&a, &b] {
        // The first request that failed to reach Redis switched to local.
        let got = shared_state(s);
        assert!(got.contains("unavailable"), "{got}");
        assert!(got.contains("serving from local state"), "{got}");
    }
    // It comes back: both pick it up again, and share one budget again.
    redis.restart();
    wait_for(&[&a, &b], "ok");
    advance(&env, 200);
    let before = calls("ok");
    let mut served = 0;
    for i in 0..14 {
        let srv = if i % 2 == 0 { &a } else { &b };
        if chat(srv, "a::ok").status == 200 {
            served += 1;
        }
    }
    assert_eq!(served, 10);
    assert_eq!(calls("ok") - before, 10);
}
