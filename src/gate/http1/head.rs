//! What request and response heads share: the limits on their size, the connection-level
//! (hop-by-hop) headers that stop at the gate, why a head is refused, and writing bytes
//! into a head. [`super::request`] and [`super::response`] read and rewrite each kind,
//! in place (httparse, no copies); everything not connection-level passes through as it
//! came, in order, duplicates included.

use super::framing::FramingError;

/// A head longer than this is refused (431 from a client, 502 from an upstream).
pub const MAX_HEAD: usize = 64 * 1024;
/// Header lines per head; more is refused like an oversized head.
pub const MAX_HEADERS: usize = 64;

pub type Headers<'b> = [httparse::Header<'b>; MAX_HEADERS];

pub fn empty_headers<'b>() -> Headers<'b> {
    [httparse::EMPTY_HEADER; MAX_HEADERS]
}

/// Headers that describe one connection, not the message: never forwarded (RFC 9110
/// §7.6.1), together with any header the Connection header names.
const HOP_BY_HOP: [&str; 6] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
];

/// Why a head cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum HeadError {
    #[error("malformed head: {0}")]
    Malformed(httparse::Error),
    #[error("head larger than {MAX_HEAD} bytes or {MAX_HEADERS} headers")]
    TooLarge,
    #[error("{0}")]
    Framing(#[from] FramingError),
    /// Upgrade and CONNECT would turn the connection into a tunnel the gate cannot meter.
    #[error("protocol upgrades and CONNECT are not proxied")]
    Tunnel,
    /// A Connection header naming a header that frames or routes the message. Dropping
    /// it as hop-by-hop while framing the body by it is how one admitted request carries
    /// others past the rate limit, so such a head is refused rather than rewritten.
    #[error("Connection names {0}, which is never a connection option")]
    ConnectionNamesEndToEnd(&'static str),
    /// RFC 9112 §3.2: exactly one Host in HTTP/1.1, at most one in HTTP/1.0.
    #[error("{0} Host headers (a request needs exactly one)")]
    HostCount(usize),
    /// RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding has faulty framing.
    #[error("Transfer-Encoding in an HTTP/1.0 request")]
    EncodingInHttp10,
}

pub(super) fn parse_error(e: httparse::Error) -> HeadError {
    match e {
        httparse::Error::TooManyHeaders => HeadError::TooLarge,
        e => HeadError::Malformed(e),
    }
}

/// A head not complete yet: wait for more, unless `buf` already holds more than any head may.
pub(super) fn incomplete<T>(buf: &[u8]) -> Result<Option<T>, HeadError> {
    if buf.len() >= MAX_HEAD {
        Err(HeadError::TooLarge)
    } else {
        Ok(None)
    }
}

/// Headers that decide where a message ends or where it goes: whatever Connection says,
/// they are never dropped as connection-level.
const END_TO_END: [&str; 3] = ["content-length", "transfer-encoding", "host"];

/// The Connection header's tokens, as they affect this hop.
#[derive(Default, Clone, Copy)]
pub(super) struct ConnectionTokens {
    pub close: bool,
    pub keep_alive: bool,
    /// It names other headers too, which then are connection-level and dropped.
    names_others: bool,
    /// It names one of [`END_TO_END`] (a request naming one is refused).
    pub names_end_to_end: Option<&'static str>,
}

pub(super) fn connection_tokens(headers: &[httparse::Header<'_>]) -> ConnectionTokens {
    let mut t = ConnectionTokens::default();
    for h in headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("connection"))
    {
        for token in h.value.split(|&b| b == b',').map(|v| v.trim_ascii()) {
            if token.eq_ignore_ascii_case(b"close") {
                t.close = true;
            } else if token.eq_ignore_ascii_case(b"keep-alive") {
                t.keep_alive = true;
            } else if !token.is_empty() {
                t.names_others = true;
                if let Some(name) = END_TO_END
                    .iter()
                    .find(|n| token.eq_ignore_ascii_case(n.as_bytes()))
                {
                    t.names_end_to_end.get_or_insert(name);
                }
            }
        }
    }
    t
}

/// Whether `name` is connection-level in a head whose Connection header is `conn`.
pub(super) fn hop_by_hop(
    name: &str,
    headers: &[httparse::Header<'_>],
    tokens: ConnectionTokens,
) -> bool {
    if HOP_BY_HOP.iter().any(|h| name.eq_ignore_ascii_case(h)) {
        return true;
    }
    tokens.names_others
        && !END_TO_END.iter().any(|h| name.eq_ignore_ascii_case(h))
        && headers
            .iter()
            .filter(|h| h.name.eq_ignore_ascii_case("connection"))
            .flat_map(|h| h.value.split(|&b| b == b','))
            .any(|t| t.trim_ascii().eq_ignore_ascii_case(name.as_bytes()))
}

/// A response the gate makes up itself (429, 502, ...): plain text, always framed, dated
/// (RFC 9110 §6.6.1: a server with a clock dates what it originates).
pub fn write_own(
    out: &mut Vec<u8>,
    status: &str,
    retry_after_s: Option<u64>,
    body: &str,
    close: bool,
) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_bytes());
    out.extend_from_slice(b"\r\ndate: ");
    push_date(out);
    out.extend_from_slice(b"\r\ncontent-type: text/plain; charset=utf-8\r\n");
    if let Some(s) = retry_after_s {
        out.extend_from_slice(b"retry-after: ");
        push_u64(out, s);
        out.extend_from_slice(b"\r\n");
    }
    if close {
        out.extend_from_slice(b"connection: close\r\n");
    }
    out.extend_from_slice(b"content-length: ");
    push_u64(out, body.len() as u64);
    out.extend_from_slice(b"\r\n\r\n");
    out.extend_from_slice(body.as_bytes());
}

/// The second since the epoch a `Date` written now shows.
pub fn now_second() -> u64 {
    use std::time::{SystemTime, UNIX_EPOCH};
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The current HTTP date, formatted once a second per thread: a rejecting gate writes
/// hundreds of thousands of these a second.
fn push_date(out: &mut Vec<u8>) {
    use std::cell::RefCell;
    use std::time::{SystemTime, UNIX_EPOCH};
    thread_local! {
        static DATE: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
    }
    let now = SystemTime::now();
    let second = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    DATE.with_borrow_mut(|(at, text)| {
        if *at != second {
            *at = second;
            *text = httpdate::fmt_http_date(now);
        }
        out.extend_from_slice(text.as_bytes());
    });
}

pub(super) fn push_header(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

pub(super) fn push_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_responses_are_framed() {
        let mut out = Vec::new();
        write_own(
            &mut out,
            "429 Too Many Requests",
            Some(3),
            "slow down\n",
            false,
        );
        let text = String::from_utf8(out).unwrap();
        let (status, rest) = text.split_once("\r\ndate: ").unwrap();
        let (date, rest) = rest.split_once("\r\n").unwrap();
        assert_eq!(status, "HTTP/1.1 429 Too Many Requests");
        let age = std::time::SystemTime::now()
            .duration_since(httpdate::parse_http_date(date).unwrap())
            .unwrap_or_default();
        assert!(age.as_secs() <= 2, "{date}");
        assert_eq!(
            rest,
            "content-type: text/plain; charset=utf-8\r\n\
             retry-after: 3\r\ncontent-length: 10\r\n\r\nslow down\n"
        );
    }
}
