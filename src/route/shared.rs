//! State shared between `route --serve` instances through Redis
//! (`--shared-state redis://…`): cooldowns, ladder hits, model failure
//! counts, usage windows and learned limits, and what upstreams said
//! models cannot take (one hash, read by each instance's health poller).
//!
//! - **One round trip per decision.** [`SharedState::admit`] is one Lua
//!   script that looks up the benches on a target's provider, key, model
//!   and key+model, then checks every limit (configured, tightened by what
//!   was learned) and, only if all pass, counts the request in every
//!   window. Two instances can never both take the last request of a
//!   window.
//! - **Keys expire by themselves.** Minute windows are per-second counters
//!   in a hash that lives 61 s after its last write; day windows are named
//!   by their reset and live until it; a bench lives until it ends; ladder
//!   hits 24 h, model failures 15 min, learned limits 7 days.
//! - **Time is the engine's.** Every script is given `now` from the
//!   engine's [`Clock`](crate::clock::Clock), and every TTL is relative, so
//!   the tests can move the clock.
//! - **Redis goes away.** Every call has a short timeout. A failure marks
//!   the store unavailable (one warning on stderr) and the engine serves
//!   from its in-process state, which it keeps up to date in both modes;
//!   [`SharedState::watch`] pings every 500 ms and switches back when
//!   Redis answers.
//! - **Status displays read it too**, never requests: [`SharedState::read`]
//!   fetches the benches, usage windows and learned limits of every key
//!   the catalog names (no `SCAN`, no `KEYS`) in one atomic pipeline.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use redis::aio::ConnectionManager;

use crate::catalog::redact_url as redact;
use crate::error::{Error, Result};
use crate::route::cooldown::{Bench, Counter, Target};
use crate::route::verdicts::{VERDICT_TTL, Verdict, Verdicts};

pub mod check_publisher;
pub mod items;
pub mod record;
pub mod speed;

use crate::usage::limits::{
    self, DayCount, EffectiveLimits, Learned, LimitHit, LimitKind, LimitLedger, LimitRequest,
    MinuteEntry, Reservation, UsageWindow, second_of,
};

/// Every call to Redis gives up after this long.
pub const CALL_TIMEOUT: Duration = Duration::from_millis(250);
/// How often an unavailable store checks whether Redis is back.
pub const RETRY_EVERY: Duration = Duration::from_millis(500);
const PREFIX: &str = "llmprobe:";
/// The hash of every model's verdicts (`provider::model|name` → JSON).
const VERDICTS_KEY: &str = "llmprobe:verdicts";
const MINUTE_TTL_MS: i64 = 61_000;

/// Check benches, then limits; count only if everything passes.
/// Returns `{0, second_ms, counted scope indexes…}`, `{1, kind, scope
/// index, until_ms}` or `{2, bench}`.
const ADMIT: &str = r#"
local now = tonumber(ARGV[1])
local tokens = tonumber(ARGV[2])
local nb = tonumber(ARGV[3])
local ns = tonumber(ARGV[4])
local resets = tonumber(ARGV[5])
local km = tonumber(ARGV[6])
local nc = tonumber(ARGV[7])
if nb > 0 then
  local vals = redis.call('MGET', unpack(KEYS, 1, nb))
  local best, best_until = nil, -1
  for i = 1, nb do
    local v = vals[i]
    if v then
      local sep = string.find(v, '|', 1, true)
      local u = tonumber(string.sub(v, 1, sep - 1))
      if u > now and u > best_until then
        best_until = u
        best = string.sub(v, sep + 1)
      end
    end
  end
  if best then return {2, best} end
