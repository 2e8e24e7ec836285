//! `llmprobe man`: the manual page, generated from the same clap definition
//! as the parser, so it never drifts from the flags that really exist (shell
//! completion, likewise generated, is in `completions`).

use clap::CommandFactory;

use crate::cli::Cli;
use crate::error::Result;
use crate::exit;
use crate::output;

/// Print the manual page.
pub fn man() -> Result<u8> {
    output::print(&man_page())?;
    Ok(exit::SUCCESS)
}

/// One page, llmprobe(1): the top-level sections, then a section per
/// subcommand (`LLMPROBE CHECK`, `LLMPROBE STATE ENABLE`, …) with its
/// synopsis, description, options and examples as subsections, then the
/// exit status. One file is easier to install than one per subcommand, and
/// `man llmprobe` then finds everything.
///
/// clap_mangen renders the names, descriptions and options. The synopsis
/// and the examples are rendered here: clap_mangen's synopsis leaves out
/// the value names (`[--provider]`), and it fills the `after_help` text as a
/// paragraph under "EXTRA", which breaks the aligned example lines apart.
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
    page.push_str(&roff(|w| top.render_name_section(w), false));
    page.push_str(&format!(".SH SYNOPSIS\n{}\n", synopsis(&cmd, "llmprobe")));
    page.push_str(&roff(
        |w| {
            top.render_description_section(w)?;
            top.render_options_section(w)
        },
        false,
    ));
    let (examples, exit_status) = after_help(&cmd);
    if let Some(text) = examples {
        page.push_str(".SH EXAMPLES\n");
        page.push_str(&verbatim(&text));
    }
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        subcommand_sections(sub, &globals, &mut page);
    }
    if let Some(text) = exit_status {
        page.push_str(".SH \"EXIT STATUS\"\n");
        page.push_str(&verbatim(&text));
    }
    page.push_str(&roff(|w| top.render_version_section(w), false));
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
    let name = sub
        .get_bin_name()
        .unwrap_or_else(|| sub.get_name())
        .to_string();
    page.push_str(&format!(".SH \"{}\"\n", name.to_uppercase()));
    page.push_str(&format!(".SS SYNOPSIS\n{}\n", synopsis(&sub, &name)));
    let man = clap_mangen::Man::new(sub.clone());
    let text = roff(
        |w| {
            man.render_description_section(w)?;
            man.render_options_section(w)
        },
        false,
    );
    for line in text.lines() {
        match line.strip_prefix(".SH ") {
            Some(heading) => page.push_str(&format!(".SS {heading}\n")),
            None => {
                page.push_str(line);
                page.push('\n');
            }
        }
    }
    let (examples, exit_status) = after_help(&sub);
    if let Some(text) = examples {
        page.push_str(".SS EXAMPLES\n");
        page.push_str(&verbatim(&text));
    }
    if let Some(text) = exit_status {
        page.push_str(".SS \"EXIT STATUS\"\n");
        page.push_str(&verbatim(&text));
    }
    for nested in sub.get_subcommands().filter(|s| !s.is_hide_set()) {
        subcommand_sections(nested, globals, page);
    }
}

/// A command's `after_help`, split into its examples (without the
/// "Examples:" line, which the section heading replaces) and its "Exit
/// codes:" paragraph, which goes under EXIT STATUS.
fn after_help(cmd: &clap::Command) -> (Option<String>, Option<String>) {
    let Some(text) = cmd.get_after_long_help().or(cmd.get_after_help()) else {
        return (None, None);
    };
    let text = text.to_string();
    let mut examples = Vec::new();
    let mut exit_status = None;
    for paragraph in text.split("\n\n") {
        if paragraph.starts_with("Exit codes:") {
            exit_status = Some(paragraph.to_string());
        } else {
            examples.push(paragraph.strip_prefix("Examples:\n").unwrap_or(paragraph));
        }
    }
    let examples = Some(examples.join("\n\n")).filter(|e| !e.trim().is_empty());
    (examples, exit_status)
}

