//! Providers' own model lists through the real binary, over loopback
//! fakes (docs/discovery.md): `llmprobe models` in every dialect,
//! `--write`, discovery on probation, retirement, and lists that fail.

use serde_json::Value;

use crate::support::*;

/// A fake whose lists carry `models` (the fake's models file, re-read on
/// every request), with `flags` more.
fn lists_fake(env: &Env, models: &Value, flags: &[&str]) -> Fake {
    let file = env.write("models.json", models.to_string());
    let mut all = vec!["--models-file", file.to_str().unwrap()];
    all.extend_from_slice(flags);
    Fake::start_with(env, &[], &all)
}

fn read_json(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn states(env: &Env) -> Value {
    serde_json::from_str(&std::fs::read_to_string(env.state_file()).unwrap_or_else(|_| "{}".into()))
        .unwrap()
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|x| match x {
            Value::String(s) => s.clone(),
            other => other["id"].as_str().unwrap().to_string(),
        })
        .collect()
}

#[test]
fn models_shows_new_gone_and_listed_in_every_dialect() {
    let env = Env::new();
    let fake = lists_fake(
        &env,
        &serde_json::json!([
            {"id": "ok"},
            {"id": "fresh:free", "context": 131072, "tools": true},
            {"id": "zero", "free": true},
            {"id": "paid", "free": false},
        ]),
        &[],
    );
    let at = |prefix: &str| format!("{}{prefix}", fake.url);
    let cfg = config(
        &env,
        &[
            provider_toml("oa", "openai", &at("/v1"), &["ok", "old"], ""),
            provider_toml("or", "openai", &at("/openrouter/v1"), &["ok", "old"], ""),
            provider_toml("mi", "openai", &at("/mistral/v1"), &["ok", "old"], ""),
            provider_toml("to", "openai", &at("/together/v1"), &["ok", "old"], ""),
            provider_toml("an", "anthropic", &at("/v1"), &["ok", "old"], ""),
            provider_toml("ge", "gemini", &at("/v1beta"), &["ok", "old"], ""),
        ],
    );
    let r = env.run(&["--config", &cfg, "models", "--json"]).ok();
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    let providers = v["providers"].as_array().unwrap();
    assert_eq!(providers.len(), 6, "{v}");
    for p in providers {
        let name = p["provider"].as_str().unwrap();
        assert_eq!(strs(&p["listed"]), ["ok"], "{name}: {p}");
        assert_eq!(strs(&p["gone"]), ["old"], "{name}: {p}");
        let new = strs(&p["new"]);
        for m in ["fresh:free", "zero", "paid"] {
            assert!(new.contains(&m.to_string()), "{name}: {m} in {new:?}");
        }
        assert_eq!(p["fetched_now"], true, "{name}");
    }
    // Free is read from the list itself: OpenRouter's prices, an id's
    // `:free`; never from the provider's name.
    let or = providers.iter().find(|p| p["provider"] == "or").unwrap();
    let by_id = |p: &Value, id: &str| -> Value {
        p["new"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == id)
            .cloned()
            .unwrap()
    };
    assert_eq!(by_id(or, "zero")["free"], true);
    assert_eq!(by_id(or, "paid")["free"], false);
    assert_eq!(by_id(or, "fresh:free")["context_window"], 131072);
    let oa = providers.iter().find(|p| p["provider"] == "oa").unwrap();
    assert_eq!(
        by_id(oa, "fresh:free")["free"],
        true,
        "an id ending in :free"
    );
    assert!(
        by_id(oa, "zero").get("free").is_none(),
        "plain OpenAI gives no price"
    );
    // Every page was followed: Anthropic and Gemini page at 2.
    let seen = fake.lists_seen();
    let pages = |d: &str| {
        seen.iter()
            .filter(|s| s.dialect.as_deref() == Some(d))
            .count()
    };
    assert!(pages("anthropic") >= 2, "{seen:?}");
    assert!(pages("gemini") >= 2, "{seen:?}");
    // A second run reads the cache: no request.
    let before = fake.seen().len();
    let r = env.run(&["--config", &cfg, "models", "--gone"]).ok();
    assert_eq!(
        fake.seen().len(),
        before,
        "a fresh cache is not fetched again"
    );
    assert!(r.stdout.contains("gone?   old"), "{}", r.stdout);
    assert!(
        !r.stdout.contains("listed  ok"),
        "--gone shows gone only: {}",
        r.stdout
    );
    assert!(
        r.stdout.lines().all(|l| l.chars().count() <= 80),
        "{}",
        r.stdout
    );
    // Each fetch is in the ledger, as probes are.
    let usage = read_json(&env.stats().join("probe_usage.json"));
    assert!(
        usage["spent"]["an"]["requests"].as_u64().unwrap() >= 2,
        "{usage}"
    );
    assert_eq!(usage["spent"]["oa"]["requests"], 1, "{usage}");
}

