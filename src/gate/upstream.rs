//! The gate's upstream connections: each client connection owns its own, one per replica
//! it has used, and drives them inside its own task.
//!
//! Why not a shared client pool: the pool's checkout (a lock and a hashed key), the task
//! that drives each pooled connection and the task that returns it to the pool cost more
//! per request than the proxying itself, and on a busy machine every hand-off between
//! tasks is a wake-up. An HTTP/1.1 client connection carries one request at a time, so a
//! client connection never needs more than one upstream connection per replica; it
//! polls that connection while it waits for the response head ([`send`]) and while it
//! streams the body back ([`UpstreamBody`]). When the body ends, the link goes back to
//! the client connection's slot for its next request; when the client hangs up early,
//! the link is dropped, which closes the upstream connection: nobody wants that answer.

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::client::conn::http1::{self, Connection, SendRequest};
use hyper_util::rt::TokioIo;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::net::TcpStream;

type Conn = Connection<TokioIo<TcpStream>, Incoming>;

/// One upstream HTTP/1.1 connection: the handle requests go through and the connection
/// state machine that somebody has to poll for anything to move.
pub struct Link {
    sender: SendRequest<Incoming>,
    /// `None` once the connection ended: dropping it at once makes any request still
    /// queued on it fail now instead of at the timeout.
    conn: Option<Pin<Box<Conn>>>,
}

/// A client connection's idle upstream links, one slot per replica.
pub struct Links {
    slots: Mutex<Vec<Option<Link>>>,
}

/// Why a request got no response from the upstream.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// No connection could be opened: the replica is down or refusing.
    #[error("cannot connect to {authority}: {source}")]
    Connect {
        authority: String,
        source: std::io::Error,
    },
    /// The connection broke before or while the response head came back.
    #[error("upstream {authority}: {source}")]
    Exchange {
        authority: String,
        source: hyper::Error,
    },
}

impl SendError {
    /// Whether the replica refused the connection itself (worth passing over for a while).
    pub fn is_connect(&self) -> bool {
        matches!(self, SendError::Connect { .. })
    }
}

impl Links {
    pub fn new(replicas: usize) -> Arc<Links> {
        Arc::new(Links {
            slots: Mutex::new((0..replicas).map(|_| None).collect()),
        })
    }

    fn take(&self, replica: usize) -> Option<Link> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.get_mut(replica).and_then(Option::take)
    }

    fn put(&self, replica: usize, link: Link) {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(slot) = slots.get_mut(replica) {
            *slot = Some(link);
        }
    }
}

/// Send `req` to `replica` (at `authority`) over this client connection's link, opening
/// one when there is none or the idle one was closed by the upstream meanwhile. The
/// caller bounds the whole exchange with its own timeout.
pub async fn send(
    links: &Arc<Links>,
    replica: usize,
    authority: &http::uri::Authority,
    mut req: http::Request<Incoming>,
) -> Result<http::Response<UpstreamBody>, SendError> {
    // A reused link may have been closed by the upstream while idle; that shows only once
    // it is polled. Such a request was never written, so it is safe to send it again on a
    // fresh connection, once: the slot is empty after the first take, so the retry connects.
    loop {
        let (mut link, reused) = match links.take(replica) {
            Some(link) => (link, true),
            None => (connect(authority).await?, false),
        };
        if link.ready().await.is_err() {
            if reused {
                continue;
            }
            return Err(SendError::Connect {
                authority: authority.to_string(),
                source: std::io::Error::from(std::io::ErrorKind::ConnectionReset),
            });
        }
        let mut response = std::pin::pin!(link.sender.try_send_request(req));
        let outcome = poll_fn(|cx| {
            // If the connection ends, the response future reports how.
            link.drive(cx);
            response.as_mut().poll(cx)
        })
        .await;
        match outcome {
            Ok(resp) => {
                let home = link
                    .conn
                    .is_some()
                    .then(|| (link, (links.clone(), replica)));
                return Ok(resp.map(|inner| UpstreamBody { inner, link: home }));
            }
            Err(mut e) => match e.take_message() {
                Some(unsent) if reused => req = unsent,
                _ => {
                    return Err(SendError::Exchange {
                        authority: authority.to_string(),
                        source: e.into_error(),
                    })
                }
            },
        }
    }
}

async fn connect(authority: &http::uri::Authority) -> Result<Link, SendError> {
    let failed = |source| SendError::Connect {
        authority: authority.to_string(),
        source,
    };
    let port = authority.port_u16().unwrap_or(80);
    let stream = TcpStream::connect((authority.host(), port))
        .await
        .map_err(failed)?;
    stream.set_nodelay(true).map_err(failed)?;
    let (sender, conn) = http1::Builder::new()
        .writev(false) // one write per request, as the client side does (server.rs)
        .handshake(TokioIo::new(stream))
        .await
        .map_err(|source| SendError::Exchange {
            authority: authority.to_string(),
            source,
        })?;
    Ok(Link {
        sender,
        conn: Some(Box::pin(conn)),
    })
}

impl Link {
    /// Move the connection along (read, write, notice a close); false once it ended.
    fn drive(&mut self, cx: &mut Context<'_>) -> bool {
        if let Some(conn) = &mut self.conn {
            if conn.as_mut().poll(cx).is_ready() {
                self.conn = None;
            }
        }
        self.conn.is_some()
    }

    /// Drive the connection until it can take a request; an error when it has closed.
    async fn ready(&mut self) -> Result<(), ()> {
        poll_fn(|cx| {
            if !self.drive(cx) {
                return Poll::Ready(Err(()));
            }
            self.sender.poll_ready(cx).map_err(drop)
        })
        .await
    }
}

/// A response body from the upstream that keeps its connection moving while the client
/// reads it, and hands the connection back to its client connection's slot at the end.
pub struct UpstreamBody {
    inner: Incoming,
    link: Option<(Link, (Arc<Links>, usize))>,
}

impl UpstreamBody {
    fn release(&mut self) {
        if let Some((link, (links, replica))) = self.link.take() {
            links.put(replica, link);
        }
    }
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        if let Some((link, _)) = &mut this.link {
            if !link.drive(cx) {
                // Closed after (or while) sending this body: not reusable, and whatever
                // it delivered is still read from `inner` below.
                this.link = None;
            }
        }
        let frame = Pin::new(&mut this.inner).poll_frame(cx);
        if let Poll::Ready(None) = frame {
            this.release();
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for UpstreamBody {
    fn drop(&mut self) {
        // A body the server never had to read (empty, or a HEAD) ends the exchange too;
        // one dropped half-read does not, and its link closes with it.
        if self.inner.is_end_stream() {
            self.release();
        }
    }
}
