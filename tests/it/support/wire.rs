//! Raw HTTP/1.1 on both sides of a proxy, for tests that pin down framing byte by byte.
//! Client libraries normalise exactly what those tests must see (framing, duplicate and
//! hop-by-hop headers, connection reuse, interim responses), so this speaks the wire by
//! hand: a buffered socket that writes exact bytes and parses heads and bodies in every
//! framing, and a scripted upstream that records each request it received and on which
//! connection. Kept apart from the test cases so those read in one sitting.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Every read and write on either side gives up after this long.
const WAIT: Duration = Duration::from_secs(5);

// ---------------------------------------------------------------------------------------
// The wire: a buffered socket that reads heads, bodies in each framing, and EOF.
// ---------------------------------------------------------------------------------------

/// A parsed message head (request or response), names lowercased, in wire order.
#[derive(Debug, Clone)]
pub struct Head {
    start: String,
    headers: Vec<(String, String)>,
}

impl Head {
    fn parse(raw: &[u8]) -> Head {
        let text = String::from_utf8_lossy(raw);
        let mut lines = text.split("\r\n");
        let start = lines.next().unwrap_or_default().to_string();
        let headers = lines
            .filter(|l| !l.is_empty())
            .map(|l| match l.split_once(':') {
                Some((n, v)) => (n.trim().to_ascii_lowercase(), v.trim().to_string()),
                None => (l.to_ascii_lowercase(), String::new()),
            })
            .collect();
        Head { start, headers }
    }

    pub fn all(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.all(name).first().copied()
    }

    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    pub fn status(&self) -> u16 {
        self.start
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("not a status line: {:?}", self.start))
    }

    /// Request line parts: method and target.
    pub fn method(&self) -> &str {
        self.start.split(' ').next().unwrap_or_default()
    }

    pub fn target(&self) -> &str {
        self.start.split(' ').nth(1).unwrap_or_default()
    }

    fn content_length(&self) -> Option<usize> {
        self.get("content-length").and_then(|v| v.parse().ok())
    }

    pub fn chunked(&self) -> bool {
        self.all("transfer-encoding")
            .iter()
            .any(|v| v.to_ascii_lowercase().contains("chunked"))
    }

    pub fn token_in(&self, name: &str, token: &str) -> bool {
        self.all(name)
            .iter()
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    }
}

/// How a response body was delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    Empty,
    Length,
    Chunked,
    UntilClose,
}

#[derive(Debug)]
pub struct Resp {
    pub head: Head,
    pub body: Vec<u8>,
    pub framing: Framing,
}

impl Resp {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "nothing within 5 s")
}

fn eof() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "connection closed mid-message",
    )
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// One end of a TCP connection with what was read and not consumed yet.
pub struct Peer {
    pub stream: TcpStream,
    pub buf: Vec<u8>,
}

/// A TCP connection to `to` from the loopback address `from` (127.0.0.2, .3, ...), so that a
/// server counting per address can tell clients apart.
pub async fn connect_from(from: &str, to: SocketAddr) -> TcpStream {
    let ip: std::net::IpAddr = from.parse().unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::new(ip, 0)).unwrap();
    tokio::time::timeout(Duration::from_secs(10), socket.connect(to))
        .await
        .expect("connect within 10 s")
        .expect("connect")
}

impl Peer {
    /// A peer on [`connect_from`]'s connection.
    pub async fn connect_from(from: &str, to: SocketAddr) -> Peer {
        Peer {
            stream: connect_from(from, to).await,
            buf: Vec::new(),
        }
    }

    pub async fn connect(addr: SocketAddr) -> Peer {
        let stream = tokio::time::timeout(WAIT, TcpStream::connect(addr))
            .await
            .expect("connect within 5 s")
            .expect("connect");
        Peer {
            stream,
            buf: Vec::new(),
        }
    }

    pub async fn send(&mut self, bytes: impl AsRef<[u8]>) {
        self.try_send(bytes.as_ref()).await.expect("write");
    }

    pub async fn try_send(&mut self, bytes: &[u8]) -> io::Result<()> {
        tokio::time::timeout(WAIT, self.stream.write_all(bytes))
            .await
            .map_err(|_| timed_out())?
    }

