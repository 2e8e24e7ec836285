//! `llmprobe models`: each provider's own model list against the catalog
//! (new, gone?, listed), and `--write`, which adopts models in
//! `llmprobe.toml` (docs/discovery.md).

use serde::Serialize;

use crate::catalog::edit::{self, Addition};
use crate::catalog::{Resolved, Unusable};
use crate::cli::{GlobalArgs, ModelsArgs};
use crate::clock::Clock;
use crate::discovery::fetch::{self, Got};
use crate::discovery::{self, Compared, ListFailure, Listed, ModelLists};
use crate::error::{Error, Result};
use crate::exit;
use crate::output;
use crate::settings::Settings;

/// One provider's report.
#[derive(Debug, Serialize)]
struct Report {
    provider: String,
    /// When the list shown was read; `None` when none ever was.
    read_at: Option<String>,
    /// Read now (`false`: from the cache).
    fetched_now: bool,
    /// This attempt's failure, if it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<Failure>,
    #[serde(flatten)]
    compared: Option<Compared>,
}

#[derive(Debug, Serialize)]
struct Failure {
    kind: &'static str,
    why: String,
}

impl From<&ListFailure> for Failure {
    fn from(f: &ListFailure) -> Failure {
        Failure {
            kind: f.kind.into(),
            why: f.why.clone(),
        }
    }
}

#[derive(Debug, Serialize)]
struct Skipped {
    provider: String,
    why: String,
}

pub fn run(g: &GlobalArgs, a: ModelsArgs) -> Result<u8> {
    let s = Settings::load(g)?;
    // Discovered models that passed are the catalog's own by now.
    let (s, _) =
        crate::discovery::with_adopted(&s, crate::discovery::For::Route, Clock::from_env().now())?;
    for p in &a.provider {
        s.catalog.known_provider(p, "--provider")?;
    }
    for p in &a.add_new_free {
        s.catalog.known_provider(p, "--add-new-free")?;
    }
    if a.write && a.add.is_empty() && a.add_new_free.is_empty() {
        return Err(Error::config(
            "--write needs the models to add: --add PROVIDER::MODEL or --add-new-free PROVIDER"
                .to_string(),
        ));
    }
    let clock = Clock::from_env();
    let wanted = |name: &str| {
        a.provider.is_empty() && a.add_new_free.is_empty()
            || a.provider.iter().chain(&a.add_new_free).any(|p| p == name)
    };
    let mut ready: Vec<Resolved> = Vec::new();
    let mut skipped: Vec<Skipped> = Vec::new();
    for p in s.catalog.providers.iter().filter(|p| wanted(&p.name)) {
        match p.resolve() {
            Ok(r) => ready.push(r),
            // A provider turned off is named only when asked for.
            Err(Unusable::Off { .. }) if a.provider.is_empty() => {}
            Err(why) => skipped.push(Skipped {
                provider: p.name.clone(),
                why: why.to_string(),
            }),
        }
    }
    if ready.is_empty() {
        print_skipped(&skipped, a.json)?;
        return Err(Error::config(
            "no provider to ask: set a provider's key (see `llmprobe providers`)".to_string(),
        ));
    }
    let (got, lists) = fetch::refresh(&s, &ready, a.refresh, &clock)?;
    let reports: Vec<Report> = ready
        .iter()
        .zip(&got)
        .map(|(p, (_, g))| report(p, g, &lists))
        .collect();
    let any_read = reports.iter().any(|r| r.compared.is_some());
    if a.write {
        if !any_read {
            eprintln!("models: no list could be read; nothing written");
            return Ok(no_list_code(&ready, &got));
        }
        return write(g, &a, &reports);
    }
    if a.json {
        let out = serde_json::json!({
            "providers": reports.iter().map(|r| filtered(r, &a)).collect::<Vec<_>>(),
            "skipped": skipped,
        });
        output::print_json(&out)?;
    } else {
        let mut text = String::new();
        for r in &reports {
            text.push_str(&plain(r, &a));
        }
        output::print(&text)?;
        print_skipped(&skipped, false)?;
    }
    if any_read {
        Ok(exit::SUCCESS)
    } else {
        Ok(no_list_code(&ready, &got))
    }
}