end
local checks = {}
for i = 0, nc - 1 do
  local b = 8 + 3 * i
  checks[#checks + 1] = {s = tonumber(ARGV[b]), kind = ARGV[b + 1], limit = tonumber(ARGV[b + 2])}
end
local worst = nil
local function consider(kind, s, u)
  if worst == nil or u > worst[3] then worst = {kind, s, u} end
end
local learned = redis.call('HGETALL', KEYS[nb + 1])
for i = 1, #learned, 2 do
  local v = learned[i + 1]
  local kind, lim, rem, reset = string.match(v, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)$')
  if kind and lim ~= '' and kind ~= 'daily_cap' then
    local l = tonumber(lim)
    local found = false
    for _, c in ipairs(checks) do
      if c.s == km and c.kind == kind then
        found = true
        if l < c.limit then c.limit = l end
      end
    end
    if not found then checks[#checks + 1] = {s = km, kind = kind, limit = l} end
  end
  if kind and rem == '0' and reset ~= '' and tonumber(reset) > now then
    consider(kind, km, tonumber(reset))
  end
end
local minute = {}
local function entries(s)
  if minute[s] then return minute[s] end
  local key = KEYS[nb + 1 + 2 * (s - 1) + 1]
  local raw = redis.call('HGETALL', key)
  local by = {}
  local stale = {}
  for i = 1, #raw, 2 do
    local f, v = raw[i], tonumber(raw[i + 1])
    local at = tonumber(string.sub(f, 3))
    if at + 60000 > now then
      by[at] = by[at] or {at = at, r = 0, t = 0}
      by[at][string.sub(f, 1, 1)] = v
    else
      stale[#stale + 1] = f
    end
  end
  if #stale > 0 then redis.call('HDEL', key, unpack(stale)) end
  local list = {}
  for _, e in pairs(by) do list[#list + 1] = e end
  table.sort(list, function(a, b) return a.at < b.at end)
  minute[s] = list
  return list
end
for _, c in ipairs(checks) do
  local tok = (c.kind == 'tpm' or c.kind == 'tpd')
  local cost = tok and tokens or 1
  local field = tok and 't' or 'r'
  if c.kind == 'rpm' or c.kind == 'tpm' then
    local list = entries(c.s)
    local used = 0
    for _, e in ipairs(list) do used = used + e[field] end
    if used + cost > c.limit then
      local left, until_ = used, nil
      for _, e in ipairs(list) do
        left = left - e[field]
        if left + cost <= c.limit then until_ = e.at + 60000 break end
      end
      if until_ == nil then
        until_ = (#list > 0) and (list[#list].at + 60000) or (now + 60000)
      end
      consider(c.kind, c.s, until_)
    end
  else
    local used = tonumber(redis.call('HGET', KEYS[nb + 1 + 2 * (c.s - 1) + 2], field) or '0')
    if used + cost > c.limit then consider(c.kind, c.s, resets) end
  end
end
if worst then return {1, worst[1], worst[2], worst[3]} end
local second = math.ceil(now / 1000) * 1000
local counted = {}
local out = {0, second}
for _, c in ipairs(checks) do counted[c.s] = true end
for s = 1, ns do
  if counted[s] then
    local mk = KEYS[nb + 1 + 2 * (s - 1) + 1]
    local dk = KEYS[nb + 1 + 2 * (s - 1) + 2]
    redis.call('HINCRBY', mk, 'r:' .. second, 1)
    redis.call('HINCRBY', mk, 't:' .. second, tokens)
    redis.call('PEXPIRE', mk, tonumber(ARGV[8 + 3 * nc]))
    redis.call('HINCRBY', dk, 'r', 1)
    redis.call('HINCRBY', dk, 't', tokens)
    redis.call('PEXPIRE', dk, math.max(resets - now, 1000))
    out[#out + 1] = s
  end
end
return out
"#;

/// Add `ARGV[1]` tokens (signed) to counts that still exist: `KEYS` are
/// pairs of (minute hash, day hash), `ARGV[2]` the minute field.
const CORRECT: &str = r#"
local delta = tonumber(ARGV[1])
for i = 1, #KEYS, 2 do
  if redis.call('HEXISTS', KEYS[i], ARGV[2]) == 1 then
    local v = redis.call('HINCRBY', KEYS[i], ARGV[2], delta)
    if v < 0 then redis.call('HSET', KEYS[i], ARGV[2], 0) end
  end
  if redis.call('HEXISTS', KEYS[i + 1], 't') == 1 then
    local v = redis.call('HINCRBY', KEYS[i + 1], 't', delta)
    if v < 0 then redis.call('HSET', KEYS[i + 1], 't', 0) end
  end
end
return 1
"#;

/// Add a hit at `ARGV[1]` (ms) to a sorted set, forget those older than
/// `ARGV[2]` ms, and return how many are left.
const COUNT: &str = r#"
local now = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
redis.call('ZADD', KEYS[1], now, ARGV[3])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
return redis.call('ZCARD', KEYS[1])
"#;

/// Set a bench (`ARGV[3]`, `until_ms|json`) until `ARGV[1]` unless one
/// that ends later is there; return the one in force.
const BENCH: &str = r#"
local now, until_ = tonumber(ARGV[1]), tonumber(ARGV[2])
local old = redis.call('GET', KEYS[1])
if old then
  local u = tonumber(string.sub(old, 1, string.find(old, '|', 1, true) - 1))
  if u > now and u >= until_ then return old end
end
redis.call('SET', KEYS[1], ARGV[3], 'PX', math.max(until_ - now, 1))
return ARGV[3]
"#;

/// Say an alert's direction for every instance: `KEYS[1]` holds
/// `direction|at_ms`. Returns nil when this call set it (the direction
/// changed: this instance says it), else the value another instance set.
const CLAIM: &str = r#"
local old = redis.call('GET', KEYS[1])
if old then
  local sep = string.find(old, '|', 1, true)
  if sep and string.sub(old, 1, sep - 1) == ARGV[1] then return old end
end
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. ARGV[2], 'PX', math.max(tonumber(ARGV[3]), 1))
return false
"#;

/// Who says an alert ([`SharedState::claim_alert`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claimed {
    /// This instance: no other said this direction of the subject.
    Mine,
    /// Another instance said it already, at this time (the alert's).
    Theirs(Option<DateTime<Utc>>),
}

/// What [`SharedState::admit`] decided.
#[derive(Debug)]
pub enum Admit {
    Benched(Bench),
    Limited(LimitHit),
    Counted(Reservation),
}

/// The connection to Redis and whether it is usable now.
pub struct SharedState {
    manager: ConnectionManager,
    url: String,
    /// What goes on while Redis is away, for the one warning.
    meanwhile: &'static str,
    healthy: AtomicBool,
    last_error: Mutex<Option<String>>,
    admit: redis::Script,
    correct: redis::Script,
    count: redis::Script,
    bench: redis::Script,
    claim: redis::Script,
}

/// What a status view reads, every key named from the catalog (no `SCAN`,
/// no `KEYS`): what is not there has expired or was never written.
#[derive(Debug, Default)]
pub struct Wanted {
    /// Bench ids ([`Target`]'s): providers, keys, models, keys' models.
    pub benches: Vec<String>,
    /// Key-and-model scopes, for their learned limits.
    pub learned: Vec<String>,
    /// Usage scopes, each with the end of its current day window.
    pub windows: Vec<(String, DateTime<Utc>)>,
}

/// Redis was not usable for this call: serve from local state.
#[derive(Debug)]
pub struct Unavailable;

type Shared<T> = std::result::Result<T, Unavailable>;

fn ms(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

fn from_ms(v: i64) -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp_millis(v).unwrap_or_default()
}

fn kind_of(s: &str) -> LimitKind {
    match s {
        "rpd" => LimitKind::Rpd,
        "tpm" => LimitKind::Tpm,
        "tpd" => LimitKind::Tpd,
        "daily_cap" => LimitKind::DailyCap,
        _ => LimitKind::Rpm,
    }
}

fn minute_key(scope: &str) -> String {
    format!("{PREFIX}min:{scope}")
}

fn day_key(scope: &str, resets_at: DateTime<Utc>) -> String {
    format!("{PREFIX}day:{scope}:{}", ms(resets_at))
}

fn learned_key(key_model: &str) -> String {
    format!("{PREFIX}learned:{key_model}")
}

fn bench_key(id: &str) -> String {
    format!("{PREFIX}bench:{id}")
}

fn notify_key(subject: &str) -> String {
    format!("{PREFIX}notify:{subject}")
}

fn ladder_key(id: &str) -> String {
    format!("{PREFIX}ladder:{id}")
}

/// A model's routed successes: a sorted set of their times (ms).
fn traffic_ok_key(model: &str) -> String {
    format!("{PREFIX}traffic:ok:{model}")
}

/// A model's routed failures: per class, `class` → count and
/// `class@last` → the latest (ms).
fn traffic_failed_key(model: &str) -> String {
    format!("{PREFIX}traffic:failed:{model}")
}

impl SharedState {
    /// Connect, or fail: a bad URL is a usage error, an unreachable Redis
    /// an I/O error (exit 7), since nothing would be shared.
    pub async fn connect(url: &str) -> Result<Arc<SharedState>> {
        SharedState::connect_saying(url, "serving from local state until it is back").await
    }

    /// [`connect`](SharedState::connect), with what goes on while Redis is
    /// away in the warning's words (`check` only publishes).
    pub async fn connect_saying(url: &str, meanwhile: &'static str) -> Result<Arc<SharedState>> {
        let shown = redact(url);
        let client = redis::Client::open(url)
            .map_err(|e| Error::config(format!("--shared-state {shown}: {e}")))?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(2)))
            .set_response_timeout(Some(CALL_TIMEOUT))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(500));
        let manager = client
            .get_connection_manager_with_config(config)
            .await
            .map_err(|e| {
                Error::io(
                    format!("cannot connect to Redis at {shown} (--shared-state)"),
                    std::io::Error::other(e.to_string()),
                )
            })?;
        let s = SharedState {
            manager,
            url: shown,
            meanwhile,
            healthy: AtomicBool::new(true),
            last_error: Mutex::new(None),
            admit: redis::Script::new(ADMIT),
            correct: redis::Script::new(CORRECT),
            count: redis::Script::new(COUNT),
            bench: redis::Script::new(BENCH),
            claim: redis::Script::new(CLAIM),
        };
        s.ping().await.map_err(|e| {
            Error::io(
                format!("Redis at {} does not answer (--shared-state)", s.url),
                std::io::Error::other(e),
            )
        })?;
        Ok(Arc::new(s))
    }

    async fn ping(&self) -> std::result::Result<(), String> {
        let mut c = self.manager.clone();
        let r = tokio::time::timeout(
            CALL_TIMEOUT,
            redis::cmd("PING").query_async::<String>(&mut c),
        )
        .await;
        match r {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("no answer within {} ms", CALL_TIMEOUT.as_millis())),
        }
    }

    pub fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::Acquire)
    }

    /// `ok`, or why the instance serves from local state, for `/readyz`.
    pub fn describe(&self) -> String {
        if self.is_healthy() {
            return "ok".to_string();
        }
        let why = self
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .unwrap_or_default();
        format!("redis: unavailable ({why}), serving from local state")
    }

    fn fail(&self, why: String) {
        *self
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(why.clone());
        if self.healthy.swap(false, Ordering::AcqRel) {
            eprintln!(
                "warning: shared state: Redis at {} is unavailable ({why}); {}",
                self.url, self.meanwhile
            );
        }
    }

    /// Run one call with the timeout; a failure marks the store unavailable.
    async fn call<T>(
        &self,
        f: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Shared<T> {
        if !self.is_healthy() {
            return Err(Unavailable);
        }
        match tokio::time::timeout(CALL_TIMEOUT, f).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => {
                self.fail(e.to_string());
                Err(Unavailable)
            }
            Err(_) => {
                self.fail(format!("no answer within {} ms", CALL_TIMEOUT.as_millis()));
                Err(Unavailable)
            }
        }
    }

    /// While the process runs: when unavailable, ping every
    /// [`RETRY_EVERY`] and switch back once Redis answers.
    pub async fn watch(self: Arc<Self>) {
        let mut tick = tokio::time::interval(RETRY_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if self.is_healthy() {
                continue;
            }
            match self.ping().await {
                Ok(()) => {
                    self.healthy.store(true, Ordering::Release);
                    eprintln!(
                        "shared state: Redis at {} is back; sharing state again",
                        self.url
                    );
                }
                Err(e) => {
                    *self
                        .last_error
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner) = Some(e);
                }
            }
        }
    }

    /// Benches on `target`, then every limit: one atomic step.
    pub async fn admit(&self, req: &LimitRequest<'_>, now: DateTime<Utc>) -> Shared<Admit> {
        self.admit_with(req, now, true).await
    }

    /// Every limit only, not the benches: for the probe of a bench
    /// (`route --serve`'s re-prober), which the bench must not stop.
    pub async fn admit_limits(&self, req: &LimitRequest<'_>, now: DateTime<Utc>) -> Shared<Admit> {
        self.admit_with(req, now, false).await
    }

    async fn admit_with(
        &self,
        req: &LimitRequest<'_>,
        now: DateTime<Utc>,
        benches: bool,
    ) -> Shared<Admit> {
        let t = req.target;
        let ids = if benches { t.bench_ids() } else { Vec::new() };
        let resets_at = limits::next_day_reset(now, req.limits.day_reset);
        let key_model = t.key_model_id();
        let checks = limits::configured_checks(t, req.limits);
        let mut scopes: Vec<String> = vec![key_model.clone()];
        for (s, _, _) in &checks {
            if !scopes.contains(s) {
                scopes.push(s.clone());
            }
        }
        let mut inv = self.admit.prepare_invoke();
        for id in &ids {
            inv.key(bench_key(id));
        }
        inv.key(learned_key(&key_model));
        for s in &scopes {
            inv.key(minute_key(s)).key(day_key(s, resets_at));
        }
        inv.arg(ms(now))
            .arg(req.tokens)
            .arg(ids.len())
            .arg(scopes.len())
            .arg(ms(resets_at))
            .arg(1)
            .arg(checks.len());
        for (s, kind, limit) in &checks {
            let i = scopes.iter().position(|x| x == s).unwrap_or(0) + 1;
            inv.arg(i).arg(kind.as_str()).arg(*limit);
        }
        inv.arg(MINUTE_TTL_MS);
        let mut c = self.manager.clone();
        let v: redis::Value = self.call(inv.invoke_async(&mut c)).await?;
        Ok(parse_admit(v, &scopes, resets_at, req.tokens))
    }

    /// Replace a reservation's tokens with what the upstream reported.
    pub async fn correct(&self, r: &mut Reservation, used: u64) -> Shared<()> {
        let delta = used as i64 - r.tokens() as i64;
        if delta != 0 && !r.scopes().is_empty() {
            let mut inv = self.correct.prepare_invoke();
            for s in r.scopes() {
                inv.key(minute_key(s)).key(day_key(s, r.day_resets_at()));
            }
            inv.arg(delta).arg(format!("t:{}", ms(r.second())));
            let mut c = self.manager.clone();
            let _: i64 = self.call(inv.invoke_async(&mut c)).await?;
        }
        r.set_tokens(used);
        Ok(())
    }

    /// Count a failure in the shared ladder or failure window; how many
    /// are in it now, this one included.
    pub async fn count(
        &self,
        counter: Counter,
        id: &str,
        window: Duration,
        now: DateTime<Utc>,
    ) -> Shared<usize> {
        let key = match counter {
            Counter::Ladder => ladder_key(id),
            Counter::Failures => format!("{PREFIX}failures:{id}"),
        };
        let member = format!("{}:{}", ms(now), rand::random::<u32>());
        let mut inv = self.count.prepare_invoke();
        inv.key(key)
            .arg(ms(now))
            .arg(window.as_millis() as i64)
            .arg(member);
        let mut c = self.manager.clone();
        self.call(inv.invoke_async::<usize>(&mut c)).await
    }

    /// Put a bench in force for every instance; the one in force returned.
    pub async fn bench(&self, b: &Bench, now: DateTime<Utc>) -> Shared<Bench> {
        let json = serde_json::to_string(b).unwrap_or_default();
        let value = format!("{}|{json}", ms(b.until));
        let mut inv = self.bench.prepare_invoke();
        inv.key(bench_key(&b.target))
            .arg(ms(now))
            .arg(ms(b.until))
            .arg(value);
        let mut c = self.manager.clone();
        let kept: String = self.call(inv.invoke_async(&mut c)).await?;
        Ok(parse_bench(&kept).unwrap_or_else(|| b.clone()))
    }

    /// Claim the saying of one alert for every instance: `subject` went
    /// `direction` (`down` for an alert, `up` for its recovery), said at
    /// `at`. The first instance to claim a direction says it; the others,
    /// until the subject changes direction (or the key expires after
    /// `ttl`), are told who did and when. One key per subject,
    /// `llmprobe:notify:{subject}`, holding `direction|at_ms`.
    pub async fn claim_alert(
        &self,
        subject: &str,
        direction: &str,
        at: DateTime<Utc>,
        ttl: Duration,
    ) -> Shared<Claimed> {
        let mut inv = self.claim.prepare_invoke();
        inv.key(notify_key(subject))
            .arg(direction)
            .arg(ms(at))
            .arg(ttl.as_millis() as i64);
        let mut c = self.manager.clone();
        let old: Option<String> = self.call(inv.invoke_async(&mut c)).await?;
        Ok(match old {
            None => Claimed::Mine,
            Some(v) => Claimed::Theirs(
                v.split_once('|')
                    .and_then(|(_, t)| t.parse::<i64>().ok())
                    .map(from_ms),
            ),
        })
    }

    /// Lift `b` for every instance (a probe of it passed), if it is still
    /// the bench stored under its id.
    pub async fn unbench(&self, b: &Bench) -> Shared<()> {
        let mut c = self.manager.clone();
        let key = bench_key(&b.target);
        let stored: Option<String> = self
            .call(redis::cmd("GET").arg(&key).query_async(&mut c))
            .await?;
        if stored
            .as_deref()
            .and_then(parse_bench)
            .is_some_and(|s| s.until == b.until && s.set_at == b.set_at)
        {
            self.call(redis::cmd("DEL").arg(&key).query_async::<i64>(&mut c))
                .await?;
        }
        Ok(())
    }

    /// A success: the key+model's ladder starts again.
    pub async fn success(&self, target: &Target) -> Shared<()> {
        let mut c = self.manager.clone();
        let key = ladder_key(&target.key_model_id());
        self.call(redis::cmd("DEL").arg(key).query_async::<i64>(&mut c))
            .await
            .map(|_| ())
    }

    /// A routed request to `model` succeeded (`failed` is `None`) or
    /// failed with that class at `now`: traffic evidence every instance
    /// adds to, for the one `check` of a fleet ([`crate::usage::traffic`]).
    pub async fn traffic(
        &self,
        model: &str,
        failed: Option<&str>,
        now: DateTime<Utc>,
    ) -> Shared<()> {
        let keep = crate::usage::traffic::KEEP as isize;
        let ttl = crate::usage::traffic::KEPT_FOR.num_milliseconds();
        let mut p = redis::pipe();
        p.atomic();
        match failed {
            None => {
                let key = traffic_ok_key(model);
                let member = format!("{}-{}", ms(now), rand::random::<u32>());
                p.zadd(&key, member, ms(now))
                    .ignore()
                    .zremrangebyrank(&key, 0, -(keep + 1))
                    .ignore()
                    .pexpire(&key, ttl)
                    .ignore();
            }
            Some(class) => {
                let key = traffic_failed_key(model);
                p.hincr(&key, class, 1)
                    .ignore()
                    .hset(&key, format!("{class}@last"), ms(now))
                    .ignore()
                    .pexpire(&key, ttl)
                    .ignore();
            }
        }
        let mut c = self.manager.clone();
        self.call(p.query_async::<()>(&mut c)).await
    }

    /// The traffic evidence of `models` (`provider::model`), from every
    /// instance, in one round trip.
    pub async fn traffic_of(&self, models: &[String]) -> Shared<crate::usage::Traffic> {
        let mut p = redis::pipe();
        for m in models {
            p.cmd("ZRANGE")
                .arg(traffic_ok_key(m))
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES");
            p.hgetall(traffic_failed_key(m));
        }
        let mut c = self.manager.clone();
        type Reply = (Vec<(String, f64)>, HashMap<String, String>);
        let replies: Vec<Reply> = self.call(p.query_async(&mut c)).await?;
        let mut out = crate::usage::Traffic::default();
        for (m, (ok, failed)) in models.iter().zip(replies) {
            let mut e = crate::usage::traffic::Evidence {
                ok: ok.into_iter().map(|(_, t)| from_ms(t as i64)).collect(),
                ..Default::default()
            };
            for (field, count) in &failed {
                if field.contains('@') {
                    continue;
                }
                let (Ok(count), Some(last)) = (
                    count.parse::<u64>(),
                    failed
                        .get(&format!("{field}@last"))
                        .and_then(|t| t.parse::<i64>().ok()),
                ) else {
                    continue;
                };
                e.failed.insert(
                    field.clone(),
                    crate::usage::traffic::Failed {
                        count,
                        last: from_ms(last),
                    },
                );
            }
            if !e.ok.is_empty() || !e.failed.is_empty() {
                out.models.insert(m.clone(), e);
            }
        }
        Ok(out)
    }

    /// Share limits learned from an upstream's headers.
    pub async fn learn(&self, target: &Target, found: &[(String, Learned)]) -> Shared<()> {
        if found.is_empty() {
            return Ok(());
        }
        let key = learned_key(&target.key_model_id());
        let mut p = redis::pipe();
        p.atomic();
        for (name, l) in found {
            p.hset(&key, name, learned_value(l)).ignore();
        }
        p.pexpire(&key, limits::LEARNED_TTL.num_milliseconds())
            .ignore();
        let mut c = self.manager.clone();
        self.call(p.query_async::<()>(&mut c)).await
    }

    /// Share what an upstream said a model cannot take
    /// ([`crate::route::verdicts`]): one field of one hash per model and
    /// verdict, the hash kept as long as its newest verdict.
    pub async fn put_verdict(&self, model: &str, name: &str, v: &Verdict) -> Shared<()> {
        let json = serde_json::to_string(v).unwrap_or_default();
        let mut p = redis::pipe();
        p.atomic()
            .hset(VERDICTS_KEY, format!("{model}|{name}"), json)
            .ignore()
            .pexpire(VERDICTS_KEY, VERDICT_TTL.num_milliseconds())
            .ignore();
        let mut c = self.manager.clone();
        self.call(p.query_async::<()>(&mut c)).await
    }

    /// Every verdict still in force, from every instance.
    pub async fn verdicts(&self, now: DateTime<Utc>) -> Shared<Verdicts> {
        let mut c = self.manager.clone();
        let all: HashMap<String, String> = self
            .call(redis::cmd("HGETALL").arg(VERDICTS_KEY).query_async(&mut c))
            .await?;
        let mut out = Verdicts::default();
        for (field, json) in all {
            let (Some((model, name)), Ok(v)) = (
                field.rsplit_once('|'),
                serde_json::from_str::<Verdict>(&json),
            ) else {
                continue;
            };
            if v.until > now {
                out.insert(model, name, v);
            }
        }
        Ok(out)
    }

    /// Every instance's benches, usage windows and learned limits, as
    /// one atomic pipeline: one round trip, for status displays only.
    pub async fn read(
        &self,
        want: &Wanted,
        now: DateTime<Utc>,
    ) -> Shared<(Vec<Bench>, LimitLedger)> {
        if want.benches.is_empty() && want.learned.is_empty() && want.windows.is_empty() {
            return Ok((Vec::new(), LimitLedger::default()));
        }
        let mut p = redis::pipe();
        p.atomic();
        if !want.benches.is_empty() {
            let keys: Vec<String> = want.benches.iter().map(|id| bench_key(id)).collect();
            p.cmd("MGET").arg(keys);
        }
        for s in &want.learned {
            p.hgetall(learned_key(s));
        }
        for (s, resets_at) in &want.windows {
            p.hgetall(minute_key(s)).hgetall(day_key(s, *resets_at));
        }
        let mut c = self.manager.clone();
        let mut values = self
            .call(p.query_async::<Vec<redis::Value>>(&mut c))
            .await?
            .into_iter();
        let mut next = || values.next().unwrap_or(redis::Value::Nil);
        let benches = if want.benches.is_empty() {
            Vec::new()
        } else {
            redis::from_redis_value::<Vec<Option<String>>>(next())
                .unwrap_or_default()
                .iter()
                .flatten()
                .filter_map(|v| parse_bench(v))
                .filter(|b| b.until > now)
                .collect()
        };
        let mut budget = LimitLedger::default();
        for scope in &want.learned {
            let learned: BTreeMap<String, Learned> = hash(next())
                .into_iter()
                .filter_map(|(name, v)| Some((name, parse_learned(&v, now)?)))
                .collect();
            if !learned.is_empty() {
                budget.learned.insert(scope.clone(), learned);
            }
        }
        for (scope, resets_at) in &want.windows {
            let minute = minute_entries(hash(next()));
            let day = hash(next());
            let count = |f: &str| day.get(f).and_then(|v| v.parse().ok());
            let day = match (count("r"), count("t")) {
                (None, None) => None,
                (r, t) => Some(DayCount {
                    resets_at: *resets_at,
                    requests: r.unwrap_or(0),
                    tokens: t.unwrap_or(0),
                }),
            };
            if !minute.is_empty() || day.is_some() {
                budget
                    .windows
                    .insert(scope.clone(), UsageWindow { minute, day });
            }
        }
        Ok((benches, budget))
    }
}

