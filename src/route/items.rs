//! The Responses surface's item store: the output items `route --serve`
//! returned (`message` items `msg_…`, `function_call` items `fc_…`) by
//! id, and each response (`resp_…`) as a link to the response it
//! followed (`previous_response_id`) plus its own input and output, so
//! that a client may send `{"type": "item_reference", "id": "msg_…"}` or
//! `previous_response_id` as it would to OpenAI (docs/surfaces/responses.md).
//!
//! - **Bounded.** In memory, each entry for `[route] item_store_secs`
//!   after it was stored or last used by a stored response, at most
//!   `[route] item_store_max_bytes` in all, counted as the bytes of its
//!   JSON; the oldest go first. Nothing is kept for a request with
//!   `store: false`, nor at all when `item_store_secs` is 0.
//! - **Chains, not copies.** A response holds only its new input and its
//!   output; `previous_response_id` is resolved by walking the links back
//!   to the first turn. Every stored turn renews the links and items it
//!   used, so a conversation that goes on is kept as long as it goes on.
//! - **Time is the engine's** ([`crate::clock::Clock`], passed in as
//!   `now`), so the tests expire items by moving the test clock.
//! - **Shared when asked** (`[route] item_store_shared`): every entry is
//!   written to Redis too, before the response that holds it reaches the
//!   client, and what a request misses locally is read from there in one
//!   round trip ([`crate::route::shared::items`]).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use rustc_hash::FxHashMap;
use serde_json::Value;

use super::metrics::{EvictionLabels, KindLabels, Metrics};
use super::shared::SharedState;
use crate::catalog::RouteSettings;

/// The most responses a `previous_response_id` chain is walked back
/// through; a longer chain is not resolved (the store's byte bound keeps
/// real chains far shorter).
pub const MAX_LINKS: usize = 100_000;

/// One entry's value, as compact JSON text: one allocation an entry, so
/// that `item_store_max_bytes` bounds the memory it takes (a parsed
/// `Value` tree takes several times its text).
#[derive(Debug, Clone, PartialEq)]
enum Kept {
    /// An output item.
    Item(Box<str>),
    /// A response: the one it followed, and `{"input":[…],"output":[…]}`.
    Response {
        previous: Option<Box<str>>,
        turn: Box<str>,
    },
}

/// What an entry costs beside its text: its key (twice, in the map and
/// the queue), the map's and the queue's slots. Counted in its bytes, so
/// that the bound is on memory, not only on text.
const ENTRY_OVERHEAD: usize = 128;

impl Kept {
    fn bytes(&self) -> usize {
        ENTRY_OVERHEAD
            + match self {
                Kept::Item(j) => j.len(),
                Kept::Response { previous, turn } => {
                    previous.as_ref().map_or(0, |p| p.len()) + turn.len()
                }
            }
    }
}

#[derive(Debug)]
struct Entry {
    kept: Kept,
    /// When it was stored or last renewed.
    at: DateTime<Utc>,
    /// Its place in [`Local::order`].
    seq: u64,
    bytes: usize,
}

/// What left the store, by reason.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Evicted {
    expired: u64,
    size: u64,
}

/// The entries in memory, oldest (least recently stored or renewed)
/// first in `order`. `order` is a queue of `(seq, id)`: an entry renewed
/// or removed leaves its old place behind, skipped when it reaches the
/// front (its `seq` no longer matches), so that keeping, renewing and
/// evicting are O(1); the queue is compacted when those stale places
/// outnumber the entries.
#[derive(Debug)]
struct Local {
    ttl: TimeDelta,
    max_bytes: usize,
    map: FxHashMap<Arc<str>, Entry>,
    order: VecDeque<(u64, Arc<str>)>,
    next: u64,
    bytes: usize,
    items: usize,
    responses: usize,
    evicted: Evicted,
}

impl Local {
    fn new(ttl: Duration, max_bytes: usize) -> Local {
        Local {
            ttl: TimeDelta::from_std(ttl).unwrap_or(TimeDelta::MAX),
            max_bytes,
            map: FxHashMap::default(),
            order: VecDeque::new(),
            next: 0,
            bytes: 0,
            items: 0,
            responses: 0,
            evicted: Evicted::default(),
        }
    }

