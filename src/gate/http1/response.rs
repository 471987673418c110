//! A response head as the gate reads it from the upstream and writes it to the client:
//! its framing decides where the body ends and whether the upstream connection can be
//! used again; its connection-level headers stay behind.

use super::framing::{Framing, FramingHeaders};
use super::head::{
    connection_tokens, hop_by_hop, incomplete, parse_error, push_header, push_u64,
    ConnectionTokens, HeadError, Headers,
};

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
        httparse::Status::Partial => return incomplete(buf),
    };
    // httparse reads any three digits; RFC 9110 section 15 makes a code outside 100..=599
    // invalid. "004" would reach the client as "4", which no client parses.
    let (Some(status @ 100..=599), Some(version)) = (resp.code, resp.version) else {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::http1::head::empty_headers;

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
    fn a_status_outside_100_to_599_is_malformed_not_rewritten() {
        for wire in [
            &b"HTTP/1.1 004 No Content\r\n\r\n"[..],
            b"HTTP/1.1 099 X\r\n\r\n",
            b"HTTP/1.1 600 X\r\n\r\n",
        ] {
            let mut headers = empty_headers();
            assert!(
                matches!(
                    parse_response(wire, &mut headers, false),
                    Err(HeadError::Malformed(httparse::Error::Status))
                ),
                "{}",
                String::from_utf8_lossy(wire)
            );
        }
        let mut headers = empty_headers();
        let ok = parse_response(b"HTTP/1.1 599 X\r\n\r\n", &mut headers, false);
        assert_eq!(ok.unwrap().unwrap().status, 599);
    }
}