#[test]
fn a_list_that_fails_never_makes_a_model_look_gone_or_retired() {
    for behaviour in ["unauthorized", "html200", "reset", "not-found"] {
        let env = Env::new();
        let fake = lists_fake(
            &env,
            &serde_json::json!([{"id": "ok"}, {"id": "gone", "listed": false, "behaviour": "decommissioned"}]),
            &["--list-behaviour", behaviour],
        );
        let cfg = config(&env, &[fake.provider("p", "openai", &["ok", "gone"], "")]);
        let r = env.run(&["--config", &cfg, "models", "--json"]).code(1);
        let v: Value = serde_json::from_str(&r.stdout).unwrap();
        let p = &v["providers"][0];
        assert!(p.get("gone").is_none(), "{behaviour}: {v}");
        assert!(p["error"]["why"].as_str().is_some(), "{behaviour}: {v}");
        // The probe says "not found", but no list confirms it: today's rule.
        check(&env, &cfg, &[]).ok();
        let s = states(&env);
        assert_eq!(s["p::gone"]["state"], "active", "{behaviour}: {s}");
        assert_eq!(s["p::gone"]["consecutive_failures"], 1, "{behaviour}: {s}");
        assert!(s["p::gone"].get("missing_since").is_none(), "{behaviour}");
    }
}

#[test]
fn a_model_the_list_dropped_is_retired_after_one_run_and_unlisted_if_it_answers() {
    let env = Env::new();
    let models = |gone_listed: bool| {
        serde_json::json!([
            {"id": "ok"},
            {"id": "quiet", "listed": false},
            {"id": "gone", "listed": gone_listed, "behaviour": if gone_listed { "ok" } else { "decommissioned" }},
        ])
    };
    let fake = lists_fake(&env, &models(true), &[]);
    let cfg = config(
        &env,
        &[fake.provider("p", "openai", &["ok", "quiet", "gone"], "")],
    );
    check(&env, &cfg, &[]).ok();
    assert_eq!(states(&env).get("p::gone"), None, "listed and answering");
    // The provider drops it from its list and answers it "decommissioned".
    env.write("models.json", models(false).to_string());
    env.run(&["--config", &cfg, "models", "--refresh"]).ok();
    let r = check(&env, &cfg, &[]).ok();
    assert!(
        r.stdout.contains("active → disabled (retired)"),
        "{}",
        r.stdout
    );
    let s = states(&env);
    assert_eq!(s["p::gone"]["state"], "disabled", "{s}");
    assert_eq!(s["p::gone"]["reason"], "retired", "{s}");
    assert!(s["p::gone"]["missing_since"].as_str().is_some(), "{s}");
    // Unlisted but answering: kept, and marked.
    assert_eq!(s.get("p::quiet"), None, "{s}");
    let r = env.run(&["--config", &cfg, "state", "--json"]).ok();
    let rows: Value = serde_json::from_str(&r.stdout).unwrap();
    let row = |k: &str| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["model"] == k)
            .cloned()
            .unwrap()
    };
    assert_eq!(row("p::quiet")["listing"], "unlisted", "{rows}");
    assert_eq!(row("p::gone")["listing"], "retired", "{rows}");
    // brief shows it apart from models disabled for failing.
    let r = env.run(&["--config", &cfg, "brief"]).ok();
    assert!(
        r.stdout.contains("retired by their providers (1 model"),
        "{}",
        r.stdout
    );
    let r = env
        .run(&["--config", &cfg, "rollup", "--format", "html"])
        .ok();
    assert!(
        r.stdout
            .contains("retired by the provider (unlisted since 20"),
        "the status page shows it apart"
    );
    // Enabling it warns; the next fresh list still lacks it, and it is
    // retired again.
    let r = env
        .run(&["--config", &cfg, "state", "enable", "p::gone"])
        .ok();
    assert!(r.stderr.contains("was retired"), "{}", r.stderr);
    check(&env, &cfg, &[]).ok();
    assert_eq!(states(&env)["p::gone"]["reason"], "retired");
}