/// No list read: offline (6) when every remote list failed for want of a
/// network, else 1.
fn no_list_code(ready: &[Resolved], got: &[(String, Got)]) -> u8 {
    if fetch::offline(ready, got) {
        eprintln!("offline: no provider's list could be reached; nothing recorded");
        exit::OFFLINE
    } else {
        eprintln!("models: no provider's list could be read");
        exit::CONDITION
    }
}

fn report(p: &Resolved, got: &Got, lists: &ModelLists) -> Report {
    let name = &p.provider.name;
    let cached = lists.cached(name, &p.base_url);
    Report {
        provider: name.clone(),
        read_at: cached
            .and_then(|l| l.fetched_at)
            .map(crate::time::format_ts),
        fetched_now: *got == Got::Read,
        error: match got {
            Got::Failed(f) => Some(f.into()),
            _ => None,
        },
        compared: cached.map(|l| discovery::compare(&p.provider.models, &l.models)),
    }
}

/// The report as `--new` and `--gone` filter it (both: both).
fn filtered(r: &Report, a: &ModelsArgs) -> serde_json::Value {
    let mut v = serde_json::to_value(r).expect("a report serialises");
    if let Some(obj) = v.as_object_mut()
        && (a.new || a.gone)
    {
        if !a.new {
            obj.remove("new");
        }
        if !a.gone {
            obj.remove("gone");
        }
        obj.remove("listed");
    }
    v
}

/// The columns of a model's line: what it is, its id, then its facts.
fn model_line(what: &str, l: &Listed) -> String {
    let mut facts: Vec<String> = Vec::new();
    if l.free == Some(true) {
        facts.push("free".into());
    }
    if let Some(n) = l.context_window {
        facts.push(format!("{} ctx", crate::format::fmt_tokens(n)));
    }
    facts.extend(l.capabilities.iter().map(|c| c.as_str().to_string()));
    if let Some(d) = l.deprecated {
        facts.push(format!("retires {d}"));
    }
    line(what, &l.id, &facts.join(" "))
}

fn line(what: &str, id: &str, facts: &str) -> String {
    let mut s = format!("  {what:<7} {id}");
    if !facts.is_empty() {
        // Facts after the id, on the same line when it fits 80 columns.
        if s.chars().count() + 2 + facts.chars().count() <= 80 {
            let pad = 52usize.saturating_sub(s.chars().count()).max(2);
            s.push_str(&" ".repeat(pad.min(80 - s.chars().count() - facts.chars().count())));
        } else {
            s.push_str("\n            ");
        }
        s.push_str(facts);
    }
    s.push('\n');
    s
}

fn plain(r: &Report, a: &ModelsArgs) -> String {
    let mut out = String::new();
    let head = match (&r.compared, &r.read_at) {
        (Some(c), Some(at)) => format!(
            "{}: {} listed, read {}{}\n",
            r.provider,
            crate::format::count(c.listed.len() + c.new.len(), "model", "models"),
            at,
            if r.fetched_now { "" } else { " (cached)" }
        ),
        _ => format!("{}: no list read\n", r.provider),
    };
    out.push_str(&head);
    if let Some(e) = &r.error {
        let kept = match r.compared {
            Some(_) => "; the list shown is the last one read",
            None => "; no model is judged gone",
        };
        out.push_str(&format!("  list failed ({}): {}{kept}\n", e.kind, e.why));
    }
    let Some(c) = &r.compared else {
        return out;
    };
    let all = !a.new && !a.gone;
    if all || a.gone {
        for m in &c.gone {
            out.push_str(&line("gone?", m, "not in the list"));
        }
    }
    if all || a.new {
        for l in &c.new {
            out.push_str(&model_line("new", l));
        }
    }
    if all {
        for m in &c.listed {
            out.push_str(&line("listed", m, ""));
        }
    }
    out
}

