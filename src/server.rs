//! Serving HTTP, for every server llmprobe runs (the fake provider, and
//! `route --serve`): bind, serve an axum router in the background with a
//! graceful shutdown, wait for SIGTERM or Ctrl-C, and build the one tokio
//! runtime a command uses.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use tokio::sync::watch;

use crate::error::{Error, Result};

/// The async runtime of a command. Every command that needs one builds it
/// An address to listen on, as a person writes it: `127.0.0.1:8080`,
/// `[::1]:8080`, or a host name and port such as `localhost:8080`, resolved
/// here (a loopback address first, IPv4 before IPv6), so that what is bound
/// is one address that can be said.
pub fn parse_listen(s: &str) -> std::result::Result<SocketAddr, String> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    let Some((host, port)) = s.rsplit_once(':') else {
        return Err(format!(
            "{s:?} is not an address: write HOST:PORT, such as 127.0.0.1:8080 or localhost:8080"
        ));
    };
    let port: u16 = port
        .parse()
        .map_err(|_| format!("{s:?}: {port:?} is not a port number (0 to 65535)"))?;
    let found: Vec<SocketAddr> = std::net::ToSocketAddrs::to_socket_addrs(&(host, port))
        .map_err(|e| format!("{s:?}: cannot resolve {host:?} ({e})"))?
        .collect();
    found
        .iter()
        .find(|a| a.ip().is_loopback() && a.is_ipv4())
        .or_else(|| found.iter().find(|a| a.ip().is_loopback()))
        .or_else(|| found.first())
        .copied()
        .ok_or_else(|| format!("{s:?}: {host:?} resolves to no address"))
}

/// here, so the thread count and drivers are decided in one place.
pub fn runtime(worker_threads: usize) -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(worker_threads.max(1))
        .enable_all()
        .build()
        .map_err(|e| Error::io("cannot start the async runtime", e))
}

/// The runtime of a server that runs everything on the thread that calls
/// `block_on` when it has one core (taskset, a container's CPU limit): a
/// multi-thread runtime's cross-thread wake-ups only cost time there.
pub fn server_runtime(cores: usize) -> Result<tokio::runtime::Runtime> {
    if cores > 1 {
        return runtime(cores);
    }
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::io("cannot start the async runtime", e))
}

/// A server running in the background of the current runtime. Dropping it
/// stops it without waiting.
pub struct Server {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("addr", &self.addr).finish()
    }
}

/// Bind `addr` and serve `app` until [`Server::shutdown`]. `name` prefixes
/// a server error on stderr. The returned receiver turns `true` when the
/// shutdown starts, so handlers can cut long waits short.
pub async fn start(
    addr: SocketAddr,
    app: Router,
    name: &'static str,
) -> Result<(Server, watch::Receiver<bool>)> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Error::io(format!("cannot listen on {addr}"), e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::io("cannot read the bound address", e))?;
    // Answers go out at once: no Nagle delay behind a client's delayed ACK.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let (stop, stopping) = watch::channel(false);
    let mut signal = stopping.clone();
    let task = tokio::spawn(async move {
        let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
            let _ = signal.wait_for(|stop| *stop).await;
        });
        if let Err(e) = serve.await {
            eprintln!("{name}: server error: {e}");
        }
    });
    Ok((
        Server {
            addr,
            stop,
            task: Some(task),
        },
        stopping,
    ))
}

impl Server {
    /// `http://ADDR`, without a trailing slash.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stop accepting, let open requests finish for up to `grace`, then cut
    /// the rest off.
    pub async fn shutdown(mut self, grace: Duration) {
        let _ = self.stop.send(true);
        if let Some(mut task) = self.task.take()
            && tokio::time::timeout(grace, &mut task).await.is_err()
        {
            task.abort();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Wait for SIGTERM or SIGINT (Ctrl-C; only Ctrl-C on Windows).
#[cfg(unix)]
pub async fn wait_for_signal() -> Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term =
        signal(SignalKind::terminate()).map_err(|e| Error::io("cannot listen for SIGTERM", e))?;
    tokio::select! {
        _ = term.recv() => {}
        r = tokio::signal::ctrl_c() => r.map_err(|e| Error::io("cannot listen for SIGINT", e))?,
    }
    Ok(())
}

/// Wait for SIGTERM or SIGINT (Ctrl-C; only Ctrl-C on Windows).
#[cfg(not(unix))]
pub async fn wait_for_signal() -> Result<()> {
    tokio::signal::ctrl_c()
        .await
        .map_err(|e| Error::io("cannot listen for ctrl-c", e))
}

#[cfg(test)]
mod listen_tests {
    use super::parse_listen;

    #[test]
    fn addresses_and_host_names() {
        assert_eq!(
            parse_listen("127.0.0.1:8080").unwrap().to_string(),
            "127.0.0.1:8080"
        );
        assert_eq!(parse_listen("[::1]:0").unwrap().to_string(), "[::1]:0");
        let l = parse_listen("localhost:9000").unwrap();
        assert!(l.ip().is_loopback() && l.port() == 9000, "{l}");
        assert!(parse_listen("localhost").unwrap_err().contains("HOST:PORT"));
        assert!(
            parse_listen("localhost:http")
                .unwrap_err()
                .contains("not a port")
        );
        assert!(
            parse_listen("no-such-host.invalid:80")
                .unwrap_err()
                .contains("cannot resolve")
        );
    }
}
