//! Reading a request head that arrives in pieces without parsing it again from the start
//! on every read. A client may send its head a byte per packet, and parsing the whole
//! buffer after each byte costs the square of its length: eight connections dripping a
//! byte per packet kept the gate busy for 8 CPU-seconds in 9.5 s. A head can only become
//! complete, and a line only become checkable, when a line ends, so the buffer is parsed
//! again only when new bytes hold a `\n`: once per line at most, and a head has at most
//! 65 lines (the request line and 64 headers) before it is refused. Empty lines before a
//! request line, which a server may ignore (RFC 9112 §2.2), are dropped as they come, so
//! they cannot stand in for lines without a limit.

use super::head::{incomplete, HeadError, Headers};
use super::request::{parse_request, RequestHead};

/// How far into the connection's buffer the last look went.
#[derive(Debug, Default, Clone, Copy)]
pub struct HeadScan {
    seen: usize,
}

impl HeadScan {
    /// Whether parsing `buf` again can tell anything new: it gained a line end since the
    /// last look (everything counts as new after [`HeadScan::reset`]).
    pub fn worth_parsing(&mut self, buf: &[u8]) -> bool {
        let from = self.seen.min(buf.len());
        self.seen = buf.len();
        buf[from..].contains(&b'\n')
    }

    /// The buffer was consumed or cut: look at all of it next time.
    pub fn reset(&mut self) {
        self.seen = 0;
    }
}

/// Bytes of empty lines (`\r\n` or `\n`) at the start of `buf`, to drop before a
/// request line.
pub fn leading_empty_lines(buf: &[u8]) -> usize {
    let mut i = 0;
    loop {
        match buf.get(i..) {
            Some([b'\n', ..]) => i += 1,
            Some([b'\r', b'\n', ..]) => i += 2,
            _ => return i,
        }
    }
}

/// [`parse_request`] on a buffer that grew since the last call, parsing only when that
/// can tell something new: `Ok(None)` until then, as for a head not complete yet (a
/// buffer over the head limit is refused all the same). The scan starts again after a
/// head or an error.
pub fn parse_request_scanned<'h, 'b>(
    buf: &'b [u8],
    headers: &'h mut Headers<'b>,
    scan: &mut HeadScan,
) -> Result<Option<RequestHead<'h, 'b>>, HeadError> {
    if !scan.worth_parsing(buf) {
        return incomplete(buf);
    }
    let parsed = parse_request(buf, headers);
    if !matches!(parsed, Ok(None)) {
        scan.reset();
    }
    parsed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::http1::head::empty_headers;

    /// Feed `wire` a byte at a time; how many full parses it took to get the head.
    fn parses_byte_by_byte(wire: &[u8]) -> (usize, Option<usize>) {
        let mut scan = HeadScan::default();
        let mut parses = 0;
        for end in 1..=wire.len() {
            let buf = &wire[..end];
            let mut probe = scan;
            if probe.worth_parsing(buf) {
                parses += 1;
            }
            let mut headers = empty_headers();
            match parse_request_scanned(buf, &mut headers, &mut scan) {
                Ok(Some(h)) => return (parses, Some(h.len)),
                Ok(None) => {}
                Err(_) => return (parses, None),
            }
        }
        (parses, None)
    }

    #[test]
    fn a_head_dripped_a_byte_at_a_time_is_parsed_once_per_line() {
        let mut wire = b"GET /some/path HTTP/1.1\r\nhost: gate.test\r\n".to_vec();
        for i in 0..40 {
            wire.extend_from_slice(format!("x-header-{i}: {}\r\n", "v".repeat(200)).as_bytes());
        }
        wire.extend_from_slice(b"\r\n");
        let (parses, len) = parses_byte_by_byte(&wire);
        assert_eq!(len, Some(wire.len()));
        assert_eq!(
            parses,
            43,
            "one per line, not one per byte ({} bytes)",
            wire.len()
        );
    }

    #[test]
    fn empty_lines_before_a_request_line_are_dropped() {
        assert_eq!(leading_empty_lines(b"\r\n\n\r\nGET"), 5);
        assert_eq!(leading_empty_lines(b"\r"), 0, "maybe the start of one");
        assert_eq!(leading_empty_lines(b"GET / HTTP/1.1\r\n\r\n"), 0);
        assert_eq!(leading_empty_lines(b""), 0);
    }

    #[test]
    fn an_error_is_found_when_its_line_ends() {
        let mut scan = HeadScan::default();
        let mut headers = empty_headers();
        assert!(matches!(
            parse_request_scanned(b"GE\x01T", &mut headers, &mut scan),
            Ok(None)
        ));
        let mut headers = empty_headers();
        assert!(parse_request_scanned(b"GE\x01T / HTTP/1.1\r\n", &mut headers, &mut scan).is_err());
        let big = vec![b'a'; super::super::head::MAX_HEAD];
        let mut headers = empty_headers();
        assert!(matches!(
            parse_request_scanned(&big, &mut headers, &mut HeadScan::default()),
            Err(HeadError::TooLarge)
        ));
    }
}
