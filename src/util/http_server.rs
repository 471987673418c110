//! Serving an axum router with the timeouts `axum::serve` leaves out. Without them a
//! connection that sends nothing, or a client that stops reading its answer, is kept
//! for ever, and enough of them use up the file descriptors of `recover serve`, the
//! gate's admin port or a demo component.
//!
//! - **Header read**: a request head must arrive whole within this time of the server
//!   starting to wait for it, on a new connection or after the last response of a
//!   kept-alive one; so it is the idle timeout too (hyper's timer, which restarts only
//!   when a head is complete).
//! - **Write stall**: a response write that makes no progress for this long fails and
//!   the connection closes (a client that stopped reading).
//!
//! Request bodies get their size and time caps where they are read
//! ([`super::http_body`]).

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio::time::Sleep;
use tokio_util::sync::CancellationToken;

/// The default for both timeouts: a real client sends its head in milliseconds.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a connection may keep the server waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    pub header_read: Duration,
    pub write_stall: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            header_read: DEFAULT_TIMEOUT,
            write_stall: DEFAULT_TIMEOUT,
        }
    }
}

/// Serve `app` on `listener` until `shutdown` resolves, then let open requests finish
/// (connections between requests close at once). Dropping the returned future drops
/// every connection with it.
pub async fn serve(
    listener: TcpListener,
    app: axum::Router,
    timeouts: Timeouts,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let stop = CancellationToken::new();
    let mut conns = JoinSet::new();
    let mut accept_errors = RateLimited::default();
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            a = listener.accept() => a,
        };
        while conns.try_join_next().is_some() {}
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors and the like: back off, and say so once a second.
                if let Some(n) = accept_errors.record() {
                    tracing::warn!(count = n, "accept failed: {e}");
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        conns.spawn(connection(stream, app.clone(), timeouts, stop.clone()));
    }
    drop(listener);
    stop.cancel();
    while conns.join_next().await.is_some() {}
    Ok(())
}

async fn connection(
    stream: TcpStream,
    app: axum::Router,
    timeouts: Timeouts,
    stop: CancellationToken,
) {
    let io = TokioIo::new(StallGuard::new(stream, timeouts.write_stall));
    let service = TowerToHyperService::new(app);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(timeouts.header_read);
    let conn = builder.serve_connection(io, service);
    tokio::pin!(conn);
    let result = tokio::select! {
        r = conn.as_mut() => r,
        () = stop.cancelled() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        tracing::debug!("connection ended: {e}");
    }
}

/// Says when a line about repeated events is due: at most once a second, with a count.
#[derive(Default)]
struct RateLimited {
    last: Option<std::time::Instant>,
    pending: u64,
}

impl RateLimited {
    fn record(&mut self) -> Option<u64> {
        self.pending += 1;
        let now = std::time::Instant::now();
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < Duration::from_secs(1))
        {
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.pending))
    }
}

/// A socket whose writes fail with `TimedOut` once one has been blocked for `limit`.
struct StallGuard {
    inner: TcpStream,
    limit: Duration,
    stalled: Option<Pin<Box<Sleep>>>,
}

impl StallGuard {
    fn new(inner: TcpStream, limit: Duration) -> Self {
        StallGuard {
            inner,
            limit,
            stalled: None,
        }
    }

    /// Called when a write is pending: arm the timer, or fail once it has run out.
    fn check_stall(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let limit = self.limit;
        let timer = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client took nothing for {limit:?}"),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for StallGuard {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for StallGuard {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write(cx, buf) {
            Poll::Pending => self.check_stall(cx),
            done => {
                self.stalled = None;
                done
            }
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write_vectored(cx, bufs) {
            Poll::Pending => self.check_stall(cx),
            done => {
                self.stalled = None;
                done
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Set when dropped: shows that the server let go of a response body.
    struct Flag(Arc<AtomicBool>);

    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    /// A server with `/` (a small answer) and `/big` (64 MiB, far more than socket
    /// buffers hold); the flag is set when the server drops `/big`'s body.
    async fn start(
        timeouts: Timeouts,
    ) -> (std::net::SocketAddr, Arc<AtomicBool>, CancellationToken) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let dropped = Arc::new(AtomicBool::new(false));
        let d = dropped.clone();
        let big = move || {
            let flag = Flag(d.clone());
            async move {
                let chunks = futures::stream::iter((0..64).map(move |_| {
                    let _held = &flag;
                    Ok::<_, io::Error>(bytes::Bytes::from(vec![b'x'; 1 << 20]))
                }));
                axum::body::Body::from_stream(chunks)
            }
        };
        let app = axum::Router::new()
            .route("/", axum::routing::get(|| async { "ok" }))
            .route("/big", axum::routing::get(big));
        let stop = CancellationToken::new();
        tokio::spawn(serve(
            listener,
            app,
            timeouts,
            stop.clone().cancelled_owned(),
        ));
        (addr, dropped, stop)
    }

    /// Read until the server closes; panics if it has not within `within`.
    async fn closed_within(s: &mut TcpStream, within: Duration) -> Vec<u8> {
        let mut got = Vec::new();
        tokio::time::timeout(within, s.read_to_end(&mut got))
            .await
            .expect("the server kept the connection open")
            .ok();
        got
    }

    fn short() -> Timeouts {
        Timeouts {
            header_read: Duration::from_millis(300),
            write_stall: Duration::from_millis(300),
        }
    }

    #[tokio::test]
    async fn a_connection_that_sends_nothing_or_half_a_head_is_closed() {
        let (addr, _, _stop) = start(short()).await;
        let mut silent = TcpStream::connect(addr).await.unwrap();
        closed_within(&mut silent, Duration::from_secs(10)).await;
        let mut half = TcpStream::connect(addr).await.unwrap();
        half.write_all(b"GET / HTTP/1.1\r\nho").await.unwrap();
        closed_within(&mut half, Duration::from_secs(10)).await;
    }

    #[tokio::test]
    async fn a_kept_alive_connection_is_closed_when_idle() {
        let (addr, _, _stop) = start(short()).await;
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let got = closed_within(&mut s, Duration::from_secs(10)).await;
        let text = String::from_utf8_lossy(&got);
        assert!(
            text.starts_with("HTTP/1.1 200") && text.ends_with("ok"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn a_client_that_stops_reading_is_let_go() {
        let (addr, dropped, _stop) = start(short()).await;
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /big HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        // Never read: the server's writes block, and it must give up on its own.
        let t0 = std::time::Instant::now();
        while !dropped.load(Ordering::SeqCst) {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "the server still holds a response nobody reads"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        drop(s);
    }
}
