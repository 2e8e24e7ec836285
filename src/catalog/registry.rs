//! The embedded catalog checked against a pinned snapshot of a public
//! registry of model facts (tests only): LiteLLM's model table, trimmed to
//! the catalog's providers in `registry.json` by `scripts/refresh-registry`
//! (MIT; see `NOTICE`).
//!
//! An embedded model fails the test when the snapshot says it is deprecated
//! as of the snapshot's own date (`registry.date`, never the wall clock, so
//! that a clone passes next year as it does today), when the snapshot does
//! not know it, when the snapshot knows it only on the Responses API, when
//! its context window, output cap or capabilities disagree with the
//! snapshot, or when its `deprecated` date is not the one the snapshot
//! gives, or its `successor` is not a live model of the snapshot. Every
//! difference the catalog keeps on purpose is on [`ALLOWED`] with its
//! reason, and an entry there that excuses nothing fails too, so the list
//! never outlives what it explains.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use serde::Deserialize;

use super::{Catalog, parse_model_date};
use crate::outcome::Capability;

const SNAPSHOT: &str = include_str!("registry.json");

#[derive(Debug, Deserialize)]
struct Snapshot {
    registry: Header,
    providers: BTreeMap<String, RegistryProvider>,
}

/// Where the snapshot comes from (`registry` in `registry.json`).
#[derive(Debug, Deserialize)]
struct Header {
    name: String,
    package: String,
    version: String,
    /// The day the snapshot stands for: deprecation is judged as of it.
    date: String,
    date_source: String,
    released: String,
    sha256_json: String,
    sha256_wheel: String,
    license: String,
    url: String,
}

#[derive(Debug, Deserialize)]
struct RegistryProvider {
    models: BTreeMap<String, Entry>,
}

/// One model as the snapshot keeps it; rpm and tpm are not read.
#[derive(Debug, Default, Deserialize)]
struct Entry {
    key: String,
    max_input_tokens: Option<u64>,
    max_output_tokens: Option<u64>,
    supports_function_calling: Option<bool>,
    supports_vision: Option<bool>,
    supports_response_schema: Option<bool>,
    deprecation_date: Option<String>,
    mode: Option<String>,
}

impl Entry {
    fn deprecation(&self) -> Option<NaiveDate> {
        self.deprecation_date
            .as_deref()
            .map(|d| parse_model_date(d).unwrap_or_else(|e| panic!("{}: {e}", self.key)))
    }

    /// The registry's flag for a capability: tools is function calling,
    /// json is response schema, vision is image input.
    fn flags(&self, c: Capability) -> bool {
        match c {
            Capability::Tools => self.supports_function_calling,
            Capability::Json => self.supports_response_schema,
            Capability::Vision => self.supports_vision,
            // No registry flags speed; it is measured, never listed.
            Capability::Speed => None,
        }
        .unwrap_or(false)
    }

    fn responses_only(&self) -> bool {
        self.mode.as_deref() == Some("responses")
    }
}

impl Snapshot {
    fn parse(text: &str) -> Snapshot {
        serde_json::from_str(text).expect("registry.json parses")
    }

    fn date(&self) -> NaiveDate {
        parse_model_date(&self.registry.date).expect("registry.date is a date")
    }

    fn entry(&self, provider: &str, model: &str) -> Option<&Entry> {
        self.providers.get(provider)?.models.get(model)
    }
}

/// What a difference between the catalog and the snapshot is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    /// The snapshot deprecates the model on or before its own date. No
    /// allow-list entry can excuse it: the model is replaced.
    Deprecated,
    /// The snapshot does not know the model (or its provider).
    Unknown,
    /// The snapshot knows the model on the Responses API only, which a
    /// Chat Completions probe cannot reach.
    Mode,
    /// `context_window` is not the snapshot's `max_input_tokens`.
    Window,
    /// `max_output_tokens` is not the snapshot's.
    Output,
    /// The catalog lists a capability the snapshot does not flag, or the
    /// other way round.
    Capability(Capability),
    /// `deprecated` is not the (later) date the snapshot gives.
    DeprecationDate,
    /// `successor` is not a model of the snapshot that is still live.
    Successor,
}

