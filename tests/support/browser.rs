//! Headless Chromium (Debian's `chromium`), for the tests that render a
//! page or a badge: the DOM after the page ran, and a screenshot. Each call
//! gets a profile directory of its own, so runs never share state, and the
//! browser is told to fetch nothing: a page that tried to load a resource
//! from the network would render without it (and tests check the markup
//! for such loads too).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::need::on_path;

/// The Chromium binary.
pub fn chromium() -> PathBuf {
    on_path("chromium")
        .or_else(|| on_path("chromium-browser"))
        .expect("chromium on PATH (apt-get install chromium)")
}

/// A `chromium --headless` command with the flags every use needs: no
/// sandbox (CI runs as root), no GPU, a throwaway profile, no network.
fn headless(profile: &Path) -> Command {
    let mut c = Command::new(chromium());
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        // Any host but localhost resolves nowhere.
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .env_remove("http_proxy")
    .env_remove("https_proxy");
    c
}

/// `file://` URL of a local file.
pub fn file_url(path: &Path) -> String {
    let abs = std::fs::canonicalize(path).expect("file exists");
    format!("file://{}", abs.display())
}

/// Run a headless command and return its stdout. A browser that hangs is
/// killed after two minutes (a safety net, not a timing assertion).
fn run(mut c: Command, what: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let (out_path, err_path) = (dir.path().join("out"), dir.path().join("err"));
    c.stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap());
    let mut child = c.spawn().unwrap_or_else(|e| panic!("chromium {what}: {e}"));
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium {what} did not finish in 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    assert!(
        status.success(),
        "chromium {what} failed: {status}\n{stderr}"
    );
    String::from_utf8(std::fs::read(&out_path).unwrap()).expect("chromium prints UTF-8")
}

/// The serialised DOM of `url` after it loaded (scripts ran).
pub fn dump_dom(url: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut c = headless(profile.path());
    c.args(["--dump-dom", "--virtual-time-budget=2000", url]);
    run(c, "--dump-dom")
}

/// A PNG screenshot of `url`, `width`×`height` CSS pixels, into `png`.
/// `dark` asks for the page's dark colour scheme.
pub fn screenshot(url: &str, png: &Path, width: u32, height: u32, dark: bool) {
    let profile = tempfile::tempdir().unwrap();
    let mut c = headless(profile.path());
    c.arg(format!("--screenshot={}", png.display()))
        .arg(format!("--window-size={width},{height}"))
        .arg("--virtual-time-budget=2000");
    if dark {
        c.arg("--force-dark-mode")
            .arg("--blink-settings=preferredColorScheme=0");
    }
    c.arg(url);
    run(c, "--screenshot");
    let bytes = std::fs::read(png).expect("screenshot written");
    assert!(
        bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.len() > 1000,
        "chromium wrote no PNG to {}",
        png.display()
    );
}