    /// Read what is there; Ok(0) at EOF.
    async fn fill(&mut self) -> io::Result<usize> {
        let mut chunk = [0u8; 16 * 1024];
        let n = tokio::time::timeout(WAIT, self.stream.read(&mut chunk))
            .await
            .map_err(|_| timed_out())??;
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n)
    }

    /// The next head; None when the peer closed cleanly between messages.
    pub async fn head(&mut self) -> io::Result<Option<Head>> {
        loop {
            if let Some(end) = find(&self.buf, b"\r\n\r\n") {
                let raw: Vec<u8> = self.buf.drain(..end + 4).collect();
                return Ok(Some(Head::parse(&raw[..end])));
            }
            if self.fill().await? == 0 {
                return if self.buf.is_empty() {
                    Ok(None)
                } else {
                    Err(eof())
                };
            }
        }
    }

    async fn take(&mut self, n: usize) -> io::Result<Vec<u8>> {
        while self.buf.len() < n {
            if self.fill().await? == 0 {
                return Err(eof());
            }
        }
        Ok(self.buf.drain(..n).collect())
    }

    async fn line(&mut self) -> io::Result<String> {
        loop {
            if let Some(end) = find(&self.buf, b"\r\n") {
                let raw: Vec<u8> = self.buf.drain(..end + 2).collect();
                return Ok(String::from_utf8_lossy(&raw[..end]).into_owned());
            }
            if self.fill().await? == 0 {
                return Err(eof());
            }
        }
    }

    /// A chunked body, decoded (extensions and trailers dropped).
    async fn chunked(&mut self) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        loop {
            let line = self.line().await?;
            let size = line.split(';').next().unwrap_or_default().trim();
            let size = usize::from_str_radix(size, 16).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidData, format!("chunk size {line:?}"))
            })?;
            if size == 0 {
                while !self.line().await?.is_empty() {}
                return Ok(out);
            }
            out.extend(self.take(size).await?);
            if self.take(2).await? != b"\r\n" {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "chunk not CRLF"));
            }
        }
    }

    async fn read_to_eof(&mut self) -> io::Result<Vec<u8>> {
        while self.fill().await? > 0 {}
        Ok(std::mem::take(&mut self.buf))
    }

    /// A request's body by its framing (none when it has neither length nor chunking).
    async fn request_body(&mut self, head: &Head) -> io::Result<Vec<u8>> {
        if head.chunked() {
            self.chunked().await
        } else {
            self.take(head.content_length().unwrap_or(0)).await
        }
    }

    /// The next final response (1xx skipped) with its body; `to_head` for a HEAD request.
    pub async fn response(&mut self, to_head: bool) -> Resp {
        loop {
            let head = self
                .head()
                .await
                .expect("a response head within 5 s")
                .expect("a response, not a closed connection");
            let status = head.status();
            if (100..200).contains(&status) {
                continue;
            }
            let (framing, body) = if to_head || status == 204 || status == 304 {
                (Framing::Empty, Ok(Vec::new()))
            } else if head.chunked() {
                (Framing::Chunked, self.chunked().await)
            } else if let Some(n) = head.content_length() {
                (Framing::Length, self.take(n).await)
            } else {
                (Framing::UntilClose, self.read_to_eof().await)
            };
            let body = body.unwrap_or_else(|e| panic!("body of {:?}: {e}", head.start));
            return Resp {
                head,
                body,
                framing,
            };
        }
    }

    /// Panics unless the peer closes (EOF or reset) within 5 s without sending more.
    pub async fn expect_closed(&mut self) {
        let before = self.buf.len();
        match self.fill().await {
            Ok(0) if before == 0 => {}
            Err(e) if e.kind() != io::ErrorKind::TimedOut && before == 0 => {}
            other => panic!(
                "expected the connection to close; got {other:?} with {:?} unread",
                String::from_utf8_lossy(&self.buf)
            ),
        }
    }

    /// Panics if anything arrives within `quiet`.
    pub async fn expect_nothing_for(&mut self, quiet: Duration) {
        let mut chunk = [0u8; 1024];
        if let Ok(Ok(n)) = tokio::time::timeout(quiet, self.stream.read(&mut chunk)).await {
            assert_eq!(
                n,
                0,
                "unexpected bytes: {:?}",
                String::from_utf8_lossy(&chunk[..n])
            );
        }
        assert!(self.buf.is_empty(), "unexpected bytes: {:?}", self.buf);
    }
}

