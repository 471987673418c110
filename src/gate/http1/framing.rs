//! Where a message body ends (RFC 9112 §6). The gate passes bodies through byte for byte,
//! chunked encoding included, so it never decodes one; it only has to know where each
//! body ends, to find the next request on a keep-alive connection and to know when an
//! upstream connection is free again. Getting this wrong is how request smuggling starts,
//! so anything ambiguous (both Content-Length and Transfer-Encoding, whatever the latter
//! says, even nothing; two different lengths; a coding other than chunked; an empty coding
//! as in `,chunked`, which parsers read differently) is refused rather than guessed.

/// How a message's body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body at all.
    Empty,
    /// Exactly this many bytes.
    Length(u64),
    /// Chunked transfer coding, passed through as it came.
    Chunked,
    /// Everything until the sender closes (responses only).
    UntilClose,
}

/// A body delimitation the gate refuses to guess at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FramingError {
    #[error("both Content-Length and Transfer-Encoding")]
    LengthAndEncoding,
    #[error("Content-Length is not a number, or two of them differ")]
    BadLength,
    #[error("a transfer coding other than chunked")]
    UnsupportedCoding,
    #[error("an empty Transfer-Encoding, or an empty coding in its list")]
    EmptyCoding,
    #[error("malformed chunked body")]
    BadChunk,
}

/// The two headers that decide framing, as collected from a head.
#[derive(Debug, Default, Clone, Copy)]
pub struct FramingHeaders {
    length: Option<u64>,
    length_conflict: bool,
    /// A Transfer-Encoding header came, whatever its value.
    encoding: bool,
    /// Some(true) when the last coding named is chunked.
    chunked_last: Option<bool>,
    other_coding: bool,
    /// An empty value, or an empty element in the list (`,chunked`, `chunked,`).
    empty_coding: bool,
}

impl FramingHeaders {
    /// Feed one header; other names are ignored. Returns whether the name was one of ours.
    pub fn note(&mut self, name: &str, value: &[u8]) -> bool {
        if name.eq_ignore_ascii_case("content-length") {
            match parse_length(value) {
                Some(v) if self.length.is_none_or(|l| l == v) => self.length = Some(v),
                _ => self.length_conflict = true,
            }
            true
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            self.encoding = true;
            for coding in value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                if coding.is_empty() {
                    self.empty_coding = true;
                    continue;
                }
                let chunked = coding.eq_ignore_ascii_case(b"chunked");
                if self.chunked_last == Some(true) || !chunked {
                    // chunked must come last and only once (RFC 9112 §6.1)
                    self.other_coding = true;
                }
                self.chunked_last = Some(chunked);
            }
            true
        } else {
            false
        }
    }

    /// A request's body: no length and no coding means no body.
    pub fn request(&self) -> Result<Framing, FramingError> {
        if self.encoding {
            return if self.length.is_some() || self.length_conflict {
                Err(FramingError::LengthAndEncoding)
            } else if self.empty_coding {
                Err(FramingError::EmptyCoding)
            } else if self.other_coding || self.chunked_last != Some(true) {
                Err(FramingError::UnsupportedCoding)
            } else {
                Ok(Framing::Chunked)
            };
        }
        match self.length {
            _ if self.length_conflict => Err(FramingError::BadLength),
            Some(0) | None => Ok(Framing::Empty),
            Some(n) => Ok(Framing::Length(n)),
        }
    }

    /// A response's body, given the request's method and the status (RFC 9112 §6.3). A
    /// Transfer-Encoding that is not exactly `chunked` last means the body runs until the
    /// upstream closes, and the client connection closes after it: no guess at a length
    /// the client might read differently.
    pub fn response(&self, head_request: bool, status: u16) -> Result<Framing, FramingError> {
        if head_request || (100..200).contains(&status) || status == 204 || status == 304 {
            return Ok(Framing::Empty);
        }
        if self.encoding {
            let plain_chunked =
                self.chunked_last == Some(true) && !self.other_coding && !self.empty_coding;
            return Ok(if plain_chunked {
                Framing::Chunked
            } else {
                Framing::UntilClose
            });
        }
        match self.length {
            _ if self.length_conflict => Err(FramingError::BadLength),
            Some(0) => Ok(Framing::Empty),
            Some(n) => Ok(Framing::Length(n)),
            None => Ok(Framing::UntilClose),
        }
    }
}

fn parse_length(v: &[u8]) -> Option<u64> {
    let v = v.trim_ascii();
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// Progress through one body as its bytes go by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyCursor {
    state: State,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Done,
    Remaining(u64),
    UntilClose,
    /// Inside a chunk-size line: the size so far and how many hex digits it had.
    Size {
        size: u64,
        digits: u8,
    },
    /// After the size, up to the line's CR: chunk extensions, ignored.
    Extension {
        size: u64,
    },
    SizeLf {
        size: u64,
    },
    Data(u64),
    DataCr,
    DataLf,
    /// At the start of a trailer line (or of the final empty line).
    TrailerStart,
    TrailerLine,
    TrailerLf,
    EndLf,
}

