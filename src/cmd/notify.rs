//! `llmprobe notify test [URL]`: a test message to each configured channel
//! (or to URL alone), and how each delivery went.

use crate::cli::{NotifyAction, NotifyArgs};
use crate::error::{Error, Result};
use crate::exit;
use crate::notify::{self, Message, channel::NOTIFY_VAR};
use crate::settings::Settings;

pub fn run(settings: &Settings, args: NotifyArgs) -> Result<u8> {
    match args.action {
        NotifyAction::Test(a) => test(settings, a.url),
    }
}

fn test(settings: &Settings, url: Option<String>) -> Result<u8> {
    let channels = match url {
        Some(u) => vec![notify::Channel::parse(&u)?],
        None => notify::configured(settings, &[])?,
    };
    if channels.is_empty() {
        return Err(Error::config(format!(
            "no alert channel is configured: give a URL (llmprobe notify test URL), \
             set {NOTIFY_VAR} (webhook URLs separated by spaces), or name the variables \
             that hold them in llmprobe.toml ([notify] url_env = [\"SLACK_HOOK\"]); \
             see docs/alerts.md"
        )));
    }
    let msg = Message {
        at: crate::clock::Clock::from_env().now(),
        changes: Vec::new(),
        test: true,
    };
    let outcomes = notify::deliver(&channels, &msg);
    let mut text = String::new();
    let mut failed = 0;
    for o in &outcomes {
        let line = match &o.result {
            Ok(status) => format!("{}: ok (HTTP {status})", o.label),
            Err(why) => {
                failed += 1;
                format!("{}: failed ({why})", o.label)
            }
        };
        text.push_str(&line);
        text.push('\n');
    }
    crate::output::print(&text)?;
    Ok(if failed == 0 {
        exit::SUCCESS
    } else {
        exit::CONDITION
    })
}
