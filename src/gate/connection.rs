//! One client connection's life: read a request head, let [`Proxy::dispatch`] admit or
//! reject it, answer or forward it ([`super::exchange`]), and go again while the client
//! keeps the connection. Pipelined requests wait in the read buffer for their turn.
//!
//! The connection closes after any answer that leaves its framing in doubt: a malformed
//! head, a request body that was not read to its end, a response body delimited by the
//! upstream closing. A client can always tell where each response ends.

use super::conn_table::Slot;
use super::exchange;
use super::http1::{
    head, leading_empty_lines, parse_request_scanned, BodyCursor, Framing, HeadError, HeadScan,
};
use super::proxy::{Dispatch, Proxy};
use super::session::{write_client, Connection, Request};
use super::telemetry::Closed;
use super::upstream::{Links, READ_ROOM};
use bytes::{Buf, BytesMut};
use std::io;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// The most of a rejected request's body the gate reads to keep the connection; past
/// this it closes instead.
const MAX_SKIP: u64 = 1024 * 1024;

enum Step<'p> {
    NeedMore,
    Refuse(HeadError),
    Handle(Request, Dispatch<'p>),
}

/// How long a client connection may wait: for its first byte, for its next request, and
/// for a request head once begun.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub first_byte: Duration,
    pub idle: Duration,
    pub head: Duration,
}

/// How many requests a connection serves between two looks at where it is best served.
pub const PLACE_EVERY: u32 = 32;

/// Where a connection is best served, asked between requests every [`PLACE_EVERY`].
pub trait Placement: Send + Sync {
    /// The worker that should serve `client` from its next request on, when not this one.
    fn elsewhere(&self, client: &TcpStream) -> Option<usize>;
}

/// How a connection's service on this worker ended.
pub enum Ended {
    /// Closed, failed, or claimed: nothing more to do.
    Closed,
    /// Between requests, with nothing read of the next: to be served by that worker.
    Move(TcpStream, usize),
}

/// Serve one client connection until it closes, fails, the gate drains, the connection
/// table claims it while it waits (`slot`), or `placement` wants it elsewhere. `moved`: it
/// was served before, by another worker, so it owes no first byte.
pub async fn serve(
    client: TcpStream,
    proxy: &Proxy,
    timeouts: Timeouts,
    slot: &Slot,
    placement: &dyn Placement,
    moved: bool,
) -> Ended {
    let peer = client.peer_addr().ok().map(|a| a.ip());
    let first_byte = if moved {
        timeouts.idle
    } else {
        timeouts.first_byte
    };
    let mut conn = Connection {
        client,
        peer,
        rbuf: BytesMut::with_capacity(READ_ROOM),
        out: Vec::with_capacity(1024),
        links: Links::new(proxy.replicas.len()),
        idle_timeout: timeouts.idle,
        head_timeout: timeouts.head,
        head_deadline: None,
        first_byte_by: (!moved).then(|| Instant::now() + first_byte),
        timer: Box::pin(tokio::time::sleep(first_byte)),
        closed_for: None,
        scan: HeadScan::default(),
    };
    match conn.run(proxy, slot, placement).await {
        Ok(Some(to)) => Ended::Move(conn.client, to),
        Ok(None) => Ended::Closed,
        Err(e) => {
            tracing::debug!("client connection ended: {e}");
            Ended::Closed
        }
    }
}

impl Connection {
    /// Serve requests until the connection ends (`None`) or is to move to another worker.
    async fn run(
        &mut self,
        proxy: &Proxy,
        slot: &Slot,
        placement: &dyn Placement,
    ) -> io::Result<Option<usize>> {
        let mut served = 0u32;
        loop {
            self.out.clear();
            // Empty lines before a request line are dropped as they come, but they begin
            // a head: its deadline runs, so they cannot keep a connection alive forever.
            let blank = leading_empty_lines(&self.rbuf);
            if blank > 0 {
                self.rbuf.advance(blank);
                self.scan.reset();
                self.head_deadline
                    .get_or_insert_with(|| Instant::now() + self.head_timeout);
            }
            let step = {
                let mut headers = head::empty_headers();
                match parse_request_scanned(&self.rbuf, &mut headers, &mut self.scan) {
                    Ok(Some(h)) => Step::Handle(
                        Request::of(&h),
                        proxy.dispatch(&h, self.peer, &mut self.out),
                    ),
                    Ok(None) => Step::NeedMore,
                    Err(e) => Step::Refuse(e),
                }
            };
            self.head_deadline = match step {
                Step::NeedMore if !self.rbuf.is_empty() => self
                    .head_deadline
                    .or_else(|| Some(Instant::now() + self.head_timeout)),
                Step::NeedMore => self.head_deadline,
                _ => None,
            };
            if !matches!(step, Step::NeedMore) {
                served += 1;
            }
            let keep_going = match step {
                Step::NeedMore => {
                    // Between requests, with nothing of the next one read, a connection
                    // can change workers losing nothing but its upstream connections. Not
                    // once the gate stops: the other worker no longer takes connections,
                    // and here the wait below closes it at once.
                    if served >= PLACE_EVERY
                        && self.rbuf.is_empty()
                        && self.head_deadline.is_none()
                        && !slot.draining()
                    {
                        served = 0;
                        if let Some(to) = placement.elsewhere(&self.client) {
                            return Ok(Some(to));
                        }
                    }
                    let more = self.read_more(slot).await;
                    if let Some(why) = self.closed_for.take() {
                        proxy.metrics.connection_closed(why);
                    }
                    more?
                }
                Step::Refuse(e) => {
                    tracing::debug!("refused a request: {e}");
                    self.answer(refusal_status(&e), None, &refusal_body(&e), true)
                        .await?;
                    false
                }
                Step::Handle(
                    req,
                    Dispatch::Reject {
                        retry_after_s,
                        body,
                    },
                ) => {
                    self.reject(req, retry_after_s, body, slot.draining())
                        .await?
                }
                Step::Handle(req, Dispatch::Forward(admitted)) => {
                    exchange::forward(self, proxy, req, admitted, slot).await?
                }
            };
            if !keep_going {
                let _ = self.client.shutdown().await;
                return Ok(None);
            }
        }
    }