impl BodyCursor {
    pub fn new(framing: Framing) -> Self {
        let state = match framing {
            Framing::Empty | Framing::Length(0) => State::Done,
            Framing::Length(n) => State::Remaining(n),
            Framing::Chunked => State::Size { size: 0, digits: 0 },
            Framing::UntilClose => State::UntilClose,
        };
        BodyCursor { state }
    }

    /// The body has ended; bytes after it belong to the next message.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Only the sender closing the connection ends this body.
    pub fn until_close(&self) -> bool {
        self.state == State::UntilClose
    }

    /// How many leading bytes of `bytes` belong to this body.
    pub fn advance(&mut self, bytes: &[u8]) -> Result<usize, FramingError> {
        let mut i = 0;
        while i < bytes.len() {
            match self.state {
                State::Done => break,
                State::UntilClose => return Ok(bytes.len()),
                State::Remaining(n) | State::Data(n) => {
                    let take = n.min((bytes.len() - i) as u64);
                    i += take as usize;
                    let left = n - take;
                    self.state = match (self.state, left) {
                        (State::Remaining(_), 0) => State::Done,
                        (State::Remaining(_), l) => State::Remaining(l),
                        (_, 0) => State::DataCr,
                        (_, l) => State::Data(l),
                    };
                }
                _ => {
                    self.state = self.step(bytes[i])?;
                    i += 1;
                }
            }
        }
        Ok(i)
    }