impl SharedState {
    /// The scopes of `target` under `limits`, each with the end of its day
    /// window: the key-and-model scope and every configured one.
    fn scopes(
        target: &Target,
        limits: &EffectiveLimits,
        now: DateTime<Utc>,
    ) -> Vec<(String, DateTime<Utc>)> {
        let resets_at = limits::next_day_reset(now, limits.day_reset);
        let mut scopes = vec![target.key_model_id()];
        for (s, _, _) in limits::configured_checks(target, limits) {
            if !scopes.contains(&s) {
                scopes.push(s);
            }
        }
        scopes.into_iter().map(|s| (s, resets_at)).collect()
    }

    /// Every instance's counts in `target`'s scopes, and the probes'
    /// part, read in one round trip ([`crate::usage::SharedUsage::read`]).
    pub async fn usage_of(
        &self,
        target: &Target,
        limits: &EffectiveLimits,
        now: DateTime<Utc>,
    ) -> Shared<(LimitLedger, LimitLedger)> {
        let scopes = Self::scopes(target, limits, now);
        let want = Wanted {
            benches: Vec::new(),
            learned: vec![target.key_model_id()],
            windows: scopes
                .iter()
                .flat_map(|(s, r)| {
                    [
                        (s.clone(), *r),
                        (format!("{}{s}", crate::usage::PROBES), *r),
                    ]
                })
                .collect(),
        };
        let (_, mut all) = self.read(&want, now).await?;
        Ok(split_probes(&mut all))
    }

