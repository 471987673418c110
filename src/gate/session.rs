//! One client connection's state and what it knows of the request in hand: the session
//! that the connection loop ([`super::connection`]) reads requests into and the exchange
//! ([`super::exchange`]) forwards and answers from. It sits below both, so neither needs
//! the other to speak to the client.

use super::http1::{head, Framing, HeadScan, RequestHead};
use super::telemetry::Closed;
use super::upstream::Links;
use bytes::BytesMut;
use std::io;
use std::pin::Pin;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

/// The state of one client connection, reused from request to request.
pub(super) struct Connection {
    pub client: TcpStream,
    /// Bytes read from the client and not yet handled: the current request, maybe more.
    pub rbuf: BytesMut,
    /// The head (and small body) being written, upstream or back to the client.
    pub out: Vec<u8>,
    pub links: Links,
    /// How long to wait for the next request, or for a client that stopped reading or
    /// sending (inside a head too).
    pub idle_timeout: Duration,
    /// How long a request head may take from its first byte to its end.
    pub head_timeout: Duration,
    /// When the head being read must be complete: set by its first byte, cleared when it
    /// parses. A deadline, so a client sending a byte now and then cannot extend it.
    pub head_deadline: Option<Instant>,
    /// When a new connection must have sent its first byte; cleared by that byte.
    pub first_byte_by: Option<Instant>,
    /// Why the gate closed the connection, when it did so on a limit.
    pub closed_for: Option<Closed>,
    /// How much of a head arriving in pieces has been looked at.
    pub scan: HeadScan,
    /// The client's address, to recognise its retries.
    pub peer: Option<std::net::IpAddr>,
    /// The one timer of the waits for a request, never due later than the wait must end
    /// and moved only when a wait must end sooner (a new head's deadline). The usual wait
    /// ends later (each request pushes the idle timeout back) and leaves it alone; should
    /// it fire first, it is moved then. A timer armed and dropped on every wait cost two
    /// timer-wheel updates per request, refusals included.
    pub timer: Pin<Box<Sleep>>,
}

/// What the connection loop needs to know about a request once its head is parsed.
#[derive(Debug, Clone, Copy)]
pub(super) struct Request {
    pub head_len: usize,
    pub framing: Framing,
    pub expect_continue: bool,
    pub keep_alive: bool,
    pub is_head: bool,
    /// The method may be sent again without a second effect (RFC 9110 §9.2.2).
    pub idempotent: bool,
}

impl Request {
    pub(super) fn of(head: &RequestHead<'_, '_>) -> Request {
        Request {
            head_len: head.len,
            framing: head.framing,
            expect_continue: head.expect_continue,
            keep_alive: head.keep_alive(),
            is_head: head.is_head(),
            idempotent: super::resend::is_idempotent(head.method()),
        }
    }
}

impl Connection {
    /// Write a response the gate made up itself.
    pub(super) async fn answer(
        &mut self,
        status: &str,
        retry_after_s: Option<u64>,
        body: &str,
        close: bool,
    ) -> io::Result<()> {
        self.out.clear();
        head::write_own(&mut self.out, status, retry_after_s, body, close);
        write_client(&mut self.client, &self.out, self.idle_timeout).await
    }
}

/// Write all of `bytes` to the client, giving up when it has not taken them within
/// `limit`: a client that stops reading must not hold its connection, and the service
/// connection behind it, forever. A write that goes straight through costs one clock read.
pub(super) async fn write_client(
    client: &mut TcpStream,
    bytes: &[u8],
    limit: Duration,
) -> io::Result<()> {
    match tokio::time::timeout(limit, client.write_all(bytes)).await {
        Ok(written) => written,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "the client stopped reading",
        )),
    }
}
