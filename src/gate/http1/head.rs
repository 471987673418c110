//! Message heads: reading a request or response head out of a connection's buffer
//! (httparse, no copies), and writing the head the gate sends on. The request goes to the
//! upstream in origin form with the connection-level headers dropped and `x-deadline-ms`
//! set; the response goes back with its own connection-level headers dropped. Everything
//! else passes through as it came, in order, duplicates included.

use super::framing::{Framing, FramingError, FramingHeaders};

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
}

fn parse_error(e: httparse::Error) -> HeadError {
    match e {
        httparse::Error::TooManyHeaders => HeadError::TooLarge,
        e => HeadError::Malformed(e),
    }
}

/// Whether `buf` holds a complete head yet, or can never hold one.
fn incomplete(buf: &[u8]) -> Result<Option<std::convert::Infallible>, HeadError> {
    if buf.len() >= MAX_HEAD {
        Err(HeadError::TooLarge)
    } else {
        Ok(None)
    }
}

/// The Connection header's tokens, as they affect this hop.
#[derive(Default, Clone, Copy)]
struct ConnectionTokens {
    close: bool,
    keep_alive: bool,
    /// It names other headers too, which then are connection-level and dropped.
    names_others: bool,
}

fn connection_tokens(headers: &[httparse::Header<'_>]) -> ConnectionTokens {
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
            }
        }
    }
    t
}

/// Whether `name` is connection-level in a head whose Connection header is `conn`.
fn hop_by_hop(name: &str, headers: &[httparse::Header<'_>], tokens: ConnectionTokens) -> bool {
    if HOP_BY_HOP.iter().any(|h| name.eq_ignore_ascii_case(h)) {
        return true;
    }
    tokens.names_others
        && headers
            .iter()
            .filter(|h| h.name.eq_ignore_ascii_case("connection"))
            .flat_map(|h| h.value.split(|&b| b == b','))
            .any(|t| t.trim_ascii().eq_ignore_ascii_case(name.as_bytes()))
}

/// A complete request head, borrowed from the connection's buffer.
pub struct RequestHead<'h, 'b> {
    method: &'b str,
    target: &'b str,
    http10: bool,
    headers: &'h [httparse::Header<'b>],
    tokens: ConnectionTokens,
    /// Bytes of the head, including its final empty line.
    pub len: usize,
    pub framing: Framing,
    /// The client waits for `100 Continue` before it sends the body.
    pub expect_continue: bool,
}

/// Parse a request head from the start of `buf`; `Ok(None)` until all of it has arrived.
pub fn parse_request<'h, 'b>(
    buf: &'b [u8],
    headers: &'h mut Headers<'b>,
) -> Result<Option<RequestHead<'h, 'b>>, HeadError> {
    let mut req = httparse::Request::new(headers);
    let len = match req.parse(buf).map_err(parse_error)? {
        httparse::Status::Complete(len) => len,
        httparse::Status::Partial => return incomplete(buf).map(|_| None),
    };
    let (Some(method), Some(target), Some(version)) = (req.method, req.path, req.version) else {
        return Err(HeadError::Malformed(httparse::Error::Token));
    };
    let headers: &'h [httparse::Header<'b>] = req.headers;
    let mut framing = FramingHeaders::default();
    let mut expect_continue = false;
    for h in headers {
        if framing.note(h.name, h.value) {
            continue;
        }
        if h.name.eq_ignore_ascii_case("upgrade") {
            return Err(HeadError::Tunnel);
        }
        if h.name.eq_ignore_ascii_case("expect") && h.value.eq_ignore_ascii_case(b"100-continue") {
            expect_continue = true;
        }
    }
    if method.eq_ignore_ascii_case("CONNECT") {
        return Err(HeadError::Tunnel);
    }
    Ok(Some(RequestHead {
        method,
        target,
        http10: version == 0,
        headers,
        tokens: connection_tokens(headers),
        len,
        framing: framing.request()?,
        expect_continue,
    }))
}