    /// Count the probes' part of one probe already counted in the shared
    /// windows (by [`SharedState::admit_limits`]): the same windows, under
    /// scopes prefixed [`crate::usage::PROBES`].
    pub async fn count_probe_part(
        &self,
        target: &Target,
        limits: &EffectiveLimits,
        tokens: u64,
        now: DateTime<Utc>,
    ) -> Shared<()> {
        self.count_windows(target, limits, tokens, now, crate::usage::PROBES)
            .await
    }

    /// Count one request in every window of `target`'s scopes (each
    /// prefixed `prefix`), whatever the limits say: for a probe already
    /// sent.
    async fn count_windows(
        &self,
        target: &Target,
        limits: &EffectiveLimits,
        tokens: u64,
        now: DateTime<Utc>,
        prefix: &str,
    ) -> Shared<()> {
        let second = ms(second_of(now));
        let mut p = redis::pipe();
        p.atomic();
        for (s, resets_at) in Self::scopes(target, limits, now) {
            let scope = format!("{prefix}{s}");
            let (mk, dk) = (minute_key(&scope), day_key(&scope, resets_at));
            p.hincr(&mk, format!("r:{second}"), 1)
                .ignore()
                .hincr(&mk, format!("t:{second}"), tokens)
                .ignore()
                .pexpire(&mk, MINUTE_TTL_MS)
                .ignore()
                .hincr(&dk, "r", 1)
                .ignore()
                .hincr(&dk, "t", tokens)
                .ignore()
                .pexpire(&dk, (resets_at - now).num_milliseconds().max(1000))
                .ignore();
        }
        let mut c = self.manager.clone();
        self.call(p.query_async::<()>(&mut c)).await
    }
}

