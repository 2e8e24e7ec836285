//! Reading providers' model lists over HTTP: each page through the
//! provider's dialect ([`crate::upstream::dialect::build_list_request`]),
//! under its timeout, with its first key (never printed; redacted from
//! every message), each request that reaches the provider counted in the
//! usage ledger ([`crate::usage::count_list_fetch`]).

use std::path::Path;

use super::{FailKind, ListFailure, Listed, ModelLists};
use crate::catalog::Resolved;
use crate::clock::Clock;
use crate::error::Result;
use crate::upstream::dialect::{self, build_list_request, looks_like_html, wire};
use crate::upstream::http;
use crate::upstream::secret::Redactor;
use crate::usage::Target;

/// The most pages one list may take: a list that pages on past it is
/// read no further, and counts as not read.
pub const MAX_PAGES: usize = 50;

/// The longest a list request may take (less where the provider's
/// `timeout_secs` is less): lists are read before a run's probes, so a
/// slow list endpoint delays the run's start by this much at most.
const LIST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A list may be larger than a reply: OpenRouter's is a few MiB.
const LIST_BODY_CAP: usize = 32 * 1024 * 1024;

/// One provider's list, read now, or why not.
pub type Fetched = std::result::Result<Vec<Listed>, ListFailure>;

/// What one provider's list came to in a refresh.
#[derive(Debug, Clone, PartialEq)]
pub enum Got {
    /// Read now.
    Read,
    /// The cache was fresh: not asked.
    Cached,
    /// Could not be read now (a cached list, if any, stays).
    Failed(ListFailure),
}

/// The target a list fetch of `p` counts against: its first key, no
/// model.
fn target(p: &Resolved) -> Target {
    let t = Target::new(&p.provider.name, "");
    match p.first_key() {
        Some(k) => t.with_key(k.index, &k.fingerprint),
        None => t,
    }
}

/// Read `p`'s whole list, page after page. Each request that reaches the
/// provider is counted in `stats_dir`'s ledger; one that a full key or
/// provider limit would refuse is not sent.
pub async fn fetch(
    client: &reqwest::Client,
    p: &Resolved,
    redactor: &Redactor,
    stats_dir: &Path,
    clock: &Clock,
) -> Fetched {
    let key = p.first_key().map(|k| &k.secret);
    let redactor = redactor.with(key);
    let timeout = p.provider.timeout.min(LIST_TIMEOUT);
    let fail = |kind: FailKind, why: String| ListFailure {
        at: clock.now(),
        kind,
        why: crate::outcome::truncate_reason(&redactor.redact(&why)),
    };
    let target = target(p);
    let mut models: Vec<Listed> = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        if let Err(why) =
            crate::usage::list_fetch_fits(stats_dir, &p.provider, &target, clock.now())
        {
            return Err(fail(FailKind::Limit, format!("not fetched: {why}")));
        }
        let builder = build_list_request(client, p.endpoint(), key, cursor.as_deref())
            .map_err(|e| fail(FailKind::Http, e.to_string()))?;
        let result = http::send(builder, timeout, LIST_BODY_CAP).await;
        let resp = match result {
            Ok(r) => r,
            Err(e) => {
                let kind = match e.is_unreachable() {
                    true => FailKind::Unreachable,
                    false => FailKind::Http,
                };
                return Err(fail(kind, e.to_string()));
            }
        };
        if let Err(e) = crate::usage::count_list_fetch(stats_dir, &p.provider, &target, clock.now())
        {
            eprintln!("warning: {e}; this list fetch is not counted");
        }
        let page = read_page(p, resp.status, &resp.text()).map_err(|(k, why)| fail(k, why))?;
        models.extend(page.models);
        match page.next {
            Some(next) if cursor.as_deref() != Some(next.as_str()) => cursor = Some(next),
            _ => return Ok(dedup(models)),
        }
    }
    Err(fail(
        FailKind::NotAList,
        format!("the list went on past {MAX_PAGES} pages; not read"),
    ))
}

