//! Reading an HTTP body with a size cap and a time cap. Every body `recover` reads comes
//! from something that may be broken or hostile (a `/metrics` page, a Prometheus answer,
//! a webhook, an admin call): read whole without limits, an endless body takes all the
//! memory there is, and a slow one holds its reader for ever. The error names the cap
//! that was hit, so "body over 16 MiB" is not mistaken for a network fault, nor a slow
//! target for a malformed page.

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use std::time::Duration;

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

/// The most a body may hold and how long it may take to arrive whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyCaps {
    pub max_bytes: usize,
    pub within: Duration,
}

impl BodyCaps {
    pub const fn new(max_bytes: usize, within: Duration) -> Self {
        BodyCaps { max_bytes, within }
    }

    /// A `/metrics` page: large exporters stay well under 16 MiB.
    pub const fn metrics_page(within: Duration) -> Self {
        BodyCaps::new(16 * MIB, within)
    }

    /// A small JSON request or answer (admin calls, webhooks, replies of admin APIs).
    pub const fn small_json(max_bytes: usize) -> Self {
        BodyCaps::new(max_bytes, Duration::from_secs(10))
    }
}

/// Why a body was not read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("body over {}", bytes_text(*.max))]
    TooLarge { max: usize },
    #[error("no complete body within {}", crate::util::duration::format(*.within))]
    TooSlow { within: Duration },
    #[error("reading the body: {0}")]
    Read(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl BodyError {
    /// True when a cap refused the body (not the connection breaking).
    pub fn is_cap(&self) -> bool {
        !matches!(self, BodyError::Read(_))
    }

    /// The answer a server gives a request whose body it refused for this: 413 over the
    /// size cap, 408 past the time cap, 400 for a body that broke off.
    pub fn status(&self) -> http::StatusCode {
        match self {
            BodyError::TooLarge { .. } => http::StatusCode::PAYLOAD_TOO_LARGE,
            BodyError::TooSlow { .. } => http::StatusCode::REQUEST_TIMEOUT,
            BodyError::Read(_) => http::StatusCode::BAD_REQUEST,
        }
    }
}

/// `16 MiB`, `64 KiB`, or `1000 bytes`.
pub fn bytes_text(n: usize) -> String {
    if n >= MIB && n.is_multiple_of(MIB) {
        format!("{} MiB", n / MIB)
    } else if n >= KIB && n.is_multiple_of(KIB) {
        format!("{} KiB", n / KIB)
    } else {
        format!("{n} bytes")
    }
}

/// Read a reqwest response's body within `caps`. A timeout of the client itself (its
/// total request timeout running out mid-body) is reported as [`BodyError::TooSlow`],
/// not as the "error decoding response body" reqwest would say.
pub async fn read_response(
    mut resp: reqwest::Response,
    caps: BodyCaps,
) -> Result<Bytes, BodyError> {
    if resp
        .content_length()
        .is_some_and(|n| n > caps.max_bytes as u64)
    {
        return Err(BodyError::TooLarge {
            max: caps.max_bytes,
        });
    }
    let collect = async {
        let mut out = Chunks::default();
        loop {
            match resp.chunk().await {
                Ok(Some(chunk)) => out.push(chunk, caps.max_bytes)?,
                Ok(None) => return Ok(out.join()),
                Err(e) if e.is_timeout() => {
                    return Err(BodyError::TooSlow {
                        within: caps.within,
                    })
                }
                Err(e) => return Err(BodyError::Read(Box::new(e))),
            }
        }
    };
    within(caps.within, collect).await
}

/// [`read_response`] as text (lossy UTF-8: a scrape parser names bad lines itself).
pub async fn read_response_text(
    resp: reqwest::Response,
    caps: BodyCaps,
) -> Result<String, BodyError> {
    let bytes = read_response(resp, caps).await?;
    // Vec::from takes the buffer over without a copy when it is not shared.
    Ok(match String::from_utf8(Vec::from(bytes)) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// Read any HTTP body (a request body in a server handler, a kube response) within `caps`.
pub async fn read_body<B>(body: B, caps: BodyCaps) -> Result<Bytes, BodyError>
where
    B: hyper::body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    if body
        .size_hint()
        .exact()
        .is_some_and(|n| n > caps.max_bytes as u64)
    {
        return Err(BodyError::TooLarge {
            max: caps.max_bytes,
        });
    }
    let exact = body.size_hint().exact();
    let collect = async {
        let mut body = std::pin::pin!(body);
        let mut out = Chunks::sized(exact);
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| BodyError::Read(e.into()))?;
            if let Ok(data) = frame.into_data() {
                out.push(data, caps.max_bytes)?;
            }
        }
        Ok(out.join())
    };
    within(caps.within, collect).await
}