    /// One byte of chunked framing (sizes, line ends, trailers).
    fn step(&self, b: u8) -> Result<State, FramingError> {
        let bad = Err(FramingError::BadChunk);
        Ok(match (self.state, b) {
            (State::Size { size, digits }, _) if b.is_ascii_hexdigit() => {
                if digits >= 15 {
                    return bad;
                }
                let d = (b as char).to_digit(16).unwrap_or(0) as u64;
                State::Size {
                    size: size * 16 + d,
                    digits: digits + 1,
                }
            }
            (State::Size { digits: 0, .. }, _) => return bad,
            (State::Size { size, .. }, b';' | b' ' | b'\t') => State::Extension { size },
            (State::Size { size, .. } | State::Extension { size }, b'\r') => State::SizeLf { size },
            (State::Extension { .. }, b'\n') => return bad,
            (State::Extension { size }, _) => State::Extension { size },
            (State::SizeLf { size: 0 }, b'\n') => State::TrailerStart,
            (State::SizeLf { size }, b'\n') => State::Data(size),
            (State::DataCr, b'\r') => State::DataLf,
            (State::DataLf, b'\n') => State::Size { size: 0, digits: 0 },
            (State::TrailerStart, b'\r') => State::EndLf,
            (State::TrailerStart | State::TrailerLine, b'\n') => return bad,
            (State::TrailerLine, b'\r') => State::TrailerLf,
            (State::TrailerStart | State::TrailerLine, _) => State::TrailerLine,
            (State::TrailerLf, b'\n') => State::TrailerStart,
            (State::EndLf, b'\n') => State::Done,
            _ => return bad,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(list: &[(&str, &str)]) -> FramingHeaders {
        let mut h = FramingHeaders::default();
        for (n, v) in list {
            h.note(n, v.as_bytes());
        }
        h
    }

    #[test]
    fn request_framing_refuses_what_could_be_smuggled() {
        let req = |l: &[(&str, &str)]| headers(l).request();
        assert_eq!(req(&[]), Ok(Framing::Empty));
        assert_eq!(req(&[("Content-Length", "12")]), Ok(Framing::Length(12)));
        assert_eq!(
            req(&[("content-length", "12"), ("Content-Length", " 12 ")]),
            Ok(Framing::Length(12))
        );
        assert_eq!(
            req(&[("content-length", "12"), ("content-length", "13")]),
            Err(FramingError::BadLength)
        );
        assert_eq!(
            req(&[("content-length", "-1")]),
            Err(FramingError::BadLength)
        );
        assert_eq!(
            req(&[("content-length", "+1")]),
            Err(FramingError::BadLength)
        );
        assert_eq!(
            req(&[("Transfer-Encoding", "chunked")]),
            Ok(Framing::Chunked)
        );
        assert_eq!(
            req(&[("transfer-encoding", "chunked"), ("content-length", "3")]),
            Err(FramingError::LengthAndEncoding)
        );
        assert_eq!(
            req(&[("transfer-encoding", "gzip, chunked")]),
            Err(FramingError::UnsupportedCoding)
        );
        assert_eq!(
            req(&[("transfer-encoding", "chunked, chunked")]),
            Err(FramingError::UnsupportedCoding)
        );
    }

    #[test]
    fn an_empty_transfer_encoding_is_never_ignored() {
        let req = |l: &[(&str, &str)]| headers(l).request();
        for te in ["", " ", ",", " , "] {
            assert_eq!(
                req(&[("transfer-encoding", te), ("content-length", "3")]),
                Err(FramingError::LengthAndEncoding),
                "{te:?} beside a length"
            );
            assert_eq!(
                req(&[("transfer-encoding", te)]),
                Err(FramingError::EmptyCoding),
                "{te:?}"
            );
        }
        for te in [",chunked", "chunked,", "chunked, ,", " ,chunked"] {
            assert_eq!(
                req(&[("transfer-encoding", te)]),
                Err(FramingError::EmptyCoding),
                "{te:?}"
            );
        }
        let resp = |te: &str| headers(&[("transfer-encoding", te)]).response(false, 200);
        assert_eq!(resp(",chunked"), Ok(Framing::UntilClose));
        assert_eq!(resp(""), Ok(Framing::UntilClose));
        let with_length = headers(&[("transfer-encoding", ""), ("content-length", "5")]);
        assert_eq!(with_length.response(false, 200), Ok(Framing::UntilClose));
    }

    #[test]
    fn response_framing_follows_method_and_status() {
        let h = headers(&[("content-length", "5")]);
        assert_eq!(h.response(true, 200), Ok(Framing::Empty));
        assert_eq!(h.response(false, 204), Ok(Framing::Empty));
        assert_eq!(h.response(false, 304), Ok(Framing::Empty));
        assert_eq!(h.response(false, 200), Ok(Framing::Length(5)));
        assert_eq!(headers(&[]).response(false, 200), Ok(Framing::UntilClose));
        let gz = headers(&[("transfer-encoding", "gzip")]);
        assert_eq!(gz.response(false, 200), Ok(Framing::UntilClose));
        let ch = headers(&[("transfer-encoding", "chunked"), ("content-length", "5")]);
        assert_eq!(ch.response(false, 200), Ok(Framing::Chunked));
    }

    /// Feeds `body` in pieces of `step` bytes and returns how many belonged to it.
    fn consumed(framing: Framing, body: &[u8], step: usize) -> Result<(usize, bool), FramingError> {
        let mut c = BodyCursor::new(framing);
        let mut total = 0;
        for piece in body.chunks(step) {
            let n = c.advance(piece)?;
            total += n;
            if n < piece.len() {
                break;
            }
        }
        Ok((total, c.is_done()))
    }

    #[test]
    fn a_chunked_body_ends_exactly_where_it_should_however_it_is_split() {
        let body =
            b"5;name=v\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nx-trailer: 1\r\n\r\n";
        let next = b"GET / HTTP/1.1\r\n\r\n";
        let wire = [&body[..], &next[..]].concat();
        for step in [1, 2, 3, 7, 64, wire.len()] {
            assert_eq!(
                consumed(Framing::Chunked, &wire, step),
                Ok((body.len(), true)),
                "step {step}"
            );
        }
        assert_eq!(consumed(Framing::Chunked, b"0\r\n\r\nX", 1), Ok((5, true)));
        assert_eq!(consumed(Framing::Chunked, b"3\r\nab", 64), Ok((5, false)));
    }

    /// Many chunked bodies (random chunk sizes, extensions, trailers), each followed by
    /// the next request and cut into random pieces: the cursor must stop exactly at the
    /// end of every one. A small xorshift keeps it reproducible without a dependency.
    #[test]
    fn random_chunked_bodies_end_exactly_where_they_should() {
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n.max(1)
        };
        for case in 0..500 {
            let mut body = Vec::new();
            for _ in 0..next(6) {
                let len = 1 + next(300) as usize;
                body.extend_from_slice(format!("{len:x}").as_bytes());
                if next(4) == 0 {
                    body.extend_from_slice(b";ext=1");
                }
                body.extend_from_slice(b"\r\n");
                body.extend((0..len).map(|i| b"0123456789\r\n;"[(i + case) % 13]));
                body.extend_from_slice(b"\r\n");
            }
            body.extend_from_slice(b"0\r\n");
            if next(3) == 0 {
                body.extend_from_slice(b"x-sum: 1\r\n");
            }
            body.extend_from_slice(b"\r\n");
            let wire = [&body[..], b"POST / HTTP/1.1\r\n"].concat();
            let mut cursor = BodyCursor::new(Framing::Chunked);
            let (mut at, mut taken) = (0, 0);
            while at < wire.len() && !cursor.is_done() {
                let piece = &wire[at..(at + 1 + next(40) as usize).min(wire.len())];
                taken += cursor.advance(piece).unwrap();
                at += piece.len();
            }
            assert!(cursor.is_done(), "case {case}: never ended");
            assert_eq!(taken, body.len(), "case {case}");
        }
    }

    #[test]
    fn malformed_chunks_are_errors_not_guesses() {
        for bad in [
            &b"x\r\n"[..],
            b"\r\n",
            b"5\r\nhelloXX",
            b"0\r\n\n",
            b"1234567890abcdef0\r\n",
        ] {
            assert_eq!(
                consumed(Framing::Chunked, bad, 64),
                Err(FramingError::BadChunk),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn a_length_body_stops_at_its_length() {
        assert_eq!(consumed(Framing::Length(4), b"abcdefg", 3), Ok((4, true)));
        assert_eq!(consumed(Framing::Length(10), b"abc", 3), Ok((3, false)));
        assert_eq!(consumed(Framing::Empty, b"abc", 3), Ok((0, true)));
        assert_eq!(consumed(Framing::UntilClose, b"abc", 2), Ok((3, false)));
    }
}