    /// Wait for more of the next request; false when the client closed, stayed quiet
    /// too long, missed its first-byte or head deadline, or the gate is draining or needs
    /// the slot for a new connection and no request has begun.
    async fn read_more(&mut self, slot: &Slot) -> io::Result<bool> {
        self.rbuf.reserve(READ_ROOM);
        let presence = slot.presence();
        let idle = self.rbuf.is_empty() && self.head_deadline.is_none();
        if idle && !presence.idle() {
            self.closed_for = claimed_for(slot);
            return Ok(false);
        }
        // Marked waiting first, then the stop looked at: a drain either claimed this
        // connection or is seen here (ConnectionTable::drain).
        if idle && slot.draining() {
            return Ok(false);
        }
        // Silence is cut at the idle timeout, inside a head too; a head also has its
        // deadline, which no amount of trickling moves, and a new connection its first
        // byte's.
        let quiet = Instant::now() + self.idle_timeout;
        let give_up = [self.head_deadline, self.first_byte_by]
            .into_iter()
            .flatten()
            .fold(quiet, Instant::min);
        if self.timer.deadline() > give_up {
            self.timer.as_mut().reset(give_up);
        }
        let n = loop {
            tokio::select! {
                biased;
                n = self.client.read_buf(&mut self.rbuf) => break n?,
                () = presence.evicted(), if idle => {
                    self.closed_for = claimed_for(slot);
                    return Ok(false);
                }
                () = self.timer.as_mut() => {
                    if Instant::now() < give_up {
                        self.timer.as_mut().reset(give_up); // set for an earlier wait
                        continue;
                    }
                    if !idle {
                        self.closed_for = Some(Closed::HeadTimeout);
                        self.answer("408 Request Timeout", None, "the request head did not arrive in time\n", true)
                            .await?;
                    } else if self.first_byte_by.is_some() {
                        self.closed_for = Some(Closed::NoFirstByte);
                    }
                    return Ok(false);
                }
            }
        };
        if n > 0 {
            self.first_byte_by = None;
            if idle && !presence.busy() {
                self.closed_for = claimed_for(slot);
                return Ok(false); // claimed just before these bytes came
            }
        }
        Ok(n > 0)
    }

    /// Answer 429 and step over the request's body, or close when that body is too big
    /// to read or was never sent (a client waiting for `100 Continue`).
    async fn reject(
        &mut self,
        req: Request,
        retry_after_s: u64,
        body: &'static str,
        draining: bool,
    ) -> io::Result<bool> {
        let mut cursor = BodyCursor::new(req.framing);
        // None: a malformed chunked body, which nothing can step over.
        let here = cursor.advance(&self.rbuf[req.head_len..]).ok();
        let small = match req.framing {
            Framing::Length(n) => n <= MAX_SKIP,
            _ => true,
        };
        let steppable = here.is_some() && (cursor.is_done() || (small && !req.expect_continue));
        let keep = req.keep_alive && !draining && steppable;
        super::refusal::write_429(&mut self.out, retry_after_s, body, !keep);
        write_client(&mut self.client, &self.out, self.idle_timeout).await?;
        let (true, Some(here)) = (keep, here) else {
            return Ok(false);
        };
        self.rbuf.advance(req.head_len + here);
        let mut skipped = here as u64;
        while !cursor.is_done() {
            if skipped > MAX_SKIP {
                return Ok(false);
            }
            self.rbuf.reserve(READ_ROOM);
            let read =
                tokio::time::timeout(self.idle_timeout, self.client.read_buf(&mut self.rbuf));
            if !matches!(read.await, Ok(Ok(n)) if n > 0) {
                return Ok(false);
            }
            let Ok(n) = cursor.advance(&self.rbuf) else {
                return Ok(false);
            };
            self.rbuf.advance(n);
            skipped += n as u64;
        }
        Ok(true)
    }
}

/// Why the table claimed a waiting connection: room for a newcomer (counted), or the
/// gate stopping (not a limit: not counted).
fn claimed_for(slot: &Slot) -> Option<Closed> {
    (!slot.draining()).then_some(Closed::MadeRoom)
}

fn refusal_status(e: &HeadError) -> &'static str {
    match e {
        HeadError::TooLarge => "431 Request Header Fields Too Large",
        HeadError::Tunnel | HeadError::Framing(super::http1::FramingError::UnsupportedCoding) => {
            "501 Not Implemented"
        }
        HeadError::Malformed(_)
        | HeadError::Framing(_)
        | HeadError::ConnectionNamesEndToEnd(_)
        | HeadError::HostCount(_)
        | HeadError::EncodingInHttp10 => "400 Bad Request",
    }
}

fn refusal_body(e: &HeadError) -> String {
    format!("the gate cannot read this request: {e}\n")
}