/// The chunks read so far, kept as they came: one growing buffer would hold its old and
/// new copy at once each time it doubles, half again the cap at its peak. When the size
/// is known (a Content-Length within the cap) they go straight into one buffer of that
/// size instead, so the body is never held twice (chunks and their join).
#[derive(Default)]
struct Chunks {
    parts: Vec<Bytes>,
    len: usize,
    whole: Option<BytesMut>,
}

impl Chunks {
    /// Room for `exact` bytes when known (never more than what arrives: a Content-Length
    /// over the cap was refused before).
    fn sized(exact: Option<u64>) -> Self {
        Chunks {
            whole: exact
                .and_then(|n| usize::try_from(n).ok())
                .map(BytesMut::with_capacity),
            ..Chunks::default()
        }
    }

    fn push(&mut self, chunk: Bytes, max: usize) -> Result<(), BodyError> {
        if self.len + chunk.len() > max {
            return Err(BodyError::TooLarge { max });
        }
        self.len += chunk.len();
        match &mut self.whole {
            Some(w) => w.extend_from_slice(&chunk),
            None => self.parts.push(chunk),
        }
        Ok(())
    }

    fn join(mut self) -> Bytes {
        if let Some(w) = self.whole {
            return w.freeze();
        }
        if self.parts.len() == 1 {
            return self.parts.pop().unwrap_or_default();
        }
        let mut out = BytesMut::with_capacity(self.len);
        for p in self.parts {
            out.extend_from_slice(&p);
        }
        out.freeze()
    }
}

async fn within<T>(
    limit: Duration,
    read: impl std::future::Future<Output = Result<T, BodyError>>,
) -> Result<T, BodyError> {
    tokio::time::timeout(limit, read)
        .await
        .unwrap_or(Err(BodyError::TooSlow { within: limit }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{Full, StreamBody};

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(bytes_text(16 * MIB), "16 MiB");
        assert_eq!(bytes_text(64 * KIB), "64 KiB");
        assert_eq!(bytes_text(1000), "1000 bytes");
        let e = BodyError::TooLarge { max: 16 * MIB };
        assert_eq!(e.to_string(), "body over 16 MiB");
        let e = BodyError::TooSlow {
            within: Duration::from_secs(5),
        };
        assert_eq!(e.to_string(), "no complete body within 5s");
    }

    #[tokio::test]
    async fn a_body_within_the_caps_is_read_whole() {
        let caps = BodyCaps::new(10, Duration::from_secs(5));
        let b = read_body(Full::new(Bytes::from_static(b"0123456789")), caps)
            .await
            .unwrap();
        assert_eq!(&b[..], b"0123456789");
        let e = read_body(Full::new(Bytes::from_static(b"0123456789a")), caps)
            .await
            .unwrap_err();
        assert!(matches!(e, BodyError::TooLarge { max: 10 }), "{e}");
    }

    #[tokio::test]
    async fn an_endless_body_stops_at_the_size_cap() {
        let endless = futures::stream::repeat_with(|| {
            Ok::<_, std::io::Error>(hyper::body::Frame::data(Bytes::from(vec![b'x'; 4096])))
        });
        let caps = BodyCaps::new(MIB, Duration::from_secs(30));
        let e = read_body(StreamBody::new(endless), caps).await.unwrap_err();
        assert_eq!(e.to_string(), "body over 1 MiB");
    }

    #[tokio::test]
    async fn a_body_that_never_ends_stops_at_the_time_cap() {
        let stalled =
            futures::stream::pending::<Result<hyper::body::Frame<Bytes>, std::io::Error>>();
        let caps = BodyCaps::new(MIB, Duration::from_millis(200));
        let e = read_body(StreamBody::new(stalled), caps).await.unwrap_err();
        assert_eq!(e.to_string(), "no complete body within 200ms");
    }
}
