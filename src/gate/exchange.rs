//! Forwarding one admitted request: send its head and body upstream, wait for the
//! response head within the request's deadline while watching for the client hanging up,
//! then pass the response back and return the upstream link for the next request.
//!
//! A link reused from the last request may have been closed by the upstream meanwhile.
//! Once any byte of a request has reached it, a failure is the client's `502`: the
//! upstream may have acted on the request, and the gate never sends a second copy. Only a
//! request whose very first write failed may go out again, under [`super::resend`]'s
//! rule.

use super::conn_table::Slot;
use super::http1::{head, parse_response, BodyCursor, Framing};
use super::proxy::{Admitted, Proxy};
use super::session::{write_client, Connection, Request};
use super::telemetry::{GateMetrics, RequestOutcome};
use super::upstream::{self, Link, READ_ROOM};
use bytes::{Buf, BytesMut};
use std::io;
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Bodies up to this size go out in the same write as their head.
const COALESCE: usize = 16 * 1024;

/// Why a forwarded request got no usable response.
enum Failure {
    /// No connection to the replica could be opened.
    Connect(io::Error),
    /// The upstream broke the exchange or answered something unreadable.
    Upstream(String),
    /// The upstream closed without a byte of answer.
    NoAnswer,
    /// The client hung up, or stopped sending its body, before the answer came.
    ClientGone,
    /// The client's chunked body is malformed.
    BadBody,
}

/// A response head from the upstream, summarised once parsed; its bytes for the client
/// are in `Connection::out`.
struct HeadSummary {
    status: u16,
    /// 1xx: passed on, and the final head follows.
    interim: bool,
    head_len: usize,
    framing: Framing,
    reusable: bool,
    close_client: bool,
}

/// Forward one admitted request and relay its response. Returns whether the client
/// connection can carry another request.
pub(super) async fn forward(
    conn: &mut Connection,
    proxy: &Proxy,
    req: Request,
    mut admitted: Admitted<'_>,
    slot: &Slot,
) -> io::Result<bool> {
    let mut cursor = BodyCursor::new(req.framing);
    let Ok(here) = cursor.advance(&conn.rbuf[req.head_len..]) else {
        return bad_body(conn).await; // counted as client_gone: the client broke it
    };
    let buffered = cursor.is_done();
    // Whether the gate is stopping is read when each answer is written, not here: a stop
    // that comes while the upstream works must reach the client as `Connection: close`,
    // or a client reusing the connection races the gate closing it.
    let keep_client = req.keep_alive;
    let sent = Instant::now();
    let replica = admitted.pick.index;
    let wait = admitted.wait;
    let exchange = send_and_wait(conn, req, cursor, here, &mut admitted, keep_client, slot);
    let result = tokio::time::timeout(wait, exchange).await;
    if buffered {
        conn.rbuf.advance(req.head_len + here);
    }
    // A request whose body was only partly read leaves the connection out of step.
    let keep_after_error = keep_client && buffered && !slot.draining();
    let (link, resp) = match result {
        Ok(Ok(got)) => got,
        Ok(Err(Failure::ClientGone)) => return Ok(false),
        Ok(Err(Failure::BadBody)) => return bad_body(conn).await,
        Ok(Err(failure)) => {
            if let Failure::Connect(_) = failure {
                proxy.replicas.eject(&admitted.pick);
            }
            let why = match failure {
                Failure::Connect(e) => format!("cannot connect: {e}"),
                Failure::Upstream(e) => e,
                _ => "closed without an answer".to_string(),
            };
            tracing::debug!(upstream = %admitted.pick.replica.authority, "upstream error: {why}");
            admitted.ended(RequestOutcome::UpstreamError);
            // Counted before the client has its answer, so a client that sees the 502
            // sees it counted.
            drop(admitted);
            let close = !keep_after_error;
            conn.answer("502 Bad Gateway", None, "upstream unreachable\n", close)
                .await?;
            return Ok(!close);
        }
        Err(_elapsed) => {
            admitted.ended(RequestOutcome::UpstreamTimeout);
            drop(admitted);
            let close = !keep_after_error;
            conn.answer("504 Gateway Timeout", None, "upstream timed out\n", close)
                .await?;
            return Ok(!close);
        }
    };
    let tally = Tally {
        metrics: &proxy.metrics,
        status: resp.status,
        head_s: sent.elapsed().as_secs_f64(),
        counted: false,
    };
    admitted.answered(resp.status);
    admitted.ended(RequestOutcome::Admitted);
    relay_response(conn, proxy, link, resp, replica, tally).await
}

/// Counts one upstream response once its end is known: by status class when its body came
/// whole, as `error` when the upstream cut it short (closed, stalled or broke the framing
/// mid-body). Counted before the last bytes go to the client, so a client that has its
/// answer sees it counted. Dropped uncounted (the client went away first), it counts by
/// status: the upstream was not at fault.
struct Tally<'m> {
    metrics: &'m GateMetrics,
    status: u16,
    head_s: f64,
    counted: bool,
}

