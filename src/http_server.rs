//! Serving HTTP, for every server llmprobe runs (the fake provider, and
//! `route --serve`): bind, serve an axum router in the background with a
//! graceful shutdown, wait for SIGTERM or Ctrl-C, and build the one tokio
//! runtime a command uses. `check` listens for the same signals to stop a
//! run early ([`StopSignals`]).

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

/// How a server treats its clients' connections.
#[derive(Debug, Clone, Copy, Default)]
pub struct Serving {
    /// A client has this long to send a request's head; a connection
    /// idle between requests for as long is closed too. `None`: no limit.
    pub header_timeout: Option<Duration>,
}

/// How long the accept loop waits after an error that is not one
/// connection's (out of file descriptors: EMFILE, ENFILE) before trying
/// again: open connections are served meanwhile, and the loop never spins.
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// Such an error is said on stderr at most this often.
pub const ACCEPT_ERROR_REPEAT: Duration = Duration::from_secs(10);

/// Bind `addr` and serve `app` until [`Server::shutdown`]. `name` prefixes
/// a server error on stderr. The returned receiver turns `true` when the
/// shutdown starts, so handlers can cut long waits short.
///
/// Each connection is served by hyper's HTTP/1 server in a task of its
/// own, with [`Serving`]'s timeouts; an accept that fails for want of file
/// descriptors is said on stderr and retried after [`ACCEPT_BACKOFF`].
pub async fn start(
    addr: SocketAddr,
    app: Router,
    name: &'static str,
    serving: Serving,
) -> Result<(Server, watch::Receiver<bool>)> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Error::io(format!("cannot listen on {addr}"), e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::io("cannot read the bound address", e))?;
    let (stop, stopping) = watch::channel(false);
    let mut signal = stopping.clone();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(serving.header_timeout);
    let task = tokio::spawn(async move {
        let graceful = hyper_util::server::graceful::GracefulShutdown::new();
        // Connections whose first read has not happened yet: any, and
        // those taken from the backlog at the stop with a request waiting.
        let unread = Arc::new(AtomicUsize::new(0));
        let waiting = Arc::new(AtomicUsize::new(0));
        let serve = |tcp: tokio::net::TcpStream, count: &Arc<AtomicUsize>| {
            // Answers go out at once: no Nagle delay behind a client's
            // delayed ACK.
            let _ = tcp.set_nodelay(true);
            count.fetch_add(1, Ordering::SeqCst);
            let io = Conn {
                tcp,
                unread: Some(count.clone()),
            };
            let service = hyper_util::service::TowerToHyperService::new(app.clone());
            let conn = http.serve_connection(hyper_util::rt::TokioIo::new(io), service);
            let conn = graceful.watch(conn);
            tokio::spawn(async move {
                // A client that goes away, or stalls past a timeout, ends
                // its connection; nothing to report.
                let _ = conn.await;
            });
        };
        let mut said: Option<std::time::Instant> = None;
        loop {
            let accepted = tokio::select! {
                biased;
                _ = signal.wait_for(|stop| *stop) => break,
                a = listener.accept() => a,
            };
            match accepted {
                Ok((tcp, _)) => serve(tcp, &unread),
                Err(e) if is_connection_error(&e) => {}
                Err(e) => {
                    if said.is_none_or(|t| t.elapsed() >= ACCEPT_ERROR_REPEAT) {
                        eprintln!("{name}: {}", accept_error(&e));
                        said = Some(std::time::Instant::now());
                    }
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            }
        }
        // The clients already in the listen backlog connected before the
        // stop, and may have sent their requests: serve them, then close
        // the socket (a later client is refused, and can retry).
        for (tcp, sent) in drain_backlog(listener) {
            serve(tcp, if sent { &waiting } else { &unread });
        }
        // Graceful shutdown closes a connection whose request it has not
        // begun to read; give each its first read first.
        let waited = tokio::time::Instant::now();
        while (waiting.load(Ordering::SeqCst) > 0 && waited.elapsed() < SENT_READ_WAIT)
            || (unread.load(Ordering::SeqCst) > 0 && waited.elapsed() < FIRST_READ_WAIT)
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        graceful.shutdown().await;
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

/// At a stop, `start` serves the connections the kernel had already
/// accepted into the listen backlog, then waits (at most this long) until
/// every connection it serves has had its first bytes read before the
/// graceful shutdown begins. Both keep requests from being dropped
/// unanswered: dropping a listener resets the connections still queued, and
/// a graceful shutdown closes a connection whose request it has not begun
/// to read, so a client that connected just before a SIGTERM got a reset
/// instead of an answer. A connection taken from the backlog with its
/// request already sent is waited for longer, [`SENT_READ_WAIT`], so a
/// loaded machine does not turn the wait into a reset. Still lost: a
/// connection completed between the last accept and the close
/// (microseconds), the backlog when the process is out of file descriptors
/// at the stop, one that sends nothing within the wait, and an idle
/// keep-alive connection whose next request arrives as the shutdown begins.
const FIRST_READ_WAIT: Duration = Duration::from_secs(1);

/// How long a stop waits for the first read of a connection that had sent
/// its request before the stop (see [`FIRST_READ_WAIT`]); under route's
/// 10 s grace.
const SENT_READ_WAIT: Duration = Duration::from_secs(8);

/// Accept what waits in `listener`'s backlog, without waiting, and close
/// it; each with whether it has already sent bytes. By system call:
/// tokio's readiness may not have seen the queued connections yet.
fn drain_backlog(listener: tokio::net::TcpListener) -> Vec<(tokio::net::TcpStream, bool)> {
    let mut queued = Vec::new();
    if let Ok(std) = listener.into_std() {
        let _ = std.set_nonblocking(true);
        loop {
            let tcp = match std.accept() {
                Ok((tcp, _)) => tcp,
                // That client went away; the next may not have.
                Err(e) if is_connection_error(&e) => continue,
                // Drained (WouldBlock), or out of file descriptors.
                Err(_) => break,
            };
            if tcp.set_nonblocking(true).is_err() {
                continue;
            }
            let sent = tcp.peek(&mut [0u8]).is_ok_and(|n| n > 0);
            if let Ok(tcp) = tokio::net::TcpStream::from_std(tcp) {
                queued.push((tcp, sent));
            }
        }
        // `std` is dropped here: the socket closes, new clients are refused.
    }
    queued
}

/// A served connection: a TCP stream that counts as unread (see
/// [`FIRST_READ_WAIT`]) until its first read completes or it is dropped.
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

/// An accept error that is one connection's (it went away before it was
/// accepted): the next accept is unaffected.
fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        e.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset
    )
}

/// What the accept loop says when it cannot accept: out of file
/// descriptors, with the limit to raise, or the system's words.
fn accept_error(e: &std::io::Error) -> String {
    #[cfg(unix)]
    if matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE)) {
        let now = match fd_limit() {
            (Some(soft), _) => format!("now {soft}; "),
            _ => String::new(),
        };
        return format!(
            "cannot accept a connection: out of file descriptors ({e}); \
             open connections are still served, new ones wait until some close. \
             Raise the open-file limit ({now}ulimit -n, LimitNOFILE=) or lower the number of \
             idle connections clients keep open"
        );
    }
    format!(
        "cannot accept a connection ({e}); trying again every {} ms",
        ACCEPT_BACKOFF.as_millis()
    )
}