/// The synopsis line with each option's value name, as man pages write
/// it: `llmprobe check [-p|--provider PROVIDER]… [--dry-run] …`.
fn synopsis(cmd: &clap::Command, name: &str) -> String {
    let mut out = format!("\\fB{}\\fR", escape(name));
    for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        let many = matches!(
            arg.get_action(),
            clap::ArgAction::Append | clap::ArgAction::Count
        );
        let value = || {
            arg.get_value_names()
                .and_then(|v| v.first())
                .map(|v| v.to_string())
                .unwrap_or_else(|| arg.get_id().as_str().to_uppercase())
        };
        let mut item = if arg.is_positional() {
            format!("\\fI{}\\fR", escape(&value()))
        } else {
            let mut names = Vec::new();
            if let Some(c) = arg.get_short() {
                names.push(format!("\\fB\\-{}\\fR", escape(&c.to_string())));
            }
            if let Some(l) = arg.get_long() {
                names.push(format!("\\fB\\-\\-{}\\fR", escape(l)));
            }
            let mut item = names.join("|");
            if arg.get_action().takes_values() {
                let optional = arg.get_num_args().is_some_and(|n| n.min_values() == 0);
                let v = format!("\\fI{}\\fR", escape(&value()));
                item.push_str(&if optional {
                    format!(" [{v}]")
                } else {
                    format!(" {v}")
                });
            }
            item
        };
        if !arg.is_required_set() {
            item = format!("[{item}]");
        }
        if many {
            item.push_str("...");
        }
        out.push(' ');
        out.push_str(&item);
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        out.push_str(" \\fICOMMAND\\fR");
    }
    out
}

/// Text that roff shows as written: no filling, no hyphenation, and no line
/// read as a request.
fn verbatim(text: &str) -> String {
    let mut out = String::from(".nf\n");
    for line in text.trim_end().lines() {
        let line = escape(line);
        if line.starts_with('.') || line.starts_with('\'') {
            out.push_str("\\&");
        }
        out.push_str(&line);
        out.push('\n');
    }
    out.push_str(".fi\n");
    out
}

/// roff escapes: a backslash, and a minus that must stay a minus (so that
/// flags copied from the page work).
fn escape(text: &str) -> String {
    text.replace('\\', "\\e").replace('-', "\\-")
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

    #[test]
    fn examples_are_verbatim_and_exit_codes_have_their_own_section() {
        let page = man_page();
        // No filled "EXTRA" section, no "Examples:" line under the heading.
        assert!(!page.contains(".SH EXTRA") && !page.contains(".SS EXTRA"));
        assert!(!page.contains("Examples:"));
        // Each example block is shown as written (no fill), with its minus
        // signs escaped so that a copied flag works.
        let check = page.split(".SH \"LLMPROBE CHECK\"").nth(1).unwrap();
        let examples = check.split(".SS EXAMPLES\n").nth(1).unwrap();
        assert!(examples.starts_with(".nf\n"), "{examples}");
        assert!(
            examples.contains(
                "  llmprobe check \\-\\-dry\\-run \\-\\-json             the same, as JSON\n"
            ),
            "{examples}"
        );
        // The exit codes come once for the program, under EXIT STATUS.
        assert_eq!(page.matches(".SH \"EXIT STATUS\"").count(), 1);
        let exit = page.split(".SH \"EXIT STATUS\"").nth(1).unwrap();
        assert!(exit.contains("Exit codes: 0 success"), "{exit}");
        // The synopsis names each option's value.
        assert!(
            check.contains("[\\fB\\-p\\fR|\\fB\\-\\-provider\\fR \\fINAME\\fR]..."),
            "{check}"
        );
        assert!(check.contains("[\\fB\\-\\-if\\-due\\fR [\\fIINTERVAL\\fR]]"));
    }

    #[test]
    fn roff_escapes_leave_no_line_read_as_a_request() {
        assert_eq!(
            verbatim(".hidden\n'quoted\nback\\slash -x"),
            ".nf\n\\&.hidden\n\\&'quoted\nback\\eslash \\-x\n.fi\n"
        );
    }
}