/// Move the probes' windows (scopes prefixed [`crate::usage::PROBES`]) out
/// of `all` into a ledger of their own, under their plain scope: `(all,
/// probes)`.
pub fn split_probes(all: &mut LimitLedger) -> (LimitLedger, LimitLedger) {
    let mut probes = LimitLedger::default();
    let keys: Vec<String> = all
        .windows
        .keys()
        .filter(|k| k.starts_with(crate::usage::PROBES))
        .cloned()
        .collect();
    for k in keys {
        if let Some(w) = all.windows.remove(&k) {
            probes
                .windows
                .insert(k[crate::usage::PROBES.len()..].to_string(), w);
        }
    }
    (std::mem::take(all), probes)
}

/// Route's traffic evidence from Redis, for a command that runs no
/// runtime of its own (`check --shared-state`, `brief` with `[check]
/// shared_state`): every instance's, for `keys`. Redis away costs the
/// evidence (`who` leaves it out, with a warning), never the command.
pub fn traffic_blocking(url: &str, keys: &[String], who: &str) -> Option<crate::usage::Traffic> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    let read = rt.block_on(async {
        let shared = SharedState::connect(url).await.ok()?;
        shared.traffic_of(keys).await.ok()
    });
    if read.is_none() {
        eprintln!(
            "warning: the shared state could not be read; {who} leaves route's traffic in Redis out"
        );
    }
    read
}

