//! `llmprobe fake-provider` (hidden): the command glue around
//! [`crate::fake`]. The flags are validated into a [`FakeConfig`] here, so
//! that the fake itself knows nothing of clap and tests build its config
//! directly.

use std::io::Write;
use std::time::Duration;

use crate::cli::{FakeArgs, GlobalArgs};
use crate::error::{Error, Result};
use crate::fake::{FakeConfig, parse_list_script, parse_script, start};
use crate::http_server;
use crate::prompts::Pool;

/// Validate the `fake-provider` flags.
pub fn config(g: &GlobalArgs, a: &FakeArgs) -> Result<FakeConfig> {
    let pool = match &g.prompts {
        Some(p) => Pool::load(p)?,
        None => Pool::embedded(),
    };
    let mut cfg = FakeConfig::new(pool);
    cfg.port = a.port;
    cfg.latency = Duration::from_millis(a.latency_ms);
    cfg.record = a.record.clone();
    cfg.record_closes = a.record_closes.clone();
    cfg.hold_until = a.hold_until.clone();
    cfg.models_file = a.models_file.clone();
    cfg.list_scripts = a
        .list_behaviours
        .iter()
        .map(|s| parse_list_script(s))
        .collect::<Result<_>>()?;
    for s in &a.scripts {
        let (model, behaviours) = parse_script(s)?;
        if cfg.scripts.insert(model.clone(), behaviours).is_some() {
            return Err(Error::config(format!(
                "--script {s:?}: model {model:?} is already scripted; list all its \
                 behaviours in one --script"
            )));
        }
    }
    Ok(cfg)
}

/// Serve until SIGTERM or SIGINT.
pub fn run(g: &GlobalArgs, args: FakeArgs) -> Result<u8> {
    let cfg = config(g, &args)?;
    let rt = http_server::runtime(2)?;
    rt.block_on(async {
        let server = start(cfg).await?;
        let url = server.url();
        if let Some(path) = &args.addr_file {
            crate::fsutil::atomic_write_unlocked(path, url.as_bytes())?;
        }
        {
            let mut out = std::io::stdout().lock();
            writeln!(out, "listening on {url}")
                .and_then(|()| out.flush())
                .map_err(Error::Stdout)?;
        }
        http_server::wait_for_signal().await?;
        server.shutdown().await;
        Ok(crate::exit::SUCCESS)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::Behaviour;

    #[test]
    fn flags_are_validated() {
        let g = GlobalArgs {
            config: None,
            stats_dir: None,
            prompts: None,
            wide: false,
        };
        let args = |scripts: &[&str]| FakeArgs {
            port: 0,
            addr_file: None,
            record: None,
            record_closes: None,
            scripts: scripts.iter().map(|s| s.to_string()).collect(),
            latency_ms: 25,
            hold_until: None,
            models_file: None,
            list_behaviours: Vec::new(),
        };
        let cfg = config(&g, &args(&["a=ok,e500", "b=slow:10"])).unwrap();
        assert_eq!(
            cfg.scripts["a"],
            [Behaviour::Ok(Duration::ZERO), Behaviour::E500]
        );
        assert_eq!(cfg.latency, Duration::from_millis(25));
        let e = config(&g, &args(&["a=bogus"])).unwrap_err();
        assert_eq!(e.exit_code(), crate::exit::USAGE);
        assert!(e.to_string().contains("--script \"a=bogus\""), "{e}");
        let e = config(&g, &args(&["a=ok", "a=e500"])).unwrap_err();
        assert_eq!(e.exit_code(), crate::exit::USAGE);
        let lists = |values: &[&str]| FakeArgs {
            models_file: Some("models.json".into()),
            list_behaviours: values.iter().map(|s| s.to_string()).collect(),
            ..args(&[])
        };
        let cfg = config(&g, &lists(&["groq=e500,ok", "unauthorized"])).unwrap();
        assert_eq!(
            cfg.models_file.as_deref(),
            Some(std::path::Path::new("models.json"))
        );
        assert_eq!(cfg.list_scripts.len(), 2);
        assert_eq!(cfg.list_scripts[0].scope.as_deref(), Some("groq"));
        let e = config(&g, &lists(&["think"])).unwrap_err();
        assert_eq!(e.exit_code(), crate::exit::USAGE);
        assert!(e.to_string().contains("--list-behaviour \"think\""), "{e}");
        let bad_pool = GlobalArgs {
            prompts: Some("/nonexistent/pool.toml".into()),
            ..g
        };
        let e = config(&bad_pool, &args(&[])).unwrap_err();
        assert_eq!(e.exit_code(), crate::exit::USAGE);
    }
}