impl Tally<'_> {
    fn whole(&mut self) {
        if !std::mem::replace(&mut self.counted, true) {
            self.metrics.upstream_response(self.status, self.head_s);
        }
    }

    fn cut_short(&mut self) {
        if !std::mem::replace(&mut self.counted, true) {
            self.metrics.upstream_cut_short(self.head_s);
        }
    }
}

impl Drop for Tally<'_> {
    fn drop(&mut self) {
        self.whole();
    }
}

/// A client's chunked body that does not parse: nothing after it can be read either.
async fn bad_body(conn: &mut Connection) -> io::Result<bool> {
    conn.answer("400 Bad Request", None, "malformed chunked body\n", true)
        .await?;
    Ok(false)
}

/// Everything up to the final response head, which the caller bounds with the deadline.
async fn send_and_wait(
    conn: &mut Connection,
    req: Request,
    mut cursor: BodyCursor,
    here: usize,
    admitted: &mut Admitted<'_>,
    keep_client: bool,
    slot: &Slot,
) -> Result<(Link, HeadSummary), Failure> {
    let buffered = cursor.is_done();
    let body_here = req.head_len..req.head_len + here;
    if here <= COALESCE {
        conn.out.extend_from_slice(&conn.rbuf[body_here.clone()]);
    }
    loop {
        let mut link = match conn.links.take(admitted.pick.index) {
            Some(link) => link,
            None => upstream::connect(&admitted.pick.replica.authority)
                .await
                .map_err(Failure::Connect)?,
        };
        let mut written = 0;
        let mut wrote = write_counting(&mut link, &conn.out, &mut written).await;
        if wrote.is_ok() && here > COALESCE {
            wrote = write_counting(&mut link, &conn.rbuf[body_here.clone()], &mut written).await;
        }
        if let Err(e) = wrote {
            // A new link is never reused, so this goes round at most once.
            if link.reused && admitted.resend(written > 0, req.idempotent) {
                continue;
            }
            return Err(Failure::Upstream(format!("writing the request: {e}")));
        }
        if !buffered {
            if req.expect_continue {
                let cont = b"HTTP/1.1 100 Continue\r\n\r\n";
                write_client(&mut conn.client, cont, conn.idle_timeout)
                    .await
                    .map_err(|_| Failure::ClientGone)?;
            }
            conn.rbuf.advance(req.head_len + here);
            stream_request_body(conn, &mut cursor, &mut link).await?;
        }
        return match wait_for_head(conn, &mut link, req.is_head, keep_client, slot).await {
            Err(Failure::NoAnswer) if link.reused => {
                admitted.resend(true, req.idempotent); // counted as refused: it was written
                Err(Failure::NoAnswer)
            }
            other => other.map(|head| (link, head)),
        };
    }
}

/// Write all of `bytes` to the upstream, adding to `written` what the connection took,
/// so a failure can tell whether any of the request left.
async fn write_counting(link: &mut Link, bytes: &[u8], written: &mut usize) -> io::Result<()> {
    let mut rest = bytes;
    while !rest.is_empty() {
        let n = link.stream.write(rest).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        *written += n;
        rest = &rest[n..];
    }
    Ok(())
}

/// Pass the rest of a request body from the client to the upstream as it arrives.
async fn stream_request_body(
    conn: &mut Connection,
    cursor: &mut BodyCursor,
    link: &mut Link,
) -> Result<(), Failure> {
    while !cursor.is_done() {
        if conn.rbuf.is_empty() {
            conn.rbuf.reserve(READ_ROOM);
            match conn.client.read_buf(&mut conn.rbuf).await {
                Ok(0) | Err(_) => return Err(Failure::ClientGone),
                Ok(_) => {}
            }
        }
        let n = cursor.advance(&conn.rbuf).map_err(|_| Failure::BadBody)?;
        link.stream
            .write_all(&conn.rbuf[..n])
            .await
            .map_err(|e| Failure::Upstream(format!("writing the request body: {e}")))?;
        conn.rbuf.advance(n);
    }
    Ok(())
}

