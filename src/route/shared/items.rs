//! The Responses surface's item store in Redis (`[route]
//! item_store_shared`), so that an `item_reference` or a
//! `previous_response_id` resolves on any instance, whichever served the
//! turn before ([`crate::route::items`] is the store itself).
//!
//! - `llmprobe:item:{id}`: an output item route returned (`msg_…`,
//!   `fc_…`), as JSON.
//! - `llmprobe:response:{id}`: a response (`resp_…`), as
//!   `previous_id|{"input":[…],"output":[…]}` (`previous_id` empty for the
//!   first turn of a chain).
//!
//! Every key is set with `EX item_store_secs`, and each stored turn renews
//! the keys it used; nothing needs sweeping, and Redis' own memory policy
//! (`maxmemory`) is what bounds them there. Reading is one round trip: one
//! script fetches the items a request misses locally and walks a
//! `previous_response_id` chain from its first link not held locally.
//! The walk reads keys it finds in the values, which a Redis Cluster
//! would refuse; route's shared state is one Redis, not a cluster.

use std::sync::OnceLock;

use super::{PREFIX, Shared, SharedState};

/// The key of an output item.
pub fn item_key(id: &str) -> String {
    format!("{PREFIX}item:{id}")
}

/// The key of a response.
pub fn response_key(id: &str) -> String {
    format!("{PREFIX}response:{id}")
}

/// `KEYS`: the item keys, then the response key to walk from, if any.
/// `ARGV[1]`: how many item keys; `ARGV[2]`: the response key prefix;
/// `ARGV[3]`: the most links to walk. Returns `{items, chain}`: each item
/// or nil, and each link's value from the first, ending with a nil when
/// a link is missing.
const FIND: &str = r#"
local n = tonumber(ARGV[1])
local items = {}
-- One GET each, not MGET(unpack(KEYS)): unpack fails past Lua's stack
-- limit (about 8000), which would count as Redis being unavailable.
for i = 1, n do items[i] = redis.call('GET', KEYS[i]) end
local chain = {}
local key = KEYS[n + 1]
local left = tonumber(ARGV[3])
while key and left > 0 do
  local v = redis.call('GET', key)
  if not v then
    chain[#chain + 1] = false
    break
  end
  chain[#chain + 1] = v
  left = left - 1
  local sep = string.find(v, '|', 1, true)
  local prev = sep and string.sub(v, 1, sep - 1) or ''
  if prev == '' then key = nil else key = ARGV[2] .. prev end
end
return {items, chain}
"#;

fn find_script() -> &'static redis::Script {
    static SCRIPT: OnceLock<redis::Script> = OnceLock::new();
    SCRIPT.get_or_init(|| redis::Script::new(FIND))
}

/// What Redis holds of a request's references.
#[derive(Debug, Default, PartialEq)]
pub struct Held {
    /// Each item asked for, in order; `None` when Redis has none.
    pub items: Vec<Option<String>>,
    /// The chain from the response asked for back to its first turn:
    /// each link's id and its value (`previous_id|json`). `None` when a
    /// link is missing (expired, or never stored).
    pub chain: Option<Vec<(String, String)>>,
}

fn strings(v: &redis::Value) -> Vec<Option<String>> {
    match v {
        redis::Value::Array(vs) => vs
            .iter()
            .map(|v| match v {
                redis::Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
                redis::Value::SimpleString(s) => Some(s.clone()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

impl SharedState {
    /// The items `ids` and the chain of responses from `from` back, in one
    /// round trip, walking at most `max_links` responses.
    pub async fn find_items(
        &self,
        ids: &[String],
        from: Option<&str>,
        max_links: usize,
    ) -> Shared<Held> {
        let mut inv = find_script().prepare_invoke();
        for id in ids {
            inv.key(item_key(id));
        }
        if let Some(r) = from {
            inv.key(response_key(r));
        }
        inv.arg(ids.len())
            .arg(format!("{PREFIX}response:"))
            .arg(max_links);
        let mut c = self.manager.clone();
        let v: redis::Value = self.call(inv.invoke_async(&mut c)).await?;
        let parts = match &v {
            redis::Value::Array(p) => p.as_slice(),
            _ => &[],
        };
        let mut items = parts.first().map(strings).unwrap_or_default();
        items.resize(ids.len(), None);
        let chain = from.map(|first| {
            let mut out = Vec::new();
            let mut id = first.to_string();
            for link in parts.get(1).map(strings).unwrap_or_default() {
                let value = link?;
                let previous = value.split_once('|').map_or("", |(p, _)| p).to_string();
                out.push((std::mem::replace(&mut id, previous), value));
                if id.is_empty() {
                    return Some(out);
                }
            }
            // Cut short by the walk's bound: not the whole chain.
            None
        });
        Ok(Held {
            items,
            chain: chain.flatten(),
        })
    }

    /// Keep `items` (output item id → JSON) and the response `id`
    /// (`value` as [`response_key`] holds it) for `secs`, and renew the
    /// items and responses a request used: one round trip.
    pub async fn keep_items(
        &self,
        items: &[(String, String)],
        response: Option<(&str, &str)>,
        renew_items: &[String],
        renew_responses: &[String],
        secs: u64,
    ) -> Shared<()> {
        let mut p = redis::pipe();
        for (id, json) in items {
            p.cmd("SET")
                .arg(item_key(id))
                .arg(json)
                .arg("EX")
                .arg(secs)
                .ignore();
        }
        if let Some((id, value)) = response {
            p.cmd("SET")
                .arg(response_key(id))
                .arg(value)
                .arg("EX")
                .arg(secs)
                .ignore();
        }
        for id in renew_items {
            p.expire(item_key(id), secs as i64).ignore();
        }
        for id in renew_responses {
            p.expire(response_key(id), secs as i64).ignore();
        }
        let mut c = self.manager.clone();
        self.call(p.query_async::<()>(&mut c)).await
    }
}
