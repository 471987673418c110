//! A request head as the gate reads it from a client and writes it to the upstream:
//! origin form, HTTP/1.1, the connection-level headers, `Expect` and any client
//! `x-deadline-ms` dropped, and the gate's own deadline added. A request in absolute form
//! (`GET http://h/p`) goes up with `Host: h` whatever Host it came with (RFC 9112
//! §3.2.2): the target names the host, and a service must not see one host in the path
//! it was asked for and another in the Host it routes on.

use super::framing::{Framing, FramingHeaders};
use super::head::{
    connection_tokens, hop_by_hop, incomplete, parse_error, push_header, push_u64,
    ConnectionTokens, HeadError, Headers,
};

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
        httparse::Status::Partial => return incomplete(buf),
    };
    let (Some(method), Some(target), Some(version)) = (req.method, req.path, req.version) else {
        return Err(HeadError::Malformed(httparse::Error::Token));
    };
    let headers: &'h [httparse::Header<'b>] = req.headers;
    let http10 = version == 0;
    let mut framing = FramingHeaders::default();
    let mut expect_continue = false;
    let mut hosts = 0;
    for h in headers {
        if framing.note(h.name, h.value) {
            if http10 && h.name.eq_ignore_ascii_case("transfer-encoding") {
                return Err(HeadError::EncodingInHttp10);
            }
            continue;
        }
        if h.name.eq_ignore_ascii_case("host") {
            hosts += 1;
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
    if hosts > 1 || (hosts == 0 && !http10) {
        return Err(HeadError::HostCount(hosts));
    }
    if absolute_form(target).is_some_and(|(authority, _)| authority.is_empty()) {
        return Err(HeadError::Malformed(httparse::Error::Token));
    }
    let tokens = connection_tokens(headers);
    if let Some(name) = tokens.names_end_to_end {
        return Err(HeadError::ConnectionNamesEndToEnd(name));
    }
    Ok(Some(RequestHead {
        method,
        target,
        http10,
        headers,
        tokens,
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

    pub fn method(&self) -> &str {
        self.method
    }

    /// Whether the client wants the connection kept for another request. HTTP/1.0
    /// clients are always answered and closed: their keep-alive is an opt-in the gate
    /// does not need to support.
    pub fn keep_alive(&self) -> bool {
        !self.http10 && !self.tokens.close
    }

    /// Write the head sent upstream: origin form, HTTP/1.1 (1.0 for a 1.0 client, so the
    /// upstream answers in a form it understands), connection-level headers, Expect and
    /// any client `x-deadline-ms` dropped, Host the absolute-form target's when there is
    /// one, then Host if the client sent none, then ours.
    pub fn write_upstream(&self, out: &mut Vec<u8>, fallback_host: &str, deadline_epoch_ms: u64) {
        let absolute = absolute_form(self.target);
        out.extend_from_slice(self.method.as_bytes());
        out.push(b' ');
        match absolute {
            Some((_, path)) if path.starts_with('/') => out.extend_from_slice(path.as_bytes()),
            Some((_, path)) => {
                out.push(b'/'); // an empty path, maybe a query: `http://h?q` is `/?q`
                out.extend_from_slice(path.as_bytes());
            }
            None => out.extend_from_slice(self.target.as_bytes()),
        }
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
            let mut value = h.value;
            if h.name.eq_ignore_ascii_case("host") {
                has_host = true;
                value = absolute.map_or(value, |(authority, _)| authority.as_bytes());
            }
            push_header(out, h.name.as_bytes(), value);
        }
        if !has_host {
            let host = absolute.map_or(fallback_host, |(authority, _)| authority);
            push_header(out, b"host", host.as_bytes());
        }
        out.extend_from_slice(super::super::deadline::HEADER.as_bytes());
        out.extend_from_slice(b": ");
        push_u64(out, deadline_epoch_ms);
        out.extend_from_slice(b"\r\n\r\n");
    }
}

/// `http://user@host:8/p?q` -> `("host:8", "/p?q")`; `None` for origin form and `*`.
/// The path part is empty or starts with `/` or `?`.
fn absolute_form(target: &str) -> Option<(&str, &str)> {
    if target.starts_with('/') || target == "*" {
        return None;
    }
    let after_scheme = target.find("://").map_or(target, |i| &target[i + 3..]);
    let end = after_scheme.find(['/', '?']).unwrap_or(after_scheme.len());
    let (authority, path) = after_scheme.split_at(end);
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    Some((host, path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::http1::head::{empty_headers, MAX_HEAD};

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
    fn absolute_form_is_split_into_host_and_origin_form() {
        assert_eq!(absolute_form("/p?q"), None);
        assert_eq!(absolute_form("*"), None);
        assert_eq!(absolute_form("http://h:8/p"), Some(("h:8", "/p")));
        assert_eq!(absolute_form("http://h:8"), Some(("h:8", "")));
        assert_eq!(absolute_form("http://h?q=1"), Some(("h", "?q=1")));
        assert_eq!(absolute_form("http://u:pw@h/x"), Some(("h", "/x")));
    }

    #[test]
    fn an_absolute_form_request_goes_up_with_the_targets_host() {
        let out = forwarded(
            "GET http://target.test:8080/a?b=1 HTTP/1.1\r\nHost: client.test\r\nx-a: 1\r\n\r\n",
        );
        assert_eq!(
            out,
            "GET /a?b=1 HTTP/1.1\r\nHost: target.test:8080\r\nx-a: 1\r\n\
             x-deadline-ms: 1780000000123\r\n\r\n"
        );
        let out = forwarded("GET http://target.test?q HTTP/1.0\r\n\r\n");
        assert!(
            out.starts_with("GET /?q HTTP/1.0\r\nhost: target.test\r\n"),
            "{out}"
        );
        let mut headers = empty_headers();
        assert!(matches!(
            parse_request(b"GET http:///p HTTP/1.1\r\nHost: h\r\n\r\n", &mut headers),
            Err(HeadError::Malformed(_))
        ));
    }

    #[test]
    fn keep_alive_and_tunnels() {
        let parse = |w: &str| {
            let mut headers = empty_headers();
            parse_request(w.as_bytes(), &mut headers).map(|h| h.map(|h| h.keep_alive()))
        };
        assert!(matches!(
            parse("GET / HTTP/1.1\r\nHost: h\r\n\r\n"),
            Ok(Some(true))
        ));
        assert!(matches!(
            parse("GET / HTTP/1.1\r\nHost: h\r\nConnection: Close\r\n\r\n"),
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
    fn heads_that_would_smuggle_or_confuse_the_host_are_refused() {
        let parse = |w: &str| {
            let mut headers = empty_headers();
            parse_request(w.as_bytes(), &mut headers).map(|h| h.is_some())
        };
        for name in ["content-length", "Transfer-Encoding", "HOST"] {
            let wire = format!(
                "POST / HTTP/1.1\r\nHost: h\r\nConnection: close, {name}\r\nContent-Length: 0\r\n\r\n"
            );
            assert!(
                matches!(parse(&wire), Err(HeadError::ConnectionNamesEndToEnd(_))),
                "{name}"
            );
        }
        assert!(matches!(
            parse("GET / HTTP/1.1\r\n\r\n"),
            Err(HeadError::HostCount(0))
        ));
        assert!(matches!(
            parse("GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n"),
            Err(HeadError::HostCount(2))
        ));
        assert!(matches!(
            parse("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Err(HeadError::EncodingInHttp10)
        ));
        assert!(matches!(parse("GET / HTTP/1.0\r\n\r\n"), Ok(true)));
    }
}