/// One page of `p`'s list from a response, or what kind of failure it is.
fn read_page(
    p: &Resolved,
    status: u16,
    text: &str,
) -> std::result::Result<dialect::models::Page, (FailKind, String)> {
    let said = || {
        dialect::parse_error(text.as_bytes())
            .map(|e| format!(": {}", e.message))
            .unwrap_or_default()
    };
    match status {
        200..=299 => {}
        401 | 403 => return Err((FailKind::Refused, format!("HTTP {status}{}", said()))),
        404 | 405 => {
            return Err((
                FailKind::NoEndpoint,
                format!("no model list at this address (HTTP {status})"),
            ));
        }
        _ => return Err((FailKind::Http, format!("HTTP {status}{}", said()))),
    }
    if looks_like_html(text) {
        return Err((
            FailKind::NotAList,
            "an HTML page, not a model list".to_string(),
        ));
    }
    let json = dialect::parse_json(text)
        .ok_or_else(|| (FailKind::NotAList, "not JSON, not a model list".to_string()))?;
    wire(p.provider.dialect)
        .parse_models(&json)
        .map_err(|e| (FailKind::NotAList, e.to_string()))
}

/// Each id once, in the list's order.
fn dedup(models: Vec<Listed>) -> Vec<Listed> {
    let mut seen = std::collections::HashSet::new();
    models
        .into_iter()
        .filter(|m| seen.insert(m.id.clone()))
        .collect()
}

/// Make sure each of `providers`' lists is fresh (`force`: read them all
/// now), reading the stale ones at once, all providers in parallel, and
/// record what was read in `stats/model_lists.json` (with which catalog
/// models each list lacks). Returns what each came to, in `providers`'
/// order, and the cache as it is now.
pub fn refresh(
    s: &crate::settings::Settings,
    providers: &[Resolved],
    force: bool,
    clock: &Clock,
) -> Result<(Vec<(String, Got)>, ModelLists)> {
    let now = clock.now();
    let cached = ModelLists::load(s.stats_dir())?;
    let stale: Vec<&Resolved> = providers
        .iter()
        .filter(|p| {
            force || !cached.settled(&p.provider.name, &p.base_url, p.provider.list_every, now)
        })
        .collect();
    let mut got: Vec<(String, Got)> = providers
        .iter()
        .map(|p| (p.provider.name.clone(), Got::Cached))
        .collect();
    if stale.is_empty() {
        return Ok((got, cached));
    }
    crate::fsutil::ensure_dir(s.stats_dir())?;
    let client = http::client()?;
    let redactor = s.catalog.redactor();
    let rt = crate::http_server::runtime(2)?;
    let results: Vec<Fetched> = rt.block_on(futures_util::future::join_all(
        stale
            .iter()
            .map(|p| fetch(&client, p, &redactor, s.stats_dir(), clock)),
    ));
    drop(rt);
    // No list answered, for want of a network: nothing is written.
    if results
        .iter()
        .all(|r| matches!(r, Err(f) if f.kind == FailKind::Unreachable))
    {
        for (p, result) in stale.iter().zip(results) {
            if let (Some(slot), Err(f)) =
                (got.iter_mut().find(|(n, _)| *n == p.provider.name), result)
            {
                slot.1 = Got::Failed(f);
            }
        }
        return Ok((got, cached));
    }
    let lists = ModelLists::update(s.stats_dir(), clock.now(), |lists| {
        for (p, result) in stale.iter().zip(results) {
            let name = &p.provider.name;
            let slot = got.iter_mut().find(|(n, _)| n == name).map(|(_, g)| g);
            match result {
                Ok(models) => {
                    lists.record_list(name, &p.base_url, models, &p.provider.models, now);
                    if let Some(g) = slot {
                        *g = Got::Read;
                    }
                }
                Err(f) => {
                    lists.record_failure(name, &p.base_url, f.clone());
                    if let Some(g) = slot {
                        *g = Got::Failed(f);
                    }
                }
            }
        }
        lists.clone()
    })?;
    Ok((got, lists))
}

/// Whether every remote provider's list failed for want of a network
/// (and at least one was asked): an offline run, which records nothing.
pub fn offline(providers: &[Resolved], got: &[(String, Got)]) -> bool {
    let remote: Vec<&Got> = got
        .iter()
        .filter(|(n, _)| {
            providers
                .iter()
                .any(|p| &p.provider.name == n && !p.is_loopback())
        })
        .map(|(_, g)| g)
        .collect();
    !remote.is_empty()
        && remote
            .iter()
            .all(|g| matches!(g, Got::Failed(f) if f.kind == FailKind::Unreachable))
}