/// `check --shared-state`'s side of the shared ledger: connected on first
/// use, on the runtime that uses it; a store that cannot be reached
/// answers `None` and counts nothing (with one warning).
pub struct CheckUsage {
    url: String,
    state: tokio::sync::OnceCell<Option<Arc<SharedState>>>,
    /// A probe could not be counted (said once).
    warned: AtomicBool,
}

impl CheckUsage {
    pub fn new(url: &str) -> CheckUsage {
        CheckUsage {
            url: url.to_string(),
            state: tokio::sync::OnceCell::new(),
            warned: AtomicBool::new(false),
        }
    }

    async fn shared(&self) -> Option<&Arc<SharedState>> {
        self.state
            .get_or_init(|| async {
                match SharedState::connect(&self.url).await {
                    Ok(s) => Some(s),
                    Err(e) => {
                        eprintln!("warning: {e}; this run's probes are counted in stats/probe_usage.json only");
                        None
                    }
                }
            })
            .await
            .as_ref()
    }
}

impl crate::usage::SharedUsage for CheckUsage {
    fn read<'a>(
        &'a self,
        target: &'a Target,
        limits: &'a EffectiveLimits,
        now: DateTime<Utc>,
    ) -> crate::usage::Pending<'a, Option<(LimitLedger, LimitLedger)>> {
        Box::pin(async move {
            self.shared()
                .await?
                .usage_of(target, limits, now)
                .await
                .ok()
        })
    }

    fn count_probe<'a>(
        &'a self,
        target: &'a Target,
        limits: &'a EffectiveLimits,
        tokens: u64,
        now: DateTime<Utc>,
    ) -> crate::usage::Pending<'a, ()> {
        Box::pin(async move {
            let Some(s) = self.shared().await else {
                return;
            };
            let req = LimitRequest {
                target,
                limits,
                tokens,
            };
            // Counted where route counts (the probe's budget was checked
            // against these very counts), and its part as a probe beside.
            // Another instance may have filled a window meanwhile: the
            // probe is sent, so it is counted all the same.
            let counted = match s.admit_limits(&req, now).await {
                Ok(Admit::Counted(_)) => Ok(()),
                Ok(_) => s.count_windows(target, limits, tokens, now, "").await,
                Err(e) => Err(e),
            };
            let part = s.count_probe_part(target, limits, tokens, now).await;
            if (counted.is_err() || part.is_err()) && !self.warned.swap(true, Ordering::Relaxed) {
                eprintln!(
                    "warning: the shared state could not count a probe; the routers will not see it (it is in stats/probe_usage.json)"
                );
            }
        })
    }
}

