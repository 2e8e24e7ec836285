//! `llmprobe providers` (and `check --list`): every provider and model of
//! the catalog, with where its key comes from, and the config file read.

use serde::Serialize;

use crate::error::Result;
use crate::exit;
use crate::output;
use crate::settings::Settings;

/// `check --list` / `providers`: every provider and model, with where its
/// key comes from and whether it is set. Never the key itself.
pub fn list(s: &Settings, json: bool) -> Result<u8> {
    #[derive(Serialize)]
    struct Row {
        provider: String,
        dialect: &'static str,
        base_url: String,
        models: Vec<String>,
        key_env: Vec<String>,
        key_set: Option<String>,
        status: String,
        /// What `check` may probe each model for (`model_info`'s
        /// `capabilities`); empty when the provider has `capabilities =
        /// false`.
        capabilities: std::collections::BTreeMap<String, crate::capabilities::CapSet>,
    }
    let rows: Vec<Row> = s
        .catalog
        .providers
        .iter()
        .map(|p| {
            let resolved = p.resolve();
            let status = match &resolved {
                Ok(_) => "ready".to_string(),
                Err(why) => why.to_string(),
            };
            Row {
                provider: p.name.clone(),
                dialect: p.dialect.as_str(),
                base_url: p.base_url.clone(),
                models: p.models.clone(),
                key_env: p.api_key_env.clone(),
                key_set: resolved
                    .ok()
                    .and_then(|r| r.key_source().map(str::to_string)),
                status,
                capabilities: p
                    .models
                    .iter()
                    .filter(|_| p.capabilities)
                    .filter_map(|m| Some((m.clone(), p.info(m).capabilities?)))
                    .filter(|(_, c)| !c.is_empty())
                    .collect(),
            }
        })
        .collect();
    if json {
        let out = serde_json::json!({ "config": s.config_json(), "providers": rows });
        output::print_json(&out)?;
        return Ok(exit::SUCCESS);
    }
    let mut t = output::table(&["Provider", "Dialect", "Models", "Key", "Status"]);
    // On a narrow terminal the dialect goes first; the rest wraps.
    t.optional(&[1]);
    for (r, p) in rows.iter().zip(&s.catalog.providers) {
        let key = if r.key_env.is_empty() {
            "none (keyless)".to_string()
        } else {
            r.key_env
                .iter()
                .map(|v| {
                    let set = std::env::var_os(v).is_some_and(|x| !x.is_empty());
                    format!("{v} ({})", if set { "set" } else { "unset" })
                })
                .collect::<Vec<_>>()
                .join("\n")
                + if p.key_optional { "\n(optional)" } else { "" }
        };
        t.add_row(vec![
            r.provider.clone(),
            r.dialect.to_string(),
            r.models.join("\n"),
            key,
            r.status.clone(),
        ]);
    }
    let ready = rows.iter().filter(|r| r.status == "ready").count();
    output::print(&format!(
        "{t}\n{}, {}; {} ready to probe\n{}\n",
        crate::format::count(rows.len(), "provider", "providers"),
        crate::format::count(
            rows.iter().map(|r| r.models.len()).sum::<usize>(),
            "model",
            "models"
        ),
        crate::format::count(ready, "provider", "providers"),
        s.config_line()
    ))?;
    Ok(exit::SUCCESS)
}
