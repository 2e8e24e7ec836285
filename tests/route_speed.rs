//! Route ranks by what it measures (docs/routing.md, "Order"): through the
//! real binary against a loopback fake whose models answer at different
//! speeds (`ok:MS`). The speeds are hundreds of milliseconds apart, so
//! which model is faster never depends on the machine; nothing asserts a
//! duration.

use crate::support::{Env, Fake, RouteServer, clock_env, http, route_config};

/// A config with provider `p` serving `models` (one priority), and
/// `[route] order = ORDER`.
fn cfg(env: &Env, fake: &Fake, models: &[&str], order: &str) -> String {
    route_config(
        env,
        &[fake.provider("p", "openai", models, "")],
        &format!("[route]\norder = \"{order}\"\n"),
    )
}

fn via(srv: &RouteServer, model: &str, stream: bool, session: Option<&str>) -> String {
    let mut headers = vec![("content-type", "application/json")];
    if let Some(s) = session {
        headers.push(("x-session-id", s));
    }
    let r = http(
        "POST",
        &format!("{}/v1/chat/completions", srv.url),
        &headers,
        Some(&crate::support::chat_body(model, stream)),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    r.header("x-routed-via").to_string()
}

#[test]
fn balanced_moves_traffic_off_a_slow_model_and_priority_does_not() {
    for (order, want) in [("balanced", "p::fast"), ("priority", "p::slow")] {
        let env = clock_env();
        let fake = Fake::start(&env, &["slow=ok:400", "fast=ok"]);
        // `slow` first in the catalog: the old order always sends there.
        let cfg = cfg(&env, &fake, &["slow", "fast"], order);
        let srv = RouteServer::start(&env, &cfg, &[]);
        // Each request its own conversation: affinity plays no part.
        let served: Vec<String> = (0..8)
            .map(|i| via(&srv, "auto", i % 2 == 0, Some(&format!("c{i}"))))
            .collect();
        // Balanced: `slow` (first, unmeasured), then `fast` (unmeasured, so
        // tried optimistically), then `fast` for good.
        if order == "balanced" {
            assert_eq!(served[..2], ["p::slow", "p::fast"], "{served:?}");
        }
        assert!(served[2..].iter().all(|v| v == want), "{order}: {served:?}");
    }
}

#[test]
fn a_conversation_leaves_its_model_once_it_is_twice_as_slow_as_the_best() {
    for (order, want) in [("balanced", "p::b"), ("priority", "p::a")] {
        let env = clock_env();
        // `a` answers at once, then takes 600 ms every other request;
        // `b` always takes 100 ms.
        let fake = Fake::start(&env, &["a=ok,ok:600", "b=ok:100"]);
        let cfg = cfg(&env, &fake, &["a", "b"], order);
        let srv = RouteServer::start(&env, &cfg, &[]);
        assert_eq!(via(&srv, "auto", false, Some("s")), "p::a");
        // Another conversation measures `b` (balanced: unmeasured, first).
        let other = via(&srv, "auto", false, None);
        assert_eq!(other, if order == "balanced" { "p::b" } else { "p::a" });
        if order == "balanced" {
            // `a` is still the fastest measured: the conversation stays,
            // and this turn takes 600 ms.
            assert_eq!(via(&srv, "auto", false, Some("s")), "p::a");
        }
        // Now `a` (600 ms) is over 2× `b` (100 ms): balanced leaves it;
        // priority never leaves for speed.
        assert_eq!(via(&srv, "auto", false, Some("s")), want, "{order}");
    }
}

#[test]
fn metrics_show_live_ttft_and_total_time_per_model() {
    let env = clock_env();
    let fake = Fake::start(&env, &[]);
    let cfg = cfg(&env, &fake, &["ok"], "balanced");
    let srv = RouteServer::start(&env, &cfg, &[]);
    via(&srv, "p::ok", true, None);
    via(&srv, "p::ok", false, None);
    let text = http("GET", &format!("{}/metrics", srv.url), &[], None).body;
    let count = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{name}_count{{")) && l.contains("model=\"ok\""))
            .and_then(|l| l.rsplit(' ').next())
            .map(str::to_string)
    };
    // One stream: its first event; its end and the whole reply: two totals.
    assert_eq!(
        count("llmprobe_route_ttft_seconds").as_deref(),
        Some("1"),
        "{text}"
    );
    assert_eq!(
        count("llmprobe_route_total_latency_seconds").as_deref(),
        Some("2"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE llmprobe_route_ttft_seconds histogram"),
        "{text}"
    );
}
