//! Serving HTTP, for every server llmprobe runs (the fake provider, and
//! `route --serve`): bind, serve an axum router in the background with a
//! graceful shutdown, wait for SIGTERM or Ctrl-C, and build the one tokio
//! runtime a command uses.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
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
    let (stop, stopping) = watch::channel(false);
    let (drained_tx, mut drained) = watch::channel(false);
    let listener = Draining {
        inner: Some(listener),
        queued: std::collections::VecDeque::new(),
        addr,
        stop: stopping.clone(),
        drained: drained_tx,
        unread: Arc::new(AtomicUsize::new(0)),
    };
    let task = tokio::spawn(async move {
        // axum stops accepting once the backlog is drained (see `Draining`),
        // then lets open connections finish.
        let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
            let _ = drained.wait_for(|d| *d).await;
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

/// The listener of [`start`]. At shutdown it takes every connection the
/// kernel has already accepted into the listen backlog (the clients
/// connected, and may have sent their requests), closes the socket, hands
/// those connections on to be served, waits (at most [`FIRST_READ_WAIT`])
/// until every connection it handed on has had its first bytes read, and
/// only then says it is drained.
///
/// Both waits keep requests from being dropped unanswered: dropping a
/// listener resets the connections still queued, and the server's graceful
/// shutdown drops a connection whose first bytes (which tell HTTP/1 from
/// HTTP/2) have not been read yet, so a client that connected just before a
/// SIGTERM got a reset instead of an answer. After the close a new client
/// is refused, which it can retry; only a connection completed between the
/// last `accept` and the close (microseconds) can still be reset, and one
/// that sends nothing within the wait is closed unanswered.
struct Draining {
    inner: Option<tokio::net::TcpListener>,
    queued: std::collections::VecDeque<(tokio::net::TcpStream, SocketAddr)>,
    addr: SocketAddr,
    stop: watch::Receiver<bool>,
    drained: watch::Sender<bool>,
    /// Connections handed on whose first read has not happened yet.
    unread: Arc<AtomicUsize>,
}

/// How long a shutdown waits for the connections it accepted to send their
/// first bytes.
const FIRST_READ_WAIT: Duration = Duration::from_secs(1);

impl Draining {
    /// Accept what waits in the backlog, without waiting, then close.
    fn drain(&mut self) {
        let Some(listener) = self.inner.take() else {
            return;
        };
        // Accept by system call now: tokio's readiness may not have seen
        // the queued connections yet.
        if let Ok(std) = listener.into_std() {
            let _ = std.set_nonblocking(true);
            while let Ok((tcp, peer)) = std.accept() {
                if tcp.set_nonblocking(true).is_ok()
                    && let Ok(tcp) = tokio::net::TcpStream::from_std(tcp)
                {
                    self.queued.push_back((tcp, peer));
                }
            }
            // `std` is dropped here: the socket closes, new clients are refused.
        }
    }

    fn hand_on(&self, tcp: tokio::net::TcpStream, peer: SocketAddr) -> (Conn, SocketAddr) {
        // Answers go out at once: no Nagle delay behind a client's delayed ACK.
        let _ = tcp.set_nodelay(true);
        self.unread.fetch_add(1, Ordering::SeqCst);
        (
            Conn {
                tcp,
                unread: Some(self.unread.clone()),
            },
            peer,
        )
    }
}

impl axum::serve::Listener for Draining {
    type Io = Conn;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        enum Next {
            Stop,
            Conn(std::io::Result<(tokio::net::TcpStream, SocketAddr)>),
        }
        loop {
            if let Some((tcp, peer)) = self.queued.pop_front() {
                return self.hand_on(tcp, peer);
            }
            let Some(listener) = &self.inner else {
                let waited = tokio::time::Instant::now();
                while self.unread.load(Ordering::SeqCst) > 0 && waited.elapsed() < FIRST_READ_WAIT {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                let _ = self.drained.send(true);
                return std::future::pending().await;
            };
            let next = tokio::select! {
                biased;
                _ = self.stop.wait_for(|stop| *stop) => Next::Stop,
                r = listener.accept() => Next::Conn(r),
            };
            match next {
                Next::Stop => self.drain(),
                Next::Conn(Ok((tcp, peer))) => return self.hand_on(tcp, peer),
                // As axum's own listener does: a failed connection is
                // the client's; anything else (out of file descriptors)
                // is waited out a little.
                Next::Conn(Err(e)) => {
                    if !matches!(
                        e.kind(),
                        std::io::ErrorKind::ConnectionRefused
                            | std::io::ErrorKind::ConnectionAborted
                            | std::io::ErrorKind::ConnectionReset
                    ) {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.addr)
    }
}

/// A served connection: a TCP stream that counts as unread (see
/// [`Draining`]) until its first read completes or it is dropped.
pub struct Conn {
    tcp: tokio::net::TcpStream,
    unread: Option<Arc<AtomicUsize>>,
}

impl Conn {
    fn read_once(&mut self) {
        if let Some(u) = self.unread.take() {
            u.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.read_once();
    }
}

impl tokio::io::AsyncRead for Conn {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let r = std::pin::Pin::new(&mut self.tcp).poll_read(cx, buf);
        if r.is_ready() {
            self.read_once();
        }
        r
    }
}

impl tokio::io::AsyncWrite for Conn {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.tcp).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }
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