#[test]
fn discovery_probes_a_few_free_models_a_run_and_route_waits_for_a_pass() {
    let env = Env::new();
    let fake = lists_fake(
        &env,
        &serde_json::json!([
            {"id": "ok"},
            {"id": "a:free"}, {"id": "b:free"}, {"id": "c:free", "behaviour": "not-found"},
            {"id": "paid", "free": false},
        ]),
        &[],
    );
    let at = format!("{}/openrouter/v1", fake.url);
    let cfg = config(
        &env,
        &[provider_toml(
            "or",
            "openai",
            &at,
            &["ok"],
            "discover = \"free\"\ndiscover_per_run = 2",
        )],
    );
    let chats = |f: &Fake| -> Vec<String> {
        f.seen()
            .into_iter()
            .filter(|s| s.path.ends_with("/chat/completions"))
            .map(|s| s.model().to_string())
            .collect()
    };
    let r = check(&env, &cfg, &[]).ok();
    assert!(
        r.stderr.contains("or: 3 new free models listed"),
        "{}",
        r.stderr
    );
    let first: Vec<String> = chats(&fake);
    assert_eq!(
        first.iter().filter(|m| m.ends_with(":free")).count(),
        2,
        "{first:?}"
    );
    assert!(
        !first.iter().any(|m| m == "paid"),
        "a paid model is never probed under free"
    );
    // Route sends nothing to a model on probation.
    let r = env.run(&["--config", &cfg, "state", "--json"]).ok();
    assert!(r.stdout.contains("\"listing\": \"new\""), "{}", r.stdout);
    env.run(&[
        "--config",
        &cfg,
        "route",
        "--model",
        "or::c:free",
        "What is 2 + 2?",
    ])
    .code(2);
    // The second run probes the last one; its hard failure drops it.
    check(&env, &cfg, &[]).ok();
    let all = chats(&fake);
    assert_eq!(all.iter().filter(|m| *m == "c:free").count(), 1, "{all:?}");
    assert!(!all.iter().any(|m| m == "paid"));
    let lists = read_json(&env.stats().join("model_lists.json"));
    assert_eq!(
        lists["discovered"]["or::c:free"]["status"], "dropped",
        "{lists}"
    );
    assert_eq!(
        lists["discovered"]["or::a:free"]["status"], "passed",
        "{lists}"
    );
    // A third run probes c:free no more.
    check(&env, &cfg, &[]).ok();
    assert_eq!(chats(&fake).iter().filter(|m| *m == "c:free").count(), 1);
    // The passed ones are route's candidates now.
    let r = env
        .run(&[
            "--config",
            &cfg,
            "route",
            "--model",
            "or::a:free",
            "What is 2 + 2?",
        ])
        .ok();
    assert!(r.stdout.trim() == "4", "{}", r.stdout);
}

#[test]
fn discovery_is_off_unless_asked() {
    let env = Env::new();
    let fake = lists_fake(
        &env,
        &serde_json::json!([{"id": "ok"}, {"id": "x:free"}]),
        &[],
    );
    let cfg = config(&env, &[fake.provider("p", "openai", &["ok"], "")]);
    check(&env, &cfg, &[]).ok();
    assert!(!fake.seen().iter().any(|s| s.model() == "x:free"));
}