    fn expired(&self, e: &Entry, now: DateTime<Utc>) -> bool {
        now >= e.at + self.ttl
    }

    fn remove(&mut self, id: &str) -> Option<Entry> {
        let e = self.map.remove(id)?;
        self.bytes -= e.bytes;
        match e.kept {
            Kept::Item(_) => self.items -= 1,
            Kept::Response { .. } => self.responses -= 1,
        }
        Some(e)
    }

    /// The oldest live entry's id and whether it has expired at `now`,
    /// after dropping the stale places ahead of it.
    fn front(&mut self, now: DateTime<Utc>) -> Option<(Arc<str>, bool)> {
        while let Some((seq, id)) = self.order.front() {
            match self.map.get(id) {
                Some(e) if e.seq == *seq => return Some((id.clone(), self.expired(e, now))),
                _ => {
                    self.order.pop_front();
                }
            }
        }
        None
    }

    /// Forget what has expired at `now`, oldest first.
    fn sweep(&mut self, now: DateTime<Utc>) {
        while let Some((id, true)) = self.front(now) {
            self.order.pop_front();
            if self.remove(&id).is_some() {
                self.evicted.expired += 1;
            }
        }
    }

    /// Place `id` at the back of the queue with a new `seq`, compacting
    /// the queue when stale places outnumber the live ones.
    fn enqueue(&mut self, id: Arc<str>) -> u64 {
        let seq = self.next;
        self.next += 1;
        self.order.push_back((seq, id));
        if self.order.len() > 2 * self.map.len() + 1024 {
            let map = &self.map;
            self.order
                .retain(|(seq, id)| map.get(id).is_some_and(|e| e.seq == *seq));
        }
        seq
    }

    /// Keep `kept` under `id` from `now`, pushing out the oldest entries
    /// while the whole is over the bound. An entry larger than the bound
    /// on its own is not kept.
    fn put(&mut self, id: &str, kept: Kept, now: DateTime<Utc>) {
        self.sweep(now);
        self.remove(id);
        let bytes = id.len() + kept.bytes();
        if bytes > self.max_bytes {
            self.evicted.size += 1;
            return;
        }
        while self.bytes + bytes > self.max_bytes {
            let Some((oldest, _)) = self.front(now) else {
                break;
            };
            self.order.pop_front();
            self.remove(&oldest);
            self.evicted.size += 1;
        }
        match kept {
            Kept::Item(_) => self.items += 1,
            Kept::Response { .. } => self.responses += 1,
        }
        let id: Arc<str> = id.into();
        let seq = self.enqueue(id.clone());
        self.bytes += bytes;
        self.map.insert(
            id,
            Entry {
                kept,
                at: now,
                seq,
                bytes,
            },
        );
    }

    /// The entry under `id`, unless it has expired at `now`.
    fn get(&self, id: &str, now: DateTime<Utc>) -> Option<&Kept> {
        self.map
            .get(id)
            .filter(|e| !self.expired(e, now))
            .map(|e| &e.kept)
    }

    /// `id` was used at `now`: it is kept `ttl` from now, and is the
    /// newest.
    fn renew(&mut self, id: &str, now: DateTime<Utc>) {
        let ttl = self.ttl;
        let Some((key, e)) = self.map.get_key_value(id) else {
            return;
        };
        if now >= e.at + ttl {
            return;
        }
        let key = key.clone();
        let seq = self.enqueue(key.clone());
        if let Some(e) = self.map.get_mut(&key) {
            e.seq = seq;
            e.at = now;
        }
    }
}

/// What a request refers to: the ids of its `item_reference`s, and its
/// `previous_response_id`.
#[derive(Debug, Default, Clone, Copy)]
pub struct Wanted<'a> {
    pub items: &'a [String],
    pub previous: Option<&'a str>,
}

