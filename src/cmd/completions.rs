//! Shell completion, computed by llmprobe itself while the user types.
//!
//! `llmprobe completions SHELL` prints a short registration script. On each
//! Tab, that script runs llmprobe again with `LLMPROBE_COMPLETE=SHELL` and
//! the words of the line after `--` (clap_complete's dynamic protocol; bash
//! and zsh also pass `_CLAP_COMPLETE_INDEX`, the word under the cursor, and
//! `_CLAP_IFS`, the separator of the answers). [`complete_if_asked`], the
//! first thing `main` does, answers from the same clap definition as the
//! parser, so completions never drift from the flags that exist, and offers
//! provider and model names from the config that line would read: a
//! `--config` on it, else `LLMPROBE_CONFIG`, else the usual lookup of
//! `settings`. Hidden subcommands are left out.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::CommandFactory;
use clap_complete::engine::{ArgValueCandidates, CompletionCandidate};
use clap_complete::env::EnvCompleter;

use crate::catalog::Catalog;
use crate::cli::{Cli, CompletionsArgs, Names, Shell};
use crate::error::Result;
use crate::exit;
use crate::output;
use crate::settings::{self, CONFIG_ENV};

/// The variable that turns a run into a completion request. Not
/// clap_complete's generic `COMPLETE`, which other programs read too.
pub const VAR: &str = "LLMPROBE_COMPLETE";

/// The command the scripts complete.
const BIN: &str = "llmprobe";

/// Answer a completion request and exit, when `LLMPROBE_COMPLETE` is set;
/// otherwise return at once. Must run before anything writes to stdout.
pub fn complete_if_asked() {
    if std::env::var_os(VAR).is_none_or(|v| v.is_empty()) {
        return;
    }
    let config = config_on_line(std::env::args_os().skip_while(|a| a != "--"));
    clap_complete::CompleteEnv::with_factory(move || completion_command(config.clone()))
        .var(VAR)
        .bin(BIN)
        .completer(completer())
        .complete();
}

/// Print the registration script for a shell.
pub fn completions(a: CompletionsArgs) -> Result<u8> {
    output::print(&registration(a.shell, &completer()))?;
    Ok(exit::SUCCESS)
}

/// The script that registers llmprobe's completion in `shell`, running
/// `completer` to compute the answers.
pub fn registration(shell: Shell, completer: &str) -> String {
    use clap_complete::env::{Bash, Elvish, Fish, Powershell, Zsh};
    let adapter: &dyn EnvCompleter = match shell {
        Shell::Bash => &Bash,
        Shell::Zsh => &Zsh,
        Shell::Fish => &Fish,
        Shell::Powershell => &Powershell,
        Shell::Elvish => &Elvish,
    };
    let mut out = Vec::new();
    adapter
        .write_registration(VAR, BIN, BIN, completer, &mut out)
        .expect("writing to memory");
    let mut script = String::from_utf8(out).expect("the scripts are UTF-8");
    if shell == Shell::Zsh {
        // Installed as ~/.zfunc/_llmprobe, the file is autoloaded as the
        // function `_llmprobe` on the first Tab: its body only defines and
        // registers the completer, so call it too, or that Tab offers
        // nothing. Sourced, the file is not `_llmprobe`, and this is a no-op.
        script.push_str(
            "\nif [[ \"${funcstack[1]}\" == _llmprobe ]]; then\n    \
             _clap_dynamic_completer_llmprobe \"$@\"\nfi\n",
        );
    }
    script
}

/// The program the scripts run for answers. `llmprobe`, found on `PATH` at
/// each Tab, when that is this very binary: an installed copy keeps working
/// across upgrades and moves. Otherwise this binary by its absolute path,
/// as when the script comes from `cargo run -- completions bash` in a
/// checkout: completion then works before anything is installed, and
/// follows each rebuild of `target/debug/llmprobe`.
fn completer() -> String {
    let Ok(exe) = std::env::current_exe() else {
        return BIN.to_string();
    };
    let same = |p: &Path| {
        std::fs::canonicalize(p).ok() == Some(std::fs::canonicalize(&exe).unwrap_or(exe.clone()))
    };
    if crate::schedule::find_on_path(BIN).is_some_and(|p| same(&p)) {
        BIN.to_string()
    } else {
        exe.to_string_lossy().into_owned()
    }
}

/// The `--config FILE` (or `--config=FILE`) of the line being completed,
/// the last one when repeated; `args` start at the `--` before the words.
/// A `~/` is expanded, as the shell will when the line runs.
fn config_on_line(args: impl Iterator<Item = OsString>) -> Option<PathBuf> {
    let mut found = None;
    let mut args = args.skip(1).map(|a| a.to_string_lossy().into_owned());
    while let Some(a) = args.next() {
        if a == "--config" {
            found = args.next();
        } else if let Some(v) = a.strip_prefix("--config=") {
            found = Some(v.to_string());
        }
    }
    let found = found.filter(|f| !f.is_empty())?;
    match (found.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => Some(Path::new(&home).join(rest)),
        _ => Some(PathBuf::from(found)),
    }
}

/// The catalog the completed line would use: its `--config`, else
/// `LLMPROBE_CONFIG`, else `./llmprobe.toml` or the user config directory,
/// as [`settings::find_config`] finds it. Anything wrong (a missing or
/// broken file, one that is not a regular file and could block a read)
/// quietly gives the embedded catalog: completion never prints an error.
fn catalog_for(line_config: Option<&Path>) -> Catalog {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    let explicit = line_config
        .map(Path::to_path_buf)
        .or_else(|| env(CONFIG_ENV).map(PathBuf::from));
    match settings::find_config(explicit.as_deref(), env) {
        Ok(Some(c)) if c.path.is_file() => {
            Catalog::load(Some(&c.path)).unwrap_or_else(|_| Catalog::embedded())
        }
        _ => Catalog::embedded(),
    }
}