/// A hash's fields; nothing for a key that is not there.
fn hash(v: redis::Value) -> HashMap<String, String> {
    redis::from_redis_value(v).unwrap_or_default()
}

/// A minute hash (`r:<second ms>`, `t:<second ms>`) as entries, oldest
/// first.
fn minute_entries(fields: HashMap<String, String>) -> VecDeque<MinuteEntry> {
    let mut by_second: BTreeMap<i64, MinuteEntry> = BTreeMap::new();
    for (f, v) in fields {
        let (Some((which, at)), Ok(n)) = (f.split_once(':'), v.parse::<i64>()) else {
            continue;
        };
        let Ok(at) = at.parse::<i64>() else { continue };
        let e = by_second.entry(at).or_insert_with(|| MinuteEntry {
            at: from_ms(at),
            requests: 0,
            tokens: 0,
        });
        let n = n.max(0) as u64;
        match which {
            "r" => e.requests = n,
            "t" => e.tokens = n,
            _ => {}
        }
    }
    by_second.into_values().collect()
}

/// A learned bucket as stored (and read by `ADMIT`):
/// `kind|limit|remaining|reset ms`, any of the last three empty.
fn learned_value(l: &Learned) -> String {
    fn opt<T: ToString>(v: Option<T>) -> String {
        v.map(|n| n.to_string()).unwrap_or_default()
    }
    format!(
        "{}|{}|{}|{}",
        l.kind.as_str(),
        opt(l.limit),
        opt(l.remaining),
        opt(l.reset_at.map(ms)),
    )
}