/// A difference the catalog keeps on purpose: on `provider`'s `model` (`*`:
/// each of its models), the `checks` named, for `reason`.
struct Allowed {
    provider: &'static str,
    model: &'static str,
    checks: &'static [Check],
    reason: &'static str,
}

const LOCAL: &str =
    "a local server: it serves whatever the user has loaded, which no registry lists";
const PAID: &str = "a paid provider: the catalog lists no capabilities, so that `check` spends \
                    nothing on capability probes there (default.toml's header)";
const ALL_CAPS: &[Check] = &[
    Check::Capability(Capability::Tools),
    Check::Capability(Capability::Json),
    Check::Capability(Capability::Vision),
];
const NO_OPENROUTER: &str = "LiteLLM has no OpenRouter entries, and no OpenRouter document \
                             checked on 2026-12-07 names it as free today (default.toml); \
                             `llmprobe models` reads OpenRouter's own list";
const NO_HF: &str = "LiteLLM has no entries for Hugging Face's router, which serves a model \
                     while any inference provider does; unconfirmed on 2026-12-07 (default.toml)";

/// Every difference between the embedded catalog and the snapshot that the
/// catalog keeps, and why.
const ALLOWED: &[Allowed] = &[
    Allowed {
        provider: "ollama",
        model: "*",
        checks: &[Check::Unknown],
        reason: LOCAL,
    },
    Allowed {
        provider: "llamacpp",
        model: "*",
        checks: &[Check::Unknown],
        reason: LOCAL,
    },
    Allowed {
        provider: "vllm",
        model: "*",
        checks: &[Check::Unknown],
        reason: LOCAL,
    },
    Allowed {
        provider: "anthropic",
        model: "*",
        checks: ALL_CAPS,
        reason: PAID,
    },
    Allowed {
        provider: "openai",
        model: "*",
        checks: ALL_CAPS,
        reason: PAID,
    },
    Allowed {
        provider: "deepseek",
        model: "*",
        checks: ALL_CAPS,
        reason: PAID,
    },
    Allowed {
        provider: "xai",
        model: "*",
        checks: ALL_CAPS,
        reason: PAID,
    },
    Allowed {
        provider: "openrouter",
        model: "meta-llama/llama-3.3-70b-instruct:free",
        checks: &[Check::Unknown],
        reason: NO_OPENROUTER,
    },
    Allowed {
        provider: "openrouter",
        model: "google/gemma-3-27b-it:free",
        checks: &[Check::Unknown],
        reason: NO_OPENROUTER,
    },
    Allowed {
        provider: "openrouter",
        model: "deepseek/deepseek-chat-v3-0324:free",
        checks: &[Check::Unknown],
        reason: "LiteLLM has no OpenRouter entries; OpenRouter's model page names it \
                 (openrouter.ai/deepseek/deepseek-chat-v3-0324:free/api, found 2026-12-07)",
    },
    Allowed {
        provider: "huggingface",
        model: "meta-llama/Llama-3.1-8B-Instruct",
        checks: &[Check::Unknown],
        reason: NO_HF,
    },
    Allowed {
        provider: "huggingface",
        model: "Qwen/Qwen2.5-7B-Instruct",
        checks: &[Check::Unknown],
        reason: NO_HF,
    },
    Allowed {
        provider: "nvidia",
        model: "meta/llama-3.1-8b-instruct",
        checks: &[Check::Unknown],
        reason: "LiteLLM lists no NVIDIA chat models (its nvidia_nim has rerankers only); \
                 unconfirmed on 2026-12-07 (default.toml)",
    },
    Allowed {
        provider: "nvidia",
        model: "meta/llama-3.2-90b-vision-instruct",
        checks: &[Check::Unknown],
        reason: "LiteLLM lists no NVIDIA chat models (its nvidia_nim has rerankers only); in \
                 NVIDIA's /v1/models on 2026-09-05 per a third-party report (default.toml)",
    },
    Allowed {
        provider: "pollinations",
        model: "openai",
        checks: &[Check::Unknown],
        reason: "LiteLLM has no pollinations entries; pollinations' own README \
                 (github.com/pollinations, checked 2026-12-07) calls this model",
    },
    Allowed {
        provider: "cloudflare",
        model: "*",
        checks: &[Check::Capability(Capability::Json)],
        reason: "LiteLLM records no response-schema flag for any Cloudflare model; Workers AI \
                 documents JSON mode (developers.cloudflare.com/workers-ai/json-mode)",
    },
    Allowed {
        provider: "cohere",
        model: "command-a-03-2025",
        checks: &[Check::Capability(Capability::Json)],
        reason: "LiteLLM records no response-schema flag for Cohere's chat models; \
                 docs.cohere.com/docs/structured-outputs lists Command A",
    },
];