impl RequestHead<'_, '_> {
    /// The first value of header `name`.
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value)
    }

    /// Whether the response to this request has no body whatever its headers say.
    pub fn is_head(&self) -> bool {
        self.method.eq_ignore_ascii_case("HEAD")
    }

    /// Whether the client wants the connection kept for another request. HTTP/1.0
    /// clients are always answered and closed: their keep-alive is an opt-in the gate
    /// does not need to support.
    pub fn keep_alive(&self) -> bool {
        !self.http10 && !self.tokens.close
    }

    /// Write the head sent upstream: origin form, HTTP/1.1 (1.0 for a 1.0 client, so the
    /// upstream answers in a form it understands), connection-level headers, Expect and
    /// any client `x-deadline-ms` dropped, then Host if the client sent none, then ours.
    pub fn write_upstream(&self, out: &mut Vec<u8>, fallback_host: &str, deadline_epoch_ms: u64) {
        out.extend_from_slice(self.method.as_bytes());
        out.push(b' ');
        out.extend_from_slice(origin_form(self.target).as_bytes());
        out.extend_from_slice(if self.http10 {
            b" HTTP/1.0\r\n"
        } else {
            b" HTTP/1.1\r\n"
        });
        let mut has_host = false;
        for h in self.headers {
            if hop_by_hop(h.name, self.headers, self.tokens)
                || h.name.eq_ignore_ascii_case(super::super::deadline::HEADER)
                || h.name.eq_ignore_ascii_case("expect")
            {
                continue;
            }
            has_host |= h.name.eq_ignore_ascii_case("host");
            push_header(out, h.name.as_bytes(), h.value);
        }
        if !has_host {
            push_header(out, b"host", fallback_host.as_bytes());
        }
        out.extend_from_slice(super::super::deadline::HEADER.as_bytes());
        out.extend_from_slice(b": ");
        push_u64(out, deadline_epoch_ms);
        out.extend_from_slice(b"\r\n\r\n");
    }
}

/// `http://host/p?q` -> `/p?q`; origin form and `*` stay as they are.
fn origin_form(target: &str) -> &str {
    if target.starts_with('/') || target == "*" {
        return target;
    }
    let after_scheme = target.find("://").map_or(target, |i| &target[i + 3..]);
    match after_scheme.find(['/', '?']) {
        Some(i) if after_scheme[i..].starts_with('/') => &after_scheme[i..],
        _ => "/",
    }
}

/// A complete response head, borrowed from the upstream connection's buffer.
pub struct ResponseHead<'h, 'b> {
    pub status: u16,
    reason: &'b str,
    headers: &'h [httparse::Header<'b>],
    tokens: ConnectionTokens,
    http11: bool,
    pub len: usize,
    pub framing: Framing,
}

/// Parse a response head from the start of `buf`; `Ok(None)` until all of it has arrived.
pub fn parse_response<'h, 'b>(
    buf: &'b [u8],
    headers: &'h mut Headers<'b>,
    head_request: bool,
) -> Result<Option<ResponseHead<'h, 'b>>, HeadError> {
    let mut resp = httparse::Response::new(headers);
    let len = match resp.parse(buf).map_err(parse_error)? {
        httparse::Status::Complete(len) => len,
        httparse::Status::Partial => return incomplete(buf).map(|_| None),
    };
    let (Some(status), Some(version)) = (resp.code, resp.version) else {
        return Err(HeadError::Malformed(httparse::Error::Status));
    };
    if status == 101 {
        return Err(HeadError::Tunnel);
    }
    let headers: &'h [httparse::Header<'b>] = resp.headers;
    let mut framing = FramingHeaders::default();
    for h in headers {
        framing.note(h.name, h.value);
    }
    Ok(Some(ResponseHead {
        status,
        reason: resp.reason.unwrap_or(""),
        headers,
        tokens: connection_tokens(headers),
        http11: version == 1,
        len,
        framing: framing.response(head_request, status)?,
    }))
}

impl ResponseHead<'_, '_> {
    /// An interim response (`100 Continue` and the like): the final one follows.
    pub fn is_interim(&self) -> bool {
        (100..200).contains(&self.status)
    }

    /// Whether the upstream connection can carry another request after this response.
    pub fn reusable(&self) -> bool {
        self.http11 && !self.tokens.close && self.framing != Framing::UntilClose
    }

