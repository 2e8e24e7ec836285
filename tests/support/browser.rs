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

/// What `script` makes of `page` (an HTML document's text) laid out in
/// an iframe `width` CSS pixels wide: the width media queries see, which
/// a headless window (500 px at least) cannot give. The page itself runs
/// no script: `script` runs in a page around it, once the frame has
/// loaded, with `d`, the frame's document, and `w`, its window; what it
/// returns (a string) is what this returns.
pub fn in_frame(page: &str, width: u32, script: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let srcdoc = page.replace('&', "&amp;").replace('"', "&quot;");
    let outer = dir.path().join("frame.html");
    std::fs::write(
        &outer,
        format!(
            "<!DOCTYPE html><html><body style=\"margin:0\">\
             <iframe id=\"f\" style=\"width:{width}px;height:8000px;border:0\" srcdoc=\"{srcdoc}\"></iframe>\
             <script>const f = document.getElementById('f'); f.onload = () => {{\
             const d = f.contentDocument, w = f.contentWindow; \
             document.body.setAttribute('data-out', (() => {{ {script} }})()); }};</script>\
             </body></html>"
        ),
    )
    .unwrap();
    let dom = dump_dom(&file_url(&outer));
    let at = dom
        .find("data-out=\"")
        .unwrap_or_else(|| panic!("the script returned nothing:\n{dom}"))
        + "data-out=\"".len();
    let value = &dom[at..at + dom[at..].find('"').unwrap()];
    value
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&")
}

/// The colour of the pixel at (`x`, `y`) of a PNG screenshot, and its
/// width and height.
pub fn pixel(png: &Path, x: u32, y: u32) -> ([u8; 3], (u32, u32)) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(png).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert!(
        x < info.width && y < info.height,
        "({x}, {y}) outside {png:?}"
    );
    let channels = info.color_type.samples();
    let at = (y as usize * info.width as usize + x as usize) * channels;
    (
        [buf[at], buf[at + 1], buf[at + 2]],
        (info.width, info.height),
    )
}