/// One difference: the model (`provider::model`), what it is about, and
/// what was found.
#[derive(Debug)]
struct Finding {
    provider: String,
    model: String,
    check: Check,
    what: String,
}

/// Every difference between `catalog` and `snap`, judged as of the
/// snapshot's own date.
fn findings(catalog: &Catalog, snap: &Snapshot) -> Vec<Finding> {
    let date = snap.date();
    let mut out = Vec::new();
    for p in &catalog.providers {
        for m in &p.models {
            let mut add = |check: Check, what: String| {
                out.push(Finding {
                    provider: p.name.clone(),
                    model: m.clone(),
                    check,
                    what,
                });
            };
            let Some(e) = snap.entry(&p.name, m) else {
                add(Check::Unknown, "the registry does not know it".into());
                continue;
            };
            let info = p.info(m);
            match e.deprecation() {
                Some(d) if d <= date => {
                    add(
                        Check::Deprecated,
                        format!(
                            "the registry deprecates it on {d}, by its own date {date}: replace it"
                        ),
                    );
                    continue;
                }
                Some(d) if info.deprecated != Some(d) => add(
                    Check::DeprecationDate,
                    format!(
                        "the registry deprecates it on {d}; the catalog says {}",
                        info.deprecated
                            .map_or("nothing".into(), |d| format!("deprecated = \"{d}\""))
                    ),
                ),
                None if info.deprecated.is_some() => add(
                    Check::DeprecationDate,
                    format!(
                        "the catalog says deprecated = \"{}\"; the registry gives no date",
                        info.deprecated.unwrap_or_default()
                    ),
                ),
                _ => {}
            }
            if let Some(s) = &info.successor {
                match snap.entry(&p.name, s) {
                    None => add(
                        Check::Successor,
                        format!("its successor {s:?} is not in the registry"),
                    ),
                    Some(next) if next.deprecation().is_some_and(|d| d <= date) => add(
                        Check::Successor,
                        format!("its successor {s:?} is deprecated too"),
                    ),
                    Some(_) => {}
                }
            }
            if e.responses_only() {
                add(
                    Check::Mode,
                    "the registry has it on the Responses API only".into(),
                );
            }
            if let (Some(ours), Some(theirs)) = (info.context_window, e.max_input_tokens)
                && ours != theirs
            {
                add(
                    Check::Window,
                    format!("context_window {ours}, the registry {theirs}"),
                );
            }
            if let (Some(ours), Some(theirs)) = (info.max_output_tokens, e.max_output_tokens)
                && u64::from(ours) != theirs
            {
                add(
                    Check::Output,
                    format!("max_output_tokens {ours}, the registry {theirs}"),
                );
            }
            let listed = info.capabilities.unwrap_or_default();
            for c in Capability::ALL {
                match (listed.contains(c), e.flags(c)) {
                    (true, false) => add(
                        Check::Capability(c),
                        format!("it lists {c}, which the registry does not flag"),
                    ),
                    (false, true) => add(
                        Check::Capability(c),
                        format!("the registry flags {c}, which it does not list"),
                    ),
                    _ => {}
                }
            }
        }
    }
    out
}