/// What the store holds of what a request referred to.
#[derive(Debug, Default)]
pub struct Found {
    /// Each item held, by id.
    pub items: HashMap<String, Value>,
    /// The items of the `previous_response_id` chain, oldest turn first
    /// (each turn's input, then its output); `None` when not asked, or
    /// when a link is unknown or expired.
    pub history: Option<Vec<Value>>,
    /// The responses of that chain, for the next turn to renew.
    pub chain: Vec<String>,
    /// Redis was asked for what memory missed, and did not answer.
    pub unavailable: bool,
}

/// A response to keep: its id, the response it followed, its input
/// (references resolved, not the earlier turns) and output, and what it
/// used (renewed with it).
#[derive(Debug, Default, Clone)]
pub struct Keep {
    pub id: String,
    pub previous: Option<String>,
    pub input: Vec<Value>,
    pub output: Vec<Value>,
    pub used_items: Vec<String>,
    pub used_responses: Vec<String>,
}

/// The store: in memory, and in Redis when shared.
pub struct ItemStore {
    ttl: Duration,
    local: Mutex<Local>,
    shared: Option<Arc<SharedState>>,
    bytes: Gauge,
    /// The gauges and counters of each label, looked up once: a keep
    /// sets them without hashing a label.
    items: Gauge,
    responses: Gauge,
    expired: Counter,
    evicted_for_size: Counter,
}

impl std::fmt::Debug for ItemStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ItemStore")
            .field("ttl", &self.ttl)
            .field("shared", &self.shared.is_some())
            .finish()
    }
}

impl ItemStore {
    /// As `[route]` says (`item_store_secs`, `item_store_max_bytes`),
    /// in Redis too when `shared` is given, its figures in `metrics`.
    pub fn new(
        settings: &RouteSettings,
        shared: Option<Arc<SharedState>>,
        metrics: &Metrics,
    ) -> ItemStore {
        ItemStore {
            ttl: settings.item_store,
            local: Mutex::new(Local::new(
                settings.item_store,
                settings.item_store_max_bytes,
            )),
            shared,
            bytes: metrics.item_store_bytes.clone(),
            items: kind(&metrics.item_store_items, "item"),
            responses: kind(&metrics.item_store_items, "response"),
            expired: reason(&metrics.item_store_evictions, "expired"),
            evicted_for_size: reason(&metrics.item_store_evictions, "size"),
        }
    }

    /// How long an entry is kept, in whole seconds; 0: nothing is kept.
    pub fn secs(&self) -> u64 {
        self.ttl.as_secs()
    }

    fn local(&self) -> std::sync::MutexGuard<'_, Local> {
        self.local.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Set the gauges and count the evictions since the last time.
    fn figures(&self, l: &mut Local) {
        self.bytes.set(l.bytes as i64);
        self.items.set(l.items as i64);
        self.responses.set(l.responses as i64);
        let e = std::mem::take(&mut l.evicted);
        if e.expired > 0 {
            self.expired.inc_by(e.expired);
        }
        if e.size > 0 {
            self.evicted_for_size.inc_by(e.size);
        }
    }

    /// Forget what has expired, and bring the figures up to date (for
    /// `/metrics`).
    pub fn sweep(&self, now: DateTime<Utc>) {
        let mut l = self.local();
        l.sweep(now);
        self.figures(&mut l);
    }

