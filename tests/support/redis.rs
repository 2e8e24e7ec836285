//! A `redis-server` of a test's own, on a free loopback port. Without one
//! installed a test skips, visibly, unless `LLMPROBE_REQUIRE_REDIS=1` (set
//! by `.ci/run`, which installs it).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn redis_server() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("redis-server"))
        .chain([PathBuf::from("/usr/bin/redis-server")])
        .find(|p| p.is_file())
}

/// A redis-server, killed when dropped. It keeps nothing on disk: a
/// restart starts empty.
pub struct Redis {
    bin: PathBuf,
    port: u16,
    child: Option<Child>,
}

impl Redis {
    /// Start one, or `None` (the test skips) when none is installed.
    pub fn start() -> Option<Redis> {
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

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Start it (again) on the same port, and wait until it answers.
    pub fn restart(&mut self) {
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

    pub fn kill(&mut self) {
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
