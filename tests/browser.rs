//! The status page and the badges in a real browser: headless Chromium
//! (Debian's `chromium`, which `.ci/run` installs) renders them, and the
//! tests read the DOM it built and the screenshot it took
//! (`support::browser`).

use crate::Test;
#[allow(unused_imports)]
use crate::support::browser;
#[allow(unused_imports)]
use crate::support::need::Need;

pub fn tests() -> Vec<Test> {
    vec![Test::new(
        "browser::a_badge_renders_as_an_image",
        &[Need::Program("chromium")],
        a_badge_renders_as_an_image,
    )]
}

/// A badge `rollup --format badge` wrote, shown by a page through `<img>`
/// as a README shows it: Chromium loads it as an image of the width the
/// SVG declares (a badge it could not parse would fire `onerror`, with no
/// width), and the screenshot holds the message's green and the label's
/// grey.
fn a_badge_renders_as_an_image() {
    let env = crate::support::Env::new();
    let ts = crate::support::ago(3600);
    env.write(
        "stats/health_log.json",
        format!(
            "[\n{{\"ts\":\"{ts}\",\"provider\":\"groq\",\"model\":\"llama-3.1-8b-instant\",\"ok\":1,\"latency_ms\":300,\"failure_type\":\"\"}}\n]\n"
        ),
    );
    env.run(&[
        "rollup",
        "--format",
        "badge",
        "--provider",
        "groq",
        "--output",
        "badge.svg",
    ])
    .ok();
    let svg = std::fs::read_to_string(env.path().join("badge.svg")).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let width = doc.root_element().attribute("width").unwrap().to_string();
    assert!(svg.contains("groq uptime 24h: 100%"), "{svg}");

    // The DOM after load: what the image decoded to.
    env.write(
        "dom.html",
        "<!doctype html><html><body>\
         <img id=\"b\" src=\"badge.svg\" alt=\"groq uptime\" \
         onload=\"document.body.setAttribute('data-loaded', this.naturalWidth + 'x' + this.naturalHeight)\" \
         onerror=\"document.body.setAttribute('data-loaded', 'error')\">\
         </body></html>",
    );
    let dom = browser::dump_dom(&browser::file_url(&env.path().join("dom.html")));
    assert!(
        dom.contains(&format!("data-loaded=\"{width}x20\"")),
        "the badge did not load as a {width}×20 image:\n{dom}"
    );

    // The pixels: a page with only the badge, scaled up 4 times.
    env.write(
        "shot.html",
        format!(
            "<!doctype html><html><body style=\"margin:0;background:#fff\">\
             <img src=\"badge.svg\" style=\"width:{}px;height:80px\"></body></html>",
            width.parse::<u32>().unwrap() * 4
        ),
    );
    let png = env.path().join("badge.png");
    browser::screenshot(
        &browser::file_url(&env.path().join("shot.html")),
        &png,
        800,
        200,
        false,
    );
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&png).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let pixels: Vec<&[u8]> = buf[..info.buffer_size()]
        .chunks(channels)
        .map(|p| &p[..3])
        .collect();
    // Colours as drawn, within what the badge's light gradient and
    // anti-aliasing shift them.
    let near = |(r, g, b): (i32, i32, i32)| {
        pixels
            .iter()
            .filter(|p| {
                (p[0] as i32 - r).abs() <= 24
                    && (p[1] as i32 - g).abs() <= 24
                    && (p[2] as i32 - b).abs() <= 24
            })
            .count()
    };
    let green = near((0x2e, 0x7d, 0x32));
    let grey = near((0x55, 0x55, 0x55));
    assert!(green > 500, "too little of the message's green: {green}");
    assert!(grey > 1000, "too little of the label's grey: {grey}");
}