    /// Write the head sent to the client, with `connection: close` when the gate will
    /// close the client connection after this response.
    pub fn write_client(&self, out: &mut Vec<u8>, close: bool) {
        out.extend_from_slice(b"HTTP/1.1 ");
        push_u64(out, u64::from(self.status));
        out.push(b' ');
        out.extend_from_slice(self.reason.as_bytes());
        out.extend_from_slice(b"\r\n");
        for h in self.headers {
            if !hop_by_hop(h.name, self.headers, self.tokens) {
                push_header(out, h.name.as_bytes(), h.value);
            }
        }
        if close {
            out.extend_from_slice(b"connection: close\r\n");
        }
        out.extend_from_slice(b"\r\n");
    }
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

fn push_header(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

fn push_u64(out: &mut Vec<u8>, mut n: u64) {
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

    fn forwarded(wire: &str) -> String {
        let mut headers = empty_headers();
        let head = parse_request(wire.as_bytes(), &mut headers)
            .unwrap()
            .unwrap();
        let mut out = Vec::new();
        head.write_upstream(&mut out, "replica:9001", 1_780_000_000_123);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_upstream_gets_origin_form_without_connection_headers_and_with_our_deadline() {
        let out = forwarded(
            "GET http://edge.test/a/b?c=1 HTTP/1.1\r\nHost: edge.test\r\nConnection: keep-alive, x-private\r\n\
             Keep-Alive: timeout=5\r\nx-private: secret\r\nx-deadline-ms: 300\r\nTE: trailers\r\n\
             set-cookie: a\r\nset-cookie: b\r\nExpect: 100-continue\r\n\r\n",
        );
        assert_eq!(
            out,
            "GET /a/b?c=1 HTTP/1.1\r\nHost: edge.test\r\nset-cookie: a\r\nset-cookie: b\r\n\
             x-deadline-ms: 1780000000123\r\n\r\n"
        );
    }

    #[test]
    fn a_request_without_host_gets_the_replicas() {
        let out = forwarded("GET /x HTTP/1.0\r\n\r\n");
        assert_eq!(
            out,
            "GET /x HTTP/1.0\r\nhost: replica:9001\r\nx-deadline-ms: 1780000000123\r\n\r\n"
        );
    }

    #[test]
    fn origin_form_of_each_target_form() {
        assert_eq!(origin_form("/p?q"), "/p?q");
        assert_eq!(origin_form("*"), "*");
        assert_eq!(origin_form("http://h:8/p"), "/p");
        assert_eq!(origin_form("http://h:8"), "/");
        assert_eq!(origin_form("http://h?q=1"), "/");
    }

    #[test]
    fn keep_alive_and_tunnels() {
        let parse = |w: &str| {
            let mut headers = empty_headers();
            parse_request(w.as_bytes(), &mut headers).map(|h| h.map(|h| h.keep_alive()))
        };
        assert!(matches!(parse("GET / HTTP/1.1\r\n\r\n"), Ok(Some(true))));
        assert!(matches!(
            parse("GET / HTTP/1.1\r\nConnection: Close\r\n\r\n"),
            Ok(Some(false))
        ));
        assert!(matches!(
            parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"),
            Ok(Some(false))
        ));
        assert!(matches!(parse("GET / HTTP/1.1\r\n"), Ok(None)));
        assert!(matches!(
            parse("GET / HTTP/1.1\r\nUpgrade: websocket\r\n\r\n"),
            Err(HeadError::Tunnel)
        ));
        assert!(matches!(
            parse("CONNECT h:443 HTTP/1.1\r\n\r\n"),
            Err(HeadError::Tunnel)
        ));
        assert!(matches!(
            parse("GARBAGE\r\n\r\n"),
            Err(HeadError::Malformed(_))
        ));
        let huge = format!("GET / HTTP/1.1\r\nx: {}", "a".repeat(MAX_HEAD));
        assert!(matches!(parse(&huge), Err(HeadError::TooLarge)));
    }

    #[test]
    fn the_client_gets_the_response_without_the_upstreams_connection_headers() {
        let wire = b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\nContent-Length: 3\r\nx-a: 1\r\n\r\nok\n";
        let mut headers = empty_headers();
        let head = parse_response(wire, &mut headers, false).unwrap().unwrap();
        assert_eq!(head.framing, Framing::Length(3));
        assert!(head.reusable());
        let mut out = Vec::new();
        head.write_client(&mut out, true);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nx-a: 1\r\nconnection: close\r\n\r\n"
        );
        let mut headers = empty_headers();
        let old = parse_response(b"HTTP/1.0 200 OK\r\n\r\n", &mut headers, false)
            .unwrap()
            .unwrap();
        assert_eq!(old.framing, Framing::UntilClose);
        assert!(!old.reusable());
    }

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