/// The names an argument marked `names` takes, sorted, each once.
fn names(names: Names, catalog: &Catalog) -> Vec<String> {
    let providers = || catalog.providers.iter().map(|p| p.name.clone());
    let ids = || catalog.providers.iter().flat_map(|p| p.models.clone());
    let mut out: Vec<String> = match names {
        Names::Providers => providers().collect(),
        Names::ModelKeys => catalog.model_keys().collect(),
        Names::Models => catalog.model_keys().chain(ids()).collect(),
        Names::RouteModels => std::iter::once("auto".to_string())
            .chain(catalog.aliases.keys().cloned())
            .chain(catalog.model_keys())
            .chain(ids())
            .collect(),
    };
    out.sort();
    out.dedup();
    out
}

/// What the completion engine walks: the visible command line, with a
/// completer for each argument marked with [`Names`]. The catalog is read
/// only when such a value is being completed.
fn completion_command(config: Option<PathBuf>) -> clap::Command {
    with_name_completers(visible_command(), &config)
}

fn with_name_completers(mut cmd: clap::Command, config: &Option<PathBuf>) -> clap::Command {
    let marked: Vec<(clap::Id, Names)> = cmd
        .get_arguments()
        .filter_map(|a| a.get::<Names>().map(|n| (a.get_id().clone(), *n)))
        .collect();
    for (id, kind) in marked {
        let config = config.clone();
        cmd = cmd.mut_arg(id, move |a| {
            a.add(ArgValueCandidates::new(move || {
                names(kind, &catalog_for(config.as_deref()))
                    .into_iter()
                    .map(CompletionCandidate::new)
                    .collect()
            }))
        });
    }
    let subs: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for s in subs {
        cmd = cmd.mut_subcommand(s, |sub| with_name_completers(sub, config));
    }
    cmd
}

/// The command line without its hidden subcommands, at every level: the
/// engine would still offer those for a prefix that matches nothing visible
/// (`fake-provider` is for tests, `schedule templates` for the repository's
/// scripts).
fn visible_command() -> clap::Command {
    without_hidden(&Cli::command()).version(crate::cli::VERSION)
}

/// `cmd` rebuilt with its arguments and only its visible subcommands,
/// recursively (clap has no way to remove a subcommand in place).
fn without_hidden(cmd: &clap::Command) -> clap::Command {
    let mut out = clap::Command::new(cmd.get_name().to_string())
        .args(cmd.get_arguments().cloned())
        .groups(cmd.get_groups().cloned());
    if let Some(about) = cmd.get_about() {
        out = out.about(about.clone());
    }
    out.subcommands(
        cmd.get_subcommands()
            .filter(|s| !s.is_hide_set())
            .map(without_hidden),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(words: &[&str]) -> Option<PathBuf> {
        config_on_line(std::iter::once("--".into()).chain(words.iter().map(|w| OsString::from(*w))))
    }

    #[test]
    fn the_last_config_on_the_line_counts_in_either_spelling() {
        assert_eq!(line(&["llmprobe", "check", "--provider", ""]), None);
        assert_eq!(
            line(&["llmprobe", "--config", "a.toml", "check", "--config=b.toml"]),
            Some(PathBuf::from("b.toml"))
        );
        // Still being typed: no value yet.
        assert_eq!(line(&["llmprobe", "--config"]), None);
        assert_eq!(line(&["llmprobe", "--config="]), None);
    }

    #[test]
    fn a_broken_or_missing_config_falls_back_to_the_embedded_catalog() {
        let d = tempfile::tempdir().unwrap();
        let embedded = names(Names::Providers, &Catalog::embedded());
        let broken = d.path().join("broken.toml");
        std::fs::write(&broken, "[[providers]\nname = ").unwrap();
        for p in [broken.as_path(), &d.path().join("missing.toml"), d.path()] {
            assert_eq!(names(Names::Providers, &catalog_for(Some(p))), embedded);
        }
        let good = d.path().join("good.toml");
        std::fs::write(
            &good,
            "include_default_catalog = false\n[[providers]]\nname = \"mine\"\n\
             dialect = \"openai\"\nbase_url = \"http://127.0.0.1:9\"\nmodels = [\"m1\"]\n\
             [aliases]\nfast = [\"mine::m1\"]\n",
        )
        .unwrap();
        let c = catalog_for(Some(&good));
        assert_eq!(names(Names::Providers, &c), ["mine"]);
        assert_eq!(names(Names::ModelKeys, &c), ["mine::m1"]);
        assert_eq!(names(Names::Models, &c), ["m1", "mine::m1"]);
        assert_eq!(
            names(Names::RouteModels, &c),
            ["auto", "fast", "m1", "mine::m1"]
        );
    }

    #[test]
    fn every_marked_argument_gets_a_completer_and_hidden_commands_are_gone() {
        let mut cmd = completion_command(None);
        cmd.build();
        let check = cmd.find_subcommand("check").unwrap();
        for id in ["provider", "model"] {
            let arg = check.get_arguments().find(|a| a.get_id() == id).unwrap();
            assert!(arg.get::<ArgValueCandidates>().is_some(), "{id}");
        }
        assert!(cmd.find_subcommand("fake-provider").is_none());
        let schedule = cmd.find_subcommand("schedule").unwrap();
        assert!(schedule.find_subcommand("templates").is_none());
        assert!(schedule.find_subcommand("install").is_some());
    }
}