/// The open-file limit, soft and hard (`None`: unlimited).
#[cfg(unix)]
pub fn fd_limit() -> (Option<u64>, Option<u64>) {
    let r = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    (r.current, r.maximum)
}

/// Raise this process's soft open-file limit to its hard limit, so that a
/// server holding many connections runs out of file descriptors as late
/// as the system allows (a login shell's soft limit is often 1024). Says
/// on stderr when it cannot.
#[cfg(unix)]
pub fn raise_fd_limit(name: &str) {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let Rlimit { current, maximum } = getrlimit(Resource::Nofile);
    let Some(soft) = current else { return };
    // macOS refuses more than OPEN_MAX (10240) whatever the hard limit says.
    let cap = if cfg!(target_os = "macos") {
        Some(10240)
    } else {
        None
    };
    let want = match (maximum, cap) {
        (Some(h), Some(c)) => h.min(c),
        (Some(h), None) => h,
        (None, Some(c)) => c,
        (None, None) => return,
    };
    if want <= soft {
        return;
    }
    let raised = Rlimit {
        current: Some(want),
        maximum,
    };
    if let Err(e) = setrlimit(Resource::Nofile, raised) {
        eprintln!(
            "warning: {name}: cannot raise the open-file limit from {soft} to {want} ({e}); \
             it can hold only about {soft} connections at once"
        );
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

/// A signal that asks a run to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    /// SIGINT: Ctrl-C in a terminal (on Windows, Ctrl-C or Ctrl-Break).
    Interrupt,
    /// SIGTERM (Unix only): `kill`, systemd stopping a unit.
    Terminate,
}

impl StopSignal {
    /// `SIGINT` or `SIGTERM`.
    pub fn name(self) -> &'static str {
        match self {
            StopSignal::Interrupt => "SIGINT",
            StopSignal::Terminate => "SIGTERM",
        }
    }

    /// 130 or 143 ([`crate::exit::INTERRUPTED`], [`crate::exit::TERMINATED`]).
    pub fn exit_code(self) -> u8 {
        match self {
            StopSignal::Interrupt => crate::exit::INTERRUPTED,
            StopSignal::Terminate => crate::exit::TERMINATED,
        }
    }
}