/// The findings that `allowed` does not excuse, and the entries of
/// `allowed` that excuse nothing, one line each. Empty: the catalog
/// agrees with the snapshot.
fn differences(catalog: &Catalog, snap: &Snapshot, allowed: &[Allowed]) -> Vec<String> {
    let found = findings(catalog, snap);
    let excuses = |a: &Allowed, f: &Finding| {
        f.check != Check::Deprecated
            && a.provider == f.provider
            && (a.model == "*" || a.model == f.model)
            && a.checks.contains(&f.check)
    };
    let mut out: Vec<String> = found
        .iter()
        .filter(|f| !allowed.iter().any(|a| excuses(a, f)))
        .map(|f| format!("{}::{}: {}", f.provider, f.model, f.what))
        .collect();
    for a in allowed {
        if !found.iter().any(|f| excuses(a, f)) {
            out.push(format!(
                "the allow-list entry for {}::{} ({:?}) excuses nothing: remove it",
                a.provider, a.model, a.checks
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_catalog_agrees_with_the_registry_snapshot() {
        let snap = Snapshot::parse(SNAPSHOT);
        let diffs = differences(&Catalog::embedded(), &snap, ALLOWED);
        assert!(
            diffs.is_empty(),
            "the embedded catalog (src/catalog/default.toml) disagrees with {} {} as of {} \
             (src/catalog/registry.json); replace, correct, or explain on registry.rs's \
             ALLOWED:\n{}",
            snap.registry.package,
            snap.registry.version,
            snap.registry.date,
            diffs.join("\n")
        );
    }

    #[test]
    fn the_snapshot_says_what_it_is() {
        let r = Snapshot::parse(SNAPSHOT).registry;
        assert!(r.name.contains("LiteLLM"), "{}", r.name);
        assert_eq!(r.package, "litellm");
        assert!(
            !r.version.is_empty() && r.version.split('.').all(|n| n.parse::<u32>().is_ok()),
            "{}",
            r.version
        );
        assert!(r.url.contains(&r.version), "{}", r.url);
        assert_eq!(r.license, "MIT");
        for sha in [&r.sha256_json, &r.sha256_wheel] {
            assert!(
                sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit()),
                "{sha}"
            );
        }
        let date = parse_model_date(&r.date).unwrap();
        let released = parse_model_date(&r.released).unwrap();
        assert!(
            released <= date,
            "released {released} after the date {date}"
        );
        assert!(!r.date_source.is_empty());
        // The MIT notice travels with the data (NOTICE names this version).
        let notice = include_str!("../../NOTICE");
        assert!(notice.contains("src/catalog/registry.json"));
        assert!(
            notice.contains(&format!("version {}", r.version)),
            "NOTICE: update the version"
        );
        assert!(notice.contains("Copyright (c) 2023 Berri AI"));
    }

    #[test]
    fn no_allow_list_entry_excuses_a_deprecated_model_and_each_gives_a_reason() {
        for a in ALLOWED {
            assert!(
                !a.checks.contains(&Check::Deprecated),
                "{}::{}",
                a.provider,
                a.model
            );
            assert!(
                !a.checks.is_empty() && a.reason.len() > 20,
                "{}::{}",
                a.provider,
                a.model
            );
        }
    }

    // The checking function on doctored catalogs and snapshots: each check
    // can fail.

    fn snap(date: &str, models: &str) -> Snapshot {
        Snapshot::parse(&format!(
            r#"{{"providers": {{"acme": {{"litellm": ["acme"], "models": {{{models}}}}}}},
                "registry": {{"name": "LiteLLM test", "package": "litellm", "version": "1.0.0",
                  "date": "{date}", "date_source": "test", "released": "{date}",
                  "sha256_json": "", "sha256_wheel": "", "license": "MIT", "url": ""}}}}"#
        ))
    }

    const M: &str = r#""m": {"key": "acme/m", "max_input_tokens": 1000, "max_output_tokens": 100,
        "supports_function_calling": true, "mode": "chat"}"#;

    fn catalog(model_info: &str) -> Catalog {
        Catalog::from_toml_str(
            &format!(
                "include_default_catalog = false\n[[providers]]\nname = \"acme\"\n\
                 dialect = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n\
                 models = [\"m\"]\nmodel_info = {{ \"m\" = {{ {model_info} }} }}\n"
            ),
            "c.toml",
        )
        .unwrap()
    }

    fn diffs(date: &str, models: &str, model_info: &str, allowed: &[Allowed]) -> Vec<String> {
        differences(&catalog(model_info), &snap(date, models), allowed)
    }

    const AGREES: &str =
        r#"context_window = 1000, max_output_tokens = 100, capabilities = ["tools"]"#;

    #[test]
    fn a_model_that_agrees_passes() {
        assert_eq!(diffs("2026-12-07", M, AGREES, &[]), Vec::<String>::new());
    }

    #[test]
    fn deprecation_is_judged_by_the_snapshot_date_and_never_excused() {
        let dated = M.replace(r#""mode""#, r#""deprecation_date": "2027-01-14", "mode""#);
        let with_date = format!("{AGREES}, deprecated = \"2027-01-14\"");
        // Before the date: fine once the catalog carries the date.
        assert!(diffs("2026-12-07", &dated, &with_date, &[]).is_empty());
        // On the date: deprecated, whatever the allow-list says.
        let all = Allowed {
            provider: "acme",
            model: "*",
            checks: &[Check::Unknown, Check::DeprecationDate, Check::Successor],
            reason: "test",
        };
        let d = diffs("2027-01-14", &dated, &with_date, &[all]);
        assert!(
            d[0].contains("acme::m: the registry deprecates it on 2027-01-14"),
            "{d:?}"
        );
        // A later deprecation the catalog does not record.
        let d = diffs("2026-12-07", &dated, AGREES, &[]);
        assert_eq!(
            d,
            ["acme::m: the registry deprecates it on 2027-01-14; the catalog says nothing"]
        );
        // A date the registry does not give.
        let d = diffs("2026-12-07", M, &with_date, &[]);
        assert!(d[0].contains("the registry gives no date"), "{d:?}");
    }

    #[test]
    fn an_unknown_model_fails_unless_the_allow_list_says_why() {
        let d = diffs(
            "2026-12-07",
            r#""other": {"key": "acme/other"}"#,
            AGREES,
            &[],
        );
        assert_eq!(d, ["acme::m: the registry does not know it"]);
        let why = Allowed {
            provider: "acme",
            model: "m",
            checks: &[Check::Unknown],
            reason: "x",
        };
        assert!(
            diffs(
                "2026-12-07",
                r#""other": {"key": "acme/other"}"#,
                AGREES,
                &[why]
            )
            .is_empty()
        );
    }

    #[test]
    fn windows_caps_and_capabilities_must_agree() {
        let d = diffs(
            "2026-12-07",
            M,
            r#"context_window = 999, max_output_tokens = 101, capabilities = ["json"]"#,
            &[],
        );
        assert_eq!(
            d,
            [
                "acme::m: context_window 999, the registry 1000",
                "acme::m: max_output_tokens 101, the registry 100",
                "acme::m: the registry flags tools, which it does not list",
                "acme::m: it lists json, which the registry does not flag",
            ]
        );
        let why = Allowed {
            provider: "acme",
            model: "*",
            checks: &[
                Check::Window,
                Check::Output,
                Check::Capability(Capability::Tools),
            ],
            reason: "test",
        };
        let d = diffs(
            "2026-12-07",
            M,
            r#"context_window = 999, max_output_tokens = 101, capabilities = ["json"]"#,
            &[why],
        );
        assert_eq!(
            d,
            ["acme::m: it lists json, which the registry does not flag"]
        );
    }

    #[test]
    fn a_responses_only_model_and_a_dead_successor_fail() {
        let responses = M.replace(r#""mode": "chat""#, r#""mode": "responses""#);
        assert_eq!(
            diffs("2026-12-07", &responses, AGREES, &[]),
            ["acme::m: the registry has it on the Responses API only"]
        );
        let models =
            format!(r#"{M}, "old": {{"key": "acme/old", "deprecation_date": "2026-01-01"}}"#);
        assert_eq!(
            diffs(
                "2026-12-07",
                &models,
                &format!("{AGREES}, successor = \"old\""),
                &[]
            ),
            ["acme::m: its successor \"old\" is deprecated too"]
        );
        assert_eq!(
            diffs(
                "2026-12-07",
                M,
                &format!("{AGREES}, successor = \"gone\""),
                &[]
            ),
            ["acme::m: its successor \"gone\" is not in the registry"]
        );
    }

    #[test]
    fn an_allow_list_entry_that_excuses_nothing_fails() {
        let stale = Allowed {
            provider: "acme",
            model: "m",
            checks: &[Check::Window],
            reason: "x",
        };
        assert_eq!(
            diffs("2026-12-07", M, AGREES, &[stale]),
            ["the allow-list entry for acme::m ([Window]) excuses nothing: remove it"]
        );
    }
}