    /// What the store holds of `want` at `now`: from memory, then what
    /// memory misses from Redis in one round trip, when shared.
    pub async fn find(&self, want: Wanted<'_>, now: DateTime<Utc>) -> Found {
        let mut found = Found::default();
        if self.secs() == 0 || (want.items.is_empty() && want.previous.is_none()) {
            return found;
        }
        let mut missing = Vec::new();
        // The chain's turns, newest first, and where memory lost it.
        let mut turns: Vec<Box<str>> = Vec::new();
        let mut from: Option<String> = None;
        {
            let mut l = self.local();
            l.sweep(now);
            let mut seen = HashSet::new();
            for id in want.items {
                if !seen.insert(id) {
                    continue;
                }
                match l.get(id, now) {
                    Some(Kept::Item(j)) => {
                        if let Ok(v) = serde_json::from_str(j) {
                            found.items.insert(id.clone(), v);
                        }
                    }
                    _ => missing.push(id.clone()),
                }
            }
            let mut next = want.previous.map(str::to_string);
            while let Some(id) = next.take() {
                if found.chain.len() >= MAX_LINKS {
                    break;
                }
                match l.get(&id, now) {
                    Some(Kept::Response { previous, turn }) => {
                        turns.push(turn.clone());
                        next = previous.as_deref().map(str::to_string);
                        found.chain.push(id);
                    }
                    _ => from = Some(id),
                }
            }
            self.figures(&mut l);
        }
        let mut whole = from.is_none() && found.chain.len() < MAX_LINKS;
        let asked = match &self.shared {
            Some(s) if !missing.is_empty() || from.is_some() => Some(
                s.find_items(&missing, from.as_deref(), MAX_LINKS - found.chain.len())
                    .await,
            ),
            _ => None,
        };
        found.unavailable = matches!(asked, Some(Err(_)));
        if let Some(Ok(held)) = asked {
            for (id, json) in missing.iter().zip(held.items) {
                if let Some(v) = json.and_then(|j| serde_json::from_str(&j).ok()) {
                    found.items.insert(id.clone(), v);
                }
            }
            if from.is_some()
                && let Some(links) = held.chain
            {
                for (id, value) in links {
                    let turn = value.split_once('|').map_or("", |(_, t)| t);
                    turns.push(turn.into());
                    found.chain.push(id);
                }
                whole = true;
            }
        }
        if want.previous.is_some() && whole {
            found.history = history(&turns);
        }
        if found.history.is_none() {
            found.chain.clear();
        }
        found
    }

    /// Keep `k` from `now`: its output items by id, the response, and a
    /// renewal of what it used; in Redis too, when shared (awaited, so
    /// that another instance can resolve them as soon as the client has
    /// the response). A Redis that does not answer leaves them in memory.
    pub async fn keep(&self, k: Keep, now: DateTime<Utc>) {
        if self.secs() == 0 {
            return;
        }
        // Each output item is written once: alone, and (the same text)
        // in its turn.
        let written: Vec<String> = k.output.iter().map(Value::to_string).collect();
        let items: Vec<(String, String)> = k
            .output
            .iter()
            .zip(&written)
            .filter_map(|(item, json)| Some((item.get("id")?.as_str()?.to_string(), json.clone())))
            .collect();
        let mut turn = String::with_capacity(written.iter().map(String::len).sum::<usize>() + 64);
        turn.push_str("{\"input\":");
        turn.push_str(&Value::Array(k.input).to_string());
        turn.push_str(",\"output\":[");
        turn.push_str(&written.join(","));
        turn.push_str("]}");
        {
            let mut l = self.local();
            for id in k.used_items.iter().chain(&k.used_responses) {
                l.renew(id, now);
            }
            for (id, json) in &items {
                l.put(id, Kept::Item(json.as_str().into()), now);
            }
            l.put(
                &k.id,
                Kept::Response {
                    previous: k.previous.as_deref().map(Into::into),
                    turn: turn.as_str().into(),
                },
                now,
            );
            self.figures(&mut l);
        }
        if let Some(s) = &self.shared {
            let value = format!("{}|{turn}", k.previous.as_deref().unwrap_or(""));
            // Unavailable: the store says so once on stderr, and the
            // items stay in memory here.
            let _ = s
                .keep_items(
                    &items,
                    Some((&k.id, &value)),
                    &k.used_items,
                    &k.used_responses,
                    self.secs(),
                )
                .await;
        }
    }
}

/// The gauge of one kind of entry.
fn kind(family: &Family<KindLabels, Gauge>, kind: &str) -> Gauge {
    family
        .get_or_create(&KindLabels { kind: kind.into() })
        .clone()
}

/// The counter of one reason for eviction.
fn reason(family: &Family<EvictionLabels, Counter>, reason: &str) -> Counter {
    family
        .get_or_create(&EvictionLabels {
            reason: reason.into(),
        })
        .clone()
}