/// [`learned_value`] read back.
fn parse_learned(v: &str, now: DateTime<Utc>) -> Option<Learned> {
    let mut f = v.split('|');
    let kind = kind_of(f.next()?);
    let mut num = || f.next().and_then(|s| s.parse::<i64>().ok());
    let (limit, remaining, reset) = (num(), num(), num());
    Some(Learned {
        kind,
        limit: limit.map(|n| n.max(0) as u64),
        remaining: remaining.map(|n| n.max(0) as u64),
        reset_at: reset.map(from_ms),
        // Not stored: the key's TTL is what forgets it.
        learned_at: now,
    })
}

fn parse_bench(v: &str) -> Option<Bench> {
    let (_, json) = v.split_once('|')?;
    serde_json::from_str(json).ok()
}

fn int(v: &redis::Value) -> i64 {
    match v {
        redis::Value::Int(n) => *n,
        redis::Value::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0),
        _ => 0,
    }
}

fn text(v: &redis::Value) -> String {
    match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        other => format!("{other:?}"),
    }
}

fn parse_admit(v: redis::Value, scopes: &[String], resets_at: DateTime<Utc>, tokens: u64) -> Admit {
    let items = match v {
        redis::Value::Array(items) => items,
        _ => Vec::new(),
    };
    let scope = |i: i64| {
        scopes
            .get((i.max(1) - 1) as usize)
            .cloned()
            .unwrap_or_default()
    };
    match items.first().map(int) {
        Some(2) => {
            if let Some(b) = items
                .get(1)
                .map(text)
                .and_then(|s| serde_json::from_str::<Bench>(&s).ok())
            {
                return Admit::Benched(b);
            }
            Admit::Counted(Reservation::shared(
                Utc::now(),
                resets_at,
                Vec::new(),
                tokens,
            ))
        }
        Some(1) => Admit::Limited(LimitHit {
            kind: kind_of(&items.get(1).map(text).unwrap_or_default()),
            scope: scope(items.get(2).map(int).unwrap_or(1)),
            until: from_ms(items.get(3).map(int).unwrap_or(0)),
        }),
        _ => {
            let second = from_ms(items.get(1).map(int).unwrap_or(0));
            let counted = items.iter().skip(2).map(|v| scope(int(v))).collect();
            Admit::Counted(Reservation::shared(second, resets_at, counted, tokens))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learned_buckets_read_back_as_written() {
        let now = from_ms(1_777_000_000_000);
        let full = Learned {
            kind: LimitKind::Rpd,
            limit: Some(1000),
            remaining: Some(0),
            reset_at: Some(from_ms(1_777_000_179_560)),
            learned_at: now,
        };
        let v = learned_value(&full);
        assert_eq!(v, "rpd|1000|0|1777000179560");
        assert_eq!(parse_learned(&v, now), Some(full));
        let sparse = Learned {
            kind: LimitKind::Tpm,
            limit: None,
            remaining: Some(7),
            reset_at: None,
            learned_at: now,
        };
        assert_eq!(learned_value(&sparse), "tpm||7|");
        assert_eq!(parse_learned(&learned_value(&sparse), now), Some(sparse));
    }

    #[test]
    fn a_minute_hash_reads_as_entries_oldest_first() {
        let fields = [
            ("r:2000", "2"),
            ("t:2000", "70"),
            ("t:1000", "5"),
            ("r:1000", "1"),
        ]
        .map(|(f, v)| (f.to_string(), v.to_string()))
        .into_iter()
        .chain([("junk".to_string(), "1".to_string())])
        .collect();
        let got = minute_entries(fields);
        assert_eq!(
            got.iter()
                .map(|e| (ms(e.at), e.requests, e.tokens))
                .collect::<Vec<_>>(),
            [(1000, 1, 5), (2000, 2, 70)]
        );
    }
}
