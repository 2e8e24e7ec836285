//! Route's measured speed shared between instances ([`crate::route::speed`]):
//! one hash, `llmprobe:speed`, of `provider::model` → the figures of the
//! model's latest outcome (`at_ms|ttft|total|err|fails`).
//!
//! Never on the request path. Every [`crate::route::serve::SPEED_TICK`]
//! each instance runs one script: it writes the figures of the models it
//! measured since its last merge, each only where the stored figures are
//! older, and reads the whole hash back; the instance then takes every
//! model whose stored figures are newer than its own. The newest outcome's
//! figures win, so a model that timed out at one instance drops behind at
//! every instance within a merge. The hash lives a day after its last
//! write.

use std::collections::HashMap;
use std::sync::LazyLock;

use super::{PREFIX, Shared, SharedState};

/// Write each `field, value` pair whose `at_ms` (the value's first field)
/// is newer than the stored one's; return the whole hash.
const MERGE: &str = r#"
for i = 1, #ARGV - 1, 2 do
  local old = redis.call('HGET', KEYS[1], ARGV[i])
  local new_at = tonumber(string.match(ARGV[i + 1], '^[^|]*'))
  local old_at = old and tonumber(string.match(old, '^[^|]*')) or nil
  if old_at == nil or (new_at ~= nil and new_at > old_at) then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  end
end
if #ARGV > 0 then redis.call('PEXPIRE', KEYS[1], 86400000) end
return redis.call('HGETALL', KEYS[1])
"#;

static SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(MERGE));

/// The hash of every model's figures.
fn speed_key() -> String {
    format!("{PREFIX}speed")
}

impl SharedState {
    /// Write `mine` (from [`crate::route::speed::Speed::to_merge`]) where
    /// newer, and read every model's figures: one round trip.
    pub async fn merge_speed(&self, mine: &[(String, String)]) -> Shared<HashMap<String, String>> {
        let mut inv = SCRIPT.prepare_invoke();
        inv.key(speed_key());
        for (field, value) in mine {
            inv.arg(field).arg(value);
        }
        let mut c = self.manager.clone();
        self.call(inv.invoke_async(&mut c)).await
    }
}