// ---------------------------------------------------------------------------------------
// A scripted upstream that records what it got.
// ---------------------------------------------------------------------------------------

/// One request as the upstream received it.
#[derive(Debug, Clone)]
pub struct Got {
    /// Which accepted connection it came on (0, 1, ...).
    pub conn: usize,
    pub head: Head,
    /// The body, decoded from whatever framing it came in.
    pub body: Vec<u8>,
}

/// What the upstream writes back, and whether it closes the connection afterwards.
pub struct Reply {
    pub bytes: Vec<u8>,
    pub close: bool,
}

pub fn raw(head: &str, body: &[u8]) -> Reply {
    let mut bytes = head.as_bytes().to_vec();
    bytes.extend_from_slice(body);
    Reply {
        bytes,
        close: false,
    }
}

pub fn ok(body: impl AsRef<[u8]>) -> Reply {
    let body = body.as_ref();
    raw(
        &format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n",
            body.len()
        ),
        body,
    )
}

impl Reply {
    pub fn then_close(mut self) -> Reply {
        self.close = true;
        self
    }
}

/// `METHOD target`: tells the client which request a response belongs to.
pub fn echo(g: &Got) -> Reply {
    ok(format!("{} {}", g.head.method(), g.head.target()))
}

type Script = Arc<dyn Fn(&Got) -> Reply + Send + Sync>;

pub struct Upstream {
    pub addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    got: Arc<Mutex<Vec<Got>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Upstream {
    pub async fn start(script: impl Fn(&Got) -> Reply + Send + Sync + 'static) -> Upstream {
        let script: Script = Arc::new(script);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let got = Arc::new(Mutex::new(Vec::new()));
        let (a, g) = (accepted.clone(), got.clone());
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let conn = a.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(serve_upstream(stream, conn, script.clone(), g.clone()));
            }
        });
        Upstream {
            addr,
            accepted,
            got,
            task,
        }
    }

    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    pub fn got(&self) -> Vec<Got> {
        self.got.lock().unwrap().clone()
    }

    pub fn targets(&self) -> Vec<String> {
        self.got()
            .iter()
            .map(|g| g.head.target().to_string())
            .collect()
    }
}

async fn serve_upstream(stream: TcpStream, conn: usize, script: Script, got: Arc<Mutex<Vec<Got>>>) {
    let mut peer = Peer {
        stream,
        buf: Vec::new(),
    };
    loop {
        let Ok(Some(head)) = peer.head().await else {
            return;
        };
        // A server that wants the body says so, as a real one would.
        let expects_body = head.chunked() || head.content_length().unwrap_or(0) > 0;
        if head.token_in("expect", "100-continue") && expects_body && peer.buf.is_empty() {
            let _ = peer.try_send(b"HTTP/1.1 100 Continue\r\n\r\n").await;
        }
        let Ok(body) = peer.request_body(&head).await else {
            return;
        };
        let g = Got { conn, head, body };
        let reply = script(&g);
        got.lock().unwrap().push(g);
        if peer.try_send(&reply.bytes).await.is_err() {
            return;
        }
        if reply.close {
            let _ = peer.stream.shutdown().await;
            return;
        }
    }
}

// ---------------------------------------------------------------------------------------
// Builders for requests and bodies.
// ---------------------------------------------------------------------------------------

pub fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nhost: gate.test\r\n\r\n")
}

/// Deterministic, non-repeating-looking bytes, so a lost or moved byte shows.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u64 * 31 + u64::from(seed) * 7 + (i as u64 >> 8)) as u8)
        .collect()
}

fn chunk(data: &[u8]) -> Vec<u8> {
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    out
}

/// `data` cut into chunks of these sizes (the rest in a last one), then the last-chunk.
pub fn chunked(data: &[u8], sizes: &[usize]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = data;
    for &s in sizes {
        let (a, b) = rest.split_at(s.min(rest.len()));
        if !a.is_empty() {
            out.extend(chunk(a));
        }
        rest = b;
    }
    if !rest.is_empty() {
        out.extend(chunk(rest));
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}