#[test]
fn write_adds_models_keeping_comments_and_refuses_a_broken_file() {
    let mut env = Env::new();
    let fake = lists_fake(
        &env,
        &serde_json::json!([{"id": "ok"}, {"id": "n1:free"}, {"id": "n2"}]),
        &[],
    );
    env.env("GROQ_API_KEY", "test-key-not-real");
    let text = format!(
        "# my config\n[defaults]\nspacing_secs = 0 # fast\n\n# groq through the fake\n[[providers]]\nname = \"groq\"\nbase_url = \"{}/v1\"\n",
        fake.url
    );
    let cfg = env.write("llmprobe.toml", &text);
    let cfg = cfg.to_str().unwrap();
    let r = env
        .run(&[
            "--config",
            cfg,
            "models",
            "--provider",
            "groq",
            "--write",
            "--add",
            "groq::n2",
        ])
        .ok();
    assert!(
        r.stdout.contains("groq: added n2 to models_add"),
        "{}",
        r.stdout
    );
    let after = std::fs::read_to_string(cfg).unwrap();
    assert!(after.starts_with(&text), "only added lines:\n{after}");
    assert!(after.contains("models_add = [\"n2\"]"), "{after}");
    assert_eq!(std::fs::read_to_string(format!("{cfg}.bak")).unwrap(), text);
    // The embedded models stay, and n2 joins them.
    let r = env.run(&["--config", cfg, "providers", "--json"]).ok();
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    let groq = v["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["provider"] == "groq")
        .unwrap();
    let models = strs(&groq["models"]);
    assert!(
        models.len() > 1 && models.last().unwrap() == "n2",
        "{models:?}"
    );
    // --add-new-free takes the free ones only.
    env.run(&[
        "--config",
        cfg,
        "models",
        "--write",
        "--add-new-free",
        "groq",
    ])
    .ok();
    let after = std::fs::read_to_string(cfg).unwrap();
    assert!(after.contains("\"n1:free\""), "{after}");
    // A file that cannot be parsed is refused and left byte for byte.
    let broken = format!("{after}\n[[providers]\nname = \"x\"\n");
    std::fs::write(cfg, &broken).unwrap();
    std::fs::remove_file(format!("{cfg}.bak")).unwrap();
    env.run(&["--config", cfg, "models", "--write", "--add", "groq::n2"])
        .code(2);
    assert_eq!(std::fs::read_to_string(cfg).unwrap(), broken);
    assert!(!std::path::Path::new(&format!("{cfg}.bak")).exists());
}

#[test]
fn models_offline_is_exit_6_and_writes_nothing() {
    let mut env = Env::new();
    let dead = closed_port();
    env.env("HTTP_PROXY", &dead).env("HTTPS_PROXY", &dead);
    let cfg = config(
        &env,
        &[provider_toml(
            "far",
            "openai",
            "https://far.example/v1",
            &["m"],
            "",
        )],
    );
    let r = env.run(&["--config", &cfg, "models"]).code(6);
    assert!(r.stderr.contains("offline"), "{}", r.stderr);
    assert!(!env.stats().join("model_lists.json").exists());
    assert!(!env.stats().join("probe_usage.json").exists());
}

#[test]
fn brief_names_a_deprecated_model_in_use_and_its_successor() {
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let cfg = config(
        &env,
        &[fake.provider(
            "p",
            "openai",
            &["old", "new", "later"],
            "[providers.model_info]\n\"old\" = { deprecated = \"2020-01-01\", successor = \"new\" }\n\"later\" = { deprecated = \"2999-01-01\" }",
        )],
    );
    check(&env, &cfg, &[]).ok();
    let r = env.run(&["--config", &cfg, "brief"]).ok();
    assert!(
        r.stdout
            .contains("deprecated: p::old since 2020-01-01; its successor is p::new"),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("deprecated: p::later"), "{}", r.stdout);
}