/// Read up to the final response head, passing interim (1xx) responses to the client.
/// On success the client's version of the head is in `conn.out`.
async fn wait_for_head(
    conn: &mut Connection,
    link: &mut Link,
    head_request: bool,
    keep_client: bool,
    slot: &Slot,
) -> Result<HeadSummary, Failure> {
    let mut answered = false;
    loop {
        let parsed = {
            let mut headers = head::empty_headers();
            match parse_response(&link.buf, &mut headers, head_request) {
                Ok(Some(h)) => {
                    conn.out.clear();
                    let close_client =
                        !keep_client || h.framing == Framing::UntilClose || slot.draining();
                    h.write_client(&mut conn.out, close_client && !h.is_interim());
                    Some(HeadSummary {
                        status: h.status,
                        interim: h.is_interim(),
                        head_len: h.len,
                        framing: h.framing,
                        reusable: h.reusable(),
                        close_client,
                    })
                }
                Ok(None) => None,
                Err(e) => return Err(Failure::Upstream(format!("unreadable response: {e}"))),
            }
        };
        if let Some(h) = parsed {
            if !h.interim {
                return Ok(h);
            }
            link.buf.advance(h.head_len);
            answered = true;
            write_client(&mut conn.client, &conn.out, conn.idle_timeout)
                .await
                .map_err(|_| Failure::ClientGone)?;
            continue;
        }
        let read = tokio::select! {
            biased;
            r = link.read_more() => r,
            () = client_gone(&conn.client, &mut conn.rbuf) => return Err(Failure::ClientGone),
        };
        match read {
            Ok(0) | Err(_) if link.buf.is_empty() && !answered => return Err(Failure::NoAnswer),
            Ok(0) => return Err(Failure::Upstream("closed mid-response".into())),
            Err(e) => return Err(Failure::Upstream(format!("reading the response: {e}"))),
            Ok(_) => {}
        }
    }
}

/// Resolves when the client hangs up. Anything it sends meanwhile (a pipelined request)
/// is kept in `rbuf` for later. Costs no syscall while the client is quiet.
async fn client_gone(client: &TcpStream, rbuf: &mut BytesMut) {
    loop {
        if client.readable().await.is_err() {
            return;
        }
        if rbuf.len() >= head::MAX_HEAD {
            // Enough is queued; a hang-up will show when the answer is written.
            return std::future::pending().await;
        }
        rbuf.reserve(READ_ROOM);
        match client.try_read_buf(rbuf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => return,
        }
    }
}

/// Write the response head (in `conn.out`) and body to the client, then put the link
/// back if the upstream can take another request on it.
async fn relay_response(
    conn: &mut Connection,
    proxy: &Proxy,
    mut link: Link,
    resp: HeadSummary,
    replica: usize,
    mut tally: Tally<'_>,
) -> io::Result<bool> {
    link.buf.advance(resp.head_len);
    let mut cursor = BodyCursor::new(resp.framing);
    let Ok(n) = cursor.advance(&link.buf) else {
        tally.cut_short();
        return Ok(false); // a malformed chunked response: closing shows the client it broke
    };
    if cursor.is_done() {
        tally.whole();
    }
    if n <= COALESCE {
        conn.out.extend_from_slice(&link.buf[..n]);
        write_client(&mut conn.client, &conn.out, conn.idle_timeout).await?;
    } else {
        write_client(&mut conn.client, &conn.out, conn.idle_timeout).await?;
        write_client(&mut conn.client, &link.buf[..n], conn.idle_timeout).await?;
    }
    link.buf.advance(n);
    while !cursor.is_done() {
        // An upstream that stalls mid-body gets the same patience as for its head.
        let read = tokio::time::timeout(proxy.timeout, link.read_more()).await;
        match read {
            Ok(Ok(0)) if cursor.until_close() => break,
            Ok(Ok(0) | Err(_)) | Err(_) => {
                tally.cut_short();
                return Ok(false); // the client must see it was cut short
            }
            Ok(Ok(_)) => {}
        }
        let Ok(k) = cursor.advance(&link.buf) else {
            tally.cut_short();
            return Ok(false);
        };
        if cursor.is_done() {
            tally.whole();
        }
        write_client(&mut conn.client, &link.buf[..k], conn.idle_timeout).await?;
        link.buf.advance(k);
    }
    if cursor.is_done() && resp.reusable && link.buf.is_empty() {
        conn.links.put(replica, link);
    }
    Ok(!resp.close_client)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// What the resend rule rests on: a write to a connection the peer has reset is
    /// refused whole, so the count says not a byte left.
    #[tokio::test]
    async fn a_write_to_a_reset_connection_reports_nothing_written() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let authority = listener.local_addr().unwrap().to_string().parse().unwrap();
        let mut link = upstream::connect(&authority).await.unwrap();
        let (peer, _) = listener.accept().await.unwrap();
        peer.set_zero_linger().unwrap();
        drop(peer); // RST
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let mut written = 0;
        let wrote = write_counting(&mut link, b"GET / HTTP/1.1\r\n\r\n", &mut written).await;
        assert!(wrote.is_err());
        assert_eq!(written, 0);
        // And a healthy connection counts every byte.
        let mut fresh = upstream::connect(&authority).await.unwrap();
        let (_peer, _) = listener.accept().await.unwrap();
        let mut written = 0;
        write_counting(&mut fresh, b"GET / HTTP/1.1\r\n\r\n", &mut written)
            .await
            .unwrap();
        assert_eq!(written, 18);
    }
}
