//! `llmprobe completions SHELL` and `llmprobe man`: documentation generated
//! from the same clap definition as the parser, so it never drifts from the
//! flags that really exist.

use clap::CommandFactory;

use crate::cli::{Cli, CompletionsArgs, Shell};
use crate::error::Result;
use crate::exit;
use crate::output;

/// Print the completion script for a shell.
pub fn completions(a: CompletionsArgs) -> Result<u8> {
    output::print(&completion_script(a.shell))?;
    Ok(exit::SUCCESS)
}

pub fn completion_script(shell: Shell) -> String {
    use clap_complete::Shell as S;
    let generator = match shell {
        Shell::Bash => S::Bash,
        Shell::Zsh => S::Zsh,
        Shell::Fish => S::Fish,
        Shell::Powershell => S::PowerShell,
        Shell::Elvish => S::Elvish,
    };
    let mut out = Vec::new();
    clap_complete::generate(generator, &mut visible_command(), "llmprobe", &mut out);
    String::from_utf8(out).expect("clap_complete writes UTF-8")
}

/// The command line without its hidden subcommands, which some of
/// clap_complete's generators would offer (`fake-provider` is for tests).
fn visible_command() -> clap::Command {
    let full = Cli::command();
    let args = full.get_arguments().cloned();
    clap::Command::new("llmprobe")
        .version(crate::cli::VERSION)
        .args(args)
        .subcommands(full.get_subcommands().filter(|s| !s.is_hide_set()).cloned())
}

/// Print the manual page.
pub fn man() -> Result<u8> {
    output::print(&man_page())?;
    Ok(exit::SUCCESS)
}

/// One page, llmprobe(1): the top-level sections, then a section per
/// subcommand (`LLMPROBE CHECK`, `LLMPROBE STATE ENABLE`, …) with its
/// synopsis, description, options and examples as subsections. One file is
/// easier to install than one per subcommand, and `man llmprobe` then finds
/// everything.
pub fn man_page() -> String {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    let globals: Vec<clap::Id> = cmd
        .get_arguments()
        .filter(|a| a.is_global_set())
        .map(|a| a.get_id().clone())
        .collect();
    let top = clap_mangen::Man::new(cmd.clone()).title("LLMPROBE");
    let mut page = roff(|w| top.render_title(w), true);
    page.push_str(&roff(
        |w| {
            top.render_name_section(w)?;
            top.render_synopsis_section(w)?;
            top.render_description_section(w)?;
            top.render_options_section(w)
        },
        false,
    ));
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        subcommand_sections(sub, &globals, &mut page);
    }
    page.push_str(&roff(
        |w| {
            top.render_extra_section(w)?;
            top.render_version_section(w)
        },
        false,
    ));
    page
}

/// The roff that `render` writes. Each clap_mangen call starts with the
/// same two-line preamble; the page keeps only the first.
fn roff(render: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>, preamble: bool) -> String {
    let mut out = Vec::new();
    render(&mut out).expect("writing to memory");
    let text = String::from_utf8(out).expect("roff is UTF-8");
    if preamble {
        return text;
    }
    text.lines()
        .filter(|l| !l.starts_with(".ie \\n(.g .ds Aq") && !l.starts_with(".el .ds Aq"))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// `.SH "LLMPROBE CHECK"`, then the subcommand's own page with its
/// sections turned into subsections, without the global flags (listed
/// once, at the top); then its own subcommands, each as a section.
fn subcommand_sections(sub: &clap::Command, globals: &[clap::Id], page: &mut String) {
    let mut sub = sub.clone();
    for id in globals {
        sub = sub.mut_arg(id, |a| a.hide(true));
    }
    let name = sub.get_bin_name().unwrap_or_else(|| sub.get_name());
    page.push_str(&format!(".SH \"{}\"\n", name.to_uppercase()));
    let man = clap_mangen::Man::new(sub.clone());
    let examples = sub.get_after_help().is_some() || sub.get_after_long_help().is_some();
    let text = roff(
        |w| {
            man.render_synopsis_section(w)?;
            man.render_description_section(w)?;
            man.render_options_section(w)?;
            if examples {
                man.render_extra_section(w)?;
            }
            Ok(())
        },
        false,
    );
    for line in text.lines() {
        match line.strip_prefix(".SH ") {
            Some("EXTRA") => page.push_str(".SS EXAMPLES\n"),
            Some(heading) => page.push_str(&format!(".SS {heading}\n")),
            None => {
                page.push_str(line);
                page.push('\n');
            }
        }
    }
    for nested in sub.get_subcommands().filter(|s| !s.is_hide_set()) {
        subcommand_sections(nested, globals, page);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_man_page_has_every_visible_subcommand_once() {
        let page = man_page();
        // roff's own preamble, then the title before any section.
        let first_macro = page
            .lines()
            .find(|l| l.starts_with(".TH ") || l.starts_with(".SH "))
            .unwrap();
        assert!(first_macro.starts_with(".TH LLMPROBE 1 "), "{first_macro}");
        for sub in [
            "CHECK",
            "PROVIDERS",
            "ROLLUP",
            "BRIEF",
            "STATE",
            "STATE ENABLE",
            "ROUTE",
            "SCHEDULE",
            "SCHEDULE INSTALL",
            "DEMO",
            "COMPLETIONS",
            "MAN",
        ] {
            let heading = format!(".SH \"LLMPROBE {sub}\"\n");
            assert_eq!(page.matches(&heading).count(), 1, "{heading}");
        }
        assert!(!page.contains("FAKE-PROVIDER"));
        // Flags of a subcommand are under it; global ones only once, at
        // the top.
        let option = |flag: &str| format!(".TP\n\\fB\\-\\-{}\\fR", flag.replace('-', "\\-"));
        assert_eq!(
            page.matches(&option("fail-on-down")).count(),
            1,
            "check's flags"
        );
        // Two subcommands have --dry-run: check and schedule install (and
        // schedule uninstall), each under its own heading.
        assert_eq!(page.matches(&option("dry-run")).count(), 3);
        assert_eq!(page.matches(&option("stats-dir")).count(), 1);
        assert_eq!(page.matches(".ds Aq").count(), 2, "one preamble");
    }
}
