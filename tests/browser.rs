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
    vec![]
}