/// The signals that stop a run, caught from the moment this is made (in a
/// runtime) for the rest of the process: SIGINT and SIGTERM on Unix,
/// Ctrl-C and Ctrl-Break on Windows. Once caught, they no longer end the
/// process by themselves; [`StopSignals::recv`] says which came.
pub struct StopSignals {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
    #[cfg(windows)]
    ctrl_c: tokio::signal::windows::CtrlC,
    #[cfg(windows)]
    ctrl_break: tokio::signal::windows::CtrlBreak,
}

impl StopSignals {
    /// Start catching them. Must be called inside a runtime.
    #[cfg(unix)]
    pub fn listen() -> Result<StopSignals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(StopSignals {
            interrupt: signal(SignalKind::interrupt())
                .map_err(|e| Error::io("cannot listen for SIGINT", e))?,
            terminate: signal(SignalKind::terminate())
                .map_err(|e| Error::io("cannot listen for SIGTERM", e))?,
        })
    }

    /// Start catching them. Must be called inside a runtime.
    #[cfg(windows)]
    pub fn listen() -> Result<StopSignals> {
        use tokio::signal::windows::{ctrl_break, ctrl_c};
        Ok(StopSignals {
            ctrl_c: ctrl_c().map_err(|e| Error::io("cannot listen for ctrl-c", e))?,
            ctrl_break: ctrl_break().map_err(|e| Error::io("cannot listen for ctrl-break", e))?,
        })
    }

    /// The next signal.
    #[cfg(unix)]
    pub async fn recv(&mut self) -> StopSignal {
        tokio::select! {
            Some(()) = self.interrupt.recv() => StopSignal::Interrupt,
            Some(()) = self.terminate.recv() => StopSignal::Terminate,
            else => std::future::pending().await,
        }
    }

    /// The next signal.
    #[cfg(windows)]
    pub async fn recv(&mut self) -> StopSignal {
        tokio::select! {
            Some(()) = self.ctrl_c.recv() => StopSignal::Interrupt,
            Some(()) = self.ctrl_break.recv() => StopSignal::Interrupt,
            else => std::future::pending().await,
        }
    }
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