fn print_skipped(skipped: &[Skipped], json: bool) -> Result<()> {
    if skipped.is_empty() || json {
        return Ok(());
    }
    let names: Vec<String> = skipped
        .iter()
        .map(|k| format!("{} ({})", k.provider, k.why))
        .collect();
    eprintln!("not asked: {}", names.join("; "));
    Ok(())
}

/// `--write`: the models to add, by provider, written to the config file
/// the lookup finds (or where it would find one, made).
fn write(g: &GlobalArgs, a: &ModelsArgs, reports: &[Report]) -> Result<u8> {
    let embedded = crate::catalog::Catalog::embedded();
    let mut adds: Vec<Addition> = Vec::new();
    let mut push =
        |provider: &str, model: &str| match adds.iter_mut().find(|x| x.provider == provider) {
            Some(x) => x.models.push(model.to_string()),
            None => adds.push(Addition {
                provider: provider.to_string(),
                models: vec![model.to_string()],
                embedded: embedded.provider(provider).map(|p| p.models.clone()),
            }),
        };
    for key in &a.add {
        let Some((p, m)) = crate::catalog::ModelKey::split(key) else {
            return Err(Error::config(format!(
                "--add {key:?}: write it PROVIDER::MODEL, as `llmprobe models` shows them"
            )));
        };
        let Some(r) = reports.iter().find(|r| r.provider == p) else {
            return Err(Error::config(format!(
                "--add {key:?}: provider \"{p}\" was not asked (no key set, or turned off; see `llmprobe providers`)"
            )));
        };
        let carried = r
            .compared
            .as_ref()
            .is_some_and(|c| c.new.iter().any(|l| l.id == m) || c.listed.iter().any(|x| x == m));
        if !carried {
            eprintln!("warning: {p}'s list does not carry {m:?}; adding it as asked");
        }
        push(p, m);
    }
    for p in &a.add_new_free {
        let free: Vec<&Listed> = reports
            .iter()
            .find(|r| &r.provider == p)
            .and_then(|r| r.compared.as_ref())
            .map(|c| c.new.iter().filter(|l| l.free == Some(true)).collect())
            .unwrap_or_default();
        if free.is_empty() {
            eprintln!("{p}: its list has no new model marked free");
        }
        for l in free {
            push(p, &l.id);
        }
    }
    if adds.is_empty() {
        output::println("nothing to add")?;
        return Ok(exit::SUCCESS);
    }
    let to = crate::settings::config_to_write(g.config.as_deref(), |k| std::env::var_os(k));
    let w = edit::add_models(&to.path, &adds)?;
    let mut text = String::new();
    for p in &w.providers {
        if !p.added.is_empty() {
            text.push_str(&format!(
                "{}: added {} to {}{}\n",
                p.provider,
                p.added.join(", "),
                p.target.key(),
                match p.target {
                    edit::Target::FrozenModels => {
                        " (your own list, which replaces the embedded one)"
                    }
                    _ => "",
                }
            ));
        }
        if !p.already.is_empty() {
            text.push_str(&format!(
                "{}: already there: {}\n",
                p.provider,
                p.already.join(", ")
            ));
        }
    }
    let path = w.path.display();
    text.push_str(&match (w.changed, w.created, &w.backup) {
        (false, _, _) => format!("{path}: nothing new; not written\n"),
        (true, true, _) => format!("created {path} ({} would find it)\n", to.found_by),
        (true, false, Some(b)) => format!("wrote {path} (the old one is {})\n", b.display()),
        (true, false, None) => format!("wrote {path}\n"),
    });
    output::print(&text)?;
    // What was written must load: say so at once if it does not.
    if w.changed
        && let Err(e) = crate::catalog::Catalog::load(Some(&w.path))
    {
        eprintln!("warning: {e}");
        return Ok(exit::CONDITION);
    }
    Ok(exit::SUCCESS)
}