/// The items of a chain's turns (`{"input":[…],"output":[…]}`, newest
/// first), oldest turn first; `None` when one does not read.
fn history(turns: &[Box<str>]) -> Option<Vec<Value>> {
    let mut out = Vec::new();
    for turn in turns.iter().rev() {
        let Value::Object(mut t) = serde_json::from_str::<Value>(turn).ok()? else {
            return None;
        };
        for part in ["input", "output"] {
            match t.remove(part) {
                Some(Value::Array(items)) => out.extend(items),
                _ => return None,
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn t(secs: i64) -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp(1_700_000_000 + secs, 0).unwrap()
    }

    fn store(secs: u64, max_bytes: usize) -> (ItemStore, Metrics) {
        let settings = RouteSettings {
            item_store: Duration::from_secs(secs),
            item_store_max_bytes: max_bytes,
            ..RouteSettings::default()
        };
        let metrics = Metrics::new();
        (ItemStore::new(&settings, None, &metrics), metrics)
    }

    fn msg(id: &str, text: &str) -> Value {
        json!({"id": id, "type": "message", "role": "assistant",
               "content": [{"type": "output_text", "text": text}]})
    }

    fn turn(id: &str, previous: Option<&str>, input: &str, answer: (&str, &str)) -> Keep {
        Keep {
            id: id.into(),
            previous: previous.map(Into::into),
            input: vec![json!({"role": "user", "content": input})],
            output: vec![msg(answer.0, answer.1)],
            ..Keep::default()
        }
    }

    fn block<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    fn find(s: &ItemStore, items: &[&str], previous: Option<&str>, now: DateTime<Utc>) -> Found {
        let items: Vec<String> = items.iter().map(|s| s.to_string()).collect();
        block(s.find(
            Wanted {
                items: &items,
                previous,
            },
            now,
        ))
    }

    fn metric(m: &Metrics, line: &str) -> Option<String> {
        m.encode()
            .lines()
            .find(|l| l.starts_with(line))
            .map(|l| l[line.len()..].trim().to_string())
    }

    #[test]
    fn output_items_are_found_by_id_until_they_expire() {
        let (s, m) = store(3600, 1 << 20);
        block(s.keep(turn("resp_1", None, "hi", ("msg_1", "Hello.")), t(0)));
        let f = find(&s, &["msg_1", "msg_nope"], None, t(3599));
        assert_eq!(f.items["msg_1"], msg("msg_1", "Hello."));
        assert!(!f.items.contains_key("msg_nope"));
        assert!(f.history.is_none());
        // Expired: unknown, and counted as such.
        let f = find(&s, &["msg_1"], None, t(3600));
        assert!(f.items.is_empty());
        s.sweep(t(3600));
        assert_eq!(
            metric(
                &m,
                "llmprobe_route_item_store_evictions_total{reason=\"expired\"}"
            ),
            Some("2".into())
        );
        assert_eq!(
            metric(&m, "llmprobe_route_item_store_bytes"),
            Some("0".into())
        );
    }

    #[test]
    fn a_chain_is_walked_back_to_its_first_turn_and_each_turn_renews_it() {
        let (s, m) = store(100, 1 << 20);
        block(s.keep(turn("resp_1", None, "one", ("msg_1", "1")), t(0)));
        block(s.keep(turn("resp_2", Some("resp_1"), "two", ("msg_2", "2")), t(50)));
        let f = find(&s, &[], Some("resp_2"), t(60));
        let texts: Vec<String> = f
            .history
            .as_ref()
            .unwrap()
            .iter()
            .map(|v| {
                v["content"]
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v["content"][0]["text"].as_str().unwrap().to_string())
            })
            .collect();
        assert_eq!(texts, ["one", "1", "two", "2"]);
        assert_eq!(f.chain, ["resp_2", "resp_1"]);
        // A third turn uses the chain: resp_1 lives on past its own TTL.
        let mut third = turn("resp_3", Some("resp_2"), "three", ("msg_3", "3"));
        third.used_responses = f.chain.clone();
        block(s.keep(third, t(90)));
        let f = find(&s, &[], Some("resp_3"), t(150));
        assert_eq!(f.history.unwrap().len(), 6);
        // msg_1 was not renewed: only what a turn used is.
        assert!(find(&s, &["msg_1"], None, t(150)).items.is_empty());
        // A lost link loses the chain.
        let f = find(&s, &[], Some("resp_3"), t(190));
        assert!(f.history.is_none() && f.chain.is_empty(), "{f:?}");
        assert!(find(&s, &[], Some("resp_nope"), t(0)).history.is_none());
        assert_eq!(
            metric(&m, "llmprobe_route_item_store_items{kind=\"response\"}"),
            Some("0".into())
        );
    }

    #[test]
    fn the_oldest_go_first_when_the_bytes_are_spent() {
        let big = "x".repeat(300);
        let (s, m) = store(3600, 1200);
        for i in 0..3 {
            let mut k = turn(&format!("resp_{i}"), None, "q", (&format!("msg_{i}"), &big));
            k.input.clear();
            block(s.keep(k, t(i)));
        }
        // Each turn is an item and a response of about 330 bytes of text
        // and 128 of overhead each: the third pushed out the first two
        // turns' entries, oldest first.
        let f = find(&s, &["msg_0", "msg_1", "msg_2"], None, t(3));
        let mut held: Vec<&String> = f.items.keys().collect();
        held.sort();
        assert_eq!(held, ["msg_2"]);
        let l = s.local();
        assert!(l.bytes <= 1200, "{}", l.bytes);
        assert_eq!(l.map.len(), live_places(&l));
        drop(l);
        s.sweep(t(3));
        let size: u64 = metric(
            &m,
            "llmprobe_route_item_store_evictions_total{reason=\"size\"}",
        )
        .unwrap()
        .parse()
        .unwrap();
        assert!(size >= 3, "{size}");
        // One entry larger than the whole bound is not kept at all.
        let mut k = turn("resp_big", None, "q", ("msg_big", &"y".repeat(2000)));
        k.input.clear();
        block(s.keep(k, t(4)));
        assert!(find(&s, &["msg_big"], None, t(4)).items.is_empty());
    }

    #[test]
    fn zero_secs_keeps_nothing() {
        let (s, _) = store(0, 1 << 20);
        block(s.keep(turn("resp_1", None, "hi", ("msg_1", "Hello.")), t(0)));
        assert!(find(&s, &["msg_1"], None, t(0)).items.is_empty());
        assert!(s.local().map.is_empty());
    }

    /// The places in the queue that are an entry's own.
    fn live_places(l: &Local) -> usize {
        l.order
            .iter()
            .filter(|(seq, id)| l.map.get(id).is_some_and(|e| e.seq == *seq))
            .count()
    }

    #[test]
    fn renewals_leave_places_behind_that_the_queue_sheds() {
        let mut l = Local::new(Duration::from_secs(100), 1 << 20);
        for i in 0..10 {
            l.put(&format!("e{i}"), Kept::Item("1".into()), t(0));
        }
        // A long conversation renews its whole chain every turn.
        for n in 0..5000 {
            l.renew(&format!("e{}", n % 10), t(1));
        }
        assert_eq!(live_places(&l), 10);
        assert!(l.order.len() <= 2 * 10 + 1025, "{}", l.order.len());
        // The oldest live entry is still the first to go.
        l.sweep(t(101));
        assert_eq!(l.map.len(), 0);
        assert!(l.order.is_empty());
    }

    #[test]
    fn renewing_moves_an_entry_to_the_back_of_the_line() {
        let mut l = Local::new(Duration::from_secs(100), 1 << 20);
        l.put("a", Kept::Item("1".into()), t(0));
        l.put("b", Kept::Item("2".into()), t(10));
        l.renew("a", t(20));
        l.sweep(t(112));
        assert!(l.get("a", t(112)).is_some());
        assert!(l.get("b", t(112)).is_none());
        assert_eq!(l.evicted.expired, 1);
        // An expired entry is not renewed.
        l.renew("a", t(120));
        assert!(l.get("a", t(120)).is_none());
    }
}
